/* drafters.h — builds a drafter from its command-line name, so every
 * program (generate, serve, bench) accepts the same --drafter values. */
#ifndef SPECBED_DRAFTERS_H
#define SPECBED_DRAFTERS_H
#include "drafter.h"
#include "engine.h"
#include <stdio.h>

typedef struct {
    const char *name;          /* none | ngram | draft | mtp | dspark */
    const char *draft_model;   /* --draft-model DIR (draft: the draft model; dspark: the DSpark checkpoint) */
    int ngram_n_max, ngram_n_min, ngram_lookahead;
    int max_seqs;
    int depth;                 /* serving depth, for startup messages only (dspark prints it beside
                                  its block_size); 0 = not known */
    int quiet;                 /* no startup messages */
} drafter_opts;

#define DRAFTER_NAMES "none|ngram|draft|mtp|dspark"

/* *out is NULL for "none". The target engine supplies the tokenizer, vocab
 * and (for MTP) the target model whose checkpoint holds the MTP module. */
int drafter_create(drafter **out, const drafter_opts *o, gen_engine *target, char *err, size_t errlen);
void drafter_free(drafter *d);

/* Prints a run's speculative statistics (the llama.cpp/vLLM set) to f. */
void drafter_print_stats(FILE *f, const drafter *d, const spec_counters *c, int depth);

#endif
