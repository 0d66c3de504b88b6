/* generate.h — plain (non-speculative) generation for a batch of prompts.
 * Every step is one ragged forward: prefill chunks of the sequences still
 * reading their prompts beside one decode row for each sequence already
 * generating, so a sequence's tokens never depend on its neighbours
 * (the forward is batch-invariant). This is the reference that speculative
 * decoding must reproduce token for token.
 *
 * Ownership: gen_result arrays are owned by the caller after gen_run
 * returns (gen_results_free). The engine is borrowed. */
#ifndef SPECBED_GENERATE_H
#define SPECBED_GENERATE_H
#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "sampler.h"


typedef struct {
    int max_tokens;
    sampler_params sp;
    uint64_t seed;         /* per request; sequence i uses seed + i */
    int ignore_eos;        /* keep going past end-of-text */
} gen_params;

/* Called for each generated token of sequence i (in order), may be NULL. */
typedef void (*gen_token_cb)(void *user, int seq_index, int token);

typedef struct {
    int *tokens;          /* generated ids [n_tokens] (malloc'd) */
    int n_tokens;
    int n_prompt;
    int hit_eos;
} gen_result;

typedef struct {
    double prefill_s, decode_s;
    long prefill_tokens, decode_tokens;
    long forward_calls;
} gen_timing;

/* Generates for n prompts (token arrays) together. results[n] filled. */
int gen_run(gen_engine *e, const int *const *prompts, const int *n_prompt, int n,
            const gen_params *gp, gen_token_cb cb, void *user, gen_result *results,
            gen_timing *timing, char *err, size_t errlen);
void gen_results_free(gen_result *r, int n);

#endif
