/* cuda_check_moe.c — test_cuda's mixture-of-experts section (`test_cuda
 * moe`; test_cuda.c's header says what it checks). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_check.h"

/* ---- mixture of experts ------------------------------------------------------------------ */

#define MOE_FIX "tests/fixtures/qwen3-moe-tiny"

/* The grouped expert matmul against one kb_matmul per expert on cuda:
 * bit-identical (cuda_moe.cu gives every output mm_inv's order), for each
 * dtype, a width that takes the element-by-element path (37), one part
 * (520) and four (2056), groups of 3, 1, 6 and 9 rows (tiles of x rows
 * whole and partial, and a group of 9 that kb_matmul runs through its
 * transposed reduction); then the same experts in mapped host memory
 * (kb_set_experts_on_host): the same bits. */
void test_moe_grouped(void) {
    static const int owner;
    static const struct { kb_dtype dt; int rows, cols; } cases[3] = {{KB_F32, 19, 37}, {KB_BF16, 24, 520},
                                                                     {KB_F16, 9, 2056}};
    const int start[5] = {0, 3, 4, 10, 19}, ng = 4, m = 19;
    char err[512];
    use("cuda");
    for (int c = 0; c < 3; c++) {
        const int rows = cases[c].rows, cols = cases[c].cols;
        float *x = random_floats((size_t)m * cols, 1.0f);
        float *ref[2], *dev[2], *host[2];
        for (int t = 0; t < 2; t++) {
            ref[t] = calloc((size_t)m * rows, sizeof(float));
            dev[t] = calloc((size_t)m * rows, sizeof(float));
            host[t] = calloc((size_t)m * rows, sizeof(float));
        }
        for (int on_host = 0; on_host < 2; on_host++) {
            CHECKF(kb_set_experts_on_host(on_host, err, sizeof err) == 0, "%s", err);
            kb_weight w[8];
            const kb_weight *ws[8];
            rnd_seed(0x1234 + (uint64_t)c);   /* the same weights both times */
            for (int i = 0; i < 2 * ng; i++) {
                w[i] = random_weight(cases[c].dt, rows, cols);
                void *src = (void *)w[i].data;
                CHECKF(kb_weight_upload_expert(&w[i], &owner, err, sizeof err) == 0, "%s", err);
                CHECK(w[i].data != src);
                free(src);
                ws[i] = &w[i];
            }
            float **out = on_host ? host : dev;
            kb_matmul_grouped(2, out, ws, x, start, ng);
            if (!on_host)
                for (int t = 0; t < 2; t++)
                    for (int g = 0; g < ng; g++)
                        kb_matmul(ref[t] + (size_t)start[g] * rows, x + (size_t)start[g] * cols, ws[t * ng + g],
                                  start[g + 1] - start[g]);
            for (int i = 0; i < 2 * ng; i++) kb_weight_release(&w[i]);
        }
        CHECK(kb_set_experts_on_host(0, err, sizeof err) == 0);
        double e1, e2;
        long d1 = 0, d2 = 0;
        for (int t = 0; t < 2; t++) {
            d1 += bits_differ(ref[t], dev[t], (size_t)m * rows, &e1);
            d2 += bits_differ(dev[t], host[t], (size_t)m * rows, &e2);
        }
        CHECKF(d1 == 0, "grouped matmul %s [%d, %d]: %ld outputs differ from one kb_matmul per expert",
               dt_name(cases[c].dt), rows, cols, d1);
        CHECKF(d2 == 0, "grouped matmul %s [%d, %d]: experts on the host differ from on the device in %ld outputs",
               dt_name(cases[c].dt), rows, cols, d2);
        for (int t = 0; t < 2; t++) { free(ref[t]); free(dev[t]); free(host[t]); }
        free(x);
    }
    printf("moe: grouped expert matmul = one kb_matmul per expert, bit for bit (f32/bf16/f16; 1 and 4 parts); "
           "experts in mapped host memory give the same bits\n");
    /* on the cpu the flag is refused (every weight is in host memory there) */
    use("cpu");
    CHECK(kb_set_experts_on_host(1, err, sizeof err) == -1 && strstr(err, "cuda"));
    use("cuda");

    /* gather and combine: the CPU's bits (copies; products and sums in its order) */
    const int rf = 37, ns = 15, n = 5, k = 3;
    float *src = random_floats((size_t)ns * rf, 2.0f), *w = random_floats((size_t)n * k, 1.0f);
    int idx[14], slots[15];
    for (int i = 0; i < 14; i++) idx[i] = (int)(rnd() % (unsigned)ns);
    for (int i = 0; i < n * k; i++) slots[i] = (i * 7 + 3) % ns;
    float *gc = calloc((size_t)14 * rf, sizeof(float)), *gg = calloc((size_t)14 * rf, sizeof(float));
    float *cc = calloc((size_t)n * rf, sizeof(float)), *cg = calloc((size_t)n * rf, sizeof(float));
    use("cpu");
    kb_gather_rows(gc, src, idx, 14, rf);
    kb_combine_rows(cc, src, slots, w, n, k, rf);
    use("cuda");
    kb_gather_rows(gg, src, idx, 14, rf);
    kb_combine_rows(cg, src, slots, w, n, k, rf);
    double e;
    CHECKF(bits_differ(gc, gg, (size_t)14 * rf, &e) == 0, "kb_gather_rows: CUDA differs from the CPU");
    CHECKF(bits_differ(cc, cg, (size_t)n * rf, &e) == 0, "kb_combine_rows: CUDA differs from the CPU (max %g)", e);
    printf("moe: gather and combine give the CPU's bits\n");
    free(src); free(w); free(gc); free(gg); free(cc); free(cg);
}

