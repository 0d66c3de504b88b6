/* cuda_matmul.cu — CUDA backend: y[m, rows] = x[m, cols] · Wᵀ.
 * Owns: the three matmul modes (backend.h kb_set_cuda_matmul) and loading
 * cuBLAS (dlopen, on first use of its mode, so a process that never asks
 * for it neither loads its ~600 MB of libraries nor needs them installed).
 *
 * "invariant" (default). One fixed reduction order per output element that
 * depends on cols alone — not on m, the tile a row lands in, the grid or
 * the GPU — so a row's result is the same alone, among verify rows or
 * beside other sequences (batch invariance, DESIGN §4), and greedy
 * speculation on = off on the GPU. It is the GPU's own order, not the
 * CPU's: the CPU's (8 fma chains over the whole row) is a sequential chain
 * of cols/8 fmas per output, which leaves a 1-row decode step with
 * rows × 8 chains in flight — a few hundred kB of loads against the ~3 MB
 * an H200 needs in flight to reach its bandwidth (the first GPU run:
 * 190 GB/s, 4.5% of the HBM). So CUDA vs CPU logits agree to rounding
 * (tests/test_cuda.c holds them to the γ_n bound of two f32 orders) and
 * argmax equal, not bit for bit.
 *
 * The order (mm_inv): the row's k range is cut into NW parts (NW = 1, 2,
 * 4 or 8, from cols: about 512 columns a part), each a multiple of 8 long.
 * A warp reduces one part: lane L takes the 8 consecutive elements at
 * k = part start + 256·it + 8·L, it = 0, 1, ..., and keeps one fma chain
 * over them (element order within the 8, then it); the 32 lane sums are
 * added by the xor butterfly 16, 8, 4, 2, 1 (every lane ends with the same
 * bits: IEEE addition is commutative); the NW part sums are added in part
 * order, ((p0 + p1) + p2) + .... The weight is read as 16-byte loads (8
 * bf16/f16, coalesced: a warp reads 512 contiguous bytes), each element
 * once per x tile: a warp keeps R weight rows × MT x rows of accumulators,
 * so a verify of up to 8 rows reads the weight once, like decode (R and MT
 * are chosen from m, which changes how many accumulators a warp holds and
 * never a row's arithmetic). Grid: ceil(rows / (G·R)) blocks of NW·G
 * warps (G row groups: 4 warps a block at least), blockIdx.y over tiles of
 * MT x rows when m > MT. A 1-row step of Qwen3-0.6B's q projection
 * (2048 × 1024) is 1,024 blocks of 4 warps, all loads of a warp issued
 * before its first fma.
 *
 * "tensor". bf16 weights on the tensor cores in their own fixed order
 * (cuda_matmul_tc.cu: the same invariance, multi-row work at tensor-core
 * rates, the f32 activations exact); f32/f16 weights as "invariant". Not
 * the default until a GPU has measured it (bench/RECORD.md).
 *
 * "cublas". cublasGemmEx with fp32 accumulation. bf16/f16 weights need the
 * activations in the same type, so x is rounded to it first (as bf16
 * engines do; relative error ≤ 2⁻⁸ per activation for bf16, 2⁻¹¹ for
 * f16). cuBLAS chooses its kernel (and split-K) by shape: NOT
 * batch-invariant. For throughput measurements. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "cuda_matmul.cuh"

#define MM_MAX_WARPS CU_MM_MAX_WARPS

enum { MODE_INVARIANT = 0, MODE_CUBLAS = 1, MODE_TENSOR = 2 };
static int g_mode = MODE_INVARIANT;

/* Block: nw parts × G row groups of warps (warp = g·nw + p); group g holds
 * weight rows (blockIdx.x·G + g)·R + [0, R). part: the part length, a
 * multiple of 8. */

