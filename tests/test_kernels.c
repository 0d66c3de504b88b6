/* label: unit */
/* test_kernels.c — the CPU backend against naive double-precision
 * references, and the batch invariance DESIGN §4 depends on: a row's result
 * must be the same bits whatever else is in the call and however many
 * threads run it.
 *
 * Every check runs once per SIMD path this CPU supports (scalar always,
 * then avx2, avx512 and avx512bf16 where present), each forced with
 * kb_set_cpu_path. avx512bf16 rounds x to bf16 for bf16 weights (products
 * then exact, accumulated in f32), so its bound adds u_bf16·Σ|x·w| with
 * u_bf16 = 2⁻⁸ (bf16 keeps 8 significant bits; round to nearest).
 * Invariance is a property of one path: the AVX-512 matmul accumulates in
 * 16 lanes, AVX2 and scalar in 8, so avx512 results may differ from the
 * others in the last bits and are never compared with them; scalar and
 * avx2 share one order and must agree bit for bit, and attention has one
 * order on every path. Each path's matmul is also checked against a plain-C
 * emulation of the reduction order its file documents.
 *
 * Tolerances are error bounds, not guesses. With u = 2⁻²⁴ (f32 unit
 * roundoff), a float dot product of n terms, in any summation order, is
 * within γ_n·Σ|x_k·w_k| of the exact value, γ_n = n·u/(1 − n·u) (Higham,
 * Accuracy and Stability of Numerical Algorithms, §3.1). Element-wise
 * kernels are a handful of correctly rounded ops plus one libm call
 * (≤ 1 ulp), so a few ulp relative to the result. */
#include "backend.h"
#include "test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define U (1.0 / 16777216.0)   /* 2^-24 */
#define U_BF16 (1.0 / 256.0)   /* 2^-8 */

/* The current path rounds x to bf16 for weights of dtype dt. */
static int rounds_x(int dt) { return dt == KB_BF16 && !strcmp(kb_cpu_path(), "avx512bf16"); }

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }
static double gamma_n(int n) { return n * U / (1.0 - n * U); }

/* ---- weights in three dtypes with exactly known values -------------------- */

/* bf16: the top half of an f32, so the value is that f32 with its low 16 bits cleared. */
static uint16_t to_bf16(float f) { uint32_t b; memcpy(&b, &f, 4); return (uint16_t)(b >> 16); }
static double bf16_value(uint16_t h) {
    uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f;
}
/* f16 normals from their fields, independent of the backend's bit tricks. */
static uint16_t rand_f16(void) {
    uint16_t s = urand() < 0.5 ? 0x8000 : 0, e = (uint16_t)(10 + (int)(urand() * 8)); /* |v| in [2^-5, 8) */
    uint16_t man = (uint16_t)(urand() * 1024);
    return (uint16_t)(s | (e << 10) | man);
}
static double f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, man = h & 1023;
    double v = e ? ldexp(1.0 + man / 1024.0, e - 15) : ldexp(man / 1024.0, -14);
    return s ? -v : v;
}

typedef struct { kb_weight w; void *buf; double *val; /* [rows, cols] exact values */ } test_weight;

static test_weight make_weight(kb_dtype dt, int rows, int cols) {
    test_weight t;
    size_t n = (size_t)rows * cols;
    t.buf = malloc(n * kb_dtype_size(dt));
    t.val = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        if (dt == KB_F32) { float f = frand(-1, 1); ((float *)t.buf)[i] = f; t.val[i] = f; }
        else if (dt == KB_BF16) { uint16_t h = to_bf16(frand(-1, 1)); ((uint16_t *)t.buf)[i] = h; t.val[i] = bf16_value(h); }
        else { uint16_t h = rand_f16(); ((uint16_t *)t.buf)[i] = h; t.val[i] = f16_value(h); }
    }
    t.w = (kb_weight){ .dt = dt, .data = t.buf, .rows = rows, .cols = cols };
    return t;
}
static void free_weight(test_weight *t) { free(t->buf); free(t->val); }

static const char *dt_name(kb_dtype dt) { return dt == KB_F32 ? "f32" : dt == KB_BF16 ? "bf16" : "f16"; }

/* ---- conversions ---------------------------------------------------------- */