/* logits[rows of A, V] of sequence A's tokens toks[0, n) fed in chunks
 * ca[], each beside a chunk cb[] of another sequence B (tokens tb) in the
 * same forward (B's chunk first when b_first). */
static int moe_chunked_logits(gen_engine *e, const int *toks, const int *tb, const int *ca, const int *cb, int steps,
                              int b_first, float *logits) {
    char err[1024];
    const int V = e->m->cfg.vocab_size;
    int sa = kv_seq_new(e->kv), sb = kv_seq_new(e->kv), pa = 0, pb = 0, rc = 0, rows[64];
    for (int t = 0; t < steps && !rc; t++) {
        fwd_span sp[2];
        fwd_span a = {.seq = sa, .n = ca[t], .tokens = toks + pa}, b = {.seq = sb, .n = cb[t], .tokens = tb + pb};
        int ns = 0, a0 = 0;
        if (b_first && cb[t]) { sp[ns++] = b; a0 = cb[t]; }
        sp[ns++] = a;
        if (!b_first && cb[t]) sp[ns++] = b;
        for (int i = 0; i < ca[t]; i++) rows[i] = a0 + i;
        fwd_batch bt = {.spans = sp, .n_spans = ns};
        fwd_out o = {.logit_rows = rows, .n_logit_rows = ca[t], .logits = logits + (size_t)pa * V};
        rc = fwd_run(e->fwd, e->kv, &bt, &o, err, sizeof err);
        CHECKF(!rc, "fwd_run: %s", err);
        pa += ca[t];
        pb += cb[t];
    }
    kv_seq_free(e->kv, sa);
    kv_seq_free(e->kv, sb);
    return rc;
}

/* The engine on the MoE fixtures under --device cuda: logits against the
 * CPU's (per-expert, fused and norm_topk_prob false layouts: argmax equal
 * at every row, max |Δ| ≤ 1e-4, as the dense fixture), a row's logits
 * bit-identical alone (decode), in one prefill and beside another
 * sequence's rows (which changes which rows share its experts), greedy
 * generation equal to the CPU's, speculation on ≡ off with an MoE target,
 * and the experts in mapped host memory giving the device's bits. */
