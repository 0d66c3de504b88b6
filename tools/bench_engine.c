/* bench_engine.c — what one forward costs on this machine, for a model dir.
 *
 * Reports prefill tokens/s, single-stream decode tokens/s, the cost of one
 * forward over r = 1..8 rows per sequence (--max-rows: up to 16) at batch
 * 1, 4 and 16 (the verify cost curve every later depth decision uses),
 * batched decode (one row for each of 16 and 64 sequences, --max-batch),
 * on the CPU or a GPU (--device), the memory bandwidth of a copy (on the
 * CPU a STREAM-style copy of host memory; on a GPU a device-to-device copy
 * of device memory) and the decode roofline (bandwidth ÷ weight bytes read
 * per token). Prints a table and writes CSV (libcsv quoting).
 *
 * Unlike the load generator, this program links the engine: it measures the
 * engine itself, below HTTP. It uses only the public forward/KV API.
 *
 * usage: bench_engine --model DIR [--out FILE.csv] [--reps N] [--ctx N] [--max-rows R] [--tp N]
 *                     [--text WORKLOAD] [--curve-batches LIST]
 *                     [--device cpu|cuda] [--max-batch B] [--prefill N]
 * (--tp N under `mpirun -np N`: rank 0 measures, the others serve its forwards;
 * --max-rows R: the cost curve's rows per sequence, 1..R, default 8, at most 16;
 * --curve-batches LIST: the cost curve's batches (default 1,4,16);
 * --text WORKLOAD: histories and rows from a workload's prompts, each sequence its own
 * stretch (required for a mixture of experts: its table adds the distinct experts a step
 * reads per sparse layer and the weight bytes per step);
 * --max-batch B: batched decode at 16 and 64 sequences, those ≤ B, default 16: each sequence
 * is prefilled with --ctx tokens first; --prefill N: the prefill measured, default --ctx tokens) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "csv_row.h"
#include "forward.h"
#include "generate.h"
#include "moe.h"
#include "cli_tp.h"
#include "cli_device.h"
#include "workload_tokens.h"

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

/* A device-to-device copy of device memory (two "weights" uploaded, so
 * plain device allocations, not managed memory), 1 GiB each way; bytes
 * read + written over the median of 5 copies. 0 when the memory is not
 * there. */
static double device_copy_gbs(void) {
    const size_t n = (size_t)1 << 30;
    kb_weight a = {.dt = KB_F32, .rows = (int)(n / 4096 / 4), .cols = 4096}, b = a;
    char *h = malloc(n);
    char err[256];
    if (!h) return 0;
    for (size_t i = 0; i < n; i++) h[i] = (char)(i * 131u);
    a.data = h;
    b.data = h;
    double gbs = 0;
    if (!kb_weight_upload(&a, &a, err, sizeof err) && !kb_weight_upload(&b, &a, err, sizeof err)) {
        double t[5];
        kb_copy_to_device((void *)b.data, a.data, n);   /* warm-up */
        for (int r = 0; r < 5; r++) {
            double t0 = gen_now();
            kb_copy_to_device((void *)b.data, a.data, n);   /* outside a region: returns when copied */
            t[r] = gen_now() - t0;
        }
        gbs = 2.0 * (double)n / median(t, 5) / 1e9;
    }
    kb_weight_release_owner(&a);
    free(h);
    return gbs;
}

static size_t weight_size(const kb_weight *w) { return (size_t)w->rows * w->cols * kb_dtype_size(w->dt); }

/* The weights a step reads, split: `shared` every step reads whatever its
 * rows (attention, dense MLPs, the routers, lm_head); one expert's gate, up
 * and down (every expert has the same shape); the sparse layers. A decode
 * row reads shared + sparse × top_k experts; several rows read the union of
 * theirs (moe_route_count). */
typedef struct {
    size_t shared, expert;
    int sparse, top_k;
} weight_split;

static weight_split weights_of(const model *m) {
    weight_split ws = {0};
    const model_config *c = &m->cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const layer_weights *w = &m->layers[l];
        const kb_weight *d[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 7; i++) ws.shared += weight_size(d[i]);
        if (w->moe) {
            ws.shared += weight_size(&w->moe->router);
            ws.expert = moe_expert_bytes(w->moe);
            ws.top_k = w->moe->top_k;
            ws.sparse++;
        }
    }
    ws.shared += weight_size(&m->lm_head);
    return ws;
}

