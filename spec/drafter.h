/* drafter.h — the one interface every drafter implements (DESIGN §5).
 * The decoding loop calls only these operations; it never knows which
 * drafter runs. A drafter keeps per-sequence state in slots 0..max_seqs-1
 * only; what was drafted and accepted is counted by the speculative step
 * (spec_metrics.h), which alone sees the verification outcome.
 *
 * Lifecycle per sequence: begin (the prompt is known and prefilled in the
 * target) → repeated propose / accept → release. Every proposed token is
 * followed by exactly one accept call for that slot before the next propose.
 *
 * Ownership: the drafter owns its state and any model it loaded; proposal
 * buffers (tokens, q, conf) belong to the caller. */
#ifndef SPECBED_DRAFTER_H
#define SPECBED_DRAFTER_H
#include <stddef.h>
#include "sampler.h"
#include "spec_metrics.h"   /* SPEC_MAX_DEPTH */


/* One sequence's request to the drafter and its answer. */
typedef struct spec_proposal_s {
    int slot;                  /* drafter slot of this sequence */
    const int *tokens;         /* prompt + committed tokens [n_tokens] */
    int n_tokens;
    int max_k;                 /* ≤ SPEC_MAX_DEPTH */
    const sampler_params *sp;  /* the request's sampling (temperature 0 = greedy) */
    rng_state *rng;            /* the request's RNG, for drafters that sample */
    /* answer */
    int k;                     /* drafts proposed, 0..max_k */
    int draft[SPEC_MAX_DEPTH];
    float *q;                  /* [max_k, V] caller-provided; the drafter writes the
                                  distribution each draft was drawn from, or sets
                                  q_valid = 0 if its drafts are deterministic */
    int q_valid;
    float conf[SPEC_MAX_DEPTH];/* P(draft i survives | drafts < i survived) */
    int has_conf;
    float top_prob[SPEC_MAX_DEPTH]; /* the largest probability of the distribution draft i
                                       came from: a confidence signal that does not depend on
                                       which token a sampled draft happened to be */
    int has_top_prob;
    /* Drafting that stops early (set by the speculative step from the verify
     * policy; NULL = draft up to max_k): asked before each further draft,
     * with drafts 0..k-1 and their signals filled in; 0 means the policy
     * would not verify another draft, so drafting one is wasted work. It may
     * read only signals fixed before each draft was drawn (confidences, top
     * probabilities), never the draft tokens — the same rule as the policy. */
    int (*keep)(void *ctx, const struct spec_proposal_s *p);
    void *keep_ctx;
    /* Set by a drafter whose signal for draft k is known before draft k is
     * computed (DSpark's confidence c_k reads h_k and d_{k-1}, never d_k):
     * conf[k] is filled when keep is asked about draft k, so the policy
     * tests draft k's own survival — exactly what it will verify — and a
     * draft it would cut, the first one included, is never computed.
     * Without it keep sees drafts 0..k-1 only (an upper bound) and is not
     * asked about the first draft. */
    int conf_ahead;
} spec_proposal;

/* Whether a drafter should draft position p->k of this request. */
static inline int spec_wants_more(const spec_proposal *p) {
    return p->k < p->max_k && (!p->keep || (p->k == 0 && !p->conf_ahead) || p->keep(p->keep_ctx, p));
}

/* What the target computed for a sequence in the verify step, for drafters
 * that condition on target hidden states (MTP, DSpark). */
typedef struct {
    int slot;
    int n_accepted;            /* drafts accepted */
    const int *committed;      /* the n_accepted + 1 tokens committed this step */
    int n_committed;
    const int *tokens;         /* full context after the commit [n_tokens] */
    int n_tokens;
    const float *hidden;       /* [n_committed, n_taps, hidden] target taps of the rows
                                  that produced the committed tokens, or NULL */
} spec_accept;

typedef struct drafter drafter;

typedef struct {
    const char *name;
    int  (*begin)(drafter *d, int slot, const int *prompt, int n_prompt, const float *prompt_hidden,
                  char *err, size_t errlen);
    int  (*propose)(drafter *d, spec_proposal *reqs, int n, char *err, size_t errlen);
    void (*accept)(drafter *d, const spec_accept *acc, int n);
    void (*release)(drafter *d, int slot);
    void (*free)(drafter *d);
} drafter_ops;

struct drafter {
    const drafter_ops *ops;
    int vocab_size;
    /* target layer taps this drafter wants in spec_accept.hidden / begin */
    int tap_layers[8];
    int n_taps;
    void *impl;                /* the drafter's own state */
    /* MTP, DSpark: their layers, heads and KV cache (engine/draft_stack.h),
     * which every tensor-parallel rank runs; NULL for the others */
    struct draft_stack *stack;
};

#endif
