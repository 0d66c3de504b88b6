/* label: bench */
/* test_bench_maths.c — the arithmetic behind bench/'s numbers: percentiles
 * (numpy "linear"), load shapes (profile parsing, gamma arrivals), the
 * summary JSON (vLLM names, TPOT, goodput), the canary's content checks and
 * calibration (the verdict and its interval rule: test_bench_verdict.c), and
 * the depth recommendation (E(k) from per-position rates, cost-table
 * interpolation, prediction). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "canary_checks.h"
#include "proc_launch.h"
#include "load.h"
#include "load_out.h"
#include "load_shape.h"
#include "recommend.h"
#include "stats.h"
#include "test_util.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)
#define CLOSE(a, b, tol) (fabs((a) - (b)) <= (tol))

static void test_percentiles(void) {
    double v[5] = {5, 1, 4, 2, 3};
    /* numpy: np.percentile([1,2,3,4,5], [0, 25, 50, 90, 99, 100]) */
    CHECK(NEAR(st_percentile(v, 5, 0), 1));
    CHECK(NEAR(st_percentile(v, 5, 25), 2));
    CHECK(NEAR(st_percentile(v, 5, 50), 3));
    CHECK(NEAR(st_percentile(v, 5, 90), 4.6));
    CHECK(NEAR(st_percentile(v, 5, 99), 4.96));
    CHECK(NEAR(st_percentile(v, 5, 100), 5));
    CHECK(v[0] == 5);   /* input untouched */
    double w[4] = {10, 20, 30, 40};
    CHECK(NEAR(st_percentile(w, 4, 50), 25) && NEAR(st_percentile(w, 4, 75), 32.5));
    CHECK(isnan(st_percentile(w, 0, 50)) && isnan(st_mean(w, 0)));
    CHECK(NEAR(st_mean(w, 4), 25) && NEAR(st_std(w, 4), sqrt(125.0)));
    double one = 7;
    CHECK(NEAR(st_percentile(&one, 1, 99), 7));
}

static void test_profile(void) {
    ld_profile p;
    char err[256];
    CHECK(!ld_profile_parse("180s@4,180s@20,120s@2,240s@14", &p, err, sizeof err));
    CHECK(p.n == 4 && p.ph[1].concurrency == 20 && NEAR(ld_profile_total(&p), 720));
    CHECK(ld_profile_at(&p, 0) == 0 && ld_profile_at(&p, 179.9) == 0 && ld_profile_at(&p, 180) == 1 &&
          ld_profile_at(&p, 719) == 3 && ld_profile_at(&p, 720) == -1);
    CHECK(!ld_profile_parse("1.5m@2, 500ms@r2.5,10@1", &p, err, sizeof err));
    CHECK(p.n == 3 && NEAR(p.ph[0].dur_s, 90) && NEAR(p.ph[1].dur_s, 0.5) && NEAR(p.ph[1].rate, 2.5) &&
          p.ph[1].concurrency == 0 && NEAR(p.ph[2].dur_s, 10));
    char b[256];
    ld_profile_format(&p, b, sizeof b);
    CHECK(!strcmp(b, "90s@2,0.5s@r2.5,10s@1"));
    CHECK(ld_profile_parse("", &p, err, sizeof err) == -1);
    CHECK(ld_profile_parse("10s", &p, err, sizeof err) == -1 && strstr(err, "@"));
    CHECK(ld_profile_parse("10s@0", &p, err, sizeof err) == -1);
    CHECK(ld_profile_parse("-5s@2", &p, err, sizeof err) == -1);
    CHECK(ld_profile_parse("5s@2x", &p, err, sizeof err) == -1);
}

