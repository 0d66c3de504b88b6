/* load_out.c — see load_out.h. Turns an ld_result into files; no HTTP. */
#include "load_out.h"
#include "csv_row.h"
#include "errmsg.h"
#include "interval_csv.h"
#include "stats.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int ld_pcts_parse(const char *s, ld_pcts *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        if (!*p) break;
        char *e;
        double v = strtod(p, &e);
        if (e == p || !(v > 0 && v < 100)) return errf(err, errlen, "--percentiles: '%s' must be numbers in (0,100)", s);
        if (out->n == LD_MAX_PCT) return errf(err, errlen, "--percentiles: at most %d values", LD_MAX_PCT);
        out->p[out->n++] = v;
        p = e;
    }
    if (!out->n) return errf(err, errlen, "--percentiles: empty");
    return 0;
}

int ld_mkdirs(const char *dir, char *err, size_t errlen) {
    char b[4096];
    snprintf(b, sizeof b, "%s", dir);
    for (char *p = b + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(b, 0755) && errno != EEXIST) return errf(err, errlen, "%s: cannot create directory: %s", b, strerror(errno));
        *p = '/';
    }
    if (mkdir(b, 0755) && errno != EEXIST) return errf(err, errlen, "%s: cannot create directory: %s", b, strerror(errno));
    return 0;
}

int ld_write_json(const char *path, const cJSON *j, char *err, size_t errlen) {
    char *s = cJSON_Print(j);
    if (!s) return errf(err, errlen, "%s: out of memory", path);
    FILE *f = fopen(path, "w");
    if (!f) { free(s); return errf(err, errlen, "%s: %s", path, strerror(errno)); }
    fputs(s, f);
    fputc('\n', f);
    free(s);
    if (fclose(f)) return errf(err, errlen, "%s: write failed", path);
    return 0;
}

static double tpot_of(const ld_request *q) {
    if (!q->ok || q->n_out < 2 || isnan(q->ttft)) return NAN;
    return (q->e2el - q->ttft) / (q->n_out - 1);
}

/* A number, or null for NaN (JSON has no NaN). */
static void add_num(cJSON *j, const char *k, double v) {
    if (isnan(v) || isinf(v)) cJSON_AddNullToObject(j, k);
    else cJSON_AddNumberToObject(j, k, v);
}

static void add_dist(cJSON *j, const char *name, dvec *v, const ld_pcts *pc) {
    char k[64];
    st_sort(v->v, v->n);
    snprintf(k, sizeof k, "mean_%s_ms", name);   add_num(j, k, st_mean(v->v, v->n) * 1e3);
    snprintf(k, sizeof k, "median_%s_ms", name); add_num(j, k, st_percentile_sorted(v->v, v->n, 50) * 1e3);
    snprintf(k, sizeof k, "std_%s_ms", name);    add_num(j, k, st_std(v->v, v->n) * 1e3);
    for (int i = 0; i < pc->n; i++) {
        char ps[16];
        snprintf(ps, sizeof ps, "%g", pc->p[i]);
        for (char *q = ps; *q; q++) if (*q == '.') *q = '_';
        snprintf(k, sizeof k, "p%s_%s_ms", ps, name);
        add_num(j, k, st_percentile_sorted(v->v, v->n, pc->p[i]) * 1e3);
    }
}

