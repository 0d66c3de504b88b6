/* llamacpp_verify_probe.c — bench_engine's measurements, done with llama.cpp.
 *
 * Built and run only by scripts/compare/sidebyside_llamacpp.sh, against the llama.cpp
 * it builds in its cache (not part of specbed's CMake build or of CI):
 *
 *   cc -O2 llamacpp_verify_probe.c -I SRC/include -I SRC/ggml/include \
 *      -L BUILD/bin -lllama -lggml -lggml-base -Wl,-rpath,BUILD/bin
 *   llamacpp_verify_probe MODEL.gguf [--threads T] [--ctx N] [--reps N] [--rows 1,2,4,8]
 *
 * What it times, the way tools/bench_engine.c does for specbed:
 *   prefill  — one llama_decode of N tokens (one batch, logits for the last row
 *              only), fresh KV each rep; median → tokens/s;
 *   verify k — N tokens of history in the KV cache, then one llama_decode of k
 *              rows at positions N..N+k-1 with logits for EVERY row (what a
 *              speculative verify step needs, and what specbed computes), then
 *              the k rows are removed again (llama_memory_seq_rm) so every rep
 *              sees the same history; median → ms per step.
 * Token ids are the same deterministic spread bench_engine uses. One warm-up
 * decode precedes each measurement. Flash attention off (llama-bench -fa 0).
 *
 * Output, one "key value..." line each (parsed by the script):
 *   prefill_tps N TOKENS_PER_S
 *   verify_ms K MS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void fill(llama_batch *b, const llama_token *toks, int n, int pos0, int all_logits) {
    b->n_tokens = n;
    for (int i = 0; i < n; i++) {
        b->token[i] = toks[i];
        b->pos[i] = pos0 + i;
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = (int8_t)(all_logits || i == n - 1);
    }
}

static int decode(struct llama_context *ctx, llama_batch b) {
    int rc = llama_decode(ctx, b);
    if (rc) { fprintf(stderr, "llamacpp_verify_probe: llama_decode failed (%d)\n", rc); return 1; }
    llama_synchronize(ctx);
    return 0;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *rows_arg = "1,2,4,8";
    int threads = 1, ctx_n = 256, reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) ctx_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows_arg = argv[++i];
        else if (argv[i][0] != '-' && !model_path) model_path = argv[i];
        else {
            fprintf(stderr, "usage: llamacpp_verify_probe MODEL.gguf [--threads T] [--ctx N] [--reps N] [--rows 1,2,4,8]\n");
            return 2;
        }
    }
    if (!model_path || threads < 1 || ctx_n < 8 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: llamacpp_verify_probe MODEL.gguf [--threads T] [--ctx N] [--reps N] [--rows 1,2,4,8]\n");
        return 2;
    }
    int rows[64], n_rows = 0, max_rows = 1;
    for (const char *p = rows_arg; *p && n_rows < 64;) {
        int k = atoi(p);
        if (k < 1 || k > 64) { fprintf(stderr, "llamacpp_verify_probe: bad --rows %s\n", rows_arg); return 2; }
        rows[n_rows++] = k;
        if (k > max_rows) max_rows = k;
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "llamacpp_verify_probe: cannot load %s\n", model_path); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    int n_max = ctx_n + max_rows;
    cp.n_ctx = (uint32_t)(n_max + 64);
    cp.n_batch = cp.n_ubatch = (uint32_t)(ctx_n > max_rows ? ctx_n : max_rows);
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llamacpp_verify_probe: cannot create a context\n"); return 1; }
    llama_memory_t mem = llama_get_memory(ctx);
    int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_token *toks = malloc(sizeof *toks * (size_t)n_max);
    for (int i = 0; i < n_max; i++) toks[i] = (llama_token)((i * 2654435761u) % (unsigned)vocab);
    llama_batch b = llama_batch_init(cp.n_batch, 0, 1);
    double *t = malloc(sizeof *t * (size_t)reps);

    /* prefill: fresh sequence each rep, warm-up first */
    for (int r = -1; r < reps; r++) {
        llama_memory_clear(mem, true);
        fill(&b, toks, ctx_n, 0, 0);
        double t0 = now_s();
        if (decode(ctx, b)) return 1;
        if (r >= 0) t[r] = now_s() - t0;
    }
    printf("prefill_tps %d %.3f\n", ctx_n, ctx_n / median(t, reps));

    /* verify: history ctx_n, k rows with all logits, rows removed after each rep */
    llama_memory_clear(mem, true);
    fill(&b, toks, ctx_n, 0, 0);
    if (decode(ctx, b)) return 1;
    for (int ri = 0; ri < n_rows; ri++) {
        int k = rows[ri];
        for (int r = -1; r < reps; r++) {
            fill(&b, toks + ctx_n, k, ctx_n, 1);
            double t0 = now_s();
            if (decode(ctx, b)) return 1;
            const float *lg = llama_get_logits_ith(ctx, k - 1);
            if (r >= 0) t[r] = now_s() - t0;
            if (!lg) { fprintf(stderr, "llamacpp_verify_probe: no logits for row %d\n", k - 1); return 1; }
            if (!llama_memory_seq_rm(mem, 0, ctx_n, -1)) { fprintf(stderr, "llamacpp_verify_probe: seq_rm failed\n"); return 1; }
        }
        printf("verify_ms %d %.4f\n", k, median(t, reps) * 1e3);
    }
    fflush(stdout);
    free(t); free(toks);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
