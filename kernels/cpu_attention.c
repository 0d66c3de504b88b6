/* cpu_attention.c — CPU backend: query rows attending over their paged KV
 * history, one row at a time (kb_attention_row) or a span of rows of one
 * sequence together (kb_attention_span).
 * Owns: the order of the three reductions of attention, all of them fixed
 * per (row, head) and independent of the batch, of the page layout, of the
 * SIMD path and of the span a row is computed in:
 *   score[p] = (q·k_p)·scale   — 8-lane fma over head_dim, fixed lane sum;
 *   softmax over p = 0..n_ctx−1 — max, exp (kb_expf), sum in double as
 *                                 4 partial sums (position p into sum p%4,
 *                                 in increasing p; then (s0+s1)+(s2+s3)),
 *                                 weights (float)(e/sum);
 *   out = Σ_p w_p·v_p           — fma per output element in position order.
 * Positions are visited in order whatever the page size, and a slot's data
 * does not depend on where its page sits, so the result is the same bits for
 * any page size or page placement (tests/test_kernels.c checks this).
 * The span kernel walks the positions once for all its rows: each K/V slot
 * is loaded once and used by every row (and every q head of its GQA group)
 * that sees it, while each (row, head) keeps its own scores and runs the
 * same sequence of operations as kb_attention_row — so a row's output is
 * bit-identical either way (tested).
 * The AVX2 helpers give the same bits as the scalar ones (same lanes, fmaf
 * is correctly rounded like vfmadd), so every path shares this contract.
 * Must not: split one (row, head)'s positions across threads (that would
 * change the reduction order); the span kernel parallelises across kv heads
 * and chunks of rows instead. */
#include "backend.h"
#include "cpu_internal.h"

#include <math.h>

#define SPAN_ROWS 8   /* rows per work item of kb_attention_span */

/* q·k over n = head_dim: lane l of one 8-wide accumulator takes k ≡ l mod 8
 * in increasing order; then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then the
 * n%8 tail with fma. */
static inline __attribute__((always_inline)) float dot_hd_scalar(const float *a, const float *b, int n) {
    int k = 0;
    float l[8] = {0};
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(a[k + j], b[k + j], l[j]);
    float r = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; k < n; k++) r = fmaf(a[k], b[k], r);
    return r;
}

/* o[d] = fma(w, v[d], o[d]) for every d: element-wise, so the SIMD width
 * does not change any element's result. */
static inline __attribute__((always_inline)) void axpy_hd_scalar(float *o, float w, const float *v, int n) {
    for (int d = 0; d < n; d++) o[d] = fmaf(w, v[d], o[d]);
}

#if CPU_X86
#include "cpu_hsum_x86.h"
#define AVX2_FN __attribute__((target("avx2,fma"), always_inline)) inline
static AVX2_FN float dot_hd_avx2(const float *a, const float *b, int n) {
    int k = 0;
    __m256 acc = _mm256_setzero_ps();
    for (; k + 8 <= n; k += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    float r = _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
    for (; k < n; k++) r = fmaf(a[k], b[k], r);
    return r;
}
static AVX2_FN void axpy_hd_avx2(float *o, float w, const float *v, int n) {
    int d = 0;
    __m256 wv = _mm256_set1_ps(w);
    for (; d + 8 <= n; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + d), _mm256_loadu_ps(o + d)));
    for (; d < n; d++) o[d] = fmaf(w, v[d], o[d]);
}
#endif

/* Rows [i0, i1) of a span × q heads [h0, h1) (all of one kv head). Row r
 * sees positions 0..n_ctx[r]−1; (row r, head h) keeps its scores at
 * sc + ((r−i0)·(h1−h0) + h−h0)·sc_stride. q/out: [rows, n_heads, head_dim]. */
