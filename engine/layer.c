/* layer.c — one decoder layer over a set of rows (see layer.h).
 * Owns: the order of a layer's steps and its scratch buffers.
 * Must not: do arithmetic itself (every float op is a backend kernel, so
 * batch invariance is the kernels' property), or allocate in the layer
 * calls (layer_scratch_reserve does that up front). */
#include "layer.h"
#include "comm.h"
#include "errmsg.h"
#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct layer_scratch {
    model_config cfg;
    int max_rows;
    /* R = max_rows, H = hidden, Q = n_heads·head_dim, KV = n_kv_heads·head_dim, I = intermediate */
    float *xb;   /* [R, H]  normed input of the current sub-layer */
    float *q;    /* [R, Q] */
    float *k;    /* [R, KV] */
    float *v;    /* [R, KV] */
    float *att;  /* [R, Q]  attention output, heads concatenated */
    float *xo;   /* [R, H]  sub-layer output before the residual add */
    float *hg;   /* [R, I]  gate, then silu(gate)·up */
    float *hu;   /* [R, I]  up */
    int *nctx;   /* [R]     causal n_ctx when the caller gives none */
    float **kv_dst;   /* [2R]  the rows' K slots, then their V slots (kb_scatter_rows) */
    kb_kv_view *views;   /* [R] one per span of the rows (kb_attention_spans) */
    int *span_rows;      /* [R] */
    /* Attention scores: kb_attention_span's scratch for scores_cap positions
     * at scores_threads kernel threads. */
    float *scores;
    size_t scores_floats;
    int scores_cap, scores_threads;
    kb_comm *comm;   /* tensor parallelism, NULL = one process */
    moe_scratch *moe;   /* the sparse MLP's, when the config has experts; else NULL */
    /* RoPE's cos/sin of the last rows rotated (kb_rope_table), reused while
     * the positions repeat: a forward's layers all rotate the same rows, so
     * the table is computed once per forward instead of twice per layer
     * (the double-precision cos/sin was ~10% of a 1-row step). NULL under a
     * device backend, which keeps kb_rope. */
    float *rope_cs, *rope_sn;   /* [R, head_dim/2] */
    int *rope_pos, rope_n;      /* positions the table holds; rope_n -1 = none */
};

static int alloc_scores(layer_scratch *s, int cap, int threads) {
    size_t floats = kb_attention_span_scratch(s->cfg.n_heads, s->cfg.n_kv_heads, cap);
    float *p = kb_alloc(floats * sizeof(float));
    if (!p) return -1;
    kb_free(s->scores);
    s->scores = p;
    s->scores_floats = floats;
    s->scores_cap = cap;
    s->scores_threads = threads;
    return 0;
}

int layer_scratch_create(layer_scratch **out, const model_config *c, int max_rows, char *err, size_t errlen) {
    *out = NULL;
    if (max_rows <= 0) return errf(err, errlen, "layer scratch: max_rows %d must be > 0", max_rows);
    layer_scratch *s = calloc(1, sizeof *s);
    if (!s) return errf(err, errlen, "layer scratch: out of memory");
    s->cfg = *c;
    s->max_rows = max_rows;
    size_t R = (size_t)max_rows, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t Q = (size_t)c->n_heads * c->head_dim, KV = (size_t)c->n_kv_heads * c->head_dim;
    s->xb = kb_alloc(R * H * sizeof(float));
    s->q = kb_alloc(R * Q * sizeof(float));
    s->k = kb_alloc(R * KV * sizeof(float));
    s->v = kb_alloc(R * KV * sizeof(float));
    s->att = kb_alloc(R * Q * sizeof(float));
    s->xo = kb_alloc(R * H * sizeof(float));
    s->hg = kb_alloc(R * I * sizeof(float));
    s->hu = kb_alloc(R * I * sizeof(float));
    s->nctx = calloc(R, sizeof(int));
    s->kv_dst = malloc(2 * R * sizeof *s->kv_dst);
    s->views = malloc(R * sizeof *s->views);
    s->span_rows = malloc(R * sizeof *s->span_rows);
    s->rope_n = -1;
    if (!strcmp(kb_device(), "cpu")) {
        size_t half = (size_t)(c->head_dim / 2 > 0 ? c->head_dim / 2 : 1);
        s->rope_cs = malloc(R * half * sizeof(float));
        s->rope_sn = malloc(R * half * sizeof(float));
        s->rope_pos = malloc(R * sizeof(int));
        if (!s->rope_cs || !s->rope_sn || !s->rope_pos) {
            layer_scratch_free(s);
            return errf(err, errlen, "layer scratch: out of memory for %d rows", max_rows);
        }
    }
    if (config_has_experts(c) && moe_scratch_create(&s->moe, c, max_rows, err, errlen)) {
        layer_scratch_free(s);
        return -1;
    }
    int cap = c->max_position_embeddings > 0 ? c->max_position_embeddings : 4096;
    if (!s->xb || !s->q || !s->k || !s->v || !s->att || !s->xo || !s->hg || !s->hu || !s->nctx || !s->kv_dst || !s->views || !s->span_rows ||
        alloc_scores(s, cap, kb_threads())) {
        layer_scratch_free(s);
        return errf(err, errlen, "layer scratch: out of memory for %d rows", max_rows);
    }
    *out = s;
    return 0;
}

