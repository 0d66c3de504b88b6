/* cpu_matmul.c — CPU backend: y[m, rows] = x[m, cols] · Wᵀ, the hot path.
 * Owns: the one reduction order that defines every output element.
 * Must not: call BLAS (OpenBLAS switches kernels and blocking with m, which
 * would make a row's result depend on how many rows share the call —
 * DESIGN §4), or let any per-element operation depend on m, on the tile a
 * row lands in, or on the thread that computes it.
 *
 * The reduction contract for y[i][j] = Σ_k x[i][k]·w[j][k] (both paths):
 *   - 4 accumulators × 8 lanes. Element k of the leading cols - cols%32
 *     goes to accumulator (k/8)%4, lane k%8; after those, each remaining
 *     full group of 8 goes to accumulator 0, 1, 2 in turn.
 *     Each lane does acc = fma(x, w, acc) in increasing k.
 *   - s[l] = (acc0[l] + acc1[l]) + (acc2[l] + acc3[l]);
 *     r = ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)).
 *   - the last cols%8 elements: r = fma(x, w, r) in increasing k.
 * A tile of 4 x rows shares each weight load (the win for prefill and
 * verify), but every row keeps its own accumulators and goes through the
 * same fma sequence as a row computed alone, so tiling changes speed only.
 * The scalar path follows the same contract with fmaf (correctly rounded,
 * like the vfmadd instruction), so it gives the same bits as the AVX2 one.
 * -ffp-contract=off (set globally) stops the compiler fusing the adds. */
#include "backend.h"
#include "cpu_internal.h"

#include <math.h>

#define TILE 4   /* x rows per weight-row load */
#define JBLK 16  /* weight rows per parallel work item */
#define PAR_MIN_WORK 65536  /* m·rows·cols below this: one thread (less overhead) */

static inline __attribute__((always_inline)) float wget(const void *w, int k, kb_dtype dt) {
    switch (dt) {
    case KB_BF16: return cpu_bf16_to_f32(((const uint16_t *)w)[k]);
    case KB_F16: return cpu_f16_to_f32(((const uint16_t *)w)[k]);
    case KB_F32: break;
    }
    return ((const float *)w)[k];
}

#if CPU_AVX2
static inline __attribute__((always_inline)) __m256 wload8(const void *w, int k, kb_dtype dt) {
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

static inline __attribute__((always_inline)) float hsum8(__m256 s) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* s[l]+s[l+4] */
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));                                 /* t0+t2, t1+t3 */
    return _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));                  /* u0+u1 */
}

/* out[r] = x[r]·w for r < nr (nr is TILE or 1, a constant after inlining). */
static inline __attribute__((always_inline))
void dot_rows(float *out, const float *x, int nr, const void *w, kb_dtype dt, int cols) {
    __m256 acc[TILE][4];
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        for (int a = 0; a < 4; a++) acc[r][a] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 32 <= cols; k += 32) {
        __m256 w0 = wload8(w, k, dt), w1 = wload8(w, k + 8, dt);
        __m256 w2 = wload8(w, k + 16, dt), w3 = wload8(w, k + 24, dt);
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            const float *xr = x + (size_t)r * cols + k;
            acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xr), w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 8), w1, acc[r][1]);
            acc[r][2] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 16), w2, acc[r][2]);
            acc[r][3] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 24), w3, acc[r][3]);
        }
    }
    for (int a = 0; k + 8 <= cols; k += 8, a++) {
        __m256 wv = wload8(w, k, dt);
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++)
            acc[r][a] = _mm256_fmadd_ps(_mm256_loadu_ps(x + (size_t)r * cols + k), wv, acc[r][a]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
        __m256 s = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),
                                 _mm256_add_ps(acc[r][2], acc[r][3]));
        float res = hsum8(s);
        const float *xr = x + (size_t)r * cols;
        for (int kk = k; kk < cols; kk++) res = fmaf(xr[kk], wget(w, kk, dt), res);
        out[r] = res;
    }
}
#endif

/* The same contract in portable C; used when AVX2/FMA/F16C are absent.
 * Always compiled (unused attribute) so it is kept building. */