/* SW: a layer's gate and up as one, SwiGLU in the epilogue (the set is
 * {gate → y[0], up → y[1]}, rows[0] = rows[1]): a warp's R weight rows are
 * R/2 gate rows and the same R/2 up rows, so each gate output and its up
 * output end in the same block, and y[0] gets silu(gate)·up, y[1] up
 * (kb_swiglu(y0, y0, y1)'s result). Each output's reduction is the order
 * above, and the SwiGLU swiglu_k's own (cuda_ops.cu): the bits of the two
 * calls it replaces. */
template <int DT, int R, int MT, int SW>
__global__ void __launch_bounds__(MM_MAX_WARPS * 32)
mm_inv(mm_set set, const float *__restrict__ x, int m, int cols, int nw, int part, int vec_ok) {
    __shared__ float red[MM_MAX_WARPS][R * MT];
    __shared__ float tr[R * MT > 1 ? MM_MAX_WARPS : 1][32][R * MT + 1];   /* padded: lane l's row */
    /* this block's weight (constant indices: a parameter array indexed at
     * run time would be copied to local memory) */
    const int bx = (int)blockIdx.x;
    const int t = (set.n > 1 && bx >= set.b0[1]) + (set.n > 2 && bx >= set.b0[2]) + (set.n > 3 && bx >= set.b0[3]);
    float *__restrict__ y = t == 0 ? set.y[0] : t == 1 ? set.y[1] : t == 2 ? set.y[2] : set.y[3];
    const void *__restrict__ w = t == 0 ? set.w[0] : t == 1 ? set.w[1] : t == 2 ? set.w[2] : set.w[3];
    const int rows = t == 0 ? set.rows[0] : t == 1 ? set.rows[1] : t == 2 ? set.rows[2] : set.rows[3];
    const int blk = bx - (t == 0 ? 0 : t == 1 ? set.b0[1] : t == 2 ? set.b0[2] : set.b0[3]);
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int p = warp % nw, g = warp / nw, G = (int)blockDim.x / 32 / nw;
    constexpr int RJ = SW ? R / 2 : R;   /* distinct output rows j a warp holds */
    const int j0 = (blk * G + g) * RJ;
    const int k0 = p * part, k1 = k0 + part < cols ? k0 + part : cols;
    const bool vec = vec_ok != 0;
    const size_t es = DT == KB_F32 ? 4 : 2;
    size_t wrow[R];
    const void *wi[R];   /* SW: gate for i < R/2, up after */
#pragma unroll
    for (int i = 0; i < R; i++) {
        /* a row past the last still computes (on the last row), so that
         * every lane reaches the shuffles and the barriers; it is not written */
        const int ii = SW && i >= RJ ? i - RJ : i;
        const int j = j0 + ii < rows ? j0 + ii : rows - 1;
        wi[i] = SW && i >= RJ ? set.w[1] : w;
        wrow[i] = (size_t)j * (size_t)cols;
        /* the weight is never written by a kernel: its bytes start towards
         * L2 while the kernel before this one (launched with PDL) finishes */
        if (m <= MT)
            for (int k = k0 + 8 * lane; k < k1; k += 256)
                cu_prefetch_l2((const char *)wi[i] + (wrow[i] + (size_t)k) * es);
    }
    CU_PDL_ENTRY();
    const int ntiles = (m + MT - 1) / MT;
    for (int t = (int)blockIdx.y; t < ntiles; t += (int)gridDim.y) {
        const int i0 = t * MT, nr = m - i0 < MT ? m - i0 : MT;
        const float *xt = x + (size_t)i0 * (size_t)cols;
        float acc[R][MT];
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int r = 0; r < MT; r++) acc[i][r] = 0.0f;
#pragma unroll 2
        for (int k = k0 + 8 * lane; k < k1; k += 256) {
            float wv[R][8];
#pragma unroll
            for (int i = 0; i < R; i++) cu_wload8<DT>(wv[i], wi[i], wrow[i] + (size_t)k, k, k1, vec);
#pragma unroll
            for (int r = 0; r < MT; r++) {
                if (r >= nr) break;
                float xv[8];
                cu_xload8(xv, xt + (size_t)r * cols, k, k1, vec);
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    if (!vec && k + e >= k1) break;
#pragma unroll
                    for (int i = 0; i < R; i++) acc[i][r] = fmaf(xv[e], wv[i][e], acc[i][r]);
                }
            }
        }
        if constexpr (R * MT == 1) {
            /* the butterfly: every lane ends with the same bits */
            float v = acc[0][0];
            v = v + __shfl_xor_sync(0xffffffffu, v, 16);
            v = v + __shfl_xor_sync(0xffffffffu, v, 8);
            v = v + __shfl_xor_sync(0xffffffffu, v, 4);
            v = v + __shfl_xor_sync(0xffffffffu, v, 2);
            v = v + __shfl_xor_sync(0xffffffffu, v, 1);
            if (lane == 0) red[warp][0] = v;
        } else {
            /* the same tree for R·MT outputs at once: the lanes' sums
             * transposed through shared memory, lane q adding output q's 32
             * as the butterfly pairs them (xor 16, 8, 4, 2, 1) — the
             * butterfly's bits (test_cuda: a row alone, which takes the
             * shuffles, = among 8 or 17, which take this), 5·R·MT shuffles
             * a warp replaced by R·MT + 31 adds a lane */
#pragma unroll
            for (int i = 0; i < R; i++)
#pragma unroll
                for (int r = 0; r < MT; r++) tr[warp][lane][i * MT + r] = acc[i][r];
            __syncwarp();
            if (lane < R * MT) {
                float a[32];
#pragma unroll
                for (int l = 0; l < 32; l++) a[l] = tr[warp][l][lane];
#pragma unroll
                for (int l = 0; l < 16; l++) a[l] = a[l] + a[l + 16];
#pragma unroll
                for (int l = 0; l < 8; l++) a[l] = a[l] + a[l + 8];
#pragma unroll
                for (int l = 0; l < 4; l++) a[l] = a[l] + a[l + 4];
                a[0] = a[0] + a[2];
                a[1] = a[1] + a[3];
                a[0] = a[0] + a[1];
                red[warp][lane] = a[0];
            }
        }
        __syncthreads();
        /* thread q of group g's first warp adds output q's parts in order */
        if (p == 0 && lane < RJ * MT) {
            const int i = lane / MT, r = lane % MT, j = j0 + i;
            if (r < nr && j < rows) {
                float v = red[g * nw][lane];
                for (int q = 1; q < nw; q++) v = v + red[g * nw + q][lane];
                if constexpr (SW) {   /* the up output of the same row j: R/2 weight rows on */
                    const int lu = lane + RJ * MT;
                    float u = red[g * nw][lu];
                    for (int q = 1; q < nw; q++) u = u + red[g * nw + q][lu];
                    y[(size_t)(i0 + r) * rows + j] = (v / (1.0f + kb_expf(-v))) * u;   /* swiglu_k's */
                    set.y[1][(size_t)(i0 + r) * rows + j] = u;
                } else {
                    y[(size_t)(i0 + r) * rows + j] = v;
                }
            }
        }
        __syncthreads();   /* red is rewritten by the next tile */
    }
}


