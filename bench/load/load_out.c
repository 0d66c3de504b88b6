/* load_out.c — see load_out.h. Turns an ld_result into files; no HTTP. */
#include "load_out.h"
#include "csv_row.h"
#include "errmsg.h"
#include "interval_csv.h"
#include "json_utf8.h"
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
    char *s = json_print_utf8(j, 1);   /* valid UTF-8 whatever the server sent (json_utf8.h) */
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

/* vLLM's percentile key word: str(int(p)) when p is whole, else Python's
 * str(p) (the shortest text that reads back as p): 99 → "99", 99.9 → "99.9". */
void ld_pct_word(double p, char *out, size_t outlen) {
    if (p == floor(p) && fabs(p) < 1e15) { snprintf(out, outlen, "%.0f", p); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, outlen, "%.*g", prec, p);
        if (strtod(out, NULL) == p) return;
    }
}

static void add_dist(cJSON *j, const char *name, dvec *v, const ld_pcts *pc) {
    char k[64];
    st_sort(v->v, v->n);
    snprintf(k, sizeof k, "mean_%s_ms", name);   add_num(j, k, st_mean(v->v, v->n) * 1e3);
    snprintf(k, sizeof k, "median_%s_ms", name); add_num(j, k, st_percentile_sorted(v->v, v->n, 50) * 1e3);
    snprintf(k, sizeof k, "std_%s_ms", name);    add_num(j, k, st_std(v->v, v->n) * 1e3);
    for (int i = 0; i < pc->n; i++) {
        char ps[32];
        ld_pct_word(pc->p[i], ps, sizeof ps);
        snprintf(k, sizeof k, "p%s_%s_ms", ps, name);
        add_num(j, k, st_percentile_sorted(v->v, v->n, pc->p[i]) * 1e3);
    }
}

typedef struct { double t; int d; } conc_ev;

static int cmp_ev(const void *a, const void *b) {
    const conc_ev *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->d - y->d;   /* a departure (−1) before an arrival (+1) at the same instant */
}

/* vLLM's peak figures over the successful requests:
 *   max_output_tokens_per_s  the fullest 1-second bucket (seconds since the
 *     first successful send) of content-chunk arrival times, one per chunk
 *     (first chunk at send + TTFT, then each ITL gap), as vLLM counts them
 *   max_concurrent_requests  the most requests in flight at once, a sweep
 *     over the half-open spans [send, send + E2E). */
static void peaks(const ld_result *r, double *max_tps, double *max_conc) {
    *max_tps = 0;
    *max_conc = 0;
    double t0 = INFINITY, t1 = -INFINITY;
    int n_ok = 0;
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        if (!q->ok) continue;
        n_ok++;
        if (q->t_send < t0) t0 = q->t_send;
        if (q->t_send + q->e2el > t1) t1 = q->t_send + q->e2el;
    }
    if (!n_ok) return;
    size_t nb = (size_t)ceil(t1 - t0) + 1;
    double *bucket = calloc(nb, sizeof *bucket);
    conc_ev *ev = malloc(sizeof *ev * 2 * (size_t)n_ok);
    if (!bucket || !ev) { free(bucket); free(ev); *max_tps = *max_conc = NAN; return; }
    int ne = 0;
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        if (!q->ok) continue;
        ev[ne++] = (conc_ev){q->t_send, 1};
        ev[ne++] = (conc_ev){q->t_send + q->e2el, -1};
        if (isnan(q->ttft)) continue;
        double tt = q->t_send + q->ttft;
        for (int k = -1; k < q->n_itl; k++) {
            if (k >= 0) tt += q->itl[k];
            double b = floor(tt - t0);
            if (b >= 0 && b < (double)nb) bucket[(size_t)b] += 1;
        }
    }
    for (size_t b = 0; b < nb; b++) if (bucket[b] > *max_tps) *max_tps = bucket[b];
    qsort(ev, (size_t)ne, sizeof *ev, cmp_ev);
    int cur = 0;
    for (int i = 0; i < ne; i++) {
        cur += ev[i].d;
        if (cur > *max_conc) *max_conc = cur;
    }
    free(bucket);
    free(ev);
}

/* What specbed_acceptance_length means for this source
 * (specbed_acceptance_length_definition). */
static const char *al_definition(const ld_result *r) {
    if (!r->has_totals) return "mean of the decode-log intervals' accept len (SGLang)";
    if (!isnan(r->totals.steps))
        return "committed tokens / sequence verify steps, bonus included, steps that drafted nothing counted (specbed "
               "counters); per-position rates over the same steps";
    return "1 + accepted / drafts (the source counts no verify steps: vLLM's definition)";
}