/* An MoE model's curve in experts and bytes: the distinct experts a step's
 * rows read per sparse layer (measured routing), and the weight bytes that
 * makes the step read, printed and written as CSV rows. */
static void moe_tables(FILE *csv, const int *batches, int nb, int max_r, double (*experts)[16], weight_split ws) {
    for (int t = 0; t < 2; t++) {
        printf("\n%s\n%-8s", t ? "weights read per step, MB (shared + distinct experts x expert size)"
                                : "distinct experts read per sparse layer per step (routing of the rows' text)",
               "batch");
        for (int r = 1; r <= max_r; r++) {
            char h[16];
            snprintf(h, sizeof h, "rows=%d", r);
            printf(" %8s", h);
        }
        printf("\n");
        for (int bi = 0; bi < nb; bi++) {
            printf("%-8d", batches[bi]);
            for (int r = 1; r <= max_r; r++) {
                double x = experts[bi][r - 1], v = t ? (ws.shared + x * ws.sparse * ws.expert) / 1e6 : x;
                printf(t ? " %8.2f" : " %8.1f", v);
                if (csv) {
                    csv_row row = {csv, 0};
                    csv_row_field(&row, t ? "weight_mb_per_step" : "moe_distinct_experts_per_layer");
                    csv_row_fieldf(&row, "%d", batches[bi]);
                    csv_row_fieldf(&row, "%d", r);
                    csv_row_fieldf(&row, "%.4f", v);
                    csv_row_field(&row, t ? "MB" : "experts");
                    csv_row_end(&row);
                }
            }
            printf("\n");
        }
    }
}

