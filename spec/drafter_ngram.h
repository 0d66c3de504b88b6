/* drafter_ngram.h — prompt lookup / n-gram drafting: no weights, the honest
 * baseline. The last n tokens (n from n_max down to n_min) are matched
 * against the earlier context; the tokens that followed the most recent
 * match are proposed, up to min(depth, lookahead). */
#ifndef SPECBED_DRAFTER_NGRAM_H
#define SPECBED_DRAFTER_NGRAM_H
#include "drafter.h"

typedef struct {
    int n_max;       /* longest suffix to match (default 3) */
    int n_min;       /* shortest (default 1) */
    int lookahead;   /* most tokens proposed from one match (default SPEC_MAX_DEPTH) */
} ngram_opts;

int drafter_ngram_create(drafter **out, const ngram_opts *o, int vocab_size, char *err, size_t errlen);

#endif
