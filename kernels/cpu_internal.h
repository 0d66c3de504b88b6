/* cpu_internal.h — what the CPU backend's files (cpu_*.c) share and nothing
 * else: exact scalar dtype widening, the SIMD path switch, the per-path
 * matmul entry points, and the thread pool's work-splitting call.
 * Not part of the backend interface; engine/ never includes it.
 *
 * SIMD paths are chosen at run time (cpu_dispatch.c), never by compiler
 * flags: the library is built for baseline x86-64, and the AVX2 and AVX-512
 * code lives in its own translation units compiled with per-file -m flags
 * (cpu_matmul_avx2.c, cpu_matmul_avx512.c) or in functions carrying a
 * target attribute (cpu_attention.c). Such code runs only after
 * cpu_path_get() said the CPU has it. */
#ifndef SPECBED_CPU_INTERNAL_H
#define SPECBED_CPU_INTERNAL_H
#include "backend.h"
#include "device_internal.h"   /* kb_dev_active: each kb_* call's branch to the CUDA backend */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

/* AVX512_BF16: the AVX-512 path with bf16 weights fed to vdpbf16ps (x
 * rounded to bf16; cpu_matmul_avx512.c), never chosen unless asked for;
 * every kernel but the matmul runs the AVX-512 code there. */
typedef enum { CPU_PATH_SCALAR = 0, CPU_PATH_AVX2 = 1, CPU_PATH_AVX512 = 2, CPU_PATH_AVX512_BF16 = 3 } cpu_path;

/* The path kernels use now (resolved on first call: the best this CPU has,
 * or what kb_set_cpu_path chose). */
cpu_path cpu_path_get(void);

static inline float cpu_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float cpu_f16_to_f32(uint16_t h);

#include "expf_internal.h"   /* kb_expf: e^x, shared with the CUDA kernels */

#if CPU_X86
#include <immintrin.h>
/* kb_expf on 8 lanes, the same operations lane by lane. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 cpu_exp8_avx2(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(KB_EXP_MIN)), _mm256_set1_ps(KB_EXP_MAX));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, z, r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    __m256i k = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, k), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, k), 23));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    e = _mm256_blendv_ps(e, _mm256_set1_ps((float)INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(KB_EXP_MAX), _CMP_GT_OQ));
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(KB_EXP_MIN), _CMP_LT_OQ));
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

/* ---- matmul, per path ------------------------------------------------------
 * y[i*ldy + j] = x[i]·w[j] for rows i < m of x (x[i] at x + i*cols) and
 * weight rows j in [j0, j1). Each path fixes one reduction order per output
 * element (documented in its file) that depends on nothing but cols. */
typedef void cpu_mm_block_fn(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt,
                             int cols, int j0, int j1);
cpu_mm_block_fn cpu_mm_block_scalar;
#if CPU_X86
cpu_mm_block_fn cpu_mm_block_avx2;
cpu_mm_block_fn cpu_mm_block_avx512;
cpu_mm_block_fn cpu_mm_block_avx512bf16;
#endif

/* ---- thread pool (cpu_pool.c) ----------------------------------------------
 * Runs fn(arg, chunk, slot) for every chunk in [0, n_chunks), each exactly
 * once, on the calling thread plus whichever pool workers are awake; returns
 * when all have run. slot < max_slots identifies the executing thread within
 * this call (0 = the caller), for per-thread scratch; at most max_slots
 * threads take part (max_slots ≤ 0: no limit beyond kb_threads()). A chunk is
 * always run whole by one thread. Called from inside a chunk, or while
 * another thread is using the pool, it runs every chunk on the calling
 * thread with slot 0. */
typedef void cpu_task_fn(void *arg, int chunk, int slot);
void cpu_parallel(cpu_task_fn *fn, void *arg, int n_chunks, int max_slots);

#endif
