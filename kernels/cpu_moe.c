/* cpu_moe.c — the mixture-of-experts calls of backend.h (engine/moe.c's
 * gather, grouped expert matmuls and weighted sum back into rows) on the
 * CPU, and their branch to the CUDA backend (cuda_moe.cu); the switch of
 * where expert weights live on cuda.
 * Owns: nothing but the loops; the experts' weights are the loader's.
 * Must not: know what an expert is beyond rows and weights (the routing is
 * moe.c's).
 *
 * Bits: the grouped matmul is one kb_matmul_n per group (batch-invariant,
 * so a row's result is the same whatever its group holds), and the combine
 * performs moe.c's original loop's operations in its order (each product
 * rounded, then added from zero in ascending expert order), so moving the
 * loops here changed no logit. */
#include "backend.h"
#include "cpu_internal.h"
#include "errmsg.h"

void kb_gather_rows(float *dst, const float *src, const int *idx, int n, int row_floats) {
    if (kb_dev_active) { kb_dev_active->gather_rows(dst, src, idx, n, row_floats); return; }
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * row_floats, src + (size_t)idx[i] * row_floats, (size_t)row_floats * sizeof(float));
}

void kb_matmul_grouped(int n_sets, float *const ys[], const kb_weight *const ws[], const float *x,
                       const int *start, int n_groups) {
    if (n_sets <= 0 || n_groups <= 0) return;
    if (kb_dev_active) { kb_dev_active->matmul_grouped(n_sets, ys, ws, x, start, n_groups); return; }
    const int cols = ws[0]->cols, rows = ws[0]->rows;
    for (int g = 0; g < n_groups; g++) {
        const int m = start[g + 1] - start[g];
        if (m <= 0) continue;
        float *y[KB_MATMUL_N_MAX];
        const kb_weight *w[KB_MATMUL_N_MAX];
        for (int s = 0; s < n_sets && s < KB_MATMUL_N_MAX; s++) {
            y[s] = ys[s] + (size_t)start[g] * rows;
            w[s] = ws[(size_t)s * n_groups + g];
        }
        kb_matmul_n(n_sets < KB_MATMUL_N_MAX ? n_sets : KB_MATMUL_N_MAX, y, w, x + (size_t)start[g] * cols, m);
    }
}

void kb_combine_rows(float *y, const float *src, const int *slots, const float *w, int n, int k, int row_floats) {
    if (kb_dev_active) { kb_dev_active->combine_rows(y, src, slots, w, n, k, row_floats); return; }
    for (int r = 0; r < n; r++) {
        float *dst = y + (size_t)r * row_floats;
        memset(dst, 0, (size_t)row_floats * sizeof(float));
        for (int i = 0; i < k; i++) {
            const float *s = src + (size_t)slots[(size_t)r * k + i] * row_floats, wgt = w[(size_t)r * k + i];
            for (int j = 0; j < row_floats; j++) {
                float t = s[j] * wgt;   /* HF: expert(x) * weight, then index_add_ */
                dst[j] += t;
            }
        }
    }
}

int kb_set_experts_on_host(int on, char *err, size_t errlen) {
    if (!kb_dev_active) {
        if (!on) return 0;
        return errf(err, errlen, "expert weights on the host need the cuda device (on the cpu every weight is in "
                                 "host memory already)");
    }
    kb_dev_active->set_experts_on_host(on);
    return 0;
}

int kb_experts_on_host(void) { return kb_dev_active ? kb_dev_active->experts_on_host() : 0; }

int kb_weight_upload_expert(kb_weight *w, const void *owner, char *err, size_t errlen) {
    if (!kb_dev_active) return 0;
    return kb_dev_active->weight_upload_expert(w, owner, err, errlen);
}
