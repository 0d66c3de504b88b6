/* canary.c — see canary.h: the live canary, as steps that canary_live()
 * runs in order:
 *   0. probe set     n_probe prompts of the workload (seeded shuffle)
 *   1. reference     greedy, speculation off (or a quiet run), once each
 *   2. load          bursty greedy load over the probe set; each completion
 *                    is checked as it arrives (items + findings)
 *   3. probes        flat distribution, passphrase copy (canary_probes.c)
 *   4. verdict       cv_judge() over the load's intervals and every item
 *   5. evidence      canary.json, evidence.txt, stderr (canary_evidence.c)
 * Calibration and offline scans are canary_io.c. Talks to the server over
 * HTTP only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "canary_internal.h"
#include "errmsg.h"
#include "httpc.h"
#include "json_utf8.h"
#include "load_out.h"

void canary_opts_default(canary_opts *o) {
    memset(o, 0, sizeof *o);
    load_cli_defaults(&o->lo);
    o->duration_s = 30;
    o->burst = 8;
    o->min_drafts = CV_MIN_DRAFTS_DEFAULT;
    cc_thresholds_default(&o->thr, 2.0);
    o->n_probe = 8;
    o->copy_workload = "copy";
    o->spec_check = -1;
    o->content_checks = 1;
}

/* 0. The probe set: n_probe prompts (seeded shuffle); the load cycles over them. */
static int probe_set(cn_run *R, char *err, size_t errlen) {
    const canary_opts *o = R->o;
    if (workload_load(&R->wl, o->lo.workload ? o->lo.workload : "code", err, errlen)) return -1;
    int n = o->n_probe < R->wl->n ? o->n_probe : R->wl->n;
    R->rows = malloc(sizeof(int) * (size_t)(R->wl->n ? R->wl->n : 1));
    R->ref = calloc((size_t)(n ? n : 1), sizeof *R->ref);
    R->said = calloc((size_t)(n ? n : 1), 1);
    R->ref_loop = malloc(sizeof *R->ref_loop * (size_t)(n ? n : 1));
    if (!R->rows || !R->ref || !R->said || !R->ref_loop) return errf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++) R->ref_loop[i] = NAN;
    for (int i = 0; i < R->wl->n; i++) R->rows[i] = i;
    ld_rng rng;
    ld_rng_seed(&rng, o->lo.c.seed);
    ld_shuffle(&rng, R->rows, R->wl->n);
    R->sw = cn_subset(R->wl, R->rows, n, R->wl->name);
    if (!R->sw.items) return errf(err, errlen, "out of memory");
    R->max_tokens = o->lo.set_max_tokens ? o->lo.c.max_tokens : 64;
    return 0;
}

static void write_reference(const cn_run *R) {
    char p[4200];
    snprintf(p, sizeof p, "%s/reference.jsonl", R->outdir);
    FILE *rf = fopen(p, "w");
    for (int k = 0; rf && k < R->sw.n; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "id", R->sw.items[k].id);
        cJSON_AddStringToObject(e, "reference", R->ref_kind);
        if (R->ref[k]) cJSON_AddStringToObject(e, "text", R->ref[k]);
        else cJSON_AddNullToObject(e, "text");
        char *js = json_print_utf8(e, 0);
        if (js) { fprintf(rf, "%s\n", js); free(js); }
        cJSON_Delete(e);
    }
    if (rf) fclose(rf);
}

/* 1. Reference: greedy with speculation off where the server takes a
 * per-request override (specbed), else the same requests one at a time
 * before any load (then the comparison is a determinism check). */
