/* label: unit */
/* test_bench_verdict.c — the one canary verdict (bench/canary/canary_verdict.h) on
 * its own: which intervals are judged (loaded, an accept length, enough
 * verify steps), the ≤-threshold rule, content items of both kinds (share
 * and max checks), reasons with their counts, the fail-fast rule, the
 * inconclusive verdict (a check asked for but not made, an interval check
 * that judged nothing), ranks judged one by one, the context-free check,
 * and the observations the same input yields. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "canary_verdict.h"
#include "test_util.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* A live interval row: requests in flight, verify steps counted. */
static iv_row live(double t_end, double accept_len, double drafts, double inflight) {
    iv_row r;
    iv_row_clear(&r);
    r.t_start = t_end - 2;
    r.t_end = t_end;
    r.accept_len = accept_len;
    r.drafts = drafts;
    r.inflight = inflight;
    r.running = inflight;
    return r;
}

static const cv_reason *find(const cv_verdict *v, cv_check c) {
    for (int k = 0; k < v->n_reasons; k++)
        if (v->reason[k].check == c) return &v->reason[k];
    return NULL;
}

static void test_clean_pass(void) {
    iv_row iv[4] = {live(2, 3.1, 40, 8), live(4, 2.6, 40, 8), live(6, 2.9, 20, 2), live(8, 3.4, 30, 8)};
    cv_item it[6] = {{CV_BAD_CHARS, 0, 1.0, 0}, {CV_SPRAY, 0.1, 1.0, 0}, {CV_LOOP, 0.2, 1.0, 0},
                     {CV_SPEC_MISMATCH, 0, 1.0, 0}, {CV_FLAT, 1.5, NAN, 0}, {CV_COPY, 0, NAN, 0}};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 4, .min_drafts = CV_MIN_DRAFTS_DEFAULT, .items = it, .n_items = 6};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && v.n_reasons == 0 && !v.interval_failed && !v.content_failed);
    CHECK(v.n_judged == 4 && v.n_clean == 4 && NEAR(v.accept_len_min, 2.6) && isnan(v.first_flag_s));
    /* nothing at all: nothing to fail on */
    cv_input none = {.min_drafts = CV_MIN_DRAFTS_DEFAULT};
    cv_judge(&none, &t, &v);
    CHECK(!v.failed && v.n_judged == 0 && isnan(v.accept_len_min));
}

static void test_interval_fails(void) {
    iv_row iv[4] = {live(2, 3.1, 40, 8), live(4, 2.0, 40, 8), live(6, 1.4, 40, 8), live(8, 3.0, 40, 8)};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 4, .min_drafts = CV_MIN_DRAFTS_DEFAULT};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(v.failed && v.interval_failed && !v.content_failed && v.n_reasons == 1);
    const cv_reason *r = find(&v, CV_ACCEPT_LEN);
    CHECK(r != NULL);
    if (r) {
        /* "≤ threshold": 2.0 itself flags */
        CHECK(r->count == 2 && r->of == 4 && NEAR(r->observed, 1.4) && NEAR(r->threshold, 2.0));
        CHECK(NEAR(r->first_s, 4) && r->first_id == 1);
    }
    CHECK(v.n_judged == 4 && v.n_clean == 1 && NEAR(v.first_flag_s, 4) && NEAR(v.accept_len_min, 1.4));
    CHECK(cv_interval_flagged(&iv[1], 4, 2.0) && cv_interval_flagged(&iv[2], 4, 2.0));
    iv_row above = live(1, 2.01, 40, 8);
    CHECK(!cv_interval_flagged(&iv[0], 4, 2.0) && !cv_interval_flagged(&above, 4, 2.0));
    /* a threshold of 0 disables the check; the intervals are still judged */
    t.accept_len = 0;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && v.n_judged == 4 && v.n_clean == 0 && !cv_interval_flagged(&iv[2], 4, 0));
    /* not under load: not judged */
    iv_row idle = live(2, 1.1, 40, 0);
    CHECK(!cv_interval_judged(&idle, 4) && !cv_interval_flagged(&idle, 4, 2.0));
}

