/* label: unit */
/* test_bench_sim.c — `specbed simulate`'s event loop (bench/sim/sim.h) against
 * hand-computed timelines (one request, acceptance 1 or 0, a flat or
 * linear cost: exact TTFT, E2E, TPOT, steps, accept length), conservation
 * (every request finishes exactly once with exactly its output length),
 * seeded reproducibility, least-loaded vs round-robin, acceptance sampling
 * against E(k), the 95% interval, and the input parsers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "recommend.h"
#include "sim.h"
#include "test_util.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)
#define CLOSE(a, b, tol) (fabs((a) - (b)) <= (tol))

static cost_curve flat_1ms, linear_1ms;   /* 1 ms per step; 1 ms per row */

static void curves(void) {
    double r1[1] = {1}, s1[1] = {1e-3};
    cost_curve_from_points(&flat_1ms, r1, s1, 1, "flat");
    double r2[2] = {1, 1000}, s2[2] = {1e-3, 1.0};
    cost_curve_from_points(&linear_1ms, r2, s2, 2, "linear");
}

static sim_accept acc_of(double p, int n) {
    sim_accept a;
    memset(&a, 0, sizeof a);
    snprintf(a.drafter, sizeof a.drafter, "t");
    snprintf(a.workload, sizeof a.workload, "w");
    for (int i = 0; i < n; i++) a.p[i] = p;
    a.n_pos = n;
    a.proposal_rate = a.draft_fill = 1;
    return a;
}

/* n requests from a closed loop of `conc`, fixed lengths, one replica */
static sim_config one(const cost_curve *cost, int depth, const sim_accept *a, int prompt, int out, int n, int conc) {
    sim_config c;
    sim_config_defaults(&c);
    c.cost = cost;
    c.depth = depth;
    c.acc = a;
    c.prompt_len = prompt;
    c.output_len = out;
    c.n_requests = n;
    c.profile.n = 1;
    c.profile.ph[0].dur_s = INFINITY;
    c.profile.ph[0].concurrency = conc;
    c.keep_records = 1;
    return c;
}

