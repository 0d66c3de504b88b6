/* sampler.h — turning logits into tokens, reproducibly.
 * The RNG is xoshiro256** seeded by splitmix64: the same seed gives the same
 * stream in every process and on every machine. sampler_probs gives the exact
 * distribution a token is drawn from (temperature, top-k, top-p applied and
 * renormalised); the speculative verifier uses it as the target's p. */
#ifndef SPECBED_SAMPLER_H
#define SPECBED_SAMPLER_H
#include <stdint.h>

typedef struct { uint64_t s[4]; } rng_state;
void   rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_next(rng_state *r);
double rng_uniform(rng_state *r);             /* [0, 1) with 53 random bits */

typedef struct {
    float temperature;  /* 0 = greedy */
    float top_p;        /* 1 = off */
    int top_k;          /* 0 = off */
} sampler_params;

/* Index of the first NaN or ±Inf in logits[n], or -1 when all are finite.
 * A checkpoint or kernel fault can produce such rows; every caller that
 * samples from model output checks first and fails that request. */
int sampler_first_nonfinite(const float *logits, int n);

/* argmax; ties go to the lowest id (so greedy is deterministic). */
int sample_greedy(const float *logits, int n);

/* probs[n] = the distribution sampler_params defines over logits[n]. Greedy
 * (temperature 0) gives a one-hot at sample_greedy. */
void sampler_probs(float *probs, const float *logits, int n, const sampler_params *sp);

/* Draws from probs[n] with one uniform (inverse CDF, ascending id order). */
int sample_from_probs(const float *probs, int n, rng_state *r);

/* Full sampling step; scratch[n]. */
int sampler_sample(const float *logits, int n, const sampler_params *sp, rng_state *r,
                   float *scratch);

/* Log-softmax of logits at token id (raw logits, no temperature: OpenAI's
 * logprobs report the model's distribution). */
float logprob_of(const float *logits, int n, int id);
/* The k most likely ids (descending) with their logprobs; ids[k], lps[k]. */
void  logprobs_top(const float *logits, int n, int k, int *ids, float *lps);

#endif
