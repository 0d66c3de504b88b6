/* drafter_dspark.c — DSpark drafting (see drafter_dspark.h for the
 * convention and the chaining rule).
 * Owns: the checkpoint (dspark_ckpt), its layer stack (engine/draft_stack.h:
 * the draft layers and lm_head, sharded like the target under tensor
 * parallelism, and the per-draft-layer context KV cache), the target taps
 * not fed yet (per slot) and the row scratch. fc, hidden_norm, the block's
 * embedding rows and the Markov and confidence heads are small and run
 * here, on rank 0 only.
 * Must not: touch the target's KV; do arithmetic outside the backend
 * kernels (the only scalar math is the confidence's sigmoid). */
#include "drafter_dspark.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "draft_pick.h"
#include "draft_stack.h"
#include "drafter_model.h"
#include "dspark_ckpt.h"
#include "errmsg.h"
#include "row_queue.h"

typedef struct {
    dspark_ckpt ck;
    draft_stack *st;          /* the draft layers, lm_head and KV cache */
    kv_cache *kv;             /* st's: ck.cfg.n_layers layers, context rows, then temporary block rows */
    int max_seqs, max_rows, V, H, TH, G, R;   /* TH = n_taps·H, G = block size, R = Markov rank */
    int NV;                   /* logits per slot: the draft vocabulary's N (ck.dv), else V */
    /* per slot */
    int *kv_seq;              /* -1 = not begun */
    int *n_ctx;               /* context positions in the KV: 0..n_ctx-1 */
    row_queue *pend;          /* taps of positions n_ctx.. not fed yet, [TH] rows */
    int *broken;
    /* scratch, max_rows rows */
    float *taps, *x, *hn, *logits;   /* logits [max_rows, NV] */
    float *w1row, *bias, *feat;   /* [R], [NV], [H + R] */
    float *hn1, *lg1;             /* [H], [NV]: one slot's head-only pass (block_heads) */
    float *probs;                 /* [NV] a sampled draft's distribution over the draft ids */
    int *seq, *pos, *nctx, *req_of_row, *done, *lrows, *all_layers;
    float *trace_cor, *trace_base;
    dspark_final_tap final_tap;   /* the state fed for a final-layer tap (none: REFUSE) */
} ds_state;

static void ds_release(drafter *d, int slot) {
    ds_state *s = d->impl;
    if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0) return;
    kv_seq_free(s->kv, s->kv_seq[slot]);
    s->kv_seq[slot] = -1;
    s->n_ctx[slot] = s->pend[slot].n = s->broken[slot] = 0;
}

static int ds_begin(drafter *d, int slot, const int *tokens, int n, const float *taps, char *err, size_t el) {
    (void)tokens;
    ds_state *s = d->impl;
    if (slot < 0 || slot >= s->max_seqs) return errf(err, el, "dspark: slot %d out of range", slot);
    if (n < 2 || !taps) return errf(err, el, "dspark: begin needs the prompt's target taps and a first token");
    ds_release(d, slot);
    s->kv_seq[slot] = kv_seq_new(s->kv);
    if (s->kv_seq[slot] < 0) return errf(err, el, "dspark: no free KV slot");
    /* taps: [n-1 prompt rows, n_taps, H] = rows of the fc input */
    if (rq_push(&s->pend[slot], taps, n - 1)) return errf(err, el, "dspark: out of memory");
    return 0;
}

/* Feeds every request's pending taps into the context cache, in chunks of
 * max_rows rows. */