static int reference_pass(cn_run *R, char *err, size_t errlen) {
    const canary_opts *o = R->o;
    char *mt = NULL;
    long mst = 0;
    msrc_kind kind = MSRC_NONE;
    if (!http_get(R->base, "/metrics", o->lo.c.api_key, 10000, &mt, &mst, NULL, 0) && mst == 200) kind = msrc_detect(mt);
    free(mt);
    R->spec = o->spec_check < 0 ? kind == MSRC_SPECBED : o->spec_check;
    R->ref_kind = R->spec ? "spec off" : "quiet run";
    if (!R->spec)
        cn_finding(&R->F, CN_NOTE, "note: spec-on vs spec-off check skipped (server metrics: %s; it needs a per-request "
                   "\"spec_depth\" override, which specbed has); outputs are compared with a quiet run instead",
                   msrc_name(kind));
    if (!o->content_checks || !R->sw.n) return 0;
    ld_result *rr;
    if (cn_probe_requests(R, &R->sw, R->spec ? 0 : -1, R->max_tokens, R->spec ? R->sw.n : 1, &rr, err, errlen))
        return -1;
    if (R->spec && rr->spec_depth_ignored) {
        /* The "spec-off" reference was speculative: comparing with it checks
         * determinism under load, not speculation on vs off. Say so, and do
         * not let the run pass on a check it did not make. */
        R->spec = 0;
        R->ref_kind = "spec-on run (spec_depth 0 ignored)";
        R->not_made |= 1u << CV_SPEC_MISMATCH;
        cn_finding(&R->F, CN_NOTE, "note: spec-on vs spec-off check NOT MADE: the server's draft counters moved by %.0f "
                   "draft(s) / %.0f draft token(s) during the \"spec_depth\": 0 reference pass, so it ignores the field; "
                   "outputs under load are compared with that (speculative) reference as a determinism check, and the "
                   "verdict is at best inconclusive", isnan(rr->ignored_drafts) ? 0.0 : rr->ignored_drafts,
                   isnan(rr->ignored_draft_tokens) ? 0.0 : rr->ignored_draft_tokens);
    } else if (R->spec && !rr->has_totals) {
        /* Nothing could show whether the server honoured "spec_depth": 0
         * (no draft counters): the reference is not proven speculation-off,
         * so the spec-on/off comparison is not claimed. */
        R->spec = 0;
        R->ref_kind = "unverified spec-off run (no draft counters)";
        R->not_made |= 1u << CV_SPEC_MISMATCH;
        cn_finding(&R->F, CN_NOTE, "note: spec-on vs spec-off check NOT MADE: the server's /metrics (%s) gives no draft "
                   "counters, so nothing shows that the \"spec_depth\": 0 reference pass was speculation-off; outputs under "
                   "load are compared with it as a determinism check, and the verdict is at best inconclusive",
                   msrc_name(rr->msrc));
    }
    int got = 0;
    for (int k = 0; k < rr->n_req; k++)
        if (rr->req[k].ok && !R->ref[rr->req[k].item]) {
            R->ref[rr->req[k].item] = rr->req[k].text;   /* taken over from rr */
            R->ref_loop[rr->req[k].item] = cc_loop(rr->req[k].text);
            rr->req[k].text = NULL;
            got++;
        }
    write_reference(R);
    if (!got) {
        const char *why = "no request";
        for (int k = 0; k < rr->n_req; k++) if (rr->req[k].error) { why = rr->req[k].error; break; }
        errf(err, errlen, "the reference requests failed (%s)", why);
        ld_result_free(rr);
        return -1;
    }
    ld_result_free(rr);
    return 0;
}

/* Records one item; 1 when it settles the run (--fail-fast stops). */
static int record(cn_run *R, cv_check check, double score, double t, int id) {
    cn_item(&R->items, check, score, t, id);
    cv_item it = {check, score, t, id};
    return cv_item_settles(&it, &R->o->thr);
}

/* Text checks of one completion under load: items always, a finding the
 * first time each check is over for the row. */
static int check_text(cn_run *R, const ld_request *q, double t) {
    const cc_thresholds *thr = &R->o->thr;
    const wl_item *it = &R->sw.items[q->item];
    unsigned char *said = &R->said[q->item];
    char ex[400];
    size_t at;
    int bad = cc_bad_chars(q->text, &at);
    double sp = cc_spray(q->text), lo = cc_loop(q->text);
    /* A loop the prompt's reference output (spec off, or a quiet run, on the
     * same server) also makes over the threshold is the model's own greedy
     * loop — small models loop at temperature 0 — not something serving
     * did: it counts as 0. A loop that appears only under load counts. */
    double ref_lo = R->ref_loop[q->item];
    R->n_loop_texts++;
    if (lo > thr->loop && ref_lo > thr->loop) {
        R->n_loop_excused++;
        lo = 0;
    }
    int stop = record(R, CV_BAD_CHARS, bad, t, q->idx);
    stop |= record(R, CV_SPRAY, sp, t, q->idx);
    stop |= record(R, CV_LOOP, lo, t, q->idx);
    cv_item ib = {CV_BAD_CHARS, bad, t, q->idx}, is = {CV_SPRAY, sp, t, q->idx}, il = {CV_LOOP, lo, t, q->idx};
    if (cv_item_over(&ib, thr) && !(*said & 1)) {
        *said |= 1;
        cn_excerpt(q->text, (long)at, ex, sizeof ex);
        cn_finding(&R->F, CV_BAD_CHARS, "request %d (%s) at %.1f s: %d replacement/control/invalid character(s) at byte %zu: \"%s\"",
                   q->idx, it->id, t, bad, at, ex);
    }
    if (cv_item_over(&is, thr) && !(*said & 2)) {
        *said |= 2;
        cn_excerpt(q->text, 0, ex, sizeof ex);
        cn_finding(&R->F, CV_SPRAY, "request %d (%s) at %.1f s: punctuation spray %.2f > %.2f: \"%s\"", q->idx, it->id, t, sp,
                   thr->spray, ex);
    }
    if (cv_item_over(&il, thr) && !(*said & 4)) {
        *said |= 4;
        cn_excerpt(q->text, 0, ex, sizeof ex);
        cn_finding(&R->F, CV_LOOP, "request %d (%s) at %.1f s: repeated-trigram loop %.2f > %.2f: \"%s\"", q->idx, it->id, t, lo,
                   thr->loop, ex);
    }
    return stop;
}

