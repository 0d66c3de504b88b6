/* drafter_mtp.c — MTP drafting (see drafter_mtp.h for the row convention
 * and the step-to-module rule).
 * Owns: the modules' weights bound from the target checkpoint, their layer
 * stack (engine/draft_stack.h: the blocks and heads, sharded like the
 * target under tensor parallelism, and the paged KV cache, one layer per
 * module; true rows only between proposals), the target hidden states not
 * yet fed (per slot), the row scratch, and the optional draft vocabulary
 * (draft_vocab.h) with the heads gathered to it. The fuse (enorm, hnorm,
 * eh_proj) is small and runs here, on rank 0 only.
 * Must not: touch the target's KV or weights beyond reading embed, final
 * norm and lm_head; do arithmetic outside the backend kernels. */
#include "drafter_mtp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "draft_pick.h"
#include "draft_stack.h"
#include "draft_vocab.h"
#include "errmsg.h"
#include "forward.h"
#include "row_queue.h"

/* One MTP module: model.layers.{num_hidden_layers + j}.* */
typedef struct {
    layer_weights blk;
    float *enorm, *hnorm;     /* [H] */
    float *head_norm;         /* [H] shared_head.norm when the checkpoint has its own, else NULL */
    const float *final_norm;  /* what the module's output is normalised with: head_norm or model.norm */
    kb_weight head;           /* shared_head.head when present, else the target's lm_head; [NV, H]
                                 (rows gathered to the draft vocabulary when there is one) */
    kb_weight eh;             /* [H, 2H] */
    int own_head;
} mtp_module;

typedef struct {
    const model *m;           /* the target (borrowed) */
    mtp_module *mod;          /* [n_mod]; draft step k uses mod[k % n_mod] */
    int n_mod;
    draft_stack *st;          /* the blocks (layer j = module j), heads and KV cache */
    kv_cache *kv;             /* st's: n_mod layers, layer j is module j's */
    int max_seqs, max_rows, V, H;
    draft_vocab dv;           /* dv.n = 0: none */
    int NV;                   /* logits per row: dv.n, else V */
    /* per slot */
    int *kv_seq;              /* -1 = not begun */
    int *n_true;              /* true rows in the modules' KV: rows 0..n_true-1 */
    row_queue *pend;          /* target hidden states h_{n_true}.. not fed yet, [H] rows */
    int *broken;              /* accept saw rows that do not line up: next propose fails */
    /* rows of one module pass, max_rows each */
    float *e, *h;             /* the rows' inputs: Emb(token), hidden; every module reads them */
    float *en, *hn, *cat;     /* one module's enorm(e), hnorm(h) and [en; hn] ([R, 2H]) */
    float **cat_dst;          /* [R] row destinations in cat (kb_scatter_rows) */
    float *x, *xn;            /* eh_proj output / block output; [n_mod - 1, R, H] input_layernorm(x) of the
                                 K/V-only modules */
    float *g, *logits;        /* logits [max_rows, NV] */
    int *lrows, *kv_layers;   /* [max_rows] rows that give drafts; [n_mod] the K/V-only modules */
    float *probs;             /* [NV] a sampled draft's distribution over the draft ids */
    int *seq, *pos;
    int *req_of_row;          /* request whose draft this row gives, or -1 */
    float *chain_h;           /* [max_seqs, H] g of each request's latest row */
    int *done;                /* [max_seqs] pending rows consumed this propose */
    float *trace;
} mtp_state;

static void mtp_release(drafter *d, int slot) {
    mtp_state *s = d->impl;
    if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0) return;
    kv_seq_free(s->kv, s->kv_seq[slot]);
    s->kv_seq[slot] = -1;
    s->n_true[slot] = s->pend[slot].n = s->broken[slot] = 0;
}

static int mtp_begin(drafter *d, int slot, const int *tokens, int n, const float *hidden, char *err, size_t el) {
    (void)tokens;
    mtp_state *s = d->impl;
    if (slot < 0 || slot >= s->max_seqs) return errf(err, el, "mtp: slot %d out of range", slot);
    if (n < 2 || !hidden) return errf(err, el, "mtp: begin needs the prompt's final hidden states and a first token");
    mtp_release(d, slot);
    s->kv_seq[slot] = kv_seq_new(s->kv);
    if (s->kv_seq[slot] < 0) return errf(err, el, "mtp: no free KV slot");
    /* hidden: [n-1 prompt rows, n_taps = 1, H]; row i pairs with token i+1 */
    if (rq_push(&s->pend[slot], hidden, n - 1)) return errf(err, el, "mtp: out of memory");
    return 0;
}

