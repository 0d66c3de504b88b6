/* canary_evidence.c — the live canary's evidence: the two records a run
 * grows (the items cv_judge() decides on, the findings a human reads; every
 * step adds to them, so they live below the steps, not in canary.c which
 * runs them), excerpts of suspect output, and what goes to disk and
 * stderr at the end: canary.json (verdict, reasons, thresholds, observed
 * scores, findings) and evidence.txt. Decides nothing: the verdict it
 * writes is cv_judge()'s. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "canary_internal.h"
#include "json_utf8.h"
#include "load_out.h"

void cn_finding(cn_findings *f, int check, const char *fmt, ...) {
    if (f->n == CN_MAX_FINDINGS) return;
    char b[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    size_t n = strlen(b);
    f->line[f->n] = malloc(n + 1);
    f->check[f->n] = check;
    if (f->line[f->n]) memcpy(f->line[f->n++], b, n + 1);
}

void cn_item(cn_items *l, cv_check check, double score, double t, int id) {
    if (l->n == l->cap) {
        int nc = l->cap ? 2 * l->cap : 256;
        cv_item *nv = realloc(l->v, sizeof *nv * (size_t)nc);
        if (!nv) { l->oom = 1; return; }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (cv_item){check, score, t, id};
}

int cn_finding_status(const cn_findings *f, int i, const cv_verdict *v) {
    if (f->check[i] == CN_NOTE) return -1;
    for (int k = 0; k < v->n_reasons; k++)
        if ((int)v->reason[k].check == f->check[i]) return 1;
    return 0;
}

/* Control bytes and bytes that are not valid UTF-8 are written as \xNN,
 * and a multi-byte character is never cut, so an excerpt is valid UTF-8
 * whatever the server sent (json_utf8.h). */
void cn_excerpt(const char *t, long at, char *out, size_t outlen) {
    long n = (long)strlen(t);
    long a = at > 60 ? at - 60 : 0, b = at + 100 < n ? at + 100 : n;
    for (int k = 0; k < 3 && a > 0 && ((unsigned char)t[a] & 0xC0) == 0x80; k++) a--;
    size_t o = 0;
    if (a > 0 && o + 3 < outlen) { memcpy(out, "...", 3); o = 3; }
    long i = a;
    while (i < b && o + 8 < outlen) {
        unsigned char c = (unsigned char)t[i];
        size_t k = utf8_seq_len(t + i, (size_t)(n - i));
        if (c == '\n') { out[o++] = '\\'; out[o++] = 'n'; i++; }
        else if (c == '\t') { out[o++] = '\\'; out[o++] = 't'; i++; }
        else if (!k || c < 0x20 || c == 0x7F) { o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c); i++; }
        else {
            memcpy(out + o, t + i, k);
            o += k;
            i += (long)k;
        }
    }
    if (i < n && o + 4 < outlen) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = 0;
}

static void num_or_null(cJSON *j, const char *k, double v) {
    if (isnan(v)) cJSON_AddNullToObject(j, k);
    else cJSON_AddNumberToObject(j, k, v);
}

/* A disabled check's threshold (INFINITY) is null, and named in "disabled". */
static void thr_num(cJSON *j, const char *k, double v) {
    if (isinf(v) || isnan(v)) cJSON_AddNullToObject(j, k);
    else cJSON_AddNumberToObject(j, k, v);
}

static cJSON *thr_json(const cc_thresholds *t) {
    cJSON *j = cJSON_CreateObject();
    thr_num(j, "accept_len", t->accept_len);
    thr_num(j, "bad_frac", t->bad_frac);
    thr_num(j, "spray", t->spray);
    thr_num(j, "loop", t->loop);
    thr_num(j, "flat", t->flat);
    thr_num(j, "context_free", t->ctxfree);
    thr_num(j, "copy_fail_frac", t->copy_fail_frac);
    thr_num(j, "spec_mismatch_frac", t->spec_mismatch_frac);
    thr_num(j, "nondet_frac", t->nondet_frac);
    char dis[256];
    cc_disabled_list(t, dis, sizeof dis);
    cJSON *d = cJSON_AddArrayToObject(j, "disabled");
    for (char *p = dis, *e; *p; p = *e ? e + 2 : e) {
        e = strstr(p, ", ");
        if (!e) e = p + strlen(p);
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(e - p), p);
        cJSON_AddItemToArray(d, cJSON_CreateString(nm));
    }
    return j;
}

