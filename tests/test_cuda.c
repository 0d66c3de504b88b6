/* label: gpu */
/* test_cuda.c — the CUDA backend (kernels/cuda_*.cu) against the CPU one.
 * This file: the shared helpers (cuda_check.h), the kernels but attention,
 * memory, stream order, the dense engine, and main; attention, mixture of
 * experts and the tensor matmul mode are cuda_check_attention.c,
 * cuda_check_moe.c and cuda_check_tensor.c.
 * Skipped (exit 77) when kb_set_device("cuda") fails: a build without CUDA,
 * or no GPU visible (every machine of this project's CI).
 *
 * Every kernel on random inputs, CUDA vs the CPU kernels on the AVX2 path
 * (or scalar, which gives the same bits; the AVX-512 path rounds matmuls in
 * another order, so it is not the reference here):
 *   - RMSNorm, SwiGLU, add, embedding rows: bit-identical. These CUDA
 *     kernels perform the CPU's operations in the CPU's order with
 *     IEEE-exact fma, add, multiply, divide and sqrt, so any difference is
 *     a bug, not rounding.
 *   - attention (rows, spans, several sequences' spans in one call, the
 *     step buffer's kb_attention_idx; paged, GQA, page layouts, contexts
 *     over several chunks): its own fixed order (cuda_ops.cu: the context
 *     in chunks of 256 positions, each chunk's max, sum and P·V, combined
 *     in chunk order), so each output element within a bound of a double
 *     reference, the CPU's within its own, and the two within the sum.
 *     Derived as test_kernels' attention bound is: a score's error e_s is
 *     γ_k·Σ|q_d·k_d|·scale plus the roundings of the dot and of the
 *     scale's product (u·|dot|·scale + u·|s|), k the longest chain of one
 *     product's roundings (cuda: head_dim/32 fmas of a lane, then 5 levels
 *     of the lanes' tree; cpu: head_dim/8, 3 levels, the head_dim%8 tail).
 *     An unnormalised weight is e^{s_p − M} times a factor within e^{±θ}:
 *     θ = e_s + the subtractions' roundings u·(M − s_p) ≤ u·(range of the
 *     scores + 2e_s) + kb_expf's 1.01 ulp twice on cuda (the chunk's exp
 *     and the combine's rescale: 5u) or once with the weight's rounding on
 *     the cpu (4u).
 *     The sums then round each term at most k' times (cuda: a warp's chain
 *     ≤ min(n, 32), the warps' tree 3, the chunk sum's tree 8, the combine
 *     one per chunk: k' ≤ n + chunks + 8; cpu: the fma chain, n), so every
 *     normalised weight is within a factor (1 ± a) / (1 ∓ a),
 *     a = e^θ·(1+γ_k') − 1, of the exact one, and with the final division
 *     |out − ref| ≤ (2a/(1−a)·(1+u) + u)·Σ_p w_p·|v_p[d]|. Random inputs
 *     use under 4% of it (the emulator); a position dropped or weighed in
 *     the wrong chunk moves an output by ~w_p·|v_p|, ~3e-4 (median) at 1,000
 *     positions against a bound of ~7e-5 there, and far more at shorter
 *     contexts.
 *   - matmul (invariant mode): its own fixed order (cuda_matmul.cu: 32
 *     lanes × 8-element fma chains, a butterfly, the parts of the row in
 *     order), so within the standard bound γ_n·Σ|x_k·w_k| of a double
 *     reference (n its longest chain of roundings, cols/32 + 24) and of the
 *     CPU's result (the two orders' bounds added); an element read from the
 *     wrong place moves the result by ~Σ|x_k·w_k|/cols, far beyond both.
 *   - RoPE: within 2.5e-7·(|a|+|b|) per element. cos/sin/pow are computed
 *     in double and rounded once to float on both sides, but glibc and
 *     CUDA's libdevice are only within an ulp or two of the true double
 *     value, so the float may differ by one ulp (2⁻²⁴ relative) in cos and
 *     in sin; each output a·cos − b·sin then moves by at most
 *     2⁻²⁴(|a|+|b|) plus one rounding of its own: 3·2⁻²⁴ ≈ 1.8e-7 of
 *     (|a|+|b|), rounded up.
 *   - matmul in cuBLAS mode: |Δ| ≤ (u + (cols+8)·2⁻²³)·Σ|x_k·w_k|, u the
 *     rounding of the activations to the weight's type (2⁻⁸ for bf16, 2⁻¹¹
 *     for f16, 0 for f32 — cuBLAS rounds x, the CPU does not) plus the
 *     standard γ_n bound of two f32 summations in different orders.
 *   - batch invariance: a row's matmul alone, among 8 rows and as row 9 of
 *     17 (another tile of x rows): bit-identical (the GPU's order depends
 *     on cols alone); attention rows in a span, beside other sequences'
 *     spans or rows of another length, and under a larger bound
 *     (kb_attention_idx) vs the same rows alone: bit-identical.
 *   - stream order (kb_async_begin): a chain of queued calls, host
 *     arguments rewritten as soon as each call returns, enough of them to
 *     wrap the staging ring, one larger than the ring and one call whose
 *     second argument overflows it, a device copy, kb_wait before a host
 *     read: the same bits as the CPU (the final matmul: as the same matmul
 *     on cuda outside the region).
 * Then the engine on tests/fixtures/qwen3-tied: CUDA vs CPU logits for a
 * 300-token prefill (argmax equal at every row, max |Δ| ≤ 1e-4: the
 * sources of difference allowed above are RoPE's ulp and the matmul's and
 * attention's orders; 1e-4 is the bound the tensor-parallel test uses for
 * a reordered reduction, two orders of magnitude above what the matmul's
 * order moves a logit through two layers: 8.6e-6 measured on the
 * emulator), greedy generation equal to the CPU's, and speculation on vs off under --device cuda (tests/lossless.c,
 * as test_spec_lossless does on the CPU), each drafter drafting and
 * accepted exactly as the same drafter on the CPU (a device buffer read
 * too early would change drafts without breaking losslessness).
 * Then mixture of experts (the section alone: `test_cuda moe`): the
 * grouped expert matmul bit-identical to one kb_matmul per expert, with
 * the experts in device or mapped host memory; gather and combine the
 * CPU's bits; on tests/fixtures/qwen3-moe-tiny (and its fused and
 * norm_topk_prob false variants) CUDA vs CPU logits as for the dense
 * fixture, a row's logits bit-identical in one prefill, decoded alone and
 * beside another sequence's rows, greedy generation equal to the CPU's,
 * speculation on = off (ngram, draft(self)), and the experts in mapped
 * host memory (kb_set_experts_on_host) giving the device's logits bit for
 * bit.
 * Then the tensor matmul mode (the section alone: `test_cuda tensor`;
 * cuda_matmul_tc.cu): exact results on exactly representable data, an
 * accumulation bound on random data, batch invariance, held sets, grouped
 * experts, and the bf16 fixture (qwen3-untied) against the CPU with spec
 * on = off (test_tensor_bound says where its bound comes from). The
 * attention sections alone: `test_cuda attention` (wide calls, tiles of
 * rows: each row its bits alone). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_check.h"

static uint64_t tc_rng = 0x9e3779b97f4a7c15ull;
uint32_t rnd(void) {
    tc_rng = tc_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(tc_rng >> 33);
}
void rnd_seed(uint64_t seed) { tc_rng = seed; }
float frand(void) { return (float)rnd() / 2147483648.0f - 1.0f; }   /* [-1, 1) */

void use(const char *dev) {
    char err[512];
    if (kb_set_device(dev, err, sizeof err)) CHECKF(0, "kb_set_device(%s): %s", dev, err);
}

/* Elements whose bits differ, and the largest |a − b| (NaN = NaN when both are). */
long bits_differ(const float *a, const float *b, size_t n, double *maxabs) {
    long d = 0;
    *maxabs = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            d++;
            double e = fabs((double)a[i] - (double)b[i]);
            if (e != e || e > *maxabs) *maxabs = e;
        }
    }
    return d;
}

/* A random weight [rows, cols] of dt, malloc'd: bf16/f16 bit patterns with
 * exponents kept near 1 (|w| in [2^-6, 2)), f32 in [-1, 1). */
