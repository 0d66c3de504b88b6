/* tp.c — tensor parallelism's step protocol (see tp_link.h, forward.h).
 * Rank 0 leads: before computing a batch it broadcasts one fixed header and
 * one int32 payload; ranks > 0 wait in tp_serve, bring their KV cache to
 * the leader's state and run the same batch through fwd_run (handed in by
 * forward.c: this file calls nothing above it), whose
 * collectives (layer.c's all-reduce, forward.c's logits all-gather) then
 * pair up rank by rank. No rank ever decides anything: the leader's
 * scheduler, drafters and verifier are the only ones.
 *
 * KV mirroring: the payload carries every sequence slot's length before the
 * batch (−1 = not live). A rank frees the slots the leader freed, claims the
 * ones it opened and truncates to the leader's length, so rejected draft
 * rows disappear on every rank in the step that follows, and pages freed on
 * the leader are free everywhere at the next announce or tp_sync.
 *
 * Drafters (draft_stack.h): TP_DRAFT_OPEN carries rank 0's description of
 * a drafter it created, which the other ranks' draft_host turns into the
 * same drafter (ids count the opens, so every rank numbers them alike);
 * TP_DRAFT_CLOSE frees it. TP_DRAFT is one pass of a drafter's layers:
 * the header, an int32 payload (every slot's length in the drafter's KV
 * cache after the pass's appends, then each row's sequence, position and
 * keys attended, the logit rows and the K/V-only layers) and the float
 * inputs (the K/V-only rows, the block rows x). A rank mirrors the
 * drafter's KV cache like the target's, and also appends: the rows of the
 * pass are the only ones the leader added since the last pass, and they
 * are written in it.
 * Owns: the message buffers and, on ranks > 0, the discarded logits rows
 * and the drafters opened on the leader's word.
 * Must not: compute, or let a rank continue after it diverged (it aborts
 * the job with a message instead). */
#include "tp_link.h"
#include "errmsg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TP_FWD = 1, TP_SYNC = 2, TP_STOP = 3, TP_DRAFT_OPEN = 4, TP_DRAFT = 5, TP_DRAFT_CLOSE = 6 };

typedef struct {
    int32_t op, n_spans, n_rows, n_logit, window, corrupt, n_slots;
    int32_t id, n_kv, kv_shared, l0, l1, out, has_ctx, bytes;   /* drafter ops */
} tp_head;

struct tp_link {
    kb_comm *c;
    int max_rows, vocab;
    int max_seqs;            /* the KV cache's sequence slots (fit_slots), 0 before the first step */
    int32_t *msg;            /* payload, [cap] */
    size_t cap;
    int *pages;              /* [size] free pages per rank (tp_sync) */
    /* ranks > 0 */
    fwd_span *spans;         /* [max_seqs], ranks > 0 */
    int *ints;               /* [max_rows · 2] tokens, logit rows */
    unsigned char *corrupt;  /* [max_rows] */
    float *logits;           /* [max_rows · vocab] */
    /* drafters */
    int32_t *dints;          /* a draft pass's int32 payload, [dcap] */
    size_t dcap;
    int next_id;             /* leader: ids handed out; ranks > 0: drafters opened */
    draft_host host;         /* ranks > 0 */
    tp_draft_ops ops;        /* ranks > 0: draft_stack.c's, with the host */
    int has_host;
    struct { struct draft_stack *s; void *owner; } *drafts;   /* ranks > 0: [next_id], NULL entries closed */
};

static size_t payload_ints(const tp_head *h) {
    return (size_t)h->n_slots + 2u * (size_t)h->n_spans + (size_t)h->n_rows + (size_t)h->n_logit +
           (h->corrupt ? (size_t)h->n_rows : 0);
}

/* The message buffers for a KV cache of `slots` sequence slots (the forward
 * context is made before it knows its cache; every step names the cache). */
static int fit_slots(tp_link *t, int slots, char *err, size_t errlen) {
    if (slots == t->max_seqs) return 0;
    size_t cap = (size_t)slots * 3 + (size_t)t->max_rows * 3;
    int32_t *msg = realloc(t->msg, cap * sizeof *msg);
    if (msg) t->msg = msg;
    fwd_span *sp = kb_comm_rank(t->c) > 0 && msg ? realloc(t->spans, (size_t)slots * sizeof *sp) : t->spans;
    if (sp) t->spans = sp;
    if (!msg || (kb_comm_rank(t->c) > 0 && !sp)) return errf(err, errlen, "tensor parallel: out of memory");
    t->cap = cap;
    t->max_seqs = slots;
    return 0;
}

