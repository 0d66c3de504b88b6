/* vocab_par.c — a vocabulary-parallel head's logits, gathered (see
 * vocab_par.h).
 * Must not: do arithmetic outside the backend's kernels (the matmul), or
 * add anything across ranks (each logit is computed whole by one rank). */
#include "vocab_par.h"

#include <string.h>

void vp_logits(kb_comm *c, const kb_weight *part, int N, int width, const float *x, int n, float *lpart,
               float *lall, float *out) {
    const int tp = kb_comm_size(c), w = part->rows, Vp = width;
    if (w > 0) kb_matmul(lpart, x, part, n);
    if (w < Vp) /* the last rank's padding */
        for (int i = n - 1; i >= 0; i--) {
            memmove(lpart + (size_t)i * Vp, lpart + (size_t)i * w, (size_t)w * sizeof(float));
            memset(lpart + (size_t)i * Vp + w, 0, (size_t)(Vp - w) * sizeof(float));
        }
    char err[256];
    if (kb_comm_allgather(c, lpart, lall, (size_t)n * Vp * sizeof(float), err, sizeof err)) kb_comm_abort(c, 1, err);
    for (int r = 0; r < tp; r++) {
        int v0 = r * Vp, vn = N - v0 < Vp ? N - v0 : Vp;
        if (vn <= 0) break;
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)i * N + v0, lall + ((size_t)r * n + i) * Vp, (size_t)vn * sizeof(float));
    }
}

void vp_head_rows(kb_comm *c, const kb_weight *head, int N, int width, const float *normed, const int *logit_rows,
                  int n, int H, float *xl, float *lpart, float *lall, float *out) {
    if (n <= 0) return;
    for (int i = 0, j; i < n; i = j) {   /* one copy per run of consecutive rows (often all of them) */
        for (j = i + 1; j < n && logit_rows[j] == logit_rows[j - 1] + 1; j++) {}
        kb_copy_to_device(xl + (size_t)i * H, normed + (size_t)logit_rows[i] * H, (size_t)(j - i) * H * sizeof(float));
    }
    if (c) {
        kb_wait();
        vp_logits(c, head, N, width, xl, n, lpart, lall, out);
    } else {
        kb_matmul(out, xl, head, n);
    }
}