template <int DT, int R, int MT, int SW>
static void launch_inv(mm_set set, const float *x, int m, int cols) {
    const int nw = cu_mm_parts(cols);
    const int part = ((cols + nw - 1) / nw + 7) / 8 * 8;
    const int G = nw >= 4 ? 1 : 4 / nw;
    int vec = cols % 8 == 0 && ((uintptr_t)x & 15) == 0;
    set.b0[0] = 0;
    for (int t = 0; t < set.n; t++) vec = vec && ((uintptr_t)set.w[t] & 15) == 0;
    if (SW) {   /* one block range: each block's warps hold R/2 rows of gate and of up */
        set.b0[1] = (set.rows[0] + G * (R / 2) - 1) / (G * (R / 2));
        set.n = 1;
    } else {
        for (int t = 0; t < set.n; t++) set.b0[t + 1] = set.b0[t] + (set.rows[t] + G * R - 1) / (G * R);
    }
    const unsigned gx = (unsigned)set.b0[set.n];
    const int ntiles = (m + MT - 1) / MT;
    /* enough blocks for every SM several times over; each loops over its tiles */
    int gy = (int)((1024 + gx - 1) / gx);
    gy = gy < ntiles ? gy : ntiles;
    gy = gy < 65535 ? gy : 65535;
    CU_LAUNCH((mm_inv<DT, R, MT, SW>), dim3(gx, (unsigned)gy), (unsigned)(32 * nw * G))(set, x, m, cols, nw, part,
                                                                                          vec);
}