/* Python's json writes a float with a '.' or an exponent ("1.0"), an int
 * without: the fields vLLM holds as floats keep that form when whole. */
static int vllm_float_key(const char *k) {
    static const char *const F[] = {"duration", "request_throughput", "request_goodput", "output_throughput",
                                    "total_token_throughput", "max_output_tokens_per_s", "rtfx", "burstiness",
                                    "request_rate", "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
                                    "spec_decode_per_position_acceptance_rates", "latencies", "queue_times", NULL};
    for (int i = 0; F[i]; i++) if (!strcmp(k, F[i])) return 1;
    size_t n = strlen(k);
    return n > 3 && !strcmp(k + n - 3, "_ms") &&
           (!strncmp(k, "mean_", 5) || !strncmp(k, "median_", 7) || !strncmp(k, "std_", 4) || k[0] == 'p');
}

void ld_summary_float_form(cJSON *j) {
    for (cJSON *c = j ? j->child : NULL; c; c = c->next) {
        if (!c->string || !vllm_float_key(c->string)) continue;
        if (cJSON_IsArray(c)) {
            for (cJSON *e = c->child, *nx; e; e = nx) {
                nx = e->next;
                if (cJSON_IsNumber(e) && isfinite(e->valuedouble) && e->valuedouble == floor(e->valuedouble)) {
                    char b[64];
                    snprintf(b, sizeof b, fabs(e->valuedouble) < 1e16 ? "%.1f" : "%.17g", e->valuedouble);
                    cJSON *raw = cJSON_CreateRaw(b);
                    if (raw && !cJSON_ReplaceItemViaPointer(c, e, raw)) cJSON_Delete(raw);
                }
            }
        } else if (cJSON_IsNumber(c) && isfinite(c->valuedouble) && c->valuedouble == floor(c->valuedouble)) {
            char b[64];
            snprintf(b, sizeof b, fabs(c->valuedouble) < 1e16 ? "%.1f" : "%.17g", c->valuedouble);
            cJSON *raw = cJSON_CreateRaw(b);
            if (!raw) continue;
            if (cJSON_ReplaceItemInObjectCaseSensitive(j, c->string, raw)) c = raw;   /* c is freed */
            else cJSON_Delete(raw);
        }
    }
}