void layer_scratch_free(layer_scratch *s) {
    if (!s) return;
    kb_free(s->xb); kb_free(s->q); kb_free(s->k); kb_free(s->v);
    kb_free(s->att); kb_free(s->xo); kb_free(s->hg); kb_free(s->hu);
    kb_free(s->scores);
    moe_scratch_free(s->moe);
    free(s->nctx);
    free(s->kv_dst);
    free(s->views);
    free(s->span_rows);
    free(s->rope_cs); free(s->rope_sn); free(s->rope_pos);
    free(s);
}

int layer_scratch_reserve(layer_scratch *s, int max_ctx) {
    int threads = kb_threads();
    if (max_ctx <= s->scores_cap && threads <= s->scores_threads) return 0;
    return alloc_scores(s, max_ctx > s->scores_cap ? max_ctx : s->scores_cap,
                        threads > s->scores_threads ? threads : s->scores_threads);
}

int layer_scratch_max_rows(const layer_scratch *s) { return s->max_rows; }

int layer_scratch_route_take(layer_scratch *s, moe_route_count *out) {
    if (!s->moe) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    moe_route_take(s->moe, out);
    return 0;
}

void layer_scratch_set_comm(layer_scratch *s, kb_comm *comm) {
    s->comm = comm && kb_comm_size(comm) > 1 ? comm : NULL;
}

/* The row-parallel matmuls' partial sums, added over the ranks. */
static void tp_sum(layer_scratch *s, float *y, size_t n) {
    char err[256];
    if (!s->comm) return;
    kb_wait();   /* the collective reads y on the host (backend.h: inside an async region) */
    if (kb_comm_allreduce_sum(s->comm, y, n, err, sizeof err)) kb_comm_abort(s->comm, 1, err);
}

static void add_bias(float *y, const float *bias, int m, int n) {
    if (!bias) return;
    for (int r = 0; r < m; r++) kb_add(y + (size_t)r * n, bias, 1, n);
}

/* RoPE of the rows r in x ([r->n, n_heads, head_dim]). */
static void rope(layer_scratch *s, float *x, const layer_rows *r, int n_heads) {
    const model_config *c = &s->cfg;
    const int n = r->n;
    if (!s->rope_cs) { kb_rope(x, r->pos, n, n_heads, c->head_dim, c->rope_theta); return; }
    if (n != s->rope_n || memcmp(r->pos, s->rope_pos, sizeof(int) * (size_t)n)) {
        kb_rope_table(s->rope_cs, s->rope_sn, r->pos, n, c->head_dim, c->rope_theta);
        memcpy(s->rope_pos, r->pos, sizeof(int) * (size_t)n);
        s->rope_n = n;
    }
    kb_rope_apply(x, s->rope_cs, s->rope_sn, n, n_heads, c->head_dim);
}

/* s->k, s->v (the projections of the rows) biased, normalised, rotated and
 * stored in the cache. */
static void store_kv(layer_scratch *s, const layer_weights *w, kv_cache *kv, int l, const layer_rows *r) {
    const model_config *c = &s->cfg;
    const int n = r->n, KV = c->n_kv_heads * c->head_dim;
    add_bias(s->k, w->bk, n, KV);
    add_bias(s->v, w->bv, n, KV);
    if (w->k_norm) kb_rmsnorm(s->k, s->k, w->k_norm, n * c->n_kv_heads, c->head_dim, c->rms_norm_eps);
    rope(s, s->k, r, c->n_kv_heads);
    if (r->dev) {   /* the slots are on the device: one store for K and V */
        kb_store_rows(kv_pool_k(kv, l), s->k, kv_pool_v(kv, l), s->v, r->dev->slot, n, KV);
        return;
    }
    for (int i = 0; i < n; i++) {
        s->kv_dst[i] = kv_k_at(kv, l, r->seq[i], r->pos[i]);
        s->kv_dst[n + i] = kv_v_at(kv, l, r->seq[i], r->pos[i]);
    }
    kb_scatter_rows(s->kv_dst, s->k, n, KV);
    kb_scatter_rows(s->kv_dst + n, s->v, n, KV);
}

