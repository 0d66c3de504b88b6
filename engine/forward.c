/* forward.c — the target model's forward pass over one ragged batch
 * (see forward.h). Qwen3 is the reference; Qwen2 (q/k/v bias) and Llama
 * (neither bias nor q/k norm) differ only by the config flags.
 * Owns: embedding, the layer loop with its taps, the final norm and
 * lm_head, and the scratch buffers (fwd_ctx), sized once for max_rows so
 * fwd_run allocates nothing in steady state. One decoder layer is layer.c's
 * (shared with the drafters whose blocks are decoder layers).
 * Must not: do arithmetic itself (every float op is a backend kernel, so
 * batch invariance is the kernels' property and is tested there), or leave
 * K/V rows appended when it fails.
 *
 * A batch is a flat list of rows: row r belongs to sequence seq[r] at
 * position pos[r]. Every matmul runs over all rows at once; attention runs
 * per row over that row's own sequence up to its own position, which makes a
 * span causal within itself and lets spans of any length sit side by side. */
#include "forward.h"
#include "comm.h"
#include "errmsg.h"
#include "layer.h"
#include "tp_link.h"
#include "vocab_par.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fwd_ctx {
    const model *m;
    int max_rows;
    layer_scratch *ls; /* the decoder layers' scratch (layer.c) */
    /* Activations, row-major; R = max_rows, H = hidden. */
    float *x;    /* [R, H]  residual stream */
    float *xb;   /* [R, H]  after the final norm */
    float *xl;   /* [R, H]  the rows that get logits, gathered */
    int *pos;    /* [R]     row's position in its sequence */
    int *seq;    /* [R]     row's kv sequence */
    int *tok;    /* [R]     row's token */
    /* Taps under a device backend: gathered on the device, [R, tap_cap, H],
     * and copied to the caller's (host) buffer once per forward; NULL on
     * cpu, where the rows go straight into fwd_out.taps. */
    float *tapbuf;
    int tap_cap;
    float **tap_dst;   /* [R] the rows' destinations (kb_scatter_rows) */
    /* Under a device backend: the forward's indices in a step buffer
     * (tokens, positions, n_ctx, KV slots, page lists, tap slots; layout in
     * dev_fill), the logits on the device, and the key a recording of the
     * forward is kept under (backend.h kb_graph_begin). */
    kb_stepbuf *sb;
    int sb_pages;        /* the longest page list sb was made for */
    float *ldev;         /* [R, vocab] */
    long long *key;
    size_t key_cap;
    /* tensor parallelism (tp.c); NULL/unused with one process */
    kb_comm *comm;
    tp_link *link;
    float *lpart;  /* [R, vocab_part]          this rank's logits columns */
    float *lall;   /* [tp_size, R, vocab_part] every rank's, all-gathered */
};

int fwd_create(fwd_ctx **out, const model *m, int max_rows, char *err, size_t errlen) {
    return fwd_create_tp(out, m, max_rows, NULL, err, errlen);
}

int fwd_create_tp(fwd_ctx **out, const model *m, int max_rows, kb_comm *comm, char *err, size_t errlen) {
    *out = NULL;
    const model_config *c = &m->shard;
    if (max_rows <= 0) return errf(err, errlen, "fwd_create: max_rows %d must be > 0", max_rows);
    int tp = comm ? kb_comm_size(comm) : 1;
    if (tp != m->tp_size || (comm && kb_comm_rank(comm) != m->tp_rank))
        return errf(err, errlen, "fwd_create: the model is shard %d of %d, the communicator rank %d of %d",
                    m->tp_rank, m->tp_size, comm ? kb_comm_rank(comm) : 0, tp);
    fwd_ctx *f = calloc(1, sizeof *f);
    if (!f) return errf(err, errlen, "fwd_create: out of memory");
    f->m = m;
    f->max_rows = max_rows;
    size_t R = (size_t)max_rows, H = (size_t)c->hidden_size;
    f->x = kb_alloc(R * H * sizeof(float));
    f->xb = kb_alloc(R * H * sizeof(float));
    f->xl = kb_alloc(R * H * sizeof(float));
    f->pos = calloc(R, sizeof(int));
    f->seq = calloc(R, sizeof(int));
    f->tok = calloc(R, sizeof(int));
    f->tap_dst = malloc(R * sizeof *f->tap_dst);
    if (!f->x || !f->xb || !f->xl || !f->pos || !f->seq || !f->tok || !f->tap_dst ||
        layer_scratch_create(&f->ls, c, max_rows, err, errlen)) {
        fwd_free(f);
        return errf(err, errlen, "fwd_create: out of memory for %d rows", max_rows);
    }
    if (tp > 1) {
        f->comm = comm;
        layer_scratch_set_comm(f->ls, comm);
        size_t part = R * (size_t)m->vocab_part;
        f->lpart = calloc(part, sizeof(float));
        f->lall = calloc(part * (size_t)tp, sizeof(float));
        if (!f->lpart || !f->lall || tp_link_create(&f->link, comm, m, max_rows, err, errlen)) {
            fwd_free(f);
            return errf(err, errlen, "fwd_create: out of memory for tensor-parallel buffers");
        }
    }
    *out = f;
    return 0;
}

