/* server_openai.c — an OpenAI request body (/v1/completions or
 * /v1/chat/completions) becomes a validated srv_req, or a 400/404 with a
 * message naming the field. Owns the field rules only: types, ranges,
 * defaults (OpenAI's, plus vLLM's ignore_eos and specbed's spec_depth);
 * rendering chat text is server_chat.c, answering is server_render.c. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "errmsg.h"
#include "json_strict.h"
#include "server_internal.h"

typedef struct {
    int *status;
    const char **param;
    char *err;
    size_t errlen;
} perr;

static int bad(perr *e, int status, const char *param, const char *fmt, const char *a) {
    *e->status = status;
    *e->param = param;
    return errf(e->err, e->errlen, fmt, a);
}

/* Field getters: absent or null leaves *out alone and returns 0; a wrong
 * type or value is a 400 naming the field. */
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

static int get_int(const cJSON *o, const char *name, double lo, double hi, long long *out, perr *e) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "'%%s' must be an integer in [%.0f, %.0f]", lo, hi);
    if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble) || f->valuedouble < lo || f->valuedouble > hi)
        return bad(e, 400, name, msg, name);
    *out = (long long)f->valuedouble;
    return 0;
}

static int get_num(const cJSON *o, const char *name, double lo, double hi, double *out, perr *e) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "'%%s' must be a number in [%g, %g]", lo, hi);
    if (!cJSON_IsNumber(f) || !(f->valuedouble >= lo && f->valuedouble <= hi)) return bad(e, 400, name, msg, name);
    *out = f->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *name, int *out, perr *e) {
    const cJSON *f = field(o, name);
    if (!f) return 0;
    if (!cJSON_IsBool(f)) return bad(e, 400, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(f);
    return 0;
}

static int parse_stop(const cJSON *o, srv_req *r, perr *e) {
    const cJSON *f = field(o, "stop");
    if (!f) return 0;
    if (cJSON_IsString(f)) {
        if (!f->valuestring[0]) return bad(e, 400, "stop", "'%s' must not be an empty string", "stop");
        if (strlen(f->valuestring) > STOP_MAX_BYTES)
            return bad(e, 400, "stop", "'%s' strings may be at most 1024 bytes long", "stop");
        r->stop[r->n_stop++] = strdup(f->valuestring);
        return r->stop[0] ? 0 : bad(e, 500, "stop", "out of memory (%s)", "stop");
    }
    if (!cJSON_IsArray(f)) return bad(e, 400, "stop", "'%s' must be a string or an array of strings", "stop");
    if (cJSON_GetArraySize(f) > SRV_MAX_STOP) return bad(e, 400, "stop", "'%s' has more than 16 strings", "stop");
    const cJSON *x;
    cJSON_ArrayForEach(x, f) {
        if (!cJSON_IsString(x) || !x->valuestring[0])
            return bad(e, 400, "stop", "'%s' must contain only non-empty strings", "stop");
        if (strlen(x->valuestring) > STOP_MAX_BYTES)
            return bad(e, 400, "stop", "'%s' strings may be at most 1024 bytes long", "stop");
        if (!(r->stop[r->n_stop++] = strdup(x->valuestring))) return bad(e, 500, "stop", "out of memory (%s)", "stop");
    }
    return 0;
}

/* Fields that would change the output in ways specbed does not implement:
 * refuse them rather than silently ignore them. */
static int unsupported(const cJSON *o, perr *e) {
    static const char *const zero[] = {"presence_penalty", "frequency_penalty", "repetition_penalty"};
    for (size_t i = 0; i < sizeof zero / sizeof *zero; i++) {
        const cJSON *f = field(o, zero[i]);
        if (f && !cJSON_IsNumber(f)) return bad(e, 400, zero[i], "'%s' must be a number", zero[i]);
        double neutral = strcmp(zero[i], "repetition_penalty") ? 0.0 : 1.0;
        if (f && f->valuedouble != neutral) return bad(e, 400, zero[i], "'%s' is not supported", zero[i]);
    }
    const cJSON *f;
    if ((f = field(o, "logit_bias")) && (!cJSON_IsObject(f) || f->child))
        return bad(e, 400, "logit_bias", "'%s' is not supported", "logit_bias");
    if ((f = field(o, "suffix")) && (!cJSON_IsString(f) || f->valuestring[0]))
        return bad(e, 400, "suffix", "'%s' is not supported", "suffix");
    if ((f = field(o, "tools")) && (!cJSON_IsArray(f) || f->child))
        return bad(e, 400, "tools", "'%s' is not supported", "tools");
    if ((f = field(o, "response_format"))) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text"))
            return bad(e, 400, "response_format", "'%s' supports only {\"type\": \"text\"}", "response_format");
    }
    return 0;
}

