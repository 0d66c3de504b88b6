/* canary.c — see canary.h: the live canary (load, probes, verdict,
 * evidence). Calibration and offline scans are canary_io.c. Talks to the
 * server over HTTP only. */
#include "canary.h"
#include "errmsg.h"
#include "httpc.h"
#include "load.h"
#include "load_out.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FINDINGS 256

void canary_opts_default(canary_opts *o) {
    memset(o, 0, sizeof *o);
    load_cli_defaults(&o->lo);
    o->duration_s = 30;
    o->burst = 8;
    o->min_drafts = 4;
    cc_thresholds_default(&o->thr, 2.0);
    o->n_probe = 8;
    o->copy_workload = "copy";
    o->spec_check = -1;
    o->content_checks = 1;
}

typedef struct {
    char *items[MAX_FINDINGS];
    int n;
} findings;

static void add_finding(findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_finding(findings *f, const char *fmt, ...) {
    if (f->n == MAX_FINDINGS) return;
    char b[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    f->items[f->n] = malloc(strlen(b) + 1);
    if (f->items[f->n]) strcpy(f->items[f->n++], b);
}

/* Text around byte offset at, control bytes escaped, at most ~160 bytes. */
static void excerpt(const char *t, long at, char *out, size_t outlen) {
    long n = (long)strlen(t);
    long a = at > 60 ? at - 60 : 0, b = at + 100 < n ? at + 100 : n;
    while (a > 0 && ((unsigned char)t[a] & 0xC0) == 0x80) a--;
    size_t o = 0;
    if (a > 0 && o + 3 < outlen) { memcpy(out, "...", 3); o = 3; }
    for (long i = a; i < b && o + 8 < outlen; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
        else if (c == '\t') { out[o++] = '\\'; out[o++] = 't'; }
        else if (c < 0x20 || c == 0x7F) o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        else out[o++] = (char)c;
    }
    if (b < n && o + 4 < outlen) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = 0;
}

/* A workload of borrowed rows (free only .items). */
static workload subset(const workload *w, const int *rows, int n, const char *name) {
    workload s = {.name = (char *)name, .path = NULL, .items = malloc(sizeof(wl_item) * (size_t)(n ? n : 1)), .n = 0};
    if (s.items)
        for (int i = 0; i < n; i++) s.items[s.n++] = w->items[rows[i]];
    return s;
}

/* A probe: the rows of w once each, `concurrency` at a time, greedy, in order. */
static int probe(const canary_opts *o, const char *base, const workload *w, int spec_depth, int max_tokens,
                 int concurrency, ld_result **res, char *err, size_t errlen) {
    ld_config c = o->lo.c;
    c.url = base;
    c.wl = w;
    c.num_prompts = w->n;
    c.concurrency = concurrency;
    c.rate = 0;
    c.use_profile = 0;
    c.duration_s = 0;
    c.shuffle = 0;
    c.first_item = 0;
    c.temperature = 0;
    c.spec_depth = spec_depth;
    c.max_tokens = max_tokens;
    c.msrc = MSRC_NONE;
    c.sglang_log = NULL;
    c.interval_s = 3600;
    c.progress = 0;
    c.flag.enabled = 0;
    c.t_origin = 0;
    return ld_run(&c, res, err, errlen);
}

static int flat_probe_once(const canary_opts *o, const char *base, const char *model, const char *prompt, int max_tokens,
                           double **top1, int *n, char *err, size_t errlen);

/* Top-1 logprob per prompt position from an echo scoring request; n = 0 when
 * the server returned none. *top1 is malloc'd. */
static int flat_probe(const canary_opts *o, const char *base, const char *model, const char *prompt, double **top1,
                      int *n, char *err, size_t errlen) {
    *top1 = NULL;
    *n = 0;
    /* max_tokens 0 scores the prompt alone (specbed, OpenAI); servers that
     * want at least one token get a second try with 1. */
    for (int mt = 0; mt <= 1 && *n == 0; mt++) {
        int r = flat_probe_once(o, base, model, prompt, mt, top1, n, err, errlen);
        if (r) return r;
    }
    return 0;
}

static int flat_probe_once(const canary_opts *o, const char *base, const char *model, const char *prompt, int max_tokens,
                           double **top1, int *n, char *err, size_t errlen) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddStringToObject(j, "prompt", prompt);
    cJSON_AddNumberToObject(j, "max_tokens", max_tokens);
    cJSON_AddBoolToObject(j, "echo", 1);
    cJSON_AddNumberToObject(j, "logprobs", 5);
    cJSON_AddNumberToObject(j, "temperature", 0);
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!body) return errf(err, errlen, "out of memory");
    char *reply;
    long st;
    int r = http_post_json(base, "/v1/completions", o->lo.c.api_key, body, 60000, &reply, &st, err, errlen);
    free(body);
    if (r) return -1;
    cJSON *rj = st == 200 ? cJSON_Parse(reply) : NULL;
    free(reply);
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(rj, "choices"), 0), "logprobs");
    const cJSON *tops = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs");
    int m = cJSON_GetArraySize(tops);
    if (m > 1) {
        *top1 = malloc(sizeof(double) * (size_t)m);
        if (*top1) {
            int i = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, tops) {
                double best = NAN;
                const cJSON *kv;
                if (cJSON_IsObject(e))
                    cJSON_ArrayForEach(kv, e) if (cJSON_IsNumber(kv) && !(kv->valuedouble <= best)) best = kv->valuedouble;
                (*top1)[i++] = best;
            }
            *n = m;
        }
    }
    cJSON_Delete(rj);
    return 0;
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

