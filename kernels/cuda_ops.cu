/* cuda_ops.cu — CUDA backend: every kernel but the matmul (RMSNorm, RoPE,
 * SwiGLU, residual add, paged-KV attention, embedding rows).
 * Owns: the order of each kernel's arithmetic on the GPU. Each follows the
 * CPU kernel's operations one for one (cpu_norm.c, cpu_pointwise.c,
 * cpu_attention.c: the same reductions in the same order, fma where the CPU
 * has fma and nowhere else — the .cu files are compiled with --fmad=false),
 * so that a row's result depends on nothing but that row — the batch
 * invariance of DESIGN §4 — and equals the CPU's scalar/AVX2 result: bit
 * for bit where both sides are IEEE operations (add, SwiGLU, RMSNorm,
 * attention), within an ulp of cos/sin where libm and CUDA's libdevice may
 * round differently (RoPE). tests/test_cuda.c checks each.
 * Must not: split one row's (or one (row, head)'s) reduction across
 * threads in an order that depends on the launch, or read host memory
 * (cu_in stages host arguments).
 *
 * Parallelism is over rows, heads and elements only, which leaves the
 * serial reductions (RMSNorm's sum of squares, attention's 4 partial sums
 * and its P·V chain per output element) on one thread each: slow for one
 * long row, and the price of the CPU's bits; a blocked order shared with
 * the CPU is the way to go faster without losing them. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.cuh"

#define OPS_THREADS 128

/* ---- RMSNorm: one block per row -------------------------------------------- */

__global__ void rmsnorm_k(float *y, const float *x, const float *g, int n, float eps) {
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    __shared__ float inv_s;
    if (threadIdx.x == 0) {
        double ss = 0.0;   /* in increasing k, in double: cpu_norm.c */
        for (int k = 0; k < n; k++) ss += (double)xr[k] * (double)xr[k];
        inv_s = (float)(1.0 / sqrt(ss / n + (double)eps));
    }
    __syncthreads();   /* every read of the row is done before y (which may be x) is written */
    const float inv = inv_s;
    for (int k = threadIdx.x; k < n; k += blockDim.x) yr[k] = g[k] * (xr[k] * inv);
}

void cuda_rmsnorm(float *y, const float *x, const float *g, int m, int n, float eps) {
    if (m <= 0 || n <= 0) return;
    const size_t bytes = (size_t)m * (size_t)n * sizeof(float);
    cu_begin();
    const float *dg = (const float *)cu_in(g, (size_t)n * sizeof(float));
    float *dy;
    const float *dx;
    if (y == x) {
        dy = (float *)cu_out(y, bytes, 1);
        dx = dy;
    } else {
        dx = (const float *)cu_in(x, bytes);
        dy = (float *)cu_out(y, bytes, 0);
    }
    CU_LAUNCH(rmsnorm_k, (unsigned)m, OPS_THREADS)(dy, dx, dg, n, eps);
    cu_end("rmsnorm");
}

/* ---- RoPE: one thread per (row, frequency), over every head ----------------- */

__global__ void rope_k(float *x, const int *pos, int m, int n_heads, int hd, float theta) {
    const int half = hd / 2;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)m * (size_t)half) return;
    const int r = (int)(t / (size_t)half), i = (int)(t % (size_t)half);
    /* cpu_pointwise.c's float32 steps, pow/cos/sin in double rounded once */
    const float e = (float)(2 * i) / (float)hd;
    const float p = (float)pow((double)theta, (double)e);
    const float inv_freq = 1.0f / p;
    const float ang = (float)pos[r] * inv_freq;
    const float cs = (float)cos((double)ang), sn = (float)sin((double)ang);
    for (int h = 0; h < n_heads; h++) {
        float *v = x + ((size_t)r * n_heads + h) * hd;
        const float a = v[i], b = v[i + half];
        v[i] = a * cs + (-b) * sn;
        v[i + half] = b * cs + a * sn;
    }
}

void cuda_rope(float *x, const int *pos, int m, int n_heads, int head_dim, float theta) {
    const int half = head_dim / 2;
    if (m <= 0 || half <= 0 || n_heads <= 0) return;
    cu_begin();
    const int *dpos = (const int *)cu_in(pos, (size_t)m * sizeof(int));
    float *dx = (float *)cu_out(x, (size_t)m * n_heads * head_dim * sizeof(float), 1);
    const size_t threads = (size_t)m * half;
    CU_LAUNCH(rope_k, (unsigned)((threads + OPS_THREADS - 1) / OPS_THREADS), OPS_THREADS)(dx, dpos, m, n_heads,
                                                                                         head_dim, theta);
    cu_end("rope");
}