cJSON *ld_summary_json(const ld_config *c, const ld_result *r, const ld_pcts *pc) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
    cJSON_AddStringToObject(j, "date", date);
    cJSON_AddStringToObject(j, "backend", c->endpoint == EP_CHAT ? "openai-chat" : "openai");
    cJSON_AddStringToObject(j, "base_url", c->url ? c->url : "");
    cJSON_AddStringToObject(j, "model_id", r->model);
    cJSON_AddStringToObject(j, "workload", c->wl ? c->wl->name : "");
    cJSON_AddStringToObject(j, "metrics_source", msrc_name(r->msrc));
    cJSON_AddNumberToObject(j, "num_prompts", c->num_prompts);
    if (c->use_profile) {
        char b[1024];
        ld_profile_format(&c->profile, b, sizeof b);
        cJSON_AddStringToObject(j, "profile", b);
    } else if (c->rate > 0) {
        if (isinf(c->rate)) cJSON_AddStringToObject(j, "request_rate", "inf");
        else cJSON_AddNumberToObject(j, "request_rate", c->rate);
        cJSON_AddNumberToObject(j, "burstiness", c->burstiness);
        if (c->max_concurrency > 0) cJSON_AddNumberToObject(j, "max_concurrency", c->max_concurrency);
    } else
        cJSON_AddNumberToObject(j, "max_concurrency", c->concurrency);
    cJSON_AddNumberToObject(j, "max_tokens", c->max_tokens);
    cJSON_AddNumberToObject(j, "temperature", c->temperature);
    cJSON_AddNumberToObject(j, "seed", (double)c->seed);
    cJSON_AddNumberToObject(j, "interval_s", c->interval_s);
    if (c->spec_depth >= 0) cJSON_AddNumberToObject(j, "spec_depth", c->spec_depth);

    int completed = 0, failed = 0, good = 0;
    long tin = 0, tout = 0;
    dvec ttft = {0}, tpot = {0}, itl = {0}, e2el = {0};
    int has_slo = c->slo.ttft_ms > 0 || c->slo.tpot_ms > 0 || c->slo.e2el_ms > 0;
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        if (!q->ok) { failed++; continue; }
        completed++;
        tin += q->n_in;
        tout += q->n_out;
        if (!isnan(q->ttft)) dvec_push(&ttft, q->ttft);
        double tp = tpot_of(q);
        if (!isnan(tp)) dvec_push(&tpot, tp);
        for (int k = 0; k < q->n_itl; k++) dvec_push(&itl, q->itl[k]);
        dvec_push(&e2el, q->e2el);
        if (has_slo) {
            int ok = 1;
            if (c->slo.ttft_ms > 0 && !(q->ttft * 1e3 <= c->slo.ttft_ms)) ok = 0;
            if (c->slo.tpot_ms > 0 && !isnan(tp) && !(tp * 1e3 <= c->slo.tpot_ms)) ok = 0;
            if (c->slo.e2el_ms > 0 && !(q->e2el * 1e3 <= c->slo.e2el_ms)) ok = 0;
            good += ok;
        }
    }
    double dur = r->duration;
    cJSON_AddNumberToObject(j, "duration", dur);
    cJSON_AddNumberToObject(j, "completed", completed);
    cJSON_AddNumberToObject(j, "failed", failed);
    cJSON_AddNumberToObject(j, "total_input_tokens", (double)tin);
    cJSON_AddNumberToObject(j, "total_output_tokens", (double)tout);
    add_num(j, "request_throughput", dur > 0 ? completed / dur : NAN);
    if (has_slo) add_num(j, "request_goodput", dur > 0 ? good / dur : NAN);
    add_num(j, "output_throughput", dur > 0 ? tout / dur : NAN);
    add_num(j, "total_token_throughput", dur > 0 ? (tin + tout) / dur : NAN);
    double max_tps = NAN, max_run = NAN;
    for (int i = 0; i < r->n_iv; i++) {
        if (!isnan(r->iv[i].client_tps) && !(r->iv[i].client_tps <= max_tps)) max_tps = r->iv[i].client_tps;
        if (!isnan(r->iv[i].inflight) && !(r->iv[i].inflight <= max_run)) max_run = r->iv[i].inflight;
    }
    add_num(j, "max_output_tokens_per_s", max_tps);
    add_num(j, "max_concurrent_requests", max_run);
    add_dist(j, "ttft", &ttft, pc);
    add_dist(j, "tpot", &tpot, pc);
    add_dist(j, "itl", &itl, pc);
    add_dist(j, "e2el", &e2el, pc);
    dvec_free(&ttft); dvec_free(&tpot); dvec_free(&itl); dvec_free(&e2el);

    /* Speculative decoding over the whole run. */
    double min_al = NAN, sum_al = 0;
    int n_al = 0;
    for (int i = 0; i < r->n_iv; i++) {
        double a = r->iv[i].accept_len;
        if (isnan(a)) continue;
        if (!(a >= min_al)) min_al = a;
        sum_al += a;
        n_al++;
    }
    if (r->has_totals) {
        add_num(j, "spec_decode_acceptance_length", r->totals.accept_len);
        add_num(j, "spec_decode_acceptance_rate", r->totals.accept_rate);
        add_num(j, "spec_decode_num_drafts", r->totals.drafts);
        add_num(j, "spec_decode_num_draft_tokens", r->totals.draft_tokens);
        add_num(j, "spec_decode_num_accepted_tokens", r->totals.accepted);
        cJSON *pp = cJSON_AddArrayToObject(j, "spec_decode_per_position_acceptance_rate");
        for (int i = 0; i < r->totals.n_pos; i++)
            cJSON_AddItemToArray(pp, isnan(r->totals.pos_rate[i]) ? cJSON_CreateNull() : cJSON_CreateNumber(r->totals.pos_rate[i]));
    } else if (n_al) {
        /* SGLang logs give no counts: the mean over intervals is the best available. */
        cJSON_AddNumberToObject(j, "spec_decode_acceptance_length", sum_al / n_al);
        cJSON_AddStringToObject(j, "spec_decode_acceptance_length_source", "mean of decode-batch intervals");
    }
    cJSON_AddNumberToObject(j, "num_intervals", r->n_iv);
    add_num(j, "min_interval_accept_length", min_al);
    add_num(j, "mean_interval_accept_length", n_al ? sum_al / n_al : NAN);
    if (r->note[0]) cJSON_AddStringToObject(j, "note", r->note);
    return j;
}