#define DEFINE_ATTEND(NAME, ATTR, DOT, AXPY)                                                           \
    static ATTR void NAME(float *out, const float *q, const kb_kv_view *kv, const int *n_ctx, int i0, \
                          int i1, int n_heads, int h0, int h1, float scale, float *sc, size_t sc_stride) { \
        const int hd = kv->head_dim, ps = kv->page_size, nh = h1 - h0;                                 \
        const int group = n_heads / kv->n_kv_heads;                                                    \
        const size_t slot_stride = (size_t)kv->n_kv_heads * hd, page_stride = (size_t)ps * slot_stride; \
        const size_t head_off = (size_t)(h0 / group) * hd;                                             \
        const int nq = (i1 - i0) * nh;                                                                 \
        int pmax = 0;                                                                                  \
        for (int r = i0; r < i1; r++) pmax = n_ctx[r] > pmax ? n_ctx[r] : pmax;                        \
        float mx[nq];                                                                                  \
        double sum[nq];                                                                                \
        for (int v = 0; v < nq; v++) mx[v] = -INFINITY;                                                \
        for (int p = 0; p < pmax; p++) {                                                               \
            const float *k = kv->k_pages + (size_t)kv->pages[p / ps] * page_stride +                   \
                             (size_t)(p % ps) * slot_stride + head_off;                                \
            for (int r = i0; r < i1; r++) {                                                            \
                if (p >= n_ctx[r]) continue;                                                           \
                for (int h = h0; h < h1; h++) {                                                        \
                    int v = (r - i0) * nh + (h - h0);                                                  \
                    float s = DOT(q + ((size_t)r * n_heads + h) * hd, k, hd) * scale;                  \
                    sc[(size_t)v * sc_stride + p] = s;                                                 \
                    if (s > mx[v]) mx[v] = s;                                                          \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        for (int r = i0; r < i1; r++)                                                                  \
            for (int h = h0; h < h1; h++) {                                                            \
                int v = (r - i0) * nh + (h - h0);                                                      \
                float *s = sc + (size_t)v * sc_stride;                                                 \
                double t[4] = {0.0, 0.0, 0.0, 0.0};                                                    \
                for (int p = 0; p < n_ctx[r]; p++) {                                                   \
                    float e = kb_expf(s[p] - mx[v]);                                                  \
                    s[p] = e;                                                                          \
                    t[p % 4] += e;                                                                     \
                }                                                                                      \
                sum[v] = (t[0] + t[1]) + (t[2] + t[3]);                                                \
                float *o = out + ((size_t)r * n_heads + h) * hd;                                       \
                for (int d = 0; d < hd; d++) o[d] = 0.0f;                                              \
            }                                                                                          \
        for (int p = 0; p < pmax; p++) {                                                               \
            const float *vp = kv->v_pages + (size_t)kv->pages[p / ps] * page_stride +                  \
                              (size_t)(p % ps) * slot_stride + head_off;                               \
            for (int r = i0; r < i1; r++) {                                                            \
                if (p >= n_ctx[r]) continue;                                                           \
                for (int h = h0; h < h1; h++) {                                                        \
                    int v = (r - i0) * nh + (h - h0);                                                  \
                    AXPY(out + ((size_t)r * n_heads + h) * hd,                                         \
                         (float)(sc[(size_t)v * sc_stride + p] / sum[v]), vp, hd);                     \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
    }

DEFINE_ATTEND(attend_scalar, , dot_hd_scalar, axpy_hd_scalar)

#if CPU_X86
/* The AVX2 item: the same operations per (row, head) as attend_scalar, in
 * an order that uses the registers better.
 *   - Scores 8 positions at a time: 8 accumulators, each the same 8-lane fma
 *     sequence as dot_hd; then one transposed reduction whose adds are
 *     exactly hsum8's ((l+l4), then (+l2), then (+l1)) for each accumulator,
 *     so a score has the same bits batched or alone (positions that do not
 *     fill a batch of 8 use dot_hd_avx2).
 *   - max, exp, the 4 partial sums and the weights (float)(e/sum) are
 *     separate passes over the scores, 8 or 4 positions at a time, each
 *     element going through the same operations as in attend_scalar.
 *   - PV per output element is still fma(w_p, v_p, o) in increasing p; the
 *     outputs stay in registers for a block of PB positions instead of
 *     going through memory at every position.
 * Positions are walked in blocks of PB so that a block's K and V slots are
 * read from memory once and reused from L1 by every (row, head) of the item. */
#define PB 64

/* s[i] = (q·k_i)·scale for the 8 slots k_i: dot_hd's bits for each. */
static AVX2_FN void scores8(float *s, const float *q, const float *const k[8], int hd, float scale) {
    __m256 acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
    int d = 0;
    for (; d + 8 <= hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        for (int i = 0; i < 8; i++) acc[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[i] + d), acc[i]);
    }
    __m256 r = cpu_hsum8x8(acc);
    if (d < hd) {   /* the n%8 tail, per score, as dot_hd */
        float t[8];
        _mm256_storeu_ps(t, r);
        for (int i = 0; i < 8; i++)
            for (int e = d; e < hd; e++) t[i] = fmaf(q[e], k[i][e], t[i]);
        r = _mm256_loadu_ps(t);
    }
    _mm256_storeu_ps(s, _mm256_mul_ps(r, _mm256_set1_ps(scale)));
}

/* o[0..63] = fma(w_p, v_p[0..63], o) for p in [p0, p1), in registers. */
static AVX2_FN void pv64(float *o, const float *w, const float *const *v, int n) {
    __m256 acc[8];
    for (int i = 0; i < 8; i++) acc[i] = _mm256_loadu_ps(o + 8 * i);
    for (int p = 0; p < n; p++) {
        __m256 wv = _mm256_set1_ps(w[p]);
        for (int i = 0; i < 8; i++) acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(v[p] + 8 * i), acc[i]);
    }
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(o + 8 * i, acc[i]);
}

/* Two heads' outputs at once on the AVX-512 path: o_a, o_b [64] each, 4 zmm
 * apiece — 8 independent fma chains instead of one head's latency-bound 8
 * ymm. Element-wise fma in increasing p, so the same bits as pv64. */
__attribute__((target("avx512f"), noinline)) static void pv64x2_avx512(float *oa, float *ob, const float *wa,
                                                                       const float *wb,
                                                                       const float *const *v, int n) {
    __m512 a[4], b[4];
    for (int i = 0; i < 4; i++) {
        a[i] = _mm512_loadu_ps(oa + 16 * i);
        b[i] = _mm512_loadu_ps(ob + 16 * i);
    }
    for (int p = 0; p < n; p++) {
        __m512 x = _mm512_set1_ps(wa[p]), y = _mm512_set1_ps(wb[p]);
        for (int i = 0; i < 4; i++) {
            __m512 vv = _mm512_loadu_ps(v[p] + 16 * i);
            a[i] = _mm512_fmadd_ps(x, vv, a[i]);
            b[i] = _mm512_fmadd_ps(y, vv, b[i]);
        }
    }
    for (int i = 0; i < 4; i++) {
        _mm512_storeu_ps(oa + 16 * i, a[i]);
        _mm512_storeu_ps(ob + 16 * i, b[i]);
    }
}

static __attribute__((target("avx2,fma"), always_inline)) inline void attend_avx2_body(float *out, const float *q, const kb_kv_view *kv,
                                                            const int *n_ctx, int i0, int i1, int n_heads,
                                                            int h0, int h1, float scale, float *sc,
                                                            size_t sc_stride, int use512) {
    const int hd = kv->head_dim, ps = kv->page_size, nh = h1 - h0;
    const int group = n_heads / kv->n_kv_heads;
    const size_t slot_stride = (size_t)kv->n_kv_heads * hd, page_stride = (size_t)ps * slot_stride;
    const size_t head_off = (size_t)(h0 / group) * hd;
    int pmax = 0;
    for (int r = i0; r < i1; r++) pmax = n_ctx[r] > pmax ? n_ctx[r] : pmax;
    const float *ks[PB], *vs[PB];

    /* scores */
    for (int pb = 0; pb < pmax; pb += PB) {
        int pe = pb + PB < pmax ? pb + PB : pmax;
        for (int p = pb; p < pe; p++)
            ks[p - pb] = kv->k_pages + (size_t)kv->pages[p / ps] * page_stride + (size_t)(p % ps) * slot_stride +
                         head_off;
        for (int r = i0; r < i1; r++) {
            int re = n_ctx[r] < pe ? n_ctx[r] : pe;
            for (int h = h0; h < h1; h++) {
                const float *qh = q + ((size_t)r * n_heads + h) * hd;
                float *s = sc + (size_t)((r - i0) * nh + (h - h0)) * sc_stride;
                int p = pb;
                for (; p + 8 <= re; p += 8) scores8(s + p, qh, ks + (p - pb), hd, scale);
                for (; p < re; p++) s[p] = dot_hd_avx2(qh, ks[p - pb], hd) * scale;
            }
        }
    }
    /* softmax weights, and zeroed outputs */
    for (int r = i0; r < i1; r++)
        for (int h = h0; h < h1; h++) {
            float *s = sc + (size_t)((r - i0) * nh + (h - h0)) * sc_stride;
            const int n = n_ctx[r];
            /* The max's value does not depend on the order (only which of
             * ±0 wins, and exp(s − (±0)) is the same), so 8 lanes may find it. */
            __m256 m8 = _mm256_set1_ps(-INFINITY);
            int p = 0;
            for (; p + 8 <= n; p += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + p));
            float ml[8], mx = -INFINITY;
            _mm256_storeu_ps(ml, m8);
            for (int l = 0; l < 8; l++)
                if (ml[l] > mx) mx = ml[l];
            for (; p < n; p++)
                if (s[p] > mx) mx = s[p];
            for (p = 0; p + 8 <= n; p += 8)
                _mm256_storeu_ps(s + p, cpu_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + p), _mm256_set1_ps(mx))));
            for (; p < n; p++) s[p] = kb_expf(s[p] - mx);
            /* t[p % 4] += e in increasing p, as attend_scalar */
            __m256d t4 = _mm256_setzero_pd();
            for (p = 0; p + 4 <= n; p += 4) t4 = _mm256_add_pd(t4, _mm256_cvtps_pd(_mm_loadu_ps(s + p)));
            double t[4];
            _mm256_storeu_pd(t, t4);
            for (; p < n; p++) t[p % 4] += s[p];
            const double sum = (t[0] + t[1]) + (t[2] + t[3]);
            const __m256d sum4 = _mm256_set1_pd(sum);
            for (p = 0; p + 4 <= n; p += 4)
                _mm_storeu_ps(s + p, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm_loadu_ps(s + p)), sum4)));
            for (; p < n; p++) s[p] = (float)(s[p] / sum);
            float *o = out + ((size_t)r * n_heads + h) * hd;
            for (int d = 0; d < hd; d++) o[d] = 0.0f;
        }
    /* out = Σ_p w_p·v_p */
    for (int pb = 0; pb < pmax; pb += PB) {
        int pe = pb + PB < pmax ? pb + PB : pmax;
        for (int p = pb; p < pe; p++)
            vs[p - pb] = kv->v_pages + (size_t)kv->pages[p / ps] * page_stride + (size_t)(p % ps) * slot_stride +
                         head_off;
        for (int r = i0; r < i1; r++) {
            int re = n_ctx[r] < pe ? n_ctx[r] : pe;
            if (re <= pb) continue;
            for (int h = h0; h < h1; h++) {
                const float *w = sc + (size_t)((r - i0) * nh + (h - h0)) * sc_stride;
                float *o = out + ((size_t)r * n_heads + h) * hd;
                int d = 0;
                if (use512 && h + 1 < h1) {   /* heads h, h+1 of this row together */
                    const float *w2 = w + sc_stride;
                    float *o2 = o + hd;
                    for (; d + 64 <= hd; d += 64) {
                        const float *vd[PB];
                        for (int p = pb; p < re; p++) vd[p - pb] = vs[p - pb] + d;
                        pv64x2_avx512(o + d, o2 + d, w + pb, w2 + pb, vd, re - pb);
                    }
                    if (d < hd)
                        for (int p = pb; p < re; p++) {
                            axpy_hd_avx2(o + d, w[p], vs[p - pb] + d, hd - d);
                            axpy_hd_avx2(o2 + d, w2[p], vs[p - pb] + d, hd - d);
                        }
                    h++;
                    continue;
                }
                for (; d + 64 <= hd; d += 64) {
                    const float *vd[PB];
                    for (int p = pb; p < re; p++) vd[p - pb] = vs[p - pb] + d;
                    pv64(o + d, w + pb, vd, re - pb);
                }
                if (d < hd)
                    for (int p = pb; p < re; p++) axpy_hd_avx2(o + d, w[p], vs[p - pb] + d, hd - d);
            }
        }
    }
}
static __attribute__((target("avx2,fma"))) void attend_avx2(float *out, const float *q, const kb_kv_view *kv,
                                                            const int *n_ctx, int i0, int i1, int n_heads,
                                                            int h0, int h1, float scale, float *sc,
                                                            size_t sc_stride) {
    attend_avx2_body(out, q, kv, n_ctx, i0, i1, n_heads, h0, h1, scale, sc, sc_stride, 0);
}
static __attribute__((target("avx2,fma"))) void attend_avx512(float *out, const float *q, const kb_kv_view *kv,
                                                              const int *n_ctx, int i0, int i1, int n_heads,
                                                              int h0, int h1, float scale, float *sc,
                                                              size_t sc_stride) {
    attend_avx2_body(out, q, kv, n_ctx, i0, i1, n_heads, h0, h1, scale, sc, sc_stride, 1);
}
#endif