static void test_conversions(void) {
    CHECK(kb_dtype_size(KB_F32) == 4 && kb_dtype_size(KB_BF16) == 2 && kb_dtype_size(KB_F16) == 2);
    const uint16_t h[] = { 0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0400, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x3555 };
    const double want[] = { 0.0, -0.0, 1.0, -2.0, 65504.0, ldexp(1, -14), ldexp(1, -24),
                            1023 * ldexp(1, -24), INFINITY, -INFINITY, f16_value(0x3555) };
    float got[11];
    kb_to_f32(got, h, KB_F16, 11);
    for (int i = 0; i < 11; i++) CHECKF(got[i] == want[i], "f16 0x%04x -> %g, want %g", h[i], got[i], want[i]);
    CHECK(signbit(got[1]));
    uint16_t nan16 = 0x7e00;
    kb_to_f32(got, &nan16, KB_F16, 1);
    CHECK(isnan(got[0]));

    const uint16_t b[] = { 0x3f80, 0xc040, 0x0001, 0x7f80 };
    const double bw[] = { 1.0, -3.0, ldexp(1, -133), INFINITY };
    kb_to_f32(got, b, KB_BF16, 4);
    for (int i = 0; i < 4; i++) CHECKF(got[i] == bw[i], "bf16 0x%04x -> %g, want %g", b[i], got[i], bw[i]);

    /* embedding lookup: row r as f32 */
    for (int dt = 0; dt < 3; dt++) {
        test_weight t = make_weight((kb_dtype)dt, 5, 13);
        float row[13];
        kb_weight_row(row, &t.w, 3);
        for (int k = 0; k < 13; k++) CHECKF(row[k] == t.val[3 * 13 + k], "%s weight_row[3][%d]", dt_name(dt), k);
        free_weight(&t);
    }
    /* memory */
    unsigned char *p = kb_alloc(1000);
    CHECK(p != NULL);
    int zero = 1;
    for (int i = 0; i < 1000; i++) zero &= p[i] == 0;
    CHECK(zero);
    unsigned char src[16] = "0123456789abcde", back[16];
    kb_copy_to_device(p, src, 16);
    kb_copy_to_host(back, p, 16);
    CHECK(memcmp(src, back, 16) == 0);
    kb_free(p);
    /* rows to scattered slots (the KV writes): each row lands whole at its
     * own destination, in any order, and nothing else is written */
    float *pool = kb_alloc(64 * sizeof(float)), rows[3 * 5];
    CHECK(pool != NULL);
    if (pool) {
        for (int i = 0; i < 15; i++) rows[i] = (float)(i + 1);
        float *const dst[3] = {pool + 40, pool + 3, pool + 20};
        kb_scatter_rows(dst, rows, 3, 5);
        int ok = 1;
        for (int i = 0; i < 64; i++) {
            int r = i >= 40 && i < 45 ? 0 : i >= 3 && i < 8 ? 1 : i >= 20 && i < 25 ? 2 : -1;
            float want = r < 0 ? 0.0f : rows[r * 5 + (i - (int)(dst[r] - pool))];
            ok &= pool[i] == want;
        }
        CHECKF(ok, "kb_scatter_rows wrote the wrong slots");
        kb_free(pool);
    }
}

/* ---- matmul --------------------------------------------------------------- */

static void test_matmul_accuracy(void) {
    const int cols_list[] = { 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 77, 100, 129, 300 };
    const int rows_list[] = { 1, 5, 16, 17, 25, 33 };
    const int m_list[] = { 1, 3, 4, 5, 7, 9, 13 };
    double worst = 0;
    for (int dt = 0; dt < 3; dt++)
        for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++)
            for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
                for (size_t mi = 0; mi < sizeof m_list / sizeof *m_list; mi++) {
                    int cols = cols_list[ci], rows = rows_list[ri], m = m_list[mi];
                    test_weight t = make_weight((kb_dtype)dt, rows, cols);
                    float *x = malloc((size_t)m * cols * sizeof(float));
                    float *y = malloc((size_t)m * rows * sizeof(float));
                    for (int i = 0; i < m * cols; i++) x[i] = frand(-2, 2);
                    kb_matmul(y, x, &t.w, m);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < rows; j++) {
                            double ref = 0, mag = 0;
                            for (int k = 0; k < cols; k++) {
                                double p = (double)x[i * cols + k] * t.val[(size_t)j * cols + k];
                                ref += p; mag += fabs(p);
                            }
                            double g = gamma_n(cols), err = fabs(y[i * rows + j] - ref);
                            double tol = rounds_x(dt) ? (U_BF16 + g * (1 + U_BF16)) * mag : g * mag;
                            if (mag > 0 && err / mag > worst) worst = err / mag;
                            CHECKF(err <= tol, "%s matmul m=%d rows=%d cols=%d y[%d][%d]=%.9g ref=%.9g (tol %.3g)",
                                   dt_name(dt), m, rows, cols, i, j, y[i * rows + j], ref, tol);
                        }
                    free(x); free(y); free_weight(&t);
                }
    printf("matmul [%s]: worst |err|/sum|x*w| = %.3g (bound gamma_n, n<=300: %.3g%s)\n", kb_cpu_path(), worst,
           gamma_n(300), rounds_x(KB_BF16) ? ", bf16 weights: + 2^-8" : "");
}

/* Row results must be bit-identical for any m, any neighbours, any thread
 * count (1, 2, 3), any tile a row lands in. The shapes are big enough that
 * the pool splits them (over weight rows, and over x rows for 600×77). */
static void test_matmul_invariance(void) {
    const int shapes[][2] = { { 37, 77 }, { 300, 256 }, { 64, 45 }, { 600, 77 }, { 97, 33 } }; /* rows, cols */
    const int M = 17;
    for (int dt = 0; dt < 3; dt++)
        for (int s = 0; s < 5; s++) {
            int rows = shapes[s][0], cols = shapes[s][1];
            test_weight t = make_weight((kb_dtype)dt, rows, cols);
            float *x = malloc((size_t)(M + 8) * cols * sizeof(float));
            float *yfull = malloc((size_t)M * rows * sizeof(float));
            float *y = malloc((size_t)(M + 8) * rows * sizeof(float));
            float *xb = malloc((size_t)(M + 8) * cols * sizeof(float));
            for (int i = 0; i < (M + 8) * cols; i++) x[i] = frand(-2, 2);
            kb_threads_init(2);
            kb_matmul(yfull, x, &t.w, M);
            int bad = 0;
            for (int threads = 1; threads <= 3; threads++) {
                CHECK(kb_threads_init(threads) == threads && kb_threads() == threads);
                /* prefixes m = 1..17: every tile shape and remainder */
                for (int m = 1; m <= M; m++) {
                    kb_matmul(y, x, &t.w, m);
                    bad += memcmp(y, yfull, (size_t)m * rows * sizeof(float)) != 0;
                }
                /* each row alone, and at each slot of a batch of random neighbours */
                for (int i = 0; i < M; i++) {
                    kb_matmul(y, x + (size_t)i * cols, &t.w, 1);
                    bad += memcmp(y, yfull + (size_t)i * rows, rows * sizeof(float)) != 0;
                    int m = 1 + (int)(urand() * (M + 7)), at = (int)(urand() * m);
                    for (int k = 0; k < m * cols; k++) xb[k] = frand(-3, 3);
                    memcpy(xb + (size_t)at * cols, x + (size_t)i * cols, cols * sizeof(float));
                    kb_matmul(y, xb, &t.w, m);
                    bad += memcmp(y + (size_t)at * rows, yfull + (size_t)i * rows, rows * sizeof(float)) != 0;
                }
            }
            CHECKF(bad == 0, "%s matmul [%s] rows=%d cols=%d: %d row results changed with m/neighbours/threads",
                   dt_name(dt), kb_cpu_path(), rows, cols, bad);
            free(x); free(y); free(xb); free(yfull); free_weight(&t);
        }
    kb_threads_init(2);
}

