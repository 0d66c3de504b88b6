/* label: bench */
/* test_bench_stats.c — the statistics behind the sweep's decisions
 * (bench/load/stats.h, bench/report/recommend.h): the two-level interval covers its
 * target ~95% of the time on synthetic repeats with known variance (and a
 * plain two-stage percentile bootstrap, printed beside it, does not with 3
 * repeats that drift); the significance rule and the recommendation; the
 * shuffled arm order is reproducible from its seed; the isotonic cost fit;
 * the repeated 4-gram share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cost_curve.h"
#include "recommend.h"
#include "stats.h"
#include "test_util.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* Normal deviate (Box–Muller) from the stats PRNG. */
static double gauss(st_rng *r) {
    double u = st_rng_uniform(r), v = st_rng_uniform(r);
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

enum { MAXR = 10, MAXN = 64 };
typedef struct {
    double x[MAXR][MAXN];   /* x[rep][request] */
    double y[MAXR][MAXN];   /* a second arm, paired by request (same prompt) */
} synth;

static double stat_mean(void *ctx, int rep, const int *idx, int n) {
    const synth *s = ctx;
    double a = 0;
    for (int i = 0; i < n; i++) a += s->x[rep][idx[i]];
    return a / n;
}

/* ratio of means of the two arms, requests resampled jointly (paired) */
static double stat_ratio(void *ctx, int rep, const int *idx, int n) {
    const synth *s = ctx;
    double a = 0, b = 0;
    for (int i = 0; i < n; i++) { a += s->x[rep][idx[i]]; b += s->y[rep][idx[i]]; }
    return a / b;
}

/* The plain two-stage percentile bootstrap, for comparison only. */
static void naive_two_stage(const synth *s, int R, int n, int B, st_rng *g, double *lo, double *hi) {
    double *v = malloc((size_t)B * sizeof *v);
    for (int b = 0; b < B; b++) {
        double a = 0;
        for (int r = 0; r < R; r++) {
            int rr = st_rng_below(g, R);
            for (int i = 0; i < n; i++) a += s->x[rr][st_rng_below(g, n)];
        }
        v[b] = a / (R * n);
    }
    *lo = st_percentile(v, (size_t)B, 2.5);
    *hi = st_percentile(v, (size_t)B, 97.5);
    free(v);
}

static void test_coverage(void) {
    /* mean μ = 10, request s.d. 1, n = 16 per repeat: request noise of a
     * repeat's mean 0.25; between-repeat s.d. σb from none to 3× that. */
    const int n = 16, B = 200, EXP = 1000;
    const double mu = 10, se = 1;
    const struct { int R; double sb; } sc[] = {{3, 0}, {3, 0.25}, {3, 0.75}, {5, 0}, {5, 0.25}, {5, 0.75}, {10, 0.5}};
    synth *s = malloc(sizeof *s);
    int n_per[MAXR];
    for (size_t k = 0; k < sizeof sc / sizeof *sc; k++) {
        int R = sc[k].R;
        for (int r = 0; r < R; r++) n_per[r] = n;
        st_rng g;
        st_rng_seed(&g, 1234 + k);
        int cover = 0, cover_naive = 0, cover_ratio = 0;
        double width = 0;
        for (int e = 0; e < EXP; e++) {
            for (int r = 0; r < R; r++) {
                double b = sc[k].sb * gauss(&g), d = 0.05 * sc[k].sb * gauss(&g);
                for (int i = 0; i < n; i++) {
                    double prompt = 0.5 * gauss(&g);   /* shared by both arms: pairing removes it */
                    s->x[r][i] = mu + b + prompt + se * gauss(&g);
                    s->y[r][i] = (mu + b + prompt) * (1 + d) / 1.1 + 0.3 * se * gauss(&g);
                }
            }
            st_ci c = st_two_level(stat_mean, s, n_per, R, B, (uint64_t)e, 0);
            cover += c.lo <= mu && mu <= c.hi;
            width += c.hi - c.lo;
            double lo, hi;
            naive_two_stage(s, R, n, B, &g, &lo, &hi);
            cover_naive += lo <= mu && mu <= hi;
            st_ci q = st_two_level(stat_ratio, s, n_per, R, B, (uint64_t)e, 1);
            cover_ratio += q.lo <= 1.1 && 1.1 <= q.hi;
        }
        double cv = (double)cover / EXP, cn = (double)cover_naive / EXP, cr = (double)cover_ratio / EXP;
        printf("coverage R=%d n=%d between-sd %.2f: two-level %.3f (mean width %.3f), paired ratio %.3f; "
               "plain two-stage percentile bootstrap %.3f\n", R, n, sc[k].sb, cv, width / EXP, cr, cn);
        CHECKF(cv >= 0.92 && cv <= 0.98, "R=%d sb=%.2f: coverage %.3f", R, sc[k].sb, cv);
        CHECKF(cr >= 0.92 && cr <= 0.985, "R=%d sb=%.2f: ratio coverage %.3f", R, sc[k].sb, cr);
    }
    free(s);
    /* one repeat: request noise only; seeded, so the same interval twice */
    synth *t = calloc(1, sizeof *t);
    for (int i = 0; i < 16; i++) t->x[0][i] = i;
    int n1 = 16;
    st_ci a = st_two_level(stat_mean, t, &n1, 1, 300, 5, 0), b = st_two_level(stat_mean, t, &n1, 1, 300, 5, 0);
    CHECK(a.n_rep == 1 && NEAR(a.est, 7.5) && a.lo < 7.5 && a.hi > 7.5 && a.lo == b.lo && a.hi == b.hi && isnan(a.between_sd));
    n1 = 0;
    a = st_two_level(stat_mean, t, &n1, 1, 300, 5, 0);
    CHECK(isnan(a.est) && a.n_rep == 0);
    free(t);
    CHECK(NEAR(st_t975(2), 4.303) && fabs(st_t975(60) - 2.000) < 0.003 && fabs(st_t975(120) - 1.980) < 0.002 &&
          fabs(st_t975(100000) - 1.960) < 0.001);
}

static void test_significance(void) {
    /* depths 0..4: gains with intervals; better only when lo > 1 */
    int depth[5] = {0, 1, 2, 3, 4};
    rc_gain g[5] = {{1, 1, 1}, {1.10, 1.04, 1.16}, {1.18, 1.09, 1.28}, {1.20, 1.12, 1.29}, {1.05, 0.90, 1.22}};
    int best;
    int rec = rc_choose(depth, g, 5, &best);
    CHECK(best == 3);
    CHECK(rec == 2);   /* the shallowest depth whose gain (1.18) is within the best's interval [1.12, 1.29] */
    CHECK(rc_verdict(&g[1]) == 1 && rc_verdict(&g[4]) == 0);
    rc_gain w = {0.8, 0.7, 0.9};
    CHECK(rc_verdict(&w) == -1);
    /* no depth significantly better: speculation off, even if a point estimate is above 1 */
    rc_gain h[3] = {{1, 1, 1}, {1.3, 0.95, 1.7}, {1.1, 0.99, 1.2}};
    CHECK(rc_choose(depth, h, 3, &best) == -1);
    /* the interval touching 1 is not "excludes 1" */
    rc_gain e[2] = {{1, 1, 1}, {1.1, 1.0, 1.2}};
    CHECK(rc_choose(depth, e, 2, &best) == -1);
    /* NaN gains are skipped */
    rc_gain n[3] = {{1, 1, 1}, {NAN, NAN, NAN}, {1.5, 1.2, 1.8}};
    CHECK(rc_choose(depth, n, 3, &best) == 2 && best == 2);
}

static void test_order(void) {
    int a[29], b[29], c[29], seen[29] = {0};
    st_arm_order(42, 1, 29, a);
    st_arm_order(42, 1, 29, b);
    st_arm_order(42, 2, 29, c);
    CHECK(!memcmp(a, b, sizeof a));            /* same seed and repeat: same order */
    CHECK(memcmp(a, c, sizeof a) != 0);        /* another repeat: another order */
    for (int i = 0; i < 29; i++) seen[a[i]]++;
    for (int i = 0; i < 29; i++) CHECK(seen[i] == 1);
    int first[29] = {0};                       /* every arm leads some repeat: no arm always first */
    for (int r = 0; r < 2000; r++) { st_arm_order(7, r, 29, c); first[c[0]]++; }
    for (int i = 0; i < 29; i++) CHECKF(first[i] > 30 && first[i] < 120, "arm %d first in %d of 2000", i, first[i]);
}

static void test_isotonic(void) {
    double y[6] = {1, 3, 2, 4, 3.5, 5}, o[6];
    CHECK(!st_isotonic(y, NULL, 6, o));
    double want[6] = {1, 2.5, 2.5, 3.75, 3.75, 5};
    for (int i = 0; i < 6; i++) CHECKF(NEAR(o[i], want[i]), "isotonic[%d] = %g, want %g", i, o[i], want[i]);
    double w[3] = {3, 1, 1}, z[3] = {2, 1, 0}, oz[3];
    CHECK(!st_isotonic(z, w, 3, oz) && NEAR(oz[0], 1.4) && NEAR(oz[2], 1.4));   /* (6 + 1 + 0) / 5 */
    /* the monotone cost fit: noisy step times become a non-decreasing curve
     * that is the least-squares one, not the running maximum */
    double rows[5] = {1, 2, 4, 8, 16}, sec[5] = {0.010, 0.014, 0.012, 0.030, 0.028}, w5[5] = {1, 1, 1, 1, 1};
    cost_curve c;
    CHECK(!rc_fit_monotone(&c, rows, sec, w5, 5, "test"));
    CHECK(c.n == 5 && NEAR(c.seconds[1], 0.013) && NEAR(c.seconds[2], 0.013) && NEAR(c.seconds[3], 0.029));
    for (int i = 1; i < c.n; i++) CHECK(c.seconds[i] >= c.seconds[i - 1]);
}

static void test_repetition(void) {
    CHECK(NEAR(st_repeated_ngram_frac("a b c d e f g", 4), 0));
    /* "x y z w" ×4: 16 words, 13 4-grams, 4 distinct */
    CHECK(NEAR(st_repeated_ngram_frac("x y z w x y z w\nx y z w   x y z w", 4), 9.0 / 13));
    CHECK(isnan(st_repeated_ngram_frac("a b c", 4)) && isnan(st_repeated_ngram_frac("", 4)));
}

int main(void) {
    test_coverage();
    test_significance();
    test_order();
    test_isotonic();
    test_repetition();
    return tu_done("test_bench_stats");
}
