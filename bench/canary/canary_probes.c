/* canary_probes.c — the canary's requests outside the bursty load: the
 * runner for a probe set (the reference pass before the load, the
 * passphrase probe after it) and the two probes after the load, each
 * recorded as items for the verdict and findings for the evidence:
 *   flat distribution  echo + logprobs scoring of two prompts (prefill only):
 *                      a flat drop per prompt, and one context-free count
 *                      over both (top-k distributions repeated exactly)
 *   passphrase copy    workloads/copy.jsonl rows planted 96–192 tokens back,
 *                      spread evenly over that range (both sides of 128)
 * Talks to the server over HTTP only. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "canary_internal.h"
#include "errmsg.h"
#include "httpc.h"
#include "json_utf8.h"

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
    c.top_p = 1;
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
/* A hash of one position's top-k (tokens and logprobs to 1e-4 nats, in
 * logprob order); 0 with fewer than 3 entries (too little to call two
 * positions' distributions the same). */
static unsigned long long topk_sig(const cJSON *e) {
    enum { K = 8 };
    const cJSON *kv[K];
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, e) if (cJSON_IsNumber(x) && x->string && n < K) kv[n++] = x;
    if (n < 3) return 0;
    for (int i = 1; i < n; i++)   /* insertion sort, by logprob then token */
        for (int j = i; j > 0 && (kv[j]->valuedouble > kv[j - 1]->valuedouble ||
                                  (kv[j]->valuedouble == kv[j - 1]->valuedouble && strcmp(kv[j]->string, kv[j - 1]->string) < 0)); j--) {
            const cJSON *t = kv[j]; kv[j] = kv[j - 1]; kv[j - 1] = t;
        }
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)kv[i]->string; *p; p++) h = (h ^ *p) * 1099511628211ull;
        long long q = llround(kv[i]->valuedouble * 1e4);
        for (int b = 0; b < 8; b++) h = (h ^ (unsigned char)(q >> (8 * b))) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
    }
    return h ? h : 1;
}

static int flat_once(const cn_run *R, const char *model, const char *prompt, int max_tokens, double **top1,
                     unsigned long long **sig, int *n, char *err, size_t errlen) {
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
        *sig = malloc(sizeof(unsigned long long) * (size_t)m);
        if (*top1 && *sig) {
            int i = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, tops) {
                double best = NAN;
                const cJSON *kv;
                if (cJSON_IsObject(e))
                    cJSON_ArrayForEach(kv, e) if (cJSON_IsNumber(kv) && !(kv->valuedouble <= best)) best = kv->valuedouble;
                (*sig)[i] = cJSON_IsObject(e) ? topk_sig(e) : 0;
                (*top1)[i++] = best;
            }
            *n = m;
        }
    }
    cJSON_Delete(rj);
    return 0;
}

static int flat_scores(const cn_run *R, const char *model, const char *prompt, double **top1, unsigned long long **sig,
                       int *n, char *err, size_t errlen) {
    *top1 = NULL;
    *sig = NULL;
    *n = 0;
    /* max_tokens 0 scores the prompt alone (specbed, OpenAI); servers that
     * want at least one token get a second try with 1. */
    for (int mt = 0; mt <= 1 && *n == 0; mt++) {
        free(*top1);
        free(*sig);
        *top1 = NULL;
        *sig = NULL;
        if (flat_once(R, model, prompt, mt, top1, sig, n, err, errlen)) return -1;
    }
    return 0;
}

/* The flat-distribution probe: two prompts scored (echo + logprobs); per
 * prompt a flat-drop item, and one context-free item over both (a
 * distribution that repeats across the two prompts is context-free too). */
static void flat_probe(cn_run *R) {
    const cc_thresholds *thr = &R->o->thr;
    char err[512];
    unsigned long long *all = NULL;
    int n_all = 0, probes = 0;
    for (int k = 0; k < R->sw.n && k < 2; k++) {
        double *top1;
        unsigned long long *sig;
        int m;
        if (flat_scores(R, R->lr->model, R->sw.items[k].prompt, &top1, &sig, &m, err, sizeof err) || m < 2) {
            free(top1);
            free(sig);
            free(all);
            cn_finding(&R->F, CN_NOTE, "note: flat-distribution probe skipped (the server returned no prompt logprobs for echo "
                       "scoring)");
            return;
        }
        int at;
        double drop = cc_flat(top1, m, &at);
        double t = http_now() - R->t_origin;   /* when the answer came: run seconds, as the load's items */
        cn_item(&R->items, CV_FLAT, drop, t, k);
        cv_item it = {CV_FLAT, drop, t, k};
        if (cv_item_over(&it, thr))
            cn_finding(&R->F, CV_FLAT, "prompt %s: flat next-token distribution at position %d: top logprob %.2f sits %.2f nats "
                       "below its neighbours' median (> %.2f)", R->sw.items[k].id, at, top1[at], drop, thr->flat);
        unsigned long long *na = realloc(all, sizeof *na * (size_t)(n_all + m));
        if (na) {
            all = na;
            memcpy(all + n_all, sig, sizeof *sig * (size_t)m);
            n_all += m;
            probes++;
        }
        free(top1);
        free(sig);
    }
    if (probes) {
        int at;
        int rep = cc_ctxfree(all, n_all, &at);
        double t = http_now() - R->t_origin;
        cn_item(&R->items, CV_CTXFREE, rep, t, 0);
        cv_item it = {CV_CTXFREE, rep, t, 0};
        if (cv_item_over(&it, thr))
            cn_finding(&R->F, CV_CTXFREE, "context-free next-token distribution: %d of %d scored prompt position(s) repeat a "
                       "top-k distribution (tokens and logprobs to 1e-4) seen at another context, first at position %d of "
                       "the probe (> %.0f allowed)", rep, n_all, at, thr->ctxfree);
    }
    free(all);
}

static void copy_record(FILE *cf, const wl_item *it, const char *text, int ok) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", it->id);
    cJSON_AddNumberToObject(e, "n_back", it->n_back);
    cJSON_AddStringToObject(e, "expected", it->expected);
    cJSON_AddStringToObject(e, "text", text);
    cJSON_AddBoolToObject(e, "copied", ok);
    char *js = json_print_utf8(e, 0);
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
    /* Spread over 96–192 back by distance (cc_copy_pick), so a fault that
     * hides keys past 128 (spec/fault.h window) meets as many probes beyond
     * the boundary as before it; the first n_probe rows of the file were all
     * within 120 back. */
    int crow[64], cn = 0, *nb = malloc((size_t)(cw->n > 0 ? cw->n : 1) * sizeof *nb);
    if (nb) {
        for (int i = 0; i < cw->n; i++) nb[i] = cw->items[i].expected ? cw->items[i].n_back : -1;
        cn = cc_copy_pick(nb, cw->n, 96, 192, o->n_probe < 64 ? o->n_probe : 64, crow);
        free(nb);
    }
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
            cn_item(&R->items, CV_COPY, ok ? 0 : 1, http_now() - R->t_origin, q->item);
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
