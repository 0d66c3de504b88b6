/* label: model */
/* test_spec_stats.c — the speculative statistics `--stats-json` writes.
 * Fields named like `vllm bench serve`'s hold vLLM's values by vLLM's
 * formulas (vllm/benchmarks/serve.py over the counters of
 * vllm/v1/spec_decode/metrics.py): checked on hand-built counter sets whose
 * answers are worked out here from those formulas, where specbed's own
 * accept length (committed ÷ verify steps) differs. And the run's
 * verify_steps counts decode steps only: a prompt prefilled in several
 * chunks adds forward steps, not verify steps. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "drafters.h"
#include "spec_run.h"
#include "spec_stats_json.h"
#include "test_util.h"

static double num(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

#define NEAR(a, b) (fabs((a) - (b)) < 1e-12)

/* 142 verify steps, 3 of them with an empty proposal: 139 drafts at depth
 * 3, some shorter than 3 (an ngram match that ran out). vLLM divides by
 * the 139 drafts; specbed's accept length by the 142 steps. */
static void test_vllm_figures(void) {
    spec_counters c = {0};
    c.steps = 142;
    c.drafts = 139;
    c.drafted_tokens = 139 + 136 + 125;
    c.drafted_at[0] = 139, c.drafted_at[1] = 136, c.drafted_at[2] = 125;
    c.accepted_at[0] = 70, c.accepted_at[1] = 30, c.accepted_at[2] = 12;
    c.accepted_tokens = 70 + 30 + 12;
    c.committed_tokens = c.accepted_tokens + c.steps;   /* a bonus token per step */
    c.empty_proposals = 3;
    c.unverified_tokens = 5;
    c.gated_steps = 2;
    cJSON *j = cJSON_CreateObject();
    spec_stats_add_json(j, &c, 3);
    CHECK(num(j, "spec_decode_num_drafts") == 139);
    CHECK(num(j, "spec_decode_draft_tokens") == 400);
    CHECK(num(j, "spec_decode_accepted_tokens") == 112);
    CHECKF(NEAR(num(j, "spec_decode_acceptance_rate"), 112.0 / 400.0 * 100), "rate %g",
           num(j, "spec_decode_acceptance_rate"));
    /* vLLM: 1 + accepted / drafts = 1.806, not committed / steps = 1.789 */
    CHECKF(NEAR(num(j, "spec_decode_acceptance_length"), 1 + 112.0 / 139.0), "acceptance length %g (want %g)",
           num(j, "spec_decode_acceptance_length"), 1 + 112.0 / 139.0);
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(j, "spec_decode_per_position_acceptance_rates");
    CHECK(cJSON_GetArraySize(pp) == 3);
    const double want[3] = {70.0 / 139, 30.0 / 139, 12.0 / 139};   /* ÷ drafts, not ÷ steps, not ÷ reached */
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetArrayItem(pp, i);
        CHECKF(v && NEAR(v->valuedouble, want[i]), "position %d: %g, want %g", i, v ? v->valuedouble : NAN, want[i]);
    }
    CHECKF(NEAR(num(j, "specbed_accept_length"), 254.0 / 142.0), "specbed accept length %g",
           num(j, "specbed_accept_length"));
    CHECK(num(j, "specbed_spec_verify_steps") == 142 && num(j, "specbed_committed_tokens") == 254);
    CHECK(num(j, "specbed_empty_proposals") == 3 && num(j, "specbed_unverified_draft_tokens") == 5 &&
          num(j, "specbed_gated_steps") == 2);
    /* no key of vLLM's holds specbed's figure */
    CHECK(!NEAR(num(j, "spec_decode_acceptance_length"), num(j, "specbed_accept_length")));
    cJSON_Delete(j);

    /* depth 5, positions 4 and 5 never reached: vLLM reports a rate per
     * speculative position, 0 where nothing was accepted */
    j = cJSON_CreateObject();
    spec_stats_add_json(j, &c, 5);
    pp = cJSON_GetObjectItemCaseSensitive(j, "spec_decode_per_position_acceptance_rates");
    CHECK(cJSON_GetArraySize(pp) == 5 && cJSON_GetArrayItem(pp, 4)->valuedouble == 0);
    cJSON_Delete(j);
}

/* Nothing drafted (every proposal empty): vLLM's serve.py writes no
 * spec_decode_* field at all; specbed's steps still count. */
static void test_nothing_drafted(void) {
    spec_counters c = {0};
    c.steps = 10;
    c.committed_tokens = 10;
    c.empty_proposals = 10;
    cJSON *j = cJSON_CreateObject();
    spec_stats_add_json(j, &c, 4);
    for (const cJSON *it = j->child; it; it = it->next)
        CHECKF(strncmp(it->string, "spec_decode_", 12), "'%s' written with nothing drafted", it->string);
    CHECK(num(j, "specbed_accept_length") == 1 && num(j, "specbed_spec_verify_steps") == 10);
    cJSON_Delete(j);
}

/* A 300-token prompt prefilled in 64-row chunks: five forwards before the
 * first decode step. verify_steps counts the decode steps alone, and each
 * is one of the drafter's verify steps (ngram, every step speculates). */
static void test_verify_steps(void) {
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path("tests/fixtures/qwen3-tied"), .max_seqs = 1, .max_batch_rows = 64,
                          .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    drafter *d = NULL;
    drafter_opts dop = {.name = "ngram", .max_seqs = 1, .quiet = 1};
    CHECKF(!drafter_create(&d, &dop, e, err, sizeof err), "%s", err);
    enum { NP = 300 };
    int prompt[NP];
    for (int i = 0; i < NP; i++) prompt[i] = (i * 37 + 11) % 97 + 100;   /* a repeating text: ngram drafts */
    const int *pp = prompt;
    int np = NP;
    spec_params sp = {.gen = {.max_tokens = 30, .ignore_eos = 1}, .depth = 3};
    gen_result r;
    spec_timing t;
    if (d && !spec_run(e, d, &pp, &np, 1, &sp, NULL, NULL, &r, &t, err, sizeof err)) {
        long chunks = t.forward_steps - t.verify_steps;
        CHECKF(chunks == (NP + 63) / 64, "%ld forward steps, %ld verify steps: %ld prefill forwards, want %d",
               t.forward_steps, t.verify_steps, chunks, (NP + 63) / 64);
        CHECKF(t.verify_steps == t.counters.steps + t.counters.gated_steps, "verify steps %ld, the drafter's %ld",
               t.verify_steps, t.counters.steps);
        CHECK(t.counters.drafts > 0);
        gen_results_free(&r, 1);
    } else {
        CHECKF(0, "spec_run: %s", err);
    }
    drafter_free(d);
    gen_engine_free(e);
}

int main(void) {
    test_vllm_figures();
    test_nothing_drafted();
    test_verify_steps();
    return tu_done("test_spec_stats");
}