kb_weight random_weight(kb_dtype dt, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    void *p = malloc(n * kb_dtype_size(dt) + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        if (dt == KB_F32) ((float *)p)[i] = frand();
        else if (dt == KB_BF16) ((uint16_t *)p)[i] = (uint16_t)((r & 0x8000u) | ((121u + r % 7u) << 7) | (r >> 16 & 0x7fu));
        else ((uint16_t *)p)[i] = (uint16_t)((r & 0x8000u) | ((9u + r % 7u) << 10) | (r >> 16 & 0x3ffu));
    }
    kb_weight w = {.dt = dt, .data = p, .rows = rows, .cols = cols};
    return w;
}

float *random_floats(size_t n, float scale) {
    float *v = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) v[i] = scale * frand();
    return v;
}

const char *dt_name(kb_dtype dt) { return dt == KB_F32 ? "f32" : dt == KB_BF16 ? "bf16" : "f16"; }

/* ---- matmul ------------------------------------------------------------------ */

/* A random [rows, cols] weight of dtype dt and m input rows, multiplied on
 * the CPU (into *yc) and then on CUDA (into *yg); the backend is cuda after. */
void matmul_both(kb_dtype dt, int m, int rows, int cols, kb_weight *w, float **x, float **yc, float **yg) {
    *w = random_weight(dt, rows, cols);
    *x = random_floats((size_t)m * cols, 1.0f);
    *yc = calloc((size_t)m * rows, sizeof(float));
    *yg = calloc((size_t)m * rows, sizeof(float));
    use("cpu");
    kb_matmul(*yc, *x, w, m);
    use("cuda");
    kb_matmul(*yg, *x, w, m);
}

/* Elements of yg (m × rows) beyond u_rel·Σ_k |x_k·w_k| from ref: ref in
 * double when yc is NULL, else yc. *worst: the largest error over its bound. */
long beyond_bound(const float *yc, const float *yg, const float *x, const kb_weight *w, int m, double u_rel,
                         double *worst) {
    const int rows = w->rows, cols = w->cols;
    float *wf = malloc(sizeof(float) * (size_t)(cols > 0 ? cols : 1));
    long bad = 0;
    *worst = 0;
    const char *dev = kb_device();
    use("cpu");   /* a host weight, read on the host */
    for (int j = 0; j < rows; j++) {
        kb_weight_row(wf, w, j);
        for (int i = 0; i < m; i++) {
            double mag = 0, ref = 0;
            for (int k = 0; k < cols; k++) {
                const double p = (double)x[(size_t)i * cols + k] * wf[k];
                mag += fabs(p);
                ref += p;
            }
            if (yc) ref = yc[(size_t)i * rows + j];
            const double tol = u_rel * mag + 1e-30;
            const double err = fabs(ref - yg[(size_t)i * rows + j]);
            if (!(err <= tol)) bad++;
            if (err / tol > *worst) *worst = err / tol;
        }
    }
    use(dev);
    free(wf);
    return bad;
}

/* The invariant mode's own order (cuda_matmul.cu) against a double
 * reference: the standard bound γ_n·Σ|x_k·w_k| (γ_n ≈ n·2⁻²⁴), n the
 * longest chain of roundings an output sees — a lane's fma chain of at
 * most 8·ceil(cols/256) ≤ cols/32 + 8, the 5 butterfly adds and at most 8
 * part adds: n = cols/32 + 24. Against the CPU (8 chains of cols/8 fmas,
 * 3 adds, the tail): the sum of both bounds, n = cols/8 + cols/32 + 40.
 * An element read from the wrong place moves the output by about
 * Σ|x_k·w_k|/cols, far beyond either (cols/8 · 2⁻²⁴ ≪ 1/cols for every
 * cols here). */
static void test_matmul(void) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 33, 7}, {8, 40, 64}, {17, 70, 100}, {5, 37, 1027}, {1, 300, 4096},
                                    {9, 65, 260}, {2, 129, 1024}, {8, 70, 3072}, {12, 33, 2048}};
    static const kb_dtype dts[3] = {KB_F32, KB_BF16, KB_F16};
    double worst_ref = 0, worst_cpu = 0;
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int m = shapes[s][0], rows = shapes[s][1], cols = shapes[s][2];
            kb_weight w;
            float *x, *yc, *yg;
            matmul_both(dts[d], m, rows, cols, &w, &x, &yc, &yg);
            double wr, wc;
            long nr = beyond_bound(NULL, yg, x, &w, m, (cols / 32.0 + 24) * ldexp(1.0, -24), &wr);
            long nc = beyond_bound(yc, yg, x, &w, m, (cols / 8.0 + cols / 32.0 + 40) * ldexp(1.0, -24), &wc);
            CHECKF(nr == 0, "matmul %s m %d [%d, %d]: %ld of %d elements beyond the bound from the double reference "
                   "(worst %.2f of it)", dt_name(dts[d]), m, rows, cols, nr, m * rows, wr);
            CHECKF(nc == 0, "matmul %s m %d [%d, %d]: %ld of %d elements beyond the bound from the CPU's "
                   "(worst %.2f of it)", dt_name(dts[d]), m, rows, cols, nc, m * rows, wc);
            worst_ref = wr > worst_ref ? wr : worst_ref;
            worst_cpu = wc > worst_cpu ? wc : worst_cpu;
            /* the same weight uploaded (device memory, not staged): the same bits */
            kb_weight wd = w;
            char err[512];
            double e;
            float *yu = malloc(sizeof(float) * (size_t)m * rows);
            CHECKF(!kb_weight_upload(&wd, x, err, sizeof err), "upload: %s", err);
            CHECK(wd.data != w.data);
            memset(yu, 0xff, (size_t)m * rows * sizeof(float));
            kb_matmul(yu, x, &wd, m);
            CHECKF(bits_differ(yg, yu, (size_t)m * rows, &e) == 0, "matmul %s [%d, %d] with an uploaded weight differs",
                   dt_name(dts[d]), rows, cols);
            kb_weight_release(&wd);
            CHECK(wd.data == NULL);
            free(yu); free(yc); free(yg); free(x); free((void *)w.data);
        }
    printf("matmul: invariant mode within the bound of a double reference (worst %.2f of it) and of the CPU's "
           "(worst %.2f) (f32, bf16, f16, 10 shapes)\n", worst_ref, worst_cpu);
}

/* A row alone, among 8, and as row 9 of 17 rows: bit-identical on CUDA. */
static void test_batch_invariance(void) {
    use("cuda");
    static const kb_dtype dts[3] = {KB_F32, KB_BF16, KB_F16};
    const int rows = 300;
    for (int d = 0; d < 6; d++) {   /* cols 1000: one part; 3072: four (cuda_matmul.cu) */
        const int cols = d < 3 ? 1000 : 3072;
        kb_weight w = random_weight(dts[d % 3], rows, cols);
        void *host = (void *)w.data;
        char err[512];
        CHECKF(!kb_weight_upload(&w, &w, err, sizeof err), "upload: %s", err);
        float *x = random_floats((size_t)17 * cols, 1.0f);
        float *y17 = malloc(sizeof(float) * 17 * rows), *y8 = malloc(sizeof(float) * 8 * rows);
        float *y1 = malloc(sizeof(float) * rows);
        kb_matmul(y17, x, &w, 17);
        kb_matmul(y8, x, &w, 8);
        double e;
        for (int r = 0; r < 17; r++) {
            kb_matmul(y1, x + (size_t)r * cols, &w, 1);
            CHECKF(bits_differ(y1, y17 + (size_t)r * rows, rows, &e) == 0, "matmul %s: row %d alone vs among 17 differs",
                   dt_name(dts[d % 3]), r);
            if (r < 8)
                CHECKF(bits_differ(y1, y8 + (size_t)r * rows, rows, &e) == 0, "matmul %s: row %d alone vs among 8 differs",
                       dt_name(dts[d % 3]), r);
        }
        kb_weight_release_owner(&w);
        free(host); free(x); free(y17); free(y8); free(y1);
    }
    printf("matmul: batch-invariant on CUDA (a row alone = among 8 = in the second tile of 17; 1 and 4 parts)\n");
}

