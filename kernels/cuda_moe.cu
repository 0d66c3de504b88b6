/* cuda_moe.cu — CUDA backend: the mixture-of-experts calls (backend.h
 * kb_gather_rows, kb_matmul_grouped, kb_combine_rows) and expert weights
 * in pinned, mapped host memory (kb_set_experts_on_host).
 * Owns: the grouped expert matmul, and the table of expert weights it put
 * in mapped host memory (by owner, like cuda_mem.cu's device copies).
 * Must not: route (engine/moe.c does, on the host, after a kb_wait), or
 * hold calls back: each call here is one bracket (cuda_internal.cuh), so
 * whatever cuda_matmul.cu holds is launched first by cu_begin.
 *
 * The grouped matmul (moe_mm) gives every output element the reduction
 * order of cuda_matmul.cu's invariant mode (mm_inv; in the tensor mode,
 * bf16 experts go one launch each through cuda_matmul_tc.cu's order), so each expert's rows
 * come out with the bits of one kb_matmul of that expert over them
 * (test_cuda checks it): the row's k range in cu_mm_parts(cols) parts, each a
 * multiple of 8 long; in a part, lane L one fma chain over the 8
 * consecutive elements at part start + 256·it + 8·L (element order, then
 * it); the 32 lane sums by the xor butterfly 16, 8, 4, 2, 1; the parts
 * added in order. One warp per (weight row, part), MOE_MT x rows at a
 * time; blockIdx.y is the group (the expert), blockIdx.x the set (gate,
 * up) and the block of weight rows, so every active expert of a step is
 * one launch and an expert's weight is read once per MOE_MT of its rows.
 *
 * Experts on the host: cudaHostAlloc(cudaHostAllocMapped), the kernels
 * reading the device pointer of the mapping across the bus. A kernel here
 * takes the weight pointers as they are (never staged through cu_in, which
 * would copy a host weight per call), so the grouped matmul reads device
 * and mapped host weights alike; no other kernel ever sees an expert. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "cuda_matmul.cuh"
#include "errmsg.h"

#define MOE_MAX_WARPS CU_MM_MAX_WARPS
#define MOE_MT 4

struct moe_mm_args {
    float *y[2];              /* per set: [total rows, rows] */
    const void *const *w;     /* [n_sets · n_groups] weight pointers (device or mapped host memory) */
    const int *start;         /* [n_groups + 1] */
    const float *x;           /* [total rows, cols] */
    int n_groups, rows, cols, nw, part, rblocks, vec;
};

/* Block: nw parts × G row groups of warps (warp = g·nw + p), weight row
 * rb·G + g of set blockIdx.x / rblocks, expert group blockIdx.y. */