/* ---- SwiGLU and add: element-wise ------------------------------------------- */

__global__ void swiglu_k(float *out, const float *gate, const float *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float g = gate[i];
        out[i] = (g / (1.0f + kb_expf(-g))) * up[i];   /* torch's silu, as cpu_pointwise.c */
    }
}

__global__ void add_k(float *x, const float *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

static unsigned grid_for(size_t n) {
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 8192 ? (b ? b : 1) : 8192);
}

void cuda_swiglu(float *out, const float *gate, const float *up, int m, int n) {
    const size_t total = (size_t)m * (size_t)n, bytes = total * sizeof(float);
    if (!total) return;
    cu_begin();
    const float *du = (const float *)cu_in(up, bytes);
    const float *dg;
    float *dout;
    if (out == gate) {
        dout = (float *)cu_out(out, bytes, 1);
        dg = dout;
    } else {
        dg = (const float *)cu_in(gate, bytes);
        dout = (float *)cu_out(out, bytes, 0);
    }
    CU_LAUNCH(swiglu_k, grid_for(total), 256)(dout, dg, du, total);
    cu_end("swiglu");
}

void cuda_add(float *x, const float *y, int m, int n) {
    const size_t total = (size_t)m * (size_t)n, bytes = total * sizeof(float);
    if (!total) return;
    cu_begin();
    const float *dy = (const float *)cu_in(y, bytes);
    float *dx = (float *)cu_out(x, bytes, 1);
    CU_LAUNCH(add_k, grid_for(total), 256)(dx, dy, total);
    cu_end("add");
}

/* ---- rows to scattered destinations (the KV slots of a forward's rows) ------- */

/* Block i copies row i; dst[i] is device or managed memory (backend.h). */
__global__ void scatter_rows_k(float *const *dst, const float *src, int row_floats) {
    float *d = dst[blockIdx.x];
    const float *s = src + (size_t)blockIdx.x * row_floats;
    for (int j = threadIdx.x; j < row_floats; j += blockDim.x) d[j] = s[j];
}

void cuda_scatter_rows(float *const dst[], const float *src, int n, int row_floats) {
    if (n <= 0 || row_floats <= 0) return;
    cu_begin();
    float *const *dd = (float *const *)cu_in(dst, (size_t)n * sizeof *dst);
    const float *ds = (const float *)cu_in(src, (size_t)n * (size_t)row_floats * sizeof(float));
    CU_LAUNCH(scatter_rows_k, n, 128)(dd, ds, row_floats);
    cu_end("scatter_rows");
}

/* ---- embedding rows ---------------------------------------------------------- */

/* Row blockIdx.y of the batch: w's row rows[blockIdx.y]. */
__global__ void weight_rows_k(float *dst, const void *w, const int *rows, kb_dtype dt, int cols) {
    const size_t base = (size_t)rows[blockIdx.y] * (size_t)cols;
    float *d = dst + (size_t)blockIdx.y * cols;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < cols; k += gridDim.x * blockDim.x) {
        const uint16_t *h = (const uint16_t *)w + base;
        d[k] = dt == KB_BF16 ? cu_bf16(h[k]) : dt == KB_F16 ? cu_f16(h[k]) : ((const float *)w)[base + k];
    }
}