static void test_hand_cases(void) {
    char err[512];
    sim_result r;
    /* depth 0, flat 1 ms: prefill step (10 rows) gives token 1 at 1 ms, then one token per 1 ms step */
    sim_config c = one(&flat_1ms, 0, NULL, 10, 5, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(r.n_rec == 1 && NEAR(r.rec[0].first_s, 1e-3) && NEAR(r.rec[0].finish_s, 5e-3) && r.rec[0].steps == 5);
    CHECK(NEAR(r.m[SIM_M_MEAN_TTFT], 1.0) && NEAR(r.m[SIM_M_MEAN_E2EL], 5.0) && NEAR(r.m[SIM_M_MEAN_TPOT], 1.0));
    CHECK(NEAR(r.m[SIM_M_MEAN_ITL], 1.0) && NEAR(r.m[SIM_M_STEPS], 5) && NEAR(r.m[SIM_M_OUT_TPUT], 1000));
    CHECK(CLOSE(r.m[SIM_M_P99_ITL], 1.0, 1.0 * 0.001));   /* the ITL histogram: within 0.1% */
    CHECK(isnan(r.m[SIM_M_ACCEPT_LEN]));                  /* nothing drafted, as vLLM leaves it out */
    sim_result_free(&r);

    /* every draft accepted (p = 1), depth 3, 9 tokens: 1 (prefill) + 4 + 4 in 3 steps */
    sim_accept all = acc_of(1.0, 8), none = acc_of(0.0, 8);
    c = one(&flat_1ms, 3, &all, 10, 9, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].finish_s, 3e-3) && r.rec[0].steps == 3 && r.rec[0].committed == 9);
    CHECK(NEAR(r.m[SIM_M_ACCEPT_LEN], 4) && NEAR(r.m[SIM_M_ACCEPT_RATE], 100) && NEAR(r.m[SIM_M_MEAN_TPOT], 0.25));
    sim_result_free(&r);
    /* 8 tokens: the last step may draft only 2 (the bonus takes the last): 1 + 4 + 3, accept length 3.5 */
    c = one(&flat_1ms, 3, &all, 10, 8, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].finish_s, 3e-3) && NEAR(r.m[SIM_M_ACCEPT_LEN], 3.5));
    sim_result_free(&r);

    /* nothing accepted (p = 0), depth 3, linear cost 1 ms/row, 5 tokens:
     * prefill 10 rows = 10 ms; decode steps draft min(3, left − 1) = 3, 2, 1, 0 → 4 + 3 + 2 + 1 ms */
    c = one(&linear_1ms, 3, &none, 10, 5, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 10e-3) && NEAR(r.rec[0].finish_s, 20e-3) && r.rec[0].steps == 5);
    CHECK(NEAR(r.m[SIM_M_ACCEPT_LEN], 1) && NEAR(r.m[SIM_M_ACCEPT_RATE], 0) && NEAR(r.m[SIM_M_MEAN_ROWS], 4));
    sim_result_free(&r);
    /* + 0.5 ms per drafted token (6 drafted) and 0.25 ms per step (5 steps) */
    c.draft_s_per_token = 0.5e-3;
    c.step_overhead_s = 0.25e-3;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].finish_s, 20e-3 + 3e-3 + 1.25e-3));
    sim_result_free(&r);

    /* two at once share every step: both first tokens at 1 ms, both done at 3 ms */
    c = one(&flat_1ms, 0, NULL, 10, 3, 2, 2);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(r.n_rec == 2 && NEAR(r.rec[0].first_s, 1e-3) && NEAR(r.rec[1].first_s, 1e-3) &&
          NEAR(r.rec[0].finish_s, 3e-3) && NEAR(r.rec[1].finish_s, 3e-3) && NEAR(r.m[SIM_M_STEPS], 3));
    sim_result_free(&r);
    /* max-running 1: the second waits for the first (done at 3 ms), then 1 + 2 ms */
    c.max_running = 1;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[1].first_s, 4e-3) && NEAR(r.rec[1].finish_s, 6e-3) && NEAR(r.m[SIM_M_MEAN_TTFT], 2.5));
    CHECK(NEAR(r.m[SIM_M_MAX_WAITING], 1));
    sim_result_free(&r);
    /* row budget 12: A's prompt (10) and 2 rows of B's; then A decodes (1 row) beside B's other 8 */
    c = one(&flat_1ms, 0, NULL, 10, 3, 2, 2);
    c.max_running = 2;
    c.row_budget = 12;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 1e-3) && NEAR(r.rec[1].first_s, 2e-3) && NEAR(r.rec[0].finish_s, 3e-3) &&
          NEAR(r.rec[1].finish_s, 4e-3));
    sim_result_free(&r);
    /* a prompt row needs no logits but a last chunk's last: with 0.4 ms of lm_head per row on the linear
     * curve, a 10-row prefill costs 10 − 9 × 0.4 = 6.4 ms; chunks of 4 cost 4 − 4 × 0.4, the same, then 2 − 1 × 0.4;
     * decode rows keep theirs */
    cost_curve lin_lm = linear_1ms;
    lin_lm.logits_seconds_per_row = 0.4e-3;
    c = one(&lin_lm, 0, NULL, 10, 2, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 6.4e-3) && NEAR(r.rec[0].finish_s, 7.4e-3));
    sim_result_free(&r);
    c.prefill_chunk = 4;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 2 * 2.4e-3 + 1.6e-3) && NEAR(r.rec[0].finish_s, 2 * 2.4e-3 + 1.6e-3 + 1e-3));
    sim_result_free(&r);
    /* attention beyond the table's history: 0.01 ms per row per context token, table at history 5.
     * Prefill of 10 rows from 0: 10 − 10 × 5 × 0.01 = 9.5 ms; decode rows start at 10, then 11
     * (the KV holds the prompt and all but the last token): 1 + 5 × 0.01, 1 + 6 × 0.01 */
    cost_curve lin_ctx = linear_1ms;
    lin_ctx.history = 5;
    lin_ctx.context_seconds_per_row_token = 0.01e-3;
    c = one(&lin_ctx, 0, NULL, 10, 3, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 9.5e-3) && NEAR(r.rec[0].finish_s, 9.5e-3 + 1.05e-3 + 1.06e-3));
    sim_result_free(&r);
    /* a table without its history says nothing about context: no term */
    lin_ctx.history = 0;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 10e-3) && NEAR(r.rec[0].finish_s, 12e-3));
    sim_result_free(&r);
    /* host time per committed token, 0.1 ms: the prefill step commits the first token (1 ms + 0.1),
     * then with every draft accepted at depth 3 a step commits 4 (1 ms + 0.4): 9 tokens = 1 + 4 + 4 */
    c = one(&flat_1ms, 3, &all, 10, 9, 1, 1);
    c.token_overhead_s = 0.1e-3;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 1.1e-3) && NEAR(r.rec[0].finish_s, 1.1e-3 + 2 * 1.4e-3));
    sim_result_free(&r);
    /* expected tokens with p = 0.5 at depth 2: E(2) = 1 + 0.5 + 0.5 = 2 → each decode step 1 + 0.2 ms */
    sim_accept half = acc_of(0.5, 8);
    c = one(&flat_1ms, 2, &half, 10, 400, 1, 1);
    c.token_overhead_s = 0.1e-3;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    /* (the last step or two draft fewer: ≤ 2 × 0.1 ms over ~200 steps) */
    CHECK(CLOSE((r.rec[0].finish_s - r.rec[0].first_s) / (r.rec[0].steps - 1), 1.2e-3, 0.002e-3));
    sim_result_free(&r);
    /* the drafter per drafting batch: 0.5 ms per sequence alone, 0.25 each when two draft together,
     * plus 0.1 ms per prompt token in a request's first drafting step (its first proposal catches the
     * drafter up on the prompt). Two requests, depth 1, nothing accepted, 3 tokens: prefill 1 ms; a
     * decode step of 1 ms + 2 × 0.25 + 2 × 10 × 0.1; the last token's step drafts nothing (1 ms) */
    cost_curve flat_d = flat_1ms;
    flat_d.draft_seconds_per_prompt_token = 0.1e-3;
    flat_d.n_draft_by_seqs = 2;
    flat_d.draft_by_seqs[0] = (cost_draft_point){1, 0.5e-3, 0};
    flat_d.draft_by_seqs[1] = (cost_draft_point){2, 0.25e-3, 0};
    c = one(&flat_d, 1, &none, 10, 3, 2, 2);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 1e-3) && NEAR(r.rec[0].finish_s, 1e-3 + 3.5e-3 + 1e-3));
    sim_result_free(&r);
    c = one(&flat_d, 1, &none, 10, 4, 1, 1);   /* alone: 0.5 ms per drafting step, 1 ms at the first */
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 1e-3) && NEAR(r.rec[0].finish_s, 1e-3 + 2.5e-3 + 1.5e-3 + 1e-3));
    sim_result_free(&r);
    c = one(&flat_d, 0, NULL, 10, 3, 1, 1);    /* speculation off: no drafter cost at all */
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 1e-3) && NEAR(r.rec[0].finish_s, 3e-3));
    sim_result_free(&r);
    /* the server's 2 ms per request before its first step: in TTFT and E2E; two requests arriving
     * together still share their steps */
    c = one(&flat_1ms, 0, NULL, 10, 3, 2, 2);
    c.request_overhead_s = 2e-3;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 3e-3) && NEAR(r.rec[1].first_s, 3e-3) && NEAR(r.rec[1].finish_s, 5e-3) &&
          NEAR(r.m[SIM_M_MEAN_TTFT], 3.0) && NEAR(r.m[SIM_M_STEPS], 3));
    sim_result_free(&r);
    c.request_overhead_s = -1;
    CHECK(sim_run(&c, &r, err, sizeof err) == -1 && strstr(err, "overhead"));
    /* prefill chunk 4: a 10-token prompt takes 3 steps (4 + 4 + 2) */
    c = one(&flat_1ms, 0, NULL, 10, 2, 1, 1);
    c.prefill_chunk = 4;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].first_s, 3e-3) && NEAR(r.rec[0].finish_s, 4e-3));
    sim_result_free(&r);
    /* a one-token output finishes at its prefill and has no TPOT */
    c = one(&flat_1ms, 2, &all, 10, 1, 1, 1);
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[0].finish_s, 1e-3) && isnan(r.m[SIM_M_MEAN_TPOT]) && NEAR(r.m[SIM_M_MEAN_E2EL], 1.0));
    sim_result_free(&r);
    /* closed-loop think time: the client's second request leaves 2 ms after the first finished */
    c = one(&flat_1ms, 0, NULL, 10, 2, 2, 1);
    c.think_s = 2e-3;
    CHECK(!sim_run(&c, &r, err, sizeof err));
    CHECK(NEAR(r.rec[1].arrival_s, 4e-3) && NEAR(r.rec[1].finish_s, 6e-3) && NEAR(r.m[SIM_M_DURATION], 6e-3));
    sim_result_free(&r);
}

