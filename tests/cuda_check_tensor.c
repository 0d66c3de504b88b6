/* cuda_check_tensor.c — test_cuda's section on the tensor matmul mode
 * (`test_cuda tensor`; kernels/cuda_matmul_tc.cu). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_check.h"

/* ---- the tensor mode (cuda_matmul_tc.cu) -------------------------------------------------- */

/* Roundings one output of the tensor order sees: per part, 6 mma steps a
 * 32-column block, then one add a part (cuda_internal.cuh cu_mm_parts and
 * cuda_matmul_tc.cu launch_tc give the parts; this mirrors them). */
static int tc_steps(int cols) {
    int nw = 1;
    while (nw < 8 && cols / (2 * nw) >= 512) nw *= 2;
    const int part = ((cols + nw - 1) / nw + 31) / 32 * 32;
    return 6 * (part / 32) + nw;
}

/* The bound. Every product a tensor core forms is exact (bf16 × bf16, and
 * the activation's three bf16 parts sum to it exactly: cu_split3); the
 * roundings are the accumulation's. The model (Fasi, Higham, Mikaitis,
 * Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021,
 * measured on V100, T4 and A100; Hopper taken to be no worse): an mma step
 * aligns its 16 products and the accumulator to the largest exponent and
 * keeps at least 24 significant bits, truncating, then truncates the
 * normalised sum once more, so a step's error is below 18·2⁻²³ of the sum
 * of its terms' magnitudes, which is at most Σ|x_k·w_k| over the whole row
 * (plus the error carried, second order). A part add is one f32 rounding.
 * So |y − ref| ≤ steps · 20·2⁻²³ · Σ|x_k·w_k| (20 for 18 and the second
 * order). Against the CPU, its bound (cols/8 + 40)·2⁻²⁴ is added. This
 * bound is loose (the emulator, which rounds once per step, uses ~0.5%
 * of it): it catches gross errors; indexing is what the exact test below
 * catches, where any misplaced element changes an integer. */
static double tc_bound(int cols) { return tc_steps(cols) * 20.0 * ldexp(1.0, -23); }

static void test_tensor_bound(void) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 33, 7}, {8, 40, 64}, {17, 70, 100}, {5, 37, 1027}, {1, 300, 4096},
                                    {9, 65, 260}, {2, 129, 1024}, {8, 70, 3072}, {12, 33, 2048}, {40, 50, 1000},
                                    {20, 17, 96}};
    double worst_ref = 0, worst_cpu = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int m = shapes[s][0], rows = shapes[s][1], cols = shapes[s][2];
        kb_weight w;
        float *x, *yc, *yg;
        matmul_both(KB_BF16, m, rows, cols, &w, &x, &yc, &yg);
        double wr, wc;
        long nr = beyond_bound(NULL, yg, x, &w, m, tc_bound(cols), &wr);
        long nc = beyond_bound(yc, yg, x, &w, m, tc_bound(cols) + (cols / 8.0 + 40) * ldexp(1.0, -24), &wc);
        CHECKF(nr == 0, "tensor matmul m %d [%d, %d]: %ld of %d elements beyond the bound from the double reference "
               "(worst %.3f of it)", m, rows, cols, nr, m * rows, wr);
        CHECKF(nc == 0, "tensor matmul m %d [%d, %d]: %ld of %d elements beyond the bound from the CPU's "
               "(worst %.3f of it)", m, rows, cols, nc, m * rows, wc);
        worst_ref = wr > worst_ref ? wr : worst_ref;
        worst_cpu = wc > worst_cpu ? wc : worst_cpu;
        free(yc); free(yg); free(x); free((void *)w.data);
    }
    printf("tensor matmul: bf16 within the accumulation bound of a double reference (worst %.3f of it) and of the "
           "CPU's (worst %.3f) (12 shapes)\n", worst_ref, worst_cpu);
}

/* Data whose every product and partial sum is exact in 21 significant
 * bits whatever the order or the truncation (the model above keeps 24, so
 * this holds with 3 bits to spare), so the result must equal the exact sum
 * bit for bit, on the GPU, the CPU and the emulator alike. Dense: weights
 * in {-1, 0, 1}, activations i + j/256 (i ∈ {-1, 0, 1}; up to 9
 * significant bits, so hi and mid both carry some): every partial sum a
 * multiple of 2⁻⁸ below 2¹³ in magnitude (3,072 columns at most). A weight
 * or activation element read from the wrong place, a fragment in the
 * wrong register or half, a tile's row or a part lost: each changes a
 * multiple of 2⁻⁸. Sparse (for the third part): 4 weights of ±1 a row, the
 * rest 0, activations ±(1 + j/2¹⁷) (18 significant bits, so lo carries
 * some): a sum of 4 below 8 in multiples of 2⁻¹⁷. */