static void test_cublas(void) {
    use("cuda");
    if (kb_set_cuda_matmul("cublas")) {
        CHECKF(0, "kb_set_cuda_matmul(cublas) failed (cuBLAS not loadable?)");
        return;
    }
    CHECK(!strcmp(kb_cuda_matmul(), "cublas"));
    static const kb_dtype dts[3] = {KB_F32, KB_BF16, KB_F16};
    static const double ux[3] = {0.0, 1.0 / 256, 1.0 / 2048};
    static const int shapes[][3] = {{1, 300, 4096}, {8, 40, 64}, {17, 70, 100}, {64, 256, 1024}};
    long invariant_rows = 0, rows_checked = 0;
    for (int d = 0; d < 3; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int m = shapes[s][0], rows = shapes[s][1], cols = shapes[s][2];
            kb_weight w;
            float *x, *yc, *yg;
            matmul_both(dts[d], m, rows, cols, &w, &x, &yc, &yg);
            double worst;
            long bad = beyond_bound(yc, yg, x, &w, m, ux[d] + (cols + 8) * ldexp(1.0, -23), &worst);
            CHECKF(bad == 0, "cublas matmul %s m %d [%d, %d]: %ld elements beyond the bound (worst %.2f of it)",
                   dt_name(dts[d]), m, rows, cols, bad, worst);
            /* informational: does this cuBLAS happen to be batch-invariant here? */
            float *y1 = malloc(sizeof(float) * rows);
            double e;
            for (int i = 0; i < m; i++) {
                kb_matmul(y1, x + (size_t)i * cols, &w, 1);
                invariant_rows += bits_differ(y1, yg + (size_t)i * rows, rows, &e) == 0;
                rows_checked++;
            }
            free(y1); free(yc); free(yg); free(x); free((void *)w.data);
        }
    printf("cublas: within the bound; %ld of %ld rows happened to be bit-identical alone vs in their batch "
           "(not promised)\n", invariant_rows, rows_checked);
    CHECK(!kb_set_cuda_matmul("invariant") && !strcmp(kb_cuda_matmul(), "invariant"));
    CHECK(kb_set_cuda_matmul("fast") == -1);
}

/* Inside an async region the backend holds back matmuls of one x and
 * launches up to four as one (cuda_matmul.cu): q/k/v of different row
 * counts (the set's block ranges), then gate/up, then a matmul of another x
 * that must see the held results' successors run in order — each equal bit
 * for bit to the same matmul alone outside a region. */
void test_matmul_held_m(int m) {
    use("cuda");
    const int cols = 1024;
    const int rows[5] = {96, 32, 32, 200, 200};
    kb_weight w[5], wd[5];
    char err[512];
    for (int i = 0; i < 5; i++) {
        w[i] = random_weight(KB_BF16, rows[i], cols);
        wd[i] = w[i];
        CHECKF(!kb_weight_upload(&wd[i], w, err, sizeof err), "upload: %s", err);
    }
    kb_weight wo = random_weight(KB_BF16, 64, 200), wod = wo;
    CHECKF(!kb_weight_upload(&wod, w, err, sizeof err), "upload: %s", err);
    float *xh = random_floats((size_t)m * cols, 1.0f);
    float *x = kb_alloc(sizeof(float) * m * cols), *y[5], *z = kb_alloc(sizeof(float) * m * 64);
    kb_copy_to_device(x, xh, sizeof(float) * m * cols);
    for (int i = 0; i < 5; i++) y[i] = kb_alloc(sizeof(float) * m * rows[i]);
    kb_async_begin();
    float *ys3[3] = {y[0], y[1], y[2]};
    const kb_weight *ws3[3] = {&wd[0], &wd[1], &wd[2]};
    kb_matmul_n(3, ys3, ws3, x, m);
    float *ys2[2] = {y[3], y[4]};
    const kb_weight *ws2[2] = {&wd[3], &wd[4]};
    kb_matmul_n(2, ys2, ws2, x, m);
    kb_swiglu(y[3], y[3], y[4], m, rows[3]);   /* the held gate/up's SwiGLU: in its epilogue */
    kb_matmul(z, y[3], &wod, m);                /* another x */
    kb_async_end();
    long bad = 0;
    double e;
    for (int i = 0; i < 5; i++) {
        float *r = malloc(sizeof(float) * m * rows[i]);
        kb_matmul(r, xh, &wd[i], m);   /* alone, outside a region */
        if (i == 3) {
            float *u = malloc(sizeof(float) * m * rows[4]);
            kb_matmul(u, xh, &wd[4], m);
            kb_swiglu(r, r, u, m, rows[3]);
            float *zr = malloc(sizeof(float) * m * 64);
            kb_matmul(zr, r, &wod, m);
            bad += bits_differ(z, zr, (size_t)m * 64, &e);
            free(u); free(zr);
        }
        bad += bits_differ(y[i], r, (size_t)m * rows[i], &e);
        free(r);
    }
    CHECKF(bad == 0, "held matmuls (%d rows): %ld elements differ from the same matmuls alone", m, bad);
    for (int i = 0; i < 5; i++) { kb_free(y[i]); kb_weight_release(&wd[i]); free((void *)w[i].data); }
    kb_weight_release(&wod);
    free((void *)wo.data);
    kb_free(x); kb_free(z); free(xh);
    use("cpu");
    printf("matmul (%s, %d rows): q/k/v and gate/up held and launched as one, the swiglu (in the invariant mode: in "
           "gate/up's epilogue), then a dependent matmul: the bits of each alone\n", kb_cuda_matmul(), m);
}

/* every accumulator shape of the invariant matmul (R, MT from m), the
 * fused gate/up + SwiGLU included */
static void test_matmul_held(void) {
    test_matmul_held_m(1);
    test_matmul_held_m(3);
    test_matmul_held_m(9);
}

/* The same chain inside an async region (device buffers: the backend holds
 * an add for the next norm, a head norm for the next RoPE, and launches
 * them as one kernel, or alone when something else comes next) and
 * outside one (every call alone): bit for bit. */
static void held_chain(float *x, float *xb, float *q, float *k, const float *y, const float *g, const float *gq,
                       const int *pos, int m, int n, int nh, int hd) {
    kb_add(x, y, m, n);
    kb_rmsnorm(xb, x, g, m, n, 1e-6f);             /* add + norm */
    kb_rmsnorm(q, q, gq, m * nh, hd, 1e-6f);
    kb_rope(q, pos, m, nh, hd, 1e6f);              /* norm + rope */
    kb_rmsnorm(k, k, gq, m * nh, hd, 1e-6f);
    kb_add(k, q, m, nh * hd);                      /* a held norm, then something else */
    kb_add(x, xb, m, n);
    kb_swiglu(xb, xb, x, m, n);                    /* a held add, then something else */
    kb_rmsnorm(k, k, gq, m * nh, hd, 1e-6f);
    kb_rope(q, pos, m, nh, hd, 1e6f);              /* a held norm of k, then RoPE of q: not fused */
    kb_add(x, y, m, n);
    kb_rmsnorm(xb, xb, g, m, n, 1e-6f);            /* a held add of x, then a norm of xb: not fused */
}