/* The field names calibration reads back (canary_io.c). */
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
    cJSON_AddNumberToObject(j, "ctxfree_max", o->ctxfree_max);
    cJSON_AddNumberToObject(j, "n_copy", o->n_copy);
    cJSON_AddNumberToObject(j, "copy_fail_frac", o->copy_fail_frac);
    cJSON_AddNumberToObject(j, "n_spec", o->n_spec);
    cJSON_AddNumberToObject(j, "spec_mismatch_frac", o->spec_mismatch_frac);
    cJSON_AddNumberToObject(j, "n_det", o->n_det);
    cJSON_AddNumberToObject(j, "nondet_frac", o->nondet_frac);
    return j;
}

static cJSON *reasons_json(const cv_verdict *v) {
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < v->n_reasons; k++) {
        const cv_reason *r = &v->reason[k];
        char line[512];
        cv_reason_format(r, line, sizeof line);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "check", cv_check_name(r->check));
        num_or_null(e, "observed", r->observed);
        cJSON_AddNumberToObject(e, "threshold", r->threshold);
        cJSON_AddNumberToObject(e, "count", r->count);
        cJSON_AddNumberToObject(e, "of", r->of);
        num_or_null(e, "first_s", r->first_s);
        cJSON_AddStringToObject(e, "text", line);
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

/* Every flagged interval: where it sits (seconds since the load began and,
 * when the canary launched the server, since the launch), what it showed
 * and what it was compared with. */