static void test_arrivals(void) {
    ld_rng r;
    ld_rng_seed(&r, 42);
    /* gamma(shape B, scale 1/(R·B)): mean 1/R, variance 1/(R²·B) */
    const double R = 4.0;
    const double Bs[3] = {1.0, 0.25, 5.0};
    for (int bi = 0; bi < 3; bi++) {
        double B = Bs[bi], s = 0, s2 = 0;
        int n = 200000;
        for (int i = 0; i < n; i++) {
            double g = ld_interarrival(&r, R, B);
            CHECK(g >= 0);
            s += g;
            s2 += g * g;
        }
        double m = s / n, var = s2 / n - m * m;
        CHECKF(CLOSE(m, 1 / R, 0.01 / R * 3), "burstiness %g: mean gap %g, want %g", B, m, 1 / R);
        CHECKF(CLOSE(var, 1 / (R * R * B), 0.05 / (R * R * B)), "burstiness %g: variance %g, want %g", B, var, 1 / (R * R * B));
    }
    CHECK(ld_interarrival(&r, INFINITY, 1) == 0);
    /* same seed, same sequence; shuffle is a permutation */
    ld_rng a, b;
    ld_rng_seed(&a, 7);
    ld_rng_seed(&b, 7);
    CHECK(ld_rng_uniform(&a) == ld_rng_uniform(&b));
    int idx[50], seen[50] = {0};
    for (int i = 0; i < 50; i++) idx[i] = i;
    ld_shuffle(&a, idx, 50);
    int moved = 0;
    for (int i = 0; i < 50; i++) { seen[idx[i]]++; moved += idx[i] != i; }
    for (int i = 0; i < 50; i++) CHECK(seen[i] == 1);
    CHECK(moved > 25);
}

static ld_request req(int ok, double ttft, double e2el, int n_out, int n_in) {
    ld_request q;
    memset(&q, 0, sizeof q);
    q.ok = ok;
    q.ttft = ttft;
    q.e2el = e2el;
    q.n_out = n_out;
    q.n_in = n_in;
    return q;
}