static cJSON *thr_json(const cc_thresholds *t) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "accept_len", t->accept_len);
    cJSON_AddNumberToObject(j, "bad_frac", t->bad_frac);
    cJSON_AddNumberToObject(j, "spray", t->spray);
    cJSON_AddNumberToObject(j, "loop", t->loop);
    cJSON_AddNumberToObject(j, "flat", t->flat);
    cJSON_AddNumberToObject(j, "copy_fail_frac", t->copy_fail_frac);
    cJSON_AddNumberToObject(j, "spec_mismatch_frac", t->spec_mismatch_frac);
    cJSON_AddNumberToObject(j, "nondet_frac", t->nondet_frac);
    return j;
}

static void num_or_null(cJSON *j, const char *k, double v) {
    if (isnan(v)) cJSON_AddNullToObject(j, k);
    else cJSON_AddNumberToObject(j, k, v);
}

static cJSON *obs_json(const cc_observed *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "n_intervals", o->n_intervals);
    num_or_null(j, "accept_len_min", o->accept_len_min);
    cJSON_AddNumberToObject(j, "n_texts", o->n_texts);
    cJSON_AddNumberToObject(j, "bad_frac", o->bad_frac);
    cJSON_AddNumberToObject(j, "spray_max", o->spray_max);
    cJSON_AddNumberToObject(j, "loop_max", o->loop_max);
    cJSON_AddNumberToObject(j, "n_flat", o->n_flat);
    cJSON_AddNumberToObject(j, "flat_max", o->flat_max);
    cJSON_AddNumberToObject(j, "n_copy", o->n_copy);
    cJSON_AddNumberToObject(j, "copy_fail_frac", o->copy_fail_frac);
    cJSON_AddNumberToObject(j, "n_spec", o->n_spec);
    cJSON_AddNumberToObject(j, "spec_mismatch_frac", o->spec_mismatch_frac);
    cJSON_AddNumberToObject(j, "n_det", o->n_det);
    cJSON_AddNumberToObject(j, "nondet_frac", o->nondet_frac);
    return j;
}

/* State of the live per-completion checks. */
typedef struct {
    const canary_opts *o;
    const workload *w;           /* the probe set the load cycles over */
    char **ref;                  /* reference text per probe row (NULL = none) */
    const char *ref_kind;        /* "spec off" or "quiet run" */
    char **first;                /* spec-off reference only: the first completion of each row under load */
    findings *F;
    int pairs, bad;              /* completions compared with the reference, mismatches */
    int det_pairs, det_bad;      /* later completions under load compared with the first one */
    int texts, bad_chars;
    double spray_max, loop_max;
    unsigned char *said;         /* per probe row: text checks already reported (1 bad chars, 2 spray, 4 loop) */
    double first_s;              /* run time of the first content flag; NaN */
    double t_load0;
    int fail_now;                /* a check already failed */
} live_t;

