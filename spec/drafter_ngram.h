/* drafter_ngram.h — prompt lookup / n-gram drafting: no weights, the honest
 * baseline. The last n tokens (n from n_max down to n_min) are matched
 * against the earlier context; the tokens that followed the most recent
 * match are proposed, up to min(depth, lookahead, ceil(spec_factor · n)).
 * A continuation that runs into the end of the context goes on copying its
 * own drafts: a match d tokens back says the text repeats with period d, so
 * the copy continues the period instead of stopping (a loop of period 2
 * then drafts the whole depth, not 1 token).
 * spec_factor is SuffixDecoding's max_spec_factor (arXiv 2411.04975; vLLM's
 * suffix_decoding_max_spec_factor): a longer match earns a longer draft,
 * because verify rows cost (bench/RECORD.md "The ngram drafter's length"). */
#ifndef SPECBED_DRAFTER_NGRAM_H
#define SPECBED_DRAFTER_NGRAM_H
#include "drafter.h"

typedef struct {
    int n_max;       /* longest suffix to match (default 3; with the cap, also the longest draft) */
    int n_min;       /* shortest (default 1) */
    int lookahead;   /* most tokens proposed from one match (default SPEC_MAX_DEPTH) */
    double spec_factor;   /* at most ceil(spec_factor · match length) tokens; 0 = the default (1),
                             negative = no cap */
    int quiet;            /* no startup message */
} ngram_opts;

int drafter_ngram_create(drafter **out, const ngram_opts *o, int vocab_size, char *err, size_t errlen);

#endif