/* Greedy output under load against the reference, and (spec-off
 * reference only) against the row's first completion under load: the
 * first comparison mixes speculation and determinism; the second is
 * speculation on against itself. */
static int check_same(cn_run *R, const ld_request *q, double t) {
    const wl_item *it = &R->sw.items[q->item];
    char ex[400], e2[400];
    int stop = 0;
    const char *ref = R->ref[q->item];
    if (ref) {
        long d = cc_first_diff(ref, q->text);
        cv_check ck = R->spec ? CV_SPEC_MISMATCH : CV_NONDET;
        stop |= record(R, ck, d >= 0, t, q->idx);
        if (d >= 0) {
            cn_excerpt(ref, d, ex, sizeof ex);
            cn_excerpt(q->text, d, e2, sizeof e2);
            cn_finding(&R->F, (int)ck, "request %d (%s) at %.1f s: greedy output under load differs from the %s reference at "
                       "byte %ld\n    %-10s \"%s\"\n    under load \"%s\"", q->idx, it->id, t, R->ref_kind, d,
                       R->ref_kind, ex, e2);
        }
    }
    if (!R->first) return stop;
    char **first = &R->first[q->item];
    if (!*first) {
        size_t n = strlen(q->text);
        *first = malloc(n + 1);
        if (*first) memcpy(*first, q->text, n + 1);
        return stop;
    }
    long d = cc_first_diff(*first, q->text);
    stop |= record(R, CV_NONDET, d >= 0, t, q->idx);
    if (d >= 0) {
        cn_excerpt(*first, d, ex, sizeof ex);
        cn_excerpt(q->text, d, e2, sizeof e2);
        cn_finding(&R->F, CV_NONDET, "request %d (%s) at %.1f s: identical greedy requests under load differ at byte %ld\n"
                   "    earlier    \"%s\"\n    this one   \"%s\"", q->idx, it->id, t, d, ex, e2);
    }
    return stop;
}

/* The load's per-completion callback (t = seconds since the load began). */
static int on_done(void *ctx, const ld_request *q, double t) {
    cn_run *R = ctx;
    if (!q->ok || !q->text || !R->o->content_checks) return 0;
    int stop = check_text(R, q, t);
    stop |= check_same(R, q, t);
    return stop && R->o->fail_fast;
}

/* The load's per-interval callback: only --fail-fast needs to know now. */
static int on_interval(void *ctx, const iv_row *r) {
    const cn_run *R = ctx;
    return R->o->fail_fast && cv_interval_flagged(r, R->o->min_drafts, R->o->thr.accept_len);
}

static void bursty_profile(ld_profile *p, double dur, int burst) {
    memset(p, 0, sizeof *p);
    double t = 0;
    while (t < dur && p->n + 2 <= LD_MAX_PHASES) {
        double a = dur - t < 4 ? dur - t : 4;
        p->ph[p->n++] = (ld_phase){.dur_s = a, .concurrency = burst};
        t += a;
        if (t >= dur) break;
        double b = dur - t < 2 ? dur - t : 2;
        p->ph[p->n++] = (ld_phase){.dur_s = b, .concurrency = 2};
        t += b;
    }
}

/* 2. Bursty greedy load over the probe set, checked as it runs; its
 * outputs go to OUT/load. */