static int on_done(void *ctx, const ld_request *q, double t) {
    live_t *L = ctx;
    const canary_opts *o = L->o;
    const cc_thresholds *thr = &o->thr;
    if (!q->ok || !q->text || !o->content_checks) return 0;
    const wl_item *it = &L->w->items[q->item];
    int flagged = 0;
    char ex[400], e2[400];
    L->texts++;
    size_t at;
    int bad = cc_bad_chars(q->text, &at);
    if (bad) {
        L->bad_chars++;
        if (thr->bad_frac <= 0) flagged = 1;
        if (thr->bad_frac <= 0 && !(L->said[q->item] & 1)) {
            L->said[q->item] |= 1;
            excerpt(q->text, (long)at, ex, sizeof ex);
            add_finding(L->F, "request %d (%s) at %.1f s: %d replacement/control/invalid character(s) at byte %zu: \"%s\"",
                        q->idx, it->id, t - L->t_load0, bad, at, ex);
        }
    }
    double sp = cc_spray(q->text), lo = cc_loop(q->text);
    if (sp > L->spray_max) L->spray_max = sp;
    if (lo > L->loop_max) L->loop_max = lo;
    if (sp > thr->spray) flagged = 1;
    if (sp > thr->spray && !(L->said[q->item] & 2)) {
        L->said[q->item] |= 2;
        excerpt(q->text, 0, ex, sizeof ex);
        add_finding(L->F, "request %d (%s) at %.1f s: punctuation spray %.2f > %.2f: \"%s\"", q->idx, it->id,
                    t - L->t_load0, sp, thr->spray, ex);
    }
    if (lo > thr->loop) flagged = 1;
    if (lo > thr->loop && !(L->said[q->item] & 4)) {
        L->said[q->item] |= 4;
        excerpt(q->text, 0, ex, sizeof ex);
        add_finding(L->F, "request %d (%s) at %.1f s: repeated-trigram loop %.2f > %.2f: \"%s\"", q->idx, it->id,
                    t - L->t_load0, lo, thr->loop, ex);
    }
    const char *ref = L->ref[q->item];
    if (ref) {
        L->pairs++;
        long d = cc_first_diff(ref, q->text);
        if (d >= 0) {
            L->bad++;
            double thr_frac = !strcmp(L->ref_kind, "spec off") ? thr->spec_mismatch_frac : thr->nondet_frac;
            excerpt(ref, d, ex, sizeof ex);
            excerpt(q->text, d, e2, sizeof e2);
            add_finding(L->F, "request %d (%s) at %.1f s: greedy output under load differs from the %s reference at "
                        "byte %ld\n    %-10s \"%s\"\n    under load \"%s\"", q->idx, it->id, t - L->t_load0, L->ref_kind,
                        d, L->ref_kind, ex, e2);
            if (thr_frac <= 0) flagged = 1;
        }
    }
    /* Identical greedy requests under load: with a spec-off reference the
     * comparison above mixes speculation and determinism; this one is
     * speculation on against itself. */
    if (L->first) {
        if (!L->first[q->item]) {
            size_t n = strlen(q->text);
            L->first[q->item] = malloc(n + 1);
            if (L->first[q->item]) memcpy(L->first[q->item], q->text, n + 1);
        } else {
            L->det_pairs++;
            long d = cc_first_diff(L->first[q->item], q->text);
            if (d >= 0) {
                L->det_bad++;
                excerpt(L->first[q->item], d, ex, sizeof ex);
                excerpt(q->text, d, e2, sizeof e2);
                add_finding(L->F, "request %d (%s) at %.1f s: identical greedy requests under load differ at byte %ld\n"
                            "    earlier    \"%s\"\n    this one   \"%s\"", q->idx, it->id, t - L->t_load0, d, ex, e2);
                if (thr->nondet_frac <= 0) flagged = 1;
            }
        }
    }
    if (flagged && isnan(L->first_s)) L->first_s = t - L->t_load0;
    if (flagged) L->fail_now = 1;
    return flagged && o->fail_fast;
}

