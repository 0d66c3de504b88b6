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
 * `full` (label slow): every depth × batch there. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "drafters.h"
#include "spec_run.h"
#include "test_util.h"

enum { NP = 8, MAXP = 400, GEN = 32 };

typedef struct {
    const char *target, *label;
    drafter_opts dopt;
    int need_accept;   /* this drafter must get drafts accepted */
} config;

static long total_tokens[8];

/* depths 1..max_depth (every `step`), batches from `batches` */
static void run_config(gen_engine *e, const config *c, int ci, int prompts[NP][MAXP], int *lens, const int *depths,
                       int n_depths, const int *batches, int n_batches) {
    char err[1024];
    drafter *d = NULL;
    if (drafter_create(&d, &c->dopt, e, err, sizeof err) || !d) { CHECKF(0, "%s: %s", c->label, err); return; }
    gen_params gp = {.max_tokens = GEN, .ignore_eos = 1};
    gen_result ref[NP];
    const int *pp[NP];
    for (int i = 0; i < NP; i++) pp[i] = prompts[i];
    for (int i = 0; i < NP; i++)
        CHECK(!gen_run(e, &pp[i], &lens[i], 1, &gp, NULL, NULL, &ref[i], NULL, err, sizeof err));
    for (int di = 0; di < n_depths; di++) {
        int depth = depths[di];
        spec_counters cnt = {0};
        for (int bi = 0; bi < n_batches; bi++) {
            int B = batches[bi];
            for (int start = 0; start + B <= NP; start += B) {
                gen_result out[NP];
                spec_params sp = {.gen = gp, .depth = depth};
                spec_timing tm;
                if (spec_run(e, d, pp + start, lens + start, B, &sp, NULL, NULL, out, &tm, err, sizeof err)) {
                    CHECKF(0, "%s depth %d batch %d: %s", c->label, depth, B, err);
                    continue;
                }
                spec_counters_add(&cnt, &tm.counters);
                for (int i = 0; i < B; i++) {
                    const gen_result *r = &ref[start + i];
                    CHECKF(out[i].n_tokens == r->n_tokens &&
                               !memcmp(out[i].tokens, r->tokens, sizeof(int) * (size_t)r->n_tokens),
                           "%s depth %d batch %d prompt %d: speculative output differs", c->label, depth, B,
                           start + i);
                    total_tokens[ci] += out[i].n_tokens;
                }
                gen_results_free(out, B);
            }
        }
        const spec_counters *k = &cnt;
        CHECKF(k->drafts > 0 && k->drafted_tokens > 0, "%s depth %d: the drafter proposed nothing", c->label, depth);
        if (c->need_accept)
            CHECKF(k->accepted_tokens > 0, "%s depth %d: nothing accepted; acceptance path never ran", c->label, depth);
        CHECK(k->committed_tokens == k->steps + k->accepted_tokens);
    }
    gen_results_free(ref, NP);
    drafter_free(d);
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
}

/* The first n prompts of workloads/NAME.jsonl, tokenized and cut to at most
 * MAXP tokens (the last MAXP, so the continuation follows the text). */
static int load_prompts(gen_engine *e, const char *name, int prompts[][MAXP], int *lens, int n) {
    char rel[128];
    snprintf(rel, sizeof rel, "workloads/%s.jsonl", name);
    FILE *f = fopen(tu_path(rel), "r");
    if (!f) return 0;
    char *line = NULL;
    size_t cap = 0;
    int got = 0;
    while (got < n && getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *p = j ? cJSON_GetObjectItemCaseSensitive(j, "prompt") : NULL;
        int *ids = NULL, n_ids = 0;
        char err[256];
        if (cJSON_IsString(p) && !tok_encode(e->tok, p->valuestring, strlen(p->valuestring), &ids, &n_ids, err, sizeof err) &&
            n_ids > 0) {
            int keep = n_ids < MAXP ? n_ids : MAXP;
            /* mixed lengths: prompt i keeps a different share */
            keep = keep * (3 + got % 5) / 7;
            if (keep < 1) keep = 1;
            memcpy(prompts[got], ids + n_ids - keep, sizeof(int) * (size_t)keep);
            lens[got++] = keep;
        }
        free(ids);
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    return got;
}

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
    config cfgs[2] = {{"models/tiny", "bundled ngram", {.name = "ngram"}, 1},
                      {"models/tiny", "bundled draft", {.name = "draft", .draft_model = tu_path("models/tiny-draft"),
                                                        .max_seqs = 8}, 1}};
    for (int w = 0; w < 2; w++) {
        static int prompts[NP][MAXP];
        int lens[NP];
        if (load_prompts(e, wl[w], prompts, lens, NP) < NP) { CHECKF(0, "workloads/%s.jsonl: too few prompts", wl[w]); continue; }
        for (int c = 0; c < 2; c++) {
            long before = total_tokens[3 + c];
            run_config(e, &cfgs[c], 3 + c, prompts, lens, full ? all_depths : some_depths, full ? 8 : 4,
                       full ? all_batches : some_batches, full ? 3 : 2);
            printf("%s on %s: %ld tokens compared\n", cfgs[c].label, wl[w], total_tokens[3 + c] - before);
        }
    }
    gen_engine_free(e);
    return tu_done("test_spec_lossless");
}

int main(int argc, char **argv) {
    tu_part part = tu_parse_part(argc, argv);
    if (part != TU_FIXTURES) return run_bundled(part == TU_FULL);
    char err[1024];
    const char *target = "tests/fixtures/qwen3-tied";
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path(target), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_spec_lossless"); }
    int V = e->m->cfg.vocab_size;
    static int prompts[NP][MAXP];
    int lens[NP] = {120, 9, 300, 40, 3, 129, 77, 210};
    /* Repetitive prompts (so ngram finds matches) mixed with pseudo-random ones. */
    for (int i = 0; i < NP; i++)
        for (int j = 0; j < lens[i]; j++)
            prompts[i][j] = i % 2 ? (int)((j * 2654435761u + (unsigned)i * 97u) % (unsigned)V)
                                  : (int)((unsigned)(j % (5 + i)) * 131u % (unsigned)V);
    config cfgs[] = {
        {target, "ngram", {.name = "ngram"}, 0},
        {target, "draft(self)", {.name = "draft", .draft_model = tu_path(target), .max_seqs = 8}, 1},
        {target, "draft(other)", {.name = "draft", .draft_model = tu_path("tests/fixtures/qwen3-untied"), .max_seqs = 8}, 0},
    };
    int nc = (int)(sizeof cfgs / sizeof cfgs[0]);
    for (int c = 0; c < nc; c++) {
        run_config(e, &cfgs[c], c, prompts, lens, all_depths, 8, all_batches, 3);
        printf("%s: %ld tokens compared\n", cfgs[c].label, total_tokens[c]);
        CHECKF(total_tokens[c] >= 2000, "%s: only %ld tokens", cfgs[c].label, total_tokens[c]);
    }
    gen_engine_free(e);

    return tu_done("test_spec_lossless");
}
