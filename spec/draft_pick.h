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

/* The same over a reduced draft vocabulary (draft_vocab.h): logits[n] score
 * draft ids 0..n-1, whose target ids are d2t[n]. The pick (argmax, or a draw
 * with the request's RNG) is made among the n ids; a sampling request's q
 * row (V wide, as the verifier reads it) is the draft distribution over
 * the n target ids and exactly 0 elsewhere, so rejection sampling stays
 * exact. probs: scratch [n]. Returns the TARGET id. With d2t the identity
 * (n = V) this is bit-identical to draft_pick. */
int draft_pick_mapped(spec_proposal *p, const float *logits, int n, const int *d2t, int V, float *probs, int pos);

#endif
