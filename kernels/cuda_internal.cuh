/* cuda_internal.cuh — what the CUDA backend's files (cuda_*.cu) share and
 * nothing else: one call's bracket (lock, staging of host arguments,
 * launch check, synchronisation), persistent device scratch, exact dtype
 * widening and the CPU's exp on the device.
 *
 * Every kb_* call on cuda is one bracket:
 *     cu_begin();
 *     const float *dx = (const float *)cu_in(x, bytes);      host → staged copy; device/managed → as is
 *     float *dy = (float *)cu_out(y, bytes, copy_in);        host → staged, copied back by cu_end
 *     kernel<<<...>>>(dy, dx, ...);
 *     cu_end("matmul");                                      check, copy back, (synchronise), unlock
 * Every call runs on one stream (cu_stream). Outside an async region
 * (backend.h kb_async_begin) cu_end synchronises, so the caller may read
 * the result on the host as soon as the call returns. Inside one it does
 * not: the call is queued behind the earlier ones and the host goes on, so
 * a forward's kernels follow one another on the GPU without a round trip
 * each; only a call with a host result (logits into malloc'd memory) waits,
 * and kb_async_end / kb_wait wait for everything.
 * Host arguments (index arrays, norm vectors) go through a staging ring:
 * pinned host memory and a device buffer at the same offsets, copied with
 * cudaMemcpyAsync in stream order. The ring is reset only where the host
 * has waited for the stream (a pinned byte may be rewritten only after the
 * copy that reads it has run); when it fills up inside a region the call
 * waits, resets it and, if one call needs more than it holds, regrows it.
 * Norm vectors and biases are kb_alloc'd at load (engine/model.c), so
 * they are read in place.
 * CUDA graphs (cuda_mem.cu): inside a region the stream is captured from
 * the first call on and launched as one graph before every wait, the
 * cached executable graph of the same node count updated in place
 * (cudaGraphExecUpdate). The ring works unchanged under capture: a captured
 * copy reads its pinned bytes when the graph runs, and the graph runs
 * before the wait after which they are reused. What a capture may not do
 * (allocate, free, synchronise, copy to pageable memory) ends it first.
 * Captured that way, the host still issues every call each step. A
 * target forward does not: engine/forward.c keeps its index arrays
 * (tokens, positions, KV slots, page lists, n_ctx) in a step buffer
 * (pinned host memory and a device copy at a fixed address, pushed once a
 * step), every kernel of the forward reads them there, attention's score
 * stride is a bound that holds across steps, and the forward is recorded
 * whole under a key (kb_graph_begin: rows, rows wanted, buffers) and then
 * replayed as it stands, as vLLM and SGLang replay theirs per batch size.
 * A recording is spoiled (run as an ordinary capture, not kept) by any
 * staged host argument, whose pinned bytes a replay would not rewrite, and
 * dropped when device memory is freed.
 * A CUDA error inside a compute call has no error return to go to
 * (backend.h's calls are void): it is printed and the process aborts.
 * One mutex serialises the calls (the staging ring and scratch are shared);
 * the async region is process-wide (one engine thread issues the calls). */
#ifndef SPECBED_CUDA_INTERNAL_CUH
#define SPECBED_CUDA_INTERNAL_CUH
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "device_internal.h"

void cu_check(cudaError_t e, const char *what);   /* aborts with a message unless cudaSuccess */
cudaStream_t cu_stream(void);                     /* the one stream every call runs on */
void cu_begin(void);
const void *cu_in(const void *p, size_t bytes);
void *cu_out(void *p, size_t bytes, int copy_in);
void cu_end(const char *what);
/* Device buffer `slot` (CU_SCRATCH_*) of at least bytes, kept between calls
 * (grown, never shrunk). Only inside a bracket. ATT: attention's per-chunk
 * partials (cuda_ops.cu), sized from the call's context bound; XSPLIT:
 * the tensor-core matmul's activations as three bf16 (cuda_matmul.cu). */
enum { CU_SCRATCH_ATT = 0, CU_SCRATCH_XCONV = 1, CU_SCRATCH_ROPE = 2, CU_SCRATCH_XSPLIT = 3, CU_SCRATCH_N = 4 };
void *cu_scratch(int slot, size_t bytes);
/* Changes whenever staged bytes may be overwritten (the ring reset after a
 * wait, or regrown): a staged device copy stays readable by later calls
 * while this is unchanged (attention's page lists, reused by every layer
 * of a forward). */