/* kb_matmul_n: the bits of separate kb_matmul calls, for matrices of
 * different heights and dtypes sharing one x, at 1–3 threads, with more
 * matrices than one group holds and an empty one among them. */
static void test_matmul_group(void) {
    enum { N = KB_MATMUL_N_MAX + 2, COLS = 96 };
    const int rows[N] = { 300, 37, 0, 128, 600, 45 };
    test_weight t[N];
    const kb_weight *ws[N];
    float *want[N], *got[N];
    for (int i = 0; i < N; i++) {
        t[i] = make_weight((kb_dtype)(i % 3), rows[i] ? rows[i] : 1, COLS);
        t[i].w.rows = rows[i];
        ws[i] = &t[i].w;
        want[i] = malloc((size_t)17 * (rows[i] + 1) * sizeof(float));
        got[i] = malloc((size_t)17 * (rows[i] + 1) * sizeof(float));
    }
    float *x = malloc((size_t)17 * COLS * sizeof(float));
    for (int i = 0; i < 17 * COLS; i++) x[i] = frand(-2, 2);
    int bad = 0;
    for (int threads = 1; threads <= 3; threads++) {
        kb_threads_init(threads);
        for (int m = 1; m <= 17; m += 8) {
            for (int i = 0; i < N; i++) kb_matmul(want[i], x, ws[i], m);
            kb_matmul_n(N, got, ws, x, m);
            for (int i = 0; i < N; i++) bad += memcmp(got[i], want[i], (size_t)m * rows[i] * sizeof(float)) != 0;
        }
    }
    CHECKF(bad == 0, "kb_matmul_n [%s]: %d results differ from separate kb_matmul calls", kb_cpu_path(), bad);
    for (int i = 0; i < N; i++) {
        t[i].w.rows = rows[i] ? rows[i] : 1;
        free_weight(&t[i]);
        free(want[i]);
        free(got[i]);
    }
    free(x);
    kb_threads_init(2);
}

/* The reduction order each path documents, in plain C (fmaf is correctly
 * rounded, like vfmadd): lanes = 8 is cpu_matmul.c's scalar / AVX2 order,
 * lanes = 16 the AVX-512 one. */
static float contract_dot(const float *x, const double *w, int cols, int lanes) {
    float a[16] = { 0 };
    if (lanes == 8) {
        int k = 0;
        for (; k + 8 <= cols; k += 8)
            for (int l = 0; l < 8; l++) a[l] = fmaf(x[k + l], (float)w[k + l], a[l]);
        float r = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
        for (; k < cols; k++) r = fmaf(x[k], (float)w[k], r);
        return r;
    }
    for (int k = 0; k < cols; k++) a[k % 16] = fmaf(x[k], (float)w[k], a[k % 16]);
    float b[8], c[4], d[2];
    for (int l = 0; l < 8; l++) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) c[l] = b[l] + b[l + 4];
    for (int l = 0; l < 2; l++) d[l] = c[l] + c[l + 2];
    return d[0] + d[1];
}

static float bf16_round(float f) {   /* round to nearest even; finite inputs */
    uint32_t b;
    memcpy(&b, &f, 4);
    b = (b + 0x7fffu + (b >> 16 & 1u)) & 0xffff0000u;
    memcpy(&f, &b, 4);
    return f;
}

/* avx512bf16's order for bf16 weights (cpu_matmul_avx512.c): x rounded to
 * bf16; lane l takes the pairs (32t + 2l, 32t + 2l + 1), t increasing; the
 * products are exact in f32; how vdpbf16ps adds a pair is the CPU's: the
 * candidates are even first, odd first, the pair summed first, or one
 * rounding of all three (the last emulated in double). Then the 16-lane tree. */
static float contract_dot_bf16(const float *x, const double *w, int cols, int how) {
    float a[16] = { 0 };
    for (int k = 0; k < cols; k += 2) {
        float p0 = bf16_round(x[k]) * (float)w[k], p1 = k + 1 < cols ? bf16_round(x[k + 1]) * (float)w[k + 1] : 0.0f;
        float *l = &a[(k % 32) / 2];
        switch (how) {
        case 0: *l = (*l + p0) + p1; break;
        case 1: *l = (*l + p1) + p0; break;
        case 2: *l = *l + (p0 + p1); break;
        default: *l = (float)((double)*l + (double)p0 + (double)p1); break;
        }
    }
    float b[8], c[4], d[2];
    for (int l = 0; l < 8; l++) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) c[l] = b[l] + b[l + 4];
    for (int l = 0; l < 2; l++) d[l] = c[l] + c[l + 2];
    return d[0] + d[1];
}

