/* interval.h — one row of the per-interval time series every metric source
 * produces: start, end, running requests, accept length,
 * acceptance rate, per-position rates where available, throughput.
 * NaN marks a quantity the source does not report or that the interval
 * does not define (no verify steps → no accept length). */
#ifndef SPECBED_BENCH_INTERVAL_H
#define SPECBED_BENCH_INTERVAL_H

#define IV_MAX_POS 32
#define IV_MAX_RANKS 16
#define IV_RANK_LABEL 48

/* One rank's own numbers in an interval, where the source reports ranks
 * separately: SGLang DP/TP/PP gauges (dp_rank="0", tp_rank="1", …), vLLM's
 * per-engine counters (engine="0"), an SGLang log line's "DP1 TP0" prefix.
 * The verdict judges each rank on its own (canary_verdict.h): a mean or a
 * sum over ranks would hide one bad rank (and a summed gauge is nonsense). */
typedef struct {
    char label[IV_RANK_LABEL];   /* e.g. dp_rank="1",tp_rank="0" or engine="0" or DP1 TP0 */
    double accept_len;       /* NaN: this rank gave none */
    double drafts;           /* its verify steps; NaN where the source counts none */
    double running;          /* its running requests; NaN unknown */
} iv_rank;

/* When the source's counters move, i.e. what an interval's accept length
 * and server tokens/s describe:
 *   step        every verify step as it runs (specbed, vLLM counters)
 *   completion  requests that FINISHED in the interval (llama.cpp: a slot
 *               adds its counts to /metrics when it is released)
 *   log         the server's own decode-log interval (SGLang "Decode batch")
 *   gauge       the server's last decode-log interval, read as a gauge (SGLang /metrics)
 *   client      no server numbers: the client's view only */
typedef enum { IV_BASIS_CLIENT = 0, IV_BASIS_STEP, IV_BASIS_COMPLETION, IV_BASIS_LOG, IV_BASIS_GAUGE } iv_basis;
const char *iv_basis_name(iv_basis b);
int iv_basis_from_name(const char *s, iv_basis *out);   /* 0 ok, -1 unknown */

typedef struct {
    double t_start, t_end;   /* seconds since the run started (live), or since the log's first line (offline) */
    double running;          /* requests being decoded at the end of the interval */
    double waiting;          /* requests queued at the end of the interval */
    double accept_len;       /* committed tokens per verify step per sequence, bonus token included */
    double accept_rate;      /* accepted drafts ÷ drafted tokens (SGLang: as its log line states it) */
    double gen_tps;          /* generated tokens per second over the interval */
    double drafts;           /* the accept length's denominator: sequence verify steps where the source
                                counts them (specbed), else num_drafts; NaN for log sources. What
                                --min-drafts judges; not written to intervals.csv under this name */
    double num_drafts;       /* Δ …_num_drafts_total: drafts verified (intervals.csv "drafts") */
    double verify_steps;     /* Δ sequence verify steps, NaN where the source has none (intervals.csv "verify_steps") */
    double draft_tokens, accepted;
    int n_pos;               /* per-position rates: pos_rate[0..n_pos-1]; NaN = position not reported */
    double pos_rate[IV_MAX_POS];   /* P(draft position i accepted) = accepted_at[i] ÷ drafts, unconditional */
    iv_basis basis;          /* what the server-side numbers describe (see iv_basis) */
    long line_no;            /* SGLang log line this row came from (1-based); 0 otherwise */
    /* Client-side view of the same interval (the load generator's own; NaN offline). */
    double inflight;         /* most requests in flight at once during the interval */
    double client_tps;       /* output tokens streamed per second: each request's tokens (its usage
                                completion_tokens, else its logprobs tokens, else one per content
                                chunk) spread over its content chunks, summed per interval */
    /* Per-rank view (n_ranks = 0: the source has no ranks; then accept_len
     * is the only number judged). With ranks, accept_len is the aggregate
     * (pooled counters; the mean of the ranks' gauges, never their sum) and
     * the verdict judges rank[i] one by one. */
    int n_ranks;
    iv_rank rank[IV_MAX_RANKS];
} iv_row;

void iv_row_clear(iv_row *r);   /* every quantity NaN, counts 0 */
#endif
