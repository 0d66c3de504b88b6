/* cpu_matmul_avx512.c — CPU backend: the AVX-512 matmul block.
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mavx2 -mfma
 * -mf16c (CMakeLists.txt, this file only) and called only when
 * cpu_path_get() is CPU_PATH_AVX512 or, for cpu_mm_block_avx512bf16,
 * CPU_PATH_AVX512_BF16 (cpu_matmul.c). Only the _mm512_dpbf16_ps and
 * _mm512_cvtne2ps_pbh intrinsics emit BF16 instructions (the compiler does
 * not turn f32 code into them), and only cpu_mm_block_avx512bf16 reaches
 * those.
 * Owns: the AVX-512 reduction order (not the AVX2/scalar one: results
 * differ from those paths in the last bits, and tests say so):
 *   y[i][j]: one 16-lane accumulator; lane l takes k ≡ l (mod 16) for every
 *   k < cols, acc = fma(x, w, acc) in increasing k (the last cols%16
 *   elements in one masked step: lanes ≥ cols%16 are left as they are);
 *   then a fixed tree: a[l] = v[l] + v[l+8] (l < 8), b[l] = a[l] + a[l+4],
 *   c[l] = b[l] + b[l+2], r = c[0] + c[1] — eight outputs at a time through
 *   one transposed tree (cpu_hsum_x86.h) with exactly those adds.
 * bf16 weights are widened exactly (a shift) on this path. The separate
 * path "avx512bf16" (CPU_PATH_AVX512_BF16, chosen only when asked for) feeds
 * bf16 weights to vdpbf16ps instead, which needs x in bf16 too:
 *   x rounded to bf16 (round to nearest even, vcvtne2ps2bf16); lane l takes
 *   the pairs k = 32t + 2l, 32t + 2l + 1 for t increasing, each pair added
 *   into the f32 accumulator by the CPU's vdpbf16ps (both products are exact
 *   in f32; their two roundings, denormals flushed, in the order the CPU
 *   implements); the tail cols%32 with both operands zeroed beyond cols;
 *   then the same tree as above.
 * That leaves the f32 numerics (|error| up to 2⁻⁸·Σ|x·w| from rounding x,
 * against γ_n·Σ|x·w|), so it never is the default: it is the speed of the
 * BF16 units (1.4–1.5x the widened FMAs for 4–48 rows on this project's EPYC,
 * bench/RECORD.md) for whoever accepts bf16 activations, as bf16 serving
 * stacks do. Rows stay invariant on it (one order per output, whatever the
 * batch). f32 and f16 weights take the widened path on it unchanged.
 * Register tiles (32 zmm): R x rows × J weight rows, R·J accumulators plus
 * J converted weight vectors plus one x vector (≤ 31 registers), with
 * R·J ≥ 8 independent fma chains (latency 4 × 2 ports):
 *   R = 1..6 → J = 8, 8, 6, 6, 4, 4 (7×3 and 8×3 measured at half the rate).
 * The last weight tile of a block repeats its last valid row instead of
 * reading past it (and drops the repeats), so every tile has full width.
 * Each k step prefetches the tile CPU_PF_TILES ahead (cpu_prefetch_x86.h). */
#include "backend.h"
#include "cpu_internal.h"

#if CPU_X86
#include <immintrin.h>
#include "cpu_hsum_x86.h"
#include "cpu_prefetch_x86.h"

#define AI inline __attribute__((always_inline))
#define RMAX 6
#define JMAX 8

static AI __m512 wload16(const void *w, int k, kb_dtype dt) {
    switch (dt) {
    case KB_BF16: {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case KB_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k)));
    case KB_F32: break;
    }
    return _mm512_loadu_ps((const float *)w + k);
}

/* Lanes outside mk read nothing (masked loads do not fault) and are zero. */
static AI __m512 wload16_mask(const void *w, int k, kb_dtype dt, __mmask16 mk) {
    switch (dt) {
    case KB_BF16: {
        __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t *)w + k);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case KB_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, (const uint16_t *)w + k));
    case KB_F32: break;
    }
    return _mm512_maskz_loadu_ps(mk, (const float *)w + k);
}

static AI float hsum16(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 a = _mm256_add_ps(lo, hi);                                               /* v[l] + v[l+8] */
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)); /* a[l] + a[l+4] */
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));                                  /* b[l] + b[l+2] */
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));                   /* c0 + c1 */
}

/* y[r*ldy + j] for r < R, j < jn (≤ J): x rows at x + r*cols, weight row j at
 * w0 + j*ws. R and J are constants after inlining. */
static AI void tile(float *y, size_t ldy, const float *x, int cols, const char *w0, size_t ws, int R, int J,
                    int jn, kb_dtype dt, int dp, int pf_on) {
    const void *wr[JMAX];
#pragma GCC unroll 8
    for (int j = 0; j < J; j++) wr[j] = w0 + (size_t)(j < jn ? j : jn - 1) * ws;
    __m512 acc[RMAX][JMAX];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int j = 0; j < J; j++) acc[r][j] = _mm512_setzero_ps();
    int k = 0;
    /* the tile CPU_PF_TILES ahead (it may lie past the matrix: a prefetch
     * does not fault, and the address is formed as an integer) */
    const uintptr_t pf = (uintptr_t)w0 + (size_t)CPU_PF_TILES * J * ws;
    const size_t es = kb_dtype_size(dt);
    if (dp) {   /* bf16 weights on the avx512bf16 path: 32 products per instruction */
        for (; k + 32 <= cols; k += 32) {
            if (pf_on) cpu_prefetch_span(pf + (size_t)k * J * es, (size_t)32 * J * es);
            __m512bh wv[JMAX];
#pragma GCC unroll 8
            for (int j = 0; j < J; j++) wv[j] = (__m512bh)_mm512_loadu_si512((const uint16_t *)wr[j] + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const float *xr = x + (size_t)r * cols + k;
                __m512bh xv = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + 16), _mm512_loadu_ps(xr));
#pragma GCC unroll 8
                for (int j = 0; j < J; j++) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], xv, wv[j]);
            }
        }
        if (k < cols) {
            int n = cols - k;   /* 1..31 */
            __mmask32 mw = (__mmask32)((1u << n) - 1);
            __mmask16 mlo = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
            __mmask16 mhi = (__mmask16)(n <= 16 ? 0 : (1u << (n - 16)) - 1);
            __m512bh wv[JMAX];
#pragma GCC unroll 8
            for (int j = 0; j < J; j++) wv[j] = (__m512bh)_mm512_maskz_loadu_epi16(mw, (const uint16_t *)wr[j] + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const float *xr = x + (size_t)r * cols + k;
                __m512bh xv = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mhi, xr + 16), _mm512_maskz_loadu_ps(mlo, xr));