static double jnum_(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_summary(void) {
    ld_config c;
    ld_config_defaults(&c);
    c.url = "http://x";
    c.slo.ttft_ms = 150;
    c.slo.tpot_ms = 20;
    ld_result r;
    memset(&r, 0, sizeof r);
    ld_request q[4];
    q[0] = req(1, 0.1, 1.1, 11, 50);     /* tpot 100 ms: misses the tpot SLO */
    q[1] = req(1, 0.2, 0.4, 11, 50);     /* tpot 20 ms, ttft 200 ms: misses ttft */
    q[2] = req(1, 0.1, 0.3, 11, 50);     /* tpot 20 ms, ttft 100 ms: good */
    q[3] = req(0, NAN, 0.05, 0, 0);      /* failed */
    double itl[3] = {0.01, 0.02, 0.03};
    q[2].itl = itl;
    q[2].n_itl = 3;
    r.req = q;
    r.n_req = 4;
    r.duration = 2.0;
    iv_row iv[2];
    iv_row_clear(&iv[0]);
    iv_row_clear(&iv[1]);
    iv[0].accept_len = 3.0;
    iv[1].accept_len = 2.5;
    iv[0].client_tps = 10;
    iv[1].client_tps = 30;
    r.iv = iv;
    r.n_iv = 2;
    r.has_totals = 1;
    r.totals.accept_len = 2.75;
    r.totals.drafts = r.totals.num_drafts = 100;
    r.totals.steps = NAN;
    r.totals.draft_tokens = 200;
    r.totals.accepted = 175;
    r.totals.accept_rate = 0.875;
    r.totals.n_pos = 2;
    r.totals.pos_rate[0] = 0.9;
    r.totals.pos_rate[1] = 0.85;
    r.totals.vllm_accept_len = 2.75;   /* 1 + 175 / 100 (metrics_src.h: vLLM's definition) */
    r.totals.vllm_n_pos = 2;
    r.totals.vllm_pos_rate[0] = 0.9;
    r.totals.vllm_pos_rate[1] = 0.85;
    q[1].t_send = 1.5;             /* its one chunk lands in the second 1-second bucket */
    ld_pcts pc;
    CHECK(!ld_pcts_parse("50,99.9", &pc, NULL, 0) && pc.n == 2);
    cJSON *j = ld_summary_json(&c, &r, &pc);
    CHECK(j != NULL);
    CHECK(jnum_(j, "completed") == 3 && jnum_(j, "failed") == 1);
    CHECK(jnum_(j, "total_output_tokens") == 33 && jnum_(j, "total_input_tokens") == 150);
    CHECK(NEAR(jnum_(j, "request_throughput"), 1.5) && NEAR(jnum_(j, "output_throughput"), 16.5));
    CHECK(NEAR(jnum_(j, "total_token_throughput"), 91.5));
    CHECK(NEAR(jnum_(j, "request_goodput"), 0.5));
    CHECK(CLOSE(jnum_(j, "mean_ttft_ms"), 400.0 / 3, 1e-6) && CLOSE(jnum_(j, "median_ttft_ms"), 100, 1e-9));
    CHECK(CLOSE(jnum_(j, "mean_tpot_ms"), (100 + 20 + 20) / 3.0, 1e-6));
    /* percentile keys are vLLM's str(p): p99.9, not p99_9 */
    CHECK(CLOSE(jnum_(j, "median_itl_ms"), 20, 1e-9) && CLOSE(jnum_(j, "p99.9_itl_ms"), 29.98, 1e-6));
    CHECK(CLOSE(jnum_(j, "p50_ttft_ms"), 100, 1e-9) && !cJSON_GetObjectItemCaseSensitive(j, "p99_9_itl_ms"));
    CHECK(CLOSE(jnum_(j, "mean_e2el_ms"), 600, 1e-6));
    /* vLLM's spec-decode names and units: acceptance rate in percent */
    CHECK(NEAR(jnum_(j, "spec_decode_acceptance_length"), 2.75) && NEAR(jnum_(j, "spec_decode_acceptance_rate"), 87.5));
    CHECK(NEAR(jnum_(j, "spec_decode_num_drafts"), 100) && NEAR(jnum_(j, "spec_decode_draft_tokens"), 200) &&
          NEAR(jnum_(j, "spec_decode_accepted_tokens"), 175));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "spec_decode_per_position_acceptance_rates")) == 2);
    CHECK(NEAR(jnum_(j, "specbed_min_interval_accept_length"), 2.5) && jnum_(j, "specbed_num_intervals") == 2);
    /* 1-second buckets of chunk arrivals (vLLM's), not the interval series
     * (whose client_tps says 30): q0 0.1 s, q2 0.1/0.11/0.13/0.16 s → 5 in
     * second 0; q1 at 1.7 s → 1 in second 1 */
    CHECKF(NEAR(jnum_(j, "max_output_tokens_per_s"), 5), "max_output_tokens_per_s %g", jnum_(j, "max_output_tokens_per_s"));
    /* peak in flight: q0 [0, 1.1), q2 [0, 0.3), q1 [1.5, 1.9) → 2 */
    CHECK(NEAR(jnum_(j, "max_concurrent_requests"), 2));
    CHECK(NEAR(jnum_(j, "max_concurrency"), 1) && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "request_rate")), "inf"));
    /* per-row max_tokens are said, not written as "max_tokens": 0 */
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "max_tokens") &&
          strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "specbed_max_tokens_source")), "workload rows"));
    /* every field vLLM bench serve does not write is specbed's, by its prefix */
    static const char *const VLLM[] = {"date", "endpoint_type", "backend", "model_id", "num_prompts", "request_rate",
                                       "burstiness", "max_concurrency", "duration", "completed", "failed",
                                       "total_input_tokens", "total_output_tokens", "request_throughput",
                                       "request_goodput", "output_throughput", "total_token_throughput",
                                       "max_output_tokens_per_s", "max_concurrent_requests", "label",
                                       "tokenizer_id", "rtfx", "latencies", "queue_times", NULL};
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        const char *k = e->string;
        int known = !strncmp(k, "specbed_", 8) || !strncmp(k, "spec_decode_", 12);
        for (int i = 0; VLLM[i] && !known; i++) known = !strcmp(k, VLLM[i]);
        if (!known) {
            const char *u = strrchr(k, '_');
            known = u && !strcmp(u, "_ms") && (!strncmp(k, "mean_", 5) || !strncmp(k, "median_", 7) ||
                                               !strncmp(k, "std_", 4) || k[0] == 'p');
        }
        CHECKF(known, "summary key '%s' is neither vLLM's nor specbed_-prefixed", k);
    }
    cJSON_Delete(j);
    /* no drafting: no spec_decode_* fields at all (vLLM writes none) */
    r.totals.draft_tokens = 0;
    j = ld_summary_json(&c, &r, &pc);
    CHECK(j && !cJSON_GetObjectItemCaseSensitive(j, "spec_decode_acceptance_rate") &&
          !cJSON_GetObjectItemCaseSensitive(j, "spec_decode_acceptance_length"));
    cJSON_Delete(j);
    char w[32];
    ld_pct_word(99, w, sizeof w);   CHECK(!strcmp(w, "99"));
    ld_pct_word(99.9, w, sizeof w); CHECK(!strcmp(w, "99.9"));
    ld_pct_word(99.99, w, sizeof w); CHECK(!strcmp(w, "99.99"));
    ld_pct_word(0.5, w, sizeof w);  CHECK(!strcmp(w, "0.5"));
    ld_pct_word(12.345, w, sizeof w); CHECK(!strcmp(w, "12.345"));
    CHECK(ld_pcts_parse("0,50", &pc, NULL, 0) == -1 && ld_pcts_parse("abc", &pc, NULL, 0) == -1);
}

