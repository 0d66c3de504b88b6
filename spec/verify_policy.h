/* verify_policy.h — verify policies (DESIGN §6): how many of each request's
 * drafts one verify step checks.
 *   fixed       all K drafts (no hook installed)
 *   threshold   stop at the first draft whose confidence (or, without a
 *               confidence head, its distribution's top probability) < p_min
 *   confidence  DSpark Algorithm 1: survival a_{r,j} = Π_{i≤j} c_{r,i};
 *               admit (request, position) candidates in descending a while
 *               Θ = τ · SPS(B) improves (τ = expected committed tokens,
 *               B = verify rows, SPS from the cost table); stop at the first
 *               non-improvement. When the table has the drafter's cost, a
 *               step lasts its verify plus its drafting, so SPS(B) is
 *               1 / (cost(B) + drafting): a dear drafting pass makes a
 *               further verify row relatively cheaper, and each further
 *               draft of an incremental drafter costs its own drafting
 *   adaptive    the same objective with per-request, per-position
 *               acceptance estimates p ← α·p_prev + (1−α)·observed (α weights
 *               HISTORY, as vLLM's 0.8 does; α = 0 keeps only the last step);
 *               with a confidence head, the estimates calibrate it instead.
 *               When the cost table has the drafter's own cost (`specbed
 *               profile --drafter`), a request drafts in a step only if the
 *               estimates say some depth pays for verify rows AND drafting
 *               (the gate hook; a probe after 16, 32, ... 256 refused steps keeps the
 *               estimates fresh): on hardware where a drafter cannot pay,
 *               adaptive decodes plain instead of slowing down
 *
 * Lossless by construction: every signal used for position j is fixed before
 * d_j is drawn (c_j depends on d_{j−1}, never on d_j; the top probability is
 * a property of q_j, not of the sampled token). A policy that looked at
 * d_j itself would bias sampled output (tests/test_verify_policy.c shows it). */
#ifndef SPECBED_VERIFY_POLICY_H
#define SPECBED_VERIFY_POLICY_H
#include <stdio.h>
#include "cost_curve.h"
#include "spec_batch.h"

typedef enum { VPOLICY_FIXED = 0, VPOLICY_THRESHOLD, VPOLICY_CONFIDENCE, VPOLICY_ADAPTIVE } vpolicy_kind;
#define VPOLICY_NAMES "fixed|threshold|confidence|adaptive"

typedef struct {
    vpolicy_kind kind;
    double p_min;             /* threshold: default 0.5 */
    double alpha;             /* adaptive: default 0.8 (weight on history) */
    const cost_curve *cost;   /* confidence/adaptive: borrowed, must outlive the policy */
    int max_slots;            /* request slots (the engine's max_seqs) */
} vpolicy_opts;

typedef struct vpolicy vpolicy;

int  vpolicy_parse(const char *name, vpolicy_kind *out);   /* 0 ok, -1 unknown */
int  vpolicy_create(vpolicy **out, const vpolicy_opts *o, char *err, size_t errlen);
void vpolicy_free(vpolicy *s);
/* The hook to install with spec_batch_set_verify_hook (kind fixed: choose = NULL). */
spec_verify_hook vpolicy_hook(vpolicy *s);

/* What a step's drafting costs the admission rule: the seconds the drafts
 * already made took (spent, but part of the step's time and so of the rate
 * the rule maximises) and what one more drafted token would add. */
typedef struct {
    double spent_s, per_token_s;
} vpolicy_draft_cost;

/* The admission rule alone, exposed for tests:
 * given per-request survival curves a[r][j] (non-increasing in j, r < n,
 * j < kmax[r]), the cost table and the step's drafting cost (NULL: free),
 * writes the number of drafts admitted per request into ell[r], maximising
 * Θ = τ / (cost(B) + spent_s). Returns the survival a further draft, still
 * to be drafted at per_token_s, would have had to exceed to be admitted
 * (the threshold at the final batch). */
double vpolicy_admit(const cost_curve *cost, const float (*a)[SPEC_MAX_DEPTH], const int *kmax, int n, int *ell,
                     const vpolicy_draft_cost *dc);

/* A verify policy as a command line asks for it (generate, serve, bench_spec). */
typedef struct {
    const char *name;        /* one of VPOLICY_NAMES; NULL = fixed */
    double p_min;            /* threshold */
    double alpha;            /* adaptive */
    const char *cost_path;   /* confidence/adaptive: a cost curve file; NULL = profile the engine */
} vpolicy_args;
#define VPOLICY_ARGS_DEFAULT {.name = "fixed", .p_min = 0.5, .alpha = 0.8}

/* The one place a command turns vpolicy_args into a policy: checks the
 * name, fills *cost when the policy needs one and cost->n is 0 (loads
 * cost_path, or profiles the engine over up to max_slots × (max_depth + 1)
 * rows and drafter d's cost, saying so on log; d is the running drafter,
 * never NULL), and creates the policy for
 * max_slots request slots. A loaded table's drafter costs measured for
 * another drafter than d are dropped (said on log): the policy then counts
 * drafting as free, as it does for a table without them. *out stays NULL
 * for "fixed" (no hook needed). cost is borrowed by the policy and must
 * outlive it. */
int vpolicy_setup(vpolicy **out, cost_curve *cost, const vpolicy_args *a, gen_engine *e, drafter *d, int max_slots,
                  int max_depth, FILE *log, char *err, size_t errlen);

#endif