static void test_tensor_exact(void) {
    static const int shapes[][3] = {{1, 33, 96}, {8, 40, 1000}, {13, 17, 520}, {40, 50, 3072}, {3, 20, 37},
                                    {20, 16, 2056}};
    long bad_gpu = 0, bad_cpu = 0, n_all = 0;
    for (size_t s = 0; s < 2 * sizeof shapes / sizeof shapes[0]; s++) {
        const int sparse = s & 1, sh = (int)(s / 2);
        const int m = shapes[sh][0], rows = shapes[sh][1], cols = shapes[sh][2];
        uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)rows * cols);
        float *wf = malloc(sizeof(float) * (size_t)rows * cols), *x = malloc(sizeof(float) * (size_t)m * cols);
        for (size_t i = 0; i < (size_t)rows * cols; i++) wf[i] = sparse ? 0.0f : (float)((int)(rnd() % 3u) - 1);
        if (sparse)
            for (int j = 0; j < rows; j++)
                for (int q = 0; q < 4; q++) wf[(size_t)j * cols + rnd() % (uint32_t)cols] = rnd() & 1 ? 1.0f : -1.0f;
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            uint32_t u;
            memcpy(&u, &wf[i], 4);
            wb[i] = (uint16_t)(u >> 16);   /* small integers: bf16 exactly */
        }
        for (size_t i = 0; i < (size_t)m * cols; i++)
            x[i] = sparse ? (rnd() & 1 ? 1.0f : -1.0f) * (1.0f + (float)(rnd() % (1u << 17)) / (float)(1u << 17))
                          : (float)((int)(rnd() % 3u) - 1) + (float)(rnd() % 256u) / 256.0f;
        kb_weight w = {.dt = KB_BF16, .data = wb, .rows = rows, .cols = cols};
        float *yc = malloc(sizeof(float) * (size_t)m * rows), *yg = malloc(sizeof(float) * (size_t)m * rows);
        use("cpu");
        kb_matmul(yc, x, &w, m);
        use("cuda");
        kb_matmul(yg, x, &w, m);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < rows; j++) {
                double ref = 0;
                for (int k = 0; k < cols; k++) ref += (double)x[(size_t)i * cols + k] * wf[(size_t)j * cols + k];
                const float r = (float)ref;
                CHECK((double)r == ref);   /* the premise: the exact sum is a float */
                bad_gpu += yg[(size_t)i * rows + j] != r;
                bad_cpu += yc[(size_t)i * rows + j] != r;
                n_all++;
            }
        free(wb); free(wf); free(x); free(yc); free(yg);
    }
    CHECKF(bad_gpu == 0, "tensor matmul, exact data: %ld of %ld outputs differ from the exact sum", bad_gpu, n_all);
    CHECKF(bad_cpu == 0, "cpu matmul, exact data: %ld of %ld outputs differ from the exact sum", bad_cpu, n_all);
    if (!bad_gpu && !bad_cpu)
        printf("tensor matmul: %ld outputs on exactly representable data equal the exact sum (6 shapes, 1 to 40 "
               "rows, dense and sparse)\n", n_all);
}

/* f32 and f16 weights keep the invariant kernel in the tensor mode */
static void test_tensor_other_types(void) {
    static const kb_dtype dts[2] = {KB_F32, KB_F16};
    static const int shapes[][3] = {{9, 65, 260}, {17, 70, 1000}};
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 2; s++) {
            const int m = shapes[s][0], rows = shapes[s][1], cols = shapes[s][2];
            kb_weight w = random_weight(dts[d], rows, cols);
            float *x = random_floats((size_t)m * cols, 1.0f), *yi = malloc(sizeof(float) * (size_t)m * rows),
                  *yt = malloc(sizeof(float) * (size_t)m * rows);
            CHECK(!kb_set_cuda_matmul("invariant"));
            kb_matmul(yi, x, &w, m);
            CHECK(!kb_set_cuda_matmul("tensor"));
            kb_matmul(yt, x, &w, m);
            double e;
            CHECKF(bits_differ(yi, yt, (size_t)m * rows, &e) == 0, "tensor mode, %s weight: not the invariant bits",
                   dt_name(dts[d]));
            free((void *)w.data); free(x); free(yi); free(yt);
        }
    printf("tensor mode: f32 and f16 weights give the invariant mode's bits\n");
}

/* A row alone (one x tile, split in the lanes), among 13 (two tiles) and
 * among 40 (x split once by its own kernel, four tiles a warp): the same
 * bits; widths of one part, four parts, and one not a multiple of 8 (the
 * element-by-element loads). */