static void test_content_checks(void) {
    size_t at;
    CHECK(cc_bad_chars("plain text\n\twith tabs", &at) == 0);
    CHECK(cc_bad_chars("ok \xEF\xBF\xBD here", &at) == 1 && at == 3);    /* U+FFFD */
    CHECK(cc_bad_chars("bell\x07", &at) == 1 && at == 4);
    CHECK(cc_bad_chars("bad \xC3 utf8", &at) == 1 && at == 4);
    CHECK(cc_bad_chars("c1 \xC2\x85", &at) == 1);
    CHECK(cc_bad_chars("naïve café — 日本語 😀", &at) == 0);
    CHECK(cc_spray("short!!") == 0);
    CHECK(cc_spray("The quick brown fox jumps over the lazy dog, twice.") < 0.1);
    CHECK(cc_spray(".,;:!?%$#@*&^(){}[]<>~`|/\\+=-_\"'.,;:!?%$#") > 0.9);
    /* an underline of one repeated character is not spray */
    CHECK(cc_spray("Title\n==========================================") < 0.2);
    CHECK(cc_loop("the cat sat on the mat and then the dog ran far away from home") < 0.1);
    CHECK(cc_loop("a b c a b c a b c a b c a b c a b c a b c a b c") > 0.6);
    CHECK(cc_loop("foofoofoofoofoofoofoofoofoofoofoofoofoofoofoofoofoofoo") > 0.6);
    CHECK(cc_loop("int main(void) { return 0; }") < 0.5);
    double top1[20];
    for (int i = 0; i < 20; i++) top1[i] = -0.2 - 0.01 * i;
    int pos;
    CHECK(cc_flat(top1, 20, &pos) == 0 && pos == -1);
    top1[9] = -2.25;   /* the DeepSeek V4 Flash signature: '\n' −2.25 where neighbours sit near 0 */
    double d = cc_flat(top1, 20, &pos);
    CHECK(pos == 9 && d > 1.9 && d < 2.2);
    CHECK(cc_copy_ok(" amber willow granite.", " amber willow granite."));
    CHECK(cc_copy_ok("  amber willow granite. And more text", " amber willow granite."));
    CHECK(!cc_copy_ok(" amber willow", " amber willow granite."));
    CHECK(!cc_copy_ok(" amber oak granite.", " amber willow granite."));
    CHECK(!cc_copy_ok("anything", ""));
    CHECK(cc_first_diff("abc", "abc") == -1 && cc_first_diff("abc", "abd") == 2 && cc_first_diff("ab", "abc") == 2);
    /* workloads/copy.jsonl's layout: 3 rows per distance, file order by distance, plus a non-copy row */
    int nb[] = {48, 48, 48, 64, 64, 64, 96, 96, 96, 112, 112, 112, 120, 120, 120, 136, 136, 136, 144, 144, 144,
                160, 160, 160, 192, 192, 192, 256, 256, 256, -1};
    int pick[8], np = cc_copy_pick(nb, (int)(sizeof nb / sizeof nb[0]), 96, 192, 8, pick), above = 0, below = 0;
    CHECK(np == 8);
    for (int i = 0; i < np; i++) {
        CHECK(nb[pick[i]] >= 96 && nb[pick[i]] <= 192);
        if (nb[pick[i]] > 128) above++; else below++;
        if (i) CHECK(nb[pick[i]] >= nb[pick[i - 1]] && pick[i] != pick[i - 1]);
    }
    CHECK(above == 4 && below == 4);   /* the first 8 in file order would be 0 above 128 */
    CHECK(nb[pick[0]] == 96 && nb[pick[7]] == 192);
    CHECK(cc_copy_pick(nb, 31, 500, 600, 8, pick) == 0);
    CHECK(cc_copy_pick(nb, 31, 96, 112, 8, pick) == 6);
}

