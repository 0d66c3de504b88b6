/* server_render.c — response bodies in OpenAI's shapes: errors, complete
 * responses, and the SSE chunks of a stream (completions: "text_completion"
 * objects; chat: "chat.completion.chunk" deltas), with logprobs in each
 * endpoint's own format. Reads a request's output; never changes it. The
 * caller holds r->mu. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "server_internal.h"

static const char *err_type(int status) {
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

static const char *err_code(int status, const char *param) {
    switch (status) {
    case 401: return "invalid_api_key";
    case 404: return param && !strcmp(param, "model") ? "model_not_found" : "not_found";
    case 405: return "method_not_allowed";
    case 413: return "request_too_large";
    case 429: return "queue_full";
    case 503: return "unavailable";
    default: return status >= 500 ? "internal_error" : "invalid_request";
    }
}

static char *print_free(cJSON *j) {
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return s;
}

static cJSON *error_obj(int status, const char *msg, const char *param) {
    cJSON *j = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", err_type(status));
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    cJSON_AddStringToObject(e, "code", err_code(status, param));
    return j;
}

char *srv_error_json(int status, const char *msg, const char *param) {
    return print_free(error_obj(status, msg, param));
}

/* "data: JSON\n\n" */
static char *sse(cJSON *j) {
    char *body = print_free(j);
    if (!body) return NULL;
    size_t n = strlen(body);
    char *out = malloc(n + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, body, n);
        memcpy(out + 6 + n, "\n\n", 3);
    }
    free(body);
    return out;
}

char *srv_render_error_event(int status, const char *msg) { return sse(error_obj(status, msg, NULL)); }

static cJSON *num_or_null(double v) { return isnan(v) ? cJSON_CreateNull() : cJSON_CreateNumber(v); }

/* ---- logprobs ---- */

typedef struct {            /* completions: four parallel arrays */
    cJSON *obj, *tokens, *lps, *tops, *offs;
} lp_comp;

static lp_comp lp_comp_new(void) {
    lp_comp c;
    c.obj = cJSON_CreateObject();
    c.tokens = cJSON_AddArrayToObject(c.obj, "tokens");
    c.lps = cJSON_AddArrayToObject(c.obj, "token_logprobs");
    c.tops = cJSON_AddArrayToObject(c.obj, "top_logprobs");
    c.offs = cJSON_AddArrayToObject(c.obj, "text_offset");
    return c;
}

/* lp NaN: the first prompt token (nothing predicts it): null entries. */
static void lp_comp_add(lp_comp *c, const tokenizer *t, int id, double lp, const int *top_ids, const float *top_lps,
                        int k, size_t char_off) {
    char buf[512];
    srv_token_str(t, id, buf, sizeof buf);
    cJSON_AddItemToArray(c->tokens, cJSON_CreateString(buf));
    cJSON_AddItemToArray(c->lps, num_or_null(lp));
    if (isnan(lp) || k <= 0) {
        cJSON_AddItemToArray(c->tops, isnan(lp) ? cJSON_CreateNull() : cJSON_CreateObject());
    } else {
        cJSON *d = cJSON_CreateObject();
        for (int i = 0; i < k; i++) {
            srv_token_str(t, top_ids[i], buf, sizeof buf);
            if (!cJSON_GetObjectItemCaseSensitive(d, buf)) cJSON_AddNumberToObject(d, buf, top_lps[i]);
        }
        cJSON_AddItemToArray(c->tops, d);
    }
    cJSON_AddItemToArray(c->offs, cJSON_CreateNumber((double)char_off));
}

static cJSON *bytes_array(const tokenizer *t, int id) {
    size_t n = 0;
    const char *b = tok_bytes(t, id, &n);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; b && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)b[i]));
    return a;
}