static void test_few_drafts_not_judged(void) {
    /* the default: 16 steps (canary_verdict.h); 5 steps at 2.0 is a cold
     * server's prefill-bound first interval, not a judged rate */
    CHECK(CV_MIN_DRAFTS_DEFAULT == 16);
    iv_row iv[2] = {live(2, 1.2, 15, 8), live(4, 3.0, 16, 8)};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 2, .min_drafts = CV_MIN_DRAFTS_DEFAULT};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && v.n_judged == 1 && NEAR(v.accept_len_min, 3.0));
    CHECK(!cv_interval_judged(&iv[0], 16) && cv_interval_judged(&iv[1], 16));   /* 16 steps of 16 needed: judged */
    CHECK(cv_interval_judged(&iv[0], 15));                                      /* the option lowers the bar */
    iv_row cold = live(2, 2.0, 5, 8);
    CHECK(!cv_interval_judged(&cold, CV_MIN_DRAFTS_DEFAULT) && cv_interval_flagged(&cold, 4, 2.0));
    in.min_drafts = 15;
    cv_judge(&in, &t, &v);
    CHECK(v.failed && v.n_judged == 2);
    /* log rows count no verify steps: running requests make them loaded */
    iv_row lg;
    iv_row_clear(&lg);
    lg.accept_len = 1.9;
    lg.running = 5;
    CHECK(cv_interval_judged(&lg, 4) && cv_interval_flagged(&lg, 4, 2.0));
    lg.running = 0;
    CHECK(!cv_interval_judged(&lg, 4));
}

static void test_no_accept_len_not_judged(void) {
    /* A source that gave no accept length (nothing drafted in the interval:
     * SGLang / specbed omit "accept len") is neither judged nor flagged. */
    iv_row iv[3] = {live(2, NAN, NAN, 8), live(4, NAN, 0, 8), live(6, 2.8, 40, 8)};
    iv_row lg;
    iv_row_clear(&lg);
    lg.running = 7;   /* a log row without accept len */
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 3, .min_drafts = CV_MIN_DRAFTS_DEFAULT};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && v.n_judged == 1 && v.n_clean == 1 && NEAR(v.accept_len_min, 2.8));
    CHECK(!cv_interval_judged(&iv[0], 4) && !cv_interval_flagged(&iv[0], 4, 1e9));
    CHECK(!cv_interval_judged(&lg, 4) && !cv_interval_flagged(&lg, 0, 1e9));
    cv_input only = {.iv = &lg, .n_iv = 1, .min_drafts = 0};
    cv_judge(&only, &t, &v);
    CHECK(!v.failed && v.n_judged == 0 && isnan(v.accept_len_min));
    /* … and judging nothing is no pass: the interval check was not made */
    CHECK(v.inconclusive && v.not_made == 1u << CV_ACCEPT_LEN);
}

/* No silent pass: an interval check (threshold > 0) that judged no interval
 * is a check not made — inconclusive, with the reason in words — unless a
 * content check failed; --threshold 0 (check off) is a plain pass. */
static void test_nothing_judged_inconclusive(void) {
    iv_row none[3] = {live(2, NAN, NAN, 8), live(4, NAN, 0, 8), live(6, NAN, NAN, 2)};
    cv_item ok[2] = {{CV_SPEC_MISMATCH, 0, 1.0, 0}, {CV_BAD_CHARS, 0, 1.0, 0}};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = none, .n_iv = 3, .min_drafts = CV_MIN_DRAFTS_DEFAULT, .items = ok, .n_items = 2};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && v.inconclusive && (v.not_made >> CV_ACCEPT_LEN & 1) && !strcmp(cv_verdict_name(&v), "inconclusive"));
    CHECK(v.n_rows == 3 && v.n_with_al == 0 && v.n_judged == 0);
    char b[512];
    cv_not_judged_format(&v, "vLLM /metrics", 4, b, sizeof b);
    CHECKF(strstr(b, "not judged: vLLM /metrics gives no accept length"), "%s", b);
    /* intervals with an accept length, but every one too thin to judge */
    iv_row thin[2] = {live(2, 1.2, 2, 8), live(4, 1.1, 3, 8)};
    cv_input in2 = {.iv = thin, .n_iv = 2, .min_drafts = 4, .items = ok, .n_items = 2};
    cv_judge(&in2, &t, &v);
    CHECK(v.inconclusive && v.n_with_al == 2 && v.n_judged == 0);
    cv_not_judged_format(&v, "vLLM /metrics", 4, b, sizeof b);
    CHECKF(strstr(b, "not judged: 2 of 2 interval(s)") && strstr(b, ">= 4 verify steps"), "%s", b);
    /* no interval at all */
    cv_input in3 = {.min_drafts = 4, .items = ok, .n_items = 2};
    cv_judge(&in3, &t, &v);
    cv_not_judged_format(&v, "the SGLang log", 4, b, sizeof b);
    CHECK(v.inconclusive && strstr(b, "gave no interval"));
    /* a content failure still fails */
    cv_item bad[1] = {{CV_SPEC_MISMATCH, 1, 1.0, 0}};
    cv_input in4 = {.iv = none, .n_iv = 3, .min_drafts = 4, .items = bad, .n_items = 1};
    cv_judge(&in4, &t, &v);
    CHECK(v.failed && !v.inconclusive && !strcmp(cv_verdict_name(&v), "fail"));
    /* the interval check switched off: nothing was asked of it */
    t.accept_len = 0;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && !v.inconclusive && v.not_made == 0 && !strcmp(cv_verdict_name(&v), "pass"));
}