int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *device = "cpu", *text = NULL;
    int reps = 5, ctx = 256, tp = 1, max_r = 8, max_b = 16, prefill = 0, batches[3] = {1, 4, 16}, n_batches = 3;
    int experts_on_host = 0;
    static const char usage[] = "usage: bench_engine --model DIR [--out FILE.csv] [--reps N] [--ctx N] [--max-rows R]\n"
                                "                    [--tp N] [--device cpu|cuda] [--experts-on-host] [--max-batch B] [--prefill N]\n"
                                "                    [--text WORKLOAD]\n"
                                "                    [--curve-batches LIST (the cost curve's batches, at most 3 of 1..16; default 1,4,16)]\n"
                                "(threads: OMP_NUM_THREADS, default every CPU; SIMD path: SPECBED_CPU_PATH;\n"
                                " CUDA matmul: SPECBED_CUDA_MATMUL=invariant|tensor|cublas; graphs: SPECBED_CUDA_GRAPHS=0|1;\n"
                                " programmatic dependent launch: SPECBED_CUDA_PDL=0|1)\n";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 0; }
        if (!strcmp(a, "--experts-on-host")) { experts_on_host = 1; continue; }   /* cli_device.h */
        if (!(v = opt_value("bench_engine", argc, argv, &i))) return 2;
        if (!strcmp(a, "--model")) dir = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--reps")) { if (opt_int("bench_engine", a, v, 1, 1000, &reps)) return 2; }
        else if (!strcmp(a, "--tp")) { if (opt_int("bench_engine", a, v, 1, 64, &tp)) return 2; }
        else if (!strcmp(a, "--max-rows")) { if (opt_int("bench_engine", a, v, 1, 16, &max_r)) return 2; }
        else if (!strcmp(a, "--max-batch")) { if (opt_int("bench_engine", a, v, 16, 64, &max_b)) return 2; }
        else if (!strcmp(a, "--prefill")) { if (opt_int("bench_engine", a, v, 8, 1 << 20, &prefill)) return 2; }
        else if (!strcmp(a, "--device")) { device = v; if (cli_device_check("bench_engine", v)) return 2; }
        else if (!strcmp(a, "--text")) text = v;
        else if (!strcmp(a, "--curve-batches")) {
            if (opt_int_list("bench_engine", a, v, 1, 16, batches, 3, &n_batches)) return 2;
        }
        else if (!strcmp(a, "--ctx")) { if (opt_int("bench_engine", a, v, 8, 1 << 20, &ctx)) return 2; }
        else { fprintf(stderr, "bench_engine: unknown option %s\n%s", a, usage); return 2; }
    }
    if (!prefill) prefill = ctx;
    if (!dir) {
        fprintf(stderr, "bench_engine: --model DIR is required\n%s", usage);
        return 2;
    }
    if (cli_device_select_experts("bench_engine", device, tp, experts_on_host)) return 1;
    char err[1024];
    enum { MAXB = 16, MAXR = 16, MAXD = 64 };   /* buffers; the curve runs rows 1..max_r, batched decode to max_b */
    gen_engine *e;
    const int rows_cap = MAXB * max_r > max_b ? MAXB * max_r : max_b;
    const int longest = prefill > ctx ? prefill : ctx, grow = 2 * max_r * (reps + 2) + 8;
    /* KV pages for what is used: one sequence to the prefill's length, the
     * others to ctx and the rows on top (a 64-sequence batch at a 2,048-token
     * prefill would otherwise reserve 64 prefills' worth) */
    const int page = 16, seq_pages = (ctx + grow + page - 1) / page + 1;
    gen_engine_opts eo = {.model_dir = dir, .max_seqs = max_b, .page_size = page,
                          .n_pages = seq_pages * max_b + (longest + grow + page - 1) / page + 1,
                          .max_batch_rows = rows_cap > longest ? rows_cap : longest,
                          .max_seq_len = longest + grow};
    tp_job job;
    if (tp_job_open(&job, "bench_engine", tp)) return 1;
    if (job.rank > 0) return tp_job_worker(&job, "bench_engine", eo);
    eo.comm = job.comm;
    if (gen_engine_create(&e, &eo, err, sizeof err)) { fprintf(stderr, "bench_engine: %s\n", err); return 1; }
    const weight_split wsp = weights_of(e->m);
    const int sparse = wsp.sparse > 0;
    if (sparse && !text) {
        fprintf(stderr, "bench_engine: %s is a mixture of experts: a step's cost follows the experts its rows route "
                "to, and hashed token ids route as no text does; give --text WORKLOAD (e.g. code) to measure on "
                "real text\n", dir);
        gen_engine_free(e);
        tp_job_close(&job);
        return 2;
    }
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

    /* Token ids: sequence b's history and rows are toks[b·seg ..], its own
     * stretch; the prefill reads toks from 0. --text: the workload's prompts
     * one after another (real text, whose consecutive tokens route to
     * overlapping experts); else a deterministic spread over the vocabulary,
     * whose cost is the same as text's on a dense model. */
    const int seg = ctx + max_r, n_toks = prefill > max_b * seg ? prefill : max_b * seg;
    int *toks = malloc(sizeof(int) * (size_t)n_toks);
    if (text) {
        wl_tokens wt;
        int bad = wl_tokens_load(&wt, text, e->tok, 0, err, sizeof err) ||
                  wl_tokens_stream(&wt, n_toks, toks, err, sizeof err);
        wl_tokens_free(&wt);
        if (bad) {
            fprintf(stderr, "bench_engine: --text %s: %s\n", text, err);
            if (csv) { fclose(csv); remove(tmp_out); }
            return 1;
        }
        printf("tokens: workload %s (%d tokens, sequence b's at %d·b)\n", text, n_toks, seg);
    } else {
        for (int i = 0; i < n_toks; i++) toks[i] = (int)((i * 2654435761u) % (unsigned)c->vocab_size);
    }
    int seqs[MAXD];
    for (int b = 0; b < max_b; b++) seqs[b] = kv_seq_new(e->kv);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size * (size_t)rows_cap);
    int logit_rows[MAXD * MAXR];
    fwd_span spans[MAXD];
    double times[1000];

    /* Prefill: `prefill` tokens in one span, fresh sequence each rep. */
    for (int r = 0; r < reps; r++) {
        kv_truncate(e->kv, seqs[0], 0);
        spans[0] = (fwd_span){.seq = seqs[0], .n = prefill, .tokens = toks};
        logit_rows[0] = prefill - 1;
        fwd_batch fb = {.spans = spans, .n_spans = 1};
        fwd_out fo = {.logit_rows = logit_rows, .n_logit_rows = 1, .logits = logits};
        double t0 = gen_now();
        if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        times[r] = gen_now() - t0;
    }
    double prefill_tps = prefill / median(times, reps);
    printf("prefill (%d tokens): %.1f tokens/s\n", prefill, prefill_tps);

    /* Verify cost curve: every sequence holds ctx tokens of history, then one
     * forward of r rows per sequence; the rows are truncated afterwards so the
     * history length is the same for every measurement. Row count r = 1 is
     * plain decode. */
    if (prefill < ctx) kv_truncate(e->kv, seqs[0], 0);   /* sequence 0 gets ctx tokens too */
    for (int b = prefill < ctx ? 0 : 1; b < max_b; b++) {
        spans[0] = (fwd_span){.seq = seqs[b], .n = ctx, .tokens = toks + (size_t)b * seg};
        fwd_batch fb = {.spans = spans, .n_spans = 1};
        fwd_out fo = {0};
        if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    }
    kv_truncate(e->kv, seqs[0], ctx);
    /* batches[] from --curve-batches (default 1, 4, 16) */
    double experts[3][MAXR] = {{0}};   /* distinct experts read per sparse layer per step (MoE) */
    double decode_tps = 0, decode_waits = 0, decode_graphs = 0, decode_nodes = 0, decode_inst = 0;
    double decode_replays = 0, decode_host_us = 0, decode_wait_us = 0;
    printf("\nforward cost, ms per step (history %d tokens per sequence)\n%-8s", ctx, "batch");
    for (int r = 1; r <= max_r; r++) {
        char h[16];
        snprintf(h, sizeof h, "rows=%d", r);
        printf(" %8s", h);
    }
    printf("\n");
    for (int bi = 0; bi < n_batches; bi++) {
        int B = batches[bi];
        printf("%-8d", B);
        for (int r = 1; r <= max_r; r++) {
            int nl = 0;
            for (int b = 0; b < B; b++) {
                spans[b] = (fwd_span){.seq = seqs[b], .n = r, .tokens = toks + (size_t)b * seg + ctx};
                for (int k = 0; k < r; k++) logit_rows[nl] = nl, nl++;
            }
            fwd_batch fb = {.spans = spans, .n_spans = B};
            fwd_out fo = {.logit_rows = logit_rows, .n_logit_rows = nl, .logits = logits};
            kb_device_counts c0, c1;
            kb_device_counts_now(&c0);
            moe_route_count rc;
            fwd_route_take(e->fwd, &rc);   /* from here on: this point's reps */
            for (int rep = 0; rep < reps; rep++) {
                double t0 = gen_now();
                if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
                times[rep] = gen_now() - t0;
                for (int b = 0; b < B; b++) kv_truncate(e->kv, seqs[b], ctx);
            }
            double ms = median(times, reps) * 1e3;
            if (!fwd_route_take(e->fwd, &rc) && rc.calls) experts[bi][r - 1] = (double)rc.distinct / rc.calls;
            if (B == 1 && r == 1) {
                decode_tps = 1e3 / ms;
                kb_device_counts_now(&c1);
                decode_waits = (double)(c1.waits - c0.waits) / reps;
                decode_graphs = (double)(c1.graph_launches - c0.graph_launches) / reps;
                decode_nodes = (double)(c1.graph_nodes - c0.graph_nodes) / reps;
                decode_inst = (double)(c1.graph_instantiations - c0.graph_instantiations) / reps;
                decode_replays = (double)(c1.graph_replays - c0.graph_replays) / reps;
                /* the host's own time in the step's regions, and its waits for the device */
                decode_wait_us = (double)(c1.wait_ns - c0.wait_ns) / reps / 1e3;
                decode_host_us = (double)(c1.region_ns - c0.region_ns) / reps / 1e3 - decode_wait_us;
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
    if (sparse) moe_tables(csv, batches, n_batches, max_r, experts, wsp);
    /* Batched decode: one row for each of B sequences (ctx history each). */
    const int dbatches[2] = {16, 64};
    double batch_tps[2] = {0, 0};
    for (int bi = 0; bi < 2; bi++) {
        const int B = dbatches[bi];
        if (B > max_b) continue;
        for (int b = 0; b < B; b++) {
            spans[b] = (fwd_span){.seq = seqs[b], .n = 1, .tokens = toks + (size_t)b * seg + ctx};
            logit_rows[b] = b;
        }
        fwd_batch fb = {.spans = spans, .n_spans = B};
        fwd_out fo = {.logit_rows = logit_rows, .n_logit_rows = B, .logits = logits};
        for (int rep = 0; rep < reps; rep++) {
            double t0 = gen_now();
            if (fwd_run(e->fwd, e->kv, &fb, &fo, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
            times[rep] = gen_now() - t0;
            for (int b = 0; b < B; b++) kv_truncate(e->kv, seqs[b], ctx);
        }
        batch_tps[bi] = B / median(times, reps);
    }
    const int on_gpu = !strcmp(kb_device(), "cuda");
    double gbs = on_gpu ? device_copy_gbs() : stream_copy_gbs();
    const size_t wb = wsp.shared + (size_t)wsp.sparse * wsp.top_k * wsp.expert;
    double roof = gbs > 0 ? gbs * 1e9 / (double)wb : 0;
    printf("\nsingle-stream decode: %.1f tokens/s\n", decode_tps);
    for (int bi = 0; bi < 2; bi++)
        if (batch_tps[bi] > 0)
            printf("batched decode, %d sequences x 1 row: %.1f tokens/s (%.2fx single-stream)\n", dbatches[bi],
                   batch_tps[bi], batch_tps[bi] / decode_tps);
    /* a stream-ordered forward waits once, for its logits (backend.h) */
    if (!strcmp(kb_device(), "cuda")) {
        printf("host waits for the GPU per decode step: %.1f\n", decode_waits);
        /* SPECBED_CUDA_GRAPHS=0: none; else one graph per step, updated in place after the first */
        printf("CUDA graph launches per decode step: %.1f (%.0f nodes each, %.2f instantiated per step, %.2f "
               "replayed without issuing the calls)\n",
               decode_graphs, decode_graphs > 0 ? decode_nodes / decode_graphs : 0.0, decode_inst, decode_replays);
        printf("host time per decode step: %.1f us of its own (issuing, capturing, staging), %.1f us waiting for "
               "the GPU\n", decode_host_us, decode_wait_us);
    }
    printf("memory bandwidth (%s, read + written): %.1f GB/s\n",
           on_gpu ? "device-to-device copy of GPU memory, 1 GiB" : "STREAM copy of host memory", gbs);
    printf("weights read per decode token%s: %.2f MB -> roofline %.0f tokens/s (decode at %.0f%% of it)\n",
           job.size > 1 ? " (rank 0's shard; each rank reads its own in parallel)" : "", wb / 1e6, roof,
           roof > 0 ? 100.0 * decode_tps / roof : 0.0);
    if (csv) {
        /* copy_gb_per_s: the device's copy on a GPU, else the host's STREAM copy */
        const char *names[13] = {"prefill_tokens_per_s", "decode_tokens_per_s", "copy_gb_per_s",
                                 "weight_mb_per_token", "roofline_tokens_per_s", "device_waits_per_decode",
                                 "graph_launches_per_decode", "graph_nodes_per_decode", "batched_decode_tokens_per_s",
                                 "batched_decode_tokens_per_s", "graph_replays_per_decode", "host_us_per_decode",
                                 "device_wait_us_per_decode"};
        double vals[13] = {prefill_tps, decode_tps, gbs, wb / 1e6, roof, decode_waits, decode_graphs, decode_nodes,
                           batch_tps[0], batch_tps[1], decode_replays, decode_host_us, decode_wait_us};
        const char *units[13] = {"tokens/s", "tokens/s", "GB/s", "MB", "tokens/s", "waits", "launches", "nodes",
                                 "tokens/s", "tokens/s", "replays", "us", "us"};
        const int on_cuda = !strcmp(kb_device(), "cuda");
        for (int i = 0; i < 13; i++) {
            if (i >= 8 && i <= 9 && vals[i] <= 0) continue;
            if (i >= 10 && !on_cuda) continue;
            csv_row row = {csv, 0};
            csv_row_field(&row, names[i]);
            csv_row_fieldf(&row, "%d", i == 8 ? dbatches[0] : i == 9 ? dbatches[1] : 1);
            csv_row_field(&row, "1");
            csv_row_fieldf(&row, "%.4f", vals[i]);
            csv_row_field(&row, units[i]);
            csv_row_end(&row);
        }
        fclose(csv);
        if (rename(tmp_out, out)) { fprintf(stderr, "bench_engine: cannot write %s\n", out); return 1; }
    }
    free(toks); free(logits);
    for (int b = 0; b < max_b; b++) kv_seq_free(e->kv, seqs[b]);
    gen_engine_free(e);
    tp_job_close(&job);
    return 0;
}
