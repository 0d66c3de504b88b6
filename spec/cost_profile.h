/* cost_profile.h — measuring the verify cost curve (common/cost_curve.h) of
 * this engine: `specbed profile`, or briefly at startup when a verify policy
 * needs a curve and none was given. */
#ifndef SPECBED_COST_PROFILE_H
#define SPECBED_COST_PROFILE_H
#include <stddef.h>
#include <stdio.h>
#include "cost_curve.h"
#include "drafter.h"
#include "engine.h"

/* Measures the target (and, with d, the drafter's cost per drafted token):
 * one forward of B rows spread over min(B, max_seqs, 8) sequences that each
 * hold `history` tokens, for B in a ladder (1..8 every row, then ×1.5) up to
 * max_rows; the median of `reps` per point. Takes a few seconds on the
 * bundled model. Leaves the KV cache as it found it.
 *
 * The tokens: text (n_text ids of real text, named text_name) gives every
 * sequence its own stretch, history then rows; NULL gives hashed ids, which
 * cost what text costs on a dense model but not on a mixture of experts,
 * whose steps read the experts their rows route to (and hashed ids route as
 * no text does): an MoE target needs text, and its table gets the routing
 * curve (cost_curve's moe_*). */
int cost_profile(cost_curve *t, gen_engine *e, drafter *d, int max_rows, int history, int reps, const int *text,
                 long n_text, const char *text_name, char *err, size_t errlen);

/* One line on f: the drafter cost a profile measured (nothing when t has no drafter). */
void cost_profile_print_draft(FILE *f, const cost_curve *t);

#endif
