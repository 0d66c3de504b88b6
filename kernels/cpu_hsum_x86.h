/* cpu_hsum_x86.h — the 8-lane horizontal sum, eight at a time: one
 * transposed tree that gives each lane group exactly the adds of the
 * single-vector tree a[l] + a[l+4], then + a[l+2], then + a[l+1] (so the
 * bits equal reducing each vector alone). Shared by the attention scores
 * (cpu_attention.c) and the AVX-512 matmul's outputs (cpu_matmul_avx512.c,
 * after folding each zmm to a ymm as v[l] + v[l+8]); the one reduction tree,
 * in one place. x86 only; include after immintrin.h. */
#ifndef SPECBED_CPU_HSUM_X86_H
#define SPECBED_CPU_HSUM_X86_H
#include <immintrin.h>

/* r[i] = sum of a[i]'s 8 lanes, by the tree above. */
static inline __attribute__((target("avx2"), always_inline)) __m256 cpu_hsum8x8(const __m256 a[8]) {
    __m256 t[4];
    for (int i = 0; i < 4; i++)   /* [t(a_2i) | t(a_2i+1)], t(a)[l] = a[l] + a[l+4] */
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
    /* u(a)[l] = t[l] + t[l+2]: [u0_0 u0_1 u2_0 u2_1 | u1_0 u1_1 u3_0 u3_1] and the same for 4..7 */
    __m256 u0 = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 u1 = _mm256_add_ps(_mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm256_shuffle_ps(t[2], t[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* r = u[0] + u[1]: [r0 r2 r4 r6 | r1 r3 r5 r7], then into order */
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#endif
