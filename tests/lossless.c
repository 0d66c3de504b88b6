/* lossless.c — the greedy losslessness check (see lossless.h). */
#include "lossless.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "spec_run.h"
#include "verify_policy.h"
#include "test_util.h"

static long run_counts(gen_engine *e, const drafter_opts *dopt, const char *label, int need_accept,
                       const char *policy, const int *depths, int n_depths, const int *batches, int n_batches,
                       const int *const *pp, const int *lens, int np, int gen, spec_counters *counts) {
    char err[1024];
    drafter *d = NULL;
    if (drafter_create(&d, dopt, e, err, sizeof err) || !d) { CHECKF(0, "%s: %s", label, err); return 0; }
    /* the bundled model's CPU curve (ms: rows 1/2/4/8 = 0.156/0.205/0.339/0.689):
     * admission cuts at survival ≈ 0.3, so policies both draft and stop */
    cost_curve cpu;
    cost_curve_from_points(&cpu, (const double[]){1, 2, 4, 8}, (const double[]){0.156e-3, 0.205e-3, 0.339e-3, 0.689e-3},
                           4, "test");
    vpolicy_kind kind = VPOLICY_FIXED;
    if (policy && vpolicy_parse(policy, &kind)) { CHECKF(0, "%s: unknown policy %s", label, policy); policy = NULL; }
    gen_params gp = {.max_tokens = gen, .ignore_eos = 1};
    gen_result *ref = calloc((size_t)np, sizeof *ref), *out = calloc((size_t)np, sizeof *out);
    long total = 0;
    for (int i = 0; i < np; i++)
        CHECK(!gen_run(e, &pp[i], &lens[i], 1, &gp, NULL, NULL, &ref[i], NULL, err, sizeof err));
    for (int di = 0; di < n_depths; di++) {
        int depth = depths[di];
        spec_counters cnt = {0};
        for (int bi = 0; bi < n_batches; bi++) {
            int B = batches[bi];
            for (int start = 0; start + B <= np; start += B) {
                vpolicy *vp = NULL;
                vpolicy_opts vo = {.kind = kind, .p_min = 0.5, .alpha = 0.8, .cost = &cpu,
                                   .max_slots = e->opts.max_seqs};
                if (kind != VPOLICY_FIXED && vpolicy_create(&vp, &vo, err, sizeof err)) CHECKF(0, "%s: %s", label, err);
                spec_params sp = {.gen = gp, .depth = depth, .verify = vpolicy_hook(vp)};
                spec_timing tm;
                int rc = spec_run(e, d, pp + start, lens + start, B, &sp, NULL, NULL, out, &tm, err, sizeof err);
                vpolicy_free(vp);
                if (rc) {
                    CHECKF(0, "%s depth %d batch %d: %s", label, depth, B, err);
                    continue;
                }
                spec_counters_add(&cnt, &tm.counters);
                for (int i = 0; i < B; i++) {
                    const gen_result *r = &ref[start + i];
                    CHECKF(out[i].n_tokens == r->n_tokens &&
                               !memcmp(out[i].tokens, r->tokens, sizeof(int) * (size_t)r->n_tokens),
                           "%s depth %d batch %d prompt %d: speculative output differs", label, depth, B, start + i);
                    total += out[i].n_tokens;
                }
                gen_results_free(out, B);
            }
        }
        const spec_counters *k = &cnt;
        if (counts) counts[di] = cnt;
        printf("%s depth %d: drafted %ld, accepted %ld, accept length %.2f\n", label, depth, k->drafted_tokens,
               k->accepted_tokens, spec_rates_between(NULL, k).accept_length);
        CHECKF(k->drafts > 0 && k->drafted_tokens > 0, "%s depth %d: the drafter proposed nothing", label, depth);
        if (need_accept)
            CHECKF(k->accepted_tokens > 0, "%s depth %d: nothing accepted; the acceptance path never ran", label, depth);
        CHECK(k->committed_tokens == k->steps + k->accepted_tokens);
    }
    gen_results_free(ref, np);
    free(ref);
    free(out);
    drafter_free(d);
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
    return total;
}

long ll_run(gen_engine *e, const drafter_opts *dopt, const char *label, int need_accept, const int *depths,
            int n_depths, const int *batches, int n_batches, const int *const *pp, const int *lens, int np, int gen) {
    return run_counts(e, dopt, label, need_accept, NULL, depths, n_depths, batches, n_batches, pp, lens, np, gen, NULL);
}

long ll_check_counts(gen_engine *e, const ll_config *c, int prompts[LL_NP][LL_MAXP], int *lens, const int *depths,
                     int n_depths, const int *batches, int n_batches, spec_counters *counts) {
    const int *pp[LL_NP];
    for (int i = 0; i < LL_NP; i++) pp[i] = prompts[i];
    return run_counts(e, &c->dopt, c->label, c->need_accept, c->policy, depths, n_depths, batches, n_batches, pp, lens,
                      LL_NP, LL_GEN, counts);
}

long ll_check(gen_engine *e, const ll_config *c, int prompts[LL_NP][LL_MAXP], int *lens, const int *depths,
              int n_depths, const int *batches, int n_batches) {
    return ll_check_counts(e, c, prompts, lens, depths, n_depths, batches, n_batches, NULL);
}

/* The first n prompts of workloads/NAME.jsonl, tokenized and cut to at most
 * LL_MAXP tokens (the last LL_MAXP, so the continuation follows the text). */
void ll_synthetic_prompts(int vocab, int prompts[LL_NP][LL_MAXP], int *lens) {
    static const int fl[LL_NP] = {120, 9, 300, 40, 3, 129, 77, 210};
    const unsigned V = (unsigned)vocab;
    for (int i = 0; i < LL_NP; i++) {
        lens[i] = fl[i];
        for (int j = 0; j < lens[i]; j++)
            prompts[i][j] = i % 2 ? (int)((j * 2654435761u + (unsigned)i * 97u) % V) : (int)((unsigned)(j % (5 + i)) * 131u % V);
    }
}

int ll_load_prompts(gen_engine *e, const char *name, int prompts[][LL_MAXP], int *lens, int n) {
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
            int keep = n_ids < LL_MAXP ? n_ids : LL_MAXP;
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


int ll_path_missing(const char *test) {
    const char *want = getenv("SPECBED_CPU_PATH");
    if (!want || !*want || !strcmp(kb_cpu_path(), want)) return 0;
    printf("%s: SPECBED_CPU_PATH=%s is not supported by this CPU (kernels: %s)\n", test, want, kb_cpu_path());
    return 1;
}