static void test_matmul_contract(void) {
    const char *path = kb_cpu_path();
    int lanes = !strncmp(path, "avx512", 6) ? 16 : 8;
    static const char *const how_name[4] = { "even product first", "odd product first", "pair summed first",
                                             "one rounding" };
    int how_bad[4] = { 0 };
    const int cols_list[] = { 1, 5, 8, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 77, 96, 256, 300 };
    int bad = 0;
    for (int dt = 0; dt < 3; dt++)
        for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
            int cols = cols_list[ci], rows = 29, m = 11;
            test_weight t = make_weight((kb_dtype)dt, rows, cols);
            float *x = malloc((size_t)m * cols * sizeof(float)), *y = malloc((size_t)m * rows * sizeof(float));
            for (int i = 0; i < m * cols; i++) x[i] = frand(-2, 2);
            kb_matmul(y, x, &t.w, m);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < rows; j++) {
                    const float *xi = x + (size_t)i * cols, got = y[(size_t)i * rows + j];
                    const double *wj = t.val + (size_t)j * cols;
                    if (rounds_x(dt)) {
                        for (int h = 0; h < 4; h++) {
                            float want = contract_dot_bf16(xi, wj, cols, h);
                            how_bad[h] += memcmp(&want, &got, sizeof want) != 0;
                        }
                        continue;
                    }
                    float want = contract_dot(xi, wj, cols, lanes);
                    if (memcmp(&want, &got, sizeof want)) bad++;
                }
            free(x); free(y); free_weight(&t);
        }
    CHECKF(bad == 0, "matmul [%s]: %d results differ from the %d-lane order the path documents", path, bad, lanes);
    if (rounds_x(KB_BF16)) {   /* one candidate must give every result */
        int best = 0;
        for (int h = 1; h < 4; h++) if (how_bad[h] < how_bad[best]) best = h;
        CHECKF(how_bad[best] == 0, "matmul [%s] bf16: no pair order explains the results (best: %s, %d differ)",
               path, how_name[best], how_bad[best]);
        printf("matmul [%s] bf16 weights: vdpbf16ps on this CPU adds a pair as \"%s\" (differences per candidate: "
               "%d %d %d %d)\n", path, how_name[best], how_bad[0], how_bad[1], how_bad[2], how_bad[3]);
    }
}

/* ---- rmsnorm, rope, swiglu, add, softmax ---------------------------------- */

static void test_rmsnorm(void) {
    const int m = 6, n = 131;
    float x[6 * 131], g[131], y[6 * 131], y1[131];
    for (int i = 0; i < m * n; i++) x[i] = frand(-3, 3) * (i < n ? 1e-3f : 1.0f);
    for (int k = 0; k < n; k++) g[k] = frand(0.5f, 1.5f);
    const float eps = 1e-6f;
    kb_rmsnorm(y, x, g, m, n, eps);
    for (int i = 0; i < m; i++) {
        double ss = 0;
        for (int k = 0; k < n; k++) ss += (double)x[i * n + k] * x[i * n + k];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (int k = 0; k < n; k++) {
            double ref = g[k] * (x[i * n + k] * inv);
            /* inv rounded (0.5 ulp) + two products (0.5 ulp each): < 2 ulp; allow 3. */
            CHECKF(fabs(y[i * n + k] - ref) <= 3 * U * fabs(ref), "rmsnorm[%d][%d] %.9g vs %.9g", i, k, y[i * n + k], ref);
        }
        kb_rmsnorm(y1, x + i * n, g, 1, n, eps);
        CHECKF(memcmp(y1, y + i * n, sizeof y1) == 0, "rmsnorm row %d alone differs from in batch", i);
    }
    /* in place (y aliases x) gives the same bits */
    float xc[6 * 131];
    memcpy(xc, x, sizeof xc);
    kb_rmsnorm(xc, xc, g, m, n, eps);
    CHECK(memcmp(xc, y, sizeof xc) == 0);
}

static void test_rope(void) {
    const int m = 5, nh = 3, hd = 16;
    const int pos[5] = { 0, 1, 127, 128, 4000 };
    const float theta = 1e6f;
    float x[5 * 3 * 16], y[5 * 3 * 16];
    for (int i = 0; i < m * nh * hd; i++) x[i] = frand(-2, 2);
    memcpy(y, x, sizeof y);
    kb_rope(y, pos, m, nh, hd, theta);
    int half = hd / 2;
    for (int r = 0; r < m; r++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < half; i++) {
                /* The spec: HF's float32 inv_freq and angle, then exact trig. */
                float e = (float)(2 * i) / (float)hd;
                float inv = 1.0f / (float)pow(theta, e);
                float ang = (float)pos[r] * inv;
                double c = cos(ang), s = sin(ang);
                const float *v = x + (r * nh + h) * hd;
                double a = v[i], b = v[i + half];
                double ra = a * c - b * s, rb = b * c + a * s, mag = fabs(a) + fabs(b);
                /* cos/sin rounded to float (0.5 ulp each), 2 products + 1 sum: ≤ 2.5 ulp of |a|+|b|. */
                const float *o = y + (r * nh + h) * hd;
                CHECKF(fabs(o[i] - ra) <= 3 * U * mag && fabs(o[i + half] - rb) <= 3 * U * mag,
                       "rope pos %d head %d i %d: (%.9g, %.9g) vs (%.9g, %.9g)", pos[r], h, i,
                       o[i], o[i + half], ra, rb);
            }
    /* position 0 is the identity, exactly */
    CHECK(memcmp(y, x, nh * hd * sizeof(float)) == 0);
    /* a row alone gives the same bits as in the batch */
    float one[3 * 16];
    memcpy(one, x + 3 * nh * hd, sizeof one);
    kb_rope(one, &pos[3], 1, nh, hd, theta);
    CHECK(memcmp(one, y + 3 * nh * hd, sizeof one) == 0);
    /* the table once, applied per tensor (what engine/layer.c does for every
     * layer of a forward): kb_rope's bits, for q-shaped and k-shaped tensors */
    float cs[5 * 8], sn[5 * 8], z[5 * 3 * 16], k[5 * 1 * 16], k2[5 * 1 * 16];
    kb_rope_table(cs, sn, pos, m, hd, theta);
    memcpy(z, x, sizeof z);
    kb_rope_apply(z, cs, sn, m, nh, hd);
    CHECK(memcmp(z, y, sizeof z) == 0);
    for (int i = 0; i < m * hd; i++) k[i] = k2[i] = frand(-2, 2);
    kb_rope(k, pos, m, 1, hd, theta);
    kb_rope_apply(k2, cs, sn, m, 1, hd);
    CHECK(memcmp(k, k2, sizeof k) == 0);
}

