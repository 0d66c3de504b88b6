/* cpu_norm.c — CPU backend: RMSNorm and softmax (the row reductions that
 * are not matmuls).
 * Owns: the accumulation order of those reductions. Each row is reduced on
 * its own in a fixed order that depends only on its length (RMSNorm: element
 * k into partial sum k % 8 in increasing k, then ((s0+s4)+(s2+s6)) +
 * ((s1+s5)+(s3+s7)); softmax: increasing index), so a row's result never
 * depends on the other rows in the call or on threads.
 * Must not: reorder a reduction by row count or thread count.
 *
 * Both accumulate in double: a sequential float sum of n = 1e3..1e4 squares
 * or exponentials loses ~n·2⁻²⁴ relative precision, which is the same size
 * as the f32 differences against HF that the goldens allow; in double the
 * sum is exact to ~1e-13 and the only rounding left is the final one to
 * float, so we sit as close to the true value as HF's own f32 result does
 * (HF reduces in f32 with its own blocked order). RMSNorm's 8 partial sums
 * break the chain of dependent double adds (4 cycles each): one chain was
 * 5.4% of a 256-token prefill (profile: 0.6 ms of 11.3), which rmsnorms
 * every q and k head as well as the hidden rows. */
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
        double p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int k = 0;
        for (; k + 8 <= j->n; k += 8)
            for (int l = 0; l < 8; l++) p[l] += (double)xr[k + l] * (double)xr[k + l];
        for (; k < j->n; k++) p[k % 8] += (double)xr[k] * (double)xr[k];
        double ss = ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
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