/* Module md's fused input of the rows: s->x = eh_proj([enorm(e); hnorm(h)]). */
static void mtp_fuse(mtp_state *s, const mtp_module *md, int nr) {
    const int H = s->H;
    const float eps = s->m->cfg.rms_norm_eps;
    kb_rmsnorm(s->en, s->e, md->enorm, nr, H, eps);
    kb_rmsnorm(s->hn, s->h, md->hnorm, nr, H, eps);
    for (int half = 0; half < 2; half++) {   /* on the device: the pass stays in stream order */
        for (int i = 0; i < nr; i++) s->cat_dst[i] = s->cat + (size_t)i * 2 * H + (size_t)half * H;
        kb_scatter_rows(s->cat_dst, half ? s->hn : s->en, nr, H);
    }
    kb_matmul(s->x, s->cat, &md->eh, nr);
}

/* Runs rows 0..nr-1 already placed (e = embeddings, h = hidden inputs,
 * seq/pos, KV appended) through module m: fuse, block, final norm into
 * s->g; then logits with m's head for the rows with req_of_row >= 0,
 * written to s->logits in row order. Every other module writes its own K/V
 * of the same rows into its KV layer (drafter_mtp.h: every module's layer
 * holds every row). The fuses run here; the blocks and the head are one
 * pass of the stack (on every rank under tensor parallelism). Returns the
 * number of logit rows, -1 if the other ranks could not be told. */
static int mtp_pass(mtp_state *s, int nr, int m, char *err, size_t el) {
    const int H = s->H;
    const float eps = s->m->cfg.rms_norm_eps;
    int nkv = 0;
    for (int j = 0; j < s->n_mod; j++) {
        if (j == m) continue;
        mtp_fuse(s, &s->mod[j], nr);
        kb_rmsnorm(s->xn + (size_t)nkv * nr * H, s->x, s->mod[j].blk.attn_norm, nr, H, eps);
        s->kv_layers[nkv++] = j;
    }
    mtp_fuse(s, &s->mod[m], nr);
    int nl = 0;
    for (int i = 0; i < nr; i++)
        if (s->req_of_row[i] >= 0) s->lrows[nl++] = i;
    draft_pass p = {.n = nr, .seq = s->seq, .pos = s->pos, .n_kv = nkv, .kv_layers = s->kv_layers, .kv_x = s->xn,
                    .l0 = m, .l1 = m + 1, .x = s->x, .out = m, .normed = s->g, .n_logit = nl,
                    .logit_rows = s->lrows, .logits = s->logits};
    return draft_stack_run(s->st, &p, err, el) ? -1 : nl;
}

/* Row i of the pass gave draft number k of request r. */
static void take_draft(mtp_state *s, spec_proposal *reqs, int r, int row, int lrow) {
    spec_proposal *p = &reqs[r];
    const float *lg = s->logits + (size_t)lrow * s->NV;
    if (s->trace && r == 0) {
        if (s->dv.n) draft_vocab_scatter(&s->dv, s->trace + (size_t)p->k * s->V, lg);
        else memcpy(s->trace + (size_t)p->k * s->V, lg, sizeof(float) * (size_t)s->V);
    }
    memcpy(s->chain_h + (size_t)r * s->H, s->g + (size_t)row * s->H, sizeof(float) * (size_t)s->H);
    /* a target id either way: the next step embeds it, the verifier checks it */
    p->draft[p->k] = s->dv.n ? draft_pick_mapped(p, lg, s->NV, s->dv.d2t, s->V, s->probs, p->k)
                             : draft_pick(p, lg, s->V, p->k);
    p->k++;
}