static void test_held_ops(void) {
    const int m = 3, n = 1024, nh = 4, hd = 64;
    const size_t nx = (size_t)m * n, nq = (size_t)m * nh * hd;
    float *x0 = random_floats(nx, 1.0f), *y0 = random_floats(nx, 1.0f), *q0 = random_floats(nq, 1.0f);
    float *k0 = random_floats(nq, 1.0f), *g0 = random_floats(n, 1.0f), *gq0 = random_floats(hd, 1.0f);
    int pos[3] = {5, 6, 900};
    use("cuda");
    float *buf[2][6];
    for (int v = 0; v < 2; v++) {
        float **b = buf[v];
        b[0] = kb_alloc(nx * 4); b[1] = kb_alloc(nx * 4); b[2] = kb_alloc(nq * 4); b[3] = kb_alloc(nq * 4);
        b[4] = kb_alloc(nx * 4); b[5] = kb_alloc(n * 4);
        memcpy(b[0], x0, nx * 4); memset(b[1], 0, nx * 4); memcpy(b[2], q0, nq * 4); memcpy(b[3], k0, nq * 4);
        memcpy(b[4], y0, nx * 4); memcpy(b[5], g0, n * 4);
    }
    float *gq = kb_alloc(hd * 4);
    memcpy(gq, gq0, hd * 4);
    held_chain(buf[0][0], buf[0][1], buf[0][2], buf[0][3], buf[0][4], buf[0][5], gq, pos, m, n, nh, hd);
    kb_async_begin();
    held_chain(buf[1][0], buf[1][1], buf[1][2], buf[1][3], buf[1][4], buf[1][5], gq, pos, m, n, nh, hd);
    kb_async_end();
    double e;
    long d = bits_differ(buf[0][0], buf[1][0], nx, &e) + bits_differ(buf[0][1], buf[1][1], nx, &e) +
             bits_differ(buf[0][2], buf[1][2], nq, &e) + bits_differ(buf[0][3], buf[1][3], nq, &e);
    CHECKF(d == 0, "held adds and norms: %ld elements differ from the same calls alone", d);
    /* and the fused RoPE against the CPU's (RoPE's own tolerance): q after norm + rope */
    use("cpu");
    float *qc = malloc(nq * 4), *qn = malloc(nq * 4), *xc = malloc(nx * 4), *xbc = malloc(nx * 4);
    memcpy(qn, q0, nq * 4);
    kb_rmsnorm(qn, qn, gq0, m * nh, hd, 1e-6f);
    memcpy(qc, qn, nq * 4);
    kb_rope(qc, pos, m, nh, hd, 1e6f);
    memcpy(xc, x0, nx * 4);
    kb_add(xc, y0, m, n);
    kb_rmsnorm(xbc, xc, g0, m, n, 1e-6f);
    use("cuda");
    float *qg = kb_alloc(nq * 4), *xg = kb_alloc(nx * 4), *xbg = kb_alloc(nx * 4);
    memcpy(qg, q0, nq * 4);
    memcpy(xg, x0, nx * 4);
    kb_async_begin();
    kb_rmsnorm(qg, qg, gq, m * nh, hd, 1e-6f);
    kb_rope(qg, pos, m, nh, hd, 1e6f);
    kb_add(xg, buf[1][4], m, n);   /* y0 is still in buf[1][4] (the chain reads y, never writes it) */
    kb_rmsnorm(xbg, xg, buf[1][5], m, n, 1e-6f);
    kb_async_end();
    long bad = 0;
    for (size_t i = 0; i < nq; i++) {   /* test_rope's bound, on the normed pair */
        const size_t base = i - i % (size_t)hd;
        const int i0 = (int)(i % (size_t)hd) % (hd / 2);
        bad += !(fabs((double)qc[i] - qg[i]) <= 2.5e-7 * (fabs(qn[base + i0]) + fabs(qn[base + i0 + hd / 2])));
    }
    CHECKF(bad == 0, "norm + rope fused: %ld elements beyond the CPU's RoPE tolerance", bad);
    CHECKF(bits_differ(xc, xg, nx, &e) == 0 && bits_differ(xbc, xbg, nx, &e) == 0,
           "add + norm fused: differs from the CPU's add then norm");
    /* a layer's K head norm + RoPE and its K/V store into slots (device slot
     * list): inside a region one kernel (NORM_ROPE_STORE), outside it three
     * calls; the same K rows, K slots and V slots bit for bit */
    {
        const int nkv = 2, rf = nkv * hd, nslot = 9;
        const size_t nk = (size_t)m * rf;
        float *kv_out[2][3];
        for (int v = 0; v < 2; v++) {
            kv_out[v][0] = kb_alloc(nk * 4);                               /* K rows (normed, rotated in place) */
            kv_out[v][1] = kb_alloc(sizeof(float) * (size_t)nslot * rf);   /* K pool */
            kv_out[v][2] = kb_alloc(sizeof(float) * (size_t)nslot * rf);   /* V pool */
            memcpy(kv_out[v][0], k0, nk * 4);
        }
        float *vrows = kb_alloc(nk * 4);
        memcpy(vrows, q0, nk * 4);
        int *slots = kb_alloc(sizeof(int) * (size_t)m);
        slots[0] = 7; slots[1] = 2; slots[2] = 4;
        for (int v = 0; v < 2; v++) {
            if (v) kb_async_begin();
            kb_rmsnorm(kv_out[v][0], kv_out[v][0], gq, m * nkv, hd, 1e-6f);
            kb_rope(kv_out[v][0], pos, m, nkv, hd, 1e6f);
            kb_store_rows(kv_out[v][1], kv_out[v][0], kv_out[v][2], vrows, slots, m, rf);
            if (v) kb_async_end();
        }
        long dk = bits_differ(kv_out[0][0], kv_out[1][0], nk, &e) +
                  bits_differ(kv_out[0][1], kv_out[1][1], (size_t)nslot * rf, &e) +
                  bits_differ(kv_out[0][2], kv_out[1][2], (size_t)nslot * rf, &e);
        int placed = 1;
        for (int i = 0; i < m; i++)
            placed &= !memcmp(kv_out[1][1] + (size_t)slots[i] * rf, kv_out[1][0] + (size_t)i * rf, (size_t)rf * 4) &&
                      !memcmp(kv_out[1][2] + (size_t)slots[i] * rf, vrows + (size_t)i * rf, (size_t)rf * 4);
        CHECKF(dk == 0 && placed, "k norm + rope + kv store fused: %ld elements differ from the calls alone%s", dk,
               placed ? "" : ", or a row is not in its slot");
        for (int v = 0; v < 2; v++) for (int j = 0; j < 3; j++) kb_free(kv_out[v][j]);
        kb_free(vrows);
        kb_free(slots);
    }
    /* scatters: a pair to slots one distance apart (one launch), a third
     * held and then flushed by an add, a fourth to another pointer array */
    {
        const int rf = 70, ns = 3;
        float *pool = kb_alloc(sizeof(float) * 16 * rf), *rows_d = kb_alloc(sizeof(float) * ns * rf);
        float *rows_h = random_floats((size_t)ns * rf, 1.0f), *want = calloc((size_t)16 * rf, sizeof(float));
        memcpy(rows_d, rows_h, sizeof(float) * ns * rf);
        float *d0[3] = {pool + 0 * rf, pool + 5 * rf, pool + 2 * rf};
        float *d1[3] = {pool + 8 * rf, pool + 13 * rf, pool + 10 * rf};   /* d0 + 8 rows */
        float *d2[3] = {pool + 4 * rf, pool + 9 * rf, pool + 6 * rf};     /* d0 + 4 rows */
        float *d3[3] = {pool + 15 * rf, pool + 1 * rf, pool + 3 * rf};    /* no common distance */
        kb_async_begin();
        kb_scatter_rows(d0, rows_d, ns, rf);
        kb_scatter_rows(d1, rows_d, ns, rf);
        kb_scatter_rows(d2, rows_d, ns, rf);
        kb_add(rows_d, rows_d + rf, 1, rf);   /* flushes the held third first: it scattered the old rows */
        kb_scatter_rows(d3, rows_d, ns, rf);
        kb_async_end();
        float **ds[4] = {d0, d1, d2, d3};
        for (int t = 0; t < 4; t++)
            for (int r = 0; r < ns; r++)
                for (int j = 0; j < rf; j++) {
                    float v = rows_h[(size_t)r * rf + j];
                    if (t == 3 && r == 0) v = rows_h[j] + rows_h[rf + j];
                    want[(ds[t][r] - pool) + j] = v;
                }
        CHECKF(bits_differ(pool, want, (size_t)16 * rf, &e) == 0, "held scatters: the slots differ");
        kb_free(pool); kb_free(rows_d); free(rows_h); free(want);
    }
    kb_free(qg); kb_free(xg); kb_free(xbg); kb_free(gq);
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 6; i++) kb_free(buf[v][i]);
    use("cpu");
    free(qc); free(qn); free(xc); free(xbc);
    free(x0); free(y0); free(q0); free(k0); free(g0); free(gq0);
    printf("held ops: add + norm and head norm + RoPE fused inside a region = the calls alone (and the CPU's add "
           "and norm bits); K and V scatters paired, held and flushed\n");
}

/* ---- element-wise and row kernels ------------------------------------------------ */

