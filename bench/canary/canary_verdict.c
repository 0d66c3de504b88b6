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
    [CV_LOOP] = "loop",                 [CV_FLAT] = "flat",           [CV_CTXFREE] = "context_free",
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
    case CV_CTXFREE: return t->ctxfree;
    default: return NAN;
    }
}

static int enough(double drafts, double min_drafts) { return isnan(drafts) || drafts >= min_drafts; }

double cv_interval_value(const iv_row *r, double min_drafts, int *rank) {
    if (rank) *rank = -1;
    /* Live rows know what the client had in flight; log rows only what the
     * server was running. */
    int loaded = isnan(r->inflight) ? r->running > 0 : r->inflight > 0;
    if (!loaded) return NAN;
    if (r->n_ranks <= 0) return !isnan(r->accept_len) && enough(r->drafts, min_drafts) ? r->accept_len : NAN;
    double low = NAN;
    for (int i = 0; i < r->n_ranks && i < IV_MAX_RANKS; i++) {
        const iv_rank *k = &r->rank[i];
        if (isnan(k->accept_len) || !enough(k->drafts, min_drafts) || k->running == 0) continue;   /* idle rank: its gauge is stale */
        if (!(k->accept_len >= low)) {
            low = k->accept_len;
            if (rank) *rank = i;
        }
    }
    return low;
}

int cv_interval_judged(const iv_row *r, double min_drafts) { return !isnan(cv_interval_value(r, min_drafts, NULL)); }

int cv_interval_flagged(const iv_row *r, double min_drafts, double threshold) {
    double v = cv_interval_value(r, min_drafts, NULL);
    return threshold > 0 && !isnan(v) && v <= threshold;
}

static int has_al(const iv_row *r) {
    if (!isnan(r->accept_len)) return 1;
    for (int i = 0; i < r->n_ranks && i < IV_MAX_RANKS; i++)
        if (!isnan(r->rank[i].accept_len)) return 1;
    return 0;
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
    cv_reason iv = {.check = CV_ACCEPT_LEN, .observed = NAN, .threshold = t->accept_len, .first_s = NAN, .first_id = -1,
                    .low_id = -1};
    v->n_rows = in->n_iv;
    for (int i = 0; i < in->n_iv; i++) {
        const iv_row *r = &in->iv[i];
        v->n_with_al += has_al(r);
        int rk;
        double al = cv_interval_value(r, in->min_drafts, &rk);
        if (isnan(al)) continue;
        v->n_judged++;
        if (!(al >= v->accept_len_min)) v->accept_len_min = al;
        if (t->accept_len > 0 && al <= t->accept_len) {
            if (!iv.count) { iv.first_s = r->t_end; iv.first_id = i; }
            iv.count++;
            if (!(al >= iv.observed)) {
                iv.observed = al;
                iv.low_id = i;
                snprintf(iv.rank, sizeof iv.rank, "%s", rk >= 0 ? r->rank[rk].label : "");
            }
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
                                                .first_id = y->first_id, .low_id = -1};
        v->content_failed = 1;
    }
    v->failed = v->n_reasons > 0;
    v->not_made = in->not_made;
    if (t->accept_len > 0 && v->n_judged == 0) v->not_made |= 1u << CV_ACCEPT_LEN;   /* no silent pass */
    v->inconclusive = !v->failed && v->not_made != 0;
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
        double al = cv_interval_value(r, in->min_drafts, NULL);
        if (isnan(al)) continue;
        o->n_intervals++;
        if (!(al >= o->accept_len_min)) o->accept_len_min = al;
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
    o->ctxfree_max = MAX(CV_CTXFREE);
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
        [CV_CTXFREE] = "probes with a context-free next-token distribution (one top-k repeated at other contexts)",
    };
    char when[48] = "";
    if (!isnan(r->first_s)) snprintf(when, sizeof when, ", first at %.1f s", r->first_s);
    if (r->check == CV_ACCEPT_LEN)
        snprintf(buf, len, "accept length: %d of %d judged interval(s) at or below %.3f (lowest %.3f%s%s%s)", r->count, r->of,
                 r->threshold, r->observed, r->rank[0] ? " at rank " : "", r->rank, when);
    else if (is_share(r->check))
        snprintf(buf, len, "%s: %d of %d %s (share %.3f > %.3f%s)", cv_check_name(r->check), r->count, r->of,
                 WHAT[r->check], r->observed, r->threshold, when);
    else
        snprintf(buf, len, "%s: %d of %d %s (max %.3f > %.3f%s)", cv_check_name(r->check), r->count, r->of,
                 WHAT[r->check], r->observed, r->threshold, when);
}

void cv_not_judged_format(const cv_verdict *v, const char *source, double min_drafts, char *buf, size_t len) {
    if (!v->n_rows)
        snprintf(buf, len, "accept length: not judged: %s gave no interval", source);
    else if (!v->n_with_al)
        snprintf(buf, len, "accept length: not judged: %s gives no accept length (%d interval(s), none with one: "
                 "nothing drafted in them, or the source does not report it)", source, v->n_rows);
    else
        snprintf(buf, len, "accept length: not judged: %d of %d interval(s) from %s had an accept length, but none was "
                 "under load with >= %g verify steps", v->n_with_al, v->n_rows, source, min_drafts);
}
