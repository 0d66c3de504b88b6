/* server_req.c — the request object and its output channel. The scheduler
 * thread turns committed tokens into text here (streaming detokenization,
 * specials skipped, stop strings cut and held back), records logprobs, and
 * wakes the connection thread; the connection thread only reads. Must not
 * touch the batch or the queue (that is sched_loop.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "server_internal.h"

srv_req *srv_req_new(void) {
    srv_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->slot = -1;
    r->last_step = -1;
    r->logprobs = -1;
    return r;
}

void srv_req_ref(srv_req *r) {
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
}

void srv_req_unref(srv_req *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->prompt);
    free(r->prompt_text);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    if (r->stop_ready) stop_match_free(&r->stops);
    free(r->text);
    free(r->toks);
    free(r->top_ids);
    free(r->top_lps);
    free(r->plp);
    free(r->ptop_ids);
    free(r->ptop_lps);
    free(r);
}

/* The batch's end-of-generation set (spec_batch.c): config eos, <|endoftext|>, <|im_end|>. */
int srv_is_eos(const server *s, int id) {
    return id == s->eos[0] || id == s->eos[1] || id == s->eos[2];
}

static int grow_text(srv_req *r, size_t need) {
    if (r->text_len + need + 1 <= r->text_cap) return 0;
    size_t cap = r->text_cap ? r->text_cap : 256;
    while (cap < r->text_len + need + 1) cap *= 2;
    char *t = realloc(r->text, cap);
    if (!t) return -1;
    r->text = t;
    r->text_cap = cap;
    return 0;
}

static int grow_toks(srv_req *r) {
    if (r->n_toks < r->toks_cap) return 0;
    int cap = r->toks_cap ? r->toks_cap * 2 : 64;
    srv_tok *t = realloc(r->toks, sizeof *t * (size_t)cap);
    if (!t) return -1;
    r->toks = t;
    if (r->logprobs > 0) {
        int *ti = realloc(r->top_ids, sizeof(int) * (size_t)cap * (size_t)r->logprobs);
        if (ti) r->top_ids = ti;
        float *tl = realloc(r->top_lps, sizeof(float) * (size_t)cap * (size_t)r->logprobs);
        if (tl) r->top_lps = tl;
        if (!ti || !tl) return -1;
    }
    r->toks_cap = cap;
    return 0;
}

static float finite_lp(float x) { return isfinite(x) ? x : -9999.0f; }

/* New text arrived at [from, text_len): cut at a stop string, or hold back
 * a tail that may still become one. */
static void check_stop(srv_req *r, size_t from) {
    if (!r->n_stop) { r->safe_len = r->text_len; return; }
    if (!r->stop_ready) {
        if (stop_match_init(&r->stops, r->stop, r->n_stop)) {
            r->n_stop = 0;   /* cannot match: fail the request rather than ignore its stops */
            r->done = 1;
            r->stop_hit = 1;
            r->err_status = 500;
            snprintf(r->err_msg, sizeof r->err_msg, "out of memory preparing the stop strings");
            r->finished = 1;
            return;
        }
        r->stop_ready = 1;
    }
    size_t hold = 0;
    long p = stop_match_feed(&r->stops, r->text + from, r->text_len - from, from, &hold);
    if (p >= 0) {
        r->text_len = (size_t)p;
        r->safe_len = r->text_len;
        r->done = 1;
        r->stop_hit = 1;
        r->finish_reason = "stop";
        return;
    }
    r->safe_len = r->text_len - hold;
}

void srv_req_on_token(server *s, srv_req *r, int token, const float *logits) {
    if (r->done) return;
    pthread_mutex_lock(&r->mu);
    r->prompt_done = 1;
    r->dirty = 1;
    if (r->max_tokens == 0) {           /* echo scoring: the generated token is not output */
        pthread_mutex_unlock(&r->mu);
        return;
    }
    r->n_gen++;
    if (!r->p.ignore_eos && srv_is_eos(s, token)) {   /* the end token is not text */
        r->dirty = 1;
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (grow_toks(r)) goto oom;
    srv_tok *t = &r->toks[r->n_toks];
    t->id = token;
    t->off = r->text_len;
    t->lp = r->logprobs >= 0 ? finite_lp(logprob_of(logits, s->V, token)) : 0.0f;
    if (r->logprobs > 0) {
        int *ids = r->top_ids + (size_t)r->n_toks * r->logprobs;
        float *lps = r->top_lps + (size_t)r->n_toks * r->logprobs;
        logprobs_top(logits, s->V, r->logprobs, ids, lps);
        for (int i = 0; i < r->logprobs; i++) lps[i] = finite_lp(lps[i]);
    }
    r->n_toks++;
    if (!tok_is_special(s->e->tok, token)) {        /* skip_special_tokens, as vLLM does */
        size_t blen = 0;
        tok_bytes(s->e->tok, token, &blen);
        size_t cap = 3 * (blen + 3) + 64;
        if (grow_text(r, cap)) goto oom;
        size_t from = r->text_len;
        r->text_len += tok_stream_put(s->e->tok, &r->ts, token, r->text + r->text_len, cap);
        r->text[r->text_len] = 0;
        check_stop(r, from);
    }
    r->dirty = 1;        /* the scheduler wakes the reader once per step (srv_req_notify) */
    pthread_mutex_unlock(&r->mu);
    return;
oom:
    pthread_mutex_unlock(&r->mu);
    r->done = 1;
    r->stop_hit = 1;       /* the scheduler cancels the slot */
    srv_req_fail(r, 500, "out of memory while recording the output");
}

void srv_req_notify(srv_req *r) {
    if (!r->dirty) return;
    r->dirty = 0;
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void srv_req_on_prompt_logits(server *s, srv_req *r, int i, const float *logits) {
    if (!r->plp || i + 1 >= r->n_prompt) return;   /* the last row predicts the first new token */
    int tok = r->prompt[i + 1];
    pthread_mutex_lock(&r->mu);
    r->plp[i + 1] = finite_lp(logprob_of(logits, s->V, tok));
    if (r->logprobs > 0) {
        int *ids = r->ptop_ids + (size_t)(i + 1) * r->logprobs;
        float *lps = r->ptop_lps + (size_t)(i + 1) * r->logprobs;
        logprobs_top(logits, s->V, r->logprobs, ids, lps);
        for (int k = 0; k < r->logprobs; k++) lps[k] = finite_lp(lps[k]);
    }
    pthread_mutex_unlock(&r->mu);
}

void srv_req_finish(server *s, srv_req *r, const char *reason) {
    pthread_mutex_lock(&r->mu);
    if (!r->finished) {
        if (!r->done && grow_text(r, 16) == 0) {   /* bytes of an unfinished character */
            size_t from = r->text_len;
            r->text_len += tok_stream_flush(&r->ts, r->text + r->text_len, 16);
            r->text[r->text_len] = 0;
            check_stop(r, from);
        }
        r->done = 1;
        if (!r->finish_reason) r->finish_reason = reason ? reason : "length";
        r->safe_len = r->text_len;
        r->prompt_done = 1;
        r->finished = 1;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    (void)s;
}

void srv_req_fail(srv_req *r, int status, const char *msg) {
    pthread_mutex_lock(&r->mu);
    if (!r->finished) {
        r->err_status = status;
        snprintf(r->err_msg, sizeof r->err_msg, "%s", msg);
        r->prompt_done = 1;
        r->finished = 1;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}