static void test_rmsnorm_swiglu_add(void) {
    const int m = 5;
    static const int ns[3] = {64, 1000, 4096};
    for (int t = 0; t < 3; t++) {
        int n = ns[t];
        size_t total = (size_t)m * n;
        float *x = random_floats(total, 3.0f), *g = random_floats((size_t)n, 1.5f), *y = random_floats(total, 2.0f);
        x[0] = 0.0f;
        float *rc = malloc(total * 4), *rg = malloc(total * 4), *ic = malloc(total * 4), *ig = malloc(total * 4);
        /* swiglu gates across exp's range: tails, overflow, underflow */
        float *gate = random_floats(total, 30.0f);
        gate[1] = 95.0f; gate[2] = -120.0f; gate[3] = 1e-30f; gate[4] = -0.0f;
        float *sc = malloc(total * 4), *sg = malloc(total * 4), *ac = malloc(total * 4), *ag = malloc(total * 4);
        use("cpu");
        kb_rmsnorm(rc, x, g, m, n, 1e-6f);
        memcpy(ic, x, total * 4);
        kb_rmsnorm(ic, ic, g, m, n, 1e-6f);
        kb_swiglu(sc, gate, y, m, n);
        memcpy(ac, x, total * 4);
        kb_add(ac, y, m, n);
        use("cuda");
        kb_rmsnorm(rg, x, g, m, n, 1e-6f);
        memcpy(ig, x, total * 4);
        kb_rmsnorm(ig, ig, g, m, n, 1e-6f);
        memcpy(sg, gate, total * 4);
        kb_swiglu(sg, sg, y, m, n);   /* out aliasing gate, as layer.c calls it */
        memcpy(ag, x, total * 4);
        kb_add(ag, y, m, n);
        double e;
        long d;
        CHECKF((d = bits_differ(rc, rg, total, &e)) == 0, "rmsnorm n %d: %ld differ (max %g)", n, d, e);
        CHECKF((d = bits_differ(ic, ig, total, &e)) == 0, "rmsnorm in place n %d: %ld differ (max %g)", n, d, e);
        CHECKF((d = bits_differ(sc, sg, total, &e)) == 0, "swiglu n %d: %ld differ (max %g)", n, d, e);
        CHECKF((d = bits_differ(ac, ag, total, &e)) == 0, "add n %d: %ld differ (max %g)", n, d, e);
        /* rows alone = rows together */
        use("cuda");
        float *one = malloc((size_t)n * 4);
        kb_rmsnorm(one, x + (size_t)3 * n, g, 1, n, 1e-6f);
        CHECK(bits_differ(one, rg + (size_t)3 * n, (size_t)n, &e) == 0);
        free(one);
        free(x); free(g); free(y); free(rc); free(rg); free(ic); free(ig); free(gate); free(sc); free(sg);
        free(ac); free(ag);
    }
    printf("rmsnorm, swiglu, add: equal the CPU bit for bit\n");
}

static void test_rope(void) {
    static const int hds[3] = {16, 64, 128};
    static const float thetas[2] = {1e4f, 1e6f};
    long same = 0, total_all = 0;
    for (int t = 0; t < 3; t++)
        for (int th = 0; th < 2; th++) {
            const int m = 7, nh = 3, hd = hds[t];
            size_t total = (size_t)m * nh * hd;
            float *x = random_floats(total, 2.0f);
            int pos[7] = {0, 1, 17, 128, 1000, 4095, 32767};
            float *c = malloc(total * 4), *g = malloc(total * 4);
            memcpy(c, x, total * 4);
            memcpy(g, x, total * 4);
            use("cpu");
            kb_rope(c, pos, m, nh, hd, thetas[th]);
            use("cuda");
            kb_rope(g, pos, m, nh, hd, thetas[th]);
            long bad = 0;
            for (int r = 0; r < m; r++)
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < hd; i++) {
                        size_t k = ((size_t)r * nh + h) * hd + i;
                        int half = hd / 2, i0 = i % half;
                        double ab = fabs(x[((size_t)r * nh + h) * hd + i0]) + fabs(x[((size_t)r * nh + h) * hd + i0 + half]);
                        if (!(fabs((double)c[k] - g[k]) <= 2.5e-7 * ab)) bad++;
                        same += !memcmp(&c[k], &g[k], 4);
                        total_all++;
                    }
            CHECKF(bad == 0, "rope hd %d theta %g: %ld elements beyond 2.5e-7*(|a|+|b|)", hd, thetas[th], bad);
            free(x); free(c); free(g);
        }
    printf("rope: within 2.5e-7*(|a|+|b|) of the CPU; %ld of %ld elements bit-identical\n", same, total_all);
}

/* The CUDA backend keeps the last positions' cos/sin table (cuda_ops.cu):
 * one host position array rewritten in place between calls, a call at the
 * same positions with another head count, and another head_dim, inside an
 * async region as a forward makes them — each must rotate as the CPU does
 * (a stale table moves elements by O(|a|+|b|)). */
static void test_rope_table(void) {
    const int m = 5, hd = 64, nh[4] = {4, 2, 2, 4}, hds[4] = {64, 64, 64, 32};
    int pos[5] = {3, 4, 5, 6, 7};
    long bad = 0;
    use("cuda");
    float *g[4];
    float *c = malloc(sizeof(float) * m * 4 * hd), *x[4];
    kb_async_begin();
    for (int t = 0; t < 4; t++) {
        size_t n = (size_t)m * nh[t] * hds[t];
        x[t] = random_floats(n, 2.0f);
        g[t] = kb_alloc(n * sizeof(float));
        memcpy(g[t], x[t], n * sizeof(float));   /* before the region's first call reads it */
    }
    for (int t = 0; t < 4; t++) {
        if (t == 2) for (int r = 0; r < m; r++) pos[r] += 100;   /* the same array, new positions */
        kb_rope(g[t], pos, m, nh[t], hds[t], 1e6f);
    }
    kb_async_end();
    for (int r = 0; r < m; r++) pos[r] -= 100;
    use("cpu");
    for (int t = 0; t < 4; t++) {
        if (t == 2) for (int r = 0; r < m; r++) pos[r] += 100;
        size_t n = (size_t)m * nh[t] * hds[t];
        memcpy(c, x[t], n * sizeof(float));
        kb_rope(c, pos, m, nh[t], hds[t], 1e6f);
        for (size_t k = 0; k < n; k++) {
            const int half = hds[t] / 2, i0 = (int)(k % (size_t)hds[t]) % half;
            const size_t base = k - k % (size_t)hds[t];
            const double ab = fabs(x[t][base + i0]) + fabs(x[t][base + i0 + half]);
            bad += !(fabs((double)c[k] - g[t][k]) <= 2.5e-7 * ab);
        }
        free(x[t]);
        kb_free(g[t]);
    }
    free(c);
    CHECKF(bad == 0, "rope table: %ld elements beyond the bound after the positions or the shape changed", bad);
    printf("rope table: positions rewritten in place, another head count and head_dim in one region: the CPU's "
           "rotation\n");
}

/* ---- memory ------------------------------------------------------------------- */

static void test_memory(void) {
    use("cuda");
    float *p = kb_alloc(1 << 20);
    CHECK(p != NULL);
    int zero = 1;
    for (int i = 0; p && i < (1 << 18); i++) zero &= p[i] == 0.0f;
    CHECKF(zero, "kb_alloc on cuda is not zeroed");
    float h[64], back[64];
    for (int i = 0; i < 64; i++) h[i] = (float)i;
    if (p) {
        kb_copy_to_device(p + 100, h, sizeof h);
        kb_copy_to_host(back, p + 100, sizeof back);
        CHECK(!memcmp(h, back, sizeof h));
        p[5] = 3.0f;   /* managed: the host writes it directly */
        /* rows to scattered slots on the device (the KV writes), from a host
         * source (staged) and from a device one */
        float rows[3 * 70], *dev_rows = kb_alloc(sizeof rows);
        for (int i = 0; i < 3 * 70; i++) rows[i] = (float)(i + 1);
        float *const dst[3] = {p + 5000, p + 1000, p + 3000};
        kb_scatter_rows(dst, rows, 3, 70);
        int ok = 1;
        for (int r = 0; r < 3; r++) ok &= !memcmp(dst[r], rows + r * 70, 70 * sizeof(float)) && dst[r][70] == 0.0f;
        CHECKF(ok, "kb_scatter_rows from host rows wrote the wrong slots");
        if (dev_rows) {
            kb_copy_to_device(dev_rows, rows, sizeof rows);
            float *const dst2[3] = {p + 9000, p + 7000, p + 8000};
            kb_scatter_rows(dst2, dev_rows, 3, 70);
            ok = 1;
            for (int r = 0; r < 3; r++) ok &= !memcmp(dst2[r], rows + r * 70, 70 * sizeof(float));
            CHECKF(ok, "kb_scatter_rows from device rows wrote the wrong slots");
            kb_free(dev_rows);
        }
    }
    kb_weight w = random_weight(KB_BF16, 10, 33);
    float rc[33], rg[33];
    kb_weight wd = w;
    char err[512];
    CHECKF(!kb_weight_upload(&wd, p, err, sizeof err), "%s", err);
    kb_weight_row(rg, &wd, 7);
    const int rws[3] = {7, 2, 9};
    float rcs[3 * 33], rgs[3 * 33];
    kb_weight_rows(rgs, &wd, rws, 3);   /* a batch's embeddings: one launch */
    use("cpu");
    kb_weight_row(rc, &w, 7);
    kb_weight_rows(rcs, &w, rws, 3);
    CHECK(!memcmp(rc, rg, sizeof rc));
    CHECKF(!memcmp(rcs, rgs, sizeof rcs), "kb_weight_rows on cuda differs from the CPU's rows");
    CHECK(kb_weight_upload(&w, p, err, sizeof err) == 0 && w.data != wd.data);   /* cpu: nothing to do */
    kb_weight_release_owner(p);
    kb_free(p);   /* CUDA memory freed after switching back to cpu */
    free((void *)w.data);
    CHECK(!strcmp(kb_device(), "cpu"));
    CHECK(kb_set_device("tpu", err, sizeof err) == -1);
    printf("memory: kb_alloc zeroed, copies, scattered rows, weight upload/row(s)/release, free across a switch\n");
}