static void test_moe_engine(void) {
    static const char *const dirs[3] = {MOE_FIX, "tests/fixtures/qwen3-moe-tiny-fused",
                                        "tests/fixtures/qwen3-moe-tiny-nonorm"};
    const int n = 200;
    int toks[200], tb[200];
    int identical = 1;
    for (int d = 0; d < 3; d++) {
        gen_engine *ec = NULL, *eg = NULL;
        if (make_engine_at(&ec, "cpu", dirs[d], 0) || make_engine_at(&eg, "cuda", dirs[d], 0)) {
            use("cpu"); gen_engine_free(ec); use("cuda"); gen_engine_free(eg); return;
        }
        const int V = ec->m->cfg.vocab_size;
        for (int i = 0; i < n; i++) toks[i] = (int)((i * 2654435761u + 5u) % (unsigned)V);
        float *lg = malloc(sizeof(float) * (size_t)n * V);
        char label[160];
        snprintf(label, sizeof label, "moe %s", dirs[d]);
        const long nd = prefill_vs_cpu(ec, eg, toks, n, label, lg);
        int rc = nd < 0;
        identical &= nd == 0;
        if (d == 0 && !rc) {
            /* batch invariance on cuda: decode one row at a time, and in
             * chunks beside another sequence (before and after it) */
            const int na = 24;
            static const int ones[24] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
            static const int zeros[24];
            static const int ca[5] = {8, 5, 1, 1, 9}, cb[5] = {3, 7, 2, 6, 6};
            for (int i = 0; i < n; i++) tb[i] = (int)((i * 40503u + 17u) % (unsigned)V);
            float *l1 = malloc(sizeof(float) * (size_t)na * V), *l2 = malloc(sizeof(float) * (size_t)na * V);
            float *l3 = malloc(sizeof(float) * (size_t)na * V);
            rc = moe_chunked_logits(eg, toks, tb, ones, zeros, na, 0, l1) ||
                 moe_chunked_logits(eg, toks, tb, ca, cb, 5, 0, l2) ||
                 moe_chunked_logits(eg, toks, tb, ca, cb, 5, 1, l3);
            if (!rc) {
                double e;
                long d12 = bits_differ(lg, l1, (size_t)na * V, &e), d13 = bits_differ(lg, l2, (size_t)na * V, &e);
                long d14 = bits_differ(lg, l3, (size_t)na * V, &e);
                CHECKF(d12 == 0 && d13 == 0 && d14 == 0, "moe batch invariance on cuda: a row's logits differ "
                       "between one prefill and decode (%ld), chunks beside another sequence (%ld after it, %ld "
                       "before)", d12, d13, d14);
                printf("moe batch invariance on cuda: 24 rows bit-identical in one prefill, decoded one by one, and "
                       "in chunks beside another sequence\n");
            }
            free(l1); free(l2); free(l3);
            /* the experts in mapped host memory: the device's bits */
            gen_engine *eh = NULL;
            if (!make_engine_at(&eh, "cuda", dirs[d], 1)) {
                float *lh = malloc(sizeof(float) * (size_t)n * V);
                if (!prefill_logits(eh, toks, n, lh)) {
                    double e;
                    long nd = bits_differ(lg, lh, (size_t)n * V, &e);
                    CHECKF(nd == 0, "moe: experts in host memory change %ld logits", nd);
                    printf("moe: experts in mapped host memory give the device's logits bit for bit\n");
                }
                free(lh);
                gen_engine_free(eh);
            }
        }
        free(lg);
        if (d == 0) {
            /* greedy generation, then speculation on vs off, on the MoE target */
            static int prompts[LL_NP][LL_MAXP];
            int lens[LL_NP];
            ll_synthetic_prompts(V, prompts, lens);
            const int same = greedy_same(ec, eg, prompts, lens);
            if (same >= 0) {
                CHECKF(same == LL_NP, "moe: greedy output on CUDA differs from the CPU's for %d of %d prompts",
                       LL_NP - same, LL_NP);
                printf("moe greedy generation: %d of %d prompts give the CPU's tokens\n", same, LL_NP);
            }
            static const int depths[2] = {1, 3}, batches[2] = {1, 3};
            ll_config cfgs[2] = {{"cuda moe ngram", {.name = "ngram"}, 0, NULL},
                                 {"cuda moe draft(self)", {.name = "draft", .draft_model = tu_path(MOE_FIX),
                                                           .max_seqs = 8}, 1, NULL}};
            for (int c = 0; c < 2; c++) {
                spec_counters kc[2], kg[2];
                char label[64];
                snprintf(label, sizeof label, "cpu%s", cfgs[c].label + 4);
                ll_config cc = cfgs[c];
                cc.label = label;
                use("cpu");
                ll_check_counts(ec, &cc, prompts, lens, depths, 2, batches, 2, kc);
                use("cuda");
                long tokens = ll_check_counts(eg, &cfgs[c], prompts, lens, depths, 2, batches, 2, kg);
                printf("%s: %ld tokens compared, spec on = spec off\n", cfgs[c].label, tokens);
                CHECKF(tokens >= 500, "%s: only %ld tokens compared", cfgs[c].label, tokens);
                if (identical) same_drafts(cfgs[c].label, kc, kg, 2);
            }
        }
        use("cpu");
        gen_engine_free(ec);
        use("cuda");
        gen_engine_free(eg);
    }
}

void test_moe_cuda(void) {
    test_moe_grouped();
    test_moe_engine();
}
