/* label: model */
/* test_spec_lossless.c — speculation never changes greedy output.
 * For every drafter, depths 1..8 and batches of 1, 3 and 8 sequences of
 * mixed lengths, spec_run's tokens equal the plain loop's (engine/generate.c,
 * a separate implementation) token for token. Each configuration must also
 * have drafted and accepted something: a disarmed drafter would trivially
 * "pass", so it fails here instead.
 *
 * No argument: the random test fixtures, where the target drafting for
 * itself exercises the all-accepted + bonus path and the other fixture
 * exercises rejections. `bundled`: the bundled models/tiny family on code
 * and prose prompts from workloads/ (depths 1, 3, 5, 8; batches 1 and 8);
 * `full` (label slow): every depth × batch there. ctest's
 * test_spec_lossless_bf16 runs `bundled` with SPECBED_CPU_PATH=avx512bf16:
 * invariance, hence losslessness, must hold on that path too. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "lossless.h"
#include "test_util.h"

static const int all_depths[8] = {1, 2, 3, 4, 5, 6, 7, 8}, all_batches[3] = {1, 3, 8};

/* Bundled models: ngram and the draft model on code and prose prompts; in
 * full every depth × batch, else depths 1, 3, 5, 8 on batches 1 and 8. */
static int run_bundled(int full) {
    if (!tu_have("models/tiny/model.safetensors", "models/tiny-draft/model.safetensors", "workloads/code.jsonl",
                 "workloads/prose.jsonl", NULL))
        return tu_skip("test_spec_lossless", "models/tiny, models/tiny-draft or workloads/ absent");
    static const int some_depths[4] = {1, 3, 5, 8}, some_batches[2] = {1, 8};
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path("models/tiny"), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_spec_lossless"); }
    const char *wl[2] = {"code", "prose"};
    ll_config cfgs[2] = {{"bundled ngram", {.name = "ngram"}, 1, NULL},
                         {"bundled draft", {.name = "draft", .draft_model = tu_path("models/tiny-draft"), .max_seqs = 8},
                          1, NULL}};
    for (int w = 0; w < 2; w++) {
        static int prompts[LL_NP][LL_MAXP];
        int lens[LL_NP];
        if (ll_load_prompts(e, wl[w], prompts, lens, LL_NP) < LL_NP) { CHECKF(0, "workloads/%s.jsonl: too few prompts", wl[w]); continue; }
        for (int c = 0; c < 2; c++) {
            long n = ll_check(e, &cfgs[c], prompts, lens, full ? all_depths : some_depths, full ? 8 : 4,
                              full ? all_batches : some_batches, full ? 3 : 2);
            printf("%s on %s: %ld tokens compared\n", cfgs[c].label, wl[w], n);
        }
    }
    gen_engine_free(e);
    return tu_done("test_spec_lossless");
}

int main(int argc, char **argv) {
    tu_part part = tu_parse_part(argc, argv);
    if (ll_path_missing("test_spec_lossless")) return tu_skip("test_spec_lossless", "kernel path not available");
    printf("kernels: %s\n", kb_cpu_path());
    if (part != TU_FIXTURES) return run_bundled(part == TU_FULL);
    char err[1024];
    const char *target = "tests/fixtures/qwen3-tied";
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path(target), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_spec_lossless"); }
    int V = e->m->cfg.vocab_size;
    static int prompts[LL_NP][LL_MAXP];
    int lens[LL_NP];
    ll_synthetic_prompts(V, prompts, lens);
    ll_config cfgs[] = {
        {"ngram", {.name = "ngram"}, 0, NULL},
        {"draft(self)", {.name = "draft", .draft_model = tu_path(target), .max_seqs = 8}, 1, NULL},
        {"draft(other)", {.name = "draft", .draft_model = tu_path("tests/fixtures/qwen3-untied"), .max_seqs = 8}, 0,
         NULL},
        /* drafting that stops early, with the signal ahead (DSpark's c_k) and without (top probability) */
        {"dspark(confidence)", {.name = "dspark", .draft_model = tu_path("tests/fixtures/dspark-tiny"), .max_seqs = 8,
                                .quiet = 1}, 0, "confidence"},
        {"draft(self, adaptive)", {.name = "draft", .draft_model = tu_path(target), .max_seqs = 8}, 1, "adaptive"},
    };
    int nc = (int)(sizeof cfgs / sizeof cfgs[0]);
    long total_tokens[8] = {0};
    for (int c = 0; c < nc; c++) {
        total_tokens[c] = ll_check(e, &cfgs[c], prompts, lens, all_depths, 8, all_batches, 3);
        printf("%s: %ld tokens compared\n", cfgs[c].label, total_tokens[c]);
        CHECKF(total_tokens[c] >= 2000, "%s: only %ld tokens", cfgs[c].label, total_tokens[c]);
    }
    gen_engine_free(e);

    return tu_done("test_spec_lossless");
}
