/* verify_sched.h — verification scheduling (DESIGN §6): how many of each request's
 * drafts one verify step checks.
 *   fixed       all K drafts (no hook installed)
 *   threshold   stop at the first draft whose confidence (or, without a
 *               confidence head, its distribution's top probability) < p_min
 *   confidence  DSpark Algorithm 1: survival a_{r,j} = Π_{i≤j} c_{r,i};
 *               admit (request, position) candidates in descending a while
 *               Θ = τ · SPS(B) improves (τ = expected committed tokens,
 *               B = verify rows, SPS from the cost table); stop at the first
 *               non-improvement
 *   adaptive    the same objective with per-request, per-position
 *               acceptance estimates p ← α·p_prev + (1−α)·observed (α weights
 *               HISTORY, as vLLM's 0.8 does; α = 0 keeps only the last step);
 *               with a confidence head, the estimates calibrate it instead
 *
 * Lossless by construction: every signal used for position j is fixed before
 * d_j is drawn (c_j depends on d_{j−1}, never on d_j; the top probability is
 * a property of q_j, not of the sampled token). A scheduler that looked at
 * d_j itself would bias sampled output (tests/test_sched.c shows it). */
#ifndef SPECBED_SCHED_H
#define SPECBED_SCHED_H
#include "cost_table.h"
#include "spec_batch.h"

typedef enum { SCHED_FIXED = 0, SCHED_THRESHOLD, SCHED_CONFIDENCE, SCHED_ADAPTIVE } sched_kind;
#define SCHED_NAMES "fixed|threshold|confidence|adaptive"

typedef struct {
    sched_kind kind;
    double p_min;             /* threshold: default 0.5 */
    double alpha;             /* adaptive: default 0.8 (weight on history) */
    const cost_table *cost;   /* confidence/adaptive: borrowed, must outlive the scheduler */
    int max_slots;            /* request slots (the engine's max_seqs) */
} sched_opts;

typedef struct sched sched;

int  sched_parse(const char *name, sched_kind *out);   /* 0 ok, -1 unknown */
int  sched_create(sched **out, const sched_opts *o, char *err, size_t errlen);
void sched_free(sched *s);
/* The hook to install with spec_batch_set_scheduler (kind fixed: choose = NULL). */
spec_scheduler sched_hook(sched *s);

/* The admission rule alone, exposed for tests and the depth recommender:
 * given per-request survival curves a[r][j] (non-increasing in j, r < n,
 * j < kmax[r]) and the cost table, writes the number of drafts admitted per
 * request into ell[r]. */
void sched_admit(const cost_table *cost, const float (*a)[SPEC_MAX_DEPTH], const int *kmax, int n, int *ell);

#endif
