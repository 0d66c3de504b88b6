/* draft_stack.c — a drafter's decoder layers, heads and KV cache, whole or
 * sharded like the target (see draft_stack.h).
 * Owns: the sharding of the drafter's layers and heads (through
 * model_shard.c's rules, never its own), the copies that makes, the KV
 * cache, the layer scratch and the gather buffers.
 * Must not: decide anything about drafts (spec/ does), do arithmetic
 * outside the backend kernels and layer.c, or talk to the other ranks
 * except through tp.c's step link and vocab_par.c's gather. */
#include "draft_stack.h"
#include "comm.h"
#include "errmsg.h"
#include "layer.h"
#include "tp_link.h"
#include "vocab_par.h"

#include <stdlib.h>
#include <string.h>

struct draft_stack {
    model_config cfg;                /* whole shapes */
    int H, N, max_rows, n_layers, n_out;
    layer_weights **layers;          /* [n_layers] the drafter's, sharded */
    kb_weight head[DRAFT_STACK_MAX_OUT];   /* this rank's rows (the whole head with one process) */
    const float *norm[DRAFT_STACK_MAX_OUT];
    int width;                       /* padded shard width of the heads */
    kv_cache *kv;
    layer_scratch *ls;
    kb_comm *comm;                   /* NULL with one process */
    tp_link *link;
    int id;                          /* rank 0: the id the other ranks know it by, -1 = not announced */
    void **owned;                    /* row-parallel copies */
    int n_owned;
    float *xl;                       /* [R, H] the rows that get logits */
    float *lpart, *lall;             /* [R, width], [tp, R, width] */
    float *normed, *logits;          /* ranks > 0: [R, H], [R, N] */
    float *rx;                       /* ranks > 0: received inputs */
    size_t rx_cap;
};