static int mtp_propose(drafter *d, spec_proposal *reqs, int n, char *err, size_t el) {
    mtp_state *s = d->impl;
    const int H = s->H;
    if (n > s->max_seqs) return errf(err, el, "mtp: %d sequences exceed %d slots", n, s->max_seqs);
    int max_ctx = 1;
    for (int r = 0; r < n; r++) {
        spec_proposal *p = &reqs[r];
        p->k = 0; p->q_valid = 0; p->has_conf = 0; p->has_top_prob = 0;
        s->done[r] = 0;
        int slot = p->slot;
        if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0)
            return errf(err, el, "mtp: slot %d was not begun", slot);
        if (s->broken[slot])
            return errf(err, el, "mtp: slot %d: the target hidden states received do not line up with its tokens", slot);
        /* true rows 0..N-1 for anchor x_N, N = n_tokens - 1 */
        if (p->max_k > 0 && (s->pend[slot].n == 0 || s->n_true[slot] + s->pend[slot].n != p->n_tokens - 1))
            return errf(err, el, "mtp: slot %d has %d rows + %d pending for %d tokens (propose without accept?)",
                        slot, s->n_true[slot], s->pend[slot].n, p->n_tokens);
        int end = p->n_tokens - 1 + p->max_k;
        if (end > max_ctx) max_ctx = end;
    }
    if (draft_stack_reserve(s->st, max_ctx)) return errf(err, el, "mtp: out of memory for %d positions", max_ctx);

    /* 1. Catch up on the true rows, in chunks of max_rows, through every
     *    module's KV layer; a request's last true row gives its first draft
     *    (step 0: module 0). */
    /* Each pass is one async region (backend.h): the rows' inputs, the
     * fuses and the stack queued in stream order under a device backend;
     * the host reads the logits and g only after its end. */
    for (;;) {
        int nr = 0;
        kb_async_begin();
        for (int r = 0; r < n && nr < s->max_rows; r++) {
            spec_proposal *p = &reqs[r];
            int slot = p->slot, left = s->pend[slot].n - s->done[r];
            if (p->max_k <= 0 || left <= 0) continue;
            int chunk = left < s->max_rows - nr ? left : s->max_rows - nr;
            int row0 = s->n_true[slot];
            if (kv_append(s->kv, s->kv_seq[slot], chunk)) {
                kb_async_end();
                return errf(err, el, "mtp: slot %d cannot grow to %d rows (KV pool full or context limit)", slot,
                            row0 + chunk);
            }
            for (int i = 0; i < chunk; i++, nr++) {
                int pos = row0 + i;
                kb_weight_row(s->e + (size_t)nr * H, &s->m->embed, p->tokens[pos + 1]);
                kb_copy_to_device(s->h + (size_t)nr * H, rq_row(&s->pend[slot], s->done[r] + i),
                                  sizeof(float) * (size_t)H);
                s->seq[nr] = s->kv_seq[slot];
                s->pos[nr] = pos;
                s->req_of_row[nr] = s->done[r] + i == s->pend[slot].n - 1 ? r : -1;
            }
            s->done[r] += chunk;
            s->n_true[slot] += chunk;
        }
        int rc = nr ? mtp_pass(s, nr, 0, err, el) : 0;
        kb_async_end();
        if (!nr) break;
        if (rc < 0) return -1;
        for (int i = 0, lr = 0; i < nr; i++)
            if (s->req_of_row[i] >= 0) take_draft(s, reqs, s->req_of_row[i], i, lr++);
    }
    for (int r = 0; r < n; r++)
        if (reqs[r].max_k > 0) s->pend[reqs[r].slot].n = 0;

    /* 2. Chain: one row per request per further draft; step `step` is
     *    module step mod n (vLLM's spec_step_idx % num_mtp_layers). */
    for (int step = 1; step < SPEC_MAX_DEPTH; step++) {
        int nr = 0;
        kb_async_begin();
        for (int r = 0; r < n; r++) {
            spec_proposal *p = &reqs[r];
            if (p->k != step || !spec_wants_more(p)) continue;
            int slot = p->slot, pos = s->n_true[slot] - 1 + step;
            if (kv_append(s->kv, s->kv_seq[slot], 1)) {
                kb_async_end();
                return errf(err, el, "mtp: slot %d cannot grow to %d rows (KV pool full or context limit)", slot, pos + 1);
            }
            kb_weight_row(s->e + (size_t)nr * H, &s->m->embed, p->draft[step - 1]);
            kb_copy_to_device(s->h + (size_t)nr * H, s->chain_h + (size_t)r * H, sizeof(float) * (size_t)H);
            s->seq[nr] = s->kv_seq[slot];
            s->pos[nr] = pos;
            s->req_of_row[nr] = r;
            nr++;
        }
        int rc = nr ? mtp_pass(s, nr, step % s->n_mod, err, el) : 0;
        kb_async_end();
        if (!nr) break;
        if (rc < 0) return -1;
        for (int i = 0; i < nr; i++) take_draft(s, reqs, s->req_of_row[i], i, i);
    }
    /* Chained rows are never reused: the next proposal chains from new true rows. */
    for (int r = 0; r < n; r++) kv_truncate(s->kv, s->kv_seq[reqs[r].slot], s->n_true[reqs[r].slot]);
    return 0;
}

