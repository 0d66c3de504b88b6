/* label: bench */
/* test_bench_parsers.c — the metric sources on fixtures in the servers' real
 * formats (tests/fixtures/metrics, written by scripts/goldens/make_bench_fixtures.py):
 * vLLM, llama.cpp, specbed and SGLang /metrics, SGLang "Decode batch" log
 * lines of both generations (and hybrid / PD / iteration variants), interval
 * arithmetic between two snapshots (a cold llama-server's per-position
 * series, positions never drafted), SGLang timestamp prefixes, the SSE
 * framing and its size caps, workload JSONL forms, and the interval CSV
 * round trip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "input_file.h"
#include "interval_csv.h"
#include "metrics_sglang.h"
#include "metrics_src.h"
#include "prom.h"
#include "sse.h"
#include "test_util.h"
#include "workload.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static char *bench_fixture(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/bench/%s", name);
    char *t = tu_read_file(tu_path(rel), NULL);
    CHECKF(t != NULL, "cannot read %s", rel);
    return t;
}

static char *fixture(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/metrics/%s", name);
    char *t = tu_read_file(tu_path(rel), NULL);
    CHECKF(t != NULL, "cannot read %s", rel);
    return t;
}

static void snaps(msrc_kind k, const char *a, const char *b, msnap *sa, msnap *sb) {
    char *ta = fixture(a), *tb = fixture(b);
    char err[256];
    CHECKF(ta && tb && !msnap_parse(k, ta, sa, err, sizeof err), "%s", err);
    CHECKF(ta && tb && !msnap_parse(k, tb, sb, err, sizeof err), "%s", err);
    free(ta);
    free(tb);
}

static void test_prom(void) {
    char *t = fixture("vllm_a.txt");
    if (!t) return;
    prom_doc d;
    CHECK(!prom_parse(t, &d, NULL, 0));
    CHECK(d.n_bad == 0);
    int n;
    /* two engines are summed; the _created gauge is a different name */
    CHECK(NEAR(prom_sum(&d, "vllm:spec_decode_num_drafts_total", NULL, NULL, &n), 150) && n == 2);
    CHECK(NEAR(prom_sum(&d, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position", "1", &n), 75) && n == 2);
    CHECK(prom_sum(&d, "vllm:nope", NULL, NULL, &n) == 0 && n == 0);
    char v[64];
    CHECK(!prom_label(d.s[0].labels, "model_name", v, sizeof v) && !strcmp(v, "Qwen/Qwen3-8B"));
    CHECK(prom_label(d.s[0].labels, "position", v, sizeof v) == -1);
    CHECK(prom_has_prefix(&d, "vllm:") && !prom_has_prefix(&d, "sglang:"));
    prom_free(&d);
    free(t);
    /* escapes, +Inf, junk lines, CRLF, timestamps */
    const char *odd = "# HELP x y\r\nm{a=\"q\\\"}x\",b=\"2\"} 3 1712345678\r\nnot a metric line\nh_bucket{le=\"+Inf\"} +Inf\n";
    CHECK(!prom_parse(odd, &d, NULL, 0));
    CHECK(d.n == 2 && d.n_bad == 1);
    CHECK(d.n == 2 && NEAR(d.s[0].value, 3) && isinf(d.s[1].value));
    CHECK(!prom_label(d.s[0].labels, "a", v, sizeof v) && !strcmp(v, "q\"}x"));
    CHECK(!prom_label(d.s[0].labels, "b", v, sizeof v) && !strcmp(v, "2"));
    prom_free(&d);
}

static void test_detect(void) {
    const char *f[4] = {"vllm_a.txt", "llamacpp_a.txt", "specbed_a.txt", "sglang_metrics.txt"};
    msrc_kind want[4] = {MSRC_VLLM, MSRC_LLAMACPP, MSRC_SPECBED, MSRC_SGLANG};
    for (int i = 0; i < 4; i++) {
        char *t = fixture(f[i]);
        CHECKF(t && msrc_detect(t) == want[i], "%s detected as %s", f[i], t ? msrc_name(msrc_detect(t)) : "?");
        free(t);
    }
    CHECK(msrc_detect("some_other_metric 1\n") == MSRC_NONE);
    msrc_kind k;
    CHECK(!msrc_from_name("llama.cpp", &k) && k == MSRC_LLAMACPP);
    CHECK(msrc_from_name("tgi", &k) == -1);
}

static void test_vllm_interval(void) {
    msnap a, b;
    snaps(MSRC_VLLM, "vllm_a.txt", "vllm_b.txt", &a, &b);
    CHECK(a.has_spec && a.pos_mask == 7u && NEAR(a.running, 4) && NEAR(a.waiting, 2));
    iv_row r;
    msnap_interval(MSRC_VLLM, &a, &b, 10, 15, &r);
    CHECK(NEAR(r.drafts, 200) && NEAR(r.draft_tokens, 600) && NEAR(r.accepted, 280));
    CHECKF(NEAR(r.accept_len, 2.4), "vLLM accept length %g, want 1 + 280/200", r.accept_len);
    CHECK(NEAR(r.accept_rate, 280.0 / 600));
    CHECK(r.n_pos == 3 && NEAR(r.pos_rate[0], 0.7) && NEAR(r.pos_rate[1], 0.45) && NEAR(r.pos_rate[2], 0.25));
    /* unconditional per-position rates sum to accept length − 1 */
    CHECK(NEAR(1 + r.pos_rate[0] + r.pos_rate[1] + r.pos_rate[2], r.accept_len));
    CHECK(NEAR(r.gen_tps, 1100.0 / 5) && NEAR(r.running, 6) && NEAR(r.waiting, 1));
    CHECK(r.t_start == 10 && r.t_end == 15);
    /* a counter going backwards (restart) gives no rates, not garbage */
    msnap_interval(MSRC_VLLM, &b, &a, 15, 20, &r);
    CHECK(isnan(r.accept_len) && isnan(r.drafts) && isnan(r.gen_tps));
    /* no change in drafts: no accept length (an idle interval is not a flag) */
    msnap_interval(MSRC_VLLM, &a, &a, 0, 1, &r);
    CHECK(isnan(r.accept_len) && NEAR(r.drafts, 0));
}

static void test_llamacpp_interval(void) {
    msnap a, b;
    snaps(MSRC_LLAMACPP, "llamacpp_a.txt", "llamacpp_b.txt", &a, &b);
    CHECK(a.has_spec && a.pos_mask == 0);
    iv_row r;
    msnap_interval(MSRC_LLAMACPP, &a, &b, 0, 2, &r);
    CHECK(NEAR(r.drafts, 20) && NEAR(r.accept_len, 1 + 440.0 / 20) && NEAR(r.accept_rate, 440.0 / 800));
    CHECK(r.n_pos == 0 && NEAR(r.gen_tps, 500) && NEAR(r.running, 2) && NEAR(r.waiting, 3));
}

/* A cold llama-server has no per-position series until a drafted request
 * finishes: the series missing from the first snapshot count from 0 (they
 * used to wipe every position), in the current /metrics format. */
static void test_llamacpp_cold(void) {
    char *tc = bench_fixture("llamacpp_cold.txt"), *tw = bench_fixture("llamacpp_warm.txt");
    if (!tc || !tw) { free(tc); free(tw); return; }
    CHECK(msrc_detect(tc) == MSRC_LLAMACPP && msrc_detect(tw) == MSRC_LLAMACPP);
    msnap a, b;
    CHECK(!msnap_parse(MSRC_LLAMACPP, tc, &a, NULL, 0) && !msnap_parse(MSRC_LLAMACPP, tw, &b, NULL, 0));
    CHECK(a.has_spec && a.pos_mask == 0 && b.pos_mask == 15u && NEAR(b.per_pos[3], 40));
    iv_row r;
    msnap_interval(MSRC_LLAMACPP, &a, &b, 0, 5, &r);
    CHECKF(r.n_pos == 4, "cold → warm: %d positions, want 4", r.n_pos);
    CHECK(NEAR(r.pos_rate[0], 90.0 / 96) && NEAR(r.pos_rate[1], 75.0 / 96) && NEAR(r.pos_rate[2], 55.0 / 96) &&
          NEAR(r.pos_rate[3], 40.0 / 96));
    CHECK(NEAR(r.accept_len, 1 + 260.0 / 96) && NEAR(r.accept_rate, 260.0 / 384));
    CHECK(NEAR(1 + r.pos_rate[0] + r.pos_rate[1] + r.pos_rate[2] + r.pos_rate[3], r.accept_len));
    CHECK(r.basis == IV_BASIS_COMPLETION && !strcmp(iv_basis_name(r.basis), "completion"));
    CHECK(NEAR(r.gen_tps, 356.0 / 5));
    mtotals t;
    msnap_totals(&a, &b, &t);
    CHECK(t.n_pos == 4 && NEAR(t.num_drafts, 96) && isnan(t.steps) && NEAR(t.pos_rate[3], 40.0 / 96));
    /* neither snapshot has the series (no drafted request finished yet): no positions, not zeros */
    msnap_totals(&a, &a, &t);
    CHECK(t.n_pos == 0);
    /* a position whose series appears only at the end counts from 0; one
     * absent from both snapshots is not reported */
    msnap x = b, y = b;
    x.pos_mask = 1u;                      /* position 0 only at the start */
    y.pos_mask = 1u | 4u;                 /* positions 0 and 2 at the end; 1 never created */
    y.drafts = x.drafts + 10;
    y.draft_tokens = x.draft_tokens + 40;
    y.accepted = x.accepted + 15;
    y.per_pos[0] = x.per_pos[0] + 9;
    y.per_pos[2] = 6;
    msnap_totals(&x, &y, &t);
    CHECK(t.n_pos == 3 && NEAR(t.pos_rate[0], 0.9) && isnan(t.pos_rate[1]) && NEAR(t.pos_rate[2], 0.6));
    free(tc);
    free(tw);
}

/* Positions a run provably never drafted are left out, not reported as 0:
 * a depth-4 server (all four series present) whose run drafted one token
 * per step reports position 0 only. */
static void test_pos_never_drafted(void) {
    msnap a, b;
    memset(&a, 0, sizeof a);
    a.steps = a.committed = NAN;
    a.pos_mask = 15u;
    b = a;
    b.drafts = 50;
    b.draft_tokens = 50;          /* one token per draft */
    b.accepted = 30;
    b.per_pos[0] = 30;
    mtotals t;
    msnap_totals(&a, &b, &t);
    CHECKF(t.n_pos == 1 && NEAR(t.pos_rate[0], 0.6), "n_pos %d, want 1", t.n_pos);
    /* one draft token more than drafts: one draft may have reached position 1
     * (its 0 is kept), none can have reached 2 */
    b.draft_tokens = 51;
    msnap_totals(&a, &b, &t);
    CHECK(t.n_pos == 2 && NEAR(t.pos_rate[1], 0));
    /* enough draft tokens that any position may have been drafted: all kept */
    b.draft_tokens = 200;
    msnap_totals(&a, &b, &t);
    CHECK(t.n_pos == 4 && NEAR(t.pos_rate[3], 0));
    /* an accepted count is proof of drafting, whatever the bound says */
    b.draft_tokens = 50;
    b.per_pos[2] = 1;
    msnap_totals(&a, &b, &t);
    CHECK(t.n_pos == 3);
}

static void test_specbed_interval(void) {
    msnap a, b;
    snaps(MSRC_SPECBED, "specbed_a.txt", "specbed_b.txt", &a, &b);
    CHECK(a.pos_mask == 15u && NEAR(a.steps, 50) && NEAR(a.committed, 150));
    iv_row r;
    msnap_interval(MSRC_SPECBED, &a, &b, 0, 4, &r);
    /* specbed counts verify steps: accept length = committed / steps */
    CHECKF(NEAR(r.accept_len, 4.0), "specbed accept length %g, want 400/100", r.accept_len);
    CHECK(NEAR(r.drafts, 100) && NEAR(r.accept_rate, 0.75));
    CHECK(r.n_pos == 4 && NEAR(r.pos_rate[0], 0.94) && NEAR(r.pos_rate[3], 0.56));
    CHECK(NEAR(1 + r.pos_rate[0] + r.pos_rate[1] + r.pos_rate[2] + r.pos_rate[3], r.accept_len));
    mtotals t;
    msnap_totals(&a, &b, &t);
    CHECK(NEAR(t.accept_len, 4.0) && t.n_pos == 4);
}

/* The two accept-length definitions on one hand-built counter set where
 * verify steps outnumber drafts (an ngram drafter that finds no match in
 * some steps: issue 37's 447 steps, 305 drafts, 182 accepted at position 0):
 * vLLM's names get vLLM's numbers (vllm/benchmarks/serve.py: 1 + accepted ÷
 * drafts, accepted at i ÷ drafts), specbed's get committed ÷ steps. */
static void test_two_definitions(void) {
    static const char A[] =
        "specbed:spec_decode_num_drafts_total 0\n"
        "specbed:spec_decode_num_draft_tokens_total 0\n"
        "specbed:spec_decode_num_accepted_tokens_total 0\n"
        "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 0\n"
        "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 0\n"
        "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 0\n"
        "specbed:spec_decode_num_verify_steps_total 0\n"
        "specbed:spec_decode_num_committed_tokens_total 0\n";
    static const char B[] =
        "specbed:spec_decode_num_drafts_total 305\n"
        "specbed:spec_decode_num_draft_tokens_total 900\n"
        "specbed:spec_decode_num_accepted_tokens_total 371\n"
        "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 182\n"
        "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 120\n"
        "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 69\n"
        "specbed:spec_decode_num_verify_steps_total 447\n"
        "specbed:spec_decode_num_committed_tokens_total 818\n";
    msnap a, b;
    char err[256];
    CHECKF(!msnap_parse(MSRC_SPECBED, A, &a, err, sizeof err) && !msnap_parse(MSRC_SPECBED, B, &b, err, sizeof err), "%s", err);
    mtotals t;
    msnap_totals(&a, &b, &t);
    CHECKF(NEAR(t.vllm_accept_len, 1 + 371.0 / 305), "vLLM acceptance length %g, want 1 + 371/305 = 2.216", t.vllm_accept_len);
    CHECKF(NEAR(t.accept_len, 818.0 / 447), "specbed acceptance length %g, want 818/447 = 1.830", t.accept_len);
    CHECK(t.vllm_n_pos == 3 && NEAR(t.vllm_pos_rate[0], 182.0 / 305) && NEAR(t.vllm_pos_rate[2], 69.0 / 305));
    CHECK(t.n_pos == 3 && NEAR(t.pos_rate[0], 182.0 / 447) && NEAR(t.pos_rate[1], 120.0 / 447));
    CHECK(NEAR(t.num_drafts, 305) && NEAR(t.steps, 447) && NEAR(t.accept_rate, 371.0 / 900));
    /* the interval row carries both counters, each under its own name */
    iv_row r;
    msnap_interval(MSRC_SPECBED, &a, &b, 0, 1, &r);
    CHECK(NEAR(r.num_drafts, 305) && NEAR(r.verify_steps, 447) && NEAR(r.drafts, 447) && NEAR(r.accept_len, 818.0 / 447));
    /* vLLM lists every position seen, without pruning, over drafts; with no
     * drafts its acceptance length is 0.0 (its "else 0.0") */
    static const char C[] =
        "vllm:spec_decode_num_drafts_total 0\n"
        "vllm:spec_decode_num_draft_tokens_total 0\n"
        "vllm:spec_decode_num_accepted_tokens_total 0\n";
    msnap c0;
    CHECK(!msnap_parse(MSRC_VLLM, C, &c0, err, sizeof err));
    msnap_totals(&c0, &c0, &t);
    CHECK(t.vllm_accept_len == 0.0 && t.vllm_n_pos == 0);
}

static void test_sglang_gauges(void) {
    char *t = fixture("sglang_metrics.txt");
    msnap s;
    CHECK(t && !msnap_parse(MSRC_SGLANG, t, &s, NULL, 0));
    CHECK(s.has_spec && NEAR(s.g_accept_len, 2.63) && NEAR(s.running, 24) && NEAR(s.waiting, 3));
    iv_row r;
    msnap_interval(MSRC_SGLANG, &s, &s, 0, 5, &r);
    CHECK(NEAR(r.accept_len, 2.63) && NEAR(r.accept_rate, 0.54));
    free(t);
}

/* Per-rank series are read per rank, never summed into one accept length:
 * SGLang's DP gauges (the mean, not the sum, is the row's own value; each
 * rank keeps its own), vLLM's per-engine counters (pooled for the row,
 * each engine's own 1 + accepted ÷ drafts kept), an SGLang log line's rank
 * prefix, the rank key, and the interval CSV round trip of the ranks. */
static void test_ranks(void) {
    char k[64];
    CHECK(prom_rank_key("dp_rank=\"1\",engine_type=\"unified\",model_name=\"glm\",pp_rank=\"0\",tp_rank=\"0\"", k, sizeof k) == 3 &&
          !strcmp(k, "dp_rank=\"1\",pp_rank=\"0\",tp_rank=\"0\""));
    CHECK(prom_rank_key("engine=\"0\",model_name=\"Qwen/Qwen3-8B\",position=\"2\"", k, sizeof k) == 1 && !strcmp(k, "engine=\"0\""));
    CHECK(prom_rank_key("model_name=\"x\"", k, sizeof k) == 0 && !k[0]);
    /* SGLang, two DP ranks */
    char *t = fixture("sglang_dp2.txt");
    msnap s;
    CHECK(t && !msnap_parse(MSRC_SGLANG, t, &s, NULL, 0));
    CHECK(NEAR(s.g_accept_len, (3.30 + 1.40) / 2) && s.n_ranks == 2);
    iv_row r;
    msnap_interval(MSRC_SGLANG, &s, &s, 0, 5, &r);
    CHECK(NEAR(r.accept_len, 2.35) && NEAR(r.accept_rate, 0.38) && r.n_ranks == 2);
    if (r.n_ranks == 2) {
        CHECK(strstr(r.rank[0].label, "dp_rank=\"0\"") && NEAR(r.rank[0].accept_len, 3.30) && NEAR(r.rank[0].running, 12));
        CHECK(strstr(r.rank[1].label, "dp_rank=\"1\"") && NEAR(r.rank[1].accept_len, 1.40) && isnan(r.rank[1].drafts));
    }
    free(t);
    /* the single-rank fixture: one rank, the same value */
    t = fixture("sglang_metrics.txt");
    CHECK(t && !msnap_parse(MSRC_SGLANG, t, &s, NULL, 0) && s.n_ranks == 1);
    free(t);
    /* vLLM, two engines: engine 0 1 + 180/100 = 2.8, engine 1 1 + 100/100 = 2.0, pooled 1 + 280/200 = 2.4 */
    msnap a, b;
    snaps(MSRC_VLLM, "vllm_a.txt", "vllm_b.txt", &a, &b);
    msnap_interval(MSRC_VLLM, &a, &b, 0, 5, &r);
    CHECK(NEAR(r.accept_len, 2.4) && r.n_ranks == 2);
    if (r.n_ranks == 2) {
        CHECK(!strcmp(r.rank[0].label, "engine=\"0\"") && NEAR(r.rank[0].accept_len, 2.8) && NEAR(r.rank[0].drafts, 100) &&
              NEAR(r.rank[0].running, 4));
        CHECK(!strcmp(r.rank[1].label, "engine=\"1\"") && NEAR(r.rank[1].accept_len, 2.0) && NEAR(r.rank[1].drafts, 100) &&
              NEAR(r.rank[1].running, 2));
    }
    /* specbed has no ranks */
    snaps(MSRC_SPECBED, "specbed_a.txt", "specbed_b.txt", &a, &b);
    msnap_interval(MSRC_SPECBED, &a, &b, 0, 5, &r);
    CHECK(r.n_ranks == 0);
    /* an SGLang line names its scheduler */
    sgl_line L;
    CHECK(sgl_parse_line("[2026-07-04 05:01:38 DP1 TP0 EP0] Decode batch, #running-req: 5, accept len: 1.20, gen throughput "
                         "(token/s): 4.0", &L) && !strcmp(L.rank, "DP1 TP0 EP0"));
    CHECK(sgl_parse_line("[2026-07-04 05:01:38 TP3] Decode batch, #running-req: 5, gen throughput (token/s): 4.0", &L) &&
          !strcmp(L.rank, "TP3"));
    CHECK(sgl_parse_line("INFO 11-29 18:00:08 [scheduler.py:1203] Decode batch, #running-req: 4, gen throughput "
                         "(token/s): 1.0", &L) && !L.rank[0]);
    /* the CSV keeps the ranks, so that an offline scan judges them too */
    iv_row in[2];
    iv_row_clear(&in[0]);
    iv_row_clear(&in[1]);
    in[0].t_end = 2;
    in[0].accept_len = 2.4;
    in[0].n_ranks = 2;
    snprintf(in[0].rank[0].label, IV_RANK_LABEL, "engine=\"0\"");
    in[0].rank[0] = (iv_rank){"engine=\"0\"", 2.8, 100, 4};
    in[0].rank[1] = (iv_rank){"dp|1;x", 2.0, NAN, 2};
    in[1].t_end = 4;
    in[1].accept_len = 3;
    char path[] = "/tmp/specbed_ivr_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    char err[256];
    CHECK(!iv_csv_write(path, in, 2, err, sizeof err));
    iv_row *out;
    int n;
    CHECKF(!iv_csv_read(path, &out, &n, err, sizeof err), "%s", err);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(out[0].n_ranks == 2 && out[1].n_ranks == 0);
        CHECK(!strcmp(out[0].rank[0].label, "engine=\"0\"") && NEAR(out[0].rank[0].accept_len, 2.8) &&
              NEAR(out[0].rank[0].drafts, 100) && NEAR(out[0].rank[0].running, 4));
        CHECK(!strcmp(out[0].rank[1].label, "dp_1_x") && NEAR(out[0].rank[1].accept_len, 2.0) && isnan(out[0].rank[1].drafts));
        free(out);
    }
    unlink(path);
}

static void test_sglang_lines(void) {
    sgl_line L;
    CHECK(sgl_parse_line("[2025-02-27 04:37:31 TP0] Decode batch. #running-req: 8, #token: 68044, token usage: 0.14, "
                         "accept len: 3.21, gen throughput (token/s): 183.59, #queue-req: 0", &L));
    CHECK(!L.new_format && L.has_ts && NEAR(L.running, 8) && NEAR(L.tokens, 68044) && NEAR(L.accept_len, 3.21) &&
          isnan(L.accept_rate) && NEAR(L.gen_tps, 183.59) && NEAR(L.queue, 0));
    CHECK(sgl_parse_line("[2026-07-04 05:01:36 TP0] Decode batch, #running-req: 12, #full token: 1200, full token usage: "
                         "0.21, #swa token: 800, swa token usage: 0.35, accept len: 2.00, accept rate: 0.50, cuda graph: "
                         "True, gen throughput (token/s): 88.10, #queue-req: 0, ", &L));
    CHECK(L.new_format && NEAR(L.tokens, 1200) && NEAR(L.token_usage, 0.35) && NEAR(L.accept_len, 2.0) &&
          NEAR(L.accept_rate, 0.5) && NEAR(L.gen_tps, 88.1));
    CHECK(sgl_parse_line("[2026-07-04 05:01:38 DP0 TP0] Decode batch [4812], #running-req: 5, #token: 9000, token usage: "
                         "0.05, accept len: 2.85, accept rate: 0.61, pre-allocated usage: 0.10, #prealloc-req: 0, "
                         "#transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 412.00, "
                         "#queue-req: 0, ", &L));
    CHECK(NEAR(L.running, 5) && NEAR(L.accept_len, 2.85) && NEAR(L.gen_tps, 412));
    CHECK(sgl_parse_line("Decode batch, #running-req: 3, #token: 600, token usage: 0.01, cuda graph: True, gen throughput "
                         "(token/s): 77.70, #queue-req: 0", &L));
    CHECK(!L.has_ts && isnan(L.accept_len) && NEAR(L.running, 3));
    /* specbed serve's line for an interval in which no request drafted: no
     * accept len / accept rate at all (NaN: the verdict does not judge it) */
    CHECK(sgl_parse_line("[2026-12-01 09:51:31] Decode batch, #running-req: 2, #token: 265, token usage: 0.02, gen "
                         "throughput (token/s): 593.73, #queue-req: 0", &L));
    CHECK(L.has_ts && isnan(L.accept_len) && isnan(L.accept_rate) && NEAR(L.running, 2) && NEAR(L.tokens, 265) &&
          NEAR(L.gen_tps, 593.73) && NEAR(L.queue, 0));
    CHECK(!sgl_parse_line("[2025-01-07 20:16:02 TP0] Prefill batch. #new-seq: 1, #new-token: 48", &L));
    CHECK(!sgl_parse_line("INFO: 127.0.0.1 - \"POST /v1/completions HTTP/1.1\" 200 OK", &L));
    CHECK(!sgl_parse_line("Decode batchXYZ", &L));
    /* a number in the message is not a timestamp */
    CHECK(sgl_parse_line("Decode batch, #running-req: 3, #token: 2026, gen throughput (token/s): 1.0", &L) && !L.has_ts);
}

typedef struct { iv_row r[32]; int n; } rows_t;
static void collect(void *ctx, const iv_row *r) {
    rows_t *c = ctx;
    if (c->n < 32) c->r[c->n++] = *r;
}

/* Timestamps behind Python-logging, vLLM-style and Ray prefixes, and ANSI
 * colours (tests/fixtures/bench/sglang_prefixed.log). */
static void test_sglang_prefixes(void) {
    char *t = bench_fixture("sglang_prefixed.log");
    if (!t) return;
    static const double sec[] = {0, 2, 4, 6.5, 8, 10, 12.25, 14};   /* seconds after 18:00:00 */
    int n = 0;
    for (char *line = t, *e; line && *line; line = e ? e + 1 : NULL, n++) {
        e = strchr(line, '\n');
        if (e) *e = 0;
        sgl_line L;
        CHECKF(sgl_parse_line(line, &L), "line %d not a Decode batch line", n + 1);
        CHECKF(L.has_ts && n < 8 && fabs(fmod(L.ts, 86400) - (18 * 3600 + sec[n])) < 1e-6,
               "line %d: timestamp %s (%.3f)", n + 1, L.has_ts ? "wrong" : "not found", L.ts);
        CHECK(NEAR(L.running, 4));
    }
    CHECK(n == 8);
    free(t);
    rows_t c = {0};
    sgl_tail *tl;
    char err[256];
    CHECK(!sgl_tail_open(&tl, tu_path("tests/fixtures/bench/sglang_prefixed.log"), 0, err, sizeof err));
    sgl_tail_poll(tl, 0, 0, collect, &c);
    sgl_tail_close(tl);
    CHECK(c.n == 8 && NEAR(c.r[5].accept_len, 1.9) && c.r[5].line_no == 6 && c.r[5].basis == IV_BASIS_LOG);
    CHECK(c.n == 8 && NEAR(c.r[1].t_end, 2) && NEAR(c.r[3].t_end - c.r[1].t_end, 4.5));
}

static void test_sglang_tail(void) {
    rows_t c = {0};
    sgl_tail *t;
    char err[256];
    CHECK(!sgl_tail_open(&t, tu_path("tests/fixtures/metrics/sglang_old.log"), 0, err, sizeof err));
    CHECK(sgl_tail_poll(t, 0, 0, collect, &c) == 5 && sgl_tail_eof(t));
    sgl_tail_close(t);
    CHECK(c.n == 5);
    if (c.n == 5) {
        CHECK(c.r[0].line_no == 2 && isnan(c.r[0].accept_len) && NEAR(c.r[0].running, 8));
        CHECK(c.r[2].line_no == 5 && NEAR(c.r[2].accept_len, 1.68) && NEAR(c.r[2].waiting, 2));
        /* offline times come from the timestamps, relative to the first line */
        CHECK(NEAR(c.r[0].t_end, 0) && NEAR(c.r[1].t_end, 2) && NEAR(c.r[1].t_start, 0) && NEAR(c.r[2].t_end, 4));
    }
    c.n = 0;
    CHECK(!sgl_tail_open(&t, tu_path("tests/fixtures/metrics/sglang_new.log"), 0, err, sizeof err));
    sgl_tail_poll(t, 0, 0, collect, &c);
    sgl_tail_close(t);
    CHECKF(c.n == 7, "new log: %d decode rows, want 7", c.n);
    if (c.n == 7) {
        CHECK(c.r[1].line_no == 4 && NEAR(c.r[1].accept_len, 1.92) && NEAR(c.r[1].accept_rate, 0.31));
        CHECK(NEAR(c.r[2].accept_len, 3.13) && NEAR(c.r[3].accept_len, 2.0) && NEAR(c.r[4].accept_len, 2.85));
        CHECK(NEAR(c.r[6].accept_len, 4.82));
    }
    /* live tail: a growing file, partial last line held back */
    char path[] = "/tmp/specbed_sgl_tail_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fputs("old line before the run\n", f);
    fflush(f);
    CHECK(!sgl_tail_open(&t, path, 1, err, sizeof err));
    c.n = 0;
    fputs("[2026-01-01 00:00:00] Decode batch, #running-req: 4, #token: 10, token usage: 0.01, accept len: 1.50, "
          "gen throughput (token/s): 9.0, #queue-req: 0\n[2026-01-01 00:00:01] Decode batch, #running-req: 4, acc", f);
    fflush(f);
    CHECK(sgl_tail_poll(t, 1, 7.5, collect, &c) == 1 && c.n == 1 && NEAR(c.r[0].t_end, 7.5) && NEAR(c.r[0].accept_len, 1.5));
    CHECK(c.r[0].line_no == 2);   /* the file's own line number, though the tail began at its end */
    fputs("ept len: 2.50, gen throughput (token/s): 9.0, #queue-req: 0\n", f);
    fflush(f);
    CHECK(sgl_tail_poll(t, 1, 9.0, collect, &c) == 1 && c.n == 2 && NEAR(c.r[1].accept_len, 2.5) &&
          NEAR(c.r[1].t_start, 7.5) && NEAR(c.r[1].t_end, 9.0));
    sgl_tail_close(t);
    fclose(f);
    unlink(path);
}

typedef struct { char ev[8][64]; int n; } evs_t;
static void on_ev(void *ctx, const char *d, size_t n) {
    evs_t *e = ctx;
    if (e->n < 8) snprintf(e->ev[e->n++], 64, "%.*s", (int)n, d);
}

static void test_sse(void) {
    evs_t e = {0};
    sse_parser p;
    sse_init(&p, on_ev, &e);
    const char *s = ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\ndata:x\ndata: y\n\nevent: ping\nid: 3\n\ndata: [DONE]\n\n";
    /* byte by byte: framing must not depend on how TCP splits the stream */
    for (size_t i = 0; s[i]; i++) sse_feed(&p, s + i, 1);
    sse_finish(&p);
    CHECK(e.n == 3);
    CHECK(!strcmp(e.ev[0], "{\"a\":1}") && !strcmp(e.ev[1], "x\ny") && !strcmp(e.ev[2], "[DONE]"));
    sse_free(&p);
    /* a last event without its blank line still arrives at finish */
    evs_t e2 = {0};
    sse_init(&p, on_ev, &e2);
    sse_feed(&p, "data: tail", 10);
    sse_finish(&p);
    CHECK(e2.n == 1 && !strcmp(e2.ev[0], "tail"));
    sse_free(&p);
    /* bounded: a line that never ends stops the parser at SSE_MAX_LINE ... */
    enum { CH = 64 * 1024 };
    char *junk = malloc(CH);
    CHECK(junk != NULL);
    if (!junk) return;
    memset(junk, 'a', CH);
    evs_t e3 = {0};
    sse_init(&p, on_ev, &e3);
    sse_feed(&p, "data: ", 6);
    size_t fed = 6;
    for (int i = 0; i < 64 && !p.err; i++, fed += CH) sse_feed(&p, junk, CH);
    CHECKF(p.err == SSE_LINE_TOO_LONG && fed <= SSE_MAX_LINE + 2 * CH, "err %d after %zu bytes", (int)p.err, fed);
    CHECK(p.line_cap <= 2 * (size_t)SSE_MAX_LINE + 2 && strstr(sse_error(&p), "1 MiB"));
    sse_finish(&p);
    CHECK(e3.n == 0);
    sse_free(&p);
    /* ... and an event that never ends (data lines, no blank line) at SSE_MAX_EVENT */
    evs_t e4 = {0};
    sse_init(&p, on_ev, &e4);
    junk[0] = 'd'; junk[1] = 'a'; junk[2] = 't'; junk[3] = 'a'; junk[4] = ':';
    junk[1023] = '\n';               /* a 1 KiB data line */
    for (int i = 0; i < 2048 && !p.err; i++) sse_feed(&p, junk, 1024);
    CHECK(p.err == SSE_EVENT_TOO_BIG && e4.n == 0 && p.data_cap <= 2 * (size_t)SSE_MAX_EVENT + 2);
    sse_free(&p);
    /* the largest line that fits still parses */
    evs_t e5 = {0};
    sse_init(&p, on_ev, &e5);
    sse_feed(&p, "data: ", 6);
    memset(junk, 'b', CH);
    for (size_t left = SSE_MAX_LINE - 6; left; ) {
        size_t k = left < CH ? left : CH;
        sse_feed(&p, junk, k);
        left -= k;
    }
    sse_feed(&p, "\n\n", 2);
    CHECK(p.err == SSE_OK && e5.n == 1);
    sse_free(&p);
    free(junk);
}

static void test_workload(void) {
    workload *w;
    char err[256];
    CHECKF(!workload_load(&w, tu_path("tests/fixtures/workloads/mixed.jsonl"), err, sizeof err), "%s", err);
    if (!w) return;
    CHECK(w->n == 4 && !strcmp(w->name, "mixed"));
    CHECK(!strcmp(w->items[0].id, "p-1") && w->items[0].max_tokens == 16 && w->items[0].n_turns == 1);
    CHECK(!strcmp(w->items[1].id, "81") && w->items[1].n_turns == 2 && !strncmp(w->items[1].prompt, "Compose", 7));
    CHECK(!strcmp(w->items[2].prompt, "Hello, who are you?") && !strcmp(w->items[2].id, "mixed-3"));
    CHECK(w->items[3].n_back == 136 && w->items[3].expected && !strcmp(w->items[3].expected, " amber willow."));
    CHECK(w->items[0].expected == NULL && w->items[0].n_back == -1);
    workload_free(w);
    CHECK(workload_parse(&w, "bad", "{\"prompt\": \"ok\"}\n{\"text\": 1}\n", err, sizeof err) == -1 && strstr(err, "bad:2"));
    CHECK(workload_parse(&w, "bad", "{\"prompt\": \"ok\"\n", err, sizeof err) == -1 && strstr(err, "not valid JSON"));
    CHECK(workload_parse(&w, "bad", "{\"prompt\": \"x\", \"max_tokens\": -3}\n", err, sizeof err) == -1 && strstr(err, "max_tokens"));
    CHECK(workload_parse(&w, "empty", "\n\n", err, sizeof err) == -1 && strstr(err, "no prompts"));
    CHECK(workload_load(&w, "no-such-workload-name", err, sizeof err) == -1 && strstr(err, "workloads/no-such-workload-name.jsonl"));
    /* input limits before reading: a device at once, a regular file by its
     * size (a sparse 65 MiB file: nothing of it is read) */
    CHECKF(workload_load(&w, "/dev/zero", err, sizeof err) == -1 && strstr(err, "character device"), "%s", err);
    char big[] = "/tmp/specbed_bigwl_XXXXXX";
    int bfd = mkstemp(big);
    CHECK(bfd >= 0 && !ftruncate(bfd, (off_t)WL_MAX_BYTES + 1));
    if (bfd >= 0) close(bfd);
    CHECKF(workload_load(&w, big, err, sizeof err) == -1 && strstr(err, "refused before reading"), "%s", err);
    iv_row *rows;
    int nrow;
    CHECKF(iv_csv_read(big, &rows, &nrow, err, sizeof err) == -1 && strstr(err, "refused before reading"), "%s", err);
    CHECKF(iv_csv_read("/dev/zero", &rows, &nrow, err, sizeof err) == -1 && strstr(err, "character device"), "%s", err);
    unlink(big);
    char path[4096];
    /* a bare name resolves under workloads/ (cwd is the build dir; the exe's
     * parent holds workloads/) — when the build directory is inside the tree */
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int in_tree = k > 0 && !strncmp(exe, SPECBED_ROOT "/", strlen(SPECBED_ROOT) + 1);
    if (!access(tu_path("workloads/code.jsonl"), R_OK) && in_tree)
        CHECK(!workload_resolve("code", path, sizeof path) && strstr(path, "code.jsonl"));
}

static void test_interval_csv(void) {
    iv_row in[3];
    for (int i = 0; i < 3; i++) {
        iv_row_clear(&in[i]);
        in[i].t_start = i;
        in[i].t_end = i + 1;
        in[i].accept_len = 2.5 + i;
        in[i].running = 4;
        in[i].inflight = 5;
    }
    in[1].n_pos = 2;
    in[1].pos_rate[0] = 0.9;
    in[1].pos_rate[1] = 0.6;
    in[2].line_no = 77;
    in[0].basis = IV_BASIS_COMPLETION;
    in[2].basis = IV_BASIS_LOG;
    char path[] = "/tmp/specbed_iv_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    char err[256];
    CHECK(!iv_csv_write(path, in, 3, err, sizeof err));
    iv_row *out;
    int n;
    CHECKF(!iv_csv_read(path, &out, &n, err, sizeof err), "%s", err);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(NEAR(out[2].accept_len, 4.5) && NEAR(out[0].t_end, 1) && isnan(out[0].waiting) && NEAR(out[0].inflight, 5));
        CHECK(out[1].n_pos == 2 && NEAR(out[1].pos_rate[1], 0.6) && out[0].n_pos == 0 && out[2].line_no == 77);
        CHECK(out[0].basis == IV_BASIS_COMPLETION && out[1].basis == IV_BASIS_CLIENT && out[2].basis == IV_BASIS_LOG);
    }
    free(out);
    /* "drafts" holds the drafts counter and "verify_steps" the steps; the
     * accept length's denominator read back is the steps where present */
    in[0].num_drafts = 30;
    in[0].verify_steps = 44;
    in[1].num_drafts = 12;
    CHECK(!iv_csv_write(path, in, 3, err, sizeof err));
    char *txt = tu_read_file(path, NULL);
    CHECKF(txt && strstr(txt, "\"drafts\"") && strstr(txt, "\"verify_steps\""), "%s", txt ? txt : "");
    free(txt);
    CHECKF(!iv_csv_read(path, &out, &n, err, sizeof err), "%s", err);
    if (n == 3) {
        CHECK(NEAR(out[0].num_drafts, 30) && NEAR(out[0].verify_steps, 44) && NEAR(out[0].drafts, 44));
        CHECK(NEAR(out[1].num_drafts, 12) && isnan(out[1].verify_steps) && NEAR(out[1].drafts, 12));
    }
    free(out);
    FILE *f = fopen(path, "w");
    fputs("a,b\n1,2\n", f);
    fclose(f);
    CHECK(iv_csv_read(path, &out, &n, err, sizeof err) == -1 && strstr(err, "accept_len"));
    /* a file written before verify_steps existed (steps under "drafts") judges as it did */
    f = fopen(path, "w");
    fputs("t_start_s,t_end_s,accept_len,drafts\n0,1,2.5,9\n", f);
    fclose(f);
    CHECK(!iv_csv_read(path, &out, &n, err, sizeof err) && n == 1 && NEAR(out[0].drafts, 9));
    free(out);
    unlink(path);
}

int main(void) {
    test_prom();
    test_detect();
    test_vllm_interval();
    test_llamacpp_interval();
    test_llamacpp_cold();
    test_pos_never_drafted();
    test_specbed_interval();
    test_two_definitions();
    test_sglang_gauges();
    test_ranks();
    test_sglang_lines();
    test_sglang_tail();
    test_sglang_prefixes();
    test_sse();
    test_workload();
    test_interval_csv();
    return tu_done("test_bench_parsers");
}