static cJSON *chat_lp_entry(const tokenizer *t, int id, double lp) {
    char buf[512];
    srv_token_str(t, id, buf, sizeof buf);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "token", buf);
    cJSON_AddNumberToObject(e, "logprob", lp);
    cJSON_AddItemToObject(e, "bytes", bytes_array(t, id));
    return e;
}

static void chat_lp_add(cJSON *content, const tokenizer *t, const srv_req *r, int j) {
    cJSON *e = chat_lp_entry(t, r->toks[j].id, r->toks[j].lp);
    cJSON *tops = cJSON_AddArrayToObject(e, "top_logprobs");
    for (int i = 0; i < r->logprobs; i++) {
        size_t o = (size_t)j * r->logprobs + i;
        cJSON_AddItemToArray(tops, chat_lp_entry(t, r->top_ids[o], r->top_lps[o]));
    }
    cJSON_AddItemToArray(content, e);
}

/* Prompt tokens with their logprobs (echo); returns the prompt's characters. */
static size_t lp_comp_prompt(lp_comp *c, const server *s, const srv_req *r) {
    size_t chars = 0;
    for (int i = 0; i < r->n_prompt; i++) {
        int k = r->logprobs;
        double lp = i == 0 || !r->plp ? NAN : r->plp[i];
        lp_comp_add(c, s->e->tok, r->prompt[i], lp, r->ptop_ids ? r->ptop_ids + (size_t)i * k : NULL,
                    r->ptop_lps ? r->ptop_lps + (size_t)i * k : NULL, k, chars);
        size_t n = 0;
        const char *b = tok_bytes(s->e->tok, r->prompt[i], &n);
        chars += b ? srv_utf8_chars(b, n) : 0;
    }
    return chars;
}

/* Generated tokens [k0, k1) into completions arrays, advancing the cursor. */
static void lp_comp_gen(lp_comp *c, const server *s, const srv_req *r, int k0, int k1, srv_cursor *cur) {
    for (int j = k0; j < k1; j++) {
        size_t off = r->toks[j].off;
        if (off > cur->byte) {
            cur->chars += srv_utf8_chars(r->text + cur->byte, off - cur->byte);
            cur->byte = off;
        }
        int k = r->logprobs;
        lp_comp_add(c, s->e->tok, r->toks[j].id, r->toks[j].lp, k > 0 ? r->top_ids + (size_t)j * k : NULL,
                    k > 0 ? r->top_lps + (size_t)j * k : NULL, k, cur->chars);
    }
}

/* Tokens to report: all, except those after the cut when a stop string ended the text. */
int srv_tokens_in_text(const srv_req *r, size_t text_end) {
    int k = r->n_toks;
    while (r->stop_hit && k > 0 && r->toks[k - 1].off >= text_end) k--;
    return k;
}

static cJSON *usage(const srv_req *r) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + r->n_gen);
    return u;
}

static cJSON *envelope(const server *s, const srv_req *r, const char *object) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", r->id);
    cJSON_AddStringToObject(j, "object", object);
    cJSON_AddNumberToObject(j, "created", (double)r->created);
    cJSON_AddStringToObject(j, "model", s->served_name);
    return j;
}

static char *dup_text(const char *a, size_t na, const char *b, size_t nb) {
    char *t = malloc(na + nb + 1);
    if (!t) return NULL;
    if (na) memcpy(t, a, na);
    if (nb) memcpy(t + na, b, nb);
    t[na + nb] = 0;
    return t;
}