static void mtp_accept(drafter *d, const spec_accept *acc, int n) {
    mtp_state *s = d->impl;
    for (int j = 0; j < n; j++) {
        const spec_accept *a = &acc[j];
        int slot = a->slot;
        if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0) continue;
        /* the verify rows at positions N..N+a produced the committed tokens;
         * afterwards true rows 0..n_tokens-2 must be known */
        if (!a->hidden || s->n_true[slot] + s->pend[slot].n + a->n_committed != a->n_tokens - 1 ||
            rq_push(&s->pend[slot], a->hidden, a->n_committed))
            s->broken[slot] = 1;
    }
}

static void mtp_free(drafter *d) {
    if (!d) return;
    mtp_state *s = d->impl;
    if (s) {
        draft_stack_free(s->st);   /* first: its copies are slices of the modules' blocks */
        if (s->mod)
            for (int j = 0; j < s->n_mod; j++) {
                layer_weights_free(&s->mod[j].blk);
                kb_free(s->mod[j].enorm); kb_free(s->mod[j].hnorm); kb_free(s->mod[j].head_norm);
            }
        free(s->mod);
        draft_vocab_free(&s->dv);   /* the gathered heads, after the modules stop using them */
        if (s->pend)
            for (int i = 0; i < s->max_seqs; i++) rq_free(&s->pend[i]);
        free(s->pend); free(s->broken);
        free(s->kv_seq); free(s->n_true);
        kb_free(s->e); kb_free(s->h); kb_free(s->en); kb_free(s->hn); kb_free(s->cat); free(s->cat_dst);
        kb_free(s->x); kb_free(s->xn); kb_free(s->g); kb_free(s->logits); free(s->lrows); free(s->kv_layers);
        free(s->seq); free(s->pos); free(s->req_of_row); free(s->chain_h); free(s->done); free(s->probs);
        free(s);
    }
    free(d);
}

static const drafter_ops MTP_OPS = {"mtp", mtp_begin, mtp_propose, mtp_accept, mtp_release, mtp_free};

void drafter_mtp_set_trace(drafter *d, float *logits) {
    if (d && d->ops == &MTP_OPS) ((mtp_state *)d->impl)->trace = logits;
}

/* Binds module j, model.layers.{num_hidden_layers + j}.*, naming the tensor
 * that is missing or misshapen. */
static int bind_module(mtp_module *md, const model *m, int j, char *err, size_t errlen) {
    const model_config *c = &m->cfg;
    const int H = c->hidden_size, V = c->vocab_size;
    char pre[64], name[96];
    snprintf(pre, sizeof pre, "model.layers.%d.", c->n_layers + j);
    if (layer_weights_bind(&md->blk, m->st, pre, c, err, errlen)) return -1;
    snprintf(name, sizeof name, "%senorm.weight", pre);
    if (model_copy_vector(&md->enorm, m->st, name, H, err, errlen)) return -1;
    snprintf(name, sizeof name, "%shnorm.weight", pre);
    if (model_copy_vector(&md->hnorm, m->st, name, H, err, errlen)) return -1;
    snprintf(name, sizeof name, "%seh_proj.weight", pre);
    if (model_bind_matrix(&md->eh, m->st, name, H, 2 * H, err, errlen)) return -1;
    /* DeepSeek-V3 MTP modules carry their own output norm and may carry their
     * own head (shared_head.norm / shared_head.head); vLLM and SGLang use
     * each module's when present, so does specbed. Without them: the target's. */
    snprintf(name, sizeof name, "%sshared_head.norm.weight", pre);
    if (st_find(m->st, name) && model_copy_vector(&md->head_norm, m->st, name, H, err, errlen)) return -1;
    md->final_norm = md->head_norm ? md->head_norm : m->final_norm;
    snprintf(name, sizeof name, "%sshared_head.head.weight", pre);
    /* a copy of the target's head with the same bytes is the target's (one copy in the cache) */
    md->own_head = st_find(m->st, name) != NULL && !model_tensor_is_target(m->st, name, m, 1);
    if (md->own_head) {
        if (model_bind_matrix(&md->head, m->st, name, V, H, err, errlen)) return -1;
    } else {
        md->head = m->lm_head;
    }
    return 0;
}