static int feed_context(ds_state *s, spec_proposal *reqs, int n, char *err, size_t el) {
    const dspark_ckpt *c = &s->ck;
    for (int r = 0; r < n; r++) s->done[r] = 0;
    for (;;) {
        int nr = 0;
        kb_async_begin();   /* one region per chunk (backend.h): the host reads nothing of it */
        for (int r = 0; r < n && nr < s->max_rows; r++) {
            int slot = reqs[r].slot, left = s->pend[slot].n - s->done[r];
            if (left <= 0) continue;
            int chunk = left < s->max_rows - nr ? left : s->max_rows - nr;
            if (kv_append(s->kv, s->kv_seq[slot], chunk)) {
                kb_async_end();
                return errf(err, el, "dspark: slot %d cannot grow to %d positions (KV pool full or context limit)",
                            slot, s->n_ctx[slot] + chunk);
            }
            kb_copy_to_device(s->taps + (size_t)nr * s->TH, rq_row(&s->pend[slot], s->done[r]),
                              sizeof(float) * (size_t)chunk * s->TH);
            for (int i = 0; i < chunk; i++, nr++) {
                s->seq[nr] = s->kv_seq[slot];
                s->pos[nr] = s->n_ctx[slot] + i;
            }
            s->done[r] += chunk;
            s->n_ctx[slot] += chunk;
        }
        int rc = 0;
        if (nr) {
            kb_matmul(s->x, s->taps, &c->fc, nr);
            kb_rmsnorm(s->x, s->x, c->hidden_norm, nr, s->H, c->cfg.rms_norm_eps);
            draft_pass p = {.n = nr, .seq = s->seq, .pos = s->pos, .n_kv = c->cfg.n_layers,
                            .kv_layers = s->all_layers, .kv_x = s->x, .kv_shared = 1};
            rc = draft_stack_run(s->st, &p, err, el);
        }
        kb_async_end();
        if (!nr) break;
        if (rc) return -1;
    }
    for (int r = 0; r < n; r++) s->pend[reqs[r].slot].n = 0;
    return 0;
}

/* A trace row (V wide) from a logits row (NV wide). */
static void trace_row(const ds_state *s, float *dst, const float *lg) {
    if (s->ck.dv.n) draft_vocab_scatter(&s->ck.dv, dst, lg);
    else memcpy(dst, lg, sizeof(float) * (size_t)s->V);
}

/* The sequential heads over one block of request p, whose rows start at
 * row of the last pass (normed rows in s->hn). Slot k's Markov term and
 * confidence read the previous draft (prev: always a target id, the anchor
 * and then each draft mapped back, so W1 [V, r] is read by target id with
 * or without a draft vocabulary; W2's rows are the NV scored ids), then
 * its draft is picked from U_k + W2·W1[prev].
 * U: the block's base logits [nk, NV] from the pass (no verify policy: all
 * nk drafts are wanted), or NULL: drafting that stops early. Then before
 * each slot the policy is asked (spec_wants_more) with the slot's own
 * confidence already in conf[k] (conf_ahead: c_k never reads d_k), and
 * only a slot it wants gets its head (a head-only pass of that row). A
 * slot the policy would not verify costs its confidence, not its head.
 * Returns the drafts taken, -1 on a failed pass. */
static int block_heads(ds_state *s, spec_proposal *p, int first, int row, const float *U, int nk, int trace,
                       char *err, size_t el) {
    const dspark_ckpt *c = &s->ck;
    const int H = s->H;
    int prev = first, k = 0;
    for (; k < nk; k++) {
        const float *hk = s->hn + (size_t)(row + k) * H;
        if (s->R > 0) kb_weight_row(s->w1row, &c->w1, prev);
        if (c->has_conf) {
            memcpy(s->feat, hk, sizeof(float) * (size_t)H);
            if (c->conf_with_markov) memcpy(s->feat + H, s->w1row, sizeof(float) * (size_t)s->R);
            float z;
            kb_matmul(&z, s->feat, &c->conf_w, 1);
            p->conf[p->k] = (float)(1.0 / (1.0 + exp(-((double)z + c->conf_b))));
            p->has_conf = 1;
        }
        float *lg;
        if (U) {
            lg = (float *)U + (size_t)k * s->NV;
        } else {
            p->conf_ahead = c->has_conf;
            int want = spec_wants_more(p);
            p->conf_ahead = 0;
            if (!want) break;
            static const int zero = 0;
            draft_pass hp = {.n = 1, .seq = s->seq + row + k, .pos = s->pos + row + k,
                             .x = s->x + (size_t)(row + k) * H, .normed = s->hn1, .n_logit = 1, .logit_rows = &zero,
                             .logits = s->lg1};
            kb_async_begin();
            int rc = draft_stack_run(s->st, &hp, err, el);
            kb_async_end();
            if (rc) return -1;
            lg = s->lg1;
        }
        if (trace && s->trace_base) trace_row(s, s->trace_base + (size_t)p->k * s->V, lg);
        if (s->R > 0) {
            kb_matmul(s->bias, s->w1row, &c->w2, 1);
            kb_add(lg, s->bias, 1, s->NV);
        }
        if (trace && s->trace_cor) trace_row(s, s->trace_cor + (size_t)p->k * s->V, lg);
        int t = c->dv.n ? draft_pick_mapped(p, lg, s->NV, c->dv.d2t, s->V, s->probs, p->k)
                        : draft_pick(p, lg, s->V, p->k);
        p->draft[p->k++] = t;
        prev = t;
    }
    return k;
}