static void test_pointwise(void) {
    const int m = 3, n = 97;
    float g[3 * 97], u[3 * 97], o[3 * 97], o1[97];
    for (int i = 0; i < m * n; i++) { g[i] = frand(-20, 20); u[i] = frand(-2, 2); }
    kb_swiglu(o, g, u, m, n);
    for (int i = 0; i < m * n; i++) {
        double ref = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        /* exp ≤ 1.01 ulp (kb_expf), then +, /, ×: ≤ 4 ulp relative (1 + exp(−g) ≥ 1 keeps it well conditioned). */
        CHECKF(fabs(o[i] - ref) <= 4 * U * fabs(ref) + 1e-30, "swiglu[%d] %.9g vs %.9g", i, o[i], ref);
    }
    kb_swiglu(o1, g + n, u + n, 1, n);
    CHECK(memcmp(o1, o + n, sizeof o1) == 0);
    memcpy(o1, g + n, sizeof o1);
    kb_swiglu(o1, o1, u + n, 1, n);   /* out aliases gate */
    CHECK(memcmp(o1, o + n, sizeof o1) == 0);

    float a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 0.5f, -2, 1e-8f, 0, -5, 6 };
    kb_add(a, b, 2, 3);
    CHECK(a[0] == 1.5f && a[1] == 0 && a[2] == 3 + 1e-8f && a[3] == 4 && a[4] == 0 && a[5] == 12);
}

static void test_softmax(void) {
    const int n = 1000;
    float x[1000], y[1000];
    for (int i = 0; i < n; i++) x[i] = frand(-30, 30);
    memcpy(y, x, sizeof y);
    double lse = kb_softmax(y, n);
    double mx = x[0];
    for (int i = 1; i < n; i++) mx = fmax(mx, x[i]);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp(x[i] - mx);
    double lse_ref = mx + log(sum), total = 0;
    for (int i = 0; i < n; i++) {
        double ref = exp(x[i] - mx) / sum;
        total += y[i];
        /* x−max is exact (Sterbenz) or ≤ 0.5 ulp; expf ≤ 1 ulp; the double sum is exact to
         * ~1e-15; the final rounding 0.5 ulp: with the rounding of x−max propagated
         * (|x−max| ≤ 60 → 60·0.5 ulp of 1), allow 40 ulp relative. */
        CHECKF(fabs(y[i] - ref) <= 40 * U * ref + 1e-38, "softmax[%d] %.9g vs %.9g", i, y[i], ref);
    }
    CHECKF(fabs(lse - lse_ref) <= 1e-6, "lse %.12g vs %.12g", lse, lse_ref);
    CHECKF(fabs(total - 1.0) <= n * U, "softmax sums to %.12g", total);
    float big[3] = { 1000, 1000, -INFINITY };  /* no overflow; −inf gets weight 0 */
    double l = kb_softmax(big, 3);
    CHECK(big[0] == 0.5f && big[1] == 0.5f && big[2] == 0.0f && fabs(l - (1000 + log(2.0))) < 1e-9);
}

/* ---- attention over pages ------------------------------------------------- */

typedef struct {
    float *k, *v;   /* pool [n_pages, page_size, n_kv, hd] */
    int *pages;
    kb_kv_view view;
} paged;

/* Lays out the history K[n_ctx][n_kv][hd] in pages of page_size, placing the
 * sequence's pages at shuffled pool indices. */
