/* label: unit */
/* test_cost_curve.c — the one cost curve (common/cost_curve.h) that the
 * verify policies (spec/verify_policy.c) and the depth recommender
 * (bench/report/recommend.c) both read. For the same table, at every row count —
 * below the first point, between points, past the last, fractional — the
 * recommender's step cost is the curve's, and with drafts that always
 * survive the confidence policy admits exactly the depth the recommender
 * predicts to be best (both maximise committed tokens per second over the
 * same curve). Also: the curve is sorted, averaged and monotone whatever
 * order the points come in, and bad tables are refused by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cost_curve.h"
#include "recommend.h"
#include "test_util.h"
#include "verify_policy.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1, fabs(b)); }

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* policy's ℓ for one request whose drafts all survive (a = 1), up to kmax */
static int policy_depth(const cost_curve *c, int kmax) {
    float a[1][SPEC_MAX_DEPTH];
    for (int j = 0; j < SPEC_MAX_DEPTH; j++) a[0][j] = 1.0f;
    int ell = -1;
    vpolicy_admit(c, (const float (*)[SPEC_MAX_DEPTH])a, &kmax, 1, &ell, NULL);
    return ell;
}

static void agree(const char *path, const char *label) {
    cost_curve c;
    char err[256];
    CHECKF(!cost_curve_load(&c, path, err, sizeof err), "%s: %s", label, err);
    double p[SPEC_MAX_DEPTH];
    for (int i = 0; i < SPEC_MAX_DEPTH; i++) p[i] = 1.0;   /* every draft accepted */
    /* the recommender's step at depth k, one sequence, is cost(k + 1 rows in 1 sequence) */
    for (int k = 0; k < SPEC_MAX_DEPTH; k++) {
        rc_pred r = rc_predict(&c, p, SPEC_MAX_DEPTH, k, 1, 0, NAN);
        CHECKF(near(r.step_s, cost_curve_at_seqs(&c, 1, k + 1)), "%s: depth %d: recommender %g, curve %g", label, k,
               r.step_s, cost_curve_at_seqs(&c, 1, k + 1));
    }
    for (double rows = 0.5; rows <= 300; rows += 0.25) {
        double y = cost_curve_at(&c, rows);
        CHECKF(y > 0 && isfinite(y), "%s: cost(%g) = %g", label, rows, y);
        CHECKF(rows < 1 || cost_curve_at(&c, rows + 0.25) >= y, "%s: cost falls after %g rows", label, rows);
    }
    /* same curve, same choice */
    double tps[SPEC_MAX_DEPTH];
    for (int k = 0; k < SPEC_MAX_DEPTH; k++) tps[k] = rc_predict(&c, p, SPEC_MAX_DEPTH, k, 1, 0, NAN).tps;
    int best = rc_argmax(tps, SPEC_MAX_DEPTH), ell = policy_depth(&c, SPEC_MAX_DEPTH - 1);
    CHECKF(best == ell, "%s: recommender's best depth %d, policy admits %d", label, best, ell);
    printf("%s: %d points, best depth %d (recommender) = %d (policy)\n", label, c.n, best, ell);
}