static int ds_propose(drafter *d, spec_proposal *reqs, int n, char *err, size_t el) {
    ds_state *s = d->impl;
    const dspark_ckpt *c = &s->ck;
    const int G = s->G, H = s->H;
    if (n > s->max_seqs) return errf(err, el, "dspark: %d sequences exceed %d slots", n, s->max_seqs);
    int max_ctx = 1;
    for (int r = 0; r < n; r++) {
        spec_proposal *p = &reqs[r];
        p->k = 0; p->q_valid = 0; p->has_conf = 0; p->has_top_prob = 0;
        int slot = p->slot;
        if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0)
            return errf(err, el, "dspark: slot %d was not begun", slot);
        if (s->broken[slot])
            return errf(err, el, "dspark: slot %d: the target taps received do not line up with its tokens", slot);
        if (s->n_ctx[slot] + s->pend[slot].n != p->n_tokens - 1)
            return errf(err, el, "dspark: slot %d has %d context rows + %d pending for %d tokens", slot,
                        s->n_ctx[slot], s->pend[slot].n, p->n_tokens);
        int blocks = (p->max_k + G - 1) / G;
        int end = p->n_tokens - 1 + blocks * G;
        if (end > max_ctx) max_ctx = end;
    }
    if (draft_stack_reserve(s->st, max_ctx)) return errf(err, el, "dspark: out of memory for %d positions", max_ctx);
    if (feed_context(s, reqs, n, err, el)) return -1;

    /* Blocks: block b of every request that still wants drafts, as many
     * requests per pass as max_rows allows. */
    for (int b = 0; b * G < SPEC_MAX_DEPTH; b++) {
        int r0 = 0, any = 0;
        while (r0 < n) {
            int nr = 0, r1 = r0;
            kb_async_begin();   /* the block's embeddings and pass; the heads read its results after the end */
            for (; r1 < n && nr + G <= s->max_rows; r1++) {
                spec_proposal *p = &reqs[r1];
                if (p->k != b * G || !spec_wants_more(p)) continue;   /* a chained block only if the policy wants more */
                int slot = p->slot, a = p->n_tokens - 1, first = a + b * G;
                if (kv_append(s->kv, s->kv_seq[slot], G)) {
                    kb_async_end();
                    return errf(err, el, "dspark: slot %d cannot grow to %d positions (KV pool full or context limit)",
                                slot, first + G);
                }
                for (int i = 0; i < G; i++, nr++) {
                    int tok = i ? c->mask_token_id : (b ? p->draft[p->k - 1] : p->tokens[a]);
                    kb_weight_row(s->x + (size_t)nr * H, &c->embed, tok);
                    s->seq[nr] = s->kv_seq[slot];
                    s->pos[nr] = first + i;
                    s->nctx[nr] = first + G;   /* context, earlier blocks, the whole block */
                    s->req_of_row[nr] = r1;
                }
            }
            if (!nr) {
                kb_async_end();
            } else {
                any = 1;
                /* base logits only for the slots that become drafts; under a
                 * verify policy each slot's only once it is wanted (block_heads) */
                int nl = 0;
                for (int row = 0; row < nr; row += G) {
                    spec_proposal *p = &reqs[s->req_of_row[row]];
                    int nk = p->max_k - p->k < G ? p->max_k - p->k : G;
                    for (int i = 0; i < nk && !p->keep; i++) s->lrows[nl++] = row + i;
                }
                draft_pass dp = {.n = nr, .seq = s->seq, .pos = s->pos, .n_ctx = s->nctx, .l0 = 0,
                                 .l1 = c->cfg.n_layers, .x = s->x, .normed = s->hn, .n_logit = nl,
                                 .logit_rows = s->lrows, .logits = s->logits};
                int rc = draft_stack_run(s->st, &dp, err, el);
                kb_async_end();
                if (rc) return -1;
                nl = 0;
                for (int row = 0; row < nr; row += G) {
                    int r = s->req_of_row[row];
                    spec_proposal *p = &reqs[r];
                    int nk = p->max_k - p->k < G ? p->max_k - p->k : G;
                    int first = b ? p->draft[p->k - 1] : p->tokens[p->n_tokens - 1];
                    const float *U = p->keep ? NULL : s->logits + (size_t)nl * s->NV;
                    if (block_heads(s, p, first, row, U, nk, r == 0, err, el) < 0) return -1;
                    if (U) nl += nk;
                }
            }
            r0 = r1;
        }
        if (!any) break;
    }
    /* block rows are temporary */
    for (int r = 0; r < n; r++) kv_truncate(s->kv, s->kv_seq[reqs[r].slot], s->n_ctx[reqs[r].slot]);
    return 0;
}

