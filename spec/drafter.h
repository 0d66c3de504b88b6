/* drafter.h — the one interface every drafter implements (DESIGN §5).
 * The decoding loop calls only these operations; it never knows which
 * drafter runs. A drafter keeps per-sequence state in slots 0..max_seqs-1
 * and its own counters; the loop fills the "accepted" counters, the drafter
 * its drafting time.
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

#define SPEC_MAX_DEPTH 16

typedef struct {
    long drafts;                          /* propose results with k ≥ 1 */
    long drafted_tokens;                  /* Σ k proposed and verified */
    long accepted_tokens;                 /* Σ drafts accepted */
    long steps;                           /* verify steps (sequence × step) */
    long committed_tokens;                /* Σ tokens committed by verify steps (bonus included) */
    long drafted_at[SPEC_MAX_DEPTH];      /* drafts that reached position i (0-based) */
    long accepted_at[SPEC_MAX_DEPTH];     /* drafts accepted at position i */
    long empty_proposals;                 /* propose returned k = 0 */
    long unverified_tokens;               /* drafted, then left out by the verify scheduler */
    double pred_survival_at[SPEC_MAX_DEPTH]; /* Σ predicted survival Π_{j≤i} conf_j over verified
                                                drafts reaching i (confidence heads only): ÷
                                                drafted_at[i] vs accepted_at[i] ÷ drafted_at[i]
                                                is the head's calibration */
    double draft_s;                       /* wall time inside propose/accept */
} drafter_counters;

/* One sequence's request to the drafter and its answer. */
typedef struct {
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
} spec_proposal;

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
    drafter_counters counters;
    int vocab_size;
    /* target layer taps this drafter wants in spec_accept.hidden / begin */
    int tap_layers[8];
    int n_taps;
    void *impl;                /* the drafter's own state */
};

#endif