/* Every request that arrives finishes exactly once, with its own output length. */
static void check_conservation(const sim_config *c, const char *what) {
    char err[512];
    sim_result r;
    if (sim_run(c, &r, err, sizeof err)) { CHECKF(0, "%s: %s", what, err); return; }
    long bad = 0, out = 0, in = 0;
    for (long i = 0; i < r.n_rec; i++) {
        bad += r.rec[i].finished != 1 || r.rec[i].committed != r.rec[i].output || !(r.rec[i].finish_s >= r.rec[i].first_s) ||
               !(r.rec[i].first_s > r.rec[i].arrival_s);
        out += r.rec[i].output;
        in += r.rec[i].prompt;
    }
    CHECKF(r.n_rec == r.arrivals && r.arrivals > 100, "%s: %ld records, %ld arrivals", what, r.n_rec, r.arrivals);
    CHECKF(bad == 0, "%s: %ld requests not finished exactly once with their length", what, bad);
    CHECKF(NEAR(r.m[SIM_M_COMPLETED], (double)r.arrivals), "%s: completed %g of %ld", what, r.m[SIM_M_COMPLETED], r.arrivals);
    CHECKF(NEAR(r.m[SIM_M_TOTAL_OUTPUT], (double)out) && NEAR(r.m[SIM_M_TOTAL_INPUT], (double)in), "%s: token totals", what);
    long per = 0;
    for (int k = 0; k < 64 && k < c->replicas; k++) per += r.replica_requests[k];
    CHECKF(c->replicas > 64 || per == r.arrivals, "%s: replica counts sum to %ld", what, per);
    sim_result_free(&r);
}