int fwd_tp_size(const fwd_ctx *f) { return f->comm ? kb_comm_size(f->comm) : 1; }
int fwd_tp_rank(const fwd_ctx *f) { return f->comm ? kb_comm_rank(f->comm) : 0; }
kb_comm *fwd_tp_comm(const fwd_ctx *f) { return f->comm; }
tp_link *fwd_tp_link(const fwd_ctx *f) { return f->link; }

int fwd_tp_sync(fwd_ctx *f, kv_cache *kv, int *pages_free, char *err, size_t errlen) {
    if (!f->link) {
        if (pages_free) pages_free[0] = kv_pages_free(kv);
        return 0;
    }
    if (kb_comm_rank(f->comm) != 0) return errf(err, errlen, "fwd_tp_sync: only rank 0 leads");
    return tp_sync(f->link, kv, pages_free, err, errlen);
}

int fwd_tp_serve(fwd_ctx *f, kv_cache *kv, char *err, size_t errlen) {
    if (!f->link || kb_comm_rank(f->comm) == 0) return errf(err, errlen, "fwd_tp_serve: not a rank > 0");
    return tp_serve(f->link, fwd_run, f, kv, err, errlen);
}

int fwd_route_take(fwd_ctx *f, struct moe_route_count *out) { return layer_scratch_route_take(f->ls, out); }

void fwd_free(fwd_ctx *f) {
    if (!f) return;
    tp_link_free(f->link);   /* the leader's tells the other ranks to stop */
    free(f->lpart); free(f->lall);
    layer_scratch_free(f->ls);
    kb_free(f->x); kb_free(f->xb); kb_free(f->xl); kb_free(f->tapbuf); kb_free(f->ldev);
    kb_stepbuf_free(f->sb);
    free(f->key);
    free(f->pos); free(f->seq); free(f->tok); free(f->tap_dst);
    free(f);
}

kv_config fwd_kv_config(const model *m, int n_pages, int page_size, int max_seqs) {
    const model_config *c = &m->shard;
    long long pool = (long long)n_pages * page_size;
    int max_len = c->max_position_embeddings > 0 ? c->max_position_embeddings : (int)(pool < 1 ? 1 : pool);
    if (pool < max_len) max_len = (int)pool;
    kv_config k = {
        .n_layers = c->n_layers, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
        .page_size = page_size, .n_pages = n_pages, .max_seqs = max_seqs, .max_seq_len = max_len,
    };
    return k;
}

/* Everything about the batch that can be wrong is checked here, before the
 * cache is touched. Returns the total row count or -1. */