void cuda_weight_rows(float *dst, const kb_weight *w, const int *rows, int n) {
    if (w->cols <= 0 || n <= 0) return;
    const size_t es = kb_dtype_size(w->dt);
    if (!cu_on_device(w->data)) {   /* a weight never uploaded (tests): each row staged on its own */
        static const int zero = 0;
        const size_t row_bytes = (size_t)w->cols * es;
        for (int i = 0; i < n; i++) {
            cu_begin();
            const void *src = cu_in((const char *)w->data + (size_t)rows[i] * row_bytes, row_bytes);
            const int *dz = (const int *)cu_in(&zero, sizeof(int));
            float *d = (float *)cu_out(dst + (size_t)i * w->cols, (size_t)w->cols * sizeof(float), 0);
            CU_LAUNCH(weight_rows_k, dim3(grid_for((size_t)w->cols), 1), 256)(d, src, dz, w->dt, w->cols);
            cu_end("weight_rows");
        }
        return;
    }
    unsigned gx = grid_for((size_t)w->cols);
    gx = gx < 64 ? gx : 64;
    for (int i0 = 0; i0 < n; i0 += 65535) {   /* gridDim.y's limit */
        const int m = n - i0 < 65535 ? n - i0 : 65535;
        cu_begin();
        const int *drows = (const int *)cu_in(rows + i0, (size_t)m * sizeof(int));
        float *d = (float *)cu_out(dst + (size_t)i0 * w->cols, (size_t)m * (size_t)w->cols * sizeof(float), 0);
        CU_LAUNCH(weight_rows_k, dim3(gx, (unsigned)m), 256)(d, w->data, drows, w->dt, w->cols);
        cu_end("weight_rows");
    }
}

/* ---- attention ----------------------------------------------------------------
 * One block per (row, q head). Per (row, head), in cpu_attention.c's order:
 *   score[p] = dot8(q, k_p) · scale            (one thread per position)
 *   mx = max_p score[p]                          (a max: any order gives the same value)
 *   e_p = exp(score[p] − mx)                     (kb_expf = kb_expf)
 *   sum = (t0+t1)+(t2+t3), t_j = Σ_{p ≡ j mod 4} e_p in increasing p, in double
 *   w_p = (float)(e_p / sum)
 *   out[d] = fma(w_p, v_p[d], out[d]) in increasing p from 0   (one thread per d)
 * The scores live in device scratch, [n_q · n_heads, max n_ctx]. A row's
 * work is the same whatever n_q, so kb_attention_row and every row of
 * kb_attention_span give identical bits, as on the CPU. */
__global__ void attend_k(float *out, const float *q, const float *kp, const float *vp, const int *page_cat,
                         const int *page_off, const int *n_ctx, int page_size, int n_kv, int hd, int n_heads,
                         float scale, float *sc, size_t sc_stride) {
    const int b = blockIdx.x, r = b / n_heads, h = b % n_heads;
    const int n = n_ctx[r];
    const int *pages = page_cat + page_off[r];   /* row r's sequence's page list */
    const int kvh = h / (n_heads / n_kv);
    const size_t slot = (size_t)n_kv * hd, page_stride = (size_t)page_size * slot, head_off = (size_t)kvh * hd;
    const float *qh = q + ((size_t)r * n_heads + h) * hd;
    float *s = sc + (size_t)b * sc_stride;
    __shared__ float red[OPS_THREADS];
    __shared__ double part[4];

    float mx = -INFINITY;
    for (int p = threadIdx.x; p < n; p += blockDim.x) {
        const float *k = kp + (size_t)pages[p / page_size] * page_stride + (size_t)(p % page_size) * slot + head_off;
        const float v = cu_dot8(qh, k, hd) * scale;
        s[p] = v;
        if (v > mx) mx = v;
    }
    const int t = (int)threadIdx.x;
    red[t] = mx;
    __syncthreads();
    for (int w = (int)blockDim.x / 2; w > 0; w /= 2) {
        if (t < w && red[t + w] > red[t]) red[t] = red[t + w];
        __syncthreads();
    }
    mx = red[0];
    for (int p = threadIdx.x; p < n; p += blockDim.x) s[p] = kb_expf(s[p] - mx);
    __syncthreads();
    if (threadIdx.x < 4) {
        double t = 0.0;
        for (int p = threadIdx.x; p < n; p += 4) t += (double)s[p];
        part[threadIdx.x] = t;
    }
    __syncthreads();
    const double sum = (part[0] + part[1]) + (part[2] + part[3]);
    for (int p = threadIdx.x; p < n; p += blockDim.x) s[p] = (float)((double)s[p] / sum);
    __syncthreads();
    float *o = out + ((size_t)r * n_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int p = 0; p < n; p++) {
            const float *v = vp + (size_t)pages[p / page_size] * page_stride + (size_t)(p % page_size) * slot + head_off;
            acc = fmaf(s[p], v[d], acc);
        }
        o[d] = acc;
    }
}

/* One launch over the rows of n_spans spans: span s is the next
 * span_rows[s] rows over views[s]. The spans' page lists (as far as their
 * rows reach) are laid end to end in one staged array and each row gets
 * its list's offset. n_ctx and the page lists are host-readable
 * (backend.h): the extent of what the kernel touches is found here. */