static int run_load(cn_run *R, char *err, size_t errlen) {
    const canary_opts *o = R->o;
    ld_config *c = &R->lc;
    *c = o->lo.c;
    c->url = R->base;
    c->wl = &R->sw;
    c->shuffle = 0;
    c->temperature = 0;
    c->top_p = 1;
    if (!o->lo.set_interval) c->interval_s = 2.0;
    c->max_tokens = R->max_tokens;
    if (!c->use_profile && c->rate == 0) {
        bursty_profile(&c->profile, o->duration_s, o->burst);
        c->use_profile = 1;
    }
    if (!o->lo.set_num_prompts) c->num_prompts = 0;
    c->duration_s = o->duration_s;
    if (R->spec) {
        R->first = calloc((size_t)(R->sw.n ? R->sw.n : 1), sizeof *R->first);
        if (!R->first) return errf(err, errlen, "out of memory");
    }
    c->t_origin = R->t_origin = http_now();    /* run times are seconds since the load began */
    c->on_done = on_done;
    c->on_done_ctx = R;
    c->on_interval = on_interval;
    c->on_interval_ctx = R;
    if (ld_run(c, &R->lr, err, errlen)) return -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/load", R->outdir);
    ld_pcts pc = o->lo.pcts;
    if (ld_write_outputs(p, c, R->lr, &pc, err, errlen)) return -1;
    for (int i = 0; i < R->lr->n_req; i++) R->n_ok += R->lr->req[i].ok;
    if (!R->n_ok && !R->lr->stopped_early) {
        const char *why = "no request was sent";
        for (int i = 0; i < R->lr->n_req; i++) if (R->lr->req[i].error) { why = R->lr->req[i].error; break; }
        return errf(err, errlen, "no request succeeded under load (%s)", why);
    }
    if (R->lr->msrc == MSRC_NONE)
        cn_finding(&R->F, CN_NOTE, "note: no metric source (%s); the interval check could not run", R->lr->note);
    if (R->lr->n_scrapes_failed)
        cn_finding(&R->F, CN_NOTE, "note: %d of %d /metrics scrape(s) failed (first: %s); intervals are missing from the "
                   "interval check", R->lr->n_scrapes_failed, R->lr->n_scrapes, R->lr->scrape_error);
    if (R->lr->msrc == MSRC_LLAMACPP)
        cn_finding(&R->F, CN_NOTE, "note: llama.cpp counts at request completion: an interval's accept length covers "
                   "the requests that finished in it");
    return 0;
}

const char *cn_source_desc(const cn_run *R) {
    switch (R->lr ? R->lr->msrc : MSRC_NONE) {
    case MSRC_SPECBED: return "specbed /metrics";
    case MSRC_VLLM: return "vLLM /metrics";
    case MSRC_LLAMACPP: return "llama.cpp /metrics";
    case MSRC_SGLANG: return R->o->lo.c.sglang_log ? "the SGLang decode log" : "SGLang /metrics gauges";
    default: return "the server (no known /metrics)";
    }
}

/* Evidence for a flagged interval: the requests in flight during it. */
static void interval_finding(cn_run *R, int i, const iv_row *r) {
    const ld_result *lr = R->lr;
    char who[1400] = "";
    size_t w = 0;
    for (int k = 0, shown = 0; k < lr->n_req && shown < 3 && w < sizeof who; k++) {
        const ld_request *q = &lr->req[k];
        if (q->t_send > r->t_end || q->t_send + q->e2el < r->t_start || !q->text) continue;
        char ex[400];
        cn_excerpt(q->text, 0, ex, sizeof ex);
        w += (size_t)snprintf(who + w, sizeof who - w, "\n    request %d (%s): \"%s\"", q->idx, R->sw.items[q->item].id, ex);
        shown++;
    }
    int rk;
    double al = cv_interval_value(r, R->o->min_drafts, &rk);
    char boot[96] = "", rank[96] = "";
    if (R->o->t_launch > 0) {
        double off = R->t_origin - R->o->t_launch;
        snprintf(boot, sizeof boot, " = [%.1f s, %.1f s] since the server's launch", r->t_start + off, r->t_end + off);
    }
    if (rk >= 0) snprintf(rank, sizeof rank, " at rank %s (of %d)", r->rank[rk].label, r->n_ranks);
    cn_finding(&R->F, CV_ACCEPT_LEN, "interval %d [%.1f s, %.1f s] of the load%s: accept length %.3f%s <= threshold %.3f "
               "with %g requests in flight (%g verify steps)%s", i, r->t_start, r->t_end, boot, al, rank,
               R->o->thr.accept_len, r->inflight, rk >= 0 ? r->rank[rk].drafts : r->drafts, who);
}

