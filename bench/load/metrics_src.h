/* metrics_src.h — reading speculative-decoding counters from the servers
 * that bench/ drives, through their /metrics text only (no engine
 * internals), and turning two snapshots into one interval row.
 *
 *   specbed   specbed:spec_decode_num_drafts_total, …_num_draft_tokens_total,
 *             …_num_accepted_tokens_total, …_num_accepted_tokens_per_pos_total{position="i"},
 *             …_num_verify_steps_total, …_num_committed_tokens_total,
 *             specbed:num_requests_running / _waiting, specbed:generation_tokens_total
 *   vllm      the same names with the vllm: prefix (V1 engine; counters carry
 *             engine/model_name labels: summed over engines for the
 *             interval's accept length, and kept per engine too)
 *   llamacpp  llamacpp:spec_decode_num_drafts_total (verification steps),
 *             …_num_draft_tokens_total, …_num_accepted_tokens_total,
 *             …_num_accepted_tokens_per_pos_total{position="i"} (written only
 *             once a drafted request has finished: absent on a cold server),
 *             llamacpp:tokens_predicted_total, llamacpp:requests_processing /
 *             _deferred. A slot adds its counts when it is released, so these
 *             counters move at request COMPLETION (interval basis "completion")
 *   sglang    gauges sglang:spec_accept_length, sglang:spec_accept_rate,
 *             sglang:num_running_reqs, sglang:num_queue_reqs, sglang:gen_throughput
 *             — SGLang's per-interval truth is its "Decode batch" log line
 *             (metrics_sglang.h); the gauges are the fallback when no log is given.
 *
 * Accept length from counters = 1 + Δaccepted ÷ Δdrafts (vLLM's definition;
 * bonus token included). Per-position rate i = Δaccepted_at[i] ÷ Δdrafts:
 * vLLM's per-position counter is unconditional, so this already equals
 * Π_{j≤i} α_j. Where the server also counts sequence verify steps and the
 * tokens they committed (specbed), those are used instead: accept length =
 * Δcommitted ÷ Δsteps and the per-position denominator is Δsteps, so steps
 * in which the drafter proposed nothing count too, and
 * 1 + Σ_i rate_i equals the measured accept length at the depth run.
 *
 * Ranks. A source that labels its series by rank (vLLM's engine="i";
 * SGLang's dp_rank / tp_rank / pp_rank, prom_rank_key()) is also read per
 * rank: the interval row gets each rank's accept length, verify steps and
 * running requests (iv_row.rank), so that the verdict judges every rank on
 * its own and names the bad one. Counters are pooled for the row's own
 * accept length (the correct aggregate); gauges — SGLang's accept length
 * and rate — are averaged over the ranks that report one, never summed.
 *
 * Per-position series are matched by their position label, not by order:
 * a series absent from the start snapshot counts from 0 (llama.cpp and
 * vLLM create them lazily), and a position absent from both is not
 * reported. Positions the run provably never drafted are left out rather
 * than reported as 0: every draft fills position 0 and a draft that reaches
 * position i filled every position before it, so with D draft tokens over S
 * drafts position p was drafted at most if S + Σ_{0<i≤p} max(1, a_i) ≤ D
 * (a_i = the most accepted at any position ≥ i); deeper positions are
 * dropped (e.g. a server built for depth 4 whose run drafted one token per
 * step reports position 0 only). */
#ifndef SPECBED_BENCH_METRICS_SRC_H
#define SPECBED_BENCH_METRICS_SRC_H
#include <stddef.h>
#include "interval.h"

typedef enum { MSRC_AUTO, MSRC_SPECBED, MSRC_VLLM, MSRC_LLAMACPP, MSRC_SGLANG, MSRC_NONE } msrc_kind;

const char *msrc_name(msrc_kind k);
int msrc_from_name(const char *s, msrc_kind *out);   /* 0 ok, -1 unknown */

/* The source a /metrics body came from (by its metric-name prefix);
 * MSRC_NONE when no known prefix is present. */
msrc_kind msrc_detect(const char *metrics_text);

/* One rank's counters in a snapshot (NaN absent). */
typedef struct {
    char key[IV_RANK_LABEL];           /* prom_rank_key() */
    double drafts, accepted, steps, committed, running;
    double g_accept_len;               /* SGLang gauge */
} msnap_rank;

typedef struct {
    int has_spec;            /* the speculative counters were present */
    double drafts, draft_tokens, accepted, gen_tokens;
    double steps, committed;           /* sequence verify steps and their committed tokens (specbed); NaN absent */
    unsigned pos_mask;                 /* bit i: the per-position series for position i was present */
    double per_pos[IV_MAX_POS];
    double running, waiting;           /* gauges; NaN when absent */
    double g_accept_len, g_accept_rate, g_gen_tps;   /* SGLang gauges; NaN otherwise */
    int n_ranks;                       /* series with rank labels, by rank (IV_MAX_RANKS at most; more are dropped) */
    msnap_rank rank[IV_MAX_RANKS];
} msnap;

/* Reads the counters of source k (not AUTO) from a /metrics body. */
int msnap_parse(msrc_kind k, const char *text, msnap *out, char *err, size_t errlen);

/* Interval [t0, t1] from snapshots a (start) and b (end). A counter that went
 * backwards (server restart) gives an interval with NaN rates. */
void msnap_interval(msrc_kind k, const msnap *a, const msnap *b, double t0, double t1, iv_row *out);

/* Whole-run totals b − a, as acceptance length / rate / per-position rates
 * (NaN when no drafts), in two definitions:
 *   vLLM's (`vllm bench serve`, vllm/benchmarks/serve.py, benchmark():
 *     spec_decode_stats): acceptance length = 1 + Δaccepted ÷ Δnum_drafts
 *     (0 when no drafts), per-position rate i = Δaccepted_at[i] ÷ Δnum_drafts
 *     for every position whose series is in either snapshot (a series absent
 *     from the end snapshot counts as unchanged) — what summary.json writes
 *     under vLLM's spec_decode_* names;
 *   specbed's: committed ÷ verify steps where the source counts steps (a
 *     step in which the drafter proposed nothing counts), per-position ÷ the
 *     same denominator, positions the run provably never drafted left out
 *     (top of this file) — summary.json's specbed_* names, and every
 *     interval row. Where the source has no step counters the two agree. */
typedef struct {
    double drafts;               /* specbed's accept-length denominator: verify steps where counted, else num_drafts */
    double num_drafts;           /* Δ …_num_drafts_total: proposals verified (vLLM's spec_decode_num_drafts) */
    double steps;                /* Δ sequence verify steps (specbed); NaN where the source has none */
    double draft_tokens, accepted;
    double accept_len;           /* specbed's: committed ÷ steps, else 1 + accepted ÷ drafts */
    double accept_rate;          /* accepted ÷ draft tokens, a FRACTION (summary.json prints vLLM's percent) */
    int n_pos;
    double pos_rate[IV_MAX_POS]; /* specbed's; NaN = position not reported (see the top of this file) */
    double vllm_accept_len;      /* vLLM's 1 + accepted ÷ num_drafts (0 when num_drafts is 0); NaN unknown */
    int vllm_n_pos;
    double vllm_pos_rate[IV_MAX_POS];   /* vLLM's accepted_at[i] ÷ num_drafts, every position seen */
} mtotals;
void msnap_totals(const msnap *a, const msnap *b, mtotals *out);
#endif
