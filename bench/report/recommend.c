/* recommend.c — see recommend.h. Arithmetic only. */
#include "recommend.h"
#include "stats.h"
#include <math.h>

double rc_expected(const double *p, int n, int k) {
    double e = 1;
    for (int i = 0; i < k && i < n; i++) if (!isnan(p[i])) e += p[i];
    return e;
}

double rc_expected_cond(const double *a, int n, int k) {
    double e = 1, prod = 1;
    for (int i = 0; i < k && i < n; i++) {
        prod *= a[i];
        e += prod;
    }
    return e;
}

double rc_draft_seconds(const cost_curve *t, int c, double d) {
    return d > 0 ? c * (t->draft_seconds_per_step + d * t->draft_seconds_per_token) : 0.0;
}

rc_pred rc_predict(const cost_curve *t, const double *p, int n, int k, int c, double n_out, double overhead_s) {
    rc_pred r;
    r.e_k = rc_expected(p, n, k);
    r.step_s = cost_curve_at_seqs(t, c, (double)c * (k + 1)) + rc_draft_seconds(t, c, k);
    if (!(r.step_s > 0)) r.tps = NAN;
    else if (n_out > 1 && !isnan(overhead_s) && overhead_s >= 0)
        r.tps = c * n_out / (overhead_s + (n_out - 1) * r.step_s / r.e_k);
    else r.tps = c * r.e_k / r.step_s;
    return r;
}

int rc_argmax(const double *v, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

int rc_verdict(const rc_gain *g) {
    if (g->lo > 1) return 1;
    if (g->hi < 1) return -1;
    return 0;
}

int rc_choose(const int *depth, const rc_gain *g, int n, int *best_out) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (depth[i] > 0 && !isnan(g[i].est) && (best < 0 || g[i].est > g[best].est)) best = i;
    if (best_out) *best_out = best;
    if (best < 0) return -1;
    int rec = -1;
    for (int i = 0; i < n && rec < 0; i++)   /* depth order is the caller's: take the shallowest */
        if (depth[i] > 0 && rc_verdict(&g[i]) == 1 && g[i].est >= g[best].lo) rec = i;
    for (int i = 0; i < n; i++)
        if (rec >= 0 && depth[i] > 0 && depth[i] < depth[rec] && rc_verdict(&g[i]) == 1 && g[i].est >= g[best].lo) rec = i;
    if (rec >= 0) return rec;
    if (rc_verdict(&g[best]) == 1) return best;
    for (int i = 0; i < n; i++)
        if (depth[i] > 0 && rc_verdict(&g[i]) == 1 && (rec < 0 || g[i].est > g[rec].est)) rec = i;
    return rec;
}

int rc_fit_monotone(cost_curve *c, const double *rows, const double *sec, const double *w, int n, const char *source) {
    double r[COST_MAX_POINTS], y[COST_MAX_POINTS], ww[COST_MAX_POINTS], fit[COST_MAX_POINTS];
    int m = 0;
    for (int i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        if (!(rows[i] > 0) || !(sec[i] > 0) || !isfinite(rows[i]) || !isfinite(sec[i]) || !(wi > 0)) continue;
        int j = 0;
        while (j < m && r[j] != rows[i]) j++;
        if (j == m) {
            if (m == COST_MAX_POINTS) continue;
            r[m] = rows[i];
            y[m] = 0;
            ww[m++] = 0;
        }
        y[j] += wi * sec[i];
        ww[j] += wi;
    }
    for (int j = 0; j < m; j++) y[j] /= ww[j];
    for (int i = 1; i < m; i++)   /* sort by rows */
        for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
            double a = r[j], b = y[j], d = ww[j];
            r[j] = r[j - 1]; y[j] = y[j - 1]; ww[j] = ww[j - 1];
            r[j - 1] = a; y[j - 1] = b; ww[j - 1] = d;
        }
    if (st_isotonic(y, ww, m, fit)) return -1;
    cost_curve_from_points(c, r, fit, m, source);
    return 0;
}

int rc_break_even(const cost_curve *t, const double *p, int n, int c, double overhead_s, int max_k) {
    double ov = isnan(overhead_s) || overhead_s < 0 ? 0 : overhead_s, prev = NAN;
    int k = 0;
    for (int j = 0; j <= max_k; j++) {
        double step = cost_curve_at_seqs(t, c, (double)c * (j + 1)) + rc_draft_seconds(t, c, j) + ov;
        double tps = c * rc_expected(p, n, j) / step;
        if (j > 0) {
            if (!(tps > prev)) break;
            k = j;
        }
        prev = tps;
    }
    return k;
}
