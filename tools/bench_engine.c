/* bench_engine.c — what one forward costs on this machine, for a model dir.
 *
 * Reports prefill tokens/s, single-stream decode tokens/s, the cost of one
 * forward over r = 1..8 rows per sequence (--max-rows: up to 16) at batch
 * 1, 4 and 16 (the verify cost curve every later depth decision uses), on
 * the CPU or a GPU (--device), the memory bandwidth of a
 * STREAM-style copy, and the decode roofline (bandwidth ÷ weight bytes read
 * per token). Prints a table and writes CSV (libcsv quoting).
 *
 * Unlike the load generator, this program links the engine: it measures the
 * engine itself, below HTTP. It uses only the public forward/KV API.
 *
 * usage: bench_engine --model DIR [--out FILE.csv] [--reps N] [--ctx N] [--max-rows R] [--tp N]
 *                     [--device cpu|cuda]
 * (--tp N under `mpirun -np N`: rank 0 measures, the others serve its forwards;
 * --max-rows R: the cost curve's rows per sequence, 1..R, default 8, at most 16) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "csv_row.h"
#include "forward.h"
#include "generate.h"
#include "cli_tp.h"
#include "cli_device.h"

static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* STREAM "copy" over buffers far larger than the last-level cache. */
static double stream_copy_gbs(void) {
    size_t n = (size_t)64 << 20;   /* 64 Mi floats = 256 MiB per array */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) { free(a); free(b); return 0; }
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) { a[i] = (float)i; b[i] = 0; }
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = gen_now();
#pragma omp parallel for
        for (size_t i = 0; i < n; i++) b[i] = a[i];
        double dt = gen_now() - t0;
        if (dt < best) best = dt;
    }
    volatile float sink = b[n / 2];
    (void)sink;
    free(a); free(b);
    return 2.0 * n * sizeof(float) / best / 1e9;   /* bytes read + written */
}

static size_t weight_bytes(const model *m) {
    size_t b = 0;
    const model_config *c = &m->cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const layer_weights *w = &m->layers[l];
        const kb_weight *ws[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 7; i++) b += (size_t)ws[i]->rows * ws[i]->cols * kb_dtype_size(ws[i]->dt);
    }
    b += (size_t)m->lm_head.rows * m->lm_head.cols * kb_dtype_size(m->lm_head.dt);
    return b;
}


