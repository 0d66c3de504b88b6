/* canary_probes.c — the canary's requests outside the bursty load: the
 * runner for a probe set (the reference pass before the load, the
 * passphrase probe after it) and the two probes after the load, each
 * recorded as items for the verdict and findings for the evidence:
 *   flat distribution  echo + logprobs scoring of two prompts (prefill only)
 *   passphrase copy    workloads/copy.jsonl rows planted 96–192 tokens back
 * Talks to the server over HTTP only. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "canary_internal.h"
#include "errmsg.h"
#include "httpc.h"

workload cn_subset(const workload *w, const int *rows, int n, const char *name) {
    workload s = {.name = (char *)name, .path = NULL, .items = malloc(sizeof(wl_item) * (size_t)(n ? n : 1)), .n = 0};
    if (s.items)
        for (int i = 0; i < n; i++) s.items[s.n++] = w->items[rows[i]];
    return s;
}

int cn_probe_requests(const cn_run *R, const workload *w, int spec_depth, int max_tokens, int concurrency,
                      ld_result **res, char *err, size_t errlen) {
    ld_config c = R->o->lo.c;
    c.url = R->base;
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
    /* A probe is not judged by its intervals; but a speculation-off pass
     * reads the counters before and after, so that ld_run() can tell a
     * server that ignored "spec_depth": 0 (ld_result.spec_depth_ignored). */
    c.msrc = spec_depth == 0 ? MSRC_AUTO : MSRC_NONE;
    c.sglang_log = NULL;
    c.interval_s = 3600;
    c.progress = 0;
    c.on_done = NULL;
    c.on_interval = NULL;
    c.t_origin = 0;
    return ld_run(&c, res, err, errlen);
}

/* Top-1 logprob per prompt position from one echo scoring request; *n = 0
 * when the server returned none. *top1 is malloc'd. */
static int flat_once(const cn_run *R, const char *model, const char *prompt, int max_tokens, double **top1, int *n,
                     char *err, size_t errlen) {
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
    int r = http_post_json(R->base, "/v1/completions", R->o->lo.c.api_key, body, 60000, &reply, &st, err, errlen);
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

static int flat_scores(const cn_run *R, const char *model, const char *prompt, double **top1, int *n, char *err,
                       size_t errlen) {
    *top1 = NULL;
    *n = 0;
    /* max_tokens 0 scores the prompt alone (specbed, OpenAI); servers that
     * want at least one token get a second try with 1. */
    for (int mt = 0; mt <= 1 && *n == 0; mt++)
        if (flat_once(R, model, prompt, mt, top1, n, err, errlen)) return -1;
    return 0;
}

static void flat_probe(cn_run *R) {
    const cc_thresholds *thr = &R->o->thr;
    char err[512];
    for (int k = 0; k < R->sw.n && k < 2; k++) {
        double *top1;
        int m;
        if (flat_scores(R, R->lr->model, R->sw.items[k].prompt, &top1, &m, err, sizeof err) || m < 2) {
            free(top1);
            cn_finding(&R->F, CN_NOTE, "note: flat-distribution probe skipped (the server returned no prompt logprobs for echo "
                       "scoring)");
            return;
        }
        int at;
        double drop = cc_flat(top1, m, &at);
        cn_item(&R->items, CV_FLAT, drop, NAN, k);
        cv_item it = {CV_FLAT, drop, NAN, k};
        if (cv_item_over(&it, thr))
            cn_finding(&R->F, CV_FLAT, "prompt %s: flat next-token distribution at position %d: top logprob %.2f sits %.2f nats "
                       "below its neighbours' median (> %.2f)", R->sw.items[k].id, at, top1[at], drop, thr->flat);
        free(top1);
    }
}

static void copy_record(FILE *cf, const wl_item *it, const char *text, int ok) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", it->id);
    cJSON_AddNumberToObject(e, "n_back", it->n_back);
    cJSON_AddStringToObject(e, "expected", it->expected);
    cJSON_AddStringToObject(e, "text", text);
    cJSON_AddBoolToObject(e, "copied", ok);
    char *js = cJSON_PrintUnformatted(e);
    if (js) { fprintf(cf, "%s\n", js); free(js); }
    cJSON_Delete(e);
}

static void copy_probe(cn_run *R) {
    const canary_opts *o = R->o;
    workload *cw = NULL;
    char err[512];
    if (workload_load(&cw, o->copy_workload, err, sizeof err)) {
        cn_finding(&R->F, CN_NOTE, "note: passphrase check skipped (%s)", err);
        return;
    }
    int crow[64], cn = 0;
    for (int i = 0; i < cw->n && cn < o->n_probe && cn < 64; i++)
        if (cw->items[i].expected && cw->items[i].n_back >= 96 && cw->items[i].n_back <= 192) crow[cn++] = i;
    workload cs = cn_subset(cw, crow, cn, cw->name);
    ld_result *pr = NULL;
    if (cs.n && !cn_probe_requests(R, &cs, -1, 0, cs.n, &pr, err, sizeof err)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/copy.jsonl", R->outdir);
        FILE *cf = fopen(p, "w");
        for (int k = 0; k < pr->n_req; k++) {
            const ld_request *q = &pr->req[k];
            const wl_item *it = &cs.items[q->item];
            if (!q->ok) continue;
            int ok = cc_copy_ok(q->text, it->expected);
            if (cf) copy_record(cf, it, q->text, ok);
            cn_item(&R->items, CV_COPY, ok ? 0 : 1, NAN, q->item);
            if (ok) continue;
            char ex[400];
            cn_excerpt(q->text, 0, ex, sizeof ex);
            cn_finding(&R->F, CV_COPY, "passphrase %s (%d tokens back): expected \"%s\", got \"%s\"", it->id, it->n_back,
                       it->expected, ex);
        }
        if (cf) fclose(cf);
    } else if (cs.n)
        cn_finding(&R->F, CN_NOTE, "note: passphrase check skipped (%s)", err);
    ld_result_free(pr);
    free(cs.items);
    workload_free(cw);
}

void cn_probes(cn_run *R) {
    flat_probe(R);
    if (R->o->copy_workload && *R->o->copy_workload) copy_probe(R);
}