void layer_write_kv(layer_scratch *s, const layer_weights *w, kv_cache *kv, int kv_layer,
                    const layer_rows *r, const float *x) {
    if (r->n <= 0) return;
    float *ys[] = {s->k, s->v};
    const kb_weight *ws[] = {&w->wk, &w->wv};
    kb_matmul_n(2, ys, ws, x, r->n);
    store_kv(s, w, kv, kv_layer, r);
}

void layer_forward(layer_scratch *s, const layer_weights *w, kv_cache *kv, int l, const layer_rows *r, float *x) {
    const model_config *c = &s->cfg;
    const int n = r->n, H = c->hidden_size, I = c->intermediate_size, hd = c->head_dim;
    const int nh = c->n_heads, Q = nh * hd;
    const float scale = (float)(1.0 / sqrt((double)hd));
    if (n <= 0) return;
    const int *nctx = r->n_ctx;
    if (!nctx && !r->dev) {
        for (int i = 0; i < n; i++) s->nctx[i] = r->pos[i] + 1;
        nctx = s->nctx;
    }

    /* attention: x += o_proj(attn(rope(norm(q)), rope(norm(k)), v)) */
    kb_rmsnorm(s->xb, x, w->attn_norm, n, H, c->rms_norm_eps);
    {
        float *ys[] = {s->q, s->k, s->v};
        const kb_weight *ws[] = {&w->wq, &w->wk, &w->wv};
        kb_matmul_n(3, ys, ws, s->xb, n);
    }
    add_bias(s->q, w->bq, n, Q);
    if (w->q_norm) kb_rmsnorm(s->q, s->q, w->q_norm, n * nh, hd, c->rms_norm_eps);
    rope(s, s->q, r, nh);
    store_kv(s, w, kv, l, r);
    /* Every row's K/V is in the cache before any row attends. Consecutive
     * rows of one sequence form a span: the kernel loads each K/V slot once
     * for all of them (and parallelises over kv heads × row chunks); each
     * row's result is bit-identical to attending alone. All spans go in one
     * call (one launch under a device backend). */
    if (r->dev) {
        const kb_kv_view pool = kv_view(kv, l, 0);   /* the pools and geometry; its page list is not read */
        kb_attention_idx(s->att, s->q, &pool, r->dev->page_cat, r->dev->n_cat, r->dev->page_off, nctx, n,
                         r->dev->max_ctx, nh, scale, s->scores, s->scores_floats);
    } else if (r->window > 0) {   /* fault injection: each row alone, over a view that starts later */
        for (int i = 0; i < n; i++) {
            kb_kv_view view = kv_view(kv, l, r->seq[i]);
            int start = nctx[i] - r->window;
            start = start > 0 ? start - start % view.page_size : 0;
            view.pages += start / view.page_size;
            int nc = nctx[i] - start;
            kb_attention_span(s->att + (size_t)i * Q, s->q + (size_t)i * Q, &view, 1, &nc, nh, scale, s->scores,
                              s->scores_floats);
        }
    } else {
        int n_spans = 0;
        for (int i0 = 0, i1; i0 < n; i0 = i1) {
            for (i1 = i0 + 1; i1 < n && r->seq[i1] == r->seq[i0]; i1++) {}
            s->views[n_spans] = kv_view(kv, l, r->seq[i0]);
            s->span_rows[n_spans++] = i1 - i0;
        }
        kb_attention_spans(s->att, s->q, s->views, s->span_rows, n_spans, nctx, nh, scale, s->scores,
                           s->scores_floats);
    }
    kb_matmul(s->xo, s->att, &w->wo, n);
    tp_sum(s, s->xo, (size_t)n * H);
    kb_add(x, s->xo, n, H);

    /* MLP: x += down(silu(gate(norm(x))) · up(norm(x))), or on a sparse
     * layer the routed experts' weighted sum of the same (moe.h) */
    kb_rmsnorm(s->xb, x, w->mlp_norm, n, H, c->rms_norm_eps);
    if (w->moe) {
        moe_forward(s->moe, w->moe, s->xb, n, s->xo);
        tp_sum(s, s->xo, (size_t)n * H);   /* tensor parallelism: each rank computed its slice of every expert */
        kb_add(x, s->xo, n, H);
        return;
    }
    {
        float *ys[] = {s->hg, s->hu};
        const kb_weight *ws[] = {&w->w_gate, &w->w_up};
        kb_matmul_n(2, ys, ws, s->xb, n);
    }
    kb_swiglu(s->hg, s->hg, s->hu, n, I);
    kb_matmul(s->xo, s->hg, &w->w_down, n);
    tp_sum(s, s->xo, (size_t)n * H);
    kb_add(x, s->xo, n, H);
}