/* ---- stream order --------------------------------------------------------------- */

/* The same chain on the CPU (host buffers) and on cuda inside an async
 * region (kb_alloc'd buffers, host arguments from one reused host vector);
 * under tests/cuda_emu's deferred launches a result read, or a staging
 * byte rewritten, before the stream has run fails here. */
static void stream_chain(float *a, float *z, float *q, float *out, float *mid, const float *x,
                         const float *g, const float *big, const kb_weight *w, int m, int n, int n_big) {
    float hv[1024];
    kb_async_begin();
    kb_rmsnorm(a, a, g, m, n, 1e-6f);
    for (int i = 0; i < 600; i++) {   /* 600 × 4 KiB of host arguments: the 1 MiB ring wraps */
        for (int k = 0; k < 1024; k++) hv[k] = x[(i * 37 + k) % (m * n)] * (float)(i % 7);
        kb_add(z, hv, 1, 1024);   /* hv is rewritten as soon as the call returns */
    }
    kb_add(z, big, 1, 1024);                  /* the ring holds bytes when the next call outgrows it */
    kb_add(q, big, n_big / 1024, 1024);       /* one host argument larger than the ring */
    kb_rmsnorm(q, big, g, n_big / n, n, 1e-6f);   /* g fits, then big overflows inside one call */
    kb_copy_to_device(mid, a, (size_t)m * n * sizeof(float));   /* queued device copy */
    kb_add(a, x, m, n);
    kb_wait();
    a[0] = 1.5f;               /* after kb_wait the host may write kb_alloc'd memory */
    kb_matmul(out, a, w, m);   /* a host result: waits */
    kb_async_end();
}

static void test_stream_order(void) {
    const int m = 5, n = 96, n_big = 96 * 4096;   /* n_big floats: 1.5 MiB */
    kb_weight w = random_weight(KB_F32, 40, n);
    float *x = random_floats((size_t)m * n, 1.0f), *g = random_floats(n, 1.0f);
    float *big = random_floats((size_t)n_big, 1.0f);
    float *ac = malloc(sizeof(float) * m * n), *zc = calloc(1024, sizeof(float));
    float *qc = calloc((size_t)n_big, sizeof(float)), *midc = malloc(sizeof(float) * m * n);
    float *outc = malloc(sizeof(float) * m * 40), *outg = malloc(sizeof(float) * m * 40);
    memcpy(ac, x, sizeof(float) * m * n);
    use("cpu");
    stream_chain(ac, zc, qc, outc, midc, x, g, big, &w, m, n, n_big);
    use("cuda");
    kb_weight wd = w;
    char err[512];
    CHECKF(!kb_weight_upload(&wd, x, err, sizeof err), "%s", err);
    float *a = kb_alloc(sizeof(float) * m * n), *z = kb_alloc(1024 * sizeof(float));
    float *q = kb_alloc(sizeof(float) * n_big), *mid = kb_alloc(sizeof(float) * m * n);
    CHECK(a && z && q && mid);
    if (a && z && q && mid) {
        kb_copy_to_device(a, x, sizeof(float) * m * n);
        stream_chain(a, z, q, outg, mid, x, g, big, &wd, m, n, n_big);
        double mx;
        CHECKF(!bits_differ(a, ac, (size_t)m * n, &mx), "async chain: the normed rows differ (max %g)", mx);
        CHECKF(!bits_differ(mid, midc, (size_t)m * n, &mx), "async chain: the queued device copy differs (max %g)", mx);
        CHECKF(!bits_differ(z, zc, 1024, &mx), "async chain: 601 staged adds differ (max %g)", mx);
        CHECKF(!bits_differ(q, qc, (size_t)n_big, &mx), "async chain: the staging overflow differs (max %g)", mx);
        /* the matmul's order is the GPU's own (not the CPU's bits): the
         * queued one against the same matmul on cuda outside the region,
         * from the CPU chain's rows (a's bits, checked above) */
        float *outr = malloc(sizeof(float) * m * 40);
        kb_matmul(outr, ac, &wd, m);
        CHECKF(!bits_differ(outg, outr, (size_t)m * 40, &mx), "async chain: the host logits differ (max %g)", mx);
        free(outr);
    }
    kb_free(a); kb_free(z); kb_free(q); kb_free(mid);
    kb_weight_release(&wd);
    use("cpu");
    free((void *)w.data);
    free(x); free(g); free(big); free(ac); free(zc); free(qc); free(midc); free(outc); free(outg);
    printf("stream order: a queued chain (ring wrapped, overflowed, regrown), a device copy, kb_wait: the CPU's bits "
           "(the matmul: its own, unqueued)\n");
}

/* ---- the engine on the fixture ---------------------------------------------------------- */

/* An engine on the fixture dir (repository-relative) on dev; on cuda, the
 * experts in mapped host memory when experts_on_host (MoE fixtures). */
int make_engine_at(gen_engine **e, const char *dev, const char *dir, int experts_on_host) {
    use(dev);
    char err[1024];
    if (!strcmp(dev, "cuda") && kb_set_experts_on_host(experts_on_host, err, sizeof err)) {
        CHECKF(0, "kb_set_experts_on_host: %s", err);
        return -1;
    }
    gen_engine_opts eo = {.model_dir = tu_path(dir), .max_seqs = 8, .max_batch_rows = 320, .max_seq_len = 512};
    int rc = gen_engine_create(e, &eo, err, sizeof err);
    if (!strcmp(dev, "cuda")) kb_set_experts_on_host(0, err, sizeof err);
    if (rc) CHECKF(0, "%s engine on %s: %s", dev, dir, err);
    return rc;
}

static int make_engine(gen_engine **e, const char *dev) { return make_engine_at(e, dev, "tests/fixtures/qwen3-tied", 0); }

/* logits[n, V] of a fresh sequence's n-token prefill */
int prefill_logits(gen_engine *e, const int *toks, int n, float *logits) {
    char err[1024];
    int seq = kv_seq_new(e->kv), *rows = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) rows[i] = i;
    fwd_span sp = {.seq = seq, .n = n, .tokens = toks};
    fwd_batch b = {.spans = &sp, .n_spans = 1};
    fwd_out o = {.logit_rows = rows, .n_logit_rows = n, .logits = logits};
    int rc = fwd_run(e->fwd, e->kv, &b, &o, err, sizeof err);
    CHECKF(!rc, "fwd_run: %s", err);
    kv_seq_free(e->kv, seq);
    free(rows);
    return rc;
}

/* Rows of two [n, V] logit arrays whose argmax differs; *maxd the largest
 * |a − b| (NaN counts as largest). */
static int logits_apart(const float *lc, const float *lg, int n, int V, double *maxd) {
    int argmax_bad = 0;
    *maxd = 0;
    for (int r = 0; r < n; r++) {
        const float *a = lc + (size_t)r * V, *b = lg + (size_t)r * V;
        int ia = 0, ib = 0;
        for (int j = 0; j < V; j++) {
            if (a[j] > a[ia]) ia = j;
            if (b[j] > b[ib]) ib = j;
            double d = fabs((double)a[j] - b[j]);
            if (d != d || d > *maxd) *maxd = d;
        }
        argmax_bad += ia != ib;
    }
    return argmax_bad;
}

long prefill_vs_cpu(gen_engine *ec, gen_engine *eg, const int *toks, int n, const char *label, float *lg) {
    const int V = ec->m->cfg.vocab_size;
    float *lc = malloc(sizeof(float) * (size_t)n * V);
    use("cpu");
    int rc = prefill_logits(ec, toks, n, lc);
    use("cuda");
    rc |= prefill_logits(eg, toks, n, lg);
    long nd = -1;
    if (!rc) {
        double maxd, e;
        const int argmax_bad = logits_apart(lc, lg, n, V, &maxd);
        nd = bits_differ(lc, lg, (size_t)n * V, &e);
        CHECKF(argmax_bad == 0, "%s: argmax differs from the CPU at %d of %d rows", label, argmax_bad, n);
        CHECKF(maxd <= 1e-4, "%s: max |logit difference| %g > 1e-4", label, maxd);
        printf("%s logits (%d-token prefill): argmax equal at every row, max |d| %g, %ld of %ld bit-different\n",
               label, n, maxd, nd, (long)n * V);
    }
    free(lc);
    return nd;
}