static void ms(csv_row *row, double s) {
    if (isnan(s)) csv_row_field(row, "");
    else csv_row_fieldf(row, "%.3f", s * 1e3);
}

static int write_requests(const char *path, const ld_config *c, const ld_result *r, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return errf(err, errlen, "%s: %s", path, strerror(errno));
    csv_row row = {f, 0};
    const char *h[] = {"idx", "id", "category", "phase", "t_send_s", "ttft_ms", "tpot_ms", "e2el_ms", "itl_mean_ms",
                       "itl_max_ms", "input_tokens", "output_tokens", "ok", "http_status", "finish_reason", "error"};
    for (size_t i = 0; i < sizeof h / sizeof *h; i++) csv_row_field(&row, h[i]);
    csv_row_end(&row);
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        const wl_item *it = &c->wl->items[q->item];
        double im = NAN, ix = NAN;
        if (q->n_itl) {
            im = st_mean(q->itl, (size_t)q->n_itl);
            ix = q->itl[0];
            for (int k = 1; k < q->n_itl; k++) if (q->itl[k] > ix) ix = q->itl[k];
        }
        csv_row_fieldf(&row, "%d", q->idx);
        csv_row_field(&row, it->id);
        csv_row_field(&row, it->category);
        csv_row_fieldf(&row, "%d", q->phase);
        csv_row_fieldf(&row, "%.4f", q->t_send);
        ms(&row, q->ttft);
        ms(&row, tpot_of(q));
        ms(&row, q->e2el);
        ms(&row, im);
        ms(&row, ix);
        csv_row_fieldf(&row, "%d", q->n_in);
        csv_row_fieldf(&row, "%d", q->n_out);
        csv_row_fieldf(&row, "%d", q->ok);
        csv_row_fieldf(&row, "%ld", q->http_status);
        csv_row_field(&row, q->finish_reason ? q->finish_reason : "");
        csv_row_field(&row, q->error ? q->error : "");
        csv_row_end(&row);
    }
    if (fclose(f)) return errf(err, errlen, "%s: write failed", path);
    return 0;
}

static int write_outputs_jsonl(const char *path, const ld_config *c, const ld_result *r, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return errf(err, errlen, "%s: %s", path, strerror(errno));
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "idx", q->idx);
        cJSON_AddStringToObject(o, "id", c->wl->items[q->item].id);
        cJSON_AddBoolToObject(o, "ok", q->ok);
        cJSON_AddNumberToObject(o, "t_send_s", q->t_send);
        cJSON_AddStringToObject(o, "text", q->text ? q->text : "");
        char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (s) { fputs(s, f); fputc('\n', f); free(s); }
    }
    if (fclose(f)) return errf(err, errlen, "%s: write failed", path);
    return 0;
}

int ld_write_outputs(const char *dir, const ld_config *c, const ld_result *r, const ld_pcts *pc, char *err, size_t errlen) {
    if (ld_mkdirs(dir, err, errlen)) return -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/requests.csv", dir);
    if (write_requests(p, c, r, err, errlen)) return -1;
    snprintf(p, sizeof p, "%s/intervals.csv", dir);
    if (iv_csv_write(p, r->iv, r->n_iv, err, errlen)) return -1;
    snprintf(p, sizeof p, "%s/outputs.jsonl", dir);
    if (write_outputs_jsonl(p, c, r, err, errlen)) return -1;
    cJSON *j = ld_summary_json(c, r, pc);
    if (!j) return errf(err, errlen, "out of memory");
    snprintf(p, sizeof p, "%s/summary.json", dir);
    int rc = ld_write_json(p, j, err, errlen);
    cJSON_Delete(j);
    return rc;
}
