/* stats.h — the summary statistics every bench output uses.
 *
 * Percentile definition (stated once, used everywhere): linear interpolation
 * between closest ranks, i.e. numpy's default ("linear") method, which is
 * what vLLM's benchmark_serving uses: for n sorted values x[0..n-1] and
 * p in [0,100], rank r = p/100 · (n−1), result = x[⌊r⌋] + (r−⌊r⌋)·(x[⌊r⌋+1] − x[⌊r⌋]).
 * The median is the 50th percentile. Empty input gives NaN.
 * Standard deviation is the population one (numpy's np.std default). */
#ifndef SPECBED_BENCH_STATS_H
#define SPECBED_BENCH_STATS_H
#include <stddef.h>
#include <stdint.h>

/* v need not be sorted; it is left untouched (a sorted copy is made). */
double st_percentile(const double *v, size_t n, double p);
/* v must already be sorted ascending. */
double st_percentile_sorted(const double *v, size_t n, double p);
double st_mean(const double *v, size_t n);
double st_std(const double *v, size_t n);
void   st_sort(double *v, size_t n);

/* A growable array of doubles (ITL samples and the like). */
typedef struct { double *v; size_t n, cap; } dvec;
int  dvec_push(dvec *d, double x);   /* 0 ok, -1 out of memory */
void dvec_free(dvec *d);

/* ---- Repeats, bootstrap and intervals (the sweep and the report) ----
 *
 * A seeded PRNG (splitmix64) of our own: the same seed gives the same draws
 * on every machine and in every build, so a sweep's arm order and a report's
 * intervals can be reproduced from the seeds recorded beside them. */
typedef struct { uint64_t s; } st_rng;
void     st_rng_seed(st_rng *r, uint64_t seed);
uint64_t st_rng_next(st_rng *r);
double   st_rng_uniform(st_rng *r);            /* [0, 1) */
int      st_rng_below(st_rng *r, int n);       /* 0..n-1 (n ≥ 1) */
void     st_shuffle_int(st_rng *r, int *v, int n);   /* Fisher–Yates */
/* The order in which repeat `rep` visits arms 0..n-1: a function of
 * (seed, rep) only, so it can be re-derived from sweep.json. */
void     st_arm_order(uint64_t seed, int rep, int n, int *order);

/* Two-sided Student t quantile t_{0.975, df} (df ≥ 1; table to 30, then
 * 1.96 + 2.4/df, within 0.002 of the exact value). */
double st_t975(int df);

/* A 95% interval from repeats of one measurement.
 *
 * est, lo, hi: the estimate and its interval; se its standard error (on the
 * log scale for log-scale statistics); df the t degrees of freedom used;
 * between_sd the sample s.d. of the per-repeat estimates (NaN with one);
 * within_se the mean within-repeat bootstrap s.e. of one repeat's estimate. */
typedef struct {
    double est, lo, hi, se, between_sd, within_se;
    int df, n_rep;
} st_ci;

/* The statistic of one repeat `rep` computed on the multiset of its items
 * idx[0..n-1] (indices into that repeat's requests; idx is 0..n-1 for the
 * point estimate, a bootstrap resample otherwise). NaN = not computable. */
typedef double (*st_rep_stat)(void *ctx, int rep, const int *idx, int n);

/* The two-level interval (requests within repeats, then repeats):
 *   1. per repeat r: θ_r = f(all its n_r requests); its within-repeat
 *      variance w_r = the variance of f over n_boot bootstrap resamples of
 *      those requests (seeded: seed, r);
 *   2. across R repeats: θ = mean θ_r; S² = sample variance of θ_r;
 *      W = mean w_r; V = max(S², W) / R — the between-repeat variance when
 *      it exceeds what request noise alone explains (drift, load), else the
 *      request-noise floor — with df = R − 1 when S² ≥ W (S² is then the
 *      estimate, on R − 1 degrees of freedom), else R·(n̄ − 1);
 *   3. θ ± t_{0.975,df}·√V.
 * log_scale: θ_r is log f (for throughputs and ratios, which are positive;
 * the interval is then exp'd and asymmetric). A plain two-stage percentile
 * bootstrap (resample repeats, then requests) covers ~0.80 with 3 repeats
 * when the repeats drift (tests/test_bench_stats.c measures both); the t
 * step is what keeps 3 repeats honest. Repeats whose θ_r is NaN are left
 * out. All NaN when no repeat is usable. */
st_ci st_two_level(st_rep_stat f, void *ctx, const int *n_per_rep, int n_rep, int n_boot, uint64_t seed,
                   int log_scale);

/* Weighted least-squares isotonic (non-decreasing) fit, pool-adjacent-
 * violators: out[i] minimises Σ w_i (out_i − y_i)² subject to out
 * non-decreasing in i. w NULL = equal weights. 0 ok, -1 out of memory. */
int st_isotonic(const double *y, const double *w, int n, double *out);

/* Share of repeated word n-grams in text: (n-grams − distinct n-grams) ÷
 * n-grams, words split on white space; NaN when the text has fewer than n
 * words. 0 for text that never repeats a 4-gram, → 1 for a loop. */
double st_repeated_ngram_frac(const char *text, int n);

/* Decode throughput of a closed-loop run of `concurrency` streams, from
 * its requests: concurrency · Σ(n_out − 1) ÷ Σ(e2el − ttft) tokens/s (the
 * token-weighted 1000 ÷ mean TPOT ms × concurrency: prefill and queueing,
 * which TTFT holds, left out). Requests with n_out < 2 or NaN times are
 * skipped; idx NULL = all n in order, else the multiset idx[0..n-1]. */
double st_decode_tps(int concurrency, const double *n_out, const double *ttft_s, const double *e2el_s, const int *idx,
                     int n);
/* End-to-end throughput of the same run as a closed loop sees it:
 * concurrency · Σ n_out ÷ Σ e2el (Little's law; the ramp-up and drain of
 * a short run, which output_throughput includes, left out). */
double st_e2e_tps(int concurrency, const double *n_out, const double *e2el_s, const int *idx, int n);
#endif
