/* verify.h — lossless acceptance of drafted tokens (DESIGN §4 step 4).
 * Pure functions of their inputs: no model, no state, so the arithmetic is
 * tested on its own (tests/test_verify.c).
 *
 * Both return the number of drafts accepted, a ∈ [0, l], and write the one
 * token committed after them (*next): the correction sampled where a draft
 * was rejected, or the bonus token from p_{l+1} when all l were accepted.
 * A verify step therefore always commits a + 1 tokens. */
#ifndef SPECBED_VERIFY_H
#define SPECBED_VERIFY_H
#include "sampler.h"

/* Greedy: d_i accepted while d_i == argmax(target_logits row i).
 * target_logits [l + 1, V]. */
int verify_greedy(const int *drafts, int l, const float *target_logits, int V, int *next);

/* Rejection sampling (Leviathan et al. / Chen et al.): accept d_i with
 * probability min(1, p_i(d_i) / q_i(d_i)); on rejection draw from
 * norm(max(0, p_i − q_i)); if all accepted draw the bonus from p_{l+1}.
 * p [l + 1, V]: the target's sampling distributions (sampler_probs).
 * q [l, V]: the drafter's distributions the drafts were drawn from; NULL
 * means each draft was chosen deterministically (q_i one-hot at d_i).
 * scratch [V]. The result is distributed exactly as p, whatever q is. */
int verify_sample(const int *drafts, int l, const float *p, const float *q, int V, rng_state *rng,
                  float *scratch, int *next);

#endif
