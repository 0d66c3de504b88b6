/* test_drafter_ngram.c — the ngram drafter's proposals (spec/drafter_ngram.h),
 * against hand-worked contexts and a brute-force reference:
 * (a) the most recent match of the longest suffix wins, and its continuation
 *     goes on past the end of the context by copying the drafts themselves
 *     (a loop of period p drafts the whole depth);
 * (b) spec_factor caps a draft at ceil(factor · match length), depth and
 *     lookahead still cap it; 0 is the default 1, negative means no cap;
 * (c) 500 random contexts over a 3-token alphabet (every length, many
 *     repeats) agree with a reference that appends one token at a time to
 *     an explicit copy of the context — no shortcut shared with the drafter;
 * (d) bad options and the --ngram-spec-factor parser (0 → no cap, refused
 *     values named). Lossless speculation with ngram is test_spec_lossless's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "drafter_ngram.h"
#include "drafters.h"
#include "test_util.h"

enum { V = 16 };
static const int w1_nine[] = {9};

/* The drafter's proposal for tokens[0..n) at depth max_k. */
static int propose(drafter *d, const int *tokens, int n, int max_k, int *out) {
    spec_proposal p;
    memset(&p, 0, sizeof p);
    p.tokens = tokens;
    p.n_tokens = n;
    p.max_k = max_k;
    char err[256];
    CHECKF(!d->ops->propose(d, &p, 1, err, sizeof err), "%s", err);
    CHECK(!p.q_valid && !p.has_conf);
    memcpy(out, p.draft, sizeof(int) * (size_t)p.k);
    return p.k;
}

static drafter *make(int n_max, int n_min, double factor) {
    drafter *d = NULL;
    char err[256];
    ngram_opts o = {.n_max = n_max, .n_min = n_min, .spec_factor = factor, .quiet = 1};
    CHECKF(!drafter_ngram_create(&d, &o, V, err, sizeof err) && d, "%s", err);
    return d;
}

