/* verify.c — greedy and rejection-sampling verification (see verify.h).
 * Why the residual is computed in double: when p and q nearly agree the
 * residual mass is tiny and float cancellation would bias which token wins. */
#include "verify.h"
#include <stddef.h>

int verify_greedy(const int *drafts, int l, const float *target_logits, int V, int *next) {
    int a = 0;
    while (a < l && drafts[a] == sample_greedy(target_logits + (size_t)a * V, V)) a++;
    *next = sample_greedy(target_logits + (size_t)a * V, V);
    return a;
}

/* Draw from norm(max(0, p − q)) where q may be one-hot at `onehot`. */
static int sample_residual(const float *p, const float *q, int onehot, int V, rng_state *rng,
                           float *scratch) {
    double mass = 0.0;
    for (int v = 0; v < V; v++) {
        double qv = q ? q[v] : (v == onehot ? 1.0 : 0.0);
        double r = (double)p[v] - qv;
        scratch[v] = r > 0 ? (float)r : 0.0f;
        mass += scratch[v];
    }
    /* p == q (up to rounding): rejection had probability ~0; p itself is the
     * right distribution to fall back on. */
    if (!(mass > 1e-12)) return sample_from_probs(p, V, rng);
    double u = rng_uniform(rng) * mass, cum = 0.0;
    int last = 0;
    for (int v = 0; v < V; v++) {
        if (scratch[v] <= 0.0f) continue;
        cum += scratch[v];
        last = v;
        if (u < cum) return v;
    }
    return last;
}

int verify_sample(const int *drafts, int l, const float *p, const float *q, int V, rng_state *rng,
                  float *scratch, int *next) {
    for (int i = 0; i < l; i++) {
        const float *pi = p + (size_t)i * V;
        const float *qi = q ? q + (size_t)i * V : NULL;
        int d = drafts[i];
        double pd = pi[d], qd = qi ? qi[d] : 1.0;
        /* qd == 0 cannot happen for a draft drawn from q; guard the division. */
        double ratio = qd > 0 ? pd / qd : (pd > 0 ? 1.0 : 0.0);
        if (ratio >= 1.0 || rng_uniform(rng) < ratio) continue;
        *next = sample_residual(pi, qi, d, V, rng, scratch);
        return i;
    }
    *next = sample_from_probs(p + (size_t)l * V, V, rng);
    return l;
}