int tp_link_create(tp_link **out, kb_comm *c, const model *m, int max_rows, char *err, size_t errlen) {
    *out = NULL;
    tp_link *t = calloc(1, sizeof *t);
    if (!t) return errf(err, errlen, "tensor parallel: out of memory");
    t->c = c;
    t->max_rows = max_rows;
    t->vocab = m->cfg.vocab_size;
    t->pages = calloc((size_t)kb_comm_size(c), sizeof *t->pages);
    int ok = t->pages != NULL;
    if (ok && kb_comm_rank(c) > 0) {
        t->ints = malloc((size_t)max_rows * 2 * sizeof *t->ints);
        t->corrupt = malloc((size_t)max_rows);
        t->logits = malloc((size_t)max_rows * t->vocab * sizeof *t->logits);
        ok = t->ints && t->corrupt && t->logits;
    }
    if (!ok) {
        tp_link_free(t);
        return errf(err, errlen, "tensor parallel: out of memory for %d rows", max_rows);
    }
    *out = t;
    return 0;
}

static int send_head(tp_link *t, tp_head *h, char *err, size_t errlen) {
    return kb_comm_bcast(t->c, h, sizeof *h, 0, err, errlen);
}

void tp_link_free(tp_link *t) {
    if (!t) return;
    if (kb_comm_rank(t->c) == 0) {
        tp_head h = {.op = TP_STOP};
        char err[256];
        if (send_head(t, &h, err, sizeof err)) fprintf(stderr, "specbed: tensor parallel stop: %s\n", err);
    }
    for (int i = 0; i < t->next_id && t->drafts; i++)
        if (t->drafts[i].s) t->host.close(t->host.ctx, t->drafts[i].owner);
    free(t->msg); free(t->pages);
    free(t->spans); free(t->ints); free(t->corrupt); free(t->logits);
    free(t->dints); free(t->drafts);
    free(t);
}

static int put_lens(tp_link *t, const kv_cache *kv, tp_head *h, char *err, size_t errlen) {
    if (fit_slots(t, kv_get_config(kv)->max_seqs, err, errlen)) return -1;
    h->n_slots = t->max_seqs;
    for (int s = 0; s < t->max_seqs; s++) t->msg[s] = kv_len(kv, s);
    return 0;
}

int tp_announce(tp_link *t, const kv_cache *kv, const fwd_batch *b, const fwd_out *o, char *err, size_t errlen) {
    tp_head h = {.op = TP_FWD, .n_spans = b->n_spans};
    if (put_lens(t, kv, &h, err, errlen)) return -1;
    int32_t *p = t->msg + h.n_slots;
    for (int s = 0; s < b->n_spans; s++) {
        t->msg[b->spans[s].seq] -= b->spans[s].n;   /* fwd_run appended them already */
        p[s] = b->spans[s].seq;
        p[b->n_spans + s] = b->spans[s].n;
        h.n_rows += b->spans[s].n;
    }
    p += 2 * b->n_spans;
    for (int s = 0; s < b->n_spans; s++)
        for (int i = 0; i < b->spans[s].n; i++) *p++ = b->spans[s].tokens[i];
    if (o) {
        h.n_logit = o->n_logit_rows;
        h.window = o->attn_window;
        for (int i = 0; i < o->n_logit_rows; i++) *p++ = o->logit_rows[i];
        if (o->corrupt_rows) {
            h.corrupt = 1;
            for (int i = 0; i < h.n_rows; i++) *p++ = o->corrupt_rows[i];
        }
    }
    if (payload_ints(&h) > t->cap) return errf(err, errlen, "tensor parallel: batch message too large");
    if (send_head(t, &h, err, errlen)) return -1;
    return kb_comm_bcast(t->c, t->msg, payload_ints(&h) * sizeof *t->msg, 0, err, errlen);
}