template <int DT, int SW>
static void launch_invariant(const mm_set &set, const float *x, int m, int cols) {
    /* R, MT: accumulators per warp, chosen from m; never the order (SW:
     * at least a gate and an up row a warp) */
    if (m == 1) launch_inv<DT, SW ? 2 : 1, 1, SW>(set, x, m, cols);
    else if (m <= 4) launch_inv<DT, 2, 4, SW>(set, x, m, cols);
    else launch_inv<DT, 4, 8, SW>(set, x, m, cols);
}

static void launch_set(const mm_set &set, kb_dtype dt, const float *x, int m, int cols, int swiglu = 0) {
    if (cuda_matmul_tensor(dt) && !swiglu) {
        cuda_mm_tc_launch(set, x, m, cols);
        return;
    }
    switch (dt) {
    case KB_F32: swiglu ? launch_invariant<KB_F32, 1>(set, x, m, cols) : launch_invariant<KB_F32, 0>(set, x, m, cols); break;
    case KB_BF16:
        swiglu ? launch_invariant<KB_BF16, 1>(set, x, m, cols) : launch_invariant<KB_BF16, 0>(set, x, m, cols);
        break;
    case KB_F16: swiglu ? launch_invariant<KB_F16, 1>(set, x, m, cols) : launch_invariant<KB_F16, 0>(set, x, m, cols); break;
    }
}

/* ---- deferred matmuls: a layer's q/k/v (gate/up) as one launch ----------------
 * engine/layer.c hands q, k and v (gate and up) to kb_matmul_n, which on a
 * device makes one call per weight. Inside an async region, a matmul
 * whose x, weight and y are all device memory is held back; the next
 * matmul with the same x, m, cols and dtype joins it (up to MM_SET, a y
 * that is none of the held ones, nor x), and anything else the backend
 * is asked to do first launches what is held (cu_begin, and before every
 * wait or end of a capture: cu_flush_held). So the kernels run in the
 * calls' order as far as any later call can see, and each output's bits
 * are the single launch's. On the first GPU run the k and v projections
 * of Qwen3-0.6B took 3.8 µs each alone (Nsight Compute), of which ~2 µs
 * is any kernel's floor: two of five launches a layer saved. */
static struct {
    mm_set set;
    const float *x;
    int m, cols;
    kb_dtype dt;
} g_held;

void cuda_matmul_flush(void) {
    if (!g_held.set.n) return;
    /* taken before the launch: the tensor order's launch may grow its
     * scratch, which flushes held calls again (cu_scratch) */
    const mm_set set = g_held.set;
    g_held.set.n = 0;
    launch_set(set, g_held.dt, g_held.x, g_held.m, g_held.cols);
}

/* The SwiGLU of a held gate/up pair (cuda_ops.cu cuda_swiglu asks first):
 * when the held set is exactly {gate → out, up → up} of m rows of n, it is
 * launched as one kernel with the SwiGLU in its epilogue (mm_inv SW) and
 * the SwiGLU launch is saved; the bits of the two calls. 1 when taken. */
int cuda_matmul_take_swiglu(float *out, const float *gate, const float *up, int m, int n) {
    cu_lock();
    /* the tensor order has no fused epilogue: its gate/up launch as a set, the SwiGLU after */
    const int ok = g_mode != MODE_CUBLAS && !cuda_matmul_tensor(g_held.dt) && g_held.set.n == 2 && out == gate && g_held.m == m &&
                   g_held.set.y[0] == gate && g_held.set.y[1] == up && g_held.set.rows[0] == n &&
                   g_held.set.rows[1] == n && (const float *)up != g_held.x && (const float *)gate != g_held.x;
    mm_set set;
    const float *x = g_held.x;
    const int cols = g_held.cols;
    const kb_dtype dt = g_held.dt;
    if (ok) {
        set = g_held.set;
        g_held.set.n = 0;   /* taken: cu_begin below must not launch it alone */
    }
    cu_unlock();
    if (!ok) return 0;
    cu_begin();
    launch_set(set, dt, x, m, cols, 1);
    cu_end("matmul gate/up + swiglu");
    return 1;
}

