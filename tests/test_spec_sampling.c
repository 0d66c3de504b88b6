/* label: model */
/* test_spec_sampling.c — end to end, speculative sampling has the target's
 * distribution: over many seeds, the tokens produced by verify steps
 * (generated tokens 2 and 3; token 1 comes from prefill in both loops) have
 * the same frequencies with speculation on as off (two-sample chi-square at
 * the 0.1% level), for a sampling draft model (q ≠ p: a different model) and
 * for ngram (one-hot q). top_k keeps the bins populated. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "drafters.h"
#include "spec_run.h"
#include "test_util.h"

enum { SEEDS = 2000, PLEN = 12 };


static void compare(const char *what, const int *a, const int *b, int n_bins) {
    int dof;
    double x2 = tu_chi2_two_sample(a, b, n_bins, &dof);
    CHECKF(dof >= 2, "%s: only %d populated bins", what, dof + 1);
    CHECKF(x2 < tu_chi2_crit(dof), "%s: chi2 %.1f > %.1f (dof %d)", what, x2, tu_chi2_crit(dof), dof);
    printf("%s: chi2 %.1f, dof %d, critical %.1f\n", what, x2, dof, tu_chi2_crit(dof));
}

int main(void) {
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path("tests/fixtures/qwen3-tied"), .max_seqs = 1, .max_seq_len = 256};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_spec_sampling"); }
    int V = e->m->cfg.vocab_size;
    int prompt[PLEN];
    for (int j = 0; j < PLEN; j++) prompt[j] = (j % 3) * 17 + 5;   /* repetitive: ngram drafts */
    const int *pp = prompt;
    int plen = PLEN;
    gen_params gp = {.max_tokens = 3, .ignore_eos = 1,
                     .sp = {.temperature = 1.0f, .top_p = 1.0f, .top_k = 6}};
    int *off2 = calloc((size_t)V, sizeof(int)), *off3 = calloc((size_t)V, sizeof(int));
    for (int s = 0; s < SEEDS; s++) {
        gen_result r;
        gp.seed = 1000003ull * (unsigned)s;
        if (gen_run(e, &pp, &plen, 1, &gp, NULL, NULL, &r, NULL, err, sizeof err)) { CHECKF(0, "%s", err); break; }
        off2[r.tokens[1]]++; off3[r.tokens[2]]++;
        gen_results_free(&r, 1);
    }
    const char *names[2] = {"draft(other)", "ngram"};
    drafter_opts dos[2] = {{.name = "draft", .draft_model = tu_path("tests/fixtures/qwen3-untied"), .max_seqs = 1},
                           {.name = "ngram"}};
    for (int di = 0; di < 2; di++) {
        drafter *d;
        if (drafter_create(&d, &dos[di], e, err, sizeof err)) { CHECKF(0, "%s", err); continue; }
        int *on2 = calloc((size_t)V, sizeof(int)), *on3 = calloc((size_t)V, sizeof(int));
        spec_counters cnt = {0};
        for (int s = 0; s < SEEDS; s++) {
            gen_result r;
            spec_timing tm;
            /* different seeds from the reference: the two runs are independent samples */
            spec_params sp = {.gen = gp, .depth = 3};
            sp.gen.seed = 7777777ull + 31ull * (unsigned)s;
            sp.gen.max_tokens = 6;   /* so the first verify step drafts 3 */
            if (spec_run(e, d, &pp, &plen, 1, &sp, NULL, NULL, &r, &tm, err, sizeof err)) { CHECKF(0, "%s", err); break; }
            spec_counters_add(&cnt, &tm.counters);
            on2[r.tokens[1]]++; on3[r.tokens[2]]++;
            gen_results_free(&r, 1);
        }
        char what[64];
        snprintf(what, sizeof what, "%s token 2", names[di]);
        compare(what, off2, on2, V);
        snprintf(what, sizeof what, "%s token 3", names[di]);
        compare(what, off3, on3, V);
        /* The drafter must have drafted; ngram's one-hot q must hit both the
         * accept and the reject path. (Two random fixtures share almost no
         * top-k support, so draft(other) is mostly the rejection path; the
         * mixed case with q ≠ p is covered exactly in test_verify.) */
        const spec_counters *c = &cnt;
        printf("%s: drafted %ld, accepted %ld\n", names[di], c->drafted_tokens, c->accepted_tokens);
        CHECKF(c->drafted_tokens > 0, "%s: the drafter proposed nothing", names[di]);
        if (di == 1)
            CHECKF(c->accepted_tokens > 0 && c->accepted_tokens < c->drafted_tokens,
                   "%s: drafted %ld accepted %ld — both accept and reject paths must run", names[di],
                   c->drafted_tokens, c->accepted_tokens);
        free(on2); free(on3);
        drafter_free(d);
    }
    free(off2); free(off3);
    gen_engine_free(e);
    return tu_done("test_spec_sampling");
}