/* With bit-identical logits the drafters see the same inputs on both
 * devices, so they must draft, and get accepted, exactly the same: a
 * drafter reading a stale buffer on the device would still be lossless
 * (verification catches it) but would draft differently. */
void same_drafts(const char *label, const spec_counters *kc, const spec_counters *kg, int n) {
    int same = 1;
    for (int i = 0; i < n; i++)
        same &= kc[i].drafts == kg[i].drafts && kc[i].drafted_tokens == kg[i].drafted_tokens &&
                kc[i].accepted_tokens == kg[i].accepted_tokens;
    CHECKF(same, "%s: the CUDA drafter drafted or was accepted differently from the CPU's", label);
    if (same) printf("%s: every depth drafted and accepted exactly as on the CPU\n", label);
}

/* One step of two sequences side by side (1 row of a, 3 rows of b), every
 * row's logits into lg[4, V]. */
static int two_seq_step(gen_engine *e, int a, int b, const int *ta, const int *tb, float *lg) {
    char err[512];
    static const int rows[4] = {0, 1, 2, 3};
    fwd_span sp[2] = {{.seq = a, .n = 1, .tokens = ta}, {.seq = b, .n = 3, .tokens = tb}};
    fwd_batch bt = {.spans = sp, .n_spans = 2};
    fwd_out o = {.logit_rows = rows, .n_logit_rows = 4, .logits = lg};
    int rc = fwd_run(e->fwd, e->kv, &bt, &o, err, sizeof err);
    CHECKF(!rc, "fwd_run: %s", err);
    return rc;
}

/* A forward the host does not rebuild (backend.h kb_graph_begin): under
 * CUDA with graphs, forward.c keeps a step's indices in a step buffer and
 * replays the forward recorded under the same key. 24 steps of two
 * sequences (1 and 3 rows, crossing KV pages) against the CPU's: each
 * step's logits within the fixture's bound and argmax equal (a replay that
 * read a stale position, slot, page list or n_ctx would not be); after the
 * first step every step a replay, none instantiated; and a step replayed
 * gives the bits of the same step recorded (the key's step undone with
 * kv_truncate and run again). */
static void test_replay(gen_engine *ec, gen_engine *eg, int V) {
    const char *why = NULL;
    const int graphs = kb_cuda_graphs(&why) == 1;
    float *lc = malloc(sizeof(float) * 4 * (size_t)V), *lg = malloc(sizeof(float) * 4 * (size_t)V);
    float *l0 = malloc(sizeof(float) * 4 * (size_t)V);
    int pa[20], pb[20], ta[24], tb[24 * 3];
    for (int i = 0; i < 20; i++) { pa[i] = (i * 37 + 5) % V; pb[i] = (i * 53 + 7) % V; }
    for (int i = 0; i < 24; i++) ta[i] = (i * 71 + 3) % V;
    for (int i = 0; i < 72; i++) tb[i] = (i * 29 + 1) % V;
    gen_engine *es[2] = {ec, eg};
    int seqs[2][2], rc = 0;
    char err[512];
    for (int d = 0; d < 2 && !rc; d++) {
        use(d ? "cuda" : "cpu");
        seqs[d][0] = kv_seq_new(es[d]->kv);
        seqs[d][1] = kv_seq_new(es[d]->kv);
        fwd_span sp[2] = {{.seq = seqs[d][0], .n = 20, .tokens = pa}, {.seq = seqs[d][1], .n = 20, .tokens = pb}};
        fwd_batch bt = {.spans = sp, .n_spans = 2};
        rc = fwd_run(es[d]->fwd, es[d]->kv, &bt, NULL, err, sizeof err);
        CHECKF(!rc, "fwd_run: %s", err);
    }
    double maxd = 0;
    int bad_argmax = 0, replays_ok = 1, same_bits = 1;
    kb_device_counts c0, c1;
    for (int step = 0; step < 24 && !rc; step++) {
        use("cpu");
        rc |= two_seq_step(ec, seqs[0][0], seqs[0][1], ta + step, tb + 3 * step, lc);
        use("cuda");
        kb_device_counts_now(&c0);
        rc |= two_seq_step(eg, seqs[1][0], seqs[1][1], ta + step, tb + 3 * step, lg);
        kb_device_counts_now(&c1);
        if (rc) break;
        if (graphs && step > 0)
            replays_ok &= c1.graph_replays - c0.graph_replays == 1 && c1.graph_instantiations == c0.graph_instantiations;
        double md;
        bad_argmax += logits_apart(lc, lg, 4, V, &md);
        if (md != md || md > maxd) maxd = md;
        if (step == 5) {   /* the same step again: undone, then replayed */
            memcpy(l0, lg, sizeof(float) * 4 * (size_t)V);
            kv_truncate(eg->kv, seqs[1][0], kv_len(eg->kv, seqs[1][0]) - 1);
            kv_truncate(eg->kv, seqs[1][1], kv_len(eg->kv, seqs[1][1]) - 3);
            rc |= two_seq_step(eg, seqs[1][0], seqs[1][1], ta + step, tb + 3 * step, lg);
            same_bits = !rc && !memcmp(l0, lg, sizeof(float) * 4 * (size_t)V);
        }
    }
    CHECKF(bad_argmax == 0, "replayed steps: argmax differs from the CPU at %d rows", bad_argmax);
    CHECKF(maxd <= 1e-4, "replayed steps: max |logit difference| from the CPU %g > 1e-4", maxd);
    CHECKF(same_bits, "a replayed step's logits differ from the same step's first run");
    if (graphs) CHECKF(replays_ok, "steps after the first were not each one replay without an instantiation");
    if (!rc)
        printf("replay: 24 steps of two sequences (1 + 3 rows) %s, the CPU's argmax, max |d| %g; a step replayed = "
               "its first run bit for bit\n", graphs ? "replayed from one recording" : "(no graphs: issued)", maxd);
    for (int d = 0; d < 2; d++) {
        use(d ? "cuda" : "cpu");
        kv_seq_free(es[d]->kv, seqs[d][0]);
        kv_seq_free(es[d]->kv, seqs[d][1]);
    }
    free(lc); free(lg); free(l0);
}

/* Greedy generation of the synthetic prompts on the CPU and on CUDA: how
 * many of the LL_NP prompts give the same tokens, -1 when a run failed. */
int greedy_same(gen_engine *ec, gen_engine *eg, int (*prompts)[LL_MAXP], const int *lens) {
    const int *pp[LL_NP];
    for (int i = 0; i < LL_NP; i++) pp[i] = prompts[i];
    gen_params gp = {.max_tokens = LL_GEN, .ignore_eos = 1};
    gen_result rcpu[LL_NP], rgpu[LL_NP];
    char err[1024];
    use("cpu");
    int ok = !gen_run(ec, pp, lens, LL_NP, &gp, NULL, NULL, rcpu, NULL, err, sizeof err);
    CHECKF(ok, "cpu gen_run: %s", err);
    use("cuda");
    if (!ok) return -1;
    ok = !gen_run(eg, pp, lens, LL_NP, &gp, NULL, NULL, rgpu, NULL, err, sizeof err);
    CHECKF(ok, "cuda gen_run: %s", err);
    int same = -1;
    if (ok) {
        same = 0;
        for (int i = 0; i < LL_NP; i++)
            same += rcpu[i].n_tokens == rgpu[i].n_tokens &&
                    !memcmp(rcpu[i].tokens, rgpu[i].tokens, sizeof(int) * (size_t)rcpu[i].n_tokens);
        gen_results_free(rgpu, LL_NP);
    }
    gen_results_free(rcpu, LL_NP);
    return same;
}