static int check_batch(const fwd_ctx *f, const kv_cache *kv, const fwd_batch *b, const fwd_out *o,
                       char *err, size_t errlen) {
    const model_config *c = &f->m->shard;
    const kv_config *kc = kv_get_config(kv);
    if (kc->n_layers != c->n_layers || kc->n_kv_heads != c->n_kv_heads || kc->head_dim != c->head_dim)
        return errf(err, errlen, "fwd_run: kv cache shape (%d layers, %d kv heads, head_dim %d) "
                    "does not match the model (%d, %d, %d)", kc->n_layers, kc->n_kv_heads,
                    kc->head_dim, c->n_layers, c->n_kv_heads, c->head_dim);
    if (b->n_spans < 0 || (b->n_spans > 0 && !b->spans))
        return errf(err, errlen, "fwd_run: bad span list (n_spans %d)", b->n_spans);
    long long total = 0;
    for (int s = 0; s < b->n_spans; s++) {
        const fwd_span *sp = &b->spans[s];
        if (sp->n < 0 || (sp->n > 0 && !sp->tokens))
            return errf(err, errlen, "fwd_run: span %d has %d rows and %s tokens", s, sp->n,
                        sp->tokens ? "some" : "no");
        if (kv_len(kv, sp->seq) < 0)
            return errf(err, errlen, "fwd_run: span %d names sequence %d, which is not live", s, sp->seq);
        for (int t = 0; t < s; t++)
            if (b->spans[t].seq == sp->seq)
                return errf(err, errlen, "fwd_run: spans %d and %d both extend sequence %d", t, s, sp->seq);
        for (int i = 0; i < sp->n; i++)
            if (sp->tokens[i] < 0 || sp->tokens[i] >= c->vocab_size)
                return errf(err, errlen, "fwd_run: span %d row %d: token %d outside vocab [0, %d)",
                            s, i, sp->tokens[i], c->vocab_size);
        total += sp->n;
    }
    if (total > f->max_rows)
        return errf(err, errlen, "fwd_run: batch has %lld rows, the context was made for %d",
                    total, f->max_rows);
    if (!o) return (int)total;
    if (o->n_logit_rows < 0 || (o->n_logit_rows > 0 && (!o->logit_rows || !o->logits)))
        return errf(err, errlen, "fwd_run: %d logit rows requested without row list or output",
                    o->n_logit_rows);
    for (int i = 0; i < o->n_logit_rows; i++) {
        int r = o->logit_rows[i];
        if (r < 0 || r >= total || (i > 0 && r <= o->logit_rows[i - 1]))
            return errf(err, errlen, "fwd_run: logit_rows[%d] = %d is out of range [0, %lld) "
                        "or not ascending", i, r, total);
    }
    if (o->n_taps < 0 || (o->n_taps > 0 && (!o->tap_layers || !o->taps)))
        return errf(err, errlen, "fwd_run: %d taps requested without layer list or output", o->n_taps);
    for (int t = 0; t < o->n_taps; t++)
        if ((o->tap_layers[t] < 0 && o->tap_layers[t] != FWD_TAP_FINAL_NORM) || o->tap_layers[t] >= c->n_layers)
            return errf(err, errlen, "fwd_run: tap_layers[%d] = %d, the model has layers 0..%d "
                        "(or FWD_TAP_FINAL_NORM = %d)", t, o->tap_layers[t], c->n_layers - 1, FWD_TAP_FINAL_NORM);
    return (int)total;
}

/* Copies rows x[n, H] into the taps asked for under id `tap`: into
 * o->taps, or under a device backend into f->tapbuf (the same layout),
 * which fwd_run copies out once at the end. tapslot (a step buffer's
 * i·n_taps, or NULL): row i's slot in units of H floats from tap t's
 * column, so the copy reads no host pointers. */
static void copy_taps(fwd_ctx *f, const fwd_out *o, int tap, const float *x, int n, int H, const int *tapslot) {
    if (!o) return;
    float *base = f->tapbuf ? f->tapbuf : o->taps;
    for (int t = 0; t < o->n_taps; t++)
        if (o->tap_layers[t] == tap) {
            if (tapslot) {
                kb_store_rows(base + (size_t)t * H, x, NULL, NULL, tapslot, n, H);
                continue;
            }
            for (int i = 0; i < n; i++) f->tap_dst[i] = base + ((size_t)i * o->n_taps + t) * H;
            kb_scatter_rows(f->tap_dst, x, n, H);
        }
}

/* ---- a forward with its indices on the device (backend.h "a step the host
 * does not rebuild") ----------------------------------------------------------
 * Under a device backend the host writes a forward's indices into the step
 * buffer, pushes it, and the forward's calls read only device memory:
 * issued once under a key and recorded, the same forward then replays as
 * one graph, the host issuing none of its ~300 calls. The key holds what
 * the calls' arguments depend on: the context, cache and buffers, the row
 * count, the rows whose logits and taps are wanted, and the attention
 * bound. Not with tensor parallelism (the collectives read host memory) or
 * fault injection (host writes, host-computed windows). */

enum { FWD_RECORD_MAX_ROWS = 256 };

