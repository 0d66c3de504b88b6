/* recommend.c — see recommend.h. Arithmetic only. */
#include "recommend.h"
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

rc_pred rc_predict(const cost_curve *t, const double *p, int n, int k, int c, double n_out, double overhead_s) {
    rc_pred r;
    r.e_k = rc_expected(p, n, k);
    r.step_s = cost_curve_at(t, (double)c * (k + 1)) + (double)c * k * t->draft_seconds_per_token;
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