/* Ranks are judged one by one: the row's pooled 2.4 passes a 2.0
 * threshold, engine 1's own 2.0 does not; an idle rank (running 0: a stale
 * gauge) and a rank with too few verify steps are not judged; the reason
 * names the rank; the lowest judged rank is what calibration sees. */
static void test_ranks(void) {
    iv_row r = live(2, 2.4, 200, 8);
    r.n_ranks = 2;
    r.rank[0] = (iv_rank){"engine=\"0\"", 2.8, 100, 4};
    r.rank[1] = (iv_rank){"engine=\"1\"", 2.0, 100, 2};
    int rk;
    CHECK(NEAR(cv_interval_value(&r, 4, &rk), 2.0) && rk == 1);
    CHECK(cv_interval_judged(&r, 4) && cv_interval_flagged(&r, 4, 2.0) && !cv_interval_flagged(&r, 4, 1.9));
    iv_row iv[2] = {live(2, 3.0, 40, 8), r};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 2, .min_drafts = 4};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    const cv_reason *x = find(&v, CV_ACCEPT_LEN);
    CHECK(v.failed && x && x->count == 1 && x->low_id == 1 && !strcmp(x->rank, "engine=\"1\"") && NEAR(x->observed, 2.0));
    char b[512];
    if (x) cv_reason_format(x, b, sizeof b);
    CHECKF(x && strstr(b, "at rank engine=\"1\""), "%s", b);
    cc_observed o;
    cv_observe(&in, &o);
    CHECK(o.n_intervals == 2 && NEAR(o.accept_len_min, 2.0));
    /* an idle rank's stale gauge and a thin rank are not judged */
    iv_row g = live(2, 2.2, NAN, 8);
    g.n_ranks = 3;
    g.rank[0] = (iv_rank){"dp_rank=\"0\"", 3.3, NAN, 12};
    g.rank[1] = (iv_rank){"dp_rank=\"1\"", 1.1, NAN, 0};
    g.rank[2] = (iv_rank){"dp_rank=\"2\"", 1.0, 2, 5};
    CHECK(NEAR(cv_interval_value(&g, 4, &rk), 3.3) && rk == 0 && !cv_interval_flagged(&g, 4, 2.0));
    g.rank[1].running = NAN;   /* running unknown: judged */
    CHECK(NEAR(cv_interval_value(&g, 4, &rk), 1.1) && rk == 1 && cv_interval_flagged(&g, 4, 2.0));
    /* no rank judged: the interval is not judged at all (not a pass of it) */
    g.rank[0].accept_len = g.rank[1].accept_len = NAN;
    CHECK(!cv_interval_judged(&g, 4));
}

/* The context-free check: any repeated top-k distribution fails at the default 0. */
static void test_ctxfree(void) {
    unsigned long long sig[6] = {11, 12, 13, 12, 0, 0};
    int at;
    CHECK(cc_ctxfree(sig, 6, &at) == 1 && at == 3);   /* 0 = no signature: never a repeat */
    unsigned long long dif[3] = {1, 2, 3};
    CHECK(cc_ctxfree(dif, 3, &at) == 0 && at == -1);
    cv_item it[2] = {{CV_CTXFREE, 17, 5.0, 0}, {CV_BAD_CHARS, 0, 1.0, 0}};
    iv_row iv[1] = {live(2, 3.0, 40, 8)};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 1, .min_drafts = 4, .items = it, .n_items = 2};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    const cv_reason *x = find(&v, CV_CTXFREE);
    CHECK(v.failed && x && NEAR(x->observed, 17) && NEAR(x->first_s, 5.0) && !strcmp(cv_check_name(CV_CTXFREE), "context_free"));
    it[0].score = 0;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && !v.inconclusive);
}