unsigned long cu_ring_epoch(void);
/* 1 when the device can read p directly (device or managed memory). */
int cu_on_device(const void *p);

/* The bracket's lock alone (no staging, no capture): a call that only
 * records work for later (cuda_matmul's held matmuls). */
void cu_lock(void);
void cu_unlock(void);
int cu_async_depth(void);   /* > 0 inside kb_async_begin regions */
/* Calls held back to be launched with the next (cuda_matmul.cu: a layer's
 * q/k/v, gate/up as one; cuda_ops.cu: a residual add with the next norm,
 * a head norm with the next RoPE): at most one kind is held at a time.
 * cu_flush_held launches whatever is held, with the lock held; cu_begin
 * and every wait or end of a capture call it first.
 * The stream layer (cuda_mem.cu) is below the files that hold calls (they
 * call cu_begin), so it does not name their flushes, which would make the
 * two one circle (tests/cycles.sh): cuda_backend.cu registers each with
 * cu_on_flush at start-up, before any call can be held, and cu_flush_held
 * calls them in that order. Registering one twice keeps the first. */
void cu_on_flush(void (*flush)(void));
void cu_flush_held(void);
void cuda_matmul_flush(void);   /* cuda_matmul.cu: the held matmuls */
/* cuda_matmul.cu: a held gate/up pair and the SwiGLU of its outputs as one
 * launch (cuda_swiglu asks before anything else); 1 when taken */
int cuda_matmul_take_swiglu(float *out, const float *gate, const float *up, int m, int n);
void cuda_ops_flush(void);      /* cuda_ops.cu: the held add, head norm or K scatter */

/* The stream layer's side of the backend's table (device_internal.h
 * kb_cuda_ops, filled in cuda_backend.cu), in cuda_mem.cu. cu_start checks
 * device 0 and makes the stream (the start-up of cuda_backend_init): 0 ok,
 * else -1 and a message. */
int   cu_start(char *err, size_t errlen);
void *cu_alloc(size_t bytes);
int   cu_free_if_ours(void *p);
void  cu_copy(void *dst, const void *src, size_t bytes);
int   cu_weight_upload(kb_weight *w, const void *owner, char *err, size_t errlen);
void  cu_weight_release(kb_weight *w);
void  cu_weight_release_owner(const void *owner);
int   cu_set_graphs(int on);
int   cu_graphs(const char **why);
void  cu_async_begin(void);
void  cu_async_end(void);
void  cu_wait(void);
void  cu_counts(kb_device_counts *c);
int   cu_set_pdl(int on);
int   cu_pdl_state(const char **why);
/* a step the host does not rebuild (backend.h): step buffers (pinned host
 * memory and a device copy), recorded forwards */
void *cu_stepbuf_create(size_t bytes);
void  cu_stepbuf_free(void *b);
void *cu_stepbuf_host(void *b);
void *cu_stepbuf_dev(void *b);
void  cu_stepbuf_push(void *b, size_t bytes);
int   cu_graph_begin(const void *key, size_t key_bytes);
void  cu_graph_end(void);
/* Changes at every outermost async region, recording and step-buffer
 * push: what a call keeps about device indices (RoPE's table of device
 * positions) is kept only while this is unchanged, so a recording never
 * leans on work queued before it. */
unsigned long cu_region(void);

/* compute entry points (cuda_matmul.cu, cuda_ops.cu, cuda_moe.cu) */
void cuda_matmul(float *y, const float *x, const kb_weight *w, int m);
int  cuda_set_matmul(const char *mode);
const char *cuda_matmul_mode(void);
int  cuda_matmul_tensor(kb_dtype dt);   /* 1 when a dt weight goes to the tensor cores (mode "tensor", bf16) */
void cuda_rmsnorm(float *y, const float *x, const float *g, int m, int n, float eps);
void cuda_rope(float *x, const int *pos, int m, int n_heads, int head_dim, float theta);
void cuda_swiglu(float *out, const float *gate, const float *up, int m, int n);
void cuda_add(float *x, const float *y, int m, int n);
void cuda_attention(float *out, const float *q, const kb_kv_view *kv, int n_q, const int *n_ctx, int n_heads,
                    float scale);