typedef void attend_fn(float *out, const float *q, const kb_kv_view *kv, const int *n_ctx, int i0, int i1,
                       int n_heads, int h0, int h1, float scale, float *sc, size_t sc_stride);

static attend_fn *attend_for_path(void) {
#if CPU_X86
    if (cpu_path_get() == CPU_PATH_AVX512 || cpu_path_get() == CPU_PATH_AVX512_BF16) return attend_avx512;
    if (cpu_path_get() == CPU_PATH_AVX2) return attend_avx2;
#endif
    return attend_scalar;
}

void kb_attention_row(float *out, const float *q, const kb_kv_view *kv, int n_ctx,
                      int n_heads, float scale, float *scratch) {
    if (kb_dev_active) { kb_dev_active->attention(out, q, kv, 1, &n_ctx, n_heads, scale); return; }
    attend_fn *fn = attend_for_path();
    for (int h = 0; h < n_heads; h++) fn(out, q, kv, &n_ctx, 0, 1, n_heads, h, h + 1, scale, scratch, 0);
}

/* ---- spans ---------------------------------------------------------------- */

typedef struct {
    attend_fn *fn;
    float *out;
    const float *q;
    const kb_kv_view *kv;
    const int *n_ctx;
    int n_q, n_heads, rows_per_item, n_row_chunks;
    float scale;
    float *scratch;
    size_t slot_floats, stride;
} span_job;

