/* canary_verdict.c — see canary_verdict.h. Pure: numbers in, verdict out;
 * no I/O, no allocation. The only place an accept length meets the
 * threshold and a content score meets its limit. */
#include "canary_verdict.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const NAMES[CV_N_CHECKS] = {
    [CV_ACCEPT_LEN] = "accept_len",     [CV_BAD_CHARS] = "bad_chars", [CV_SPEC_MISMATCH] = "spec_mismatch",
    [CV_NONDET] = "nondeterminism",     [CV_COPY] = "copy",           [CV_SPRAY] = "spray",
    [CV_LOOP] = "loop",                 [CV_FLAT] = "flat",
};

const char *cv_check_name(cv_check c) { return c >= 0 && c < CV_N_CHECKS ? NAMES[c] : "?"; }

static int is_share(cv_check c) { return c == CV_BAD_CHARS || c == CV_SPEC_MISMATCH || c == CV_NONDET || c == CV_COPY; }

static double limit(cv_check c, const cc_thresholds *t) {
    switch (c) {
    case CV_ACCEPT_LEN: return t->accept_len;
    case CV_BAD_CHARS: return t->bad_frac;
    case CV_SPEC_MISMATCH: return t->spec_mismatch_frac;
    case CV_NONDET: return t->nondet_frac;
    case CV_COPY: return t->copy_fail_frac;
    case CV_SPRAY: return t->spray;
    case CV_LOOP: return t->loop;
    case CV_FLAT: return t->flat;
    default: return NAN;
    }
}

int cv_interval_judged(const iv_row *r, double min_drafts) {
    if (isnan(r->accept_len)) return 0;
    /* Live rows know what the client had in flight; log rows only what the
     * server was running. */
    int loaded = isnan(r->inflight) ? r->running > 0 : r->inflight > 0;
    if (!loaded) return 0;
    return isnan(r->drafts) || r->drafts >= min_drafts;
}

int cv_interval_flagged(const iv_row *r, double min_drafts, double threshold) {
    return threshold > 0 && cv_interval_judged(r, min_drafts) && r->accept_len <= threshold;
}

int cv_item_over(const cv_item *it, const cc_thresholds *t) {
    if (it->check <= CV_ACCEPT_LEN || it->check >= CV_N_CHECKS || isnan(it->score)) return 0;
    return is_share(it->check) ? it->score > 0 : it->score > limit(it->check, t);
}

int cv_item_settles(const cv_item *it, const cc_thresholds *t) {
    if (!cv_item_over(it, t)) return 0;
    return !is_share(it->check) || !(limit(it->check, t) > 0);
}

/* Per-check tally of the items. */
typedef struct {
    int n;                   /* items with a score */
    int failed;              /* score > 0 (what a share check counts) */
    int over;                /* cv_item_over() under the thresholds given */
    double max;              /* NaN when no item */
    double first_s;          /* the first item over: its time … */
    int first_id;            /* … and id */
} tally;

/* t may be NULL: then only n, failed and max are counted (observations). */
static void count_items(const cv_input *in, const cc_thresholds *t, tally *ty) {
    for (int c = 0; c < CV_N_CHECKS; c++) ty[c] = (tally){.max = NAN, .first_s = NAN, .first_id = -1};
    for (int i = 0; i < in->n_items; i++) {
        const cv_item *it = &in->items[i];
        if (it->check <= CV_ACCEPT_LEN || it->check >= CV_N_CHECKS || isnan(it->score)) continue;
        tally *y = &ty[it->check];
        y->n++;
        y->failed += it->score > 0;
        if (!(it->score <= y->max)) y->max = it->score;
        if (t && cv_item_over(it, t)) {
            /* the earliest, by time where items carry one */
            if (!y->over || (!isnan(it->t) && !(it->t >= y->first_s))) { y->first_s = it->t; y->first_id = it->id; }
            y->over++;
        }
    }
}

