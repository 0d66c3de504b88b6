/* spec_run.h — speculative generation for a batch of prompts
 * (DESIGN §4): each step, the drafter proposes up to `depth` tokens per
 * sequence, the target runs ONE ragged forward over [last, d_1..d_k] of every
 * sequence, the verifier accepts a prefix plus one token, and the KV cache
 * keeps the accepted rows by truncation.
 *
 * Deliberately separate from engine/generate.c: the plain loop there is the
 * reference this one must equal token for token (greedy) and in distribution
 * (sampling), so the two must not share the code under test. */
#ifndef SPECBED_SPEC_DECODE_H
#define SPECBED_SPEC_DECODE_H
#include "drafter.h"
#include "generate.h"
#include "spec_batch.h"

typedef struct {
    gen_params gen;      /* max_tokens, sampling, seed, ignore_eos */
    int depth;           /* K: drafts proposed per step, 1..SPEC_MAX_DEPTH */
    spec_verify_hook verify;  /* verify policy hook (zero = fixed: verify all) */
    const spec_fault *fault;  /* canary validation only (fault.h); NULL = none */
} spec_params;

typedef struct {
    double prefill_s, draft_s, verify_s, total_s;
    long prefill_tokens, generated_tokens;
    long forward_steps;       /* target forwards, prefill chunks included */
    long verify_steps;        /* Σ sequences verified per forward: decode steps, prefill chunks not counted */
    spec_counters counters;   /* this run's speculative counters (spec_metrics.h) */
} spec_timing;

/* drafter may be NULL (speculation off: depth is ignored, one row per step). */
int spec_run(gen_engine *e, drafter *d, const int *const *prompts, const int *n_prompt, int n,
             const spec_params *p, gen_token_cb cb, void *user, gen_result *results,
             spec_timing *timing, char *err, size_t errlen);

#endif
