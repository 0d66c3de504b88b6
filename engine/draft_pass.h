/* draft_pass.h — one pass of a drafter's sharded layers, as draft_stack_run
 * (draft_stack.h) runs it and tensor parallelism's step link (tp_link.h)
 * sends it to the other ranks, and the draft_host that makes a drafter on
 * those ranks. Types only, below both, so that neither file needs the
 * other's header for them. */
#ifndef SPECBED_DRAFT_PASS_H
#define SPECBED_DRAFT_PASS_H
#include <stddef.h>

struct draft_stack;

/* Whether pass p reads its rows x: when it runs layers, or runs no layer
 * but wants logits (a head-only pass: the final norm and head of rows x
 * already computed, e.g. one slot of a block a drafter scores only once
 * its policy wants that slot's draft). tp.c sends x to the other ranks
 * exactly then. */
#define DRAFT_PASS_READS_X(l0, l1, n_logit) ((l1) > (l0) || (n_logit) > 0)

typedef struct {
    int n;                   /* rows, ≤ max_rows */
    const int *seq, *pos;    /* [n] KV sequence and position (already appended to the KV cache) */
    const int *n_ctx;        /* [n] keys attended, or NULL = causal (layer.h layer_rows) */
    int n_kv;                /* layers written K/V only, before the full ones */
    const int *kv_layers;    /* [n_kv] */
    const float *kv_x;       /* [n_kv, n, H], or [n, H] for all of them when kv_shared */
    int kv_shared;
    int l0, l1;              /* layers run in full on x, in order (l0 = l1: none; then with
                                n_logit > 0 a head-only pass: norm and head of x as it is) */
    float *x;                /* [n, H] residual stream, in place */
    int out;                 /* which final norm and head */
    float *normed;           /* out: [n, H] x after the final norm */
    int n_logit;             /* rows whose logits are wanted */
    const int *logit_rows;   /* [n_logit] ascending */
    float *logits;           /* out: [n_logit, N] */
} draft_pass;

/* What makes a drafter on ranks > 0 from rank 0's description: open
 * creates it (quietly) and gives its stack and the handle close frees. */
typedef struct {
    int  (*open)(void *ctx, const void *desc, size_t n, struct draft_stack **stack, void **owner, char *err,
                 size_t errlen);
    void (*close)(void *ctx, void *owner);
    void *ctx;
} draft_host;

#endif