void cuda_attention_spans(float *out, const float *q, const kb_kv_view *views, const int *span_rows, int n_spans,
                          const int *n_ctx, int n_heads, float scale);
void cuda_weight_rows(float *dst, const kb_weight *w, const int *rows, int n);
void cuda_scatter_rows(float *const dst[], const float *src, int n, int row_floats);
void cuda_store_rows(float *dst0, const float *src0, float *dst1, const float *src1, const int *slots, int n,
                     int row_floats);
void cuda_attention_idx(float *out, const float *q, const kb_kv_view *pool, const int *page_cat, int n_cat,
                        const int *page_off, const int *n_ctx, int n_q, int max_ctx, int n_heads, float scale);
/* mixture of experts (cuda_moe.cu) */
void cuda_gather_rows(float *dst, const float *src, const int *idx, int n, int row_floats);
void cuda_matmul_grouped(int n_sets, float *const ys[], const kb_weight *const ws[], const float *x,
                         const int *start, int n_groups);
void cuda_combine_rows(float *y, const float *src, const int *slots, const float *w, int n, int k, int row_floats);
void cuda_set_experts_on_host(int on);
int  cuda_experts_on_host(void);
int  cuda_weight_upload_expert(kb_weight *w, const void *owner, char *err, size_t errlen);
void cuda_expert_release(kb_weight *w);
void cuda_expert_release_owner(const void *owner);

/* A kernel launch, `CU_LAUNCH(kernel, grid, block)(args...)`; a template
 * kernel goes in parentheses. One spelling for every launch, so that
 * tests/cuda_emu (the CUDA programming model emulated on the CPU, to run
 * this backend where no GPU is) can stand in for the chevrons. */
/* Programmatic dependent launch (Hopper, sm_90): a kernel launched with it
 * may be scheduled while the kernel before it is still running, and waits
 * in cu_pdl_wait() until that one has finished and its writes are
 * visible; the launch latency and block start-up of ~20 small kernels a
 * layer overlap the tail of the one before instead of adding to it. EVERY
 * kernel of this backend calls cu_pdl_wait() before it reads or writes
 * global memory (a kernel that did not would race with its predecessor),
 * then cu_pdl_launch() to let its own successor be scheduled. On when the
 * start-up probe passes (cuda_mem.cu) unless SPECBED_CUDA_PDL=0. */
int cu_pdl(void);
#ifndef CU_LAUNCH
template <class... P> struct cu_launcher {
    void (*k)(P...);
    dim3 g, b;
    template <class... A> void operator()(A... a) const {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = g;
        cfg.blockDim = b;
        cfg.dynamicSmemBytes = 0;
        cfg.stream = cu_stream();
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = cu_pdl() ? 1 : 0;
        cu_check(cudaLaunchKernelEx(&cfg, k, (P)a...), "launching a kernel");
    }
};
template <class... P> static inline cu_launcher<P...> cu_launch(void (*k)(P...), dim3 g, dim3 b) {
    return cu_launcher<P...>{k, g, b};
}
#define CU_LAUNCH(kernel, grid, block) cu_launch(kernel, dim3(grid), dim3(block))
#endif

__device__ __forceinline__ void cu_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void cu_pdl_launch(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/* p's line into L2, with no register and no wait: for bytes no kernel
 * writes (weights), before cu_pdl_wait */
__device__ __forceinline__ void cu_prefetch_l2(const void *p) {
#if defined(__CUDA_ARCH__)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}
/* both, at a kernel's start */
#define CU_PDL_ENTRY() do { cu_pdl_wait(); cu_pdl_launch(); } while (0)

/* ---- on the device -------------------------------------------------------- */

__device__ __forceinline__ float cu_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float cu_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }   /* exact */

/* e^x: the CPU kernels' own definition, so the device gives their bits */
#include "expf_internal.h"

/* The CPU's 8-lane dot product (cpu_attention.c dot_hd_scalar, the AVX2
 * matmul order): lane l sums k ≡ l (mod 8) with fma in increasing k over
 * the whole blocks of 8, then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then
 * the n%8 tail with fma. */
__device__ __forceinline__ float cu_dot8(const float *a, const float *b, int n) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int k = 0;
    for (; k + 8 <= n; k += 8) {
#pragma unroll
        for (int j = 0; j < 8; j++) l[j] = fmaf(a[k + j], b[k + j], l[j]);
    }
    float r = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; k < n; k++) r = fmaf(a[k], b[k], r);
    return r;
}