int tp_sync(tp_link *t, kv_cache *kv, int *pages_free, char *err, size_t errlen) {
    tp_head h = {.op = TP_SYNC};
    if (put_lens(t, kv, &h, err, errlen)) return -1;
    int mine = kv_pages_free(kv);
    if (send_head(t, &h, err, errlen) ||
        kb_comm_bcast(t->c, t->msg, payload_ints(&h) * sizeof *t->msg, 0, err, errlen) ||
        kb_comm_allgather(t->c, &mine, t->pages, sizeof mine, err, errlen))
        return -1;
    if (pages_free) memcpy(pages_free, t->pages, (size_t)kb_comm_size(t->c) * sizeof *pages_free);
    return 0;
}

/* The leader's sequence lengths want[n_slots], applied to kv here: frees
 * and truncations first (their pages may be what a later slot grows into),
 * then claims. A slot shorter than the leader's is a divergence, except
 * for a draft pass (rows != NULL), where the slot grows to the leader's
 * length when it already holds every position below the pass's first row
 * of that sequence (the rows above are the ones the pass writes). */
static int mirror_lens(kv_cache *kv, const int32_t *want, int n_slots, const draft_pass *rows, char *err,
                       size_t errlen) {
    for (int s = 0; s < n_slots; s++) {
        int have = kv_len(kv, s);
        if (want[s] < 0 && have >= 0) kv_seq_free(kv, s);
        else if (have > want[s]) kv_truncate(kv, s, want[s]);
    }
    for (int s = 0; s < n_slots; s++) {
        if (want[s] < 0) continue;
        if (kv_len(kv, s) < 0 && kv_seq_claim(kv, s)) return errf(err, errlen, "sequence slot %d cannot be claimed", s);
        int have = kv_len(kv, s), first = want[s];
        for (int i = 0; rows && i < rows->n; i++)
            if (rows->seq[i] == s && rows->pos[i] < first) first = rows->pos[i];
        if (have < first)
            return errf(err, errlen, "sequence %d has %d rows here, the leader's has %d: the ranks diverged", s, have,
                        want[s]);
        if (have < want[s] && kv_append(kv, s, want[s] - have))
            return errf(err, errlen, "draft sequence %d cannot grow from %d to %d rows here", s, have, want[s]);
    }
    return 0;
}

/* The leader's sequence lengths, applied here. */
static int mirror(tp_link *t, kv_cache *kv, char *err, size_t errlen) {
    return mirror_lens(kv, t->msg, t->max_seqs, NULL, err, errlen);
}

void tp_set_draft_host(tp_link *t, const draft_host *h, const tp_draft_ops *ops) {
    t->host = *h;
    t->ops = *ops;
    t->has_host = 1;
}

static int fit_dints(tp_link *t, size_t n, char *err, size_t errlen) {
    if (n <= t->dcap) return 0;
    int32_t *p = realloc(t->dints, n * sizeof *p);
    if (!p) return errf(err, errlen, "tensor parallel: out of memory for a draft pass");
    t->dints = p;
    t->dcap = n;
    return 0;
}

int tp_draft_open(tp_link *t, const void *desc, size_t n, int *id, char *err, size_t errlen) {
    tp_head h = {.op = TP_DRAFT_OPEN, .id = t->next_id, .bytes = (int32_t)n};
    if (send_head(t, &h, err, errlen) || kb_comm_bcast(t->c, (void *)desc, n, 0, err, errlen)) return -1;
    *id = t->next_id++;
    return 0;
}

void tp_draft_close(tp_link *t, int id) {
    tp_head h = {.op = TP_DRAFT_CLOSE, .id = id};
    char err[256];
    if (send_head(t, &h, err, sizeof err)) fprintf(stderr, "specbed: tensor parallel drafter close: %s\n", err);
}

/* The pass's int32 payload: lengths, seq, pos, n_ctx, logit rows, K/V layers. */
static size_t draft_ints(const tp_head *h) {
    return (size_t)h->n_slots + (size_t)h->n_rows * (2u + (h->has_ctx ? 1u : 0u)) + (size_t)h->n_logit +
           (size_t)h->n_kv;
}

static size_t draft_kv_floats(const tp_head *h, int H) {
    return h->n_kv ? (size_t)(h->kv_shared ? 1 : h->n_kv) * h->n_rows * H : 0;
}

