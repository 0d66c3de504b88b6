/* drafter_model.c — draft-model drafting (see drafter_model.h).
 * Per slot the draft KV holds a prefix of the sequence's context; `fed` is
 * its length. propose() first feeds what the draft has not seen (the tokens
 * committed last step, at least the newest one), then drafts one token per
 * forward. The last draft is never fed, so after a step the valid prefix is
 * old context + min(accepted, k − 1) drafts. */
#include "drafter_model.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "errmsg.h"
#include "forward.h"

typedef struct {
    model *m;
    kv_cache *kv;
    fwd_ctx *fwd;
    int max_seqs, max_rows, V;
    int *kv_seq;      /* [max_seqs] draft KV sequence per slot, -1 if none */
    int *fed;         /* [max_seqs] tokens in the draft KV */
    int *last_k;      /* [max_seqs] drafts proposed last step */
    float *logits;    /* [max_rows, V] */
    fwd_span *spans;  /* [max_seqs] */
    int *lrows;       /* [max_seqs] */
} dm_state;

static void dm_release(drafter *d, int slot) {
    dm_state *s = d->impl;
    if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0) return;
    kv_seq_free(s->kv, s->kv_seq[slot]);
    s->kv_seq[slot] = -1;
    s->fed[slot] = 0;
}

static int dm_begin(drafter *d, int slot, const int *prompt, int n, const float *h, char *err, size_t el) {
    (void)prompt; (void)n; (void)h;
    dm_state *s = d->impl;
    if (slot < 0 || slot >= s->max_seqs) return errf(err, el, "draft model: slot %d out of range", slot);
    dm_release(d, slot);
    s->kv_seq[slot] = kv_seq_new(s->kv);
    if (s->kv_seq[slot] < 0) return errf(err, el, "draft model: no free KV slot");
    s->fed[slot] = 0;   /* the context is fed lazily by the first propose */
    return 0;
}

/* One forward of the given spans; logits of each span's last row land in
 * s->logits rows 0..ns-1. */
static int dm_forward(dm_state *s, int ns, char *err, size_t el) {
    int rows = 0;
    for (int j = 0; j < ns; j++) { rows += s->spans[j].n; s->lrows[j] = rows - 1; }
    fwd_batch b = {.spans = s->spans, .n_spans = ns};
    fwd_out o = {.logit_rows = s->lrows, .n_logit_rows = ns, .logits = s->logits};
    return fwd_run(s->fwd, s->kv, &b, &o, err, el);
}

/* Picks the draft from the draft model's row: argmax when greedy, else a
 * draw from q = the request's sampling distribution over the draft logits. */
static int dm_pick(dm_state *s, spec_proposal *p, const float *lg, int pos) {
    p->has_top_prob = 1;
    if (p->sp->temperature <= 0.0f) {
        int t = sample_greedy(lg, s->V);
        p->top_prob[pos] = expf(logprob_of(lg, s->V, t));   /* softmax at temperature 1 */
        return t;
    }
    float *q = p->q + (size_t)pos * s->V;
    sampler_probs(q, lg, s->V, p->sp);
    p->q_valid = 1;
    float top = 0.0f;
    for (int v = 0; v < s->V; v++) if (q[v] > top) top = q[v];
    p->top_prob[pos] = top;
    return sample_from_probs(q, s->V, p->rng);
}

static int dm_propose(drafter *d, spec_proposal *reqs, int n, char *err, size_t el) {
    dm_state *s = d->impl;
    if (n > s->max_seqs) return errf(err, el, "draft model: %d sequences exceed %d slots", n, s->max_seqs);
    /* Catch-up feeds go in chunks that fit max_rows; only the final chunk of
     * each sequence yields the first draft. */
    int pending = 1;
    for (int r = 0; r < n; r++) {
        reqs[r].k = 0; reqs[r].q_valid = 0; reqs[r].has_conf = 0; reqs[r].has_top_prob = 0;
        if (s->kv_seq[reqs[r].slot] < 0) return errf(err, el, "draft model: slot %d was not begun", reqs[r].slot);
    }
    while (pending) {
        pending = 0;
        int ns = 0, rows = 0;
        int *map = malloc(sizeof(int) * (size_t)n);
        if (!map) return errf(err, el, "out of memory");
        for (int r = 0; r < n; r++) {
            spec_proposal *p = &reqs[r];
            int slot = p->slot, todo = p->n_tokens - s->fed[slot];
            if (p->max_k <= 0 || todo <= 0 || rows >= s->max_rows) { if (todo > 0 && p->max_k > 0) pending = 1; continue; }
            int chunk = todo < s->max_rows - rows ? todo : s->max_rows - rows;
            s->spans[ns] = (fwd_span){.seq = s->kv_seq[slot], .n = chunk, .tokens = p->tokens + s->fed[slot]};
            s->fed[slot] += chunk;
            if (s->fed[slot] < p->n_tokens) pending = 1;
            map[ns++] = r;
            rows += chunk;
        }
        if (ns && dm_forward(s, ns, err, el)) { free(map); return -1; }
        for (int j = 0; j < ns; j++) {
            spec_proposal *p = &reqs[map[j]];
            if (s->fed[p->slot] == p->n_tokens) p->draft[p->k++] = dm_pick(s, p, s->logits + (size_t)j * s->V, 0);
        }
        free(map);
    }
    /* Then one row per sequence per further draft. */
    int *map = malloc(sizeof(int) * (size_t)n);
    if (!map) return errf(err, el, "out of memory");
    for (int step = 1; step < SPEC_MAX_DEPTH; step++) {
        int ns = 0;
        for (int r = 0; r < n; r++) {
            spec_proposal *p = &reqs[r];
            if (p->k != step || !spec_wants_more(p)) continue;
            s->spans[ns] = (fwd_span){.seq = s->kv_seq[p->slot], .n = 1, .tokens = &p->draft[step - 1]};
            s->fed[p->slot]++;
            map[ns++] = r;
        }
        if (!ns) break;
        if (dm_forward(s, ns, err, el)) { free(map); return -1; }
        for (int j = 0; j < ns; j++) {
            spec_proposal *p = &reqs[map[j]];
            p->draft[p->k] = dm_pick(s, p, s->logits + (size_t)j * s->V, p->k);
            p->k++;
        }
    }
    free(map);
    for (int r = 0; r < n; r++) s->last_k[reqs[r].slot] = reqs[r].k;
    return 0;
}

