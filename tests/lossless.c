/* lossless.c — the greedy losslessness check (see lossless.h). */
#include "lossless.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "spec_run.h"
#include "test_util.h"

/* depths from `depths`, batches from `batches`; each batch size runs the
 * prompts in consecutive groups of that size */
long ll_check(gen_engine *e, const ll_config *c, int prompts[LL_NP][LL_MAXP], int *lens, const int *depths,
              int n_depths, const int *batches, int n_batches) {
    long compared = 0;
    char err[1024];
    drafter *d = NULL;
    if (drafter_create(&d, &c->dopt, e, err, sizeof err) || !d) { CHECKF(0, "%s: %s", c->label, err); return 0; }
    gen_params gp = {.max_tokens = LL_GEN, .ignore_eos = 1};
    gen_result ref[LL_NP];
    const int *pp[LL_NP];
    for (int i = 0; i < LL_NP; i++) pp[i] = prompts[i];
    for (int i = 0; i < LL_NP; i++)
        CHECK(!gen_run(e, &pp[i], &lens[i], 1, &gp, NULL, NULL, &ref[i], NULL, err, sizeof err));
    for (int di = 0; di < n_depths; di++) {
        int depth = depths[di];
        spec_counters cnt = {0};
        for (int bi = 0; bi < n_batches; bi++) {
            int B = batches[bi];
            for (int start = 0; start + B <= LL_NP; start += B) {
                gen_result out[LL_NP];
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
                    compared += out[i].n_tokens;
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
    gen_results_free(ref, LL_NP);
    drafter_free(d);
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
    return compared;
}

/* The first n prompts of workloads/NAME.jsonl, tokenized and cut to at most
 * LL_MAXP tokens (the last LL_MAXP, so the continuation follows the text). */
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