int tp_draft_pass(tp_link *t, int id, const kv_cache *kv, const draft_pass *p, int H, char *err, size_t errlen) {
    if (id < 0) return errf(err, errlen, "tensor parallel: a draft pass of a drafter the other ranks were not told of");
    tp_head h = {.op = TP_DRAFT, .id = id, .n_slots = kv_get_config(kv)->max_seqs, .n_rows = p->n,
                 .n_logit = p->n_logit, .n_kv = p->n_kv, .kv_shared = p->kv_shared, .l0 = p->l0, .l1 = p->l1,
                 .out = p->out, .has_ctx = p->n_ctx != NULL};
    if (fit_dints(t, draft_ints(&h), err, errlen)) return -1;
    int32_t *q = t->dints;
    for (int s = 0; s < h.n_slots; s++) *q++ = kv_len(kv, s);
    for (int i = 0; i < p->n; i++) *q++ = p->seq[i];
    for (int i = 0; i < p->n; i++) *q++ = p->pos[i];
    for (int i = 0; h.has_ctx && i < p->n; i++) *q++ = p->n_ctx[i];
    for (int i = 0; i < p->n_logit; i++) *q++ = p->logit_rows[i];
    for (int i = 0; i < p->n_kv; i++) *q++ = p->kv_layers[i];
    /* the root's buffers are only read by a broadcast */
    if (send_head(t, &h, err, errlen) ||
        kb_comm_bcast(t->c, t->dints, draft_ints(&h) * sizeof *t->dints, 0, err, errlen) ||
        (h.n_kv && kb_comm_bcast(t->c, (void *)p->kv_x, draft_kv_floats(&h, H) * sizeof(float), 0, err, errlen)) ||
        (DRAFT_PASS_READS_X(h.l0, h.l1, h.n_logit) &&
         kb_comm_bcast(t->c, p->x, (size_t)p->n * H * sizeof(float), 0, err, errlen)))
        return -1;
    return 0;
}

/* Ranks > 0: one drafter message (open, pass or close). */
static int serve_draft(tp_link *t, const tp_head *h, char *err, size_t errlen) {
    if (h->op == TP_DRAFT_OPEN) {
        if (h->id != t->next_id || h->bytes < 0)
            return errf(err, errlen, "tensor parallel: drafter %d opened, this rank has %d", h->id, t->next_id);
        void *desc = malloc(h->bytes ? (size_t)h->bytes : 1);
        void *grown = realloc(t->drafts, (size_t)(t->next_id + 1) * sizeof *t->drafts);
        if (grown) t->drafts = grown;
        if (!desc || !grown) { free(desc); return errf(err, errlen, "tensor parallel: out of memory"); }
        int rc = kb_comm_bcast(t->c, desc, (size_t)h->bytes, 0, err, errlen);
        if (!rc && !t->has_host)
            rc = errf(err, errlen, "rank %d cannot open the drafter rank 0 made: this program installed no "
                      "draft_host (spec/drafters.h drafter_tp_host)", kb_comm_rank(t->c));
        struct draft_stack *s = NULL;
        void *owner = NULL;
        if (!rc) rc = t->host.open(t->host.ctx, desc, (size_t)h->bytes, &s, &owner, err, errlen);
        free(desc);
        if (rc) return -1;
        t->drafts[t->next_id].s = s;
        t->drafts[t->next_id].owner = owner;
        t->next_id++;
        return 0;
    }
    if (h->id < 0 || h->id >= t->next_id || !t->drafts[h->id].s)
        return errf(err, errlen, "tensor parallel: drafter %d is not open here", h->id);
    if (h->op == TP_DRAFT_CLOSE) {
        t->host.close(t->host.ctx, t->drafts[h->id].owner);
        t->drafts[h->id].s = NULL;
        return 0;
    }
    struct draft_stack *s = t->drafts[h->id].s;
    kv_cache *kv = t->ops.kv(s);
    const int H = t->ops.hidden(s);
    /* sizes first: they decide what is received */
    if (h->n_slots != kv_get_config(kv)->max_seqs || h->n_rows < 0 || h->n_rows > t->ops.max_rows(s) ||
        h->n_logit < 0 || h->n_logit > h->n_rows || h->n_kv < 0 || h->n_kv > t->ops.layers(s))
        return errf(err, errlen, "tensor parallel: malformed draft pass (%d slots, %d rows)", h->n_slots, h->n_rows);
    size_t nkv = draft_kv_floats(h, H);
    size_t nx = DRAFT_PASS_READS_X(h->l0, h->l1, h->n_logit) ? (size_t)h->n_rows * H : 0;
    float *rx = t->ops.rx(s, nkv + nx);
    if (fit_dints(t, draft_ints(h), err, errlen)) return -1;
    if (!rx && nkv + nx) return errf(err, errlen, "tensor parallel: out of memory for a draft pass");
    if (kb_comm_bcast(t->c, t->dints, draft_ints(h) * sizeof *t->dints, 0, err, errlen) ||
        (nkv && kb_comm_bcast(t->c, rx, nkv * sizeof(float), 0, err, errlen)) ||
        (nx && kb_comm_bcast(t->c, rx + nkv, nx * sizeof(float), 0, err, errlen)))
        return -1;
    const int32_t *q = t->dints + h->n_slots;
    draft_pass p = {.n = h->n_rows, .seq = q, .pos = q + h->n_rows, .n_ctx = h->has_ctx ? q + 2 * h->n_rows : NULL,
                    .n_kv = h->n_kv, .kv_shared = h->kv_shared, .kv_x = rx, .l0 = h->l0, .l1 = h->l1,
                    .x = rx + nkv, .out = h->out, .n_logit = h->n_logit};
    q += (size_t)h->n_rows * (2 + (h->has_ctx ? 1 : 0));
    p.logit_rows = q;
    p.kv_layers = q + h->n_logit;
    for (int i = 0; i < p.n; i++)
        if (p.seq[i] < 0 || p.seq[i] >= h->n_slots)
            return errf(err, errlen, "tensor parallel: draft row %d names sequence %d", i, p.seq[i]);
    if (mirror_lens(kv, t->dints, h->n_slots, &p, err, errlen)) return -1;
    return t->ops.serve(s, &p, err, errlen);
}