static paged make_paged(const float *K, const float *V, int n_ctx, int n_kv, int hd, int page_size) {
    paged p;
    int np = (n_ctx + page_size - 1) / page_size, pool = np + 3;
    size_t slot = (size_t)n_kv * hd, pg = slot * page_size;
    p.k = calloc(pool * pg, sizeof(float));
    p.v = calloc(pool * pg, sizeof(float));
    p.pages = malloc(np * sizeof(int));
    int *perm = malloc(pool * sizeof(int));
    for (int i = 0; i < pool; i++) perm[i] = i;
    for (int i = pool - 1; i > 0; i--) { int j = (int)(urand() * (i + 1)); int t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (int i = 0; i < np; i++) p.pages[i] = perm[i];
    free(perm);
    for (int t = 0; t < n_ctx; t++) {
        size_t off = (size_t)p.pages[t / page_size] * pg + (size_t)(t % page_size) * slot;
        memcpy(p.k + off, K + t * slot, slot * sizeof(float));
        memcpy(p.v + off, V + t * slot, slot * sizeof(float));
    }
    for (size_t i = 0; i < pool * pg; i++) if (p.k[i] == 0) p.k[i] = 1e30f; /* garbage in unused slots */
    p.view = (kb_kv_view){ .k_pages = p.k, .v_pages = p.v, .pages = p.pages,
                           .page_size = page_size, .n_kv_heads = n_kv, .head_dim = hd };
    return p;
}
static void free_paged(paged *p) { free(p->k); free(p->v); free(p->pages); }

static void test_attention(void) {
    const int cfgs[][4] = { { 8, 2, 64, 300 }, { 4, 4, 20, 37 }, { 6, 1, 16, 1 } }; /* heads, kv heads, hd, n_ctx */
    for (int c = 0; c < 3; c++) {
        int nh = cfgs[c][0], nkv = cfgs[c][1], hd = cfgs[c][2], n_ctx = cfgs[c][3];
        size_t slot = (size_t)nkv * hd;
        float *K = malloc(n_ctx * slot * sizeof(float)), *V = malloc(n_ctx * slot * sizeof(float));
        float *q = malloc(nh * hd * sizeof(float)), *out = malloc(nh * hd * sizeof(float));
        float *out2 = malloc(nh * hd * sizeof(float)), *scratch = malloc(n_ctx * sizeof(float));
        for (size_t i = 0; i < n_ctx * slot; i++) { K[i] = frand(-1, 1); V[i] = frand(-1, 1); }
        for (int i = 0; i < nh * hd; i++) q[i] = frand(-1, 1);
        float scale = (float)(1.0 / sqrt(hd)) * 4; /* sharper than usual: a peaked softmax */
        paged p16 = make_paged(K, V, n_ctx, nkv, hd, 16);
        kb_attention_row(out, q, &p16.view, n_ctx, nh, scale, scratch);

        /* double reference, and the error bound: a score error e_s perturbs the
         * weights by a factor within exp(±2·e_s); the weights' own rounding and
         * the float sums over n_ctx positions add (n_ctx + 4)·u, all relative to
         * Σ_p w_p·|v_p| ≤ max|v|. */
        double *sc = malloc(n_ctx * sizeof(double));
        for (int h = 0; h < nh; h++) {
            const float *qh = q + h * hd;
            int kvh = h / (nh / nkv);
            double mx = -INFINITY, es = 0;
            for (int t = 0; t < n_ctx; t++) {
                double d = 0, mag = 0;
                for (int i = 0; i < hd; i++) {
                    double pr = (double)qh[i] * K[t * slot + kvh * hd + i];
                    d += pr; mag += fabs(pr);
                }
                sc[t] = d * scale;
                es = fmax(es, (gamma_n(hd) * mag + U * fabs(d)) * scale + U * fabs(sc[t]));
                mx = fmax(mx, sc[t]);
            }
            double sum = 0;
            for (int t = 0; t < n_ctx; t++) { sc[t] = exp(sc[t] - mx); sum += sc[t]; }
            double tol = (expm1(2 * es) + (n_ctx + 4) * U) * 1.0 /* max|v| */ + 1e-30;
            for (int i = 0; i < hd; i++) {
                double ref = 0;
                for (int t = 0; t < n_ctx; t++) ref += sc[t] / sum * V[t * slot + kvh * hd + i];
                CHECKF(fabs(out[h * hd + i] - ref) <= tol, "attention cfg %d head %d dim %d: %.9g vs %.9g (tol %.3g)",
                       c, h, i, out[h * hd + i], ref, tol);
            }
        }
        free(sc);

        /* The same history in other page sizes and placements: the same bits,
         * because positions are visited in order whatever the layout. */
        const int sizes[] = { 1, 3, 16, 64 };
        for (int s = 0; s < 4; s++) {
            paged p = make_paged(K, V, n_ctx, nkv, hd, sizes[s]);
            kb_attention_row(out2, q, &p.view, n_ctx, nh, scale, scratch);
            CHECKF(memcmp(out, out2, nh * hd * sizeof(float)) == 0, "attention cfg %d: page size %d changed the result", c, sizes[s]);
            free_paged(&p);
        }
        /* and a shorter context only sees its prefix: n_ctx − 1 must match a
         * history that never had the last position */
        if (n_ctx > 1) {
            paged p = make_paged(K, V, n_ctx - 1, nkv, hd, 16);
            float *o3 = malloc(nh * hd * sizeof(float));
            kb_attention_row(o3, q, &p.view, n_ctx - 1, nh, scale, scratch);
            kb_attention_row(out2, q, &p16.view, n_ctx - 1, nh, scale, scratch);
            CHECK(memcmp(o3, out2, nh * hd * sizeof(float)) == 0);
            free(o3);
            free_paged(&p);
        }
        free_paged(&p16);
        free(K); free(V); free(q); free(out); free(out2); free(scratch);
    }
}

/* kb_attention_span: each row bit-identical to kb_attention_row for that
 * row, for causal spans (prefill chunks, verify rows) and a non-causal block
 * (DSpark: every row sees the whole block), at 1..3 threads, and with
 * scratch below the full-speed size (fewer threads, smaller chunks, or one
 * head at a time). */
static void test_attention_span(void) {
    const int cfgs[][5] = { /* heads, kv heads, hd, history before the span, rows */
        { 8, 2, 64, 300, 9 }, { 4, 4, 20, 37, 5 }, { 6, 1, 16, 0, 1 }, { 4, 2, 64, 70, 17 }, { 8, 2, 128, 40, 3 },
        { 2, 1, 8, 5, 12 } };
    int bad = 0;
    for (int c = 0; c < 6; c++) {
        int nh = cfgs[c][0], nkv = cfgs[c][1], hd = cfgs[c][2], n0 = cfgs[c][3], nq = cfgs[c][4];
        int total = n0 + nq, group = nh / nkv;
        size_t slot = (size_t)nkv * hd, qsz = (size_t)nh * hd;
        float *K = malloc(total * slot * sizeof(float)), *V = malloc(total * slot * sizeof(float));
        float *q = malloc(nq * qsz * sizeof(float)), *ref = malloc(nq * qsz * sizeof(float));
        float *out = malloc(nq * qsz * sizeof(float)), *row_scratch = malloc(total * sizeof(float));
        for (size_t i = 0; i < total * slot; i++) { K[i] = frand(-1, 1); V[i] = frand(-1, 1); }
        for (size_t i = 0; i < nq * qsz; i++) q[i] = frand(-1, 1);
        float scale = (float)(1.0 / sqrt(hd)) * 3;
        int *nctx = malloc(nq * sizeof(int));
        for (int shape = 0; shape < 2; shape++) {
            for (int i = 0; i < nq; i++) nctx[i] = shape == 0 ? n0 + i + 1 : total;   /* causal, block */
            for (int ps = 3; ps <= 16; ps += 13) {
                paged p = make_paged(K, V, total, nkv, hd, ps);
                for (int i = 0; i < nq; i++)
                    kb_attention_row(ref + i * qsz, q + i * qsz, &p.view, nctx[i], nh, scale, row_scratch);
                for (int threads = 1; threads <= 3; threads++) {
                    kb_threads_init(threads);
                    size_t full = kb_attention_span_scratch(nh, nkv, total);
                    CHECK(full >= (size_t)threads * group * total);
                    const size_t sizes[4] = { full, (size_t)group * total * 2, (size_t)group * total, (size_t)total };
                    float *scratch = malloc(full * sizeof(float));
                    for (int si = 0; si < 4; si++) {
                        memset(out, 0xff, nq * qsz * sizeof(float));   /* NaN: every element must be written */
                        kb_attention_span(out, q, &p.view, nq, nctx, nh, scale, scratch, sizes[si]);
                        for (int i = 0; i < nq; i++) {
                            int differs = memcmp(out + i * qsz, ref + i * qsz, qsz * sizeof(float)) != 0;
                            CHECKF(!differs, "attention span [%s] cfg %d %s page %d threads %d scratch %zu: row %d "
                                   "differs from kb_attention_row", kb_cpu_path(), c, shape ? "block" : "causal",
                                   ps, threads, sizes[si], i);
                            bad += differs;
                        }
                    }
                    free(scratch);
                }
                /* the rows as two spans of one call (kb_attention_spans): each row as alone */
                {
                    kb_kv_view views[2] = {p.view, p.view};
                    int span_rows[2] = {nq / 2, nq - nq / 2};
                    size_t full = kb_attention_span_scratch(nh, nkv, total);
                    float *scratch = malloc(full * sizeof(float));
                    memset(out, 0xff, nq * qsz * sizeof(float));
                    kb_attention_spans(out, q, views, span_rows, 2, nctx, nh, scale, scratch, full);
                    int differs = memcmp(out, ref, nq * qsz * sizeof(float)) != 0;
                    CHECKF(!differs, "attention spans [%s] cfg %d page %d: two spans in one call differ from "
                           "kb_attention_row", kb_cpu_path(), c, ps);
                    bad += differs;
                    /* and from the lists laid end to end (kb_attention_idx, a step buffer's layout) */
                    const int np = (total + ps - 1) / ps;
                    int *cat = malloc(2 * (size_t)np * sizeof(int)), *off = malloc((size_t)nq * sizeof(int));
                    memcpy(cat, p.pages, (size_t)np * sizeof(int));
                    memcpy(cat + np, p.pages, (size_t)np * sizeof(int));
                    for (int i = 0; i < nq; i++) off[i] = i < span_rows[0] ? 0 : np;
                    memset(out, 0xff, nq * qsz * sizeof(float));
                    kb_attention_idx(out, q, &p.view, cat, 2 * np, off, nctx, nq, total, nh, scale, scratch, full);
                    differs = memcmp(out, ref, nq * qsz * sizeof(float)) != 0;
                    CHECKF(!differs, "attention idx [%s] cfg %d page %d: rows over concatenated lists differ from "
                           "kb_attention_row", kb_cpu_path(), c, ps);
                    bad += differs;
                    free(cat);
                    free(off);
                    free(scratch);
                }
                free_paged(&p);
            }
        }
        free(K); free(V); free(q); free(ref); free(out); free(row_scratch); free(nctx);
    }
    kb_threads_init(2);
    if (!bad) printf("attention span(s) [%s]: every row equals kb_attention_row bit for bit\n", kb_cpu_path());
}

/* kb_store_rows: rows to their slots (one or two destinations), nothing
 * else touched; a CPU step buffer is one block of host memory. */
static void test_store_rows(void) {
    enum { N = 5, RF = 7, SLOTS = 12 };
    float src0[N * RF], src1[N * RF], d0[SLOTS * RF], d1[SLOTS * RF];
    const int slots[N] = {9, 2, 11, 0, 5};
    for (int i = 0; i < N * RF; i++) { src0[i] = frand(-1, 1); src1[i] = frand(-1, 1); }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < SLOTS * RF; i++) d0[i] = d1[i] = -7.0f;
        kb_store_rows(d0, src0, pass ? d1 : NULL, src1, slots, N, RF);
        int ok = 1;
        for (int sl = 0; sl < SLOTS; sl++) {
            int r = -1;
            for (int i = 0; i < N; i++) if (slots[i] == sl) r = i;
            for (int j = 0; j < RF; j++) {
                ok &= d0[sl * RF + j] == (r >= 0 ? src0[r * RF + j] : -7.0f);
                ok &= d1[sl * RF + j] == (r >= 0 && pass ? src1[r * RF + j] : -7.0f);
            }
        }
        CHECKF(ok, "kb_store_rows (%s destination%s): a slot holds the wrong row", pass ? "two" : "one", pass ? "s" : "");
    }
    kb_stepbuf *b = kb_stepbuf_create(64);
    CHECK(b && kb_stepbuf_host(b) == kb_stepbuf_dev(b));
    if (b) kb_stepbuf_push(b, 64);
    kb_stepbuf_free(b);
    CHECK(kb_graph_begin("k", 1) == 0);   /* nothing to replay on the CPU */
    kb_graph_end();
}

