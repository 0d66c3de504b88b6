/* drafter_mtp.c — MTP drafting (see drafter_mtp.h for the row convention).
 * Owns: the module's weights bound from the target checkpoint, its one-layer
 * paged KV cache (true rows only between proposals), the target hidden
 * states not yet fed (per slot), and the row scratch.
 * Must not: touch the target's KV or weights beyond reading embed, final
 * norm and lm_head; do arithmetic outside the backend kernels. */
#include "drafter_mtp.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "draft_pick.h"
#include "errmsg.h"
#include "forward.h"
#include "layer.h"
#include "row_queue.h"

typedef struct {
    const model *m;           /* the target (borrowed) */
    layer_weights blk;
    float *enorm, *hnorm;     /* [H] */
    float *head_norm;         /* [H] shared_head.norm when the checkpoint has its own, else NULL */
    const float *final_norm;  /* what the module's output is normalised with: head_norm or model.norm */
    kb_weight head;           /* shared_head.head when present, else the target's lm_head */
    kb_weight eh;             /* [H, 2H] */
    kv_cache *kv;             /* one layer */
    layer_scratch *ls;
    int max_seqs, max_rows, V, H;
    /* per slot */
    int *kv_seq;              /* -1 = not begun */
    int *n_true;              /* true rows in the module's KV: rows 0..n_true-1 */
    row_queue *pend;          /* target hidden states h_{n_true}.. not fed yet, [H] rows */
    int *broken;              /* accept saw rows that do not line up: next propose fails */
    /* rows of one module pass, max_rows each */
    float *x, *e, *h, *cat, *g, *gl, *logits;
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

/* Runs rows 0..nr-1 already placed (e = embeddings, h = hidden inputs,
 * seq/pos, KV appended): fuse, block, final norm into s->g; then logits for
 * the rows with req_of_row >= 0, written to s->logits in row order. Returns
 * the number of logit rows. */
static int mtp_pass(mtp_state *s, int nr) {
    const model_config *c = &s->m->cfg;
    const int H = s->H;
    kb_rmsnorm(s->e, s->e, s->enorm, nr, H, c->rms_norm_eps);
    kb_rmsnorm(s->h, s->h, s->hnorm, nr, H, c->rms_norm_eps);
    for (int i = 0; i < nr; i++) {
        memcpy(s->cat + (size_t)i * 2 * H, s->e + (size_t)i * H, sizeof(float) * (size_t)H);
        memcpy(s->cat + (size_t)i * 2 * H + H, s->h + (size_t)i * H, sizeof(float) * (size_t)H);
    }
    kb_matmul(s->x, s->cat, &s->eh, nr);
    layer_rows rows = {.n = nr, .seq = s->seq, .pos = s->pos, .n_ctx = NULL};
    layer_forward(s->ls, &s->blk, s->kv, 0, &rows, s->x);
    kb_rmsnorm(s->g, s->x, s->final_norm, nr, H, c->rms_norm_eps);
    int nl = 0;
    for (int i = 0; i < nr; i++)
        if (s->req_of_row[i] >= 0) memcpy(s->gl + (size_t)nl++ * H, s->g + (size_t)i * H, sizeof(float) * (size_t)H);
    if (nl) kb_matmul(s->logits, s->gl, &s->head, nl);
    return nl;
}

/* Row i of the pass gave draft number k of request r. */
static void take_draft(mtp_state *s, spec_proposal *reqs, int r, int row, int lrow) {
    spec_proposal *p = &reqs[r];
    const float *lg = s->logits + (size_t)lrow * s->V;
    if (s->trace && r == 0) memcpy(s->trace + (size_t)p->k * s->V, lg, sizeof(float) * (size_t)s->V);
    memcpy(s->chain_h + (size_t)r * s->H, s->g + (size_t)row * s->H, sizeof(float) * (size_t)s->H);
    p->draft[p->k] = draft_pick(p, lg, s->V, p->k);
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
    if (layer_scratch_reserve(s->ls, max_ctx)) return errf(err, el, "mtp: out of memory for %d positions", max_ctx);

    /* 1. Catch up on the true rows, in chunks of max_rows; a request's last
     *    true row gives its first draft. */
    for (;;) {
        int nr = 0;
        for (int r = 0; r < n && nr < s->max_rows; r++) {
            spec_proposal *p = &reqs[r];
            int slot = p->slot, left = s->pend[slot].n - s->done[r];
            if (p->max_k <= 0 || left <= 0) continue;
            int chunk = left < s->max_rows - nr ? left : s->max_rows - nr;
            int row0 = s->n_true[slot];
            if (kv_append(s->kv, s->kv_seq[slot], chunk))
                return errf(err, el, "mtp: slot %d cannot grow to %d rows (KV pool full or context limit)", slot,
                            row0 + chunk);
            for (int i = 0; i < chunk; i++, nr++) {
                int pos = row0 + i;
                kb_weight_row(s->e + (size_t)nr * H, &s->m->embed, p->tokens[pos + 1]);
                memcpy(s->h + (size_t)nr * H, rq_row(&s->pend[slot], s->done[r] + i), sizeof(float) * (size_t)H);
                s->seq[nr] = s->kv_seq[slot];
                s->pos[nr] = pos;
                s->req_of_row[nr] = s->done[r] + i == s->pend[slot].n - 1 ? r : -1;
            }
            s->done[r] += chunk;
            s->n_true[slot] += chunk;
        }
        if (!nr) break;
        mtp_pass(s, nr);
        for (int i = 0, lr = 0; i < nr; i++)
            if (s->req_of_row[i] >= 0) take_draft(s, reqs, s->req_of_row[i], i, lr++);
    }
    for (int r = 0; r < n; r++)
        if (reqs[r].max_k > 0) s->pend[reqs[r].slot].n = 0;

    /* 2. Chain: one row per request per further draft. */
    for (int step = 1; step < SPEC_MAX_DEPTH; step++) {
        int nr = 0;
        for (int r = 0; r < n; r++) {
            spec_proposal *p = &reqs[r];
            if (p->k != step || !spec_wants_more(p)) continue;
            int slot = p->slot, pos = s->n_true[slot] - 1 + step;
            if (kv_append(s->kv, s->kv_seq[slot], 1))
                return errf(err, el, "mtp: slot %d cannot grow to %d rows (KV pool full or context limit)", slot, pos + 1);
            kb_weight_row(s->e + (size_t)nr * H, &s->m->embed, p->draft[step - 1]);
            memcpy(s->h + (size_t)nr * H, s->chain_h + (size_t)r * H, sizeof(float) * (size_t)H);
            s->seq[nr] = s->kv_seq[slot];
            s->pos[nr] = pos;
            s->req_of_row[nr] = r;
            nr++;
        }
        if (!nr) break;
        mtp_pass(s, nr);
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
        layer_weights_free(&s->blk);
        free(s->enorm); free(s->hnorm); free(s->head_norm);
        kv_cache_free(s->kv);
        layer_scratch_free(s->ls);
        if (s->pend)
            for (int i = 0; i < s->max_seqs; i++) rq_free(&s->pend[i]);
        free(s->pend); free(s->broken);
        free(s->kv_seq); free(s->n_true);
        kb_free(s->x); kb_free(s->e); kb_free(s->h); kb_free(s->cat); kb_free(s->g); kb_free(s->gl);
        kb_free(s->logits);
        free(s->seq); free(s->pos); free(s->req_of_row); free(s->chain_h); free(s->done);
        free(s);
    }
    free(d);
}

static const drafter_ops MTP_OPS = {"mtp", mtp_begin, mtp_propose, mtp_accept, mtp_release, mtp_free};

void drafter_mtp_set_trace(drafter *d, float *logits) {
    if (d && d->ops == &MTP_OPS) ((mtp_state *)d->impl)->trace = logits;
}

int drafter_mtp_create(drafter **out, const mtp_opts *o, const model *m, char *err, size_t errlen) {
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
    char pre[64], name[96];
    snprintf(pre, sizeof pre, "model.layers.%d.", c->n_layers);
    if (layer_weights_bind(&s->blk, m->st, pre, c, err, errlen)) goto fail;
    snprintf(name, sizeof name, "%senorm.weight", pre);
    if (model_copy_vector(&s->enorm, m->st, name, s->H, err, errlen)) goto fail;
    snprintf(name, sizeof name, "%shnorm.weight", pre);
    if (model_copy_vector(&s->hnorm, m->st, name, s->H, err, errlen)) goto fail;
    snprintf(name, sizeof name, "%seh_proj.weight", pre);
    if (model_bind_matrix(&s->eh, m->st, name, s->H, 2 * s->H, err, errlen)) goto fail;
    /* DeepSeek-V3 MTP modules carry their own output norm and may carry their
     * own head (shared_head.norm / shared_head.head); vLLM and SGLang use
     * them when present, so does specbed. Without them: the target's. */
    snprintf(name, sizeof name, "%sshared_head.norm.weight", pre);
    if (st_find(m->st, name) && model_copy_vector(&s->head_norm, m->st, name, s->H, err, errlen)) goto fail;
    s->final_norm = s->head_norm ? s->head_norm : m->final_norm;
    snprintf(name, sizeof name, "%sshared_head.head.weight", pre);
    int own_head = st_find(m->st, name) != NULL;
    if (own_head) {
        if (model_bind_matrix(&s->head, m->st, name, s->V, s->H, err, errlen)) goto fail;
    } else {
        s->head = m->lm_head;
    }
    if (!(o && o->quiet))
        fprintf(stderr, "mtp: module %d normalises with %s and projects with %s\n", c->n_layers,
                s->head_norm ? "its own shared_head.norm" : "the target's model.norm",
                own_head ? "its own shared_head.head" : "the target's lm_head");

    int ctx = c->max_position_embeddings;
    int max_len = o && o->max_seq_len > 0 ? o->max_seq_len : (ctx < 2048 ? ctx : 2048);
    if (max_len > ctx) max_len = ctx;
    int page = 16, pages = (max_len + SPEC_MAX_DEPTH + page) / page * s->max_seqs;
    kv_config kc = {.n_layers = 1, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .page_size = page,
                    .n_pages = pages, .max_seqs = s->max_seqs, .max_seq_len = max_len + SPEC_MAX_DEPTH};
    if (kv_cache_create(&s->kv, &kc, err, errlen)) goto fail;
    if (layer_scratch_create(&s->ls, c, s->max_rows, err, errlen)) goto fail;
    size_t R = (size_t)s->max_rows, H = (size_t)s->H, S = (size_t)s->max_seqs;
    s->kv_seq = malloc(sizeof(int) * S);
    s->n_true = calloc(S, sizeof(int));
    s->pend = calloc(S, sizeof(row_queue));
    s->broken = calloc(S, sizeof(int));
    s->x = kb_alloc(R * H * sizeof(float));
    s->e = kb_alloc(R * H * sizeof(float));
    s->h = kb_alloc(R * H * sizeof(float));
    s->cat = kb_alloc(R * 2 * H * sizeof(float));
    s->g = kb_alloc(R * H * sizeof(float));
    s->gl = kb_alloc(R * H * sizeof(float));
    s->logits = kb_alloc(R * (size_t)s->V * sizeof(float));
    s->seq = malloc(sizeof(int) * R);
    s->pos = malloc(sizeof(int) * R);
    s->req_of_row = malloc(sizeof(int) * R);
    s->chain_h = malloc(sizeof(float) * S * H);
    s->done = calloc(S, sizeof(int));
    if (!s->kv_seq || !s->n_true || !s->pend || !s->broken || !s->x || !s->e ||
        !s->h || !s->cat || !s->g || !s->gl || !s->logits || !s->seq || !s->pos || !s->req_of_row ||
        !s->chain_h || !s->done) {
        errf(err, errlen, "mtp: out of memory");
        goto fail;
    }
    for (int i = 0; i < s->max_seqs; i++) {
        s->kv_seq[i] = -1;
        s->pend[i].width = s->H;
    }
    if (c->n_mtp_layers > 1)
        fprintf(stderr, "mtp: the checkpoint has %d MTP modules; the first is used and chained for every depth\n",
                c->n_mtp_layers);
    *out = d;
    return 0;
fail:
    mtp_free(d);
    return -1;
}