int drafter_mtp_create(drafter **out, const mtp_opts *o, const model *m, fwd_ctx *tp, char *err, size_t errlen) {
    *out = NULL;
    const model_config *c = &m->cfg;
    if (c->n_mtp_layers < 1)
        return errf(err, errlen, "%s/config.json: num_nextn_predict_layers is %d; the checkpoint has no MTP module "
                    "for --drafter mtp", m->dir, c->n_mtp_layers);
    drafter *d = calloc(1, sizeof *d);
    mtp_state *s = calloc(1, sizeof *s);
    if (!d || !s) { free(d); free(s); return errf(err, errlen, "out of memory"); }
    d->ops = &MTP_OPS;
    d->impl = s;
    d->vocab_size = c->vocab_size;
    d->tap_layers[0] = FWD_TAP_FINAL_NORM;
    d->n_taps = 1;
    s->m = m;
    s->V = c->vocab_size;
    s->H = c->hidden_size;
    s->max_seqs = o && o->max_seqs > 0 ? o->max_seqs : 16;
    s->max_rows = s->max_seqs > 64 ? s->max_seqs : 64;
    s->mod = calloc((size_t)c->n_mtp_layers, sizeof *s->mod);
    if (!s->mod) { errf(err, errlen, "mtp: out of memory"); goto fail; }
    s->n_mod = c->n_mtp_layers;
    for (int j = 0; j < s->n_mod; j++)
        if (bind_module(&s->mod[j], m, j, err, errlen)) goto fail;
    if (draft_vocab_load(&s->dv, m->dir, s->V, err, errlen)) goto fail;
    for (int j = 0; j < s->n_mod && s->dv.n; j++)
        if (draft_vocab_gather(&s->dv, &s->mod[j].head, &s->mod[j].head,
                               s->mod[j].own_head ? "shared_head.head.weight" : "the target's lm_head", err, errlen))
            goto fail;
    s->NV = s->dv.n ? s->dv.n : s->V;
    if (!(o && o->quiet)) {
        const int L = c->n_layers, n = s->n_mod;
        if (n == 1)
            fprintf(stderr, "mtp: 1 MTP module (model.layers.%d.*), chained for every draft step\n", L);
        else
            fprintf(stderr, "mtp: %d MTP modules (model.layers.%d.* .. model.layers.%d.*): draft step k (0-based) "
                    "uses module k mod %d, as vLLM's spec_step_idx %% num_mtp_layers; each has its own KV layer\n",
                    n, L, L + n - 1, n);
        for (int j = 0; j < n; j++)
            fprintf(stderr, "mtp: module %d (model.layers.%d.*) normalises with %s and projects with %s\n", j, L + j,
                    s->mod[j].head_norm ? "its own shared_head.norm" : "the target's model.norm",
                    s->mod[j].own_head ? "its own shared_head.head" : "the target's lm_head");
        if (s->dv.n)
            fprintf(stderr, "mtp: draft vocabulary %d of %d (d2t from %s): every module's head has those %d rows "
                    "gathered; drafts are target ids, q is 0 outside the set, verification unchanged\n", s->dv.n,
                    s->dv.vocab, s->dv.path, s->dv.n);
    }

    int ctx = c->max_position_embeddings;
    int max_len = o && o->max_seq_len > 0 ? o->max_seq_len : (ctx < 2048 ? ctx : 2048);
    if (max_len > ctx) max_len = ctx;
    int page = 16, pages = (max_len + SPEC_MAX_DEPTH + page) / page * s->max_seqs;
    kv_config kc = {.n_layers = s->n_mod, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .page_size = page,
                    .n_pages = pages, .max_seqs = s->max_seqs, .max_seq_len = max_len + SPEC_MAX_DEPTH};
    layer_weights *blk[DRAFT_STACK_MAX_OUT];
    const kb_weight *heads[DRAFT_STACK_MAX_OUT];
    const float *norms[DRAFT_STACK_MAX_OUT];
    if (s->n_mod > DRAFT_STACK_MAX_OUT) {
        errf(err, errlen, "mtp: %d MTP modules, at most %d are supported", s->n_mod, DRAFT_STACK_MAX_OUT);
        goto fail;
    }
    for (int j = 0; j < s->n_mod; j++) {
        blk[j] = &s->mod[j].blk;
        heads[j] = &s->mod[j].head;
        norms[j] = s->mod[j].final_norm;
    }
    draft_stack_spec ss = {.what = m->dir, .cfg = c, .layers = blk, .n_layers = s->n_mod, .heads = heads,
                           .norms = norms, .n_out = s->n_mod, .kv = kc, .max_rows = s->max_rows};
    if (draft_stack_create(&s->st, &ss, tp, err, errlen)) goto fail;
    s->kv = draft_stack_kv(s->st);
    d->stack = s->st;
    if (!(o && o->quiet) && draft_stack_tp_size(s->st) > 1)
        fprintf(stderr, "mtp: tensor parallel over %d ranks: every module's block is split like the target's layers "
                "and its head by rows (%d of %d here), logits gathered on rank 0; the fuse runs on rank 0\n",
                draft_stack_tp_size(s->st), draft_stack_head_rows(s->st), s->NV);
    size_t R = (size_t)s->max_rows, H = (size_t)s->H, S = (size_t)s->max_seqs;
    s->kv_seq = malloc(sizeof(int) * S);
    s->n_true = calloc(S, sizeof(int));
    s->pend = calloc(S, sizeof(row_queue));
    s->broken = calloc(S, sizeof(int));
    s->e = kb_alloc(R * H * sizeof(float));
    s->h = kb_alloc(R * H * sizeof(float));
    s->en = kb_alloc(R * H * sizeof(float));
    s->hn = kb_alloc(R * H * sizeof(float));
    s->cat = kb_alloc(R * 2 * H * sizeof(float));
    s->cat_dst = malloc(R * sizeof *s->cat_dst);
    s->x = kb_alloc(R * H * sizeof(float));
    s->xn = kb_alloc(R * H * (size_t)(s->n_mod > 1 ? s->n_mod - 1 : 1) * sizeof(float));
    s->g = kb_alloc(R * H * sizeof(float));
    s->lrows = malloc(sizeof(int) * R);
    s->kv_layers = malloc(sizeof(int) * (size_t)s->n_mod);
    s->logits = kb_alloc(R * (size_t)s->V * sizeof(float));
    s->seq = malloc(sizeof(int) * R);
    s->pos = malloc(sizeof(int) * R);
    s->req_of_row = malloc(sizeof(int) * R);
    s->chain_h = malloc(sizeof(float) * S * H);
    s->done = calloc(S, sizeof(int));
    s->probs = malloc(sizeof(float) * (size_t)s->NV);
    if (!s->kv_seq || !s->n_true || !s->pend || !s->broken || !s->e || !s->h || !s->en || !s->hn || !s->cat || !s->cat_dst ||
        !s->x || !s->xn || !s->g || !s->lrows || !s->kv_layers || !s->logits || !s->seq || !s->pos || !s->req_of_row ||
        !s->chain_h || !s->done || !s->probs) {
        errf(err, errlen, "mtp: out of memory");
        goto fail;
    }
    for (int i = 0; i < s->max_seqs; i++) {
        s->kv_seq[i] = -1;
        s->pend[i].width = s->H;
    }
    *out = d;
    return 0;
fail:
    mtp_free(d);
    return -1;
}