/* Step-buffer layout, in ints (R = max_rows): */
enum { SB_TOK, SB_POS, SB_NCTX, SB_SLOT, SB_POFF, SB_TAPSLOT, SB_PAGES };

static int dev_ready(fwd_ctx *f, const kv_cache *kv, const fwd_out *o) {
    if (!strcmp(kb_device(), "cpu") || f->comm || (o && (o->corrupt_rows || o->attn_window > 0))) return 0;
    const kv_config *kc = kv_get_config(kv);
    if ((long long)kc->n_pages * kc->page_size > 0x7fffffffLL) return 0;   /* slots are ints */
    const int pages = kv_max_pages(kv);
    if (!f->sb || f->sb_pages < pages) {
        kb_stepbuf_free(f->sb);
        f->sb = kb_stepbuf_create(((size_t)SB_PAGES + (size_t)pages) * (size_t)f->max_rows * sizeof(int));
        f->sb_pages = f->sb ? pages : 0;
        if (!f->sb) return 0;   /* the ordinary calls still run */
    }
    if (!f->ldev && !(f->ldev = kb_alloc((size_t)f->max_rows * (size_t)f->m->cfg.vocab_size * sizeof(float))))
        return 0;
    return 1;
}

/* The contexts' bound rounded up to a power of two (256 at least: one of
 * CUDA attention's chunks), so that a growing context needs a recording per
 * doubling; attention's grid covers the bound, and a chunk past a row's
 * context exits at once. */
static int ctx_bound(int need) {
    int b = 256;
    while (b < need && b < (1 << 30)) b *= 2;
    return b;
}

/* Fills the step buffer for the batch's rows (f->tok, f->pos): tokens, positions, n_ctx, slots, the
 * spans' page lists and tap slots; returns the bytes to push. */
static size_t dev_fill(fwd_ctx *f, const kv_cache *kv, const fwd_batch *b, const fwd_out *o, layer_dev_idx *di) {
    const int R = f->max_rows, ps = kv_get_config(kv)->page_size;
    int *h = kb_stepbuf_host(f->sb);
    int n_cat = 0, r = 0;
    for (int s = 0; s < b->n_spans; s++) {
        const fwd_span *sp = &b->spans[s];
        if (sp->n <= 0) continue;
        const int end = f->pos[r] + sp->n, np = (end + ps - 1) / ps;
        memcpy(h + (size_t)SB_PAGES * R + n_cat, kv_pages(kv, sp->seq), (size_t)np * sizeof(int));
        for (int i = 0; i < sp->n; i++, r++) {
            h[SB_TOK * R + r] = f->tok[r];
            h[SB_POS * R + r] = f->pos[r];
            h[SB_NCTX * R + r] = f->pos[r] + 1;
            h[SB_SLOT * R + r] = kv_slot(kv, sp->seq, f->pos[r]);
            h[SB_POFF * R + r] = n_cat;
            h[SB_TAPSLOT * R + r] = o ? r * o->n_taps : 0;
        }
        n_cat += np;
    }
    const int *d = kb_stepbuf_dev(f->sb);
    di->slot = d + (size_t)SB_SLOT * R;
    di->page_cat = d + (size_t)SB_PAGES * R;
    di->page_off = d + (size_t)SB_POFF * R;
    di->n_cat = n_cat;
    return ((size_t)SB_PAGES * R + (size_t)n_cat) * sizeof(int);
}

/* The recording's key (see above); its length in bytes, 0 when out of memory. */
static size_t dev_key(fwd_ctx *f, const kv_cache *kv, const fwd_out *o, int n, int max_ctx) {
    const int nl = o ? o->n_logit_rows : 0, nt = o ? o->n_taps : 0;
    const size_t len = 9 + (size_t)nl + (size_t)nt;
    if (len > f->key_cap) {
        long long *k = realloc(f->key, len * sizeof *k);
        if (!k) return 0;
        f->key = k;
        f->key_cap = len;
    }
    long long *k = f->key;
    k[0] = (long long)(intptr_t)f;
    k[1] = (long long)(intptr_t)kv;
    k[2] = (long long)(intptr_t)kb_stepbuf_dev(f->sb);
    k[3] = (long long)(intptr_t)f->tapbuf;
    k[4] = n;
    k[5] = max_ctx;
    k[6] = nl;
    k[7] = nt;
    k[8] = o != NULL;
    for (int i = 0; i < nl; i++) k[9 + i] = o->logit_rows[i];
    for (int t = 0; t < nt; t++) k[9 + nl + t] = o->tap_layers[t];
    return len * sizeof *k;
}