char *srv_render_final(server *s, srv_req *r) {
    int chat = r->kind == SRV_CHAT;
    cJSON *j = envelope(s, r, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    int k1 = srv_tokens_in_text(r, r->text_len);
    char *text = r->echo ? dup_text(r->prompt_text, r->prompt_len, r->text, r->text_len)
                         : dup_text(r->text, r->text_len, NULL, 0);
    size_t text_len = r->echo ? r->prompt_len + r->text_len : r->text_len;
    if (!text) { cJSON_Delete(j); return NULL; }
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddItemToObject(m, "content", srv_json_text(text, text_len));
        if (r->logprobs >= 0) {
            cJSON *content = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c, "logprobs"), "content");
            for (int i = 0; i < k1; i++) chat_lp_add(content, s->e->tok, r, i);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    } else {
        cJSON_AddItemToObject(c, "text", srv_json_text(text, text_len));
        if (r->logprobs >= 0) {
            lp_comp lc = lp_comp_new();
            srv_cursor cur = {0, 0};
            if (r->echo) cur.chars = lp_comp_prompt(&lc, s, r);
            lp_comp_gen(&lc, s, r, 0, k1, &cur);
            cJSON_AddItemToObject(c, "logprobs", lc.obj);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    }
    free(text);
    cJSON_AddStringToObject(c, "finish_reason", r->finish_reason ? r->finish_reason : "length");
    cJSON_AddItemToObject(j, "usage", usage(r));
    return print_free(j);
}

static cJSON *chunk_choice(const server *s, const srv_req *r, cJSON **env) {
    *env = envelope(s, r, r->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(*env, "choices"), c);
    cJSON_AddNumberToObject(c, "index", 0);
    return c;
}

static void chunk_tail(cJSON *env, cJSON *c, const srv_req *r, const char *finish) {
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    if (r->include_usage) cJSON_AddNullToObject(env, "usage");   /* OpenAI: null on every chunk but the last */
}

char *srv_render_chunk(server *s, srv_req *r, size_t t0, size_t t1, int k0, int k1, const char *finish,
                       srv_cursor *cur) {
    cJSON *env, *c = chunk_choice(s, r, &env);
    char *text = dup_text(r->text + t0, t1 - t0, NULL, 0);
    if (!text) { cJSON_Delete(env); return NULL; }
    if (r->kind == SRV_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (t1 > t0 || !finish) cJSON_AddItemToObject(d, "content", srv_json_text(text, t1 - t0));
        if (r->logprobs >= 0 && k1 > k0) {
            cJSON *content = cJSON_AddArrayToObject(cJSON_AddObjectToObject(c, "logprobs"), "content");
            for (int i = k0; i < k1; i++) chat_lp_add(content, s->e->tok, r, i);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    } else {
        cJSON_AddItemToObject(c, "text", srv_json_text(text, t1 - t0));
        if (r->logprobs >= 0 && k1 > k0) {
            lp_comp lc = lp_comp_new();
            lp_comp_gen(&lc, s, r, k0, k1, cur);
            cJSON_AddItemToObject(c, "logprobs", lc.obj);
        } else {
            cJSON_AddNullToObject(c, "logprobs");
        }
    }
    free(text);
    chunk_tail(env, c, r, finish);
    return sse(env);
}

char *srv_render_echo_chunk(server *s, srv_req *r, srv_cursor *cur) {
    cJSON *env, *c = chunk_choice(s, r, &env);
    cJSON_AddItemToObject(c, "text", srv_json_text(r->prompt_text, r->prompt_len));
    if (r->logprobs >= 0) {
        lp_comp lc = lp_comp_new();
        cur->chars = lp_comp_prompt(&lc, s, r);
        cJSON_AddItemToObject(c, "logprobs", lc.obj);
    } else {
        cur->chars = srv_utf8_chars(r->prompt_text, r->prompt_len);
        cJSON_AddNullToObject(c, "logprobs");
    }
    chunk_tail(env, c, r, NULL);
    return sse(env);
}

char *srv_render_role_chunk(server *s, srv_req *r) {
    cJSON *env, *c = chunk_choice(s, r, &env);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    cJSON_AddNullToObject(c, "logprobs");
    chunk_tail(env, c, r, NULL);
    return sse(env);
}

char *srv_render_usage_chunk(server *s, srv_req *r) {
    cJSON *env = envelope(s, r, r->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(env, "choices");
    cJSON_AddItemToObject(env, "usage", usage(r));
    return sse(env);
}
