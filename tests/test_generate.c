/* label: model */
/* test_generate.c — plain generation is a function of the prompt alone:
 * the same prompt gives the same tokens alone, beside 7 other prompts of
 * different lengths, and with a different prefill chunk budget. This is the
 * batch invariance speculative decoding relies on (DESIGN §4). */
#include <stdlib.h>
#include <string.h>
#include "generate.h"
#include "test_util.h"

static void fill_prompt(int *p, int n, int vocab, unsigned seed) {
    for (int i = 0; i < n; i++) p[i] = (int)(((unsigned)i * 2654435761u + seed * 40503u) % (unsigned)vocab);
}

static void run_fixture(const char *rel) {
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path(rel), .max_seqs = 8, .max_batch_rows = 64, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    int V = e->m->cfg.vocab_size;
    enum { N = 8, MAXP = 300 };
    static int prompts[N][MAXP];
    int lens[N] = {150, 7, 260, 33, 1, 129, 90, 200};
    const int *pp[N];
    for (int i = 0; i < N; i++) { fill_prompt(prompts[i], lens[i], V, (unsigned)i + 1); pp[i] = prompts[i]; }
    gen_params gp = {.max_tokens = 40, .ignore_eos = 1};

    gen_result alone[N], together[N];
    for (int i = 0; i < N; i++)
        if (gen_run(e, &pp[i], &lens[i], 1, &gp, NULL, NULL, &alone[i], NULL, err, sizeof err))
            CHECKF(0, "%s", err);
    if (gen_run(e, pp, lens, N, &gp, NULL, NULL, together, NULL, err, sizeof err)) CHECKF(0, "%s", err);
    for (int i = 0; i < N; i++) {
        CHECK(alone[i].n_tokens == 40 && together[i].n_tokens == 40);
        CHECKF(!memcmp(alone[i].tokens, together[i].tokens, sizeof(int) * 40),
               "%s: prompt %d differs alone vs in a batch of 8", rel, i);
    }
    gen_results_free(together, N);
    /* A smaller row budget changes how prompts are chunked, never the tokens. */
    e->opts.max_batch_rows = 9;
    if (gen_run(e, pp, lens, N, &gp, NULL, NULL, together, NULL, err, sizeof err)) CHECKF(0, "%s", err);
    for (int i = 0; i < N; i++)
        CHECKF(!memcmp(alone[i].tokens, together[i].tokens, sizeof(int) * 40), "%s: prompt %d differs with chunk 9", rel, i);
    gen_results_free(together, N);
    e->opts.max_batch_rows = 64;

    /* Sampling is reproducible for a seed and depends on it. */
    gp.sp = (sampler_params){.temperature = 1.0f, .top_p = 0.95f};
    gp.seed = 11;
    gen_result s1, s2, s3;
    CHECK(!gen_run(e, &pp[0], &lens[0], 1, &gp, NULL, NULL, &s1, NULL, err, sizeof err));
    CHECK(!gen_run(e, &pp[0], &lens[0], 1, &gp, NULL, NULL, &s2, NULL, err, sizeof err));
    gp.seed = 12;
    CHECK(!gen_run(e, &pp[0], &lens[0], 1, &gp, NULL, NULL, &s3, NULL, err, sizeof err));
    CHECK(!memcmp(s1.tokens, s2.tokens, sizeof(int) * 40));
    CHECK(memcmp(s1.tokens, s3.tokens, sizeof(int) * 40) != 0);
    gen_results_free(&s1, 1); gen_results_free(&s2, 1); gen_results_free(&s3, 1);

    /* Bad requests fail cleanly and leak no KV page. */
    int before = kv_pages_free(e->kv);
    static int longp[600];
    fill_prompt(longp, 600, V, 3);
    const int *lp = longp;
    int n600 = 600;
    gen_result r;
    CHECK(gen_run(e, &lp, &n600, 1, &gp, NULL, NULL, &r, NULL, err, sizeof err) != 0);
    CHECKF(strstr(err, "context") != NULL, "%s", err);
    longp[0] = V + 5;
    int n5 = 5;
    CHECK(gen_run(e, &lp, &n5, 1, &gp, NULL, NULL, &r, NULL, err, sizeof err) != 0);
    CHECK(kv_pages_free(e->kv) == before);
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
    gen_results_free(alone, N);
    gen_engine_free(e);
}

int main(void) {
    run_fixture("tests/fixtures/qwen3-tied");
    run_fixture("tests/fixtures/qwen3-untied");
    return tu_done("test_generate");
}