/* The device tap buffer for n_taps taps (cuda only; grown, never shrunk). */
static int reserve_taps(fwd_ctx *f, int n_taps) {
    if (!strcmp(kb_device(), "cpu") || n_taps <= f->tap_cap) return 0;
    float *p = kb_alloc((size_t)f->max_rows * (size_t)n_taps * (size_t)f->m->cfg.hidden_size * sizeof(float));
    if (!p) return -1;
    kb_free(f->tapbuf);
    f->tapbuf = p;
    f->tap_cap = n_taps;
    return 0;
}

static void issue_forward(fwd_ctx *f, kv_cache *kv, const fwd_out *o, const layer_rows *rw, const int *tok,
                          const int *tapslot, float *logits);

int fwd_run(fwd_ctx *f, kv_cache *kv, const fwd_batch *b, const fwd_out *o,
            char *err, size_t errlen) {
    const model *m = f->m;
    const model_config *c = &m->cfg;
    const int H = c->hidden_size;

    int n = check_batch(f, kv, b, o, err, errlen);
    if (n < 0) return -1;

    /* Score buffers: grown (the only allocation here) if a context is longer
     * than max_position_embeddings or the thread count went up. */
    int need_ctx = 1;
    for (int s = 0; s < b->n_spans; s++) {
        int end = kv_len(kv, b->spans[s].seq) + b->spans[s].n;
        if (end > need_ctx) need_ctx = end;
    }
    if (layer_scratch_reserve(f->ls, need_ctx))
        return errf(err, errlen, "fwd_run: out of memory for attention scores (%d positions)", need_ctx);
    if (o && reserve_taps(f, o->n_taps))
        return errf(err, errlen, "fwd_run: out of device memory for %d taps of %d rows", o->n_taps, f->max_rows);

    /* Rows, positions, and K/V slots. On failure undo the appends already made
     * (a span's first row holds its sequence's old length). */
    int r = 0;
    for (int s = 0; s < b->n_spans; s++) {
        const fwd_span *sp = &b->spans[s];
        int start = kv_len(kv, sp->seq);
        if (kv_append(kv, sp->seq, sp->n)) {
            for (int t = 0, rr = 0; t < s; rr += b->spans[t].n, t++)
                if (b->spans[t].n > 0) kv_truncate(kv, b->spans[t].seq, f->pos[rr]);
            return errf(err, errlen, "fwd_run: sequence %d cannot grow from %d by %d rows "
                        "(KV pool has %d free pages; max_seq_len %d)", sp->seq, start, sp->n,
                        kv_pages_free(kv), kv_get_config(kv)->max_seq_len);
        }
        for (int i = 0; i < sp->n; i++, r++) {
            f->seq[r] = sp->seq;
            f->pos[r] = start + i;
            f->tok[r] = sp->tokens[i];
        }
    }
    /* The other ranks run this batch too (tp.c); the appends above are
     * undone if they cannot be told. */
    if (f->link && kb_comm_rank(f->comm) == 0 && tp_announce(f->link, kv, b, o, err, errlen)) {
        for (int t = 0, rr = 0; t < b->n_spans; rr += b->spans[t].n, t++)
            if (b->spans[t].n > 0) kv_truncate(kv, b->spans[t].seq, f->pos[rr]);
        return -1;
    }
    if (n == 0) return 0;

    /* From here to the end nothing on the host reads or writes the
     * activations (kb_wait where it must), so under a device backend the
     * forward's kernels are queued one behind the other (backend.h); the
     * logits, in the caller's memory, are the one wait inside, and every
     * output is in place when fwd_run returns. With the indices on the
     * device (dev) the outputs come out after the region instead. */
    const int dev = dev_ready(f, kv, o);
    layer_dev_idx di;
    /* Causal: each row attends to its sequence up to its own position, which
     * includes the earlier rows of its own span. */
    layer_rows rows = {.n = n, .seq = f->seq, .pos = f->pos, .n_ctx = NULL, .window = o ? o->attn_window : 0};
    const int *tok = f->tok, *tapslot = NULL;
    float *logits = o ? o->logits : NULL;
    size_t push = 0, key_bytes = 0;
    if (dev) {
        push = dev_fill(f, kv, b, o, &di);
        /* a bound that holds across steps where the forward is recorded; a prefill chunk's own */
        di.max_ctx = n <= FWD_RECORD_MAX_ROWS ? ctx_bound(need_ctx) : need_ctx;
        const int *d = kb_stepbuf_dev(f->sb);
        const int R = f->max_rows;
        tok = d + (size_t)SB_TOK * R;
        rows.pos = d + (size_t)SB_POS * R;
        rows.n_ctx = d + (size_t)SB_NCTX * R;
        rows.dev = &di;
        tapslot = d + (size_t)SB_TAPSLOT * R;
        logits = f->ldev;
        /* decode and verify shapes are recorded; a prefill chunk of a new length would only
         * instantiate a graph it never replays (vLLM captures up to 512 tokens, SGLang ~160 sequences) */
        key_bytes = n <= FWD_RECORD_MAX_ROWS ? dev_key(f, kv, o, n, di.max_ctx) : 0;
    }
    kb_async_begin();
    if (dev) kb_stepbuf_push(f->sb, push);
    if (!(dev && key_bytes && kb_graph_begin(f->key, key_bytes))) {
        issue_forward(f, kv, o, &rows, tok, tapslot, logits);
    }
    if (dev) kb_graph_end();
    kb_async_end();
    if (dev && o) {
        if (o->final_hidden) kb_copy_to_host(o->final_hidden, f->xb, (size_t)n * H * sizeof(float));
        if (o->n_taps > 0) kb_copy_to_host(o->taps, f->tapbuf, (size_t)n * o->n_taps * H * sizeof(float));
        if (o->n_logit_rows > 0)
            kb_copy_to_host(o->logits, f->ldev, (size_t)o->n_logit_rows * (size_t)c->vocab_size * sizeof(float));
    }
    return 0;
}