/* 4. The verdict, the observations behind it, and the one-line summary. */
static int judge(cn_run *R, canary_result *res, char *err, size_t errlen) {
    const canary_opts *o = R->o;
    if (R->items.oom) return errf(err, errlen, "out of memory recording the content checks");
    cv_input in = {.iv = R->lr->iv, .n_iv = R->lr->n_iv, .min_drafts = o->min_drafts,
                   .items = R->items.v, .n_items = R->items.n, .not_made = R->not_made};
    cv_judge(&in, &o->thr, &res->v);
    cv_observe(&in, &res->obs);
    if (res->v.not_made >> CV_ACCEPT_LEN & 1) {
        cv_not_judged_format(&res->v, cn_source_desc(R), o->min_drafts, R->not_judged, sizeof R->not_judged);
        cn_finding(&R->F, CN_NOTE, "note: %s; the verdict is at best inconclusive", R->not_judged);
    }
    for (int i = 0; i < R->lr->n_iv; i++)
        if (cv_interval_flagged(&R->lr->iv[i], o->min_drafts, o->thr.accept_len)) interval_finding(R, i, &R->lr->iv[i]);
    if (R->n_loop_excused)
        cn_finding(&R->F, CN_NOTE, "note: %d of %d load text(s) loop above %.2f where their prompt's %s reference loops "
                   "above it too: the model's own greedy loops, not counted against the loop check", R->n_loop_excused,
                   R->n_loop_texts, o->thr.loop, R->ref_kind);
    char dis[256];
    if (cc_disabled_list(&o->thr, dis, sizeof dis))
        cn_finding(&R->F, CN_NOTE, "note: WARNING: check(s) DISABLED by their thresholds (calibrated at or beyond the top "
                   "of their range): %s; this verdict does not cover them", dis);
    for (int i = 0; i < R->F.n; i++) res->n_findings += cn_finding_status(&R->F, i, &res->v) > 0;
    const cv_verdict *v = &res->v;
    char why[256] = "";
    size_t w = 0;
    for (int k = 0; k < v->n_reasons && w < sizeof why; k++)
        w += (size_t)snprintf(why + w, sizeof why - w, "%s%s", k ? ", " : " (", cv_check_name(v->reason[k].check));
    if (w && w + 1 < sizeof why) strcat(why, ")");
    if (!v->failed && v->not_made) {
        w = 0;
        for (int c = 0; c < CV_N_CHECKS && w < sizeof why; c++)
            if (v->not_made >> c & 1) w += (size_t)snprintf(why + w, sizeof why - w, "%s%s", w ? ", " : " (", cv_check_name((cv_check)c));
        if (w && w + 12 < sizeof why) strcat(why, " not made)");
    }
    snprintf(res->summary, sizeof res->summary, "%s%s: %d finding(s); %d of %d judged interval(s) clean%s; metrics %s",
             v->failed ? "FAIL" : v->inconclusive ? "INCONCLUSIVE" : "pass", why, res->n_findings, v->n_clean, v->n_judged,
             v->interval_failed ? " before the first flag" : "", msrc_name(R->lr->msrc));
    return 0;
}

static void run_free(cn_run *R) {
    for (int i = 0; i < R->F.n; i++) free(R->F.line[i]);
    for (int i = 0; R->ref && i < R->sw.n; i++) free(R->ref[i]);
    for (int i = 0; R->first && i < R->sw.n; i++) free(R->first[i]);
    free(R->ref);
    free(R->first);
    free(R->said);
    free(R->ref_loop);
    free(R->items.v);
    free(R->rows);
    free(R->sw.items);
    ld_result_free(R->lr);
    workload_free(R->wl);
}

int canary_live(const canary_opts *o, const char *base_url, const char *outdir, canary_result *res, char *err,
                size_t errlen) {
    memset(res, 0, sizeof *res);
    cn_run R = {.o = o, .outdir = outdir};
    http_base(base_url, R.base, sizeof R.base);
    int rc = -1;
    if (ld_mkdirs(outdir, err, errlen) || probe_set(&R, err, errlen)) goto out;
    if (reference_pass(&R, err, errlen)) goto out;                                   /* 1 */
    if (run_load(&R, err, errlen)) goto out;                                         /* 2 */
    if (o->content_checks && !(o->fail_fast && R.lr->stopped_early)) cn_probes(&R);  /* 3: a fail-fast stop skips them */
    if (judge(&R, res, err, errlen)) goto out;                                       /* 4 */
    res->t_load_origin = R.t_origin;
    cn_write_evidence(&R, res);                                                      /* 5 */
    rc = 0;
out:
    run_free(&R);
    return rc;
}
