/* drafter_test.h — shared pieces of the model-backed drafter tests
 * (test_drafter_mtp.c, test_drafter_dspark.c): golden files, the greedy
 * lossless sweep and the end-to-end sampling comparison. Header-only
 * (static functions) because each test is one program built from its own
 * .c and test_util.c. */
#ifndef SPECBED_DRAFTER_TEST_H
#define SPECBED_DRAFTER_TEST_H
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "drafters.h"
#include "lossless.h"
#include "spec_run.h"
#include "test_util.h"

typedef struct {
    st_model *st;
    cJSON *doc;
} dt_golden;

static inline int dt_exists(const char *rel) { return access(tu_path(rel), F_OK) == 0; }

static inline int dt_golden_open(dt_golden *g, const char *dir) {
    char p[512];
    char err[512];
    memset(g, 0, sizeof *g);
    snprintf(p, sizeof p, "%s/golden.safetensors", dir);
    if (st_open_file(&g->st, tu_path(p), err, sizeof err)) { CHECKF(0, "%s", err); return -1; }
    snprintf(p, sizeof p, "%s/golden.json", dir);
    char *txt = tu_read_file(tu_path(p), NULL);
    g->doc = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECKF(g->doc != NULL, "%s: unreadable", p);
    return g->doc ? 0 : -1;
}

static inline void dt_golden_close(dt_golden *g) {
    st_close(g->st);
    cJSON_Delete(g->doc);
}

/* An F32 golden tensor "<ctx>.<what>" with n elements (n < 0: any), or NULL. */
static inline const float *dt_get(const dt_golden *g, const char *ctx, const char *what, long n, long *n_out) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s", ctx, what);
    const st_tensor *t = st_find(g->st, name);
    if (!t || t->dt != KB_F32) { CHECKF(0, "golden tensor %s missing or not F32", name); return NULL; }
    long cnt = (long)(t->nbytes / 4);
    if (n >= 0 && cnt != n) { CHECKF(0, "golden tensor %s has %ld elements, want %ld", name, cnt, n); return NULL; }
    if (n_out) *n_out = cnt;
    return t->data;
}

static inline int dt_json_int(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(j) ? j->valueint : -1;
}

/* Largest |a - b| over n, and the largest |b| (for a relative bound). */
static inline double dt_max_diff(const float *a, const float *b, long n, double *scale) {
    double m = 0, s = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d != d ? INFINITY : d;
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    if (scale) *scale = s;
    return m;
}

static inline void dt_ids(int *out, const float *f, long n) {
    for (long i = 0; i < n; i++) out[i] = (int)f[i];
}

/* The target's final-normed hidden states (and taps) of tokens[n] computed
 * by the C forward in one fresh sequence: taps[n, n_taps, H]. */
static inline int dt_target_taps(gen_engine *e, const int *tokens, int n, const int *layers, int n_taps, float *taps) {
    char err[512];
    int seq = kv_seq_new(e->kv), rc = -1;
    if (seq < 0) return -1;
    int R = e->opts.max_batch_rows;
    for (int done = 0; done < n; done += R) {
        int m = n - done < R ? n - done : R;
        fwd_span sp = {.seq = seq, .n = m, .tokens = tokens + done};
        fwd_batch b = {.spans = &sp, .n_spans = 1};
        fwd_out o = {.tap_layers = layers, .n_taps = n_taps, .taps = taps + (size_t)done * n_taps * e->m->cfg.hidden_size};
        rc = fwd_run(e->fwd, e->kv, &b, &o, err, sizeof err);
        if (rc) { CHECKF(0, "%s", err); break; }
    }
    kv_seq_free(e->kv, seq);
    return rc;
}

/* Up to n prompts (each ≤ maxlen tokens, cut from the front so the end
 * stays where the workload cut it) from a workloads/ JSONL file, tokenized
 * by e's tokenizer into prompts[i] (malloc'd). Returns how many. */
static inline int dt_workload_prompts(gen_engine *e, const char *rel, int n, int maxlen, int **prompts, int *lens) {
    char err[512];
    char *txt = tu_read_file(tu_path(rel), NULL);
    if (!txt) { CHECKF(0, "%s: unreadable", rel); return 0; }
    int k = 0;
    for (char *line = strtok(txt, "\n"); line && k < n; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *pr = j ? cJSON_GetObjectItemCaseSensitive(j, "prompt") : NULL;
        int *ids = NULL, m = 0;
        if (cJSON_IsString(pr) && !tok_encode(e->tok, pr->valuestring, strlen(pr->valuestring), &ids, &m, err, sizeof err) &&
            m > 0) {
            int cut = m > maxlen ? m - maxlen : 0;
            memmove(ids, ids + cut, sizeof(int) * (size_t)(m - cut));
            prompts[k] = ids;
            lens[k++] = m - cut;
        } else {
            free(ids);
        }
        cJSON_Delete(j);
    }
    free(txt);
    return k;
}

/* The lossless tests' 8 prompts of mixed lengths (some past 128 tokens):
 * bundled, 4 code + 4 prose workload prompts cut to those lengths; else,
 * for the random fixtures, repetitive and pseudo-random token runs like the
 * fixture drafters' training data. prompts[i] malloc'd. Returns 8 on success. */