static void ds_accept(drafter *d, const spec_accept *acc, int n) {
    ds_state *s = d->impl;
    for (int j = 0; j < n; j++) {
        const spec_accept *a = &acc[j];
        int slot = a->slot;
        if (slot < 0 || slot >= s->max_seqs || s->kv_seq[slot] < 0) continue;
        /* the committed tokens' producing rows sit at the next context positions */
        if (!a->hidden || s->n_ctx[slot] + s->pend[slot].n + a->n_committed != a->n_tokens - 1 ||
            rq_push(&s->pend[slot], a->hidden, a->n_committed))
            s->broken[slot] = 1;
    }
}

static void ds_free(drafter *d) {
    if (!d) return;
    ds_state *s = d->impl;
    if (s) {
        draft_stack_free(s->st);   /* first: its copies are slices of the checkpoint's layers */
        dspark_ckpt_free(&s->ck);
        if (s->pend)
            for (int i = 0; i < s->max_seqs; i++) rq_free(&s->pend[i]);
        free(s->pend); free(s->broken); free(s->kv_seq); free(s->n_ctx);
        kb_free(s->taps); kb_free(s->x); kb_free(s->hn); kb_free(s->logits);
        kb_free(s->w1row); kb_free(s->bias); kb_free(s->feat); kb_free(s->hn1); kb_free(s->lg1); free(s->probs);
        free(s->seq); free(s->pos); free(s->nctx); free(s->req_of_row); free(s->done);
        free(s->lrows); free(s->all_layers);
        free(s);
    }
    free(d);
}

static const drafter_ops DS_OPS = {"dspark", ds_begin, ds_propose, ds_accept, ds_release, ds_free};

int drafter_dspark_block_size(const drafter *d) {
    return d && d->ops == &DS_OPS ? ((const ds_state *)d->impl)->G : 0;
}

void drafter_dspark_set_trace(drafter *d, float *corrected, float *base) {
    if (!d || d->ops != &DS_OPS) return;
    ds_state *s = d->impl;
    s->trace_cor = corrected;
    s->trace_base = base;
}

int dspark_final_tap_parse(const char *v, dspark_final_tap *out) {
    if (v && !strcmp(v, "raw")) *out = DSPARK_FINAL_TAP_RAW;
    else if (v && !strcmp(v, "normed")) *out = DSPARK_FINAL_TAP_NORMED;
    else return -1;
    return 0;
}

/* A tap of the target's final layer is refused unless the option says
 * which state the checkpoint was trained on (drafter_dspark.h); the option
 * given for a checkpoint without one would be ignored, so it is an error. */
static int final_tap_check(const dspark_ckpt *c, const dspark_opts *o, int n_layers, char *err, size_t el) {
    int final = 0;
    for (int i = 0; i < c->n_taps; i++) final |= c->target_layer_ids[i] == n_layers - 1;
    if (final && o->final_tap == DSPARK_FINAL_TAP_REFUSE)
        return errf(err, el, "%s/config.json: target_layer_ids includes %d, the target's final decoder layer, which "
                    "DeepSpec's evaluator refuses (assert_no_final_target_layer: its target cache stores the raw "
                    "decoder-layer output there, while output_hidden_states holds the final-normed state), so the "
                    "checkpoint does not say which state it was trained on; pass --dspark-final-tap raw (the final "
                    "layer's output before the final norm) or --dspark-final-tap normed (after it), or retrain on "
                    "earlier layers", o->model_dir, n_layers - 1);
    if (!final && o->final_tap != DSPARK_FINAL_TAP_REFUSE)
        return errf(err, el, "--dspark-final-tap: %s/config.json's target_layer_ids do not include the target's "
                    "final decoder layer %d, so the option would be ignored", o->model_dir, n_layers - 1);
    return 0;
}