static void test_conservation(void) {
    sim_accept a = acc_of(0, 4);
    a.p[0] = 0.8; a.p[1] = 0.6; a.p[2] = 0.45; a.p[3] = 0.3;
    int pr[5] = {7, 50, 300, 1, 128}, ou[5] = {1, 2, 17, 200, 0};
    sim_lengths L = {5, pr, ou};
    sim_config c = one(&linear_1ms, 3, &a, 0, 33, 0, 0);
    c.lengths = &L;
    c.replicas = 4;
    c.max_running = 6;
    c.row_budget = 40;
    c.prefill_chunk = 64;
    c.profile.ph[0].dur_s = 30;
    c.profile.ph[0].concurrency = 0;
    c.profile.ph[0].rate = 20;
    c.burstiness = 0.3;
    c.seed = 11;
    check_conservation(&c, "bursty open loop, 4 replicas, round-robin");
    c.balance = SIM_BAL_LEAST_LOADED;
    c.depth = 7;   /* deeper than the known positions */
    check_conservation(&c, "least-loaded, depth 7");
    c.depth = 0;
    c.replicas = 1;
    c.profile.ph[0].rate = 200;   /* far beyond capacity: a queue builds, then drains */
    c.profile.ph[0].dur_s = 2;
    check_conservation(&c, "overloaded, depth 0");
    char err[256];
    CHECK(!sim_phases_parse("1:concurrency=3,2:rate=100,1:c=2", &c.profile, err, sizeof err));
    c.depth = 2;
    c.replicas = 3;
    a.proposal_rate = 0.5;
    a.draft_fill = 0.6;
    check_conservation(&c, "phases closed → open → closed, proposal rate 0.5");
    c.n_requests = 150;   /* the request count ends arrivals before the profile does */
    sim_result r;
    CHECK(!sim_run(&c, &r, err, sizeof err) && r.arrivals == 150 && NEAR(r.m[SIM_M_COMPLETED], 150));
    sim_result_free(&r);
}