/* The forward's calls (fwd_run), in one async region: with rows->dev every
 * index they read is in the step buffer and every output on the device
 * (fwd_run copies them out), else they read the host's arrays and write
 * the caller's buffers. */
static void issue_forward(fwd_ctx *f, kv_cache *kv, const fwd_out *o, const layer_rows *rw, const int *tok,
                          const int *tapslot, float *logits) {
    const model *m = f->m;
    const model_config *c = &m->cfg;
    const int H = c->hidden_size, n = rw->n, dev = rw->dev != NULL;
    const layer_rows rows = *rw;
    kb_weight_rows(f->x, &m->embed, tok, n);
    for (int l = 0; l < c->n_layers; l++) {
        layer_forward(f->ls, &m->layers[l], kv, l, &rows, f->x);
        copy_taps(f, o, l, f->x, n, H, tapslot);
        /* Fault injection (serve --inject-fault): a transient buffer
         * overwriting part of a row's residual stream after layer 0, as the
         * SGLang/SM120 allocator hazard did. Later layers, the KV written by
         * them and the logits all see the damage. */
        if (l == 0 && o && o->corrupt_rows) {
            kb_wait();   /* the host writes the residual stream */
            for (int i = 0; i < n; i++)
                if (o->corrupt_rows[i])
                    for (int j = 0; j < H; j += 2) f->x[(size_t)i * H + j] = (float)((j * 7919) % 13) - 6.0f;
        }
    }

    kb_rmsnorm(f->xb, f->x, m->final_norm, n, H, c->rms_norm_eps);
    if (!dev && o && o->final_hidden) kb_copy_to_host(o->final_hidden, f->xb, (size_t)n * H * sizeof(float));
    copy_taps(f, o, FWD_TAP_FINAL_NORM, f->xb, n, H, tapslot);
    if (!dev && o && f->tapbuf && o->n_taps > 0)
        kb_copy_to_host(o->taps, f->tapbuf, (size_t)n * o->n_taps * H * sizeof(float));
    if (o)
        vp_head_rows(f->comm, f->comm ? &m->lm_head_part : &m->lm_head, c->vocab_size, m->vocab_part, f->xb,
                     o->logit_rows, o->n_logit_rows, H, f->xl, f->lpart, f->lall, logits);
}