static inline __attribute__((always_inline, unused))
void dot_rows_scalar(float *out, const float *x, int nr, const void *w, kb_dtype dt, int cols) {
    for (int r = 0; r < nr; r++) {
        const float *xr = x + (size_t)r * cols;
        float acc[4][8] = {{0}};
        int k = 0;
        for (; k + 32 <= cols; k += 32)
            for (int a = 0; a < 4; a++)
                for (int l = 0; l < 8; l++)
                    acc[a][l] = fmaf(xr[k + a * 8 + l], wget(w, k + a * 8 + l, dt), acc[a][l]);
        for (int a = 0; k + 8 <= cols; k += 8, a++)
            for (int l = 0; l < 8; l++) acc[a][l] = fmaf(xr[k + l], wget(w, k + l, dt), acc[a][l]);
        float s[8];
        for (int l = 0; l < 8; l++) s[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
        float t0 = s[0] + s[4], t1 = s[1] + s[5], t2 = s[2] + s[6], t3 = s[3] + s[7];
        float res = (t0 + t2) + (t1 + t3);
        for (; k < cols; k++) res = fmaf(xr[k], wget(w, k, dt), res);
        out[r] = res;
    }
}

/* Weight rows [j0, j1) against every x row: tiles of TILE rows, then the
 * leftover rows one at a time — through the same per-row contract. */
static inline __attribute__((always_inline))
void matmul_block(float *y, const float *x, const void *wdata, int rows, int cols, int m,
                  int j0, int j1, kb_dtype dt) {
    size_t wrow_bytes = (size_t)cols * kb_dtype_size(dt);
    float o[TILE];
    int i = 0;
    for (; i + TILE <= m; i += TILE)
        for (int j = j0; j < j1; j++) {
            const void *wr = (const char *)wdata + (size_t)j * wrow_bytes;
#if CPU_AVX2
            dot_rows(o, x + (size_t)i * cols, TILE, wr, dt, cols);
#else
            dot_rows_scalar(o, x + (size_t)i * cols, TILE, wr, dt, cols);
#endif
            for (int r = 0; r < TILE; r++) y[(size_t)(i + r) * rows + j] = o[r];
        }
    for (; i < m; i++)
        for (int j = j0; j < j1; j++) {
            const void *wr = (const char *)wdata + (size_t)j * wrow_bytes;
#if CPU_AVX2
            dot_rows(o, x + (size_t)i * cols, 1, wr, dt, cols);
#else
            dot_rows_scalar(o, x + (size_t)i * cols, 1, wr, dt, cols);
#endif
            y[(size_t)i * rows + j] = o[0];
        }
}

/* One specialisation per dtype so the dtype switch folds away inside the
 * inner loops. Parallel over blocks of weight rows: each output element is
 * computed whole by one thread, so the thread count never changes a bit. */
#define DEFINE_MATMUL(NAME, DT)                                                          \
    static void NAME(float *y, const float *x, const void *w, int rows, int cols, int m) { \
        int nblk = (rows + JBLK - 1) / JBLK;                                             \
        int par = (double)m * rows * cols >= PAR_MIN_WORK;                               \
        _Pragma("omp parallel for schedule(static) if(par)")                            \
        for (int b = 0; b < nblk; b++) {                                                 \
            int j0 = b * JBLK, j1 = j0 + JBLK < rows ? j0 + JBLK : rows;                 \
            matmul_block(y, x, w, rows, cols, m, j0, j1, DT);                            \
        }                                                                                \
    }
DEFINE_MATMUL(matmul_f32, KB_F32)
DEFINE_MATMUL(matmul_bf16, KB_BF16)
DEFINE_MATMUL(matmul_f16, KB_F16)

void kb_matmul(float *y, const float *x, const kb_weight *w, int m) {
    if (m <= 0 || w->rows <= 0) return;
    switch (w->dt) {
    case KB_F32: matmul_f32(y, x, w->data, w->rows, w->cols, m); return;
    case KB_BF16: matmul_bf16(y, x, w->data, w->rows, w->cols, m); return;
    case KB_F16: matmul_f16(y, x, w->data, w->rows, w->cols, m); return;
    }
}