static void test_reproducible(void) {
    sim_accept a = acc_of(0.7, 3);
    a.p[1] = 0.5; a.p[2] = 0.3;
    sim_config c = one(&linear_1ms, 3, &a, 64, 40, 0, 0);
    c.keep_records = 0;
    c.replicas = 3;
    c.profile.ph[0].dur_s = 20;
    c.profile.ph[0].concurrency = 0;
    c.profile.ph[0].rate = 15;
    c.seed = 5;
    char err[256];
    sim_result x, y, z;
    CHECK(!sim_run(&c, &x, err, sizeof err) && !sim_run(&c, &y, err, sizeof err));
    CHECK(!memcmp(x.m, y.m, sizeof x.m) && x.arrivals == y.arrivals && x.accepted_tokens == y.accepted_tokens);
    c.seed = 6;
    CHECK(!sim_run(&c, &z, err, sizeof err));
    CHECK(z.arrivals != x.arrivals || !NEAR(z.m[SIM_M_MEAN_TTFT], x.m[SIM_M_MEAN_TTFT]));
    CHECK(!NEAR(z.m[SIM_M_MEAN_E2EL], x.m[SIM_M_MEAN_E2EL]));
    /* common random numbers: another depth sees the same arrivals */
    c.seed = 5;
    c.depth = 1;
    CHECK(!sim_run(&c, &z, err, sizeof err) && z.arrivals == x.arrivals && NEAR(z.m[SIM_M_TOTAL_INPUT], x.m[SIM_M_TOTAL_INPUT]));
    sim_result_free(&x); sim_result_free(&y); sim_result_free(&z);
}