template <int DT>
__global__ void __launch_bounds__(MOE_MAX_WARPS * 32) moe_mm(moe_mm_args a) {
    __shared__ float red[MOE_MAX_WARPS][MOE_MT];
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int nw = a.nw, p = warp % nw, g = warp / nw, G = (int)blockDim.x / 32 / nw;
    const int set = (int)blockIdx.x / a.rblocks, rb = (int)blockIdx.x % a.rblocks, grp = (int)blockIdx.y;
    const int cols = a.cols, rows = a.rows;
    /* a row past the last still computes (on the last row), so that every
     * lane reaches the shuffles and the barriers; it is not written */
    const int j_want = rb * G + g, j = j_want < rows ? j_want : rows - 1;
    const int k0 = p * a.part, k1 = k0 + a.part < cols ? k0 + a.part : cols;
    const bool vec = a.vec != 0;
    CU_PDL_ENTRY();
    const void *__restrict__ w = a.w[(size_t)set * a.n_groups + grp];
    float *__restrict__ y = set ? a.y[1] : a.y[0];
    const int r0 = a.start[grp], r1 = a.start[grp + 1];
    const size_t wrow = (size_t)j * (size_t)cols;
    for (int i0 = r0; i0 < r1; i0 += MOE_MT) {
        const int nr = r1 - i0 < MOE_MT ? r1 - i0 : MOE_MT;
        float acc[MOE_MT];
#pragma unroll
        for (int r = 0; r < MOE_MT; r++) acc[r] = 0.0f;
        for (int k = k0 + 8 * lane; k < k1; k += 256) {
            float wv[8];
            cu_wload8<DT>(wv, w, wrow + (size_t)k, k, k1, vec);
#pragma unroll
            for (int r = 0; r < MOE_MT; r++) {
                if (r >= nr) break;
                float xv[8];
                cu_xload8(xv, a.x + (size_t)(i0 + r) * cols, k, k1, vec);
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    if (!vec && k + e >= k1) break;
                    acc[r] = fmaf(xv[e], wv[e], acc[r]);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < MOE_MT; r++) {
            float v = acc[r];
            v = v + __shfl_xor_sync(0xffffffffu, v, 16);
            v = v + __shfl_xor_sync(0xffffffffu, v, 8);
            v = v + __shfl_xor_sync(0xffffffffu, v, 4);
            v = v + __shfl_xor_sync(0xffffffffu, v, 2);
            v = v + __shfl_xor_sync(0xffffffffu, v, 1);
            if (lane == 0) red[warp][r] = v;
        }
        __syncthreads();
        /* lane r of the group's first warp adds output r's parts in order */
        if (p == 0 && lane < nr && j_want < rows) {
            float v = red[g * nw][lane];
            for (int q = 1; q < nw; q++) v = v + red[g * nw + q][lane];
            y[(size_t)(i0 + lane) * rows + j] = v;
        }
        __syncthreads();   /* red is rewritten by the next tile */
    }
}


/* the weight pointers of one call, host side (staged into the ring) */
enum { MOE_MAX_PTRS = 2 * 4096 };
static const void *g_ptrs[MOE_MAX_PTRS];

void cuda_matmul_grouped(int n_sets, float *const ys[], const kb_weight *const ws[], const float *x,
                         const int *start, int n_groups) {
    if (n_sets <= 0 || n_groups <= 0) return;
    const int rows = ws[0]->rows, cols = ws[0]->cols, m = start[n_groups];
    const kb_dtype dt = ws[0]->dt;
    if (rows <= 0 || m <= 0) return;
    if (n_sets > 2 || n_sets * n_groups > MOE_MAX_PTRS) {
        fprintf(stderr, "specbed: CUDA: kb_matmul_grouped of %d sets × %d groups (at most 2 × %d)\n", n_sets,
                n_groups, MOE_MAX_PTRS / 2);
        abort();
    }
    cu_begin();
    int vec = cols % 8 == 0;
    for (int i = 0; i < n_sets * n_groups; i++) {
        g_ptrs[i] = ws[i]->data;
        vec = vec && ((uintptr_t)ws[i]->data & 15) == 0;
    }
    moe_mm_args a;
    memset(&a, 0, sizeof a);
    a.x = (const float *)cu_in(x, (size_t)m * (size_t)cols * sizeof(float));
    for (int s = 0; s < n_sets; s++) a.y[s] = (float *)cu_out(ys[s], (size_t)m * (size_t)rows * sizeof(float), 0);
    if (n_sets == 1) a.y[1] = a.y[0];
    if (cols <= 0) {
        for (int s = 0; s < n_sets; s++)
            cu_check(cudaMemsetAsync(a.y[s], 0, (size_t)m * (size_t)rows * sizeof(float), cu_stream()),
                     "matmul_grouped");
        cu_end("matmul_grouped");
        return;
    }
    if (cuda_matmul_tensor(dt)) {
        /* the tensor cores' order (cuda_matmul_tc.cu) for kb_matmul's bits:
         * one launch an expert, its gate and up as one set */
        for (int gi = 0; gi < n_groups; gi++) {
            const int r0 = start[gi], nr = start[gi + 1] - r0;
            if (nr <= 0) continue;
            mm_set set;
            memset(&set, 0, sizeof set);
            for (int s = 0; s < n_sets; s++) {
                set.y[s] = a.y[s] + (size_t)r0 * rows;
                set.w[s] = ws[s * n_groups + gi]->data;
                set.rows[s] = rows;
            }
            set.n = n_sets;
            cuda_mm_tc_launch(set, a.x + (size_t)r0 * cols, nr, cols);
        }
        cu_end("matmul_grouped");
        return;
    }
    a.start = (const int *)cu_in(start, (size_t)(n_groups + 1) * sizeof(int));
    a.w = (const void *const *)cu_in(g_ptrs, (size_t)(n_sets * n_groups) * sizeof(void *));
    a.n_groups = n_groups;
    a.rows = rows;
    a.cols = cols;
    a.nw = cu_mm_parts(cols);
    a.part = ((cols + a.nw - 1) / a.nw + 7) / 8 * 8;
    const int G = a.nw >= 4 ? 1 : 4 / a.nw;
    a.rblocks = (rows + G - 1) / G;
    a.vec = vec && ((uintptr_t)a.x & 15) == 0;
    const dim3 grid((unsigned)(n_sets * a.rblocks), (unsigned)n_groups);
    const unsigned block = (unsigned)(32 * a.nw * G);
    switch (dt) {
    case KB_F32: CU_LAUNCH(moe_mm<KB_F32>, grid, block)(a); break;
    case KB_BF16: CU_LAUNCH(moe_mm<KB_BF16>, grid, block)(a); break;
    case KB_F16: CU_LAUNCH(moe_mm<KB_F16>, grid, block)(a); break;
    }
    cu_end("matmul_grouped");
}

/* ---- gather and combine --------------------------------------------------- */

__global__ void moe_gather(float *dst, const float *src, const int *idx, int n, int rf) {
    CU_PDL_ENTRY();
    for (int i = (int)blockIdx.y; i < n; i += (int)gridDim.y) {
        const float *s = src + (size_t)idx[i] * rf;
        for (int j = (int)(blockIdx.x * blockDim.x + threadIdx.x); j < rf; j += (int)(gridDim.x * blockDim.x))
            dst[(size_t)i * rf + j] = s[j];
    }
}

/* one thread per output element: its k terms in order, each product
 * rounded before it is added (cpu_moe.c kb_combine_rows) */
__global__ void moe_combine(float *y, const float *src, const int *slots, const float *w, int n, int k, int rf) {
    CU_PDL_ENTRY();
    for (int r = (int)blockIdx.y; r < n; r += (int)gridDim.y)
        for (int j = (int)(blockIdx.x * blockDim.x + threadIdx.x); j < rf; j += (int)(gridDim.x * blockDim.x)) {
            float acc = 0.0f;
            for (int i = 0; i < k; i++) {
                const float t = __fmul_rn(src[(size_t)slots[(size_t)r * k + i] * rf + j], w[(size_t)r * k + i]);
                acc = __fadd_rn(acc, t);
            }
            y[(size_t)r * rf + j] = acc;
        }
}

static dim3 rows_grid(int n, int rf) {
    const int gx = (rf + 255) / 256;
    return dim3((unsigned)(gx < 64 ? gx : 64), (unsigned)(n < 65535 ? n : 65535));
}

static int max_index(const int *idx, size_t n) {
    int mx = 0;
    for (size_t i = 0; i < n; i++) mx = idx[i] > mx ? idx[i] : mx;
    return mx;
}

void cuda_gather_rows(float *dst, const float *src, const int *idx, int n, int row_floats) {
    if (n <= 0 || row_floats <= 0) return;
    const size_t rf = (size_t)row_floats;
    const int src_rows = max_index(idx, (size_t)n) + 1;
    cu_begin();
    const float *ds = (const float *)cu_in(src, (size_t)src_rows * rf * sizeof(float));
    const int *di = (const int *)cu_in(idx, (size_t)n * sizeof(int));
    float *dd = (float *)cu_out(dst, (size_t)n * rf * sizeof(float), 0);
    CU_LAUNCH(moe_gather, rows_grid(n, row_floats), 256)(dd, ds, di, n, row_floats);
    cu_end("gather_rows");
}

void cuda_combine_rows(float *y, const float *src, const int *slots, const float *w, int n, int k, int row_floats) {
    if (n <= 0 || row_floats <= 0) return;
    const size_t rf = (size_t)row_floats, nk = (size_t)n * (size_t)(k > 0 ? k : 0);
    const int src_rows = nk ? max_index(slots, nk) + 1 : 0;
    cu_begin();
    const float *ds = (const float *)cu_in(src, (size_t)src_rows * rf * sizeof(float));
    const int *dslots = (const int *)cu_in(slots, nk * sizeof(int));
    const float *dw = (const float *)cu_in(w, nk * sizeof(float));
    float *dy = (float *)cu_out(y, (size_t)n * rf * sizeof(float), 0);
    CU_LAUNCH(moe_combine, rows_grid(n, row_floats), 256)(dy, ds, dslots, dw, n, k, row_floats);
    cu_end("combine_rows");
}

/* ---- expert weights in mapped host memory ------------------------------------ */

typedef struct { void *p, *d; const void *owner; } host_weight;   /* the mapping, its device pointer */
static host_weight *g_host;
static int g_n_host, g_cap_host;
static int g_on_host;

void cuda_set_experts_on_host(int on) { g_on_host = on != 0; }
int cuda_experts_on_host(void) { return g_on_host; }

/* At load, never inside an async region (the allocation would end a capture). */
int cuda_weight_upload_expert(kb_weight *w, const void *owner, char *err, size_t errlen) {
    if (!g_on_host) return cu_weight_upload(w, owner, err, errlen);
    const size_t bytes = (size_t)w->rows * (size_t)w->cols * kb_dtype_size(w->dt);
    if (!bytes || !w->data) return 0;
    cu_lock();
    void *h = NULL, *d = NULL;
    cudaError_t e = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e == cudaSuccess) {
        memcpy(h, w->data, bytes);
        e = cudaHostGetDevicePointer(&d, h, 0);
    }
    int rc = 0;
    if (e == cudaSuccess && g_n_host == g_cap_host) {
        int cap = g_cap_host ? 2 * g_cap_host : 256;
        host_weight *t = (host_weight *)realloc(g_host, (size_t)cap * sizeof *t);
        if (t) {
            g_host = t;
            g_cap_host = cap;
        }
    }
    if (e != cudaSuccess || g_n_host == g_cap_host) {
        if (h) cudaFreeHost(h);
        cudaGetLastError();
        rc = errf(err, errlen, "CUDA: cannot place a [%d, %d] expert weight (%zu bytes) in mapped host memory: %s",
                  w->rows, w->cols, bytes, e != cudaSuccess ? cudaGetErrorString(e) : "out of host memory");
    } else {
        g_host[g_n_host].p = h;
        g_host[g_n_host].d = d;
        g_host[g_n_host].owner = owner;
        g_n_host++;
        w->data = d;   /* the kernels' address of the mapping (the host's too, with unified addressing) */
    }
    cu_unlock();
    return rc;
}

static int host_find(const void *d) {
    for (int i = 0; i < g_n_host; i++)
        if (g_host[i].d == d) return i;
    return -1;
}

void cuda_expert_release(kb_weight *w) {
    if (!w->data || host_find(w->data) < 0) return;
    cu_wait();   /* a queued kernel may still read it */
    cu_lock();
    const int i = host_find(w->data);
    if (i >= 0) {
        cu_check(cudaFreeHost(g_host[i].p), "kb_weight_release (an expert in host memory)");
        g_host[i] = g_host[--g_n_host];
        w->data = NULL;
    }
    cu_unlock();
}

void cuda_expert_release_owner(const void *owner) {
    int any = 0;
    for (int i = 0; i < g_n_host; i++) any |= g_host[i].owner == owner;
    if (!any) return;
    cu_wait();   /* queued kernels may still read them */
    cu_lock();
    for (int i = g_n_host - 1; i >= 0; i--)
        if (g_host[i].owner == owner) {
            cu_check(cudaFreeHost(g_host[i].p), "kb_weight_release_owner (experts in host memory)");
            g_host[i] = g_host[--g_n_host];
        }
    cu_unlock();
}