static void test_tensor_invariance(void) {
    static const int widths[3] = {1000, 3072, 1027};
    const int rows = 70, ms[2] = {13, 40};
    for (int c = 0; c < 3; c++) {
        const int cols = widths[c];
        kb_weight w = random_weight(KB_BF16, rows, cols);
        void *host = (void *)w.data;
        char err[512];
        CHECKF(!kb_weight_upload(&w, &w, err, sizeof err), "upload: %s", err);
        float *x = random_floats((size_t)40 * cols, 1.0f), *ym = malloc(sizeof(float) * 40 * rows),
              *y1 = malloc(sizeof(float) * rows);
        for (int im = 0; im < 2; im++) {
            kb_matmul(ym, x, &w, ms[im]);
            long bad = 0;
            double e;
            for (int r = 0; r < ms[im]; r += (ms[im] > 13 ? 3 : 1)) {
                kb_matmul(y1, x + (size_t)r * cols, &w, 1);
                bad += bits_differ(y1, ym + (size_t)r * rows, rows, &e) != 0;
            }
            CHECKF(bad == 0, "tensor matmul cols %d: %ld rows differ alone vs among %d", cols, bad, ms[im]);
        }
        kb_weight_release_owner(&w);
        free(host); free(x); free(ym); free(y1);
    }
    printf("tensor matmul: batch-invariant (a row alone = among 13 = among 40; 1 and 4 parts, cols %% 8 != 0)\n");
}

/* The engine on the bf16 fixture in the tensor mode: logits against the
 * CPU's as test_engine holds the invariant mode's (argmax equal, 1e-4: the
 * emulator's accumulation rounds once a step, the GPU's truncates, and the
 * bound above says how far that may go, so a GPU's figure is its own), and
 * speculation on = off on the device, the exact property the mode exists to
 * keep. */
static void test_tensor_engine(void) {
    const char *dir = "tests/fixtures/qwen3-untied";
    gen_engine *ec = NULL, *eg = NULL;
    if (make_engine_at(&ec, "cpu", dir, 0) || make_engine_at(&eg, "cuda", dir, 0)) {
        use("cpu"); gen_engine_free(ec); use("cuda"); gen_engine_free(eg); return;
    }
    const int V = ec->m->cfg.vocab_size, n = 300;
    int toks[300];
    for (int i = 0; i < n; i++) toks[i] = (int)((i * 2654435761u + 7u) % (unsigned)V);
    float *lg = malloc(sizeof(float) * (size_t)n * V);
    prefill_vs_cpu(ec, eg, toks, n, "tensor mode, tests/fixtures/qwen3-untied", lg);
    free(lg);
    static int prompts[LL_NP][LL_MAXP];
    int lens[LL_NP];
    ll_synthetic_prompts(V, prompts, lens);
    const int same = greedy_same(ec, eg, prompts, lens);
    if (same >= 0) printf("tensor mode: greedy generation, %d of %d prompts give the CPU's tokens\n", same, LL_NP);
    static const int depths[2] = {1, 3}, batches[2] = {1, 3};
    ll_config cfgs[2] = {{"cuda tensor ngram", {.name = "ngram"}, 0, NULL},
                         {"cuda tensor draft(self)", {.name = "draft", .draft_model = tu_path(dir), .max_seqs = 8}, 1,
                          NULL}};
    for (int c = 0; c < 2; c++) {
        long tokens = ll_check(eg, &cfgs[c], prompts, lens, depths, 2, batches, 2);
        printf("%s: %ld tokens compared, spec on = spec off\n", cfgs[c].label, tokens);
        CHECKF(tokens >= 500, "%s: only %ld tokens compared", cfgs[c].label, tokens);
    }
    use("cpu");
    gen_engine_free(ec);
    use("cuda");
    gen_engine_free(eg);
}

void test_tensor(void) {
    use("cuda");
    CHECK(!kb_set_cuda_matmul("tensor") && !strcmp(kb_cuda_matmul(), "tensor"));
    /* held sets first, while the split's scratch is still unallocated (no
     * earlier section uses it): the 20-row set grows it from inside the
     * flush of held calls, which a grown scratch itself flushes again */
    test_matmul_held_m(20);   /* x split by its own kernel */
    test_matmul_held_m(1);    /* one tile, split in the lanes */
    test_tensor_exact();
    test_tensor_bound();
    test_tensor_other_types();
    test_tensor_invariance();
    CHECK(!kb_set_cuda_matmul("tensor"));
    test_moe_grouped();       /* an expert's rows: the bits of one matmul of that expert */
    test_tensor_engine();
    use("cuda");
    CHECK(!kb_set_cuda_matmul("invariant"));
}