static void test_content_fails(void) {
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_verdict v;
    /* share check at its default 0: one mismatch of four fails */
    cv_item mm[4] = {{CV_SPEC_MISMATCH, 0, 1.0, 0}, {CV_SPEC_MISMATCH, 1, 2.5, 1}, {CV_SPEC_MISMATCH, 0, 3.0, 2},
                     {CV_SPEC_MISMATCH, 1, 3.5, 3}};
    cv_input in = {.min_drafts = 4, .items = mm, .n_items = 4};
    cv_judge(&in, &t, &v);
    CHECK(v.failed && v.content_failed && !v.interval_failed && v.n_reasons == 1);
    const cv_reason *r = find(&v, CV_SPEC_MISMATCH);
    CHECK(r && r->count == 2 && r->of == 4 && NEAR(r->observed, 0.5) && r->threshold == 0);
    CHECK(r && NEAR(r->first_s, 2.5) && r->first_id == 1 && NEAR(v.first_flag_s, 2.5));
    CHECK(cv_item_over(&mm[1], &t) && !cv_item_over(&mm[0], &t) && cv_item_settles(&mm[1], &t));
    /* calibrated share: 0.5 > 0.4 fails, 0.5 ≤ 0.6 passes; one miss no longer settles the run */
    t.spec_mismatch_frac = 0.4;
    cv_judge(&in, &t, &v);
    CHECK(v.failed && find(&v, CV_SPEC_MISMATCH) && NEAR(find(&v, CV_SPEC_MISMATCH)->threshold, 0.4));
    t.spec_mismatch_frac = 0.6;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed);
    CHECK(cv_item_over(&mm[1], &t) && !cv_item_settles(&mm[1], &t));
    /* max check: any item over fails, and settles */
    cc_thresholds_default(&t, 2.0);
    cv_item sp[3] = {{CV_SPRAY, 0.2, 1, 0}, {CV_SPRAY, 0.7, 2, 1}, {CV_SPRAY, 0.5, 3, 2}};
    cv_input s = {.min_drafts = 4, .items = sp, .n_items = 3};
    cv_judge(&s, &t, &v);
    r = find(&v, CV_SPRAY);
    CHECK(v.failed && r && r->count == 1 && r->of == 3 && NEAR(r->observed, 0.7) && NEAR(r->threshold, 0.5));
    CHECK(!cv_item_over(&sp[2], &t) && cv_item_settles(&sp[1], &t));   /* 0.5 is not above 0.5 */
    /* a probe after the load has no time; the reason says so */
    cv_item cp[2] = {{CV_COPY, 1, NAN, 7}, {CV_COPY, 0, NAN, 8}};
    cv_input c = {.min_drafts = 4, .items = cp, .n_items = 2};
    cv_judge(&c, &t, &v);
    r = find(&v, CV_COPY);
    CHECK(v.failed && r && r->count == 1 && r->of == 2 && isnan(r->first_s) && r->first_id == 7 && isnan(v.first_flag_s));
    char line[512];
    if (r) {
        cv_reason_format(r, line, sizeof line);
        CHECKF(strstr(line, "copy") && strstr(line, "1 of 2") && !strstr(line, "first at"), "%s", line);
    }
}