static void test_calibration(void) {
    cc_thresholds t;
    cc_thresholds_default(&t, 2.0);
    CHECK(NEAR(t.accept_len, 2.0) && t.bad_frac == 0 && t.spec_mismatch_frac == 0);
    cc_observed a, b, m;
    cc_observed_init(&a);
    cc_observed_init(&b);
    a.n_intervals = 10;
    a.accept_len_min = 1.8;          /* a small model healthy below 2.0 */
    a.n_texts = 40;
    a.loop_max = 0.9;
    a.spray_max = 0.1;
    a.n_copy = 8;
    a.copy_fail_frac = 0.25;
    a.n_spec = 20;
    b.n_intervals = 5;
    b.accept_len_min = 2.6;
    b.n_texts = 10;
    b.bad_frac = 0.0;
    b.loop_max = 0.2;
    cc_observed_init(&m);
    cc_observed_merge(&m, &a);
    cc_observed_merge(&m, &b);
    CHECK(m.n_intervals == 15 && NEAR(m.accept_len_min, 1.8) && NEAR(m.loop_max, 0.9) && m.n_texts == 50);
    char ex[2048];
    cc_calibrate(&m, &t, ex, sizeof ex);
    CHECKF(NEAR(t.accept_len, 1.4), "calibrated accept threshold %g, want halfway from 1 to 1.8", t.accept_len);
    CHECK(NEAR(t.spray, 0.5));                                  /* max(default, clean + 0.1) */
    CHECK(isinf(t.loop) && strstr(ex, "trigram loop: DISABLED")); /* 0.9 + 0.1 = 1: no room below the top of [0, 1] */
    CHECK(NEAR(t.copy_fail_frac, 0.35) && t.spec_mismatch_frac == 0 && t.bad_frac == 0);
    CHECK(strstr(ex, "1.400") && strstr(ex, "1.800"));
    /* a drafter that accepts nothing: the interval check cannot work */
    cc_observed z;
    cc_observed_init(&z);
    z.n_intervals = 3;
    z.accept_len_min = 1.0;
    cc_calibrate(&z, &t, ex, sizeof ex);
    CHECK(t.accept_len == 0 && strstr(ex, "disabled"));
}

