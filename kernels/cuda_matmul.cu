/* cuda_matmul.cu — CUDA backend: y[m, rows] = x[m, cols] · Wᵀ.
 * Owns: the two matmul modes (backend.h kb_set_cuda_matmul) and loading
 * cuBLAS (dlopen, on first use of its mode, so a process that never asks
 * for it neither loads its ~600 MB of libraries nor needs them installed).
 *
 * "invariant" (default). Each output element y[i][j] is reduced by a group
 * of 8 consecutive lanes in exactly the CPU AVX2/scalar order
 * (cpu_matmul.c): lane l keeps one fma chain over k ≡ l (mod 8), k <
 * cols − cols%8, in increasing k; the 8 chains are combined by xor-shuffles
 * 4, 2, 1, which add ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) (IEEE addition
 * is commutative, so either lane of a pair gets the same bits); lane 0 then
 * runs the cols%8 tail with fma. The order depends on cols alone: not on
 * m, on the tile of x rows a row lands in (each row keeps its own
 * accumulator), on the block or on the GPU — so a row's result is the same
 * alone, among verify rows or beside other sequences, and equals the CPU's
 * AVX2/scalar result bit for bit (tests/test_cuda.c). Block: 256 threads =
 * 32 weight rows × 8 lanes; each weight row is read once per tile of up to
 * 8 x rows. Correct first: a lane loads one weight element per step; the
 * next step is 16-byte loads transposed across the group by shuffles (the
 * same chains), and a shared-memory x tile for prefill.
 *
 * "cublas". cublasGemmEx with fp32 accumulation. bf16/f16 weights need the
 * activations in the same type, so x is rounded to it first (as bf16
 * engines do; relative error ≤ 2⁻⁸ per activation for bf16, 2⁻¹¹ for
 * f16). cuBLAS chooses its kernel (and split-K) by shape: NOT
 * batch-invariant, and not the CPU's bits. For throughput measurements. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.cuh"

#define MM_ROWS_PER_BLOCK 32
#define MM_THREADS (MM_ROWS_PER_BLOCK * 8)

template <int DT>
__device__ __forceinline__ float wload(const void *w, size_t i) {
    if (DT == KB_BF16) return cu_bf16(((const uint16_t *)w)[i]);
    if (DT == KB_F16) return cu_f16(((const uint16_t *)w)[i]);
    return ((const float *)w)[i];
}

/* x rows [i0, i0 + min(MT, m − i0)) of blockIdx.y's tile × weight rows
 * [blockIdx.x · 32, +32). */
template <int DT, int MT>
__global__ void __launch_bounds__(MM_THREADS)
mm_invariant(float *__restrict__ y, const float *__restrict__ x, const void *__restrict__ w, int m, int rows,
             int cols) {
    const int lane = threadIdx.x & 7;
    const int j = blockIdx.x * MM_ROWS_PER_BLOCK + (threadIdx.x >> 3);
    const int i0 = blockIdx.y * MT;
    const int nr = m - i0 < MT ? m - i0 : MT;
    const bool live = j < rows;
    /* a dead group (past the last weight row) still computes, on the last
     * row, so that every lane of the warp takes part in the shuffles */
    const size_t wrow = (size_t)(live ? j : rows - 1) * (size_t)cols;
    const float *xt = x + (size_t)i0 * (size_t)cols;
    const int full = cols - cols % 8;
    float acc[MT];
#pragma unroll
    for (int r = 0; r < MT; r++) acc[r] = 0.0f;
#pragma unroll 4
    for (int k = lane; k < full; k += 8) {
        const float wk = wload<DT>(w, wrow + (size_t)k);
#pragma unroll
        for (int r = 0; r < MT; r++)
            if (r < nr) acc[r] = fmaf(xt[(size_t)r * cols + k], wk, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < MT; r++) {
        float v = acc[r];
        v = v + __shfl_xor_sync(0xffffffffu, v, 4);
        v = v + __shfl_xor_sync(0xffffffffu, v, 2);
        v = v + __shfl_xor_sync(0xffffffffu, v, 1);
        acc[r] = v;
    }
    if (lane != 0 || !live) return;
#pragma unroll
    for (int r = 0; r < MT; r++) {
        if (r >= nr) break;
        float v = acc[r];
        for (int k = full; k < cols; k++) v = fmaf(xt[(size_t)r * cols + k], wload<DT>(w, wrow + (size_t)k), v);
        y[(size_t)(i0 + r) * rows + j] = v;
    }
}

template <int DT>
static void launch_invariant(float *y, const float *x, const void *w, int m, int rows, int cols) {
    const unsigned gx = (unsigned)((rows + MM_ROWS_PER_BLOCK - 1) / MM_ROWS_PER_BLOCK);
    /* the tile height changes only how many rows share a weight read, never
     * a row's arithmetic */
    if (m == 1) CU_LAUNCH((mm_invariant<DT, 1>), dim3(gx, 1), MM_THREADS)(y, x, w, m, rows, cols);
    else CU_LAUNCH((mm_invariant<DT, 8>), dim3(gx, (unsigned)((m + 7) / 8)), MM_THREADS)(y, x, w, m, rows, cols);
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

enum { MODE_INVARIANT = 0, MODE_CUBLAS = 1 };
static int g_mode = MODE_INVARIANT;

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
    if (mode && !strcmp(mode, "cublas")) {
        if (load_cublas()) return -1;
        g_mode = MODE_CUBLAS;
        return 0;
    }
    return -1;
}

const char *cuda_matmul_mode(void) { return g_mode == MODE_CUBLAS ? "cublas" : "invariant"; }

__global__ void to_bf16(__nv_bfloat16 *d, const float *s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] = __float2bfloat16_rn(s[i]);
}
__global__ void to_f16(__half *d, const float *s, size_t n) {
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
    cu_begin();
    const void *dw = cu_in(w->data, (size_t)rows * (size_t)cols * kb_dtype_size(w->dt));
    const float *dx = (const float *)cu_in(x, (size_t)m * (size_t)cols * sizeof(float));
    float *dy = (float *)cu_out(y, (size_t)m * (size_t)rows * sizeof(float), 0);
    if (cols <= 0) {
        cu_check(cudaMemsetAsync(dy, 0, (size_t)m * (size_t)rows * sizeof(float), cu_stream()), "matmul");
    } else if (g_mode == MODE_CUBLAS) {
        gemm_cublas(dy, dx, dw, w->dt, m, rows, cols);
    } else {
        switch (w->dt) {
        case KB_F32: launch_invariant<KB_F32>(dy, dx, dw, m, rows, cols); break;
        case KB_BF16: launch_invariant<KB_BF16>(dy, dx, dw, m, rows, cols); break;
        case KB_F16: launch_invariant<KB_F16>(dy, dx, dw, m, rows, cols); break;
        }
    }
    cu_end("matmul");
}