/* ---- across paths ---------------------------------------------------------- */

enum { FP_ROWS = 40, FP_COLS = 77, FP_M = 5, FP_NH = 4, FP_NKV = 2, FP_HD = 24, FP_CTX = 50 };
typedef struct {
    float mm[3][FP_M * FP_ROWS];     /* per dtype */
    float att[FP_NH * FP_HD];
    float silu[300];
} fingerprint;

/* The same inputs on every path (the generator is re-seeded). */
static void take_fingerprint(fingerprint *f) {
    uint64_t saved = rng;
    rng = 0x1234567887654321ull;
    for (int dt = 0; dt < 3; dt++) {
        test_weight t = make_weight((kb_dtype)dt, FP_ROWS, FP_COLS);
        float x[FP_M * FP_COLS];
        for (int i = 0; i < FP_M * FP_COLS; i++) x[i] = frand(-2, 2);
        kb_matmul(f->mm[dt], x, &t.w, FP_M);
        free_weight(&t);
    }
    static float K[FP_CTX * FP_NKV * FP_HD], V[FP_CTX * FP_NKV * FP_HD];
    float q[FP_NH * FP_HD], scratch[FP_CTX];
    for (int i = 0; i < FP_CTX * FP_NKV * FP_HD; i++) { K[i] = frand(-1, 1); V[i] = frand(-1, 1); }
    for (int i = 0; i < FP_NH * FP_HD; i++) q[i] = frand(-1, 1);
    paged p = make_paged(K, V, FP_CTX, FP_NKV, FP_HD, 16);
    kb_attention_row(f->att, q, &p.view, FP_CTX, FP_NH, 0.3f, scratch);
    free_paged(&p);
    float g[300], u[300];
    for (int i = 0; i < 300; i++) { g[i] = frand(-30, 30); u[i] = frand(-2, 2); }
    kb_swiglu(f->silu, g, u, 3, 100);
    rng = saved;
}

