/* load.c — see load.h. Owns the curl multi loop: sending requests on the
 * configured shape, parsing their SSE streams, and sampling the metric
 * source once per interval. Writes nothing to disk (load_out.c does). */
#include "load.h"
#include "errmsg.h"
#include "httpc.h"
#include "metrics_sglang.h"
#include "sse.h"
#include "stats.h"
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEXT_CAP (256 * 1024)   /* per request; longer output is truncated in the record */

void ld_config_defaults(ld_config *c) {
    memset(c, 0, sizeof *c);
    c->endpoint = EP_COMPLETIONS;
    c->concurrency = 1;
    c->burstiness = 1.0;
    c->interval_s = 5.0;
    c->top_p = 1.0;
    c->msrc = MSRC_AUTO;
    c->spec_depth = -1;
    c->shuffle = 1;
    c->request_timeout_s = 600;
}

typedef struct run_ctx run_ctx;

typedef struct {
    int kind;                    /* 0 request, 1 metrics scrape */
    run_ctx *x;
    CURL *h;
    struct curl_slist *hdr;
    char *body;                  /* request JSON */
    int rec;                     /* index into res->req */
    double t_send_abs, last_chunk_abs;
    sse_parser sse;
    char *text; size_t text_len, text_cap;
    char *reason; size_t reason_len, reason_cap;
    char raw[512]; size_t raw_len;     /* first bytes of the reply, for error messages */
    int usage_out, usage_in;     /* -1 unknown */
    int lp_tokens, done;
    int chunks;                  /* events with a non-empty "choices": vLLM's token chunks (TTFT, ITL, latency) */
    int content_chunks;          /* of those, the ones carrying text (the last-resort token count) */
    double last_choice_abs;      /* when the last "choices" event arrived */
    int cum_usage;               /* completion_tokens of the last per-chunk usage seen (continuous usage); -1 none */
    long events;                 /* SSE events received */
    size_t bytes;                /* response bytes received */
    long max_events;             /* caps on one response (finish_request names them) */
    size_t max_bytes;
    char *over_cap;              /* why the stream was abandoned for its size; NULL while within the caps */
    /* Client tokens per interval: this request's chunks' weights by the
     * interval (index into res->iv) they arrived in, settled at the end
     * against its usage count (spread_tokens). */
    int iv_first;                /* interval index of iv_w[0] */
    double *iv_w;                /* [n_ivw] tokens known per chunk (logprobs, per-chunk usage), else 1 per text chunk */
    int *iv_c;                   /* [n_ivw] "choices" chunks */
    int n_ivw;
    char *stream_err;
    char *finish;
    dvec itl;
    char cerr[CURL_ERROR_SIZE];
    char *sbuf; size_t slen, scap;     /* scrape body */
    int too_big;                 /* scrape body over HTTPC_MAX_BODY: aborted */
} xfer;

struct run_ctx {
    const ld_config *c;
    ld_result *res;
    int req_cap, iv_cap;
    CURLM *m;
    double origin;               /* absolute time of t = 0 */
    double start;                /* run start, seconds since origin */
    char base[1024];
    int inflight, issued, completed;
    int *order;
    int next_order;
    ld_rng rng;
    int cur_phase;
    double next_arrival;
    int pending;
    /* interval sampling */
    msnap first, prev;
    double prev_t;
    int have_first;
    xfer *scrape;
    double next_scrape;
    int iv_max_inflight;
    long iv_tokens;
    double iv_t0;
    sgl_tail *tail;
    int stop;
    double last_progress;
    long tokens_total;
    xfer **active;               /* request transfers in flight */
    int n_active, cap_active;
    dvec iv_tok;                 /* settled client tokens per interval index (see spread_tokens) */
    dvec arrq;                   /* open loop: arrival times of the pending requests, from arrq_head */
    size_t arrq_head;
    double phase_t0;             /* closed loop: when the current phase began (its requests' arrival) */
    dvec iv_dt;                  /* each pushed interval's client-side length, seconds */
};

static double now_t(run_ctx *x) { return http_now() - x->origin; }