static cJSON *flagged_json(const cn_run *R) {
    cJSON *a = cJSON_CreateArray();
    const canary_opts *o = R->o;
    double off = o->t_launch > 0 ? R->t_origin - o->t_launch : NAN;
    for (int i = 0; i < R->lr->n_iv; i++) {
        const iv_row *r = &R->lr->iv[i];
        if (!cv_interval_flagged(r, o->min_drafts, o->thr.accept_len)) continue;
        int rk;
        double al = cv_interval_value(r, o->min_drafts, &rk);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "interval", i);
        num_or_null(e, "start_s", r->t_start);
        num_or_null(e, "end_s", r->t_end);
        num_or_null(e, "start_since_launch_s", r->t_start + off);
        num_or_null(e, "end_since_launch_s", r->t_end + off);
        num_or_null(e, "accept_len", al);
        cJSON_AddNumberToObject(e, "threshold", o->thr.accept_len);
        if (rk >= 0) {
            cJSON_AddStringToObject(e, "rank", r->rank[rk].label);
            cJSON_AddNumberToObject(e, "n_ranks", r->n_ranks);
        } else cJSON_AddNullToObject(e, "rank");
        num_or_null(e, "inflight", r->inflight);
        num_or_null(e, "verify_steps", rk >= 0 ? r->rank[rk].drafts : r->drafts);
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

/* A line of evidence.txt: valid UTF-8 whatever went into it (json_utf8.h). */
static void put_line(FILE *f, const char *pre, const char *s) {
    size_t bad;
    char *t = utf8_fix(s, &bad);
    fprintf(f, "%s%s\n", pre, t ? t : "(out of memory)");
    free(t);
}

void cn_write_evidence(const cn_run *R, const canary_result *res) {
    const cv_verdict *v = &res->v;
    const canary_opts *o = R->o;
    double first_iv = NAN, first_content = NAN;
    for (int k = 0; k < v->n_reasons; k++) {
        double t = v->reason[k].first_s;
        if (v->reason[k].check == CV_ACCEPT_LEN) first_iv = t;
        else if (!isnan(t) && !(t >= first_content)) first_content = t;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "verdict", cv_verdict_name(v));
    cJSON_AddItemToObject(j, "reasons", reasons_json(v));
    cJSON *nm = cJSON_AddArrayToObject(j, "not_made");   /* checks asked for but not made */
    for (int c = 0; c < CV_N_CHECKS; c++)
        if (v->not_made >> c & 1) cJSON_AddItemToArray(nm, cJSON_CreateString(cv_check_name((cv_check)c)));
    cJSON_AddStringToObject(j, "base_url", R->base);
    cJSON_AddStringToObject(j, "workload", R->wl->name);
    cJSON_AddStringToObject(j, "metrics_source", msrc_name(R->lr->msrc));
    cJSON_AddStringToObject(j, "reference", R->ref_kind);
    if (R->not_judged[0]) cJSON_AddStringToObject(j, "not_judged", R->not_judged);
    num_or_null(j, "first_flag_s", v->first_flag_s);
    num_or_null(j, "first_interval_flag_s", first_iv);
    num_or_null(j, "first_content_flag_s", first_content);
    /* The same times from the server's first /health 200 (when launched here). */
    double hoff = o->t_health > 0 ? R->t_origin - o->t_health : NAN;
    num_or_null(j, "health_since_launch_s", o->t_health > 0 && o->t_launch > 0 ? o->t_health - o->t_launch : NAN);
    num_or_null(j, "load_start_since_health_s", hoff);
    num_or_null(j, "first_flag_since_health_s", v->first_flag_s + hoff);
    num_or_null(j, "first_interval_flag_since_health_s", first_iv + hoff);
    num_or_null(j, "first_content_flag_since_health_s", first_content + hoff);
    cJSON_AddItemToObject(j, "flagged_intervals", flagged_json(R));
    cJSON_AddNumberToObject(j, "min_drafts", o->min_drafts);
    cJSON_AddNumberToObject(j, "judged_intervals", v->n_judged);
    cJSON_AddNumberToObject(j, "clean_intervals", v->n_clean);
    cJSON_AddNumberToObject(j, "requests", R->lr->n_req);
    cJSON_AddNumberToObject(j, "requests_ok", R->n_ok);
    cJSON_AddBoolToObject(j, "stopped_early", R->lr->stopped_early);
    cJSON_AddItemToObject(j, "thresholds", thr_json(&o->thr));
    cJSON_AddItemToObject(j, "observed", obs_json(&res->obs));
    /* findings: evidence for the reasons, and notes; tolerated: what a
     * passing check saw within its calibrated share */
    cJSON *fa = cJSON_AddArrayToObject(j, "findings");
    cJSON *ta = cJSON_AddArrayToObject(j, "tolerated");
    for (int i = 0; i < R->F.n; i++)
        cJSON_AddItemToArray(cn_finding_status(&R->F, i, v) ? fa : ta, cJSON_CreateString(R->F.line[i]));
    char p[4200];
    snprintf(p, sizeof p, "%s/canary.json", R->outdir);
    ld_write_json(p, j, NULL, 0);
    cJSON_Delete(j);

    snprintf(p, sizeof p, "%s/evidence.txt", R->outdir);
    FILE *ef = fopen(p, "w");
    if (ef) {
        put_line(ef, "canary ", res->summary);
        for (int k = 0; k < v->n_reasons; k++) {
            char line[512];
            cv_reason_format(&v->reason[k], line, sizeof line);
            put_line(ef, "reason: ", line);
        }
        if (R->not_judged[0]) put_line(ef, "not made: ", R->not_judged);
        for (int i = 0; i < R->F.n; i++)
            if (cn_finding_status(&R->F, i, v)) put_line(ef, "- ", R->F.line[i]);
        int head = 0;
        for (int i = 0; i < R->F.n; i++) {
            if (cn_finding_status(&R->F, i, v)) continue;
            if (!head++) fprintf(ef, "tolerated (within a calibrated share; the check passed):\n");
            put_line(ef, "- ", R->F.line[i]);
        }
        fclose(ef);
    }
    if (o->quiet) return;
    for (int k = 0; k < v->n_reasons; k++) {
        char line[512];
        cv_reason_format(&v->reason[k], line, sizeof line);
        fprintf(stderr, "canary: FAIL because %s\n", line);
    }
    int shown = 0;
    for (int i = 0; i < R->F.n; i++) {
        int st = cn_finding_status(&R->F, i, v);
        if (st < 0 || (st > 0 && shown < 20)) { fprintf(stderr, "canary: %s\n", R->F.line[i]); shown += st > 0; }
    }
    if (v->failed && res->n_findings > shown)
        fprintf(stderr, "canary: ... %d more finding(s) in %s/evidence.txt\n", res->n_findings - shown, R->outdir);
}