static void test_multiple_reasons(void) {
    iv_row iv[3] = {live(2, 3.0, 40, 8), live(4, 1.5, 40, 8), live(6, NAN, NAN, 8)};
    cv_item it[7] = {{CV_BAD_CHARS, 0, 1, 0}, {CV_BAD_CHARS, 2, 5, 1}, {CV_LOOP, 0.9, 5, 1}, {CV_LOOP, 0.1, 1, 0},
                     {CV_NONDET, 1, 6, 2}, {CV_FLAT, 4.5, NAN, 0}, {CV_FLAT, 0.5, NAN, 1}};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 3, .min_drafts = 4, .items = it, .n_items = 7};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(v.failed && v.interval_failed && v.content_failed);
    CHECKF(v.n_reasons == 5, "%d reasons, want accept_len, bad_chars, nondeterminism, loop, flat", v.n_reasons);
    /* listed in cv_check order, each with its own numbers */
    static const cv_check want[5] = {CV_ACCEPT_LEN, CV_BAD_CHARS, CV_NONDET, CV_LOOP, CV_FLAT};
    for (int k = 0; k < 5 && k < v.n_reasons; k++) CHECK(v.reason[k].check == want[k]);
    const cv_reason *r = find(&v, CV_ACCEPT_LEN);
    CHECK(r && r->count == 1 && r->of == 2 && NEAR(r->observed, 1.5) && NEAR(r->first_s, 4));
    r = find(&v, CV_BAD_CHARS);
    CHECK(r && r->count == 1 && r->of == 2 && NEAR(r->observed, 0.5) && NEAR(r->first_s, 5));
    r = find(&v, CV_LOOP);
    CHECK(r && r->count == 1 && NEAR(r->observed, 0.9) && NEAR(r->threshold, 0.6));
    r = find(&v, CV_FLAT);
    CHECK(r && r->count == 1 && r->of == 2 && NEAR(r->observed, 4.5) && NEAR(r->threshold, 4.0));
    CHECK(NEAR(v.first_flag_s, 4) && v.n_judged == 2 && v.n_clean == 1);
    char line[512];
    cv_reason_format(&v.reason[0], line, sizeof line);
    CHECKF(strstr(line, "1 of 2") && strstr(line, "2.000") && strstr(line, "1.500"), "%s", line);
    CHECK(!strcmp(cv_check_name(CV_ACCEPT_LEN), "accept_len") && !strcmp(cv_check_name(CV_NONDET), "nondeterminism"));
}

/* A check the run was asked to make but could not (the spec-off reference
 * was speculative) is never a pass: inconclusive, unless something failed. */
static void test_inconclusive(void) {
    iv_row iv[2] = {live(2, 3.1, 40, 8), live(4, 3.0, 40, 8)};
    cv_item it[2] = {{CV_NONDET, 0, 1.0, 0}, {CV_BAD_CHARS, 0, 1.0, 0}};
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    cv_input in = {.iv = iv, .n_iv = 2, .min_drafts = CV_MIN_DRAFTS_DEFAULT, .items = it, .n_items = 2,
                   .not_made = 1u << CV_SPEC_MISMATCH};
    cv_verdict v;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && v.inconclusive && v.not_made == 1u << CV_SPEC_MISMATCH && !strcmp(cv_verdict_name(&v), "inconclusive"));
    /* a failure still fails */
    it[1].score = 2;
    cv_judge(&in, &t, &v);
    CHECK(v.failed && !v.inconclusive && !strcmp(cv_verdict_name(&v), "fail"));
    /* everything made: pass */
    it[1].score = 0;
    in.not_made = 0;
    cv_judge(&in, &t, &v);
    CHECK(!v.failed && !v.inconclusive && !strcmp(cv_verdict_name(&v), "pass"));
}

static void test_observe(void) {
    iv_row iv[3] = {live(2, 3.0, 40, 8), live(4, 1.5, 2, 8), live(6, 2.2, 40, 8)};
    cv_item it[6] = {{CV_BAD_CHARS, 0, 1, 0}, {CV_BAD_CHARS, 3, 2, 1}, {CV_SPRAY, 0.3, 1, 0}, {CV_LOOP, 0.4, 1, 0},
                     {CV_NONDET, 0, 1, 0}, {CV_COPY, 1, NAN, 0}};
    cv_input in = {.iv = iv, .n_iv = 3, .min_drafts = 4, .items = it, .n_items = 6};
    cc_observed o;
    cv_observe(&in, &o);
    CHECK(o.n_intervals == 2 && NEAR(o.accept_len_min, 2.2));   /* the 2-step interval is not judged */
    CHECK(o.n_texts == 2 && NEAR(o.bad_frac, 0.5) && NEAR(o.spray_max, 0.3) && NEAR(o.loop_max, 0.4));
    CHECK(o.n_det == 1 && o.nondet_frac == 0 && o.n_copy == 1 && NEAR(o.copy_fail_frac, 1));
    CHECK(o.n_spec == 0 && o.n_flat == 0 && o.flat_max == 0);
}

int main(void) {
    test_clean_pass();
    test_interval_fails();
    test_few_drafts_not_judged();
    test_no_accept_len_not_judged();
    test_content_fails();
    test_multiple_reasons();
    test_inconclusive();
    test_nothing_judged_inconclusive();
    test_ranks();
    test_ctxfree();
    test_observe();
    return tu_done("test_bench_verdict");
}