static void startup_message(const ds_state *s, const dspark_opts *o) {
    const int G = s->G;
    fprintf(stderr, "dspark: %s: block_size %d (checkpoint) | serving depth %s", o->model_dir, G,
            o->depth > 0 ? "" : "= --depth (set separately)");
    if (o->depth > 0) {
        fprintf(stderr, "%d (--depth) -> depth %d in force: ", o->depth, o->depth);
        if (o->depth < G) fprintf(stderr, "one block of %d, trimmed to %d drafts\n", G, o->depth);
        else if (o->depth == G) fprintf(stderr, "one full block\n");
        else fprintf(stderr, "%d chained blocks of %d, %d drafts\n", (o->depth + G - 1) / G, G, o->depth);
    } else {
        fprintf(stderr, "; the depth is in force, block_size only shapes each block\n");
    }
    fprintf(stderr, "dspark: taps of target layers");
    for (int i = 0; i < s->ck.n_taps; i++) fprintf(stderr, " %d", s->ck.target_layer_ids[i]);
    if (s->final_tap != DSPARK_FINAL_TAP_REFUSE)
        fprintf(stderr, " (the final layer's %s, --dspark-final-tap; DeepSpec's evaluator refuses such a checkpoint)",
                s->final_tap == DSPARK_FINAL_TAP_RAW ? "raw output, before the final norm" : "state after the final norm");
    fprintf(stderr, ", %d draft layers, markov rank %d, confidence head %s%s%s\n", s->ck.cfg.n_layers, s->R,
            s->ck.has_conf ? "yes" : "no",
            s->ck.own_embed ? "" : s->ck.shared_embed ? ", target's embedding (the checkpoint's copy is identical)"
                                                      : ", target's embedding",
            s->ck.own_lm_head ? "" : s->ck.shared_lm_head ? ", target's lm_head (the checkpoint's copy is identical)"
                                                          : ", target's lm_head");
    const draft_vocab *dv = &s->ck.dv;
    if (dv->n)
        fprintf(stderr, "dspark: draft vocabulary %d of %d (d2t from %s): lm_head %s%s; drafts are target ids, "
                "q is 0 outside the set, verification unchanged\n", dv->n, dv->vocab, dv->path,
                s->ck.reduced_head ? "stored reduced [N, H]"
                : s->ck.own_lm_head ? "rows gathered" : "rows gathered from the target's",
                s->R > 0 ? ", markov_w2 rows gathered" : "");
}