static void dm_accept(drafter *d, const spec_accept *acc, int n) {
    dm_state *s = d->impl;
    for (int j = 0; j < n; j++) {
        const spec_accept *a = &acc[j];
        int slot = a->slot;
        if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0) continue;
        int old_n = a->n_tokens - a->n_committed;
        int k = s->last_k[slot];
        int valid_drafts = a->n_accepted < k - 1 ? a->n_accepted : (k > 0 ? k - 1 : 0);
        int keep = old_n + valid_drafts;
        if (keep < s->fed[slot]) {
            kv_truncate(s->kv, s->kv_seq[slot], keep);
            s->fed[slot] = keep;
        }
        s->last_k[slot] = 0;
    }
}

static void dm_free(drafter *d) {
    if (!d) return;
    dm_state *s = d->impl;
    if (s) {
        fwd_free(s->fwd);
        kv_cache_free(s->kv);
        model_free(s->m);
        free(s->kv_seq); free(s->fed); free(s->last_k); free(s->logits); free(s->spans); free(s->lrows);
        free(s);
    }
    free(d);
}

static const drafter_ops DM_OPS = {"draft", dm_begin, dm_propose, dm_accept, dm_release, dm_free};

/* The draft tokenizer must map every id to the same bytes as the target's. */
int drafter_check_tokenizer(const char *dir, const tokenizer *target, int required, char *err, size_t el) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!required && access(path, F_OK) != 0) return 0;
    tokenizer *t;
    if (tok_load(&t, path, err, el)) return -1;
    int rc = 0, nt = tok_vocab_size(t), ng = tok_vocab_size(target);
    if (nt != ng) rc = errf(err, el, "%s: %d tokens, the target's tokenizer has %d", path, nt, ng);
    for (int id = 0; id < nt && !rc; id++) {
        size_t la, lb;
        const char *a = tok_bytes(t, id, &la), *b = tok_bytes(target, id, &lb);
        if (!a != !b || (a && (la != lb || memcmp(a, b, la))))
            rc = errf(err, el, "%s: token %d differs from the target's tokenizer", path, id);
    }
    tok_free(t);
    return rc;
}

int drafter_model_create(drafter **out, const draft_model_opts *o, const tokenizer *target_tok,
                         int target_vocab, char *err, size_t errlen) {
    *out = NULL;
    if (!o->model_dir) return errf(err, errlen, "draft model: --draft-model DIR is required");
    if (drafter_check_tokenizer(o->model_dir, target_tok, 1, err, errlen)) return -1;
    drafter *d = calloc(1, sizeof *d);
    dm_state *s = calloc(1, sizeof *s);
    if (!d || !s) { free(d); free(s); return errf(err, errlen, "out of memory"); }
    d->ops = &DM_OPS;
    d->impl = s;
    d->vocab_size = target_vocab;
    if (model_load(&s->m, o->model_dir, err, errlen)) goto fail;
    if (s->m->cfg.vocab_size != target_vocab) {
        errf(err, errlen, "%s: vocab_size %d differs from the target's %d", o->model_dir, s->m->cfg.vocab_size,
             target_vocab);
        goto fail;
    }
    s->V = target_vocab;
    s->max_seqs = o->max_seqs > 0 ? o->max_seqs : 16;
    s->max_rows = s->max_seqs > 64 ? s->max_seqs : 64;   /* one row per slot per draft step */
    int ctx = s->m->cfg.max_position_embeddings;
    int max_len = o->max_seq_len > 0 ? o->max_seq_len : (ctx < 2048 ? ctx : 2048);
    if (max_len > ctx) max_len = ctx;
    int page = 16, pages = (max_len + SPEC_MAX_DEPTH + page) / page * s->max_seqs;
    kv_config kc = fwd_kv_config(s->m, pages, page, s->max_seqs);
    kc.max_seq_len = max_len + SPEC_MAX_DEPTH;
    if (kv_cache_create(&s->kv, &kc, err, errlen)) goto fail;
    if (fwd_create(&s->fwd, s->m, s->max_rows, err, errlen)) goto fail;
    s->kv_seq = malloc(sizeof(int) * (size_t)s->max_seqs);
    s->fed = calloc((size_t)s->max_seqs, sizeof(int));
    s->last_k = calloc((size_t)s->max_seqs, sizeof(int));
    s->logits = malloc(sizeof(float) * (size_t)s->max_rows * s->V);
    s->spans = malloc(sizeof(fwd_span) * (size_t)s->max_seqs);
    s->lrows = malloc(sizeof(int) * (size_t)s->max_seqs);
    if (!s->kv_seq || !s->fed || !s->last_k || !s->logits || !s->spans || !s->lrows) {
        errf(err, errlen, "out of memory");
        goto fail;
    }
    for (int i = 0; i < s->max_seqs; i++) s->kv_seq[i] = -1;
    *out = d;
    return 0;
fail:
    dm_free(d);
    return -1;
}