int canary_live(const canary_opts *o, const char *base_url, const char *outdir, canary_verdict *v, char *err,
                size_t errlen) {
    memset(v, 0, sizeof *v);
    v->first_flag_s = NAN;
    cc_observed_init(&v->obs);
    cc_observed *ob = &v->obs;
    const cc_thresholds *thr = &o->thr;
    char base[1024];
    http_base(base_url, base, sizeof base);
    if (ld_mkdirs(outdir, err, errlen)) return -1;
    workload *wl;
    if (workload_load(&wl, o->lo.workload ? o->lo.workload : "code", err, errlen)) return -1;
    findings F = {0};
    char p[4200];
    char **firsts = NULL;        /* see live_t.first */
    unsigned char *said = NULL;  /* see live_t.said */

    /* 0. The probe set: n_probe prompts (seeded shuffle); the load cycles over them. */
    int n = o->n_probe < wl->n ? o->n_probe : wl->n;
    int *rows = malloc(sizeof(int) * (size_t)wl->n);
    char **ref = calloc((size_t)n, sizeof *ref);
    if (!rows || !ref) { free(rows); free(ref); workload_free(wl); return errf(err, errlen, "out of memory"); }
    for (int i = 0; i < wl->n; i++) rows[i] = i;
    ld_rng rng;
    ld_rng_seed(&rng, o->lo.c.seed);
    ld_shuffle(&rng, rows, wl->n);
    workload sw = subset(wl, rows, n, wl->name);
    int max_tokens = o->lo.set_max_tokens ? o->lo.c.max_tokens : 64;

    /* 1. Reference: greedy with speculation off where the server takes a
     * per-request override (specbed), else the same requests one at a time
     * before any load. */
    char *mt = NULL;
    long mst = 0;
    msrc_kind kind = MSRC_NONE;
    if (!http_get(base, "/metrics", o->lo.c.api_key, 10000, &mt, &mst, NULL, 0) && mst == 200) kind = msrc_detect(mt);
    free(mt);
    int spec = o->spec_check < 0 ? kind == MSRC_SPECBED : o->spec_check;
    const char *ref_kind = spec ? "spec off" : "quiet run";
    if (o->content_checks && sw.n) {
        ld_result *rr;
        if (probe(o, base, &sw, spec ? 0 : -1, max_tokens, spec ? sw.n : 1, &rr, err, errlen)) goto fail_early;
        int got = 0;
        for (int k = 0; k < rr->n_req; k++)
            if (rr->req[k].ok && !ref[rr->req[k].item]) {
                ref[rr->req[k].item] = rr->req[k].text;
                rr->req[k].text = NULL;
                got++;
            }
        snprintf(p, sizeof p, "%s/reference.jsonl", outdir);
        FILE *rf = fopen(p, "w");
        for (int k = 0; rf && k < sw.n; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "id", sw.items[k].id);
            cJSON_AddStringToObject(e, "reference", spec ? "spec off" : "quiet run");
            if (ref[k]) cJSON_AddStringToObject(e, "text", ref[k]);
            else cJSON_AddNullToObject(e, "text");
            char *js = cJSON_PrintUnformatted(e);
            if (js) { fprintf(rf, "%s\n", js); free(js); }
            cJSON_Delete(e);
        }
        if (rf) fclose(rf);
        if (!got) {
            const char *why = "no request";
            for (int k = 0; k < rr->n_req; k++) if (rr->req[k].error) { why = rr->req[k].error; break; }
            errf(err, errlen, "the reference requests failed (%s)", why);
            ld_result_free(rr);
            goto fail_early;
        }
        ld_result_free(rr);
    }
    if (!spec) add_finding(&F, "note: spec-on vs spec-off check skipped (server metrics: %s; it needs a per-request "
                           "\"spec_depth\" override, which specbed has); outputs are compared with a quiet run instead",
                           msrc_name(kind));

    /* 2. Bursty greedy load over the probe set, checked as it runs. */
    ld_config c = o->lo.c;
    c.url = base;
    c.wl = &sw;
    c.shuffle = 0;
    c.temperature = 0;
    if (!o->lo.set_interval) c.interval_s = 2.0;
    c.max_tokens = max_tokens;
    if (!c.use_profile && c.rate == 0) {
        bursty_profile(&c.profile, o->duration_s, o->burst);
        c.use_profile = 1;
    }
    if (!o->lo.set_num_prompts) c.num_prompts = 0;
    c.duration_s = o->duration_s;
    c.flag = (ld_flag_rule){.enabled = thr->accept_len > 0, .threshold = thr->accept_len,
                            .min_drafts = o->min_drafts, .stop = o->fail_fast};
    firsts = spec ? calloc((size_t)(n ? n : 1), sizeof *firsts) : NULL;
    said = calloc((size_t)(n ? n : 1), 1);
    if (!said) { errf(err, errlen, "out of memory"); goto fail_early; }
    live_t L = {.o = o, .w = &sw, .ref = ref, .ref_kind = ref_kind, .first = firsts, .said = said, .F = &F, .first_s = NAN};
    L.t_load0 = 0;
    c.t_origin = http_now();
    c.on_done = on_done;
    c.on_done_ctx = &L;
    ld_result *lr;
    if (ld_run(&c, &lr, err, errlen)) goto fail_early;
    L.t_load0 = isnan(lr->t_first_send) ? 0 : lr->t_first_send;
    snprintf(p, sizeof p, "%s/load", outdir);
    ld_pcts pc = o->lo.pcts;
    if (ld_write_outputs(p, &c, lr, &pc, err, errlen)) { ld_result_free(lr); goto fail_early; }
    int n_ok = 0;
    for (int i = 0; i < lr->n_req; i++) n_ok += lr->req[i].ok;
    if (!n_ok && !lr->stopped_early) {
        const char *why = "no request was sent";
        for (int i = 0; i < lr->n_req; i++) if (lr->req[i].error) { why = lr->req[i].error; break; }
        errf(err, errlen, "no request succeeded under load (%s)", why);
        ld_result_free(lr);
        goto fail_early;
    }

    /* 3. Interval check. */
    ld_flag_rule judge = c.flag;
    judge.enabled = 1;
    judge.threshold = INFINITY;            /* "judged" = loaded, enough verify steps, has an accept length */
    double first_iv = NAN;
    for (int i = 0; i < lr->n_iv; i++) {
        const iv_row *r = &lr->iv[i];
        if (!ld_interval_flagged(&judge, r)) continue;
        v->judged_intervals++;
        ob->n_intervals++;
        if (!(r->accept_len >= ob->accept_len_min)) ob->accept_len_min = r->accept_len;
        if (thr->accept_len > 0 && r->accept_len <= thr->accept_len) {
            if (isnan(first_iv)) first_iv = r->t_end;
            char who[1400] = "";
            size_t w = 0;
            int shown = 0;
            for (int k = 0; k < lr->n_req && shown < 3; k++) {
                const ld_request *q = &lr->req[k];
                if (q->t_send > r->t_end || q->t_send + q->e2el < r->t_start || !q->text) continue;
                char ex[400];
                excerpt(q->text, 0, ex, sizeof ex);
                w += (size_t)snprintf(who + w, sizeof who - w, "\n    request %d (%s): \"%s\"", q->idx,
                                      sw.items[q->item].id, ex);
                if (w >= sizeof who) break;
                shown++;
            }
            add_finding(&F, "interval %d [%.1f s, %.1f s]: accept length %.3f <= %.3f with %g requests in flight "
                        "(%g verify steps)%s", i, r->t_start, r->t_end, r->accept_len, thr->accept_len, r->inflight,
                        r->drafts, who);
        } else if (thr->accept_len > 0 && isnan(first_iv))
            v->clean_intervals++;
    }
    if (lr->msrc == MSRC_NONE)
        add_finding(&F, "note: no metric source (%s); the interval check could not run", lr->note);
    v->first_flag_s = isnan(first_iv) ? L.first_s : isnan(L.first_s) ? first_iv : fmin(first_iv, L.first_s);
    ob->n_texts = L.texts;
    ob->bad_frac = L.texts ? (double)L.bad_chars / L.texts : 0;
    ob->spray_max = L.spray_max;
    ob->loop_max = L.loop_max;
    if (spec) {
        ob->n_spec = L.pairs;
        ob->spec_mismatch_frac = L.pairs ? (double)L.bad / L.pairs : 0;
        ob->n_det = L.det_pairs;
        ob->nondet_frac = L.det_pairs ? (double)L.det_bad / L.det_pairs : 0;
        if (thr->nondet_frac > 0 && ob->nondet_frac > thr->nondet_frac)
            add_finding(&F, "identical greedy requests under load differed in %d of %d pairs (> %.0f%% calibrated)",
                        L.det_bad, L.det_pairs, 100 * thr->nondet_frac);
    } else { ob->n_det = L.pairs; ob->nondet_frac = L.pairs ? (double)L.bad / L.pairs : 0; }
    if (thr->bad_frac > 0 && ob->bad_frac > thr->bad_frac)
        add_finding(&F, "%.0f%% of texts hold replacement/control characters (> %.0f%% calibrated)", 100 * ob->bad_frac,
                    100 * thr->bad_frac);
    double mm_thr = spec ? thr->spec_mismatch_frac : thr->nondet_frac;
    if (mm_thr > 0 && L.pairs && (double)L.bad / L.pairs > mm_thr)
        add_finding(&F, "greedy output under load differed from the %s reference in %d of %d completions (> %.0f%% "
                    "calibrated)", ref_kind, L.bad, L.pairs, 100 * mm_thr);

    /* 4. Probes after the load: flat distribution, passphrase copy. */
    int skip_probes = !o->content_checks || (o->fail_fast && lr->stopped_early);
    for (int k = 0; !skip_probes && k < sw.n && k < 2; k++) {
        double *top1;
        int m;
        if (flat_probe(o, base, lr->model, sw.items[k].prompt, &top1, &m, err, errlen) || m < 2) {
            free(top1);
            add_finding(&F, "note: flat-distribution probe skipped (the server returned no prompt logprobs for echo "
                        "scoring)");
            break;
        }
        int at;
        double drop = cc_flat(top1, m, &at);
        ob->n_flat++;
        if (drop > ob->flat_max) ob->flat_max = drop;
        if (drop > thr->flat)
            add_finding(&F, "prompt %s: flat next-token distribution at position %d: top logprob %.2f sits %.2f nats "
                        "below its neighbours' median (> %.2f)", sw.items[k].id, at, top1[at], drop, thr->flat);
        free(top1);
    }
    workload *cw = NULL;
    char cerr[512];
    if (!skip_probes && o->copy_workload && *o->copy_workload && !workload_load(&cw, o->copy_workload, cerr, sizeof cerr)) {
        int crow[64], cn = 0;
        for (int i = 0; i < cw->n && cn < o->n_probe && cn < 64; i++)
            if (cw->items[i].expected && cw->items[i].n_back >= 96 && cw->items[i].n_back <= 192) crow[cn++] = i;
        workload cs = subset(cw, crow, cn, cw->name);
        ld_result *pr = NULL;
        if (cs.n && !probe(o, base, &cs, -1, 0, cs.n, &pr, err, errlen)) {
            int fails = 0, n_ok2 = 0;
            snprintf(p, sizeof p, "%s/copy.jsonl", outdir);
            FILE *cf = fopen(p, "w");
            for (int k = 0; k < pr->n_req; k++) {
                const ld_request *q = &pr->req[k];
                const wl_item *it = &cs.items[q->item];
                if (!q->ok) continue;
                n_ok2++;
                int ok = cc_copy_ok(q->text, it->expected);
                if (cf) {
                    cJSON *e = cJSON_CreateObject();
                    cJSON_AddStringToObject(e, "id", it->id);
                    cJSON_AddNumberToObject(e, "n_back", it->n_back);
                    cJSON_AddStringToObject(e, "expected", it->expected);
                    cJSON_AddStringToObject(e, "text", q->text);
                    cJSON_AddBoolToObject(e, "copied", ok);
                    char *js = cJSON_PrintUnformatted(e);
                    if (js) { fprintf(cf, "%s\n", js); free(js); }
                    cJSON_Delete(e);
                }
                if (ok) continue;
                fails++;
                char ex[400];
                excerpt(q->text, 0, ex, sizeof ex);
                if (thr->copy_fail_frac <= 0)
                    add_finding(&F, "passphrase %s (%d tokens back): expected \"%s\", got \"%s\"", it->id, it->n_back,
                                it->expected, ex);
            }
            if (cf) fclose(cf);
            ob->n_copy = n_ok2;
            ob->copy_fail_frac = n_ok2 ? (double)fails / n_ok2 : 0;
            if (thr->copy_fail_frac > 0 && ob->copy_fail_frac > thr->copy_fail_frac)
                add_finding(&F, "passphrase copy failed in %d of %d prompts across the 128-token boundary (> %.0f%% "
                            "calibrated)", fails, n_ok2, 100 * thr->copy_fail_frac);
        }
        ld_result_free(pr);
        free(cs.items);
        workload_free(cw);
    } else if (!skip_probes && o->copy_workload && *o->copy_workload)
        add_finding(&F, "note: passphrase check skipped (%s)", cerr);

    /* 5. Verdict: any check over its threshold fails the canary. */
    int cfail = L.fail_now;
    cfail |= thr->bad_frac > 0 && ob->bad_frac > thr->bad_frac;
    cfail |= ob->flat_max > thr->flat;
    cfail |= thr->copy_fail_frac <= 0 ? ob->copy_fail_frac > 0 : ob->copy_fail_frac > thr->copy_fail_frac;
    cfail |= mm_thr > 0 && L.pairs && (double)L.bad / L.pairs > mm_thr;
    cfail |= spec && thr->nondet_frac > 0 && ob->nondet_frac > thr->nondet_frac;
    int fail = !isnan(first_iv) || cfail;
    v->ran = 1;
    v->failed = fail;
    v->content_failed = cfail;
    v->interval_failed = !isnan(first_iv);
    for (int i = 0; i < F.n; i++) v->n_findings += strncmp(F.items[i], "note:", 5) != 0;
    snprintf(v->summary, sizeof v->summary, "%s: %d finding(s); %d of %d loaded intervals judged clean%s; metrics %s",
             fail ? "FAIL" : "pass", v->n_findings, v->clean_intervals, v->judged_intervals,
             isnan(first_iv) ? "" : " before the first flag", msrc_name(lr->msrc));

    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "verdict", fail ? "fail" : "pass");
    cJSON_AddStringToObject(j, "base_url", base);
    cJSON_AddStringToObject(j, "workload", wl->name);
    cJSON_AddStringToObject(j, "metrics_source", msrc_name(lr->msrc));
    cJSON_AddStringToObject(j, "reference", ref_kind);
    num_or_null(j, "first_flag_s", v->first_flag_s);
    num_or_null(j, "first_interval_flag_s", first_iv);
    num_or_null(j, "first_content_flag_s", L.first_s);
    cJSON_AddNumberToObject(j, "judged_intervals", v->judged_intervals);
    cJSON_AddNumberToObject(j, "clean_intervals", v->clean_intervals);
    cJSON_AddNumberToObject(j, "requests", lr->n_req);
    cJSON_AddNumberToObject(j, "requests_ok", n_ok);
    cJSON_AddBoolToObject(j, "stopped_early", lr->stopped_early);
    cJSON_AddItemToObject(j, "thresholds", thr_json(thr));
    cJSON_AddItemToObject(j, "observed", obs_json(ob));
    cJSON *fa = cJSON_AddArrayToObject(j, "findings");
    for (int i = 0; i < F.n; i++) cJSON_AddItemToArray(fa, cJSON_CreateString(F.items[i]));
    snprintf(p, sizeof p, "%s/canary.json", outdir);
    ld_write_json(p, j, NULL, 0);
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/evidence.txt", outdir);
    FILE *ef = fopen(p, "w");
    if (ef) {
        fprintf(ef, "canary %s\n", v->summary);
        for (int i = 0; i < F.n; i++) fprintf(ef, "- %s\n", F.items[i]);
        fclose(ef);
    }
    int shown = 0;
    for (int i = 0; i < F.n; i++) {
        int note = !strncmp(F.items[i], "note:", 5);
        if (o->quiet) break;
        if ((fail || note) && (note || shown < 20)) { fprintf(stderr, "canary: %s\n", F.items[i]); shown += !note; }
    }
    if (fail && !o->quiet && v->n_findings > shown) fprintf(stderr, "canary: ... %d more finding(s) in %s/evidence.txt\n", v->n_findings - shown, outdir);
    for (int i = 0; i < F.n; i++) free(F.items[i]);
    for (int i = 0; i < n; i++) free(ref[i]);
    free(ref);
    for (int i = 0; firsts && i < n; i++) free(firsts[i]);
    free(firsts);
    free(said);
    free(rows);
    free(sw.items);
    ld_result_free(lr);
    workload_free(wl);
    return 0;

fail_early:
    for (int i = 0; firsts && i < n; i++) free(firsts[i]);
    free(firsts);
    free(said);
    for (int i = 0; i < F.n; i++) free(F.items[i]);
    for (int i = 0; i < n; i++) free(ref[i]);
    free(ref);
    free(rows);
    free(sw.items);
    workload_free(wl);
    return -1;
}