int main(void) {
    /* the path API */
    CHECK(kb_set_cpu_path("bogus") == -1 && !kb_cpu_path_supported("bogus"));
    CHECK(kb_cpu_path_supported("scalar") == 1 && kb_set_cpu_path("scalar") == 0 && !strcmp(kb_cpu_path(), "scalar"));
    CHECK(kb_threads_init(3) == 3 && kb_threads() == 3);
    kb_threads_init(2);

    enum { NP = 4 };
    const char *paths[NP] = { "scalar", "avx2", "avx512", "avx512bf16" };
    static fingerprint fp[NP];
    int have[NP] = { 0 };
    test_conversions();
    test_store_rows();
    for (int pi = 0; pi < NP; pi++) {
        if (!kb_cpu_path_supported(paths[pi])) {
            printf("path %s: not supported by this CPU, not tested\n", paths[pi]);
            if (pi == 0) CHECK(0);
            continue;
        }
        CHECK(kb_set_cpu_path(paths[pi]) == 0 && !strcmp(kb_cpu_path(), paths[pi]));
        printf("path %s\n", paths[pi]);
        test_matmul_accuracy();
        test_matmul_invariance();
        test_matmul_group();
        test_matmul_contract();
        test_rmsnorm();
        test_rope();
        test_pointwise();
        test_softmax();
        test_attention();
        test_attention_span();
        take_fingerprint(&fp[pi]);
        have[pi] = 1;
    }
    /* scalar and avx2 share the 8-lane matmul order; attention and SwiGLU have
     * one order (and one exp) on every path. avx512's matmul (16 lanes) may differ: reported, not required. */
    for (int pi = 1; pi < NP; pi++) {
        if (!have[pi]) continue;
        CHECKF(memcmp(fp[pi].att, fp[0].att, sizeof fp[0].att) == 0, "attention differs between scalar and %s", paths[pi]);
        CHECKF(memcmp(fp[pi].silu, fp[0].silu, sizeof fp[0].silu) == 0, "swiglu differs between scalar and %s", paths[pi]);
        int differ = 0;
        for (int dt = 0; dt < 3; dt++)
            for (int i = 0; i < FP_M * FP_ROWS; i++) differ += memcmp(&fp[pi].mm[dt][i], &fp[0].mm[dt][i], 4) != 0;
        if (pi == 1) CHECKF(differ == 0, "matmul: avx2 and scalar differ in %d of %d results", differ, 3 * FP_M * FP_ROWS);
        else printf("matmul: %s differs from scalar/avx2 in %d of %d results (allowed: 16 vs 8 lanes%s)\n", paths[pi],
                    differ, 3 * FP_M * FP_ROWS, pi == 3 ? ", bf16 x" : "");
    }
    /* avx512bf16 leaves f32 and f16 weights to the avx512 code: the same bits */
    if (have[2] && have[3]) {
        int differ = 0;
        for (int dt = 0; dt < 3; dt++)
            for (int i = 0; i < FP_M * FP_ROWS; i++)
                if (dt != KB_BF16) differ += memcmp(&fp[3].mm[dt][i], &fp[2].mm[dt][i], 4) != 0;
        CHECKF(differ == 0, "matmul: avx512bf16 differs from avx512 on f32/f16 weights in %d results", differ);
    }
    kb_set_cpu_path(paths[have[2] ? 2 : have[1] ? 1 : 0]);
    return tu_done("test_kernels");
}