int main(void) {
    char path[] = "/tmp/specbed_cost_curve_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return tu_done("test_cost_curve");
    close(fd);
    /* a profile-shaped table, points out of order: best depth 7 */
    put(path, "{\"rows\": [8, 1, 4, 2, 16], \"seconds_per_step\": [0.0024, 0.001, 0.0013, 0.0011, 0.005]}");
    agree(path, "profile JSON");
    cost_curve c;
    char err[256];
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n == 5 && c.rows[0] == 1 && c.rows[4] == 16);
    CHECK(near(cost_curve_at(&c, 3), 0.0012) && near(cost_curve_at(&c, 32), 0.005 + 16 * (0.0026 / 8)));
    /* a sweep-shaped table that starts at 4 rows (concurrency 4): the
     * scheduler of one request asks below the first point */
    put(path, "{\"rows\": [4, 8, 12, 16], \"seconds_per_step\": [0.004, 0.005, 0.0065, 0.008]}");
    agree(path, "sweep JSON");
    CHECK(!cost_curve_load(&c, path, err, sizeof err));
    CHECK(near(cost_curve_at(&c, 2), 0.0035) && near(cost_curve_at(&c, 0.5), 0.003125));   /* extends the first segment */
    /* bench_engine CSV, with a noisy dip: made monotone */
    put(path, "metric,batch,rows_per_seq,value,unit\nforward_ms,1,1,1.0,ms\nforward_ms,1,2,1.5,ms\n"
                "forward_ms,1,3,1.4,ms\nforward_ms,1,4,1.9,ms\nforward_ms,2,2,1.8,ms\ndecode_tokens_per_s,1,1,900,tok/s\n");
    agree(path, "bench_engine CSV");
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n == 4);
    CHECK(near(c.seconds[2], 0.0015) && near(c.seconds[3], (0.0019 + 0.0018) / 2));   /* dip lifted, 4 rows averaged */
    /* refusals name the problem */
    put(path, "{\"rows\": [1, 2], \"seconds_per_step\": [0.1]}");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "same length"));
    put(path, "{\"rows\": [0, 2], \"seconds_per_step\": [0.1, 0.2]}");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "entry 0"));
    put(path, "metric,batch\nother,1\n");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "forward_ms"));
    unlink(path);
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "cannot read"));
    cost_curve empty = {0};
    CHECK(isnan(cost_curve_at(&empty, 4)));
    CHECK(isnan(cost_curve_at_seqs(&empty, 2, 4)));

    /* curves per sequence count: the same rows cost less in fewer sequences */
    const char *seq_curves = "\"by_sequences\": ["
                             "{\"sequences\": 4, \"rows\": [4, 8], \"seconds_per_step\": [0.003, 0.006]},"
                             "{\"sequences\": 1, \"rows\": [1, 8], \"seconds_per_step\": [0.001, 0.004]}]}";
    char text[1024];
    snprintf(text, sizeof text, "{\"rows\": [1, 8], \"seconds_per_step\": [0.001, 0.008], %s", seq_curves);
    put(path, text);
    agree(path, "profile JSON with per-sequence curves");
    snprintf(text, sizeof text, "{\"rows\": [1, 8], \"seconds_per_step\": [0.001, 0.008], "
             "\"draft_seconds_per_token\": 0.0002, \"draft_seconds_per_step\": 0.0003, "
             "\"logits_seconds_per_row\": 0.00001, \"context_seconds_per_row_token\": 0.00000007, %s", seq_curves);
    put(path, text);
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n_by_seqs == 2 && c.by_seqs[0].seqs == 1);
    CHECK(near(cost_curve_at_seqs(&c, 1, 8), 0.004) && near(cost_curve_at_seqs(&c, 4, 8), 0.006));
    CHECK(near(cost_curve_at_seqs(&c, 2, 8), 0.004 + (0.006 - 0.004) / 3));   /* linear in sequences */
    CHECK(near(cost_curve_at_seqs(&c, 16, 8), 0.006) && near(cost_curve_at_seqs(&c, 0, 8), 0.008));
    CHECK(near(c.draft_seconds_per_step, 0.0003));
    CHECK(near(rc_draft_seconds(&c, 2, 0), 0) && near(rc_draft_seconds(&c, 2, 3), 2 * (0.0003 + 3 * 0.0002)));
    CHECK(near(rc_predict(&c, NULL, 0, 3, 2, 0, NAN).step_s, cost_curve_at_seqs(&c, 2, 8) + 2 * (0.0003 + 3 * 0.0002)));
    cost_curve back;   /* saved and read back: the same curves */
    CHECK(!cost_curve_save(&c, path, err, sizeof err) && !cost_curve_load(&back, path, err, sizeof err));
    CHECK(back.n_by_seqs == 2 && near(cost_curve_at_seqs(&back, 2, 8), cost_curve_at_seqs(&c, 2, 8)) &&
          near(back.draft_seconds_per_step, 0.0003) && near(back.logits_seconds_per_row, 0.00001) &&
          near(c.context_seconds_per_row_token, 7e-8) && near(back.context_seconds_per_row_token, 7e-8));
    /* an MoE target's routing curve: interpolated, held at the ends, saved and read back; out-of-range
     * counts (fewer than one row's k experts, more than exist) and unsorted rows refused by entry */
    put(path, "{\"rows\": [1, 8], \"seconds_per_step\": [0.001, 0.004], \"moe\": {\"experts\": 16, \"top_k\": 4, "
              "\"sparse_layers\": 4, \"expert_bytes\": 294912, \"text\": \"code\", \"rows\": [1, 2, 8], "
              "\"distinct_experts_per_layer\": [4, 6, 12]}}");
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n_moe == 3 && c.moe_top_k == 4 && c.moe_sparse_layers == 4);
    CHECK(near(cost_curve_experts_at(&c, 1), 4) && near(cost_curve_experts_at(&c, 5), 9) &&
          near(cost_curve_experts_at(&c, 64), 12) && near(cost_curve_experts_at(&c, 0.5), 4));
    CHECK(!strcmp(c.moe_text, "code") && near(c.moe_expert_bytes, 294912));
    CHECK(!cost_curve_save(&c, path, err, sizeof err) && !cost_curve_load(&back, path, err, sizeof err));
    CHECK(back.n_moe == 3 && near(cost_curve_experts_at(&back, 5), 9) && back.moe_experts == 16);
    CHECK(isnan(cost_curve_experts_at(&empty, 4)));
    /* experts on host: each point pays the bus time of the experts its step reads — 1 row its own 4,
     * 8 rows in 8 sequences the union of 8 independent 4-of-16 draws, 16·(1 − 0.75⁸) = 14.398 */
    const double per_expert = 4 * 294912 / 1e9;
    CHECK(!cost_curve_offload_experts(&back, 1e9, err, sizeof err));
    CHECK(near(cost_curve_at(&back, 1), 0.001 + 4 * per_expert));
    CHECK(near(cost_curve_at(&back, 8), 0.004 + 16 * (1 - pow(0.75, 8)) * per_expert));
    CHECK(strstr(back.source, "experts on host at 1 GB/s") != NULL);
    CHECK(cost_curve_offload_experts(&empty, 1e9, err, sizeof err) == -1 && strstr(err, "routing curve"));
    const char *bad_moe[] = {
        "\"rows\": [1, 2], \"distinct_experts_per_layer\": [3, 6]",    /* below one row's k */
        "\"rows\": [1, 2], \"distinct_experts_per_layer\": [4, 17]",   /* more than exist */
        "\"rows\": [2, 1], \"distinct_experts_per_layer\": [4, 6]",    /* rows not ascending */
        "\"rows\": [1, 2], \"distinct_experts_per_layer\": [4]"};      /* lengths differ */
    for (int i = 0; i < 4; i++) {
        snprintf(text, sizeof text, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"moe\": {\"experts\": 16, "
                 "\"top_k\": 4, \"sparse_layers\": 4, \"expert_bytes\": 1, %s}}", bad_moe[i]);
        put(path, text);
        CHECKF(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "moe"), "bad moe %d: %s", i, err);
    }
    /* bench_engine's CSV: one curve per batch */
    put(path, "metric,batch,rows_per_seq,value,unit\nforward_ms,1,1,1.0,ms\nforward_ms,1,4,2.0,ms\n"
              "forward_ms,4,1,2.5,ms\nforward_ms,4,2,4.0,ms\n");
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n_by_seqs == 2 && c.by_seqs[1].seqs == 4);
    CHECK(near(cost_curve_at_seqs(&c, 1, 4), 0.002) && near(cost_curve_at_seqs(&c, 4, 4), 0.0025));
    put(path, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"by_sequences\": [{\"sequences\": 0, \"rows\": [1], "
              "\"seconds_per_step\": [0.1]}]}");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "by_sequences[0]"));
    put(path, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"by_sequences\": {}}");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "by_sequences"));
    /* the draft cost per drafting batch: linear in the batch between the points, the nearest past the
     * ends, the batch-1 figures without any; saved and read back; malformed ones refused by entry */
    put(path, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"drafter\": \"mtp\", \"draft_seconds_per_step\": 0.0004, "
              "\"draft_seconds_per_token\": 0.0002, \"draft_seconds_per_prompt_token\": 0.00001, "
              "\"draft_by_sequences\": [{\"sequences\": 1, \"seconds_per_step\": 0.0004, \"seconds_per_token\": 0.0002}, "
              "{\"sequences\": 4, \"seconds_per_step\": 0.0001, \"seconds_per_token\": 0.00005}]}");
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n_draft_by_seqs == 2 &&
          near(c.draft_seconds_per_prompt_token, 0.00001));
    double F, T;
    cost_curve_draft_at(&c, 2, &F, &T);
    CHECK(near(F, 0.0003) && near(T, 0.00015));
    cost_curve_draft_at(&c, 8, &F, &T);
    CHECK(near(F, 0.0001) && near(T, 0.00005));
    cost_curve_draft_at(&c, 1, &F, &T);
    CHECK(near(F, 0.0004) && near(T, 0.0002));
    CHECK(!cost_curve_save(&c, path, err, sizeof err) && !cost_curve_load(&back, path, err, sizeof err));
    cost_curve_draft_at(&back, 2, &F, &T);
    CHECK(back.n_draft_by_seqs == 2 && near(F, 0.0003) && near(T, 0.00015) &&
          near(back.draft_seconds_per_prompt_token, 0.00001));
    CHECK(!strcmp(c.drafter, "mtp") && !strcmp(back.drafter, "mtp"));   /* whose drafting costs these are */
    put(path, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"draft_seconds_per_step\": 0.0004, "
              "\"draft_seconds_per_token\": 0.0002}");
    CHECK(!cost_curve_load(&c, path, err, sizeof err) && c.n_draft_by_seqs == 0);
    cost_curve_draft_at(&c, 4, &F, &T);
    CHECK(near(F, 0.0004) && near(T, 0.0002));
    put(path, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"draft_by_sequences\": [{\"sequences\": 2, "
              "\"seconds_per_step\": 0.1, \"seconds_per_token\": 0.1}, {\"sequences\": 2, \"seconds_per_step\": 0.1, "
              "\"seconds_per_token\": 0.1}]}");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "draft_by_sequences[1]"));
    put(path, "{\"rows\": [1], \"seconds_per_step\": [0.1], \"draft_by_sequences\": [{\"sequences\": 1, "
              "\"seconds_per_step\": -1, \"seconds_per_token\": 0.1}]}");
    CHECK(cost_curve_load(&c, path, err, sizeof err) == -1 && strstr(err, "draft_by_sequences[0]"));
    unlink(path);
    return tu_done("test_cost_curve");
}