static int *g_page_cat, *g_page_off;   /* host staging of the lists, grown; under the bracket's lock */
static size_t g_page_cat_cap, g_page_off_cap;

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = need + need / 2 + 16;
    void *q = realloc(p, c * elem);
    if (!q) {
        fprintf(stderr, "specbed: CUDA attention: out of host memory for %zu page entries\n", need);
        abort();
    }
    *cap = c;
    return q;
}

void cuda_attention_spans(float *out, const float *q, const kb_kv_view *views, const int *span_rows, int n_spans,
                          const int *n_ctx, int n_heads, float scale) {
    if (n_spans <= 0 || n_heads <= 0) return;
    const kb_kv_view *kv = &views[0];
    const int hd = kv->head_dim, ps = kv->page_size, n_kv = kv->n_kv_heads;
    if (n_kv <= 0 || n_heads % n_kv) {
        fprintf(stderr, "specbed: CUDA attention: %d heads over %d kv heads\n", n_heads, n_kv);
        abort();
    }
    cu_begin();
    int n_q = 0, max_ctx = 1, top = 0;
    size_t n_cat = 0;
    for (int s = 0; s < n_spans; s++) {
        const kb_kv_view *v = &views[s];
        if (v->k_pages != kv->k_pages || v->v_pages != kv->v_pages || v->page_size != ps || v->n_kv_heads != n_kv ||
            v->head_dim != hd) {
            fprintf(stderr, "specbed: CUDA attention: span %d's view is of another layer or geometry\n", s);
            abort();
        }
        int span_ctx = 1;
        for (int i = 0; i < span_rows[s]; i++) span_ctx = n_ctx[n_q + i] > span_ctx ? n_ctx[n_q + i] : span_ctx;
        max_ctx = span_ctx > max_ctx ? span_ctx : max_ctx;
        const int np = span_rows[s] > 0 ? (span_ctx + ps - 1) / ps : 0;   /* an empty span reads nothing */
        g_page_cat = (int *)grow(g_page_cat, &g_page_cat_cap, n_cat + (size_t)np, sizeof(int));
        g_page_off = (int *)grow(g_page_off, &g_page_off_cap, (size_t)n_q + (size_t)span_rows[s], sizeof(int));
        for (int i = 0; i < np; i++) {
            g_page_cat[n_cat + i] = v->pages[i];
            top = v->pages[i] > top ? v->pages[i] : top;
        }
        for (int i = 0; i < span_rows[s]; i++) g_page_off[n_q + i] = (int)n_cat;
        n_cat += (size_t)np;
        n_q += span_rows[s];
    }
    if (n_q <= 0) {
        cu_end("attention");
        return;
    }
    const int *dcat = (const int *)cu_in(g_page_cat, n_cat * sizeof(int));
    const int *doff = (const int *)cu_in(g_page_off, (size_t)n_q * sizeof(int));
    const int *dctx = (const int *)cu_in(n_ctx, (size_t)n_q * sizeof(int));
    const float *dk = kv->k_pages, *dv = kv->v_pages;
    if (!cu_on_device(dk) || !cu_on_device(dv)) {   /* a host KV pool (tests): stage the pages in use */
        const size_t bytes = (size_t)(top + 1) * ps * n_kv * hd * sizeof(float);
        dk = (const float *)cu_in(dk, bytes);
        dv = (const float *)cu_in(dv, bytes);
    }
    const size_t qbytes = (size_t)n_q * n_heads * hd * sizeof(float);
    const float *dq = (const float *)cu_in(q, qbytes);
    float *dout = (float *)cu_out(out, qbytes, 0);
    float *sc = (float *)cu_scratch(CU_SCRATCH_SCORES, (size_t)n_q * n_heads * max_ctx * sizeof(float));
    CU_LAUNCH(attend_k, (unsigned)(n_q * n_heads), OPS_THREADS)(dout, dq, dk, dv, dcat, doff, dctx, ps, n_kv, hd,
                                                                n_heads, scale, sc, (size_t)max_ctx);
    cu_end("attention");
}

void cuda_attention(float *out, const float *q, const kb_kv_view *kv, int n_q, const int *n_ctx, int n_heads,
                    float scale) {
    cuda_attention_spans(out, q, kv, &n_q, 1, n_ctx, n_heads, scale);
}