static void test_recommend(void) {
    /* E(k) from unconditional rates equals the product form of conditional ones */
    double alpha[4] = {0.9, 0.8, 0.5, 0.5};
    double p[4];
    double prod = 1;
    for (int i = 0; i < 4; i++) { prod *= alpha[i]; p[i] = prod; }
    for (int k = 0; k <= 4; k++) CHECK(NEAR(rc_expected(p, 4, k), rc_expected_cond(alpha, 4, k)));
    CHECK(NEAR(rc_expected(p, 4, 0), 1) && NEAR(rc_expected(p, 4, 2), 1 + 0.9 + 0.72));
    CHECK(NEAR(rc_expected(p, 4, 6), rc_expected(p, 4, 4)));    /* unknown positions add nothing */
    cost_curve t;
    double rows[4] = {4, 1, 2, 2}, sec[4] = {0.016, 0.010, 0.011, 0.013};
    cost_curve_from_points(&t, rows, sec, 4, "test");
    CHECK(t.n == 3 && t.rows[0] == 1 && t.rows[2] == 4 && NEAR(t.seconds[1], 0.012));   /* sorted, duplicates averaged */
    CHECK(NEAR(cost_curve_at(&t, 1), 0.010) && NEAR(cost_curve_at(&t, 3), 0.014) && NEAR(cost_curve_at(&t, 6), 0.020));
    CHECK(cost_curve_at(&t, 0.5) > 0);
    /* prediction: c·E(k)/step, and the end-to-end form */
    rc_pred r = rc_predict(&t, p, 4, 1, 2, 0, NAN);                /* rows 4 */
    CHECK(NEAR(r.e_k, 1.9) && NEAR(r.step_s, 0.016) && NEAR(r.tps, 2 * 1.9 / 0.016));
    r = rc_predict(&t, p, 4, 1, 2, 101, 0.1);
    CHECK(NEAR(r.tps, 2 * 101 / (0.1 + 100 * 0.016 / 1.9)));
    t.draft_seconds_per_token = 0.001;
    r = rc_predict(&t, p, 4, 1, 2, 0, NAN);
    CHECK(NEAR(r.step_s, 0.016 + 2 * 1 * 0.001));
    double v[5] = {NAN, 3, 5, 5, 1};
    CHECK(rc_argmax(v, 5) == 2);                                  /* ties: the shallower depth */
    double none[2] = {NAN, NAN};
    CHECK(rc_argmax(none, 2) == -1);
    /* the cost table formats: specbed profile JSON and bench_engine CSV */
    char path[] = "/tmp/specbed_cost_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fputs("{\"model\": \"m\", \"threads\": 2, \"history\": 256, \"rows\": [1, 8, 4], "
          "\"seconds_per_step\": [0.002, 0.006, 0.004], \"draft_seconds_per_token\": 0.0005}\n", f);
    fclose(f);
    char err[256];
    CHECKF(!cost_curve_load(&t, path, err, sizeof err), "%s", err);
    CHECK(t.n == 3 && t.rows[1] == 4 && NEAR(cost_curve_at(&t, 6), 0.005) && NEAR(t.draft_seconds_per_token, 0.0005));
    f = fopen(path, "w");
    fputs("metric,batch,rows_per_seq,value,unit\nforward_ms,1,1,2.0,ms\nforward_ms,4,2,6.0,ms\n"
          "decode_tokens_per_s,1,1,500,tokens/s\n", f);
    fclose(f);
    CHECKF(!cost_curve_load(&t, path, err, sizeof err), "%s", err);
    CHECK(t.n == 2 && t.rows[1] == 8 && NEAR(t.seconds[1], 0.006));
    f = fopen(path, "w");
    fputs("{\"rows\": [1, 2], \"seconds_per_step\": [0.1]}", f);
    fclose(f);
    CHECK(cost_curve_load(&t, path, err, sizeof err) == -1 && strstr(err, "same length"));
    unlink(path);
}

static void test_expand(void) {
    char out[256];
    CHECK(!proc_expand("serve --port {port} --depth {depth} --drafter {drafter} {drafter_args} {port}", 8123, 4, "draft", "--draft-model m", out, sizeof out));
    CHECK(!strcmp(out, "serve --port 8123 --depth 4 --drafter draft --draft-model m 8123"));
    CHECK(!proc_expand("x {depth} {drafter}", 1, -1, NULL, NULL, out, sizeof out) && !strcmp(out, "x {depth} {drafter}"));
    CHECK(proc_expand("{port}{port}{port}", 65535, 0, NULL, NULL, out, 8) == -1);
    int port;
    CHECK(!proc_free_port(&port, NULL, 0) && port > 0 && port < 65536);
}

int main(void) {
    test_percentiles();
    test_profile();
    test_arrivals();
    test_summary();
    test_content_checks();
    test_calibration();
    test_recommend();
    test_expand();
    return tu_done("test_bench_maths");
}