/* Item c: kv head c / n_row_chunks, rows of chunk c % n_row_chunks. */
static void span_item(void *vp, int c, int slot) {
    const span_job *j = vp;
    int g = c / j->n_row_chunks, rc = c % j->n_row_chunks;
    int group = j->n_heads / j->kv->n_kv_heads;
    int i0 = rc * j->rows_per_item, i1 = i0 + j->rows_per_item < j->n_q ? i0 + j->rows_per_item : j->n_q;
    j->fn(j->out, j->q, j->kv, j->n_ctx, i0, i1, j->n_heads, g * group, (g + 1) * group, j->scale,
          j->scratch + (size_t)slot * j->slot_floats, j->stride);
}

void kb_attention_spans(float *out, const float *q, const kb_kv_view *views, const int *span_rows, int n_spans,
                        const int *n_ctx, int n_heads, float scale, float *scratch, size_t scratch_floats) {
    if (n_spans <= 0) return;
    if (kb_dev_active) {
        kb_dev_active->attention_spans(out, q, views, span_rows, n_spans, n_ctx, n_heads, scale);
        return;
    }
    const size_t Q = (size_t)n_heads * (size_t)views[0].head_dim;
    for (int s = 0, r = 0; s < n_spans; r += span_rows[s++])
        kb_attention_span(out + (size_t)r * Q, q + (size_t)r * Q, &views[s], span_rows[s], n_ctx + r, n_heads, scale,
                          scratch, scratch_floats);
}

