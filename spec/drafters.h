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
    double ngram_spec_factor;  /* 0 = the default; negative = no cap (drafter_ngram.h) */
    int max_seqs;
    int depth;                 /* serving depth, for startup messages only (dspark prints it beside
                                  its block_size); 0 = not known */
    int quiet;                 /* no startup messages */
    int dspark_final_tap;      /* --dspark-final-tap: a dspark_final_tap (drafter_dspark.h); 0 = not given */
} drafter_opts;

#define DRAFTER_NAMES "none|ngram|draft|mtp|dspark"

/* *out is NULL for "none". The target engine supplies the tokenizer, vocab
 * and (for MTP) the target model whose checkpoint holds the MTP module.
 * Under tensor parallelism (the engine's comm has several ranks) rank 0
 * calls it; MTP and DSpark then run their blocks and heads sharded on every
 * rank (drafter_tp_host), the rest of their work on rank 0; ngram and the
 * draft model stay whole on rank 0. */
int drafter_create(drafter **out, const drafter_opts *o, gen_engine *target, char *err, size_t errlen);
/* Frees d; under tensor parallelism rank 0's also frees the other ranks'.
 * Free drafters before their target engine. */
void drafter_free(drafter *d);

/* Tensor parallelism, ranks > 0, before gen_engine_serve: lets the serve
 * loop create the MTP and DSpark drafters rank 0 creates (drafter_create
 * announces their options; each rank then holds its shard of their layers
 * and heads, engine/draft_stack.h) and free them when rank 0 frees its. */
void drafter_tp_host(gen_engine *e);

/* --ngram-spec-factor F for every command (args.h conventions): F in
 * [0, 1e6], 0 meaning no cap; stores it in o->ngram_spec_factor. */
int drafter_opt_ngram_factor(const char *cmd, const char *opt, const char *val, drafter_opts *o);

/* --dspark-final-tap raw|normed for every command (args.h conventions):
 * which target state a DSpark checkpoint's final-layer tap was trained on
 * (drafter_dspark.h); stores it in o->dspark_final_tap. */
int drafter_opt_dspark_final_tap(const char *cmd, const char *opt, const char *val, drafter_opts *o);

/* Prints a run's speculative statistics (the llama.cpp/vLLM set) to f. */
void drafter_print_stats(FILE *f, const drafter *d, const spec_counters *c, int depth);

#endif
