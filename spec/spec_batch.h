/* spec_batch.h — the continuous-batching speculative engine (DESIGN §4, §7).
 * Requests join and leave between steps. Each spec_batch_step() builds ONE
 * ragged forward: [last, d_1..d_ℓ] verify rows for every request that is
 * generating, then prompt chunks of requests still prefilling, within the
 * row budget; then verifies, commits by KV truncation, and tells the
 * drafter what was accepted. A request with depth 0 (or no drafter) simply
 * decodes one row per step inside the same batch.
 *
 * Ownership: the batch owns each request's KV sequence, token buffer and
 * drafter slot from spec_batch_add until the request finishes (the finish
 * callback is the last thing it hears about that slot) or is cancelled.
 * The engine and drafter are borrowed and must outlive the batch.
 * Not thread-safe: one thread drives a batch (the server's scheduler loop). */
#ifndef SPECBED_SPEC_BATCH_H
#define SPECBED_SPEC_BATCH_H
#include "drafter.h"
#include "fault.h"
#include "generate.h"

typedef struct {
    int max_tokens;
    sampler_params sp;
    uint64_t seed;
    int ignore_eos;
    int depth;             /* drafts per step for this request; -1 = the batch default, 0 = off */
    int prompt_logits;     /* deliver the logits of every prompt row (echo + logprobs) */
} spec_req_params;

/* NONFINITE: the target produced NaN/Inf logits for this request (a broken
 * checkpoint or kernel); the request ends there, nothing is sampled from
 * the bad row, and the batch goes on serving everyone else. */
typedef enum { SPEC_FINISH_LENGTH = 0, SPEC_FINISH_STOP = 1, SPEC_FINISH_CONTEXT = 2, SPEC_FINISH_NONFINITE = 3 } spec_finish;

typedef struct {
    void *user;
    /* One committed token of request `slot`, with the target logits row it
     * was drawn from ([V], valid only during the call). */
    void (*on_token)(void *user, int slot, int token, const float *logits);
    /* Prompt row i's logits (predicting prompt token i+1), if asked. */
    void (*on_prompt_logits)(void *user, int slot, int i, const float *logits);
    /* The request is done; its slot is free after this returns. */
    void (*on_finish)(void *user, int slot, spec_finish why, int n_generated);
} spec_callbacks;

/* The verify policy's hook (verify_policy.h implements the policies):
 * decides how many of each request's proposed drafts to verify (DESIGN §6);
 * may only lower props[i].k, and must decide from confidences and the
 * drafter's statistics, never from the draft tokens' identity (peeking at
 * a sampled draft before admitting it would bias the output). NULL = verify
 * all ("fixed"). */
typedef struct {
    void *ctx;
    void (*choose)(void *ctx, spec_proposal *props, int n);
    /* Told the outcome of each verified proposal (for adaptive estimates). */
    void (*observe)(void *ctx, const spec_proposal *prop, int n_accepted);
    /* A new request took this slot: forget what was learned about the old one. */
    void (*reset)(void *ctx, int slot);
    /* Asked by the drafter before each further draft (spec_proposal.keep):
     * 0 when the policy would not verify it, so it is not drafted. */
    int (*keep)(void *ctx, const spec_proposal *p);
    /* Asked before the drafter runs at all, for each request that could draft
     * up to max_k this step among n_seqs decoding ones: 0 when drafting this
     * step is not expected to pay for itself, so the request decodes plain
     * (the drafter still gets its committed rows; it catches up when next
     * asked). NULL = always draft. */
    int (*gate)(void *ctx, int slot, int max_k, int n_seqs);
} spec_verify_hook;

typedef struct spec_batch spec_batch;


/* d may be NULL (no speculation). default_depth is used by requests with depth -1. */
int  spec_batch_create(spec_batch **out, gen_engine *e, drafter *d, int default_depth,
                       const spec_callbacks *cb, char *err, size_t errlen);
void spec_batch_free(spec_batch *b);   /* cancels anything still running */
void spec_batch_set_verify_hook(spec_batch *b, const spec_verify_hook *s);
/* Arms a fault for canary validation (fault.h); NULL = off. */
void spec_batch_set_fault(spec_batch *b, const spec_fault *f);

/* Admits a request; *slot identifies it in callbacks. Fails (without side
 * effects) on bad input or when no slot / KV page is free. */
int  spec_batch_add(spec_batch *b, const int *prompt, int n_prompt, const spec_req_params *p, int *slot,
                    char *err, size_t errlen);
/* Drops a request now: KV pages and drafter slot are freed, no callback. */
void spec_batch_cancel(spec_batch *b, int slot);

/* One iteration. Returns 0 (also when idle), -1 on an engine error (the
 * batch is then unusable and must be freed). */
int  spec_batch_step(spec_batch *b, char *err, size_t errlen);

int  spec_batch_running(const spec_batch *b);   /* requests admitted and not finished */
int  spec_batch_prefilling(const spec_batch *b);
long spec_batch_tokens_in_kv(const spec_batch *b);

typedef struct {
    long steps;                 /* spec_batch_step calls that ran a forward */
    long verify_seq_steps;      /* Σ requests verified per step */
    long prefill_tokens;
    long faults_injected;
    long nonfinite;             /* requests ended by NaN/Inf logits (SPEC_FINISH_NONFINITE) */
    double forward_s, verify_s;   /* in the target forward; in verification and commit */
} spec_batch_stats;
const spec_batch_stats *spec_batch_get_stats(const spec_batch *b);
/* The speculative counters of every request this batch verified, since it
 * was created (spec_metrics.h: rates come from spec_rates_between). */
const spec_counters *spec_batch_counters(const spec_batch *b);

#endif