static void test_balance(void) {
    /* closed loop of 4 clients on 4 replicas: least-loaded keeps one request per
     * replica, so every step is one row (1 ms) and TPOT is exactly 1 ms;
     * round-robin piles requests of uneven length onto busy replicas */
    int pr[3] = {5, 5, 5}, ou[3] = {3, 40, 200};
    sim_lengths L = {3, pr, ou};
    sim_config c = one(&linear_1ms, 0, NULL, 5, 10, 400, 4);
    c.lengths = &L;
    c.keep_records = 0;
    c.replicas = 4;
    c.balance = SIM_BAL_LEAST_LOADED;
    char err[256];
    sim_result ll, rr;
    CHECK(!sim_run(&c, &ll, err, sizeof err));
    c.balance = SIM_BAL_ROUND_ROBIN;
    CHECK(!sim_run(&c, &rr, err, sizeof err));
    CHECK(NEAR(ll.m[SIM_M_MEAN_TPOT], 1.0) && NEAR(ll.m[SIM_M_P99_TPOT], 1.0) && NEAR(ll.m[SIM_M_MEAN_TTFT], 5.0));
    CHECKF(rr.m[SIM_M_MEAN_TPOT] > 1.05 && rr.m[SIM_M_MEAN_E2EL] > ll.m[SIM_M_MEAN_E2EL],
           "round-robin TPOT %.3f E2E %.1f vs least-loaded %.3f %.1f", rr.m[SIM_M_MEAN_TPOT], rr.m[SIM_M_MEAN_E2EL],
           ll.m[SIM_M_MEAN_TPOT], ll.m[SIM_M_MEAN_E2EL]);
    CHECK(rr.m[SIM_M_OUT_TPUT] < ll.m[SIM_M_OUT_TPUT]);
    /* round-robin deals requests evenly */
    CHECK(rr.replica_requests[0] == 100 && rr.replica_requests[3] == 100);
    sim_result_free(&ll); sim_result_free(&rr);
}

static void test_acceptance(void) {
    double p[4] = {0.8, 0.6, 0.45, 0.3}, al[4];
    sim_alpha_from_rates(p, 4, al);
    CHECK(NEAR(al[0], 0.8) && NEAR(al[1], 0.75) && NEAR(al[2], 0.75) && NEAR(al[3], 0.3 / 0.45));
    /* E[a + 1] = 1 + Σ p_i; E[a²] = Σ_i (2i − 1) P(a ≥ i) with P(a ≥ i) = p_{i−1}.
     * Tolerance: 5 standard errors of the mean of N draws (a fixed seed makes the
     * test deterministic; a correct sampler fails it with probability ~6e-7). */
    const int N = 200000, K = 4;
    double e = rc_expected(p, 4, K), ea2 = 0;
    for (int i = 1; i <= K; i++) ea2 += (2 * i - 1) * p[i - 1];
    double var = ea2 - (e - 1) * (e - 1), tol = 5 * sqrt(var / N);
    ld_rng r;
    ld_rng_seed(&r, 42);
    long sum = 0, at_least[4] = {0};
    for (int n = 0; n < N; n++) {
        int a = sim_sample_accept(al, 4, K, &r);
        sum += a + 1;
        for (int i = 0; i < a; i++) at_least[i]++;
    }
    CHECKF(CLOSE((double)sum / N, e, tol), "mean %.4f vs E(4) %.4f (tol %.4f)", (double)sum / N, e, tol);
    for (int i = 0; i < 4; i++)   /* per-position: binomial, 5 sigma */
        CHECKF(CLOSE((double)at_least[i] / N, p[i], 5 * sqrt(p[i] * (1 - p[i]) / N)), "position %d: %.4f vs %.4f", i,
               (double)at_least[i] / N, p[i]);
    /* k below the known positions, and k beyond them (deeper = never accepted) */
    CHECK(sim_sample_accept(al, 4, 0, &r) == 0);
    for (int n = 0; n < 1000; n++) CHECK(sim_sample_accept(al, 2, 4, &r) <= 2);

    /* through the whole event loop: one long request, accept length = E(k) (the last
     * steps' cap on drafts biases it by < 1e-4 here); proposal rate q: 1 + q Σ p */
    char err[256];
    sim_accept a = acc_of(0, 4);
    memcpy(a.p, p, sizeof p);
    sim_config c = one(&flat_1ms, 3, &a, 8, 200001, 1, 1);
    c.keep_records = 0;
    sim_result res;
    CHECK(!sim_run(&c, &res, err, sizeof err));
    double e3 = rc_expected(p, 4, 3);
    CHECKF(CLOSE(res.m[SIM_M_ACCEPT_LEN], e3, 0.03), "accept length %.4f vs E(3) %.4f", res.m[SIM_M_ACCEPT_LEN], e3);
    CHECK(CLOSE(res.m[SIM_M_ACCEPT_RATE], 100 * (e3 - 1) / 3, 1.0));
    sim_result_free(&res);
    a.proposal_rate = 0.5;
    CHECK(!sim_run(&c, &res, err, sizeof err));
    CHECKF(CLOSE(res.m[SIM_M_ACCEPT_LEN], 1 + 0.5 * (e3 - 1), 0.03), "accept length %.4f with q 0.5", res.m[SIM_M_ACCEPT_LEN]);
    sim_result_free(&res);
    /* fitting q and fill back from what a run measures */
    sim_accept f = acc_of(0, 3);
    f.p[0] = 0.6; f.p[1] = 0.4; f.p[2] = 0.2;
    sim_accept_fit_fill(&f, 3, 1 + 0.5 * 1.2, 100 * 1.2 / 2.4);   /* half the steps propose; 2.4 of 3 drafted */
    CHECK(NEAR(f.proposal_rate, 0.5) && NEAR(f.draft_fill, 0.8));
}