static void expect(drafter *d, const int *t, int n, int max_k, const int *want, int nwant, const char *what) {
    int got[SPEC_MAX_DEPTH];
    int k = propose(d, t, n, max_k, got);
    int ok = k == nwant && (k == 0 || !memcmp(got, want, sizeof(int) * (size_t)k));
    CHECKF(ok, "%s: %d drafts, want %d", what, k, nwant);
    if (!ok) {
        for (int i = 0; i < k; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
    }
}

/* Brute force: for len = n_max..n_min, scan every earlier start from the
 * most recent; on a match copy ext[i+len+m] into an explicit, growing copy
 * of the context (so positions past the end read what was just appended). */
static int reference(const int *t, int n, int n_max, int n_min, double factor, int max_k, int *out) {
    int ext[256 + SPEC_MAX_DEPTH];
    for (int len = n_max; len >= n_min; len--) {
        if (len >= n) continue;
        for (int i = n - len - 1; i >= 0; i--) {
            int same = 1;
            for (int q = 0; q < len; q++) same &= t[i + q] == t[n - len + q];
            if (!same) continue;
            int limit = max_k;
            if (factor > 0 && ceil(factor * len) < limit) limit = (int)ceil(factor * len);
            memcpy(ext, t, sizeof(int) * (size_t)n);
            int m = 0;
            for (; m < limit; m++) ext[n + m] = ext[i + len + m];
            memcpy(out, ext + n, sizeof(int) * (size_t)m);
            return m;   /* m ≥ 1: max_k ≥ 1 and ceil(factor · len) ≥ 1 */
        }
    }
    return 0;
}

int main(void) {
    /* (a) */
    drafter *d = make(3, 1, -1);
    {
        const int t[] = {5, 6, 7, 5, 6, 7, 5};   /* period 3: suffix 6 7 5 matched at 1 */
        const int w[] = {6, 7, 5, 6, 7, 5, 6, 7};
        expect(d, t, 7, 8, w, 8, "period 3, depth 8");
        expect(d, t, 7, 2, w, 2, "period 3, depth 2");
    }
    {
        const int t[] = {1, 2, 9, 9};            /* only "9" matches: period 1 */
        const int w[] = {9, 9, 9, 9, 9};
        expect(d, t, 4, 5, w, 5, "period 1");
    }
    {
        const int t[] = {1, 2, 3, 4, 1, 2};      /* "1 2" at 0; "4 1 2" nowhere */
        const int w[] = {3, 4, 1, 2, 3, 4, 1, 2};
        expect(d, t, 6, 8, w, 8, "far match, copy wraps into the drafts");
    }
    {
        const int t[] = {1, 2, 3, 7, 2, 3, 8, 2, 3};   /* "2 3" twice: the most recent (at 4) wins */
        const int w[] = {8, 2, 3, 8};
        expect(d, t, 9, 4, w, 4, "most recent match");
    }
    {
        const int t[] = {1, 2, 3};
        expect(d, t, 3, 8, NULL, 0, "no match");
        expect(d, t, 1, 8, NULL, 0, "one token");
    }
    drafter_free(d);

    /* (b) */
    d = make(3, 1, 2);
    {
        const int t[] = {5, 6, 7, 5, 6, 7, 5};
        const int w[] = {6, 7, 5, 6, 7, 5};
        expect(d, t, 7, 8, w, 6, "factor 2, match 3: 6 drafts");
        expect(d, t, 7, 4, w, 4, "factor 2, depth 4");
        const int t1[] = {1, 2, 9, 9};
        const int w1[] = {9, 9};
        expect(d, t1, 4, 8, w1, 2, "factor 2, match 1: 2 drafts");
    }
    drafter_free(d);
    d = make(3, 1, 0);   /* the default, 1 */
    {
        const int t[] = {5, 6, 7, 5, 6, 7, 5};
        const int w[] = {6, 7, 5};
        expect(d, t, 7, 8, w, 3, "default factor 1, match 3: 3 drafts");
        const int t1[] = {1, 2, 9, 9};
        expect(d, t1, 4, 8, w1_nine, 1, "default factor 1, match 1: 1 draft");
    }
    drafter_free(d);
    d = make(3, 1, 1.5);
    {
        const int t[] = {5, 6, 7, 5, 6, 7, 5};
        const int w[] = {6, 7, 5, 6, 7};
        expect(d, t, 7, 8, w, 5, "factor 1.5, match 3: ceil 4.5 = 5");
        const int t1[] = {1, 2, 9, 9};
        const int w1[] = {9, 9};
        expect(d, t1, 4, 8, w1, 2, "factor 1.5, match 1: ceil 1.5 = 2");
    }
    drafter_free(d);
    {
        ngram_opts o = {.n_max = 3, .n_min = 1, .lookahead = 3, .spec_factor = -1, .quiet = 1};
        char err[256];
        CHECK(!drafter_ngram_create(&d, &o, V, err, sizeof err));
        const int t[] = {5, 6, 7, 5, 6, 7, 5};
        const int w[] = {6, 7, 5};
        expect(d, t, 7, 8, w, 3, "lookahead 3");
        drafter_free(d);
    }

    /* (c) */
    srand(12);
    const double factors[] = {0, 1, 1.5, 2, 3};
    const int nmaxs[] = {1, 2, 3, 5}, nmins[] = {1, 1, 2, 2};
    int compared = 0, drafted = 0;
    for (int c = 0; c < 500; c++) {
        int n = 1 + rand() % 120, t[128];
        for (int i = 0; i < n; i++) t[i] = rand() % 3;
        int cfg = c % 4, max_k = 1 + rand() % SPEC_MAX_DEPTH;
        double f = factors[c % 5];
        d = make(nmaxs[cfg], nmins[cfg], f > 0 ? f : -1);
        int got[SPEC_MAX_DEPTH], want[SPEC_MAX_DEPTH];
        int k = propose(d, t, n, max_k, got);
        int kw = reference(t, n, nmaxs[cfg], nmins[cfg], f, max_k, want);
        CHECKF(k == kw && !memcmp(got, want, sizeof(int) * (size_t)k),
               "random context %d (n %d, n_max %d, n_min %d, factor %g, depth %d): %d drafts, reference %d", c, n,
               nmaxs[cfg], nmins[cfg], f, max_k, k, kw);
        compared++;
        drafted += k;
        drafter_free(d);
    }
    CHECKF(drafted > compared, "the random contexts drafted only %d tokens", drafted);

    /* (d) */
    {
        char err[256];
        ngram_opts o = {.n_max = 3, .n_min = 1, .spec_factor = 2e6};
        CHECK(drafter_ngram_create(&d, &o, V, err, sizeof err) && !d && strstr(err, "spec factor"));
        o = (ngram_opts){.n_max = 2, .n_min = 3};
        CHECK(drafter_ngram_create(&d, &o, V, err, sizeof err) && !d && strstr(err, "n_min"));
        o = (ngram_opts){.n_max = 3, .spec_factor = NAN};
        CHECK(drafter_ngram_create(&d, &o, V, err, sizeof err) && !d);
        drafter_opts dop = {0};
        CHECK(!drafter_opt_ngram_factor("t", "--ngram-spec-factor", "0", &dop) && dop.ngram_spec_factor < 0);
        CHECK(!drafter_opt_ngram_factor("t", "--ngram-spec-factor", "2.5", &dop) && dop.ngram_spec_factor == 2.5);
        CHECK(drafter_opt_ngram_factor("t", "--ngram-spec-factor", "-1", &dop));
        CHECK(drafter_opt_ngram_factor("t", "--ngram-spec-factor", "2x", &dop));
        CHECK(drafter_opt_ngram_factor("t", "--ngram-spec-factor", "nan", &dop));
    }
    printf("test_drafter_ngram: %d random contexts agree with the reference (%d drafts)\n", compared, drafted);
    return tu_done("test_drafter_ngram");
}
