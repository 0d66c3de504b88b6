/* expf_internal.h — the kernels' e^x, one definition for the CPU kernels
 * (cpu_*.c, whose AVX2 version repeats it lane by lane) and the CUDA ones
 * (cuda_*.cu): the same operations in the same order give the same bits on
 * both, so the kernels that keep the CPU's order (SwiGLU, the MoE router's
 * path) give the CPU's bits, and the ones with their own order (attention,
 * the matmul) differ only by that order.
 * On the device fmaf is correctly rounded and rintf rounds half to even as
 * on the CPU, and the .cu files are built with --fmad=false. */
#ifndef SPECBED_EXPF_INTERNAL_H
#define SPECBED_EXPF_INTERNAL_H
#include <stdint.h>
#include <string.h>
#include <math.h>

#ifdef __device__   /* nvcc (and the CPU emulation of CUDA, tests/cuda_emu) */
#define KB_EXPF_FN __host__ __device__ __forceinline__
#else
#define KB_EXPF_FN static inline
#endif

/* e^x for the kernels' softmax (attention) and SiLU: Cephes expf's range
 * reduction and polynomial, written with explicit fmaf so that the 8-wide
 * AVX2 version below performs the same operations and gives the same bits
 * (scalar and AVX2 paths agree; a lane's result never depends on its
 * neighbours). Error ≤ 1.01 ulp, measured against exp() in double over every
 * float in [−87, 88.7] (libm's expf: 0.502 ulp); exact 1 at 0; 0 below
 * −103.28, +inf above 88.72, NaN stays NaN; results are rounded once into
 * the subnormal range. Vectorising the ~7,000 exp per row of the tiny model
 * (4 layers × 4 heads × 256 positions, plus SwiGLU) is why it is ours and
 * not libm's. */
#define KB_EXP_MAX 88.72283905206835f
#define KB_EXP_MIN (-103.278929903431851103f)
KB_EXPF_FN float kb_expf(float x) {
    if (x != x) return x;
    if (x > KB_EXP_MAX) {
        const uint32_t inf = 0x7f800000u;
        float y;
        memcpy(&y, &inf, 4);
        return y;
    }
    if (x < KB_EXP_MIN) return 0.0f;
    float n = rintf(x * 1.44269504088896341f);   /* x = n·ln2 + r, |r| ≤ ln2/2 */
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, z, r);
    p = p + 1.0f;
    /* × 2^n in two exact-power steps (n ∈ [−150, 128]: each half is a normal
     * power of two), so only the last product rounds. */
    int ni = (int)n, n1 = ni >> 1, n2 = ni - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    return (p * s1) * s2;
}

#endif
