/* cpu_attention.c — CPU backend: one query row attending over its paged KV
 * history.
 * Owns: the order of the three reductions of attention, all of them fixed
 * per (row, head) and independent of the batch and of the page layout:
 *   score[p] = (q·k_p)·scale   — 8-lane fma over head_dim, fixed lane sum;
 *   softmax over p = 0..n_ctx−1 — max, exp, sum in double in position order;
 *   out = Σ_p w_p·v_p           — fma per output element in position order.
 * Positions are visited in order whatever the page size, and a slot's data
 * does not depend on where its page sits, so the result is the same bits for
 * any page size or page placement (tests/test_kernels.c checks this).
 * Must not: split a sequence's positions across threads (that would change
 * the reduction order); callers parallelise across rows instead. */
#include "backend.h"
#include "cpu_internal.h"

#include <math.h>

/* q·k over n = head_dim: lane l of one 8-wide accumulator takes k ≡ l mod 8
 * in increasing order; then ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then the
 * n%8 tail with fma. The scalar path is the same contract. */
static inline float dot_hd(const float *a, const float *b, int n) {
    int k = 0;
#if CPU_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; k + 8 <= n; k += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    float r = _mm_cvtss_f32(_mm_add_ss(u, _mm_shuffle_ps(u, u, 1)));
#else
    float l[8] = {0};
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(a[k + j], b[k + j], l[j]);
    float r = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
#endif
    for (; k < n; k++) r = fmaf(a[k], b[k], r);
    return r;
}

/* o[d] = fma(w, v[d], o[d]) for every d: element-wise, so the SIMD width
 * does not change any element's result. */
static inline void axpy_hd(float *o, float w, const float *v, int n) {
    int d = 0;
#if CPU_AVX2
    __m256 wv = _mm256_set1_ps(w);
    for (; d + 8 <= n; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + d), _mm256_loadu_ps(o + d)));
#endif
    for (; d < n; d++) o[d] = fmaf(w, v[d], o[d]);
}

void kb_attention_row(float *out, const float *q, const kb_kv_view *kv, int n_ctx,
                      int n_heads, float scale, float *scratch) {
    const int hd = kv->head_dim, ps = kv->page_size;
    const int group = n_heads / kv->n_kv_heads;          /* q heads per kv head */
    const size_t slot_stride = (size_t)kv->n_kv_heads * hd;
    const size_t page_stride = (size_t)ps * slot_stride;

    for (int h = 0; h < n_heads; h++) {
        const float *qh = q + (size_t)h * hd;
        const size_t head_off = (size_t)(h / group) * hd;
        float *oh = out + (size_t)h * hd;

        float mx = -INFINITY;
        for (int p = 0; p < n_ctx; p++) {
            const float *k = kv->k_pages + (size_t)kv->pages[p / ps] * page_stride +
                             (size_t)(p % ps) * slot_stride + head_off;
            float s = dot_hd(qh, k, hd) * scale;
            scratch[p] = s;
            if (s > mx) mx = s;
        }
        double sum = 0.0;
        for (int p = 0; p < n_ctx; p++) {
            float e = expf(scratch[p] - mx);
            scratch[p] = e;
            sum += e;
        }
        for (int d = 0; d < hd; d++) oh[d] = 0.0f;
        for (int p = 0; p < n_ctx; p++) {
            const float *v = kv->v_pages + (size_t)kv->pages[p / ps] * page_stride +
                             (size_t)(p % ps) * slot_stride + head_off;
            axpy_hd(oh, (float)(scratch[p] / sum), v, hd);
        }
    }
}
