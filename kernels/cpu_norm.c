/* cpu_norm.c — CPU backend: RMSNorm and softmax (the row reductions that
 * are not matmuls).
 * Owns: the accumulation order of those reductions. Each row is reduced on
 * its own in increasing index order, so a row's result never depends on the
 * other rows in the call or on threads.
 * Must not: reorder a reduction by row count or thread count.
 *
 * Both accumulate in double: a sequential float sum of n = 1e3..1e4 squares
 * or exponentials loses ~n·2⁻²⁴ relative precision, which is the same size
 * as the f32 differences against HF that the goldens allow; in double the
 * sum is exact to ~1e-13 and the only rounding left is the final one to
 * float, so we sit as close to the true value as HF's own f32 result does
 * (HF reduces in f32 with its own blocked order). The cost is n scalar double
 * adds per row — noise beside the matmuls. */
#include "backend.h"
#include "cpu_internal.h"

#include <math.h>

typedef struct { float *y; const float *x, *g; int m, n, rows_per_chunk; float eps; } norm_job;

static void rmsnorm_rows(void *vp, int c, int slot) {
    (void)slot;
    const norm_job *j = vp;
    int i1 = (c + 1) * j->rows_per_chunk < j->m ? (c + 1) * j->rows_per_chunk : j->m;
    for (int i = c * j->rows_per_chunk; i < i1; i++) {
        const float *xr = j->x + (size_t)i * j->n;
        float *yr = j->y + (size_t)i * j->n;
        double ss = 0.0;
        for (int k = 0; k < j->n; k++) ss += (double)xr[k] * (double)xr[k];
        /* HF: x * rsqrt(mean(x²) + eps), then weight * that (in this order). */
        float inv = (float)(1.0 / sqrt(ss / j->n + (double)j->eps));
        for (int k = 0; k < j->n; k++) yr[k] = j->g[k] * (xr[k] * inv);
    }
}

void kb_rmsnorm(float *y, const float *x, const float *g, int m, int n, float eps) {
    if (m <= 0) return;
    if (kb_dev_active) { kb_dev_active->rmsnorm(y, x, g, m, n, eps); return; }
    /* Rows are independent; ~64k elements per pool chunk. */
    int per = n > 0 && n < 65536 ? 65536 / n : 1;
    norm_job j = {.y = y, .x = x, .g = g, .m = m, .n = n, .rows_per_chunk = per, .eps = eps};
    cpu_parallel(rmsnorm_rows, &j, (m + per - 1) / per, 0);
}

/* On the host on every device: callers softmax logits rows they sample
 * from, which are host-readable (managed memory on cuda). */
double kb_softmax(float *x, int n) {
    if (n <= 0) return -INFINITY;
    float mx = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(x[i] - mx);
        x[i] = e;
        sum += e;
    }
    for (int i = 0; i < n; i++) x[i] = (float)(x[i] / sum);
    return (double)mx + log(sum);
}