#pragma GCC unroll 8
                for (int j = 0; j < J; j++) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], xv, wv[j]);
            }
        }
        k = cols;
    }
    for (; k + 16 <= cols; k += 16) {
        if (pf_on) cpu_prefetch_span(pf + (size_t)k * J * es, (size_t)16 * J * es);
        __m512 wv[JMAX];
#pragma GCC unroll 8
        for (int j = 0; j < J; j++) wv[j] = wload16(wr[j], k, dt);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)r * cols + k);
#pragma GCC unroll 8
            for (int j = 0; j < J; j++) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
        }
    }
    if (k < cols) {
        __mmask16 mk = (__mmask16)((1u << (cols - k)) - 1);
        __m512 wv[JMAX];
#pragma GCC unroll 8
        for (int j = 0; j < J; j++) wv[j] = wload16_mask(wr[j], k, dt, mk);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_maskz_loadu_ps(mk, x + (size_t)r * cols + k);
#pragma GCC unroll 8
            for (int j = 0; j < J; j++) acc[r][j] = _mm512_mask3_fmadd_ps(xv, wv[j], acc[r][j], mk);
        }
    }
    /* The reductions, 8 outputs at a time: each zmm folded to a ymm
     * (v[l] + v[l+8]), then one transposed tree (cpu_hsum8x8) — hsum16's
     * adds for every output, bit for bit, at about half the shuffles (one per
     * output was ~15% of a cols-256 matmul); the rest one by one. */
    float out[RMAX * JMAX];
    int i = 0;
#pragma GCC unroll 6
    for (; i + 8 <= R * J; i += 8) {
        __m256 a[8];
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            __m512 v = acc[(i + q) / J][(i + q) % J];
            a[q] = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        }
        _mm256_storeu_ps(out + i, cpu_hsum8x8(a));
    }
#pragma GCC unroll 8
    for (; i < R * J; i++) out[i] = hsum16(acc[i / J][i % J]);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int j = 0; j < J; j++)
            if (j < jn) y[(size_t)r * ldy + j] = out[r * J + j];
}

static AI void rows_tile(float *y, size_t ldy, const float *x, int cols, const char *w, size_t ws, int j0,
                         int j1, int R, int J, kb_dtype dt, int dp, int pf_on) {
    for (int j = j0; j < j1; j += J)
        tile(y + j, ldy, x, cols, w + (size_t)j * ws, ws, R, J, j1 - j < J ? j1 - j : J, dt, dp, pf_on);
}

static AI void block(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt, int cols,
                     int j0, int j1, int dp) {
    size_t ws = (size_t)cols * kb_dtype_size(dt);
    for (int i = 0; i < m;) {
        /* Rows left ≤ RMAX: one tile; else, below 2·RMAX: two even tiles
         * (no slow 1-row remainder); else RMAX. Any split gives the same bits. */
        int left = m - i, R = left <= RMAX ? left : left < 2 * RMAX ? (left + 1) / 2 : RMAX;
        float *yi = y + (size_t)i * ldy;
        const float *xi = x + (size_t)i * cols;
        switch (R) {
        case 1: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 1, 8, dt, dp, i == 0); break;
        case 2: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 2, 8, dt, dp, i == 0); break;
        case 3: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 3, 6, dt, dp, i == 0); break;
        case 4: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 4, 6, dt, dp, i == 0); break;
        case 5: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 5, 4, dt, dp, i == 0); break;
        default: rows_tile(yi, ldy, xi, cols, w, ws, j0, j1, 6, 4, dt, dp, i == 0); break;
        }
        i += R;
    }
}

static void block_f32(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_F32, cols, j0, j1, 0);
}
static void block_bf16(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_BF16, cols, j0, j1, 0);
}
static void block_f16(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_F16, cols, j0, j1, 0);
}
static void block_bf16_dp(float *y, size_t ldy, const float *x, int m, const void *w, int cols, int j0, int j1) {
    block(y, ldy, x, m, w, KB_BF16, cols, j0, j1, 1);
}

void cpu_mm_block_avx512(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt, int cols,
                         int j0, int j1) {
    switch (dt) {
    case KB_F32: block_f32(y, ldy, x, m, w, cols, j0, j1); return;
    case KB_BF16: block_bf16(y, ldy, x, m, w, cols, j0, j1); return;
    case KB_F16: block_f16(y, ldy, x, m, w, cols, j0, j1); return;
    }
}

void cpu_mm_block_avx512bf16(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt, int cols,
                             int j0, int j1) {
    if (dt == KB_BF16) block_bf16_dp(y, ldy, x, m, w, cols, j0, j1);
    else cpu_mm_block_avx512(y, ldy, x, m, w, dt, cols, j0, j1);
}
#endif
