/* cpu_matmul.c — CPU backend: y[m, rows] = x[m, cols] · Wᵀ, the hot path.
 * Owns: splitting a matmul into chunks for the thread pool, the dispatch to
 * the SIMD path's block kernel, and the scalar path.
 * Must not: call BLAS (OpenBLAS switches kernels and blocking with m, which
 * would make a row's result depend on how many rows share the call —
 * DESIGN §4), or let any per-element operation depend on m, on the tile a
 * row lands in, or on the thread that computes it.
 *
 * Each path has one reduction order per output element y[i][j] =
 * Σ_k x[i][k]·w[j][k], a function of cols only (documented in the path's
 * file: cpu_matmul_avx2.c, cpu_matmul_avx512.c). Tiles of several x rows ×
 * several weight rows share the loads (each weight vector is converted once
 * and used by every x row of the tile; each x vector by every weight row),
 * but each output element keeps its own accumulator and goes through the
 * same sequence of fma as when it is computed alone. So within one path a
 * row's bits do not depend on m, on its neighbours, on the tile size or on
 * the thread count. Between paths they may differ (8 vs 16 lanes): the
 * scalar path follows the AVX2 order exactly (fmaf is correctly rounded,
 * like vfmadd), the AVX-512 path has its own.
 * -ffp-contract=off (set globally) stops the compiler fusing the adds. */
#include "backend.h"
#include "cpu_internal.h"

#include <math.h>

#define MB_UNIT 8          /* x rows per chunk: a multiple of the widest row tile */
#define JB_UNIT 24         /* weight rows per chunk: a multiple of every path's weight tile */
#define CHUNK_FMA 65536    /* aim for at least this much work per pool chunk */
#define PAR_MIN_FMA 131072 /* below this a matmul runs on the calling thread */

static inline __attribute__((always_inline)) float wget(const void *w, int k, kb_dtype dt) {
    switch (dt) {
    case KB_BF16: return cpu_bf16_to_f32(((const uint16_t *)w)[k]);
    case KB_F16: return cpu_f16_to_f32(((const uint16_t *)w)[k]);
    case KB_F32: break;
    }
    return ((const float *)w)[k];
}

/* Scalar path, the AVX2 order (cpu_matmul_avx2.c) in portable C:
 *   8 lanes, lane l takes k ≡ l (mod 8) for k < cols − cols%8, acc = fma(x, w, acc)
 *   in increasing k; r = ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7));
 *   then r = fma(x, w, r) over the last cols%8 elements in increasing k. */
static inline __attribute__((always_inline))
float dot_scalar(const float *x, const void *w, kb_dtype dt, int cols) {
    float l[8] = {0};
    int k = 0;
    for (; k + 8 <= cols; k += 8)
        for (int j = 0; j < 8; j++) l[j] = fmaf(x[k + j], wget(w, k + j, dt), l[j]);
    float r = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    for (; k < cols; k++) r = fmaf(x[k], wget(w, k, dt), r);
    return r;
}

#define DEFINE_SCALAR_BLOCK(NAME, DT)                                                          \
    static void NAME(float *y, size_t ldy, const float *x, int m, const void *w, int cols,    \
                     int j0, int j1) {                                                         \
        size_t ws = (size_t)cols * kb_dtype_size(DT);                                          \
        for (int i = 0; i < m; i++)                                                            \
            for (int j = j0; j < j1; j++)                                                      \
                y[(size_t)i * ldy + j] = dot_scalar(x + (size_t)i * cols,                      \
                                                    (const char *)w + (size_t)j * ws, DT, cols); \
    }
DEFINE_SCALAR_BLOCK(block_scalar_f32, KB_F32)
DEFINE_SCALAR_BLOCK(block_scalar_bf16, KB_BF16)
DEFINE_SCALAR_BLOCK(block_scalar_f16, KB_F16)

void cpu_mm_block_scalar(float *y, size_t ldy, const float *x, int m, const void *w, kb_dtype dt,
                         int cols, int j0, int j1) {
    switch (dt) {
    case KB_F32: block_scalar_f32(y, ldy, x, m, w, cols, j0, j1); return;
    case KB_BF16: block_scalar_bf16(y, ldy, x, m, w, cols, j0, j1); return;
    case KB_F16: block_scalar_f16(y, ldy, x, m, w, cols, j0, j1); return;
    }
}

/* ---- splitting into pool chunks ------------------------------------------- */

typedef struct {
    cpu_mm_block_fn *block;
    float *y;
    const float *x;
    const void *w;
    kb_dtype dt;
    int m, rows, cols;
    int mb, jb, nwb;   /* x rows and weight rows per chunk; weight blocks per row block */
} mm_job;

/* Chunk c: x rows [rb·mb, +mb) × weight rows [wb·jb, +jb). Every output
 * element lies in exactly one chunk. */