/* prompt: a string, token ids, or a one-element array of either. */
static int completion_prompt(server *s, const cJSON *o, srv_req *r, perr *e) {
    const cJSON *p = field(o, "prompt");
    if (!p) return bad(e, 400, "prompt", "'%s' is required", "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) >= 1 &&
        (cJSON_IsString(p->child) || cJSON_IsArray(p->child))) {
        if (cJSON_GetArraySize(p) > 1)
            return bad(e, 400, "prompt", "'%s': only one prompt per request is supported (n = 1)", "prompt");
        p = p->child;
    }
    if (cJSON_IsString(p)) {
        size_t n = strlen(p->valuestring);
        if (n == 0) return bad(e, 400, "prompt", "'%s' is empty", "prompt");
        if (!(r->prompt_text = strdup(p->valuestring))) return bad(e, 500, "prompt", "out of memory (%s)", "prompt");
        r->prompt_len = n;
        if (tok_encode(s->e->tok, p->valuestring, n, &r->prompt, &r->n_prompt, e->err, e->errlen)) {
            *e->status = 400;
            *e->param = "prompt";
            return -1;
        }
        return 0;
    }
    if (!cJSON_IsArray(p))
        return bad(e, 400, "prompt", "'%s' must be a string or an array of token ids", "prompt");
    int n = cJSON_GetArraySize(p);
    if (n == 0) return bad(e, 400, "prompt", "'%s' is empty", "prompt");
    if (n > s->e->opts.max_seq_len) return bad(e, 400, "prompt", "'%s' is longer than the context", "prompt");
    if (!(r->prompt = malloc(sizeof(int) * (size_t)n))) return bad(e, 500, "prompt", "out of memory (%s)", "prompt");
    const cJSON *x;
    cJSON_ArrayForEach(x, p) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble >= s->V)
            return bad(e, 400, "prompt", "'%s' token ids must be integers in [0, vocab_size)", "prompt");
        r->prompt[r->n_prompt++] = (int)x->valuedouble;
    }
    size_t tl;
    if (tok_decode(s->e->tok, r->prompt, r->n_prompt, &r->prompt_text, &tl, e->err, e->errlen)) {
        *e->status = 400;
        *e->param = "prompt";
        return -1;
    }
    r->prompt_len = tl;
    return 0;
}

static int chat_prompt(server *s, const cJSON *o, srv_req *r, perr *e) {
    if (s->im_start < 0 || s->im_end < 0)
        return bad(e, 400, "messages", "%s: this model's tokenizer has no ChatML tokens (<|im_start|>, "
                   "<|im_end|>); use /v1/completions", "messages");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!m) return bad(e, 400, "messages", "'%s' is required", "messages");
    char *text;
    size_t len;
    if (srv_render_chatml(m, &text, &len, e->param, e->err, e->errlen)) {
        *e->status = 400;
        return -1;
    }
    int rc = tok_encode(s->e->tok, text, len, &r->prompt, &r->n_prompt, e->err, e->errlen);
    free(text);
    if (rc) { *e->status = 400; *e->param = "messages"; }
    return rc;
}

