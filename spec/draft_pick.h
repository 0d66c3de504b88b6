/* draft_pick.h — how a drafter that produces logits turns one row into a
 * draft (shared by MTP and DSpark): argmax when the request is greedy, else
 * a draw from q = sampler_probs(logits, the request's sampling params) with
 * the request's RNG, q written to the proposal (q_valid = 1) so the
 * verifier's min(1, p/q) uses the exact distribution the draft came from. */
#ifndef SPECBED_DRAFT_PICK_H
#define SPECBED_DRAFT_PICK_H
#include "drafter.h"

/* Draft number pos (0-based) of p from logits[V]. Also records
 * p->top_prob[pos] (greedy: the argmax's softmax probability at temperature
 * 1; sampling: the largest q). Returns the token. */
int draft_pick(spec_proposal *p, const float *logits, int V, int pos);

#endif