static void mm_chunk(void *vp, int c, int slot) {
    (void)slot;
    const mm_job *j = vp;
    int rb = c / j->nwb, wb = c % j->nwb;
    int i0 = rb * j->mb, i1 = i0 + j->mb < j->m ? i0 + j->mb : j->m;
    int j0 = wb * j->jb, j1 = j0 + j->jb < j->rows ? j0 + j->jb : j->rows;
    j->block(j->y + (size_t)i0 * j->rows, (size_t)j->rows, j->x + (size_t)i0 * j->cols, i1 - i0, j->w, j->dt,
             j->cols, j0, j1);
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static int round_up(int a, int b) { return ceil_div(a, b) * b; }

static cpu_mm_block_fn *path_block(void) {
#if CPU_X86
    switch (cpu_path_get()) {
    case CPU_PATH_AVX512_BF16: return cpu_mm_block_avx512bf16;
    case CPU_PATH_AVX512: return cpu_mm_block_avx512;
    case CPU_PATH_AVX2: return cpu_mm_block_avx2;
    case CPU_PATH_SCALAR: break;
    }
#endif
    return cpu_mm_block_scalar;
}

/* How one matmul splits into chunks for `threads` threads. Enough chunks
 * that a late or descheduled worker's share is small (≥ 4 per thread), few
 * enough that each is worth a claim. Split the weight rows first (each chunk
 * then streams its own weights), then the x rows. */
static void plan_job(mm_job *j, int threads) {
    const int rows = j->rows, m = j->m;
    double per = (double)m * rows * j->cols / CHUNK_FMA;
    int want = per > 64.0 * threads ? 64 * threads : per < 4.0 * threads ? 4 * threads : (int)per;
    int nwb = ceil_div(rows, JB_UNIT) < want ? ceil_div(rows, JB_UNIT) : want;
    j->jb = round_up(ceil_div(rows, nwb), JB_UNIT);
    j->nwb = ceil_div(rows, j->jb);
    int nrb = ceil_div(want, j->nwb), max_rb = ceil_div(m, MB_UNIT);
    if (nrb > max_rb) nrb = max_rb;
    j->mb = round_up(ceil_div(m, nrb), MB_UNIT);
}

static int job_chunks(const mm_job *j) { return ceil_div(j->m, j->mb) * j->nwb; }

void kb_matmul(float *y, const float *x, const kb_weight *w, int m) {
    kb_matmul_n(1, &y, &w, x, m);
}

/* Several matmuls of one x: their chunks go to the pool as one call, so a
 * layer's q/k/v (or gate/up) cost one hand-off and one tail instead of
 * three. Each output element is computed by the same block kernel call as
 * alone, so the bits are kb_matmul's. */
typedef struct {
    mm_job job[KB_MATMUL_N_MAX];
    int first[KB_MATMUL_N_MAX + 1];   /* chunk index where job i starts */
    int n;
} mm_group;

static void group_chunk(void *vp, int c, int slot) {
    const mm_group *g = vp;
    int i = 0;
    while (c >= g->first[i + 1]) i++;
    mm_chunk((void *)&g->job[i], c - g->first[i], slot);
}

void kb_matmul_n(int n, float *const ys[], const kb_weight *const ws[], const float *x, int m) {
    if (m <= 0) return;
    for (; n > KB_MATMUL_N_MAX; n -= KB_MATMUL_N_MAX, ys += KB_MATMUL_N_MAX, ws += KB_MATMUL_N_MAX)
        kb_matmul_n(KB_MATMUL_N_MAX, ys, ws, x, m);
    if (kb_dev_active) {
        for (int i = 0; i < n; i++)
            if (ws[i]->rows > 0) kb_dev_active->matmul(ys[i], x, ws[i], m);
        return;
    }
    cpu_mm_block_fn *block = path_block();
    const int threads = kb_threads();
    mm_group g = {.n = 0};
    double work = 0;
    for (int i = 0; i < n; i++) {
        if (ws[i]->rows <= 0) continue;
        g.job[g.n++] = (mm_job){.block = block, .y = ys[i], .x = x, .w = ws[i]->data, .dt = ws[i]->dt, .m = m,
                                .rows = ws[i]->rows, .cols = ws[i]->cols};
        work += (double)m * ws[i]->rows * ws[i]->cols;
    }
    if (threads == 1 || work < PAR_MIN_FMA) {
        for (int i = 0; i < g.n; i++) {
            const mm_job *j = &g.job[i];
            block(j->y, (size_t)j->rows, x, m, j->w, j->dt, j->cols, 0, j->rows);
        }
        return;
    }
    g.first[0] = 0;
    for (int i = 0; i < g.n; i++) {
        plan_job(&g.job[i], threads);
        g.first[i + 1] = g.first[i] + job_chunks(&g.job[i]);
    }
    cpu_parallel(group_chunk, &g, g.first[g.n], 0);
}