static int parse_fields(server *s, srv_kind kind, const cJSON *o, srv_req *r, perr *e) {
    const cJSON *f;
    if ((f = field(o, "model"))) {
        if (!cJSON_IsString(f)) return bad(e, 400, "model", "'%s' must be a string", "model");
        if (strcmp(f->valuestring, s->served_name) && strcmp(f->valuestring, s->o.model_dir)) {
            *e->status = 404;
            *e->param = "model";
            return errf(e->err, e->errlen, "The model '%.200s' does not exist (this server serves '%s')",
                        f->valuestring, s->served_name);
        }
    }
    long long n = 1, best_of = 1;
    if (get_int(o, "n", 1, 1, &n, e) || get_int(o, "best_of", 1, 1, &best_of, e)) {
        if (*e->status == 400) errf(e->err, e->errlen, "'%s' must be 1 (one choice per request)", *e->param);
        return -1;
    }
    if (unsupported(o, e)) return -1;
    double temp = 1.0, top_p = 1.0;
    long long top_k = 0, depth = -1, lp = -1, max_tokens = -1;
    if (get_num(o, "temperature", 0, 2, &temp, e) || get_num(o, "top_p", 0, 1, &top_p, e) ||
        get_int(o, "top_k", -1, 1 << 30, &top_k, e) || get_int(o, "spec_depth", 0, SPEC_MAX_DEPTH, &depth, e) ||
        get_bool(o, "stream", &r->stream, e) || get_bool(o, "ignore_eos", &r->p.ignore_eos, e))
        return -1;
    if (top_p <= 0) return bad(e, 400, "top_p", "'%s' must be in (0, 1]", "top_p");
    if (depth > 0 && !s->d)   /* a figure measured "at depth 4" on a server that cannot draft is no figure */
        return bad(e, 400, "spec_depth", "'%s' above 0 asks for speculation, but this server has no drafter "
                   "(started without --drafter); send 0 or leave it out", "spec_depth");
    if ((f = field(o, "seed"))) {
        /* any int64 or uint64 value; the bounds keep the conversions defined */
        if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble) || f->valuedouble < -9.2e18 ||
            f->valuedouble > 1.8e19)
            return bad(e, 400, "seed", "'%s' must be a 64-bit integer", "seed");
        r->p.seed = f->valuedouble < 0 ? (uint64_t)(long long)f->valuedouble : (uint64_t)f->valuedouble;
    } else {
        r->p.seed = 0x9E3779B97F4A7C15ull * (uint64_t)atomic_load(&s->req_counter) ^ (uint64_t)time(NULL);
    }
    if ((f = field(o, "stream_options"))) {
        if (!cJSON_IsObject(f)) return bad(e, 400, "stream_options", "'%s' must be an object", "stream_options");
        if (!r->stream)
            return bad(e, 400, "stream_options", "'%s' is only allowed when 'stream' is true", "stream_options");
        if (get_bool(f, "include_usage", &r->include_usage, e)) { *e->param = "stream_options.include_usage"; return -1; }
    }
    if (kind == SRV_COMPLETION) {
        if (get_int(o, "max_tokens", 0, 1 << 30, &max_tokens, e) || get_int(o, "logprobs", 0, SRV_MAX_TOP, &lp, e) ||
            get_bool(o, "echo", &r->echo, e))
            return -1;
        if (max_tokens < 0) max_tokens = 16;
        if (max_tokens == 0 && !r->echo)
            return bad(e, 400, "max_tokens", "'%s' must be at least 1 (0 only with echo)", "max_tokens");
    } else {
        int want_lp = 0;
        long long top = 0;
        if (get_int(o, "max_tokens", 1, 1 << 30, &max_tokens, e) ||
            get_int(o, "max_completion_tokens", 1, 1 << 30, &max_tokens, e) || get_bool(o, "logprobs", &want_lp, e) ||
            get_int(o, "top_logprobs", 0, SRV_MAX_TOP, &top, e))
            return -1;
        if (field(o, "top_logprobs") && !want_lp)
            return bad(e, 400, "top_logprobs", "'%s' needs 'logprobs': true", "top_logprobs");
        lp = want_lp ? top : -1;
    }
    if (parse_stop(o, r, e)) return -1;
    r->logprobs = (int)lp;
    r->max_tokens = (int)max_tokens;       /* chat: -1 until the prompt length is known */
    r->p.sp = (sampler_params){.temperature = (float)temp, .top_p = (float)top_p, .top_k = top_k < 0 ? 0 : (int)top_k};
    r->p.depth = (int)depth;
    return 0;
}