static char *dup_s(const char *s) {
    size_t n = strlen(s);
    char *r = malloc(n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

static void push_iv(run_ctx *x, iv_row *r) {
    ld_result *res = x->res;
    double t = r->t_end;
    double dt = t - x->iv_t0;
    r->inflight = x->iv_max_inflight;
    /* provisional (tokens as each chunk showed them); ld_run settles every
     * row against the requests' usage counts at the end */
    r->client_tps = dt > 0 ? (double)x->iv_tokens / dt : NAN;
    x->iv_max_inflight = x->inflight;
    x->iv_tokens = 0;
    x->iv_t0 = t;
    if (res->n_iv == x->iv_cap) {
        int nc = x->iv_cap ? x->iv_cap * 2 : 64;
        iv_row *ni = realloc(res->iv, (size_t)nc * sizeof *ni);
        if (!ni) return;
        res->iv = ni;
        x->iv_cap = nc;
    }
    res->iv[res->n_iv++] = *r;
    dvec_push(&x->iv_dt, dt);
    if (x->c->on_interval && !x->stop && x->c->on_interval(x->c->on_interval_ctx, r)) {
        x->stop = 1;
        res->stopped_early = 1;
    }
}

static void on_sgl_row(void *ctx, const iv_row *r) {
    iv_row row = *r;
    push_iv(ctx, &row);
}

/* ---- request streams ---- */

/* Appends to a request's text or reasoning record (TEXT_CAP each). */
static void buf_append(char **b, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > TEXT_CAP) n = TEXT_CAP > *len + 1 ? TEXT_CAP - *len - 1 : 0;
    if (!n) return;
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 1024;
        while (nc < *len + n + 1) nc *= 2;
        char *nb = realloc(*b, nc);
        if (!nb) return;
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
}

/* A (non-empty) string member of o, or NULL. */
static const char *str_of(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static void note_add(ld_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_add(ld_result *res, const char *fmt, ...) {
    size_t n = strlen(res->note);
    if (n && n + 2 < sizeof res->note) { memcpy(res->note + n, "; ", 3); n += 2; }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->note + n, sizeof res->note - n, fmt, ap);
    va_end(ap);
}

/* Adds w tokens (c "choices" chunks) to this request's tally for the
 * interval being recorded now. */
static void tally_chunk(xfer *t, double w, int c) {
    int k = t->x->res->n_iv;
    if (!t->n_ivw) t->iv_first = k;
    int need = k - t->iv_first + 1;
    if (need > t->n_ivw) {
        double *nw = realloc(t->iv_w, sizeof *nw * (size_t)need);
        if (nw) t->iv_w = nw;
        int *nc = realloc(t->iv_c, sizeof *nc * (size_t)need);
        if (nc) t->iv_c = nc;
        if (!nw || !nc) return;
        for (int i = t->n_ivw; i < need; i++) { t->iv_w[i] = 0; t->iv_c[i] = 0; }
        t->n_ivw = need;
    }
    t->iv_w[need - 1] += w;
    t->iv_c[need - 1] += c;
}

/* At the end of a request: its n_out tokens into the run's per-interval
 * totals, in proportion to what each interval's chunks showed (tokens
 * where a chunk said how many, else one per text chunk; by "choices" chunk
 * when none showed any). A server's usage.completion_tokens is the count;
 * chunks are only how it is spread (a speculative step streams several
 * tokens in one chunk). */
static void spread_tokens(run_ctx *x, const xfer *t, int n_out) {
    double W = 0, C = 0;
    for (int i = 0; i < t->n_ivw; i++) { W += t->iv_w[i]; C += t->iv_c[i]; }
    if (n_out <= 0 || (W <= 0 && C <= 0)) return;
    for (int i = 0; i < t->n_ivw; i++) {
        double share = W > 0 ? t->iv_w[i] / W : t->iv_c[i] / C;
        size_t k = (size_t)(t->iv_first + i);
        while (x->iv_tok.n <= k) dvec_push(&x->iv_tok, 0);
        if (x->iv_tok.n > k) x->iv_tok.v[k] += n_out * share;
    }
}

static void over_cap(xfer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void over_cap(xfer *t, const char *fmt, ...) {
    if (t->over_cap) return;
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    t->over_cap = dup_s(b);
}

static void on_event(void *ctx, const char *data, size_t len) {
    xfer *t = ctx;
    run_ctx *x = t->x;
    if (t->over_cap) return;
    if (++t->events > t->max_events) {
        over_cap(t, "the server sent more than %ld SSE events for max_tokens %d (at most max_tokens + %d are "
                 "expected): request abandoned", t->max_events, x->res->req[t->rec].max_tokens, LD_EXTRA_EVENTS);
        return;
    }
    if (len == 6 && !memcmp(data, "[DONE]", 6)) { t->done = 1; return; }
    cJSON *j = cJSON_ParseWithLength(data, len);
    if (!j) {
        if (!t->stream_err) t->stream_err = dup_s("a streamed event was not valid JSON");
        return;
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(j, "object");
    if (e || (cJSON_IsString(obj) && !strcmp(obj->valuestring, "error"))) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(e) ? e : j, "message");
        char b[512];
        snprintf(b, sizeof b, "server error in stream: %s",
                 cJSON_IsString(msg) ? msg->valuestring : cJSON_IsString(e) ? e->valuestring : "(no message)");
        if (!t->stream_err) t->stream_err = dup_s(b);
        cJSON_Delete(j);
        return;
    }
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    if (ch) {
        /* completions: text; chat: delta.content, and a reasoning model's
         * thinking in delta.reasoning_content (vLLM ≤ 0.10, SGLang,
         * llama.cpp) or delta.reasoning (newer vLLM) — tokens either way */
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(ch, "delta");
        const char *txt = str_of(ch, "text");
        if (!txt) txt = str_of(delta, "content");
        const char *rsn = str_of(delta, "reasoning_content");
        if (!rsn) rsn = str_of(delta, "reasoning");
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(ch, "logprobs");
        int ntok = 0;
        if (cJSON_IsObject(lp)) {
            const cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens");
            if (!cJSON_IsArray(toks)) toks = cJSON_GetObjectItemCaseSensitive(lp, "content");
            if (cJSON_IsArray(toks)) ntok = cJSON_GetArraySize(toks);
        }
        t->lp_tokens += ntok;
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
        if (cJSON_IsString(fr) && !t->finish) t->finish = dup_s(fr->valuestring);
        /* vLLM's timing (vllm/benchmarks/lib/endpoint_request_func.py): TTFT
         * at the first event with a non-empty "choices", whatever its text
         * ("text could be empty here e.g. for special tokens"), one ITL gap
         * per later such event, latency to the last one */
        double now = http_now();
        if (t->chunks == 0) x->res->req[t->rec].ttft = now - t->t_send_abs;
        else dvec_push(&t->itl, now - t->last_chunk_abs);
        t->last_chunk_abs = t->last_choice_abs = now;
        t->chunks++;
        if (txt) buf_append(&t->text, &t->text_len, &t->text_cap, txt, strlen(txt));
        if (rsn) buf_append(&t->reason, &t->reason_len, &t->reason_cap, rsn, strlen(rsn));
        t->content_chunks += txt || rsn;
        /* tokens this chunk carries, where it says: its logprobs, or the
         * growth of a per-chunk usage (vLLM's continuous_usage_stats) */
        double w = ntok;
        const cJSON *cu = cJSON_GetObjectItemCaseSensitive(j, "usage");
        const cJSON *cct = cJSON_IsObject(cu) ? cJSON_GetObjectItemCaseSensitive(cu, "completion_tokens") : NULL;
        if (!ntok && cJSON_IsNumber(cct) && cct->valuedouble >= 0) {
            int cum = (int)cct->valuedouble;
            w = cum - (t->cum_usage > 0 ? t->cum_usage : 0);
            if (w < 0) w = 0;
            t->cum_usage = cum;
        } else if (!ntok)
            w = txt || rsn ? 1 : 0;
        tally_chunk(t, w, 1);
        x->iv_tokens += (long)w;
        x->tokens_total += (long)w;
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(u)) {
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
        if (cJSON_IsNumber(ct)) t->usage_out = (int)ct->valuedouble;
        if (cJSON_IsNumber(pt)) t->usage_in = (int)pt->valuedouble;
    }
    cJSON_Delete(j);
}

static size_t on_stream(char *p, size_t sz, size_t nm, void *ud) {
    xfer *t = ud;
    size_t n = sz * nm;
    if (t->raw_len < sizeof t->raw - 1) {
        size_t k = n < sizeof t->raw - 1 - t->raw_len ? n : sizeof t->raw - 1 - t->raw_len;
        memcpy(t->raw + t->raw_len, p, k);
        t->raw_len += k;
        t->raw[t->raw_len] = 0;
    }
    t->bytes += n;
    if (t->bytes > t->max_bytes)
        over_cap(t, "the server sent more than %zu bytes for max_tokens %d (%u KiB per token allowed): request abandoned",
                 t->max_bytes, t->x->res->req[t->rec].max_tokens, LD_BYTES_PER_TOKEN >> 10);
    if (!t->over_cap) sse_feed(&t->sse, p, n);
    /* over a cap (or out of memory): 0 makes libcurl abort the transfer, and
     * finish_request() names the cap */
    return t->sse.err || t->over_cap ? 0 : n;
}

static size_t on_scrape(char *p, size_t sz, size_t nm, void *ud) {
    xfer *t = ud;
    size_t n = sz * nm;
    if (t->slen + n > HTTPC_MAX_BODY) { t->too_big = 1; return 0; }   /* an endless /metrics: abort */
    if (t->slen + n + 1 > t->scap) {
        size_t nc = t->scap ? t->scap : 65536;
        while (nc < t->slen + n + 1) nc *= 2;
        char *nb = realloc(t->sbuf, nc);
        if (!nb) return 0;
        t->sbuf = nb;
        t->scap = nc;
    }
    memcpy(t->sbuf + t->slen, p, n);
    t->slen += n;
    t->sbuf[t->slen] = 0;
    return n;
}

static void xfer_free(xfer *t) {
    if (!t) return;
    if (t->h) { curl_multi_remove_handle(t->x->m, t->h); curl_easy_cleanup(t->h); }
    curl_slist_free_all(t->hdr);
    free(t->body);
    sse_free(&t->sse);
    free(t->text);
    free(t->reason);
    free(t->stream_err);
    free(t->finish);
    dvec_free(&t->itl);
    free(t->sbuf);
    free(t->over_cap);
    free(t->iv_w);
    free(t->iv_c);
    free(t);
}

static int build_body(run_ctx *x, const wl_item *it, char **out, int *max_tokens) {
    const ld_config *c = x->c;
    cJSON *j = cJSON_CreateObject();
    if (!j) return -1;
    cJSON_AddStringToObject(j, "model", x->res->model);
    if (c->endpoint == EP_CHAT) {
        cJSON *msgs = cJSON_AddArrayToObject(j, "messages");
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", it->prompt);
        cJSON_AddItemToArray(msgs, m);
    } else
        cJSON_AddStringToObject(j, "prompt", it->prompt);
    int mt = c->max_tokens > 0 ? c->max_tokens : it->max_tokens > 0 ? it->max_tokens : LD_DEFAULT_MAX_TOKENS;
    *max_tokens = mt;
    cJSON_AddNumberToObject(j, "max_tokens", mt);
    cJSON_AddNumberToObject(j, "temperature", c->temperature);
    /* only when set: every OpenAI-style server (vLLM, SGLang, llama-server)
     * takes top_p, and leaving it out keeps its default rather than ours */
    if (c->top_p > 0 && c->top_p < 1) cJSON_AddNumberToObject(j, "top_p", c->top_p);
    cJSON_AddNumberToObject(j, "seed", (double)(c->seed & 0xffffffffu));
    cJSON_AddBoolToObject(j, "stream", 1);
    cJSON *so = cJSON_AddObjectToObject(j, "stream_options");
    cJSON_AddBoolToObject(so, "include_usage", 1);
    if (c->spec_depth >= 0) cJSON_AddNumberToObject(j, "spec_depth", c->spec_depth);
    if (c->ignore_eos) cJSON_AddBoolToObject(j, "ignore_eos", 1);
    if (c->logprobs > 0) {
        if (c->endpoint == EP_CHAT) {
            cJSON_AddBoolToObject(j, "logprobs", 1);
            cJSON_AddNumberToObject(j, "top_logprobs", c->logprobs);
        } else
            cJSON_AddNumberToObject(j, "logprobs", c->logprobs);
    }
    *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return *out ? 0 : -1;
}

static int issue(run_ctx *x, int phase, double t_arrival, char *err, size_t errlen) {
    const ld_config *c = x->c;
    ld_result *res = x->res;
    int item = x->order[(x->next_order++) % c->wl->n];
    if (res->n_req == x->req_cap) {
        int nc = x->req_cap ? x->req_cap * 2 : 256;
        ld_request *nr = realloc(res->req, (size_t)nc * sizeof *nr);
        if (!nr) return errf(err, errlen, "out of memory");
        res->req = nr;
        x->req_cap = nc;
    }
    ld_request *rq = &res->req[res->n_req];
    memset(rq, 0, sizeof *rq);
    rq->idx = res->n_req;
    rq->item = item;
    rq->phase = phase;
    rq->ttft = rq->e2el = NAN;
    rq->t_arrival = t_arrival;
    rq->inflight_at_send = x->inflight;
    xfer *t = calloc(1, sizeof *t);
    if (!t) return errf(err, errlen, "out of memory");
    t->x = x;
    t->rec = res->n_req;
    t->usage_out = t->usage_in = t->cum_usage = -1;
    sse_init(&t->sse, on_event, t);
    if (build_body(x, &c->wl->items[item], &t->body, &rq->max_tokens)) { xfer_free(t); return errf(err, errlen, "out of memory"); }
    /* what one response may send, from what it was asked for (load.h) */
    t->max_events = (long)rq->max_tokens + LD_EXTRA_EVENTS;
    t->max_bytes = ((size_t)rq->max_tokens + LD_EXTRA_EVENTS) * LD_BYTES_PER_TOKEN;
    t->h = curl_easy_init();
    if (!t->h) { xfer_free(t); return errf(err, errlen, "libcurl: cannot create a handle"); }
    char url[1200];
    snprintf(url, sizeof url, "%s%s", x->base, c->endpoint == EP_CHAT ? "/v1/chat/completions" : "/v1/completions");
    t->hdr = curl_slist_append(t->hdr, "Content-Type: application/json");
    t->hdr = curl_slist_append(t->hdr, "Accept: text/event-stream");
    if (c->api_key) {
        char a[1024];
        snprintf(a, sizeof a, "Authorization: Bearer %s", c->api_key);
        t->hdr = curl_slist_append(t->hdr, a);
    }
    curl_easy_setopt(t->h, CURLOPT_URL, url);
    curl_easy_setopt(t->h, CURLOPT_HTTPHEADER, t->hdr);
    curl_easy_setopt(t->h, CURLOPT_POSTFIELDS, t->body);
    curl_easy_setopt(t->h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(t->h, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->h, CURLOPT_PRIVATE, t);
    curl_easy_setopt(t->h, CURLOPT_ERRORBUFFER, t->cerr);
    curl_easy_setopt(t->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->h, CURLOPT_TIMEOUT_MS, (long)(c->request_timeout_s * 1000));
    curl_easy_setopt(t->h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    t->t_send_abs = http_now();
    rq->t_send = t->t_send_abs - x->origin;
    if (curl_multi_add_handle(x->m, t->h) != CURLM_OK) {
        curl_easy_cleanup(t->h);
        t->h = NULL;
        xfer_free(t);
        return errf(err, errlen, "libcurl: cannot add a transfer");
    }
    if (x->n_active == x->cap_active) {
        int nc = x->cap_active ? x->cap_active * 2 : 64;
        xfer **na = realloc(x->active, (size_t)nc * sizeof *na);
        if (!na) { xfer_free(t); return errf(err, errlen, "out of memory"); }
        x->active = na;
        x->cap_active = nc;
    }
    x->active[x->n_active++] = t;
    res->n_req++;
    x->issued++;
    x->inflight++;
    if (x->inflight > x->iv_max_inflight) x->iv_max_inflight = x->inflight;
    return 0;
}

static void finish_request(run_ctx *x, xfer *t, CURLcode rc) {
    ld_request *rq = &x->res->req[t->rec];
    if (!t->over_cap) sse_finish(&t->sse);
    double now = http_now();
    /* vLLM's latency: send → the last "choices" event (the usage chunk and
     * [DONE] after it do not count); send → end of stream when none came */
    rq->e2el = (t->chunks ? t->last_choice_abs : now) - t->t_send_abs;
    long st = 0;
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &st);
    rq->http_status = st;
    char b[800];
    if (t->over_cap) {           /* more than max_tokens can explain (libcurl then reports a write error) */
        rq->error = t->over_cap;
        t->over_cap = NULL;
    } else if (t->sse.err) {     /* a cap stopped the parser (libcurl then reports a write error) */
        snprintf(b, sizeof b, "%s; request abandoned", sse_error(&t->sse));
        rq->error = dup_s(b);
    } else if (rc != CURLE_OK) {
        snprintf(b, sizeof b, "transport: %s", t->cerr[0] ? t->cerr : curl_easy_strerror(rc));
        rq->error = dup_s(b);
    } else if (st != 200) {
        snprintf(b, sizeof b, "HTTP %ld: %.300s", st, t->raw);
        rq->error = dup_s(b);
    } else if (t->stream_err) {
        rq->error = t->stream_err;
        t->stream_err = NULL;
    } else if (!t->chunks && !t->done && t->usage_out < 0) {
        snprintf(b, sizeof b, "empty stream: %.300s", t->raw);
        rq->error = dup_s(b);
    } else if (!t->done && !t->finish && t->usage_out < 0) {
        /* closed cleanly, but without any of the stream's end markers: the
         * server (or a proxy) cut it; what arrived is not a completion */
        snprintf(b, sizeof b, "truncated stream: the server closed it after %d chunk(s) with no finish_reason, no "
                 "usage and no data: [DONE]", t->chunks);
        rq->error = dup_s(b);
    }
    rq->ok = rq->error == NULL;
    rq->n_out = t->usage_out >= 0 ? t->usage_out : t->lp_tokens > 0 ? t->lp_tokens : t->content_chunks;
    spread_tokens(x, t, rq->n_out);
    rq->n_in = t->usage_in > 0 ? t->usage_in : 0;
    rq->text = t->text ? t->text : dup_s("");
    t->text = NULL;
    rq->reasoning = t->reason ? t->reason : dup_s("");
    t->reason = NULL;
    rq->finish_reason = t->finish;
    t->finish = NULL;
    rq->itl = t->itl.v;
    rq->n_itl = (int)t->itl.n;
    t->itl.v = NULL;
    t->itl.n = t->itl.cap = 0;
    x->inflight--;
    x->completed++;
    if (x->c->on_done && !x->stop && x->c->on_done(x->c->on_done_ctx, rq, now - x->origin)) {
        x->stop = 1;
        x->res->stopped_early = 1;
    }
    for (int i = 0; i < x->n_active; i++)
        if (x->active[i] == t) { x->active[i] = x->active[--x->n_active]; break; }
}

static void cancel_all(run_ctx *x) {
    while (x->n_active > 0) {
        xfer *t = x->active[x->n_active - 1];
        ld_request *rq = &x->res->req[t->rec];
        t->stream_err = t->stream_err ? t->stream_err : dup_s("cancelled: the load stopped before this request finished");
        finish_request(x, t, CURLE_OK);
        if (rq->ok) { rq->ok = 0; rq->error = dup_s("cancelled: the load stopped before this request finished"); }
        xfer_free(t);
    }
    free(x->active);
    x->active = NULL;
}

/* ---- metrics ---- */

static void start_scrape(run_ctx *x) {
    xfer *t = calloc(1, sizeof *t);
    if (!t) return;
    t->kind = 1;
    t->x = x;
    t->h = curl_easy_init();
    if (!t->h) { free(t); return; }
    char url[1200];
    snprintf(url, sizeof url, "%s/metrics", x->base);
    curl_easy_setopt(t->h, CURLOPT_URL, url);
    curl_easy_setopt(t->h, CURLOPT_WRITEFUNCTION, on_scrape);
    curl_easy_setopt(t->h, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->h, CURLOPT_PRIVATE, t);
    curl_easy_setopt(t->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->h, CURLOPT_TIMEOUT_MS, 30000L);
    if (x->c->api_key) {
        char a[1024];
        snprintf(a, sizeof a, "Authorization: Bearer %s", x->c->api_key);
        t->hdr = curl_slist_append(t->hdr, a);
        curl_easy_setopt(t->h, CURLOPT_HTTPHEADER, t->hdr);
    }
    if (curl_multi_add_handle(x->m, t->h) != CURLM_OK) { curl_easy_cleanup(t->h); t->h = NULL; xfer_free(t); return; }
    x->scrape = t;
}

/* A /metrics body arrived at time t. */
static void on_snapshot(run_ctx *x, const char *text, double t) {
    msnap s;
    if (msnap_parse(x->res->msrc, text, &s, NULL, 0)) return;
    if (!x->have_first) {
        x->first = s;
        x->have_first = 1;
    } else {
        iv_row r;
        msnap_interval(x->res->msrc, &x->prev, &s, x->prev_t, t, &r);
        push_iv(x, &r);
    }
    x->prev = s;
    x->prev_t = t;
}

/* A scrape that failed: counted, the first one's reason kept. */
static void scrape_failed(run_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void scrape_failed(run_ctx *x, const char *fmt, ...) {
    ld_result *res = x->res;
    if (!res->n_scrapes_failed++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->scrape_error, sizeof res->scrape_error, fmt, ap);
        va_end(ap);
    }
}

static void finish_scrape(run_ctx *x, xfer *t, CURLcode rc) {
    long st = 0;
    curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &st);
    x->res->n_scrapes++;
    if (t->too_big)
        scrape_failed(x, "%s/metrics: the body exceeded %u MiB (HTTPC_MAX_BODY); scrape abandoned", x->base,
                      HTTPC_MAX_BODY >> 20);
    else if (rc != CURLE_OK) scrape_failed(x, "%s/metrics: %s", x->base, curl_easy_strerror(rc));
    else if (st != 200) scrape_failed(x, "%s/metrics answered HTTP %ld", x->base, st);
    else on_snapshot(x, t->sbuf ? t->sbuf : "", now_t(x));
    x->scrape = NULL;
    xfer_free(t);
}

/* Blocking scrape (first and last snapshot). */
static void scrape_now(run_ctx *x) {
    char *body;
    long st;
    char e[512];
    x->res->n_scrapes++;
    if (http_get(x->base, "/metrics", x->c->api_key, 10000, &body, &st, e, sizeof e)) {
        scrape_failed(x, "%s", e);
        return;
    }
    if (st == 200) on_snapshot(x, body, now_t(x));
    else scrape_failed(x, "%s/metrics answered HTTP %ld", x->base, st);
    free(body);
}

static void client_only_interval(run_ctx *x, double t) {
    iv_row r;
    iv_row_clear(&r);
    r.t_start = x->prev_t;
    r.t_end = t;
    r.running = x->inflight;
    x->prev_t = t;
    push_iv(x, &r);
}

static void progress(run_ctx *x, double t, int final) {
    if (!x->c->progress) return;
    if (!final && t - x->last_progress < 0.5) return;
    x->last_progress = t;
    const ld_result *res = x->res;
    double al = NAN;
    for (int i = res->n_iv - 1; i >= 0; i--)
        if (!isnan(res->iv[i].accept_len)) { al = res->iv[i].accept_len; break; }
    double el = t - x->start;
    fprintf(stderr, "\r[load] %6.1fs  sent %d  done %d  in flight %d  out tok/s %.1f  accept len %s%.2f   %s",
            el, x->issued, x->completed, x->inflight, el > 0 ? x->tokens_total / el : 0.0,
            isnan(al) ? "n/a " : "", isnan(al) ? 0.0 : al, final ? "\n" : "");
    fflush(stderr);
}

/* --spec-depth 0 asks for no speculation; a server that drafted anyway
 * ignores the override (or another client drafted): say so loudly. */
static void spec_depth_check(const ld_config *c, ld_result *res) {
    res->ignored_drafts = res->ignored_draft_tokens = NAN;
    if (c->spec_depth != 0) return;
    if (res->has_totals) {
        double d = res->totals.num_drafts, dt = res->totals.draft_tokens;
        if (d > 0 || dt > 0) {
            res->spec_depth_ignored = 1;
            res->ignored_drafts = d;
            res->ignored_draft_tokens = dt;
            note_add(res, "WARNING: --spec-depth 0 was sent, yet the server's draft counters moved by %.0f draft(s), "
                     "%.0f draft token(s) during the run: it ignores the \"spec_depth\" field (or another client "
                     "drafted meanwhile); this run is NOT speculation-off", isnan(d) ? 0.0 : d, isnan(dt) ? 0.0 : dt);
        }
        return;
    }
    int n = 0;
    for (int i = 0; i < res->n_iv; i++) n += !isnan(res->iv[i].accept_len);
    if (n) {
        res->spec_depth_ignored = 1;
        note_add(res, "WARNING: --spec-depth 0 was sent, yet %d interval(s) reported an accept length (the server "
                 "drafted): it ignores the \"spec_depth\" field; this run is NOT speculation-off", n);
    }
}

static int can_issue(run_ctx *x, double t) {
    const ld_config *c = x->c;
    if (x->stop) return 0;
    if (c->num_prompts > 0 && x->issued + x->pending >= c->num_prompts) return 0;
    double rel = t - x->start;
    if (c->duration_s > 0 && rel >= c->duration_s) return 0;
    if (c->use_profile && ld_profile_at(&c->profile, rel) < 0) return 0;
    return 1;
}

/* Sends what the shape asks for at time t. */
static int drive(run_ctx *x, double t, char *err, size_t errlen) {
    const ld_config *c = x->c;
    double rel = t - x->start;
    int phase = 0, conc = c->concurrency;
    double rate = c->rate;
    if (c->use_profile) {
        phase = ld_profile_at(&c->profile, rel);
        if (phase < 0) { x->pending = 0; return 0; }
        conc = c->profile.ph[phase].concurrency;
        rate = c->profile.ph[phase].rate;
        if (phase != x->cur_phase) {
            x->cur_phase = phase;
            x->pending = 0;
            x->arrq.n = x->arrq_head = 0;
            x->next_arrival = t;
            x->phase_t0 = t;
        }
    }
    if (rate > 0) {
        while (t >= x->next_arrival && can_issue(x, t) && x->pending < 100000) {
            x->pending++;
            dvec_push(&x->arrq, x->next_arrival);
            x->next_arrival += ld_interarrival(&x->rng, rate, c->burstiness);
        }
        while (x->pending > 0 && (c->max_concurrency <= 0 || x->inflight < c->max_concurrency)) {
            x->pending--;
            double ta = x->arrq_head < x->arrq.n ? x->arrq.v[x->arrq_head++] : t;
            if (x->arrq_head == x->arrq.n) x->arrq.n = x->arrq_head = 0;
            if (issue(x, phase, isinf(rate) ? x->phase_t0 : ta, err, errlen)) return -1;
        }
    } else {
        while (x->inflight < conc && can_issue(x, t))
            if (issue(x, phase, x->phase_t0, err, errlen)) return -1;
    }
    return 0;
}

int ld_api_key_check(const char *key, char *err, size_t errlen) {
    if (!key) return 0;
    if (!*key) return errf(err, errlen, "--api-key is empty");
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        if (*p < 0x20 || *p >= 0x7f)   /* CR/LF would inject headers; RFC 6750 tokens are printable ASCII */
            return errf(err, errlen, "--api-key has a %s (byte 0x%02x at offset %ld): it is sent in an HTTP header, "
                        "which takes printable ASCII only", *p == '\r' || *p == '\n' ? "line break" :
                        *p < 0x20 || *p == 0x7f ? "control character" : "non-ASCII byte", *p,
                        (long)(p - (const unsigned char *)key));
    return 0;
}

/* Every interval's client_tps from the settled per-request token counts. */
static void settle_client_tps(run_ctx *x) {
    ld_result *res = x->res;
    for (int i = 0; i < res->n_iv && (size_t)i < x->iv_dt.n; i++) {
        double dt = x->iv_dt.v[i], tok = (size_t)i < x->iv_tok.n ? x->iv_tok.v[i] : 0;
        res->iv[i].client_tps = dt > 0 ? tok / dt : NAN;
    }
}

/* --spec-depth K > 0: did anything draft? Said when the counters show it did
 * not, or when nothing can show it. */
static void spec_depth_used_check(const ld_config *c, ld_result *res) {
    if (c->spec_depth <= 0) return;
    int ok = 0;
    for (int i = 0; i < res->n_req; i++) ok += res->req[i].ok;
    if (!ok) return;
    if (res->has_totals && !isnan(res->totals.draft_tokens)) {
        if (res->totals.draft_tokens > 0 || res->totals.num_drafts > 0) return;
        res->spec_depth_unused = 1;
        note_add(res, "WARNING: --spec-depth %d was sent, yet the server's draft counters did not move during the run "
                 "(%d request(s) completed): it does not speculate (no drafter) or ignores \"spec_depth\"; this run is "
                 "NOT speculative", c->spec_depth, ok);
        return;
    }
    for (int i = 0; i < res->n_iv; i++) if (!isnan(res->iv[i].accept_len)) return;
    res->spec_depth_unused = 2;
    note_add(res, "WARNING: --spec-depth %d was sent, but nothing shows that the server drafted (%s): no draft counters "
             "and no accept length in any interval; it may not speculate at all", c->spec_depth,
             res->msrc == MSRC_NONE ? "no metrics source" : res->has_totals ? "its /metrics has no draft counters"
                                                                             : "no interval gave an accept length");
}

int ld_run(const ld_config *c, ld_result **out, char *err, size_t errlen) {
    *out = NULL;
    if (!c->wl || c->wl->n == 0) return errf(err, errlen, "load: no workload");
    if (c->interval_s <= 0) return errf(err, errlen, "load: --interval must be positive");
    if (ld_api_key_check(c->api_key, err, errlen)) return -1;
    run_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.res = calloc(1, sizeof *x.res);
    if (!x.res) return errf(err, errlen, "out of memory");
    ld_result *res = x.res;
    http_base(c->url, x.base, sizeof x.base);
    x.origin = c->t_origin > 0 ? c->t_origin : http_now();
    x.cur_phase = -1;
    ld_rng_seed(&x.rng, c->seed);
    x.order = malloc(sizeof(int) * (size_t)c->wl->n);
    if (!x.order) { free(res); return errf(err, errlen, "out of memory"); }
    for (int i = 0; i < c->wl->n; i++) x.order[i] = i;
    if (c->shuffle) ld_shuffle(&x.rng, x.order, c->wl->n);
    x.next_order = c->first_item;

    /* A server that does not answer at all is a setup error, not a run of
     * failed requests (an open loop would otherwise spin through them). */
    {
        char *hb = NULL;
        long hst;
        char herr[512];
        if (http_get(x.base, "/health", c->api_key, 10000, &hb, &hst, herr, sizeof herr)) {
            free(x.order);
            free(res);
            return errf(err, errlen, "cannot reach the server: %s", herr);
        }
        free(hb);
    }
    if (c->model) snprintf(res->model, sizeof res->model, "%s", c->model);
    else if (http_first_model(x.base, c->api_key, res->model, sizeof res->model))
        snprintf(res->model, sizeof res->model, "default");

    /* Metric source: an SGLang log wins; otherwise what /metrics says. */
    res->msrc = c->msrc;
    char *mbody = NULL;
    long mst = 0;
    char merr[512] = "";
    int mget = http_get(x.base, "/metrics", c->api_key, 10000, &mbody, &mst, merr, sizeof merr);
    int have_metrics = !mget && mst == 200;
    /* A /metrics that answers but cannot be read (transport error, a body
     * over the cap) is a failed scrape even while detecting; one that is
     * simply not there (404: SGLang without --enable-metrics) is not. */
    if (mget && !c->sglang_log) {
        res->n_scrapes++;
        res->n_scrapes_failed++;
        snprintf(res->scrape_error, sizeof res->scrape_error, "%s", merr);
    }
    if (c->sglang_log) {
        res->msrc = MSRC_SGLANG;
        if (sgl_tail_open(&x.tail, c->sglang_log, 1, err, errlen)) { free(mbody); free(x.order); free(res); return -1; }
    } else if (res->msrc == MSRC_AUTO) {
        res->msrc = have_metrics ? msrc_detect(mbody) : MSRC_NONE;
        if (res->msrc == MSRC_NONE)
            note_add(res, "no known metrics at %s/metrics (%s); intervals carry client-side numbers only",
                     x.base, have_metrics ? "unrecognised names" : merr[0] ? merr : "not HTTP 200");
    } else if (res->msrc != MSRC_NONE && !have_metrics)
        note_add(res, "%s/metrics unavailable (%s)", x.base, merr[0] ? merr : "not HTTP 200");
    int counter_src = res->msrc != MSRC_NONE && !c->sglang_log;
    free(mbody);
    if (res->msrc == MSRC_LLAMACPP)
        note_add(res, "llama.cpp counters move at request completion: an interval's accept length and server tok/s "
                 "describe the requests that finished in it (basis \"completion\"); llama-server streams one SSE event "
                 "per token inside a speculative step, so its ITL is not comparable with other servers' (TPOT is)");

    x.m = curl_multi_init();
    if (!x.m) { sgl_tail_close(x.tail); free(x.order); free(res); return errf(err, errlen, "libcurl: multi init failed"); }
    x.start = now_t(&x);
    x.prev_t = x.iv_t0 = x.start;
    x.next_arrival = x.phase_t0 = x.start;
    if (counter_src) scrape_now(&x);
    x.next_scrape = x.start + c->interval_s;
    res->t_first_send = NAN;
    int ret = 0;
    double t_last_done = x.start;

    for (;;) {
        double t = now_t(&x);
        if (drive(&x, t, err, errlen)) { ret = -1; break; }
        if (isnan(res->t_first_send) && res->n_req) res->t_first_send = res->req[0].t_send;
        int running;
        curl_multi_perform(x.m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(x.m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            xfer *tr;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&tr);
            CURLcode rc = msg->data.result;
            if (tr->kind == 1) finish_scrape(&x, tr, rc);
            else {
                finish_request(&x, tr, rc);
                t_last_done = now_t(&x);
                xfer_free(tr);
            }
        }
        t = now_t(&x);
        if (x.tail) sgl_tail_poll(x.tail, 1, t, on_sgl_row, &x);
        if (t >= x.next_scrape) {
            if (counter_src) { if (!x.scrape) start_scrape(&x); }
            else if (!x.tail) client_only_interval(&x, t);
            x.next_scrape += c->interval_s;
            if (x.next_scrape < t) x.next_scrape = t + c->interval_s;
        }
        progress(&x, t, 0);
        if (x.completed >= 32 && !x.stop) {   /* every request failing: stop rather than hammer */
            int ok = 0;
            for (int i = 0; i < res->n_req && !ok; i++) ok = res->req[i].ok;
            if (!ok) {
                x.stop = 1;
                note_add(res, "stopped early: the first %d requests all failed", x.completed);
            }
        }
        if (x.stop || (!can_issue(&x, t) && x.inflight == 0 && x.pending == 0)) break;
        double wait = 0.05;
        if (x.next_scrape - t < wait) wait = x.next_scrape - t;
        if (c->rate > 0 || (c->use_profile && x.cur_phase >= 0 && c->profile.ph[x.cur_phase].rate > 0))
            if (x.next_arrival - t < wait) wait = x.next_arrival - t;
        if (wait < 0) wait = 0;
        curl_multi_poll(x.m, NULL, 0, (int)(wait * 1000), NULL);
    }
    double t_end = now_t(&x);
    if (x.scrape) {
        xfer_free(x.scrape);
        x.scrape = NULL;
    }
    if (counter_src) scrape_now(&x);
    else if (x.tail) sgl_tail_poll(x.tail, 1, now_t(&x), on_sgl_row, &x);
    else if (t_end > x.prev_t + 1e-3) client_only_interval(&x, t_end);
    if (counter_src && x.have_first) {
        msnap_totals(&x.first, &x.prev, &res->totals);
        res->has_totals = res->msrc != MSRC_SGLANG;
    }
    spec_depth_check(c, res);
    spec_depth_used_check(c, res);
    res->duration = isnan(res->t_first_send) ? 0 : t_last_done - res->t_first_send;
    progress(&x, now_t(&x), 1);
    cancel_all(&x);   /* stopped early (canary) or failed: what is still in flight */
    settle_client_tps(&x);
    dvec_free(&x.iv_tok);
    dvec_free(&x.iv_dt);
    dvec_free(&x.arrq);
    curl_multi_cleanup(x.m);
    sgl_tail_close(x.tail);
    free(x.order);
    if (ret) { ld_result_free(res); return -1; }
    *out = res;
    return 0;
}

void ld_result_free(ld_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n_req; i++) {
        free(r->req[i].error);
        free(r->req[i].text);
        free(r->req[i].reasoning);
        free(r->req[i].finish_reason);
        free(r->req[i].itl);
    }
    free(r->req);
    free(r->iv);
    free(r);
}