static void test_engine(void) {
    gen_engine *ec = NULL, *eg = NULL;
    if (make_engine(&ec, "cpu") || make_engine(&eg, "cuda")) { gen_engine_free(ec); use("cuda"); gen_engine_free(eg); return; }
    const int V = ec->m->cfg.vocab_size, n = 300;
    int toks[300];
    for (int i = 0; i < n; i++) toks[i] = (int)((i * 2654435761u + 11u) % (unsigned)V);
    float *lg = malloc(sizeof(float) * (size_t)n * V);
    const long nd = prefill_vs_cpu(ec, eg, toks, n, "fixture", lg);
    const int rc = nd < 0, identical = nd == 0;
    /* stream order: a decode step and a 4-row verify step each wait for the
     * GPU once, for their logits (kb_device_waits counts every wait); with
     * CUDA graphs (the default) each is one graph launch, and the steps
     * after the first of a shape update the cached graph in place (new
     * positions, a longer context) instead of instantiating another */
    if (!rc) {
        const char *why = NULL;
        int graphs = kb_cuda_graphs(&why);
        CHECKF(graphs >= 0, "CUDA graphs unavailable: %s", why ? why : "?");
        char werr[512];
        int seq = kv_seq_new(eg->kv), rows[4] = {0, 1, 2, 3};
        fwd_span sp = {.seq = seq, .n = 20, .tokens = toks};
        fwd_batch b = {.spans = &sp, .n_spans = 1};
        CHECKF(!fwd_run(eg->fwd, eg->kv, &b, NULL, werr, sizeof werr), "fwd_run: %s", werr);
        long nodes = 0;
        for (int r = 1; r <= 4; r += 3) {
            for (int step = 0; step < 3; step++) {
                sp = (fwd_span){.seq = seq, .n = r, .tokens = toks + 20 + step * r};
                fwd_out o = {.logit_rows = rows, .n_logit_rows = r, .logits = lg};
                kb_device_counts c0, c1;
                kb_device_counts_now(&c0);
                CHECKF(!fwd_run(eg->fwd, eg->kv, &b, &o, werr, sizeof werr), "fwd_run: %s", werr);
                kb_device_counts_now(&c1);
                long dw = c1.waits - c0.waits, gl = c1.graph_launches - c0.graph_launches;
                long gi = c1.graph_instantiations - c0.graph_instantiations;
                CHECKF(dw == 1, "a %d-row forward waited for the GPU %ld times, not once", r, dw);
                CHECKF(gl == graphs, "a %d-row forward made %ld graph launches, not %d", r, gl, graphs);
                CHECKF(!step || gi == 0, "a %d-row forward at step %d instantiated %ld graphs (the cached one "
                       "should have taken the update)", r, step, gi);
                nodes = c1.graph_nodes - c0.graph_nodes;
            }
            kv_truncate(eg->kv, seq, 20);
        }
        kv_seq_free(eg->kv, seq);
        if (graphs) {
            CHECKF(nodes > 20, "a 4-row forward's graph holds %ld nodes", nodes);
            printf("stream order: a 1-row and a 4-row forward each wait for the GPU once, as one CUDA graph "
                   "(%ld nodes at 4 rows), updated in place at the next steps\n", nodes);
        } else {
            printf("stream order: a 1-row and a 4-row forward each wait for the GPU once (no CUDA graphs)\n");
        }
    }
    if (!rc) test_replay(ec, eg, V);
    /* greedy generation: the CPU's tokens (equal logits, equal tokens) */
    static int prompts[LL_NP][LL_MAXP];
    int lens[LL_NP];
    ll_synthetic_prompts(V, prompts, lens);
    const int same = greedy_same(ec, eg, prompts, lens);
    if (same >= 0) {
        /* bit-identical logits make this a must; with RoPE's ulp it is near-certain, but a near tie may flip */
        if (identical) CHECKF(same == LL_NP, "greedy output on CUDA differs from the CPU's for %d of %d prompts",
                              LL_NP - same, LL_NP);
        printf("greedy generation: %d of %d prompts give the CPU's tokens\n", same, LL_NP);
    }
    /* speculation on vs off, on CUDA */
    static const int depths[3] = {1, 3, 5}, batches[2] = {1, 3};
    ll_config cfgs[3] = {{"cuda ngram", {.name = "ngram"}, 0, NULL},
                         {"cuda draft(self)", {.name = "draft", .draft_model = tu_path("tests/fixtures/qwen3-tied"),
                                               .max_seqs = 8}, 1, NULL},
                         {"cuda dspark", {.name = "dspark", .draft_model = tu_path("tests/fixtures/dspark-tiny"),
                                          .max_seqs = 8, .quiet = 1}, 0, NULL}};
    for (int c = 0; c < 3; c++) {
        spec_counters kc[3], kg[3];
        char label[64];
        snprintf(label, sizeof label, "cpu%s", cfgs[c].label + 4);
        ll_config cc = cfgs[c];
        cc.label = label;
        use("cpu");
        ll_check_counts(ec, &cc, prompts, lens, depths, 3, batches, 2, kc);
        use("cuda");
        long tokens = ll_check_counts(eg, &cfgs[c], prompts, lens, depths, 3, batches, 2, kg);
        printf("%s: %ld tokens compared, spec on = spec off\n", cfgs[c].label, tokens);
        CHECKF(tokens >= 1000, "%s: only %ld tokens compared", cfgs[c].label, tokens);
        if (identical) same_drafts(cfgs[c].label, kc, kg, 3);
    }
    /* MTP: its module's weights come from the target's checkpoint, uploaded
     * through model_bind_matrix like the target's own */
    gen_engine *em = NULL, *emc = NULL;
    char merr[1024];
    gen_engine_opts mo = {.model_dir = tu_path("tests/fixtures/qwen3-tied-mtp"), .max_seqs = 8, .max_batch_rows = 320,
                          .max_seq_len = 512};
    use("cpu");
    int mrc = gen_engine_create(&emc, &mo, merr, sizeof merr);
    use("cuda");
    if (mrc || gen_engine_create(&em, &mo, merr, sizeof merr)) {
        CHECKF(0, "engine on qwen3-tied-mtp: %s", merr);
    } else {
        ll_config mtp = {"cuda mtp", {.name = "mtp", .max_seqs = 8, .quiet = 1}, 0, NULL}, mtpc = mtp;
        mtpc.label = "cpu mtp";
        spec_counters kc[3], kg[3];
        use("cpu");
        ll_check_counts(emc, &mtpc, prompts, lens, depths, 3, batches, 2, kc);
        use("cuda");
        long tokens = ll_check_counts(em, &mtp, prompts, lens, depths, 3, batches, 2, kg);
        printf("%s: %ld tokens compared, spec on = spec off\n", mtp.label, tokens);
        CHECKF(tokens >= 1000, "%s: only %ld tokens compared", mtp.label, tokens);
        if (identical) same_drafts(mtp.label, kc, kg, 3);
    }
    gen_engine_free(em);
    use("cpu");
    gen_engine_free(emc);
    use("cuda");
    free(lg);
    use("cpu");
    gen_engine_free(ec);
    use("cuda");
    gen_engine_free(eg);
}

int main(int argc, char **argv) {
    char err[512];
    if (kb_set_device("cuda", err, sizeof err)) return tu_skip("test_cuda", err);
    printf("CUDA device found; matmul mode %s\n", kb_cuda_matmul());
    kb_set_cuda_matmul("invariant");   /* whatever SPECBED_CUDA_MATMUL said */
    /* the CPU reference: the AVX2 order (scalar gives the same bits) */
    if (kb_set_cpu_path(kb_cpu_path_supported("avx2") ? "avx2" : "scalar")) CHECK(0);
    printf("CPU reference path: %s\n", kb_cpu_path());
    if (argc > 1 && !strcmp(argv[1], "moe")) {   /* the mixture-of-experts section alone */
        test_moe_cuda();
        use("cpu");
        return tu_done("test_cuda");
    }
    if (argc > 1 && !strcmp(argv[1], "attention")) {   /* the attention sections alone */
        test_attention();
        test_attention_long();
        test_attention_prefill();
        use("cpu");
        return tu_done("test_cuda");
    }
    if (argc > 1 && !strcmp(argv[1], "tensor")) {   /* the tensor mode's section alone */
        test_tensor();
        use("cpu");
        return tu_done("test_cuda");
    }
    test_memory();
    test_stream_order();   /* first: the staging ring is still at its first size */
    test_matmul();
    test_batch_invariance();
    test_cublas();
    test_rmsnorm_swiglu_add();
    test_matmul_held();
    test_held_ops();
    test_rope();
    test_rope_table();
    test_attention();
    test_attention_long();
    test_attention_prefill();
    test_engine();
    test_moe_cuda();
    test_tensor();
    use("cpu");
    return tu_done("test_cuda");
}