size_t kb_attention_span_scratch(int n_heads, int n_kv_heads, int max_ctx) {
    /* the CUDA kernel keeps its scores in device memory of its own; the
     * contract's minimum keeps the caller's (managed) buffer small */
    if (kb_dev_active) return (size_t)(max_ctx > 1 ? max_ctx : 1);
    int group = n_kv_heads > 0 ? n_heads / n_kv_heads : 1;
    if (group < 1) group = 1;
    return (size_t)kb_threads() * SPAN_ROWS * (size_t)group * (size_t)(max_ctx > 1 ? max_ctx : 1);
}

void kb_attention_span(float *out, const float *q, const kb_kv_view *kv, int n_q, const int *n_ctx,
                       int n_heads, float scale, float *scratch, size_t scratch_floats) {
    if (n_q <= 0) return;
    if (kb_dev_active) { kb_dev_active->attention(out, q, kv, n_q, n_ctx, n_heads, scale); return; }
    attend_fn *fn = attend_for_path();
    const int n_kv = kv->n_kv_heads, group = n_heads / n_kv;
    int max_ctx = 1;
    for (int r = 0; r < n_q; r++) max_ctx = n_ctx[r] > max_ctx ? n_ctx[r] : max_ctx;
    const size_t stride = (size_t)max_ctx;
    const size_t fit = scratch_floats / stride;   /* (row, head) score rows that fit */
    int R = n_q < SPAN_ROWS ? n_q : SPAN_ROWS;
    int threads = kb_threads();
    /* Shrink the rows per item, then the threads, until the slots fit. */
    for (;;) {
        int items = n_kv * ((n_q + R - 1) / R);
        int t = threads < items ? threads : items;
        if ((size_t)t * R * group <= fit || R == 1) break;
        R = (R + 1) / 2;
    }
    size_t slot_floats = (size_t)R * group * stride;
    size_t slots = fit / ((size_t)R * group);
    if (slots == 0) {   /* less than one kv group's scores: a head at a time, as kb_attention_row */
        for (int r = 0; r < n_q; r++)
            for (int h = 0; h < n_heads; h++)
                fn(out, q, kv, n_ctx, r, r + 1, n_heads, h, h + 1, scale, scratch, 0);
        return;
    }
    span_job job = {.fn = fn, .out = out, .q = q, .kv = kv, .n_ctx = n_ctx, .n_q = n_q, .n_heads = n_heads,
                    .rows_per_item = R, .n_row_chunks = (n_q + R - 1) / R, .scale = scale, .scratch = scratch,
                    .slot_floats = slot_floats, .stride = stride};
    cpu_parallel(span_item, &job, n_kv * job.n_row_chunks, slots < (size_t)threads ? (int)slots : threads);
}