int drafter_dspark_create(drafter **out, const dspark_opts *o, const model *t, const tokenizer *tt, fwd_ctx *tp,
                          char *err, size_t errlen) {
    *out = NULL;
    if (!o || !o->model_dir) return errf(err, errlen, "dspark: --draft-model DIR (the DSpark checkpoint) is required");
    if (tt && drafter_check_tokenizer(o->model_dir, tt, 0, err, errlen)) return -1;
    drafter *d = calloc(1, sizeof *d);
    ds_state *s = calloc(1, sizeof *s);
    if (!d || !s) { free(d); free(s); return errf(err, errlen, "out of memory"); }
    d->ops = &DS_OPS;
    d->impl = s;
    if (dspark_ckpt_load(&s->ck, o->model_dir, t, err, errlen)) { free(s); d->impl = NULL; free(d); return -1; }
    const dspark_ckpt *c = &s->ck;
    if (final_tap_check(c, o, t->cfg.n_layers, err, errlen)) goto fail;
    d->vocab_size = c->cfg.vocab_size;
    d->n_taps = c->n_taps;
    /* layer L's tap is its output (HF's hidden_states[L + 1]); the final
     * layer's is the state the option names (final_tap_check) */
    for (int i = 0; i < c->n_taps; i++)
        d->tap_layers[i] = c->target_layer_ids[i] == t->cfg.n_layers - 1 && o->final_tap == DSPARK_FINAL_TAP_NORMED
                               ? FWD_TAP_FINAL_NORM : c->target_layer_ids[i];
    s->final_tap = o->final_tap;
    s->V = c->cfg.vocab_size;
    s->H = c->cfg.hidden_size;
    s->TH = c->n_taps * s->H;
    s->G = c->block_size;
    s->R = c->markov_rank;
    s->NV = c->dv.n ? c->dv.n : s->V;
    s->max_seqs = o->max_seqs > 0 ? o->max_seqs : 16;
    s->max_rows = 64 > 4 * s->G ? 64 : 4 * s->G;
    int ctx = t->cfg.max_position_embeddings;
    int max_len = o->max_seq_len > 0 ? o->max_seq_len : (ctx < 2048 ? ctx : 2048);
    if (max_len > ctx) max_len = ctx;
    /* room for the context plus the blocks of the deepest proposal */
    int extra = (SPEC_MAX_DEPTH + s->G - 1) / s->G * s->G + 1;
    int page = 16, pages = (max_len + extra + page) / page * s->max_seqs;
    kv_config kc = {.n_layers = c->cfg.n_layers, .n_kv_heads = c->cfg.n_kv_heads, .head_dim = c->cfg.head_dim,
                    .page_size = page, .n_pages = pages, .max_seqs = s->max_seqs, .max_seq_len = max_len + extra};
    s->all_layers = malloc(sizeof(int) * (size_t)c->cfg.n_layers);
    layer_weights **lw = malloc(sizeof *lw * (size_t)c->cfg.n_layers);
    if (!s->all_layers || !lw) { free(lw); errf(err, errlen, "dspark: out of memory"); goto fail; }
    for (int l = 0; l < c->cfg.n_layers; l++) {
        s->all_layers[l] = l;
        lw[l] = &s->ck.layers[l];
    }
    const kb_weight *head = &c->lm_head;
    const float *norm = c->norm;
    draft_stack_spec ss = {.what = o->model_dir, .cfg = &c->cfg, .layers = lw, .n_layers = c->cfg.n_layers,
                           .heads = &head, .norms = &norm, .n_out = 1, .kv = kc, .max_rows = s->max_rows};
    int src = draft_stack_create(&s->st, &ss, tp, err, errlen);
    free(lw);
    if (src) goto fail;
    s->kv = draft_stack_kv(s->st);
    d->stack = s->st;
    size_t R = (size_t)s->max_rows, H = (size_t)s->H, S = (size_t)s->max_seqs, V = (size_t)s->V;
    s->kv_seq = malloc(sizeof(int) * S);
    s->n_ctx = calloc(S, sizeof(int));
    s->pend = calloc(S, sizeof(row_queue));
    s->broken = calloc(S, sizeof(int));
    s->taps = kb_alloc(R * (size_t)s->TH * sizeof(float));
    s->x = kb_alloc(R * H * sizeof(float));
    s->hn = kb_alloc(R * H * sizeof(float));
    s->lrows = malloc(sizeof(int) * R);
    s->logits = kb_alloc(R * V * sizeof(float));
    s->w1row = kb_alloc((size_t)(s->R + 1) * sizeof(float));
    s->bias = kb_alloc(V * sizeof(float));
    s->feat = kb_alloc((H + (size_t)s->R) * sizeof(float));
    s->hn1 = kb_alloc(H * sizeof(float));
    s->lg1 = kb_alloc(V * sizeof(float));
    s->probs = malloc(sizeof(float) * (size_t)s->NV);
    s->seq = malloc(sizeof(int) * R);
    s->pos = malloc(sizeof(int) * R);
    s->nctx = malloc(sizeof(int) * R);
    s->req_of_row = malloc(sizeof(int) * R);
    s->done = calloc(S, sizeof(int));
    if (!s->kv_seq || !s->n_ctx || !s->pend || !s->broken || !s->taps || !s->x ||
        !s->hn || !s->lrows || !s->logits || !s->w1row || !s->bias || !s->feat || !s->hn1 || !s->lg1 || !s->seq ||
        !s->pos || !s->nctx || !s->req_of_row || !s->done || !s->probs) {
        errf(err, errlen, "dspark: out of memory");
        goto fail;
    }
    for (int i = 0; i < s->max_seqs; i++) {
        s->kv_seq[i] = -1;
        s->pend[i].width = s->TH;
    }
    if (!o->quiet) startup_message(s, o);
    if (!o->quiet && draft_stack_tp_size(s->st) > 1)
        fprintf(stderr, "dspark: tensor parallel over %d ranks: the draft layers are split like the target's and "
                "lm_head by rows (%d of %d here), logits gathered on rank 0; fc, the block and the Markov and "
                "confidence heads run on rank 0\n", draft_stack_tp_size(s->st), draft_stack_head_rows(s->st), s->NV);
    *out = d;
    return 0;
fail:
    ds_free(d);
    return -1;
}