cJSON *ld_summary_json(const ld_config *c, const ld_result *r, const ld_pcts *pc) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    /* vLLM bench serve's setup fields */
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y%m%d-%H%M%S", localtime(&now));
    const char *backend = c->endpoint == EP_CHAT ? "openai-chat" : "openai";
    cJSON_AddStringToObject(j, "date", date);
    cJSON_AddStringToObject(j, "endpoint_type", backend);
    cJSON_AddStringToObject(j, "backend", backend);
    cJSON_AddNullToObject(j, "label");           /* vLLM: args.label, None unless --label */
    cJSON_AddStringToObject(j, "model_id", r->model);
    /* vLLM: the tokenizer it counted with, None under --skip-tokenizer-init;
     * specbed counts no tokens client-side (usage.completion_tokens) */
    cJSON_AddNullToObject(j, "tokenizer_id");
    cJSON_AddNumberToObject(j, "num_prompts", c->num_prompts > 0 ? c->num_prompts : r->n_req);
    if (c->use_profile) {
        char b[1024];
        ld_profile_format(&c->profile, b, sizeof b);
        cJSON_AddStringToObject(j, "specbed_profile", b);
    } else if (c->rate > 0) {
        if (isinf(c->rate)) cJSON_AddStringToObject(j, "request_rate", "inf");
        else cJSON_AddNumberToObject(j, "request_rate", c->rate);
        cJSON_AddNumberToObject(j, "burstiness", c->burstiness);
        if (c->max_concurrency > 0) cJSON_AddNumberToObject(j, "max_concurrency", c->max_concurrency);
        else cJSON_AddNullToObject(j, "max_concurrency");
    } else {
        /* a closed loop of N is vLLM's --request-rate inf --max-concurrency N */
        cJSON_AddStringToObject(j, "request_rate", "inf");
        cJSON_AddNumberToObject(j, "burstiness", 1.0);
        cJSON_AddNumberToObject(j, "max_concurrency", c->concurrency);
    }

    int completed = 0, failed = 0, good = 0, truncated = 0, with_reasoning = 0, mt_min = 0, mt_max = 0;
    long tin = 0, tout = 0;
    dvec ttft = {0}, tpot = {0}, itl = {0}, e2el = {0};
    int has_slo = c->slo.ttft_ms > 0 || c->slo.tpot_ms > 0 || c->slo.e2el_ms > 0;
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        if (q->max_tokens > 0 && (!mt_min || q->max_tokens < mt_min)) mt_min = q->max_tokens;
        if (q->max_tokens > mt_max) mt_max = q->max_tokens;
        if (!q->ok) {
            failed++;
            truncated += q->error && !strncmp(q->error, "truncated stream", 16);
            continue;
        }
        completed++;
        with_reasoning += q->reasoning && q->reasoning[0];
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
    else cJSON_AddNullToObject(j, "request_goodput");
    add_num(j, "output_throughput", dur > 0 ? tout / dur : NAN);
    add_num(j, "total_token_throughput", dur > 0 ? (tin + tout) / dur : NAN);
    double max_tps, max_conc;
    peaks(r, &max_tps, &max_conc);
    /* per request, every one sent (vLLM writes these even without
     * --save-detailed): latency = E2E (0 for a failed request, vLLM's
     * default), queue time = send − arrival (vLLM's client_queue_time) */
    cJSON *lat = cJSON_AddArrayToObject(j, "latencies"), *qt = cJSON_AddArrayToObject(j, "queue_times");
    for (int i = 0; i < r->n_req; i++) {
        const ld_request *q = &r->req[i];
        cJSON_AddItemToArray(lat, cJSON_CreateNumber(q->ok && !isnan(q->e2el) ? q->e2el : 0.0));
        double w = q->t_send - q->t_arrival;
        cJSON_AddItemToArray(qt, cJSON_CreateNumber(isnan(w) || w < 0 ? 0.0 : w));
    }
    add_num(j, "max_output_tokens_per_s", max_tps);
    add_num(j, "max_concurrent_requests", max_conc);
    cJSON_AddNumberToObject(j, "rtfx", 0.0);     /* vLLM: input audio seconds ÷ duration; no audio here */
    add_dist(j, "ttft", &ttft, pc);
    add_dist(j, "tpot", &tpot, pc);
    add_dist(j, "itl", &itl, pc);
    add_dist(j, "e2el", &e2el, pc);
    dvec_free(&ttft); dvec_free(&tpot); dvec_free(&itl); dvec_free(&e2el);

    /* Speculative decoding over the whole run, as vLLM writes it (present
     * only when the server drafted): acceptance rate in PERCENT. */
    double min_al = NAN, sum_al = 0;
    int n_al = 0;
    for (int i = 0; i < r->n_iv; i++) {
        double a = r->iv[i].accept_len;
        if (isnan(a)) continue;
        if (!(a >= min_al)) min_al = a;
        sum_al += a;
        n_al++;
    }
    /* vLLM's spec_decode_* fields hold vLLM's numbers by vLLM's formulas
     * (vllm/benchmarks/serve.py, benchmark(): written when the draft token
     * counter moved): acceptance rate = accepted ÷ draft tokens in percent,
     * acceptance length = 1 + accepted ÷ drafts, per-position rate =
     * accepted at i ÷ drafts. specbed's own accept length (committed tokens
     * ÷ verify steps, so steps in which nothing was drafted count) is
     * specbed_acceptance_length. A source without counters (SGLang logs)
     * gets no vLLM field: vLLM's bench would write none. */
    const mtotals *t = &r->totals;
    int spec_totals = r->has_totals && t->draft_tokens > 0;
    if (spec_totals) {
        add_num(j, "spec_decode_acceptance_rate", t->accept_rate * 100.0);
        add_num(j, "spec_decode_acceptance_length", t->vllm_accept_len);
        add_num(j, "spec_decode_num_drafts", t->num_drafts);
        add_num(j, "spec_decode_draft_tokens", t->draft_tokens);
        add_num(j, "spec_decode_accepted_tokens", t->accepted);
        cJSON *pp = cJSON_AddArrayToObject(j, "spec_decode_per_position_acceptance_rates");
        for (int i = 0; i < t->vllm_n_pos; i++)
            cJSON_AddItemToArray(pp, isnan(t->vllm_pos_rate[i]) ? cJSON_CreateNull() : cJSON_CreateNumber(t->vllm_pos_rate[i]));
    }

    /* specbed's own fields: everything vLLM bench serve does not write */
    cJSON_AddStringToObject(j, "specbed_base_url", c->url ? c->url : "");
    cJSON_AddStringToObject(j, "specbed_workload", c->wl ? c->wl->name : "");
    cJSON_AddStringToObject(j, "specbed_metrics_source", msrc_name(r->msrc));
    cJSON_AddNumberToObject(j, "specbed_temperature", c->temperature);
    cJSON_AddNumberToObject(j, "specbed_top_p", c->top_p);
    cJSON_AddNumberToObject(j, "specbed_seed", (double)c->seed);
    cJSON_AddNumberToObject(j, "specbed_interval_s", c->interval_s);
    if (c->spec_depth >= 0) cJSON_AddNumberToObject(j, "specbed_spec_depth", c->spec_depth);
    if (c->spec_depth > 0)   /* 1: the draft counters did not move; 2: nothing could show it drafted */
        cJSON_AddNumberToObject(j, "specbed_spec_depth_unused", r->spec_depth_unused);
    if (c->spec_depth == 0) {
        cJSON_AddBoolToObject(j, "specbed_spec_depth_ignored", r->spec_depth_ignored);
        if (r->spec_depth_ignored) {
            add_num(j, "specbed_spec_depth_ignored_drafts", r->ignored_drafts);
            add_num(j, "specbed_spec_depth_ignored_draft_tokens", r->ignored_draft_tokens);
        }
    }
    cJSON_AddStringToObject(j, "specbed_max_tokens_source",
                            c->max_tokens > 0 ? "--max-tokens" : "workload rows (128 where a row has none)");
    if (mt_max) {
        cJSON_AddNumberToObject(j, "specbed_max_tokens_min", mt_min);
        cJSON_AddNumberToObject(j, "specbed_max_tokens_max", mt_max);
    }
    cJSON_AddNumberToObject(j, "specbed_truncated_streams", truncated);
    cJSON_AddNumberToObject(j, "specbed_completed_with_reasoning", with_reasoning);
    if (spec_totals && !isnan(t->steps)) add_num(j, "specbed_num_verify_steps", t->steps);
    if (spec_totals) {
        add_num(j, "specbed_acceptance_length", t->accept_len);
        cJSON *sp = cJSON_AddArrayToObject(j, "specbed_per_position_acceptance_rates");
        for (int i = 0; i < t->n_pos; i++)
            cJSON_AddItemToArray(sp, isnan(t->pos_rate[i]) ? cJSON_CreateNull() : cJSON_CreateNumber(t->pos_rate[i]));
    } else if (!r->has_totals && n_al)
        add_num(j, "specbed_acceptance_length", sum_al / n_al);   /* SGLang logs give no counts: the interval mean */
    if (spec_totals || (!r->has_totals && n_al))
        cJSON_AddStringToObject(j, "specbed_acceptance_length_definition", al_definition(r));
    iv_basis basis = IV_BASIS_CLIENT;
    for (int i = 0; i < r->n_iv; i++) if (r->iv[i].basis != IV_BASIS_CLIENT) basis = r->iv[i].basis;
    cJSON_AddStringToObject(j, "specbed_interval_basis", iv_basis_name(basis));
    cJSON_AddNumberToObject(j, "specbed_num_intervals", r->n_iv);
    add_num(j, "specbed_min_interval_accept_length", min_al);
    add_num(j, "specbed_mean_interval_accept_length", n_al ? sum_al / n_al : NAN);
    cJSON_AddNumberToObject(j, "specbed_metrics_scrapes", r->n_scrapes);
    cJSON_AddNumberToObject(j, "specbed_metrics_scrapes_failed", r->n_scrapes_failed);
    if (r->n_scrapes_failed) cJSON_AddStringToObject(j, "specbed_metrics_scrape_error", r->scrape_error);
    if (r->note[0]) cJSON_AddStringToObject(j, "specbed_note", r->note);
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
                       "itl_max_ms", "input_tokens", "output_tokens", "ok", "http_status", "finish_reason", "error",
                       "max_tokens", "reasoning_chars"};
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
        csv_row_fieldf(&row, "%d", q->max_tokens);
        csv_row_fieldf(&row, "%zu", q->reasoning ? strlen(q->reasoning) : (size_t)0);
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
        if (q->reasoning && q->reasoning[0]) cJSON_AddStringToObject(o, "reasoning", q->reasoning);
        if (q->error) cJSON_AddStringToObject(o, "error", q->error);
        char *s = json_print_utf8(o, 0);
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
    ld_summary_float_form(j);
    snprintf(p, sizeof p, "%s/summary.json", dir);
    int rc = ld_write_json(p, j, err, errlen);
    cJSON_Delete(j);
    return rc;
}
