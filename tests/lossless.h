/* lossless.h — the check that speculation never changes greedy output,
 * shared by test_spec_lossless (one process) and test_tp (tensor parallel):
 * for each depth and batch size, spec_run's tokens with the drafter equal
 * the plain loop's (engine/generate.c, a separate implementation) token for
 * token, the drafter proposed something at every depth (a disarmed drafter
 * would trivially "pass"), and every KV page came back. Failures are
 * CHECKs (test_util.h). */
#ifndef SPECBED_TESTS_LOSSLESS_H
#define SPECBED_TESTS_LOSSLESS_H
#include "drafters.h"
#include "spec_metrics.h"

enum { LL_NP = 8, LL_MAXP = 400, LL_GEN = 32 };

typedef struct {
    const char *label;
    drafter_opts dopt;
    int need_accept;   /* this drafter must get drafts accepted */
    const char *policy;   /* a verify policy (verify_policy.h name) on a CPU-shaped cost
                             curve, so drafting stops early; NULL = fixed */
} ll_config;

/* The check over np prompts pp[i] of lens[i] tokens, gen tokens each; for
 * every depth and batch size (consecutive groups of that many prompts).
 * need_accept: every depth must also have had drafts accepted. Prints each
 * depth's counts; returns the tokens compared. */
long ll_run(gen_engine *e, const drafter_opts *dopt, const char *label, int need_accept, const int *depths,
            int n_depths, const int *batches, int n_batches, const int *const *pp, const int *lens, int np, int gen);
/* ll_run over LL_NP prompts of LL_GEN tokens, as a config says. */
long ll_check(gen_engine *e, const ll_config *c, int prompts[LL_NP][LL_MAXP], int *lens, const int *depths,
              int n_depths, const int *batches, int n_batches);
/* ll_check that also returns each depth's counters (counts[n_depths]), so
 * that two devices' drafters can be compared draft for draft. */
long ll_check_counts(gen_engine *e, const ll_config *c, int prompts[LL_NP][LL_MAXP], int *lens, const int *depths,
                     int n_depths, const int *batches, int n_batches, spec_counters *counts);
/* The synthetic prompt set: LL_NP prompts of mixed lengths (120, 9, 300,
 * 40, 3, 129, 77, 210 tokens), repetitive ones (so ngram finds matches)
 * alternating with pseudo-random ones, ids below vocab. */
void ll_synthetic_prompts(int vocab, int prompts[LL_NP][LL_MAXP], int *lens);
/* The first n prompts of workloads/NAME.jsonl, tokenized, the last part of
 * each kept (mixed lengths, at most LL_MAXP tokens). Returns how many. */
int  ll_load_prompts(gen_engine *e, const char *workload, int prompts[][LL_MAXP], int *lens, int n);

/* A ctest variant that sets SPECBED_CPU_PATH runs the check on that kernel
 * path; where the kernels did not take it (this CPU lacks it), returns 1
 * after saying so, and the test skips (77) instead of passing on another
 * path. 0 otherwise (no variable, or the path is active). */
int  ll_path_missing(const char *test);

#endif