int srv_parse_request(server *s, srv_kind kind, const char *body, size_t len, srv_req **out, int *status,
                      const char **param, char *err, size_t errlen) {
    *out = NULL;
    *status = 400;
    *param = NULL;
    perr e = {status, param, err, errlen};
    if (!srv_utf8_valid(body, len)) return errf(err, errlen, "the request body is not valid UTF-8");
    cJSON *o;
    if (json_parse_strict(&o, body, len, "the request body", 1, err, errlen)) return -1;
    srv_req *r = srv_req_new();
    if (!r) { cJSON_Delete(o); *status = 500; return errf(err, errlen, "out of memory"); }
    r->kind = kind;
    int rc = -1;
    if (!cJSON_IsObject(o)) { errf(err, errlen, "the request body must be a JSON object"); goto out; }
    if (parse_fields(s, kind, o, r, &e)) goto out;
    if (kind == SRV_COMPLETION ? completion_prompt(s, o, r, &e) : chat_prompt(s, o, r, &e)) goto out;
    int ctx = s->e->opts.max_seq_len;
    if (r->n_prompt == 0) { bad(&e, 400, kind ? "messages" : "prompt", "'%s' is empty", kind ? "messages" : "prompt"); goto out; }
    if (r->max_tokens < 0) r->max_tokens = ctx - r->n_prompt;   /* chat default: the rest of the context */
    long need = (long)r->n_prompt + (r->max_tokens > 0 ? r->max_tokens : 1);
    if (r->n_prompt + 1 > ctx || need > ctx) {
        *param = kind ? "messages" : "prompt";
        errf(err, errlen, "This model's maximum context length is %d tokens. However, you requested %ld tokens "
             "(%d in the prompt, %d in the completion). Please reduce the prompt or max_tokens.",
             ctx, need, r->n_prompt, r->max_tokens);
        goto out;
    }
    r->p.max_tokens = r->max_tokens > 0 ? r->max_tokens : 1;   /* echo scoring still runs one step */
    r->p.prompt_logits = r->echo && r->logprobs >= 0;
    if (r->p.prompt_logits) {
        int k = r->logprobs;
        r->plp = calloc((size_t)r->n_prompt, sizeof(float));
        r->ptop_ids = calloc((size_t)r->n_prompt * (size_t)(k ? k : 1), sizeof(int));
        r->ptop_lps = calloc((size_t)r->n_prompt * (size_t)(k ? k : 1), sizeof(float));
        if (!r->plp || !r->ptop_ids || !r->ptop_lps) { *status = 500; errf(err, errlen, "out of memory"); goto out; }
    }
    long id = atomic_fetch_add(&s->req_counter, 1);
    snprintf(r->id, sizeof r->id, "%s-%08lx%08lx", kind ? "chatcmpl" : "cmpl", (unsigned long)time(NULL) & 0xffffffffUL,
             (unsigned long)id);
    r->created = (long)time(NULL);
    r->t_arrival = gen_now();
    rc = 0;
out:
    cJSON_Delete(o);
    if (rc) srv_req_unref(r);
    else *out = r;
    return rc;
}
