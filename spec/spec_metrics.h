/* spec_metrics.h — the one definition of speculative-decoding metrics.
 *
 * spec_counters is owned and written by the speculative step (spec_batch.c)
 * only; everyone else reads snapshots of it. Every quantity users read —
 * /metrics, the decode-batch log line, `generate --stats-json`, bench_spec,
 * the tests — comes from spec_rates_between() over two snapshots, so a log
 * line and /metrics cannot disagree about the same interval.
 *
 * Definitions (vLLM / SGLang / DeepSpec):
 *   steps            sequence verify steps of requests that speculate (the
 *                    request asked for drafts and its drafter slot is open);
 *                    requests with speculation off are not counted at all
 *   accept length    committed tokens ÷ steps (bonus token included):
 *                    SGLang's "accept len", specbed's own accept length
 *   mean acceptance length  1 + accepted ÷ drafts: vLLM's (the bonus token
 *                    counted once per draft; vllm/v1/spec_decode/metrics.py,
 *                    vllm/benchmarks/serve.py). It leaves out the steps whose
 *                    proposal was empty, so it is ≥ accept length
 *   acceptance rate  accepted ÷ drafted tokens
 *   position rate i  accepted_at[i] ÷ drafts: vLLM's unconditional
 *                    probability that draft i (0-based) is accepted, a draft
 *                    shorter than i+1 counting as not accepted there
 * Rates whose denominator is 0 are 0 and `drafted` says whether any draft
 * was made (the decode-batch line omits accept len / rate then, as SGLang
 * does for a server that does not speculate). */
#ifndef SPECBED_SPEC_METRICS_H
#define SPECBED_SPEC_METRICS_H

#define SPEC_MAX_DEPTH 16

typedef struct {
    long drafts;                          /* proposals with k ≥ 1 that were verified */
    long drafted_tokens;                  /* Σ k proposed and verified */
    long accepted_tokens;                 /* Σ drafts accepted */
    long steps;                           /* verify steps (sequence × step) of speculating requests; a
                                             step the verify policy's gate kept from drafting is not
                                             one (vLLM counts no draft where speculation was off), so
                                             accept length stays the drafter's, not the gate's */
    long committed_tokens;                /* Σ tokens committed by those steps (bonus included) */
    long drafted_at[SPEC_MAX_DEPTH];      /* drafts that reached position i (0-based) */
    long accepted_at[SPEC_MAX_DEPTH];     /* drafts accepted at position i */
    long empty_proposals;                 /* the drafter had nothing to offer (k = 0) */
    long unverified_tokens;               /* drafted, then left out by the verify policy */
    long gated_steps;                     /* verify steps the policy's gate kept from drafting (adaptive
                                             with the drafter's cost: drafting would not have paid) */
    double pred_survival_at[SPEC_MAX_DEPTH]; /* Σ predicted survival Π_{j≤i} conf_j over verified
                                                drafts reaching i (confidence heads only): ÷
                                                drafted_at[i] vs accepted_at[i] ÷ drafted_at[i]
                                                is the head's calibration */
    double draft_s;                       /* wall time inside the drafter's operations */
} spec_counters;

typedef struct {
    long drafts, drafted_tokens, accepted_tokens, steps, committed_tokens, empty_proposals, unverified_tokens;
    long gated_steps;
    int drafted;                          /* drafts > 0 */
    double accept_length;                 /* committed ÷ steps; 0 when steps = 0 */
    double mean_acceptance_length;        /* vLLM's 1 + accepted ÷ drafts; 0 when no drafts (vLLM's 0.0) */
    double acceptance_rate;               /* accepted ÷ drafted; 0 when nothing drafted */
    double position_rate[SPEC_MAX_DEPTH]; /* accepted_at[i] ÷ drafts; 0 when no drafts */
    int n_positions;                      /* highest position that was drafted + 1 */
    double draft_s;
} spec_rates;

/* The rates over the interval between two snapshots; before = NULL means
 * from zero (the whole run). */
spec_rates spec_rates_between(const spec_counters *before, const spec_counters *after);
/* acc += x, for results gathered over several runs. */
void spec_counters_add(spec_counters *acc, const spec_counters *x);

#endif
