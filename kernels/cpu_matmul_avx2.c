/* cpu_matmul_avx2.c — CPU backend: the AVX2 + FMA + F16C matmul block.
 * Compiled with -mavx2 -mfma -mf16c (CMakeLists.txt, this file only) and
 * called only when cpu_path_get() is CPU_PATH_AVX2 (cpu_matmul.c).
 * Owns: the AVX2 reduction order, which the scalar path copies exactly:
 *   y[i][j]: one 8-lane accumulator; lane l takes k ≡ l (mod 8) for
 *   k < cols − cols%8, acc = fma(x, w, acc) in increasing k;
 *   r = ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
 *   then r = fma(x, w, r) over the last cols%8 elements in increasing k.
 * Register tiles (16 ymm): R x rows × J weight rows, R·J accumulators plus
 * J converted weight vectors plus one x vector, R·J ≥ 8 independent fma
 * chains to cover the fma latency (4 cycles × 2 ports):
 *   R = 1..4 → J = 8, 4, 3, 3 (13–16 registers).
 * The last weight tile of a block repeats its last valid row instead of
 * reading past it (and drops the repeats), so every tile has full width.
 * Each k step prefetches the tile CPU_PF_TILES ahead (cpu_prefetch_x86.h). */
#include "backend.h"
#include "cpu_internal.h"

#if CPU_X86
#include <immintrin.h>
#include <math.h>
#include "cpu_prefetch_x86.h"

#define AI inline __attribute__((always_inline))
#define RMAX 4
#define JMAX 8

static AI __m256 wload8(const void *w, int k, kb_dtype dt) {
    switch (dt) {
    case KB_BF16: {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    case KB_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
    case KB_F32: break;
    }
    return _mm256_loadu_ps((const float *)w + k);
}

static AI float wget(const void *w, int k, kb_dtype dt) {
    switch (dt) {
    case KB_BF16: return cpu_bf16_to_f32(((const uint16_t *)w)[k]);
    case KB_F16: return cpu_f16_to_f32(((const uint16_t *)w)[k]);
    case KB_F32: break;
    }
    return ((const float *)w)[k];
}

static AI float hsum8(__m256 s) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* l + l+4 */
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));                                 /* t0+t2, t1+t3 */
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));                  /* u0+u1 */
}

/* y[r*ldy + j] for r < R, j < jn (≤ J): x rows at x + r*cols, weight row j at
 * w0 + j*ws. R and J are constants after inlining. */
static AI void tile(float *y, size_t ldy, const float *x, int cols, const char *w0, size_t ws, int R, int J,
                    int jn, kb_dtype dt, int pf_on) {
    const void *wr[JMAX];
#pragma GCC unroll 8
    for (int j = 0; j < J; j++) wr[j] = w0 + (size_t)(j < jn ? j : jn - 1) * ws;
    __m256 acc[RMAX][JMAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int j = 0; j < J; j++) acc[r][j] = _mm256_setzero_ps();
    int k = 0;
    /* the tile CPU_PF_TILES ahead (it may lie past the matrix: a prefetch
     * does not fault, and the address is formed as an integer) */
    const uintptr_t pf = (uintptr_t)w0 + (size_t)CPU_PF_TILES * J * ws;
    const size_t es = kb_dtype_size(dt);
    for (; k + 8 <= cols; k += 8) {
        if (pf_on) cpu_prefetch_span(pf + (size_t)k * J * es, (size_t)8 * J * es);
        __m256 wv[JMAX];
#pragma GCC unroll 8
        for (int j = 0; j < J; j++) wv[j] = wload8(wr[j], k, dt);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 xv = _mm256_loadu_ps(x + (size_t)r * cols + k);
#pragma GCC unroll 8
            for (int j = 0; j < J; j++) acc[r][j] = _mm256_fmadd_ps(xv, wv[j], acc[r][j]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * cols;
#pragma GCC unroll 8
        for (int j = 0; j < J; j++) {
            if (j >= jn) break;
            float s = hsum8(acc[r][j]);
            for (int kk = k; kk < cols; kk++) s = fmaf(xr[kk], wget(wr[j], kk, dt), s);
            y[(size_t)r * ldy + j] = s;
        }
    }
}

static AI void rows_tile(float *y, size_t ldy, const float *x, int cols, const char *w, size_t ws, int j0,
                         int j1, int R, int J, kb_dtype dt, int pf_on) {
    for (int j = j0; j < j1; j += J)
        tile(y + j, ldy, x, cols, w + (size_t)j * ws, ws, R, J, j1 - j < J ? j1 - j : J, dt, pf_on);
}

static AI void block(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt, int cols,
                     int j0, int j1) {
    size_t ws = (size_t)cols * kb_dtype_size(dt);
    for (int i = 0; i < m;) {
        /* Rows left ≤ RMAX: one tile; else, below 2·RMAX: two even tiles
         * (no slow 1-row remainder); else RMAX. Any split gives the same bits. */
        int left = m - i, R = left <= RMAX ? left : left < 2 * RMAX ? (left + 1) / 2 : RMAX;
        float *yi = y + (size_t)i * ldy;
        const float *xi = x + (size_t)i * cols;
        switch (R) {
        case 1: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 1, 8, dt, i == 0); break;
        case 2: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 2, 4, dt, i == 0); break;
        case 3: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 3, 3, dt, i == 0); break;
        default: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 4, 3, dt, i == 0); break;
        }
        i += R;
    }
}

static void block_f32(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_F32, cols, j0, j1);
}
static void block_bf16(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_BF16, cols, j0, j1);
}
static void block_f16(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_F16, cols, j0, j1);
}

void cpu_mm_block_avx2(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt, int cols,
                       int j0, int j1) {
    switch (dt) {
    case KB_F32: block_f32(y, ldy, x, m, w, cols, j0, j1); return;
    case KB_BF16: block_bf16(y, ldy, x, m, w, cols, j0, j1); return;
    case KB_F16: block_f16(y, ldy, x, m, w, cols, j0, j1); return;
    }
}
#endif