int tp_serve(tp_link *t, tp_run_fn run, struct fwd_ctx *f, kv_cache *kv, char *err, size_t errlen) {
    for (;;) {
        tp_head h;
        if (send_head(t, &h, err, errlen)) return -1;
        if (h.op == TP_STOP) return 0;
        if (h.op == TP_DRAFT_OPEN || h.op == TP_DRAFT || h.op == TP_DRAFT_CLOSE) {
            if (serve_draft(t, &h, err, errlen)) return -1;
            continue;
        }
        if (fit_slots(t, kv_get_config(kv)->max_seqs, err, errlen)) return -1;
        if ((h.op != TP_FWD && h.op != TP_SYNC) || h.n_slots != t->max_seqs || h.n_spans < 0 ||
            h.n_spans > t->max_seqs || h.n_rows < 0 || h.n_rows > t->max_rows || h.n_logit < 0 ||
            h.n_logit > h.n_rows || payload_ints(&h) > t->cap)
            return errf(err, errlen, "tensor parallel: malformed step message (op %d, %d spans, %d rows)", h.op,
                        h.n_spans, h.n_rows);
        if (kb_comm_bcast(t->c, t->msg, payload_ints(&h) * sizeof *t->msg, 0, err, errlen)) return -1;
        if (mirror(t, kv, err, errlen)) return -1;
        if (h.op == TP_SYNC) {
            int mine = kv_pages_free(kv);
            if (kb_comm_allgather(t->c, &mine, t->pages, sizeof mine, err, errlen)) return -1;
            continue;
        }
        const int32_t *p = t->msg + h.n_slots;
        int *tok = t->ints, *lrows = t->ints + t->max_rows;
        for (int s = 0, r = 0; s < h.n_spans; s++) {
            t->spans[s].seq = p[s];
            t->spans[s].n = p[h.n_spans + s];
            t->spans[s].tokens = tok + r;
            r += t->spans[s].n;
        }
        p += 2 * h.n_spans;
        for (int i = 0; i < h.n_rows; i++) tok[i] = *p++;
        for (int i = 0; i < h.n_logit; i++) lrows[i] = *p++;
        if (h.corrupt)
            for (int i = 0; i < h.n_rows; i++) t->corrupt[i] = (unsigned char)(*p++ != 0);
        fwd_batch b = {.spans = t->spans, .n_spans = h.n_spans};
        fwd_out o = {.logit_rows = lrows, .n_logit_rows = h.n_logit, .logits = t->logits, .attn_window = h.window,
                     .corrupt_rows = h.corrupt ? t->corrupt : NULL};
        if (run(f, kv, &b, &o, err, errlen)) return -1;
    }
}