/* ---- the invariant matmul's order, shared by cuda_matmul.cu (mm_inv) and
 * cuda_moe.cu (the grouped experts), whose bits must be the same ---------- */

#define CU_MM_MAX_WARPS 8
/* Parts of a row's reduction: a function of cols alone (the order). */
static inline int cu_mm_parts(int cols) {
    int nw = 1;
    while (nw < CU_MM_MAX_WARPS && cols / (2 * nw) >= 512) nw *= 2;
    return nw;
}

/* 8 consecutive weight elements [k, k + 8) of a row as floats. vec: one
 * (f32: two) 16-byte load; else element by element, those at or past end
 * left as they were (the caller skips them too). */
template <int DT>
__device__ __forceinline__ void cu_wload8(float *v, const void *w, size_t i, int k, int end, bool vec) {
    if (vec) {
        if (DT == KB_F32) {
            const float4 a = ((const float4 *)((const float *)w + i))[0];
            const float4 b = ((const float4 *)((const float *)w + i))[1];
            v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
        } else {
            const uint4 u = *(const uint4 *)((const uint16_t *)w + i);
            const unsigned q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                if (DT == KB_BF16) {
                    v[2 * e] = __uint_as_float(q[e] << 16);
                    v[2 * e + 1] = __uint_as_float(q[e] & 0xffff0000u);
                } else {
                    v[2 * e] = cu_f16((uint16_t)(q[e] & 0xffffu));
                    v[2 * e + 1] = cu_f16((uint16_t)(q[e] >> 16));
                }
            }
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        if (k + e >= end) break;
        if (DT == KB_BF16) v[e] = cu_bf16(((const uint16_t *)w)[i + e]);
        else if (DT == KB_F16) v[e] = cu_f16(((const uint16_t *)w)[i + e]);
        else v[e] = ((const float *)w)[i + e];
    }
}

__device__ __forceinline__ void cu_xload8(float *v, const float *x, int k, int end, bool vec) {
    if (vec) {
        const float4 a = ((const float4 *)(x + k))[0], b = ((const float4 *)(x + k))[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
        if (k + e >= end) break;
        v[e] = x[k + e];
    }
}

/* ---- the tensor-core matmul's pieces (cuda_matmul.cu mm_tc) ------------- */

/* d += A·B on the warp's tensor cores: PTX mma.sync m16n8k16, bf16
 * inputs, f32 accumulators, in PTX's fragment layout (lane = 4·g + t):
 * a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
 * a[3] = A[g+8][2t+8, 2t+9]; b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g];
 * d[0, 1] = D[g][2t, 2t+1], d[2, 3] = D[g+8][2t, 2t+1]; the lower k of a
 * pair in the register's low half. sm_80 and later (CMakeLists builds 80
 * and 90). tests/cuda_emu stands in a warp-wide function with the same
 * layout (CU_MMA_BF16). */
#ifndef CU_MMA_BF16
__device__ __forceinline__ void cu_mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#define CU_MMA_BF16(d, a, b) cu_mma_bf16(d, a, b)
#endif

/* f's bf16 bits rounded to nearest, ties to even (finite f; an infinity
 * stays one): integer arithmetic, the same bits on every device */
__device__ __forceinline__ uint32_t cu_bf16_rn(float f) {
    const uint32_t u = __float_as_uint(f);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/* x as three bf16, x = hi + mid + lo exactly (each remainder is exact in
 * f32, and 3 × 8 significant bits hold f32's 24): the tensor cores then
 * see the f32 activation itself, not a rounded one. */
__device__ __forceinline__ void cu_split3(float x, uint32_t *hi, uint32_t *mid, uint32_t *lo) {
    *hi = cu_bf16_rn(x);
    const float r1 = x - __uint_as_float(*hi << 16);
    *mid = cu_bf16_rn(r1);
    const float r2 = r1 - __uint_as_float(*mid << 16);
    *lo = cu_bf16_rn(r2);
}

#endif