int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *device = "cpu";
    int reps = 5, ctx = 256, tp = 1, max_r = 8;
    static const char usage[] = "usage: bench_engine --model DIR [--out FILE.csv] [--reps N] [--ctx N] [--max-rows R]\n"
                                "                    [--tp N] [--device cpu|cuda]\n"
                                "(threads: OMP_NUM_THREADS, default every CPU; SIMD path: SPECBED_CPU_PATH;\n"
                                " CUDA matmul: SPECBED_CUDA_MATMUL=invariant|cublas; graphs: SPECBED_CUDA_GRAPHS=0|1)\n";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 0; }
        if (!(v = opt_value("bench_engine", argc, argv, &i))) return 2;
        if (!strcmp(a, "--model")) dir = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--reps")) { if (opt_int("bench_engine", a, v, 1, 1000, &reps)) return 2; }
        else if (!strcmp(a, "--tp")) { if (opt_int("bench_engine", a, v, 1, 64, &tp)) return 2; }
        else if (!strcmp(a, "--max-rows")) { if (opt_int("bench_engine", a, v, 1, 16, &max_r)) return 2; }
        else if (!strcmp(a, "--device")) { device = v; if (cli_device_check("bench_engine", v)) return 2; }
        else if (!strcmp(a, "--ctx")) { if (opt_int("bench_engine", a, v, 8, 1 << 20, &ctx)) return 2; }
        else { fprintf(stderr, "bench_engine: unknown option %s\n%s", a, usage); return 2; }
    }
    if (!dir) {
        fprintf(stderr, "bench_engine: --model DIR is required\n%s", usage);
        return 2;
    }
    if (cli_device_select("bench_engine", device, tp)) return 1;
    char err[1024];
    enum { MAXB = 16, MAXR = 16 };   /* buffers; the curve runs rows 1..max_r */
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = dir, .max_seqs = MAXB, .max_batch_rows = MAXB * max_r > ctx ? MAXB * max_r : ctx,
                          .max_seq_len = ctx + 2 * max_r * (reps + 2) + 8};
    tp_job job;
    if (tp_job_open(&job, "bench_engine", tp)) return 1;
    if (job.rank > 0) return tp_job_worker(&job, "bench_engine", eo);
    eo.comm = job.comm;
    if (gen_engine_create(&e, &eo, err, sizeof err)) { fprintf(stderr, "bench_engine: %s\n", err); return 1; }
    const model_config *c = &e->m->cfg;
    char tmp_out[4200];
    snprintf(tmp_out, sizeof tmp_out, "%s.tmp", out ? out : "");
    FILE *csv = out ? fopen(tmp_out, "w") : NULL;   /* renamed over --out when complete */
    if (out && !csv) { fprintf(stderr, "bench_engine: cannot write %s\n", out); gen_engine_free(e); return 1; }
    if (csv) fprintf(csv, "metric,batch,rows_per_seq,value,unit\n");
    char kernels[64];
    if (!strcmp(kb_device(), "cuda")) snprintf(kernels, sizeof kernels, "cuda (matmul %s)", kb_cuda_matmul());
    else snprintf(kernels, sizeof kernels, "%s", kb_cpu_path());
    printf("model %s: %d layers, hidden %d, vocab %d, threads %d, kernels %s, tp %d\n", dir, c->n_layers,
           c->hidden_size, c->vocab_size, kb_threads(), kernels, job.size);

    /* Token ids: a deterministic spread over the vocabulary. */
    int *toks = malloc(sizeof(int) * (size_t)(ctx + MAXB * MAXR));
    for (int i = 0; i < ctx + MAXB * MAXR; i++) toks[i] = (int)((i * 2654435761u) % (unsigned)c->vocab_size);
    int seqs[MAXB];
    for (int b = 0; b < MAXB; b++) seqs[b] = kv_seq_new(e->kv);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * MAXB * max_r);
    int logit_rows[MAXB * MAXR];
    fwd_span spans[MAXB];
    double times[1000];

    /* Prefill: ctx tokens in one span, fresh sequence each rep. */
    for (int r = 0; r < reps; r++) {
        kv_truncate(e->kv, seqs[0], 0);
        spans[0] = (fwd_span){.seq = seqs[0], .n = ctx, .tokens = toks};
        logit_rows[0] = ctx - 1;
        fwd_batch fb = {.spans = spans, .n_spans = 1};
        fwd_out fo = {.logit_rows = logit_rows, .n_logit_rows = 1, .logits = logits};
        double t0 = gen_now();
        if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        times[r] = gen_now() - t0;
    }
    double prefill_tps = ctx / median(times, reps);
    printf("prefill (%d tokens): %.1f tokens/s\n", ctx, prefill_tps);

    /* Verify cost curve: every sequence holds ctx tokens of history, then one
     * forward of r rows per sequence; the rows are truncated afterwards so the
     * history length is the same for every measurement. Row count r = 1 is
     * plain decode. */
    for (int b = 1; b < MAXB; b++) {
        spans[0] = (fwd_span){.seq = seqs[b], .n = ctx, .tokens = toks};
        fwd_batch fb = {.spans = spans, .n_spans = 1};
        fwd_out fo = {0};
        if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    }
    kv_truncate(e->kv, seqs[0], ctx);
    const int batches[3] = {1, 4, 16};
    double decode_tps = 0, decode_waits = 0, decode_graphs = 0, decode_nodes = 0, decode_inst = 0;
    printf("\nforward cost, ms per step (history %d tokens per sequence)\n%-8s", ctx, "batch");
    for (int r = 1; r <= max_r; r++) {
        char h[16];
        snprintf(h, sizeof h, "rows=%d", r);
        printf(" %8s", h);
    }
    printf("\n");
    for (int bi = 0; bi < 3; bi++) {
        int B = batches[bi];
        printf("%-8d", B);
        for (int r = 1; r <= max_r; r++) {
            int nl = 0;
            for (int b = 0; b < B; b++) {
                spans[b] = (fwd_span){.seq = seqs[b], .n = r, .tokens = toks + ctx + b * max_r};
                for (int k = 0; k < r; k++) logit_rows[nl] = nl, nl++;
            }
            fwd_batch fb = {.spans = spans, .n_spans = B};
            fwd_out fo = {.logit_rows = logit_rows, .n_logit_rows = nl, .logits = logits};
            kb_device_counts c0, c1;
            kb_device_counts_now(&c0);
            for (int rep = 0; rep < reps; rep++) {
                double t0 = gen_now();
                if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
                times[rep] = gen_now() - t0;
                for (int b = 0; b < B; b++) kv_truncate(e->kv, seqs[b], ctx);
            }
            double ms = median(times, reps) * 1e3;
            if (B == 1 && r == 1) {
                decode_tps = 1e3 / ms;
                kb_device_counts_now(&c1);
                decode_waits = (double)(c1.waits - c0.waits) / reps;
                decode_graphs = (double)(c1.graph_launches - c0.graph_launches) / reps;
                decode_nodes = (double)(c1.graph_nodes - c0.graph_nodes) / reps;
                decode_inst = (double)(c1.graph_instantiations - c0.graph_instantiations) / reps;
            }
            printf(" %8.2f", ms);
            if (csv) {
                csv_row row = {csv, 0};
                csv_row_field(&row, "forward_ms");
                csv_row_fieldf(&row, "%d", B);
                csv_row_fieldf(&row, "%d", r);
                csv_row_fieldf(&row, "%.4f", ms);
                csv_row_field(&row, "ms");
                csv_row_end(&row);
            }
        }
        printf("\n");
    }
    double gbs = stream_copy_gbs();
    size_t wb = weight_bytes(e->m);
    double roof = gbs * 1e9 / (double)wb;
    printf("\nsingle-stream decode: %.1f tokens/s\n", decode_tps);
    /* a stream-ordered forward waits once, for its logits (backend.h) */
    if (!strcmp(kb_device(), "cuda")) {
        printf("host waits for the GPU per decode step: %.1f\n", decode_waits);
        /* SPECBED_CUDA_GRAPHS=0: none; else one graph per step, updated in place after the first */
        printf("CUDA graph launches per decode step: %.1f (%.0f nodes each, %.2f instantiated per step)\n",
               decode_graphs, decode_graphs > 0 ? decode_nodes / decode_graphs : 0.0, decode_inst);
    }
    printf("memory bandwidth (STREAM copy%s): %.1f GB/s\n",
           strcmp(kb_device(), "cuda") ? "" : " of host memory, not the GPU's: the roofline below is the CPU's", gbs);
    printf("weights read per decode token%s: %.2f MB -> roofline %.0f tokens/s (decode at %.0f%% of it)\n",
           job.size > 1 ? " (rank 0's shard; each rank reads its own in parallel)" : "", wb / 1e6, roof,
           100.0 * decode_tps / roof);
    if (csv) {
        const char *names[8] = {"prefill_tokens_per_s", "decode_tokens_per_s", "stream_copy_gb_per_s",
                                "weight_mb_per_token", "roofline_tokens_per_s", "device_waits_per_decode",
                                "graph_launches_per_decode", "graph_nodes_per_decode"};
        double vals[8] = {prefill_tps, decode_tps, gbs, wb / 1e6, roof, decode_waits, decode_graphs, decode_nodes};
        const char *units[8] = {"tokens/s", "tokens/s", "GB/s", "MB", "tokens/s", "waits", "launches", "nodes"};
        for (int i = 0; i < 8; i++) {
            csv_row row = {csv, 0};
            csv_row_field(&row, names[i]);
            csv_row_field(&row, "1");
            csv_row_field(&row, "1");
            csv_row_fieldf(&row, "%.4f", vals[i]);
            csv_row_field(&row, units[i]);
            csv_row_end(&row);
        }
        fclose(csv);
        if (rename(tmp_out, out)) { fprintf(stderr, "bench_engine: cannot write %s\n", out); return 1; }
    }
    free(toks); free(logits);
    for (int b = 0; b < MAXB; b++) kv_seq_free(e->kv, seqs[b]);
    gen_engine_free(e);
    tp_job_close(&job);
    return 0;
}