int draft_stack_create(draft_stack **out, const draft_stack_spec *sp, fwd_ctx *target, char *err, size_t errlen) {
    *out = NULL;
    kb_comm *c = target ? fwd_tp_comm(target) : NULL;
    const int tp = c ? kb_comm_size(c) : 1, rank = c ? kb_comm_rank(c) : 0;
    if (sp->n_out < 1 || sp->n_out > DRAFT_STACK_MAX_OUT || sp->n_layers < 1 || sp->max_rows < 1)
        return errf(err, errlen, "%s: %d heads, %d layers, %d rows per pass", sp->what, sp->n_out, sp->n_layers,
                    sp->max_rows);
    model_config shard;
    int kv_lo;
    if (model_shard_config(sp->cfg, rank, tp, &shard, &kv_lo, sp->what, err, errlen)) return -1;
    draft_stack *s = calloc(1, sizeof *s);
    if (!s) return errf(err, errlen, "%s: out of memory", sp->what);
    s->cfg = *sp->cfg;
    s->H = sp->cfg->hidden_size;
    s->N = sp->heads[0]->rows;
    s->max_rows = sp->max_rows;
    s->n_layers = sp->n_layers;
    s->n_out = sp->n_out;
    s->id = -1;
    s->layers = malloc(sizeof *s->layers * (size_t)sp->n_layers);
    if (!s->layers) { free(s); return errf(err, errlen, "%s: out of memory", sp->what); }
    memcpy(s->layers, sp->layers, sizeof *s->layers * (size_t)sp->n_layers);
    if (tp > 1) {
        s->comm = c;
        s->link = fwd_tp_link(target);
    }
    int lo;
    for (int j = 0; j < sp->n_out; j++) {
        if (sp->heads[j]->rows != s->N || sp->heads[j]->cols != s->H) {
            errf(err, errlen, "%s: head %d is [%d, %d], head 0 [%d, %d]", sp->what, j, sp->heads[j]->rows,
                 sp->heads[j]->cols, s->N, s->H);
            s->link = NULL;
            goto fail;
        }
        s->head[j] = tp > 1 ? model_head_part(sp->heads[j], rank, tp, &lo, &s->width) : *sp->heads[j];
        s->norm[j] = sp->norms[j];
    }
    if (tp == 1) s->width = s->N;
    for (int l = 0; l < sp->n_layers; l++)
        if (layer_weights_shard(sp->layers[l], sp->cfg, rank, tp, &s->owned, &s->n_owned)) {
            errf(err, errlen, "%s: out of memory slicing draft layer %d for rank %d of %d", sp->what, l, rank, tp);
            goto fail;
        }
    kv_config kc = sp->kv;
    kc.n_kv_heads = shard.n_kv_heads;
    if (kv_cache_create(&s->kv, &kc, err, errlen) || layer_scratch_create(&s->ls, &shard, s->max_rows, err, errlen))
        goto fail;
    size_t R = (size_t)s->max_rows, H = (size_t)s->H;
    s->xl = kb_alloc(R * H * sizeof(float));
    int ok = s->xl != NULL;
    if (tp > 1) {
        layer_scratch_set_comm(s->ls, c);
        s->lpart = kb_alloc(R * (size_t)s->width * sizeof(float));
        s->lall = kb_alloc(R * (size_t)s->width * (size_t)tp * sizeof(float));
        ok = ok && s->lpart && s->lall;
        if (rank > 0) {
            s->normed = kb_alloc(R * H * sizeof(float));
            s->logits = kb_alloc(R * (size_t)s->N * sizeof(float));
            ok = ok && s->normed && s->logits;
        }
    }
    if (!ok) {
        errf(err, errlen, "%s: out of memory for the draft layers' buffers", sp->what);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    draft_stack_free(s);
    return -1;
}

void draft_stack_free(draft_stack *s) {
    if (!s) return;
    if (s->link && s->id >= 0) tp_draft_close(s->link, s->id);
    kv_cache_free(s->kv);
    layer_scratch_free(s->ls);
    for (int i = 0; i < s->n_owned; i++) free(s->owned[i]);
    free(s->owned);
    kb_free(s->xl); kb_free(s->lpart); kb_free(s->lall); kb_free(s->normed); kb_free(s->logits);
    free(s->rx);
    free(s->layers);
    free(s);
}

kv_cache *draft_stack_kv(draft_stack *s) { return s->kv; }
int draft_stack_reserve(draft_stack *s, int max_ctx) { return layer_scratch_reserve(s->ls, max_ctx); }
int draft_stack_tp_size(const draft_stack *s) { return s->comm ? kb_comm_size(s->comm) : 1; }
int draft_stack_head_rows(const draft_stack *s) { return s->head[0].rows; }
int draft_stack_vocab(const draft_stack *s) { return s->N; }

/* What tp.c's serve loop reaches a stack through on ranks > 0 (tp_draft_ops). */
static int stack_hidden(const draft_stack *s) { return s->H; }
static int stack_max_rows(const draft_stack *s) { return s->max_rows; }
static int stack_layers(const draft_stack *s) { return s->n_layers; }

static float *stack_rx(draft_stack *s, size_t floats) {
    if (floats > s->rx_cap) {
        float *p = realloc(s->rx, floats * sizeof *p);
        if (!p) return NULL;
        s->rx = p;
        s->rx_cap = floats;
    }
    return s->rx;
}

/* Every rank: the pass on this rank's layers and head rows. The host
 * touches none of the pass's buffers in between, so under a device backend
 * its kernels are queued one behind the other (backend.h's async region)
 * and all have run when it returns. */
static void compute(draft_stack *s, const draft_pass *p) {
    const int n = p->n, H = s->H;
    const layer_rows rows = {.n = n, .seq = p->seq, .pos = p->pos, .n_ctx = p->n_ctx};
    kb_async_begin();
    for (int i = 0; i < p->n_kv; i++) {
        int l = p->kv_layers[i];
        layer_write_kv(s->ls, s->layers[l], s->kv, l, &rows, p->kv_x + (p->kv_shared ? 0 : (size_t)i * n * H));
    }
    if (DRAFT_PASS_READS_X(p->l0, p->l1, p->n_logit)) {
        for (int l = p->l0; l < p->l1; l++) layer_forward(s->ls, s->layers[l], s->kv, l, &rows, p->x);
        kb_rmsnorm(p->normed, p->x, s->norm[p->out], n, H, s->cfg.rms_norm_eps);
        vp_head_rows(s->comm, &s->head[p->out], s->N, s->width, p->normed, p->logit_rows, p->n_logit, H, s->xl,
                     s->lpart, s->lall, p->logits);
    }
    kb_async_end();
}

/* What a pass may name, checked on every rank before anything runs. */
static int check_pass(const draft_stack *s, const draft_pass *p, char *err, size_t errlen) {
    if (p->n < 0 || p->n > s->max_rows || p->n_kv < 0 || p->n_kv > s->n_layers || p->l0 < 0 || p->l1 > s->n_layers ||
        p->out < 0 || p->out >= s->n_out || p->n_logit < 0 || p->n_logit > p->n || p->l0 > p->l1)
        return errf(err, errlen, "draft pass: %d rows (of %d), %d K/V layers, layers %d..%d of %d, head %d of %d, "
                    "%d logit rows", p->n, s->max_rows, p->n_kv, p->l0, p->l1, s->n_layers, p->out, s->n_out,
                    p->n_logit);
    for (int i = 0; i < p->n_kv; i++)
        if (p->kv_layers[i] < 0 || p->kv_layers[i] >= s->n_layers)
            return errf(err, errlen, "draft pass: K/V layer %d of %d", p->kv_layers[i], s->n_layers);
    for (int i = 0; i < p->n_logit; i++)
        if (p->logit_rows[i] < 0 || p->logit_rows[i] >= p->n || (i && p->logit_rows[i] <= p->logit_rows[i - 1]))
            return errf(err, errlen, "draft pass: logit row %d of %d rows, or not ascending", p->logit_rows[i], p->n);
    for (int i = 0; i < p->n; i++)
        if (kv_len(s->kv, p->seq[i]) <= p->pos[i] || p->pos[i] < 0)
            return errf(err, errlen, "draft pass: row %d at position %d of sequence %d, which has %d rows", i,
                        p->pos[i], p->seq[i], kv_len(s->kv, p->seq[i]));
    return 0;
}

int draft_stack_run(draft_stack *s, const draft_pass *p, char *err, size_t errlen) {
    if (check_pass(s, p, err, errlen)) return -1;
    if (s->link) {
        kb_wait();   /* the other ranks are sent the pass's inputs, read on the host */
        if (tp_draft_pass(s->link, s->id, s->kv, p, s->H, err, errlen)) return -1;
    }
    compute(s, p);
    return 0;
}

/* A rank > 0 running a pass it received: p's rows after the KV cache was
 * mirrored; scratch the stack's. */
static int stack_serve(draft_stack *s, draft_pass *p, char *err, size_t errlen) {
    if (check_pass(s, p, err, errlen)) return -1;
    int max_ctx = 1;
    for (int i = 0; i < p->n; i++) {
        int c = p->n_ctx ? p->n_ctx[i] : p->pos[i] + 1;
        if (c > max_ctx) max_ctx = c;
    }
    if (layer_scratch_reserve(s->ls, max_ctx))
        return errf(err, errlen, "draft pass: out of memory for attention over %d positions", max_ctx);
    p->normed = s->normed;
    p->logits = s->logits;
    compute(s, p);
    return 0;
}

int draft_stack_open(draft_stack *s, const void *desc, size_t n, char *err, size_t errlen) {
    if (!s->link || kb_comm_rank(s->comm) != 0) return 0;
    return tp_draft_open(s->link, desc, n, &s->id, err, errlen);
}

void draft_stack_set_host(fwd_ctx *target, const draft_host *h) {
    static const tp_draft_ops ops = {.kv = draft_stack_kv, .hidden = stack_hidden, .max_rows = stack_max_rows,
                                     .layers = stack_layers, .rx = stack_rx, .serve = stack_serve};
    tp_link *t = fwd_tp_link(target);
    if (t) tp_set_draft_host(t, h, &ops);
}