static void test_interval_and_inputs(void) {
    double v[3] = {1, 2, 3}, m, lo, hi;
    sim_interval95(v, 3, &m, &lo, &hi);
    CHECK(NEAR(m, 2) && CLOSE(hi - m, 4.303 / sqrt(3.0), 1e-9) && CLOSE(m - lo, hi - m, 1e-12));
    sim_interval95(v, 1, &m, &lo, &hi);
    CHECK(NEAR(m, 1) && NEAR(lo, 1) && NEAR(hi, 1));
    double w[2] = {NAN, 5};
    sim_interval95(w, 2, &m, &lo, &hi);
    CHECK(NEAR(m, 5) && NEAR(lo, 5));

    ld_profile p;
    char err[512];
    CHECK(!sim_phases_parse("60:rate=2,30s:concurrency=8,1m:r=0.5", &p, err, sizeof err));
    CHECK(p.n == 3 && NEAR(p.ph[0].rate, 2) && p.ph[1].concurrency == 8 && NEAR(p.ph[2].dur_s, 60) && NEAR(p.ph[2].rate, 0.5));
    CHECK(!sim_phases_parse("60s@r2,60s@10", &p, err, sizeof err) && p.n == 2 && p.ph[1].concurrency == 10);
    CHECK(sim_phases_parse("60:speed=2", &p, err, sizeof err) == -1 && strstr(err, "unknown key"));
    CHECK(sim_phases_parse("60:rate=-1", &p, err, sizeof err) == -1);

    char path[] = "/tmp/test_bench_sim_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *good = "{\"code\": [0.8, 0.6, 0.3], \"prose\": {\"rates\": [0.5, 0.2], \"proposal_rate\": 0.9}}";
    CHECK(write(fd, good, strlen(good)) == (ssize_t)strlen(good));
    close(fd);
    sim_accept *a;
    int n;
    CHECK(!sim_accept_load_json(path, NULL, &a, &n, err, sizeof err));
    CHECK(n == 2 && !strcmp(a[0].workload, "code") && a[0].n_pos == 3 && NEAR(a[0].p[2], 0.3) && NEAR(a[0].proposal_rate, 1) &&
          !strcmp(a[1].workload, "prose") && NEAR(a[1].proposal_rate, 0.9) && !strcmp(a[0].drafter, "user"));
    free(a);
    FILE *f = fopen(path, "w");
    fputs("{\"code\": [0.5, 0.7]}", f);   /* rising: conditional rates given by mistake */
    fclose(f);
    CHECK(sim_accept_load_json(path, NULL, &a, &n, err, sizeof err) == -1 && strstr(err, "unconditional"));
    f = fopen(path, "w");
    fputs("{\"code\": [1.5]}", f);
    fclose(f);
    CHECK(sim_accept_load_json(path, NULL, &a, &n, err, sizeof err) == -1 && strstr(err, "[0, 1]"));
    unlink(path);

    sim_config c;
    sim_config_defaults(&c);
    c.cost = &flat_1ms;
    c.row_budget = 4;
    CHECK(sim_config_check(&c, err, sizeof err) == -1 && strstr(err, "row-budget"));
    c.row_budget = 400;
    c.depth = 2;
    CHECK(sim_config_check(&c, err, sizeof err) == -1 && strstr(err, "acceptance"));
}

/* The decision per load: the best depth, the shallowest within its interval,
 * whether depth 0 is, for a maximised and a minimised objective. */
static void test_decision(void) {
    sim_accept sets[2] = {acc_of(1.0, 4), acc_of(0.0, 4)};   /* every draft accepted; none */
    int depths[3] = {0, 1, 2}, reps[1] = {1};
    sim_load loads[1];
    memset(loads, 0, sizeof loads);
    loads[0].kind = SIM_LOAD_CONCURRENCY;
    loads[0].value = 1;
    snprintf(loads[0].label, sizeof loads[0].label, "c=1");
    sim_config base = one(&linear_1ms, 0, NULL, 4, 31, 20, 1);
    base.keep_records = 0;
    char err[256];
    for (int pass = 0; pass < 2; pass++) {
        sim_grid g;
        memset(&g, 0, sizeof g);
        g.sets = sets; g.n_sets = 2;
        g.depths = depths; g.n_depths = 3;
        g.replicas = reps; g.n_replicas = 1;
        g.loads = loads; g.n_loads = 1;
        g.base = &base;
        g.repeats = 3;
        g.objective = pass ? SIM_M_MEAN_TPOT : SIM_M_OUT_TPUT;
        CHECK(!sim_grid_run(&g, 0, err, sizeof err));
        /* p = 1, cost ∝ rows: depth k costs k+1 ms for k+1 tokens: a tie in TPOT; the
         * shallowest within the interval is depth 0 */
        const sim_decision *D = &g.dec[0];
        CHECK(D->best >= 0 && D->recommended == 0 && D->off_within == 1);
        /* p = 0: every draft is wasted, depth 0 is best outright */
        D = &g.dec[1];
        CHECK(depths[D->best] == 0 && D->recommended == 0 && D->off_within == 1 && NEAR(D->gain, 1));
        const sim_cell *c2 = &g.cells[sim_grid_at(&g, 1, 0, 0, 2)];
        CHECK(c2->mean[SIM_M_MEAN_TPOT] > 2.5 && NEAR(c2->lo[SIM_M_MEAN_TPOT], c2->hi[SIM_M_MEAN_TPOT]));
        sim_grid_free(&g);
    }
    /* a flat cost: accepted drafts are free, the deepest depth wins by ~3x */
    base.cost = &flat_1ms;
    sim_grid g;
    memset(&g, 0, sizeof g);
    g.sets = sets; g.n_sets = 1;
    g.depths = depths; g.n_depths = 3;
    g.replicas = reps; g.n_replicas = 1;
    g.loads = loads; g.n_loads = 1;
    g.base = &base;
    g.repeats = 2;
    g.objective = SIM_M_MEAN_TPOT;
    CHECK(!sim_grid_run(&g, 0, err, sizeof err));
    CHECK(depths[g.dec[0].best] == 2 && depths[g.dec[0].recommended] == 2 && !g.dec[0].off_within && NEAR(g.dec[0].gain, 3));
    char *md = sim_grid_markdown(&g);
    CHECK(md && strstr(md, "minimised") && strstr(md, "| **2** |"));
    free(md);
    sim_grid_free(&g);
}

int main(void) {
    curves();
    test_hand_cases();
    test_conservation();
    test_reproducible();
    test_balance();
    test_acceptance();
    test_interval_and_inputs();
    test_decision();
    return tu_done("test_bench_sim");
}