/* 1 when the call was held (or joined what is held) */
static int hold(float *y, const float *x, const kb_weight *w, int m) {
    if (g_mode == MODE_CUBLAS || !cu_async_depth() || w->cols <= 0 || !cu_on_device(x) || !cu_on_device(y) ||
        !cu_on_device(w->data) || y == x)
        return 0;
    cu_lock();
    int join = g_held.set.n > 0 && g_held.set.n < MM_SET && g_held.x == x && g_held.m == m &&
               g_held.cols == w->cols && g_held.dt == w->dt;
    for (int t = 0; join && t < g_held.set.n; t++) join = g_held.set.y[t] != y;
    if (!join) cu_flush_held();   /* a held add or norm too: calls stay in order */
    if (!g_held.set.n) {
        g_held.x = x;
        g_held.m = m;
        g_held.cols = w->cols;
        g_held.dt = w->dt;
    }
    const int t = g_held.set.n++;
    g_held.set.y[t] = y;
    g_held.set.w[t] = w->data;
    g_held.set.rows[t] = w->rows;
    cu_unlock();
    return 1;
}

/* ---- cuBLAS ----------------------------------------------------------------- */

#define CU_STR2(x) #x
#define CU_STR(x) CU_STR2(x)
#ifndef SPECBED_CUDA_LIBDIR
#define SPECBED_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

typedef cublasStatus_t (*blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*blas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*blas_workspace_fn)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*blas_gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                       const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                       int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                       cublasGemmAlgo_t);
static struct {
    void *lib;
    blas_gemm_fn gemm;
    cublasHandle_t handle;
    void *workspace;   /* the handle's, for the life of the process */
} g_blas;


static int load_cublas(void) {
    if (g_blas.handle) return 0;
    const char *names[3] = {"libcublas.so." CU_STR(CUBLAS_VER_MAJOR),
                            SPECBED_CUDA_LIBDIR "/libcublas.so." CU_STR(CUBLAS_VER_MAJOR), "libcublas.so"};
    for (int i = 0; i < 3 && !g_blas.lib; i++) g_blas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g_blas.lib) {
        fprintf(stderr, "specbed: cannot load cuBLAS (%s): %s\n", names[0], dlerror());
        return -1;
    }
    blas_create_fn create = (blas_create_fn)dlsym(g_blas.lib, "cublasCreate_v2");
    blas_stream_fn set_stream = (blas_stream_fn)dlsym(g_blas.lib, "cublasSetStream_v2");
    g_blas.gemm = (blas_gemm_fn)dlsym(g_blas.lib, "cublasGemmEx");
    cublasHandle_t h = NULL;
    if (!create || !set_stream || !g_blas.gemm || create(&h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "specbed: cuBLAS: %s\n", !create || !set_stream || !g_blas.gemm
                ? "cublasCreate_v2, cublasSetStream_v2 or cublasGemmEx missing" : "cublasCreate failed");
        return -1;
    }
    /* the backend's stream, so that GEMMs stay in order with its kernels */
    if (set_stream(h, cu_stream()) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "specbed: cuBLAS: cublasSetStream failed\n");
        return -1;
    }
    /* a workspace of its own (cuBLAS's advice for CUDA graphs: 32 MiB on
     * Hopper), so that a GEMM inside a capture never allocates from the
     * default pool; without the symbol, or the memory, cuBLAS keeps its own */
    blas_workspace_fn set_ws = (blas_workspace_fn)dlsym(g_blas.lib, "cublasSetWorkspace_v2");
    size_t ws_bytes = (size_t)32 << 20;
    if (set_ws && cudaMalloc(&g_blas.workspace, ws_bytes) == cudaSuccess &&
        set_ws(h, g_blas.workspace, ws_bytes) != CUBLAS_STATUS_SUCCESS) {
        cudaFree(g_blas.workspace);
        g_blas.workspace = NULL;
    }
    cudaGetLastError();
    g_blas.handle = h;
    return 0;
}

