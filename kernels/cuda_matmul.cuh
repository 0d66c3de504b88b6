/* cuda_matmul.cuh — what the matmul's two kernel files share (cuda_matmul.cu:
 * the modes, holding, the CUDA-core order mm_inv and cuBLAS;
 * cuda_matmul_tc.cu: the tensor-core order) and nothing else. */
#ifndef SPECBED_CUDA_MATMUL_CUH
#define SPECBED_CUDA_MATMUL_CUH
#include "cuda_internal.cuh"

/* Up to MM_SET weights of the same cols over the same x, one launch: the
 * blocks [b0[t], b0[t + 1]) are weight t's (a layer's q, k, v; gate, up;
 * the launcher fills b0). Each output's order is its mode's whatever the
 * set holds. */
#define MM_SET 4
struct mm_set {
    float *y[MM_SET];
    const void *w[MM_SET];
    int rows[MM_SET];
    int b0[MM_SET + 1];
    int n;
};

/* y_t = x · W_tᵀ for a set of bf16 weights on the tensor cores
 * (cuda_matmul_tc.cu), inside a bracket; every pointer the device's. */
void cuda_mm_tc_launch(mm_set set, const float *x, int m, int cols);
#endif