void cv_judge(const cv_input *in, const cc_thresholds *t, cv_verdict *v) {
    memset(v, 0, sizeof *v);
    v->accept_len_min = v->first_flag_s = NAN;
    /* Intervals: judged, flagged, clean before the first flag. */
    cv_reason iv = {.check = CV_ACCEPT_LEN, .observed = NAN, .threshold = t->accept_len, .first_s = NAN, .first_id = -1};
    for (int i = 0; i < in->n_iv; i++) {
        const iv_row *r = &in->iv[i];
        if (!cv_interval_judged(r, in->min_drafts)) continue;
        v->n_judged++;
        if (!(r->accept_len >= v->accept_len_min)) v->accept_len_min = r->accept_len;
        if (cv_interval_flagged(r, in->min_drafts, t->accept_len)) {
            if (!iv.count) { iv.first_s = r->t_end; iv.first_id = i; }
            iv.count++;
            if (!(r->accept_len >= iv.observed)) iv.observed = r->accept_len;
        } else if (t->accept_len > 0 && !iv.count)
            v->n_clean++;
    }
    iv.of = v->n_judged;
    if (iv.count) { v->reason[v->n_reasons++] = iv; v->interval_failed = 1; }

    /* Content: share checks fail above their share, max checks on any item over. */
    tally ty[CV_N_CHECKS];
    count_items(in, t, ty);
    for (int c = CV_ACCEPT_LEN + 1; c < CV_N_CHECKS; c++) {
        const tally *y = &ty[c];
        if (!y->n || !y->over) continue;
        double lim = limit((cv_check)c, t);
        double obs = is_share((cv_check)c) ? (double)y->over / y->n : y->max;
        if (is_share((cv_check)c) && !(obs > lim)) continue;
        v->reason[v->n_reasons++] = (cv_reason){.check = (cv_check)c, .observed = obs, .threshold = lim,
                                                .count = y->over, .of = y->n, .first_s = y->first_s,
                                                .first_id = y->first_id};
        v->content_failed = 1;
    }
    v->failed = v->n_reasons > 0;
    v->not_made = in->not_made;
    v->inconclusive = !v->failed && in->not_made != 0;
    for (int k = 0; k < v->n_reasons; k++)
        if (!isnan(v->reason[k].first_s) && !(v->reason[k].first_s >= v->first_flag_s))
            v->first_flag_s = v->reason[k].first_s;
}

const char *cv_verdict_name(const cv_verdict *v) {
    return v->failed ? "fail" : v->inconclusive ? "inconclusive" : "pass";
}

void cv_observe(const cv_input *in, cc_observed *o) {
    cc_observed_init(o);
    for (int i = 0; i < in->n_iv; i++) {
        const iv_row *r = &in->iv[i];
        if (!cv_interval_judged(r, in->min_drafts)) continue;
        o->n_intervals++;
        if (!(r->accept_len >= o->accept_len_min)) o->accept_len_min = r->accept_len;
    }
    tally ty[CV_N_CHECKS];
    count_items(in, NULL, ty);
#define SHARE(c) (ty[c].n ? (double)ty[c].failed / ty[c].n : 0)
#define MAX(c) (ty[c].n ? ty[c].max : 0)
    o->n_texts = ty[CV_BAD_CHARS].n;
    o->bad_frac = SHARE(CV_BAD_CHARS);
    o->spray_max = MAX(CV_SPRAY);
    o->loop_max = MAX(CV_LOOP);
    o->n_flat = ty[CV_FLAT].n;
    o->flat_max = MAX(CV_FLAT);
    o->n_copy = ty[CV_COPY].n;
    o->copy_fail_frac = SHARE(CV_COPY);
    o->n_spec = ty[CV_SPEC_MISMATCH].n;
    o->spec_mismatch_frac = SHARE(CV_SPEC_MISMATCH);
    o->n_det = ty[CV_NONDET].n;
    o->nondet_frac = SHARE(CV_NONDET);
#undef SHARE
#undef MAX
}

void cv_reason_format(const cv_reason *r, char *buf, size_t len) {
    static const char *const WHAT[CV_N_CHECKS] = {
        [CV_BAD_CHARS] = "texts with replacement/control/invalid characters",
        [CV_SPEC_MISMATCH] = "completions under load differing from the spec-off reference",
        [CV_NONDET] = "identical greedy requests differing",
        [CV_COPY] = "passphrase copies failing across the 128-token boundary",
        [CV_SPRAY] = "texts with punctuation spray",
        [CV_LOOP] = "texts with repeated-trigram loops",
        [CV_FLAT] = "probes with a flat next-token distribution",
    };
    char when[48] = "";
    if (!isnan(r->first_s)) snprintf(when, sizeof when, ", first at %.1f s", r->first_s);
    if (r->check == CV_ACCEPT_LEN)
        snprintf(buf, len, "accept length: %d of %d judged interval(s) at or below %.3f (lowest %.3f%s)", r->count, r->of,
                 r->threshold, r->observed, when);
    else if (is_share(r->check))
        snprintf(buf, len, "%s: %d of %d %s (share %.3f > %.3f%s)", cv_check_name(r->check), r->count, r->of,
                 WHAT[r->check], r->observed, r->threshold, when);
    else
        snprintf(buf, len, "%s: %d of %d %s (max %.3f > %.3f%s)", cv_check_name(r->check), r->count, r->of,
                 WHAT[r->check], r->observed, r->threshold, when);
}
