/* label: unit */
/* test_verify.c — the verifier alone is lossless: with adversarial target p
 * and draft q on a small vocabulary, committed tokens are distributed as p
 * (chi-square over ≥ 100,000 draws), and greedy verification accepts exactly
 * the matching prefix. */
#include <math.h>
#include <string.h>
#include "test_util.h"
#include "verify.h"

enum { V = 6 };


/* Chi-square of counts[n] vs expected probabilities; zero-probability cells
 * must have zero counts (any hit there is a hard failure). */
static int check_dist(const char *what, const long *counts, const double *probs, int n, long draws) {
    double x2 = 0;
    int bins = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] == 0) {
            CHECKF(counts[i] == 0, "%s: %ld draws of impossible cell %d", what, counts[i], i);
            continue;
        }
        double e = probs[i] * draws;
        x2 += (counts[i] - e) * (counts[i] - e) / e;
        bins++;
    }
    CHECKF(x2 < tu_chi2_crit(bins - 1), "%s: chi2 %.2f > %.2f (dof %d)", what, x2, tu_chi2_crit(bins - 1), bins - 1);
    return 0;
}

static int draw(const float *q, rng_state *r) { return sample_from_probs(q, V, r); }

int main(void) {
    /* p has no mass on 0 and 5; q puts most mass on 0 and 5 and none on 2. */
    float p1[V] = {0.0f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f};
    float q1[V] = {0.45f, 0.05f, 0.0f, 0.05f, 0.0f, 0.45f};
    /* the reverse at position 2: q concentrated where p is thin */
    float p2[V] = {0.5f, 0.0f, 0.0f, 0.1f, 0.1f, 0.3f};
    float q2[V] = {0.0f, 0.2f, 0.2f, 0.0f, 0.6f, 0.0f};
    float p3[V] = {0.1f, 0.1f, 0.2f, 0.2f, 0.2f, 0.2f};
    float P[3 * V], Q[2 * V], scratch[V];
    memcpy(P, p1, sizeof p1); memcpy(P + V, p2, sizeof p2); memcpy(P + 2 * V, p3, sizeof p3);
    memcpy(Q, q1, sizeof q1); memcpy(Q + V, q2, sizeof q2);

    rng_state r;
    rng_seed(&r, 2024);
    const long N = 200000;
    long c1[V] = {0}, c12[V * V] = {0}, c1_onehot[V] = {0};
    long acc_hist[3] = {0};
    for (long t = 0; t < N; t++) {
        int d[2] = {draw(q1, &r), draw(q2, &r)}, next;
        int a = verify_sample(d, 2, P, Q, V, &r, scratch, &next);
        acc_hist[a]++;
        int out[3];
        for (int i = 0; i < a; i++) out[i] = d[i];
        out[a] = next;
        c1[out[0]]++;
        if (a >= 1) c12[out[0] * V + out[1]]++;
        else {
            /* the second token would come from a new step; sample it from p2
             * directly so the joint stays comparable */
            c12[out[0] * V + sample_from_probs(p2, V, &r)]++;
        }
        /* deterministic drafter (q one-hot, q == NULL): always draft token 3 */
        int dd = 3;
        a = verify_sample(&dd, 1, P, NULL, V, &r, scratch, &next);
        c1_onehot[a ? dd : next]++;
    }
    double e1[V], e12[V * V];
    for (int i = 0; i < V; i++) e1[i] = p1[i];
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) e12[i * V + j] = (double)p1[i] * p2[j];
    check_dist("first token", c1, e1, V, N);
    check_dist("first two tokens", c12, e12, V * V, N);
    check_dist("one-hot drafter", c1_onehot, e1, V, N);
    /* The adversarial q must actually exercise both paths. */
    CHECK(acc_hist[0] > N / 10 && acc_hist[1] + acc_hist[2] > N / 10);

    /* q == p: everything is accepted. */
    long all = 0;
    for (long t = 0; t < 10000; t++) {
        int d = draw(p1, &r), next;
        float PP[2 * V];
        memcpy(PP, p1, sizeof p1); memcpy(PP + V, p3, sizeof p3);
        all += verify_sample(&d, 1, PP, p1, V, &r, scratch, &next) == 1;
    }
    CHECK(all == 10000);

    /* Greedy: the accepted prefix is the matching prefix, then the target's
     * argmax (correction) or the bonus. */
    float L[4 * V];
    int argmax[4] = {2, 4, 1, 5};
    for (int i = 0; i < 4; i++)
        for (int v = 0; v < V; v++) L[i * V + v] = v == argmax[i] ? 3.0f : (float)v * 0.1f;
    int next;
    int d_ok[3] = {2, 4, 1};
    CHECK(verify_greedy(d_ok, 3, L, V, &next) == 3 && next == 5);
    int d_bad[3] = {2, 0, 1};
    CHECK(verify_greedy(d_bad, 3, L, V, &next) == 1 && next == 4);
    int d_first[3] = {0, 4, 1};
    CHECK(verify_greedy(d_first, 3, L, V, &next) == 0 && next == 2);
    CHECK(verify_greedy(d_ok, 0, L, V, &next) == 0 && next == 2);
    return tu_done("test_verify");
}
