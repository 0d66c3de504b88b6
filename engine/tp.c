/* tp.c — tensor parallelism's step protocol (see tp_link.h, forward.h).
 * Rank 0 leads: before computing a batch it broadcasts one fixed header and
 * one int32 payload; ranks > 0 wait in tp_serve, bring their KV cache to
 * the leader's state and run the same batch through fwd_run, whose
 * collectives (layer.c's all-reduce, forward.c's logits all-gather) then
 * pair up rank by rank. No rank ever decides anything: the leader's
 * scheduler, drafters and verifier are the only ones.
 *
 * KV mirroring: the payload carries every sequence slot's length before the
 * batch (−1 = not live). A rank frees the slots the leader freed, claims the
 * ones it opened and truncates to the leader's length, so rejected draft
 * rows disappear on every rank in the step that follows, and pages freed on
 * the leader are free everywhere at the next announce or tp_sync.
 * Owns: the message buffers and, on ranks > 0, the discarded logits rows.
 * Must not: compute, or let a rank continue after it diverged (it aborts
 * the job with a message instead). */
#include "tp_link.h"
#include "errmsg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TP_FWD = 1, TP_SYNC = 2, TP_STOP = 3 };

typedef struct {
    int32_t op, n_spans, n_rows, n_logit, window, corrupt, n_slots;
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
    free(t->msg); free(t->pages);
    free(t->spans); free(t->ints); free(t->corrupt); free(t->logits);
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

/* The leader's sequence lengths, applied here. */
static int mirror(tp_link *t, kv_cache *kv, char *err, size_t errlen) {
    for (int s = 0; s < t->max_seqs; s++) {
        int want = t->msg[s], have = kv_len(kv, s);
        if (want < 0) {
            if (have >= 0) kv_seq_free(kv, s);
            continue;
        }
        if (have < 0 && kv_seq_claim(kv, s)) return errf(err, errlen, "sequence slot %d cannot be claimed", s);
        have = kv_len(kv, s);
        if (have < want)
            return errf(err, errlen, "sequence %d has %d rows here, the leader's has %d: the ranks diverged", s, have,
                        want);
        kv_truncate(kv, s, want);
    }
    return 0;
}

int tp_serve(tp_link *t, fwd_ctx *f, kv_cache *kv, char *err, size_t errlen) {
    for (;;) {
        tp_head h;
        if (send_head(t, &h, err, errlen)) return -1;
        if (h.op == TP_STOP) return 0;
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
        if (fwd_run(f, kv, &b, &o, err, errlen)) return -1;
    }
}