enum { DT_NP = 8 };
static inline int dt_prompts(gen_engine *e, int bundled, int **pr, int *lens) {
    const int L[DT_NP] = {131, 9, 40, 3, 20, 12, 60, 16};   /* 131 + generation crosses 128 */
    int np = 0;
    if (bundled) {
        np = dt_workload_prompts(e, "workloads/code.jsonl", 4, 131, pr, lens);
        np += dt_workload_prompts(e, "workloads/prose.jsonl", 4, 131, pr + np, lens + np);
        for (int i = 0; i < np; i++)
            if (lens[i] > L[i]) { memmove(pr[i], pr[i] + lens[i] - L[i], sizeof(int) * (size_t)L[i]); lens[i] = L[i]; }
    } else {
        int V = e->m->cfg.vocab_size - 4;
        for (int i = 0; i < DT_NP; i++, np++) {
            pr[i] = malloc(sizeof(int) * (size_t)L[i]);
            lens[i] = L[i];
            for (int j = 0; j < L[i]; j++)
                pr[i][j] = i % 2 ? (int)((j * 2654435761u + (unsigned)i * 97u) % (unsigned)V)
                                 : (int)((unsigned)(j % (3 + i)) * 131u % (unsigned)V);
        }
    }
    CHECKF(np == DT_NP, "only %d prompts", np);
    return np;
}

/* Greedy losslessness (tests/lossless.h), every depth required to have
 * had drafts accepted. Returns the tokens compared. */
static inline long dt_lossless(gen_engine *e, const drafter_opts *dopt, const char *label, const int *depths,
                               int n_depths, const int *batches, int n_batches, const int *const *pp, const int *lens,
                               int np, int gen) {
    return ll_run(e, dopt, label, 1, depths, n_depths, batches, n_batches, pp, lens, np, gen);
}

/* End to end, speculative sampling keeps the target's distribution: the
 * tokens made by verify steps (generated tokens 2 and 3) have the same
 * frequencies over `seeds` seeds with the drafter on (depth `depth`) as
 * off, by a two-sample chi-square at the 0.1% level. The drafter must have
 * had drafts both accepted and rejected. */
static inline void dt_sampling(gen_engine *e, const drafter_opts *dopt, const char *label, const int *prompt,
                               int plen, int depth, int seeds, float temperature, int top_k) {
    char err[1024];
    int V = e->m->cfg.vocab_size;
    gen_params gp = {.max_tokens = 3, .ignore_eos = 1, .sp = {.temperature = temperature, .top_p = 1.0f, .top_k = top_k}};
    int *off = calloc((size_t)2 * V, sizeof(int)), *on = calloc((size_t)2 * V, sizeof(int));
    for (int s = 0; s < seeds; s++) {
        gen_result r;
        gp.seed = 1000003ull * (unsigned)s;
        if (gen_run(e, &prompt, &plen, 1, &gp, NULL, NULL, &r, NULL, err, sizeof err)) { CHECKF(0, "%s", err); break; }
        off[r.tokens[1]]++;
        off[V + r.tokens[2]]++;
        gen_results_free(&r, 1);
    }
    drafter *d = NULL;
    if (drafter_create(&d, dopt, e, err, sizeof err) || !d) { CHECKF(0, "%s: %s", label, err); goto out; }
    spec_counters cnt = {0};
    for (int s = 0; s < seeds; s++) {
        gen_result r;
        spec_timing tm;
        spec_params sp = {.gen = gp, .depth = depth};
        sp.gen.seed = 7777777ull + 31ull * (unsigned)s;   /* independent of the reference's draws */
        sp.gen.max_tokens = depth + 3;                    /* the first verify step drafts `depth` */
        if (spec_run(e, d, &prompt, &plen, 1, &sp, NULL, NULL, &r, &tm, err, sizeof err)) { CHECKF(0, "%s", err); break; }
        spec_counters_add(&cnt, &tm.counters);
        on[r.tokens[1]]++;
        on[V + r.tokens[2]]++;
        gen_results_free(&r, 1);
    }
    for (int t = 0; t < 2; t++) {
        int dof;
        double x2 = tu_chi2_two_sample(off + (size_t)t * V, on + (size_t)t * V, V, &dof);
        CHECKF(dof >= 2, "%s token %d: only %d populated bins", label, t + 2, dof + 1);
        CHECKF(x2 < tu_chi2_crit(dof), "%s token %d: chi2 %.1f > %.1f (dof %d)", label, t + 2, x2, tu_chi2_crit(dof), dof);
        printf("%s sampling token %d: chi2 %.1f, dof %d, critical %.1f\n", label, t + 2, x2, dof, tu_chi2_crit(dof));
    }
    const spec_counters *c = &cnt;
    printf("%s sampling: drafted %ld, accepted %ld\n", label, c->drafted_tokens, c->accepted_tokens);
    CHECKF(c->accepted_tokens > 0 && c->accepted_tokens < c->drafted_tokens,
           "%s sampling: drafted %ld accepted %ld; both the accept and the reject path must run", label,
           c->drafted_tokens, c->accepted_tokens);
    drafter_free(d);
out:
    free(off);
    free(on);
}

#endif