int cuda_set_matmul(const char *mode) {
    if (mode && !strcmp(mode, "invariant")) { g_mode = MODE_INVARIANT; return 0; }
    if (mode && !strcmp(mode, "tensor")) { g_mode = MODE_TENSOR; return 0; }
    if (mode && !strcmp(mode, "cublas")) {
        if (load_cublas()) return -1;
        g_mode = MODE_CUBLAS;
        return 0;
    }
    return -1;
}

const char *cuda_matmul_mode(void) {
    return g_mode == MODE_CUBLAS ? "cublas" : g_mode == MODE_TENSOR ? "tensor" : "invariant";
}

int cuda_matmul_tensor(kb_dtype dt) { return g_mode == MODE_TENSOR && dt == KB_BF16; }

__global__ void to_bf16(__nv_bfloat16 *d, const float *s, size_t n) {
    CU_PDL_ENTRY();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] = __float2bfloat16_rn(s[i]);
}
__global__ void to_f16(__half *d, const float *s, size_t n) {
    CU_PDL_ENTRY();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] = __float2half_rn(s[i]);
}

/* Row-major y[m, rows] = x[m, cols] · Wᵀ is column-major yᵀ[rows, m] =
 * op_T(W as column-major [cols, rows]) · (x as column-major [cols, m]). */
static void gemm_cublas(float *y, const float *x, const void *w, kb_dtype dt, int m, int rows, int cols) {
    const float one = 1.0f, zero = 0.0f;
    const void *b = x;
    cudaDataType t = CUDA_R_32F;
    if (dt != KB_F32) {
        size_t n = (size_t)m * (size_t)cols;
        void *xc = cu_scratch(CU_SCRATCH_XCONV, n * 2);
        unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
        if (dt == KB_BF16) { CU_LAUNCH(to_bf16, blocks, 256)((__nv_bfloat16 *)xc, x, n); t = CUDA_R_16BF; }
        else { CU_LAUNCH(to_f16, blocks, 256)((__half *)xc, x, n); t = CUDA_R_16F; }
        b = xc;
    }
    cublasStatus_t s = g_blas.gemm(g_blas.handle, CUBLAS_OP_T, CUBLAS_OP_N, rows, m, cols, &one, w, t, cols, b, t,
                                   cols, &zero, y, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "specbed: cublasGemmEx failed (status %d) for m %d, [%d, %d]\n", (int)s, m, rows, cols);
        abort();
    }
}

void cuda_matmul(float *y, const float *x, const kb_weight *w, int m) {
    const int rows = w->rows, cols = w->cols;
    if (m <= 0 || rows <= 0) return;
    if (hold(y, x, w, m)) return;
    cu_begin();
    const void *dw = cu_in(w->data, (size_t)rows * (size_t)cols * kb_dtype_size(w->dt));
    const float *dx = (const float *)cu_in(x, (size_t)m * (size_t)cols * sizeof(float));
    float *dy = (float *)cu_out(y, (size_t)m * (size_t)rows * sizeof(float), 0);
    if (cols <= 0) {
        cu_check(cudaMemsetAsync(dy, 0, (size_t)m * (size_t)rows * sizeof(float), cu_stream()), "matmul");
    } else if (g_mode == MODE_CUBLAS) {
        gemm_cublas(dy, dx, dw, w->dt, m, rows, cols);
    } else {
        mm_set set;
        memset(&set, 0, sizeof set);
        set.n = 1;
        set.y[0] = dy;
        set.w[0] = dw;
        set.rows[0] = rows;
        launch_set(set, w->dt, dx, m, cols);
    }
    cu_end("matmul");
}
