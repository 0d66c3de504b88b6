/* recommend.h — choosing a draft depth from measurements (the significance rule is rc_choose below).
 *
 * Expected committed tokens per verify step at depth k, from per-position
 * acceptance: E(k) = 1 + Σ_{i=1..k} Π_{j≤i} α_j, with α_j the conditional
 * acceptance of position j. The per-position counters the servers export
 * (vLLM's spec_decode_num_accepted_tokens_per_pos, specbed's) are
 * unconditional — accepted_at[i] ÷ drafts is already Π_{j≤i} α_j — so with
 * those rates p_i (0-based) E(k) = 1 + Σ_{i<k} p_i.
 *
 * Predicted output throughput of c concurrent sequences at depth k:
 *   rows  = c · (k + 1)                 (verify rows per step)
 *   step  = cost(c sequences, rows) + c · (draft_seconds_per_step [k > 0]
 *           + k · draft_seconds_per_token)
 *   decode tok/s = c · E(k) ÷ step
 * and, end to end as the load generator measures it (closed loop, N output
 * tokens per request, a per-request overhead T0 — prefill and queueing,
 * taken as the mean TTFT of the speculation-off run):
 *   tok/s = c · N ÷ (T0 + (N − 1) · step ÷ E(k))
 * cost() is the one cost curve (common/cost_curve.h, the same the verify
 * policies use): a `specbed profile` JSON, bench_engine's CSV, or — when
 * none is given — points measured by the sweep itself: for a run at depth
 * k and concurrency c, step = accept length × mean TPOT at rows = c(k+1)
 * (drafting included, so S = 0). */
#ifndef SPECBED_BENCH_RECOMMEND_H
#define SPECBED_BENCH_RECOMMEND_H
#include <stddef.h>
#include "cost_curve.h"

/* E(k) from unconditional per-position rates p[0..n-1]; positions past n
 * count as 0 (nothing known is not assumed accepted). */
double rc_expected(const double *p, int n, int k);
/* E(k) from conditional rates alpha[0..n-1]. */
double rc_expected_cond(const double *alpha, int n, int k);

typedef struct {
    double e_k, step_s, tps;
} rc_pred;
/* n_out ≤ 1 or overhead_s NaN: the decode-only form. */
rc_pred rc_predict(const cost_curve *t, const double *p, int n, int k, int concurrency, double n_out, double overhead_s);

/* Index of the largest value (ties: the smaller index, i.e. the shallower
 * depth when v is ordered by depth); NaN entries are skipped; -1 when none. */
int rc_argmax(const double *v, int n);

/* A gain over speculation off: the ratio of throughputs and its 95%
 * interval (report_data.c: paired by repeat, stats.h st_two_level). */
typedef struct { double est, lo, hi; } rc_gain;
/* 1 significantly better (lo > 1), -1 significantly worse (hi < 1), 0 within noise. */
int rc_verdict(const rc_gain *g);
/* The significance rule. Over depth[0..n-1] with gains g (depth-0 entries
 * ignored): best = the depth with the highest gain estimate; the
 * recommendation is the shallowest depth that is significantly better than
 * off and whose estimate lies within the best's interval (≥ its lo), else
 * the best itself when it is significant, else the significant depth with
 * the highest estimate. Returns its index, or -1 ("speculation off") when
 * no depth is significantly better. *best_out: the best's index (-1 none). */
int rc_choose(const int *depth, const rc_gain *g, int n, int *best_out);

/* A monotone cost curve from noisy step times: points with equal rows are
 * pooled (weights summed, weighted mean), then fit by weighted least-squares
 * isotonic regression (stats.h st_isotonic), so a point that came out
 * cheap by chance pulls its neighbours down instead of being lifted to the
 * running maximum. w NULL = equal weights. 0 ok, -1 out of memory. */
int rc_fit_monotone(cost_curve *c, const double *rows, const double *sec, const double *w, int n, const char *source);

/* The content-bound depth: the deepest k ≤ max_k such that every draft row
 * up to k raised the predicted decode throughput c·E(j) ÷ step(j), with
 * step(j) = cost(c(j+1)) + c·(draft per step [j > 0] + j·draft per token)
 * + overhead_s — past it an extra row
 * costs more than it returns. 0 when even the first row does not pay. */
int rc_break_even(const cost_curve *t, const double *p, int n, int concurrency, double overhead_s, int max_k);
/* Seconds of drafting per step for c sequences drafting d tokens each (0 at d = 0). */
double rc_draft_seconds(const cost_curve *t, int concurrency, double d);
#endif
