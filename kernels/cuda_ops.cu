/* cuda_ops.cu — CUDA backend: every kernel but the matmul (RMSNorm, RoPE,
 * SwiGLU, residual add, paged-KV attention, embedding rows).
 * Owns: the order of each kernel's arithmetic on the GPU. Each but
 * attention follows the CPU kernel's operations one for one (cpu_norm.c,
 * cpu_pointwise.c: the same reductions in the same order, fma where the
 * CPU has fma and nowhere else — the .cu files are compiled with
 * --fmad=false), so that a row's result depends on nothing but that row —
 * the batch invariance of DESIGN §4 — and equals the CPU's scalar/AVX2
 * result: bit for bit where both sides are IEEE operations (add, SwiGLU,
 * RMSNorm), within an ulp of cos/sin where libm and CUDA's libdevice may
 * round differently (RoPE). Attention has an order of its own (the
 * context split into fixed chunks, below), as fixed per (row, head) as the
 * CPU's and within a derived bound of its result. tests/test_cuda.c checks
 * each.
 * Must not: split one row's (or one (row, head)'s) reduction across
 * threads in an order that depends on the launch (the number of rows,
 * spans or blocks), or read host memory (cu_in stages host arguments).
 *
 * Parallelism is over rows, heads and elements, and in attention over
 * fixed chunks of positions; RMSNorm's sum of squares stays one chain per
 * row, the price of the CPU's bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

#define OPS_THREADS 128

/* One pair rotated as cpu_pointwise.c does, a·c + (−b)·s and b·c + a·s, each
 * product and the sum rounded on its own (no fma contraction: the same
 * bits in rope_apply_k and in the norm fused with it) */
__device__ __forceinline__ void rope_pair(float *pi, float *ph, float a, float b, float c, float s) {
    *pi = __fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, s));
    *ph = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}

/* ---- RMSNorm: one warp per row ---------------------------------------------- */

/* cpu_norm.c's order, bit for bit: partial e (e < 8) is the double sum of
 * x[k]² over k ≡ e (mod 8) in increasing k (a product of two floats is
 * exact in double), then ((p0+p4)+(p2+p6)) + ((p1+p5)+(p3+p7)).
 * A row is one warp. It reads the row in groups of NORM_GROUP elements,
 * lane L elements g + 32c + L (c < 32: coalesced, all 32 loads issued
 * before the first is used, one memory round trip a group), into the
 * warp's shared buffer; then lane e < 8 runs partial e's chain over the
 * buffer in increasing k. The first GPU run read the row one
 * strided element per step from lanes 0–7 (and a thread, before that):
 * 128 dependent round trips, 21.6 µs per 1,024-wide norm (Nsight Compute),
 * a third of a 0.6B decode step. The output pass reads each lane's 32
 * elements and gains again (all loads before any store, so y may be x)
 * and writes them. The chain is n/8 double adds from shared memory (128
 * at 1,024). */
#define NORM_WARPS 4
#define NORM_GROUP 1024
/* MODE: NORM_PLAIN; NORM_ADD: x += a first (the residual add fused: x is
 * written, then normed into y); NORM_ROPE: each normed row is a head of
 * token row / n_heads, rotated by the table cs/sn (q/k norm fused with
 * RoPE). Per element the operations and their order are the unfused
 * kernels': the same bits (test_cuda). */
/* NORM_ROPE_STORE: NORM_ROPE on a layer's K heads, each rotated head also
 * written to its token's KV slot (st.k), and the token's V head copied to
 * its slot (st.v): kb_store_rows after the K norm + RoPE, in one kernel. */
enum { NORM_PLAIN = 0, NORM_ADD = 1, NORM_ROPE = 2, NORM_ROPE_STORE = 3 };
struct norm_store {
    float *k, *v;         /* the layer's K and V pools */
    const float *vsrc;    /* the V rows [tokens, n_heads·n] */
    const int *slots;     /* each token's slot */
};
template <int MODE>
__global__ void __launch_bounds__(NORM_WARPS * 32)
rmsnorm_k(float *y, float *x, const float *a, const float *g, int m, int n, float eps, const float *cs,
          const float *sn, int n_heads, norm_store st) {
    CU_PDL_ENTRY();
    __shared__ float buf[NORM_WARPS][NORM_GROUP];
    const int lane = (int)threadIdx.x & 31, wid = (int)threadIdx.x >> 5;
    const int row = (int)blockIdx.x * NORM_WARPS + wid;
    const int r = row < m ? row : m - 1;   /* a dead warp runs along (barriers, shuffles); it writes nothing */
    float *xr = x + (size_t)r * n;
    float *sb = buf[wid];
    double ss = 0.0;
    for (int g0 = 0; g0 < n; g0 += NORM_GROUP) {
        float v[32];
#pragma unroll
        for (int c = 0; c < 32; c++) {   /* coalesced: sb[j] = x[g0 + j] */
            const int k = g0 + 32 * c + lane;
            v[c] = k < n ? (MODE == NORM_ADD ? xr[k] + a[(size_t)r * n + k] : xr[k]) : 0.0f;
        }
        if (MODE == NORM_ADD && row < m) {
#pragma unroll
            for (int c = 0; c < 32; c++) {   /* the sums, read back by this lane alone below */
                const int k = g0 + 32 * c + lane;
                if (k < n) xr[k] = v[c];
            }
        }
#pragma unroll
        for (int c = 0; c < 32; c++) sb[32 * c + lane] = v[c];
        __syncthreads();
        if (lane < 8) {
            const int cnt = n - g0 < NORM_GROUP ? n - g0 : NORM_GROUP;
#pragma unroll 8
            for (int k = lane; k < cnt; k += 8) {
                const double t = (double)sb[k];
                ss += t * t;
            }
        }
        __syncthreads();   /* the buffer is rewritten by the next group */
    }
    ss = ss + __shfl_xor_sync(0xffffffffu, ss, 4);
    ss = ss + __shfl_xor_sync(0xffffffffu, ss, 2);
    ss = ss + __shfl_xor_sync(0xffffffffu, ss, 1);
    /* lanes 8–31 held +0: two more steps hand lanes 0–7's sum to every lane
     * unchanged (s + 0 = s exactly) */
    ss = ss + __shfl_xor_sync(0xffffffffu, ss, 8);
    ss = ss + __shfl_xor_sync(0xffffffffu, ss, 16);
    /* HF: x * rsqrt(mean(x²) + eps), then weight * that (cpu_norm.c) */
    const float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
    if (row >= m) return;
    float *yr = y + (size_t)r * n;
    if constexpr (MODE == NORM_ROPE || MODE == NORM_ROPE_STORE) {
        const int half = n / 2;
        const size_t t0 = (size_t)(r / n_heads) * half;
        /* NORM_ROPE_STORE: the token's slot, head r % n_heads of it, for K and for V */
        const size_t rf = (size_t)n_heads * n, tok = (size_t)(r / n_heads), head = (size_t)(r % n_heads) * n;
        const size_t dst = MODE == NORM_ROPE_STORE ? (size_t)st.slots[tok] * rf + head : 0;
        for (int i = lane; i < half; i += 32) {   /* head_dim/64 pairs a lane (2 at 128) */
            const float u = g[i] * (xr[i] * inv), w = g[i + half] * (xr[i + half] * inv);
            float p0, p1;
            rope_pair(&p0, &p1, u, w, cs[t0 + i], sn[t0 + i]);
            yr[i] = p0;
            yr[i + half] = p1;
            if constexpr (MODE == NORM_ROPE_STORE) {
                st.k[dst + i] = p0;
                st.k[dst + i + half] = p1;
            }
        }
        if constexpr (MODE == NORM_ROPE_STORE)
            for (int i = lane; i < n; i += 32) st.v[dst + i] = st.vsrc[tok * rf + head + i];
    } else {
        /* every load of a group (x and the gain) before its first store:
         * y may alias g as far as the compiler knows, so a gain read after
         * a store waits for it — the second H200 run measured exactly that,
         * 32 dependent round trips a 1,024-wide row, 17.8 µs */
        for (int g0 = 0; g0 < n; g0 += NORM_GROUP) {
            float v[32], gv[32];
#pragma unroll
            for (int c = 0; c < 32; c++) {
                const int k = g0 + 32 * c + lane;
                v[c] = k < n ? xr[k] : 0.0f;
                gv[c] = k < n ? g[k] : 0.0f;
            }
#pragma unroll
            for (int c = 0; c < 32; c++) {
                const int k = g0 + 32 * c + lane;
                if (k < n) yr[k] = gv[c] * (v[c] * inv);
            }
        }
    }
}

template <int MODE>
static void launch_norm(float *y, float *x, const float *a, const float *g, int m, int n, float eps,
                        const float *cs = NULL, const float *sn = NULL, int n_heads = 1,
                        norm_store st = norm_store{NULL, NULL, NULL, NULL}) {
    CU_LAUNCH(rmsnorm_k<MODE>, (unsigned)((m + NORM_WARPS - 1) / NORM_WARPS), NORM_WARPS * 32)(y, x, a, g, m, n, eps,
                                                                                            cs, sn, n_heads, st);
}

/* ---- held element-wise calls, fused with the next -------------------------------
 * As the matmuls (cuda_matmul.cu): inside an async region, on device
 * memory, a residual add (x += y) is held until the next call — an RMSNorm
 * of that x runs as one kernel with it (NORM_ADD) — and an in-place norm
 * (the q and k head norms) is held until the next call — RoPE of the same
 * rows runs as one kernel with it (NORM_ROPE); anything else launches what
 * is held first (cu_flush_held, from cu_begin and before every wait or
 * end of a capture). Four launches a layer fewer, each ~2 µs on the first
 * H200 run (Nsight Compute: an add 2.2 µs, a RoPE 2.4, a head norm 4.4). */
__global__ void add_k(float *x, const float *y, size_t n);
static unsigned grid_for(size_t n);
/* HELD_NORM_ROPE: a head norm with its RoPE (one kernel, NORM_ROPE), held
 * in turn: a KV store of those rows (kb_store_rows of K and V into their
 * slots) that follows joins it (NORM_ROPE_STORE), one launch a layer
 * fewer. */
enum { HELD_NONE = 0, HELD_NORM, HELD_ADD, HELD_NORM_ROPE };
static struct {
    int kind;
    float *x;
    const float *a, *g;
    int m, n;
    float eps;
    const float *cs, *sn;   /* HELD_NORM_ROPE: the table (RoPE's scratch, kept until the next table) */
    int n_heads;
} g_op;

static void hold_op(int kind, float *x, const float *a, const float *g, int m, int n, float eps) {
    cu_lock();
    cu_flush_held();
    g_op.kind = kind;
    g_op.x = x;
    g_op.a = a;
    g_op.g = g;
    g_op.m = m;
    g_op.n = n;
    g_op.eps = eps;
    cu_unlock();
}

static void scatter_flush(void);

/* With the lock held. */
void cuda_ops_flush(void) {
    scatter_flush();
    const int kind = g_op.kind;
    g_op.kind = HELD_NONE;
    if (kind == HELD_NORM) launch_norm<NORM_PLAIN>(g_op.x, g_op.x, NULL, g_op.g, g_op.m, g_op.n, g_op.eps);
    else if (kind == HELD_NORM_ROPE)
        launch_norm<NORM_ROPE>(g_op.x, g_op.x, NULL, g_op.g, g_op.m, g_op.n, g_op.eps, g_op.cs, g_op.sn, g_op.n_heads);
    else if (kind == HELD_ADD) {
        const size_t total = (size_t)g_op.m * (size_t)g_op.n;
        CU_LAUNCH(add_k, grid_for(total), 256)(g_op.x, g_op.a, total);
    }
}

/* Takes the held call when it is `kind` on x with m rows of n (else leaves it). */
static int take_op(int kind, const float *x, int m, int n) {
    cu_lock();
    const int ok = g_op.kind == kind && g_op.x == x && g_op.m == m && g_op.n == n;
    if (ok) g_op.kind = HELD_NONE;
    cu_unlock();
    return ok;
}

static int on_device_all(const void *a, const void *b, const void *c) {
    return cu_on_device(a) && cu_on_device(b) && (!c || cu_on_device(c));
}

void cuda_rmsnorm(float *y, const float *x, const float *g, int m, int n, float eps) {
    if (m <= 0 || n <= 0) return;
    const size_t bytes = (size_t)m * (size_t)n * sizeof(float);
    if (cu_async_depth() && on_device_all(y, x, g)) {
        if (g_op.kind == HELD_ADD && take_op(HELD_ADD, x, m, n)) {   /* the add before this norm, as one */
            const float *a = g_op.a;
            cu_begin();
            launch_norm<NORM_ADD>(y, (float *)x, a, g, m, n, eps);
            cu_end("add + rmsnorm");
            return;
        }
        if (y == x) {   /* a head norm: RoPE may follow */
            hold_op(HELD_NORM, y, NULL, g, m, n, eps);
            return;
        }
    }
    cu_begin();
    const float *dg = (const float *)cu_in(g, (size_t)n * sizeof(float));
    float *dy, *dx;
    if (y == x) {
        dy = (float *)cu_out(y, bytes, 1);
        dx = dy;
    } else {
        dx = (float *)cu_in(x, bytes);   /* read only (NORM_PLAIN) */
        dy = (float *)cu_out(y, bytes, 0);
    }
    launch_norm<NORM_PLAIN>(dy, dx, NULL, dg, m, n, eps);
    cu_end("rmsnorm");
}

/* ---- RoPE: a table per set of positions, then one thread per pair ------------ */

/* cs[r·half + i], sn[...]: cpu_pointwise.c's float32 steps, pow/cos/sin in
 * double rounded once. */
__global__ void rope_table_k(float *cs, float *sn, const int *pos, int m, int hd, float theta) {
    CU_PDL_ENTRY();
    const int half = hd / 2;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)m * (size_t)half) return;
    const int r = (int)(t / (size_t)half), i = (int)(t % (size_t)half);
    const float e = (float)(2 * i) / (float)hd;
    const float p = (float)pow((double)theta, (double)e);
    const float inv_freq = 1.0f / p;
    const float ang = (float)pos[r] * inv_freq;
    cs[t] = (float)cos((double)ang);
    sn[t] = (float)sin((double)ang);
}

/* thread (r, h, i) rotates pair (i, i + half) of head h of row r */
__global__ void rope_apply_k(float *x, const float *cs, const float *sn, int m, int n_heads, int hd) {
    CU_PDL_ENTRY();
    const int half = hd / 2;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)m * (size_t)n_heads * (size_t)half) return;
    const int i = (int)(t % (size_t)half);
    const size_t rh = t / (size_t)half;
    const int r = (int)(rh / (size_t)n_heads);
    const float c = cs[(size_t)r * half + i], s = sn[(size_t)r * half + i];
    float *v = x + rh * (size_t)hd;
    rope_pair(v + i, v + i + half, v[i], v[i + half], c, s);
}

/* The table of the last positions rotated. A forward rotates every
 * layer's q and k at the same positions: the first call computes the table
 * (one launch, the double-precision cos/sin), the other 2·layers − 1 calls
 * only rotate. Keyed on the positions' values (host memory, compared at
 * issue time: the table kernel is queued ahead of every call that reads
 * it), m, head_dim, theta and the table's buffer. Positions in device
 * memory are not host-readable in a region: their table is rebuilt. */
static struct {
    int *pos;
    int m, cap, hd;
    float theta;
    void *buf;
    const int *dpos;       /* positions in device memory (a step buffer): the table of these */
    unsigned long region;  /* while cu_region() is this (no push since, no new recording) */
} g_rope;

void cuda_rope(float *x, const int *pos, int m, int n_heads, int head_dim, float theta) {
    const int half = head_dim / 2;
    if (m <= 0 || half <= 0 || n_heads <= 0) return;
    /* the head norm before this RoPE, as one kernel */
    const int fused = g_op.kind == HELD_NORM && take_op(HELD_NORM, x, m * n_heads, head_dim);
    const float *ng = g_op.g;
    const float neps = g_op.eps;
    cu_begin();
    const size_t tab = (size_t)m * half;
    float *cs = (float *)cu_scratch(CU_SCRATCH_ROPE, 2 * tab * sizeof(float)), *sn = cs + tab;
    const int host = !cu_on_device(pos);
    const int same = g_rope.buf == cs && g_rope.m == m && g_rope.hd == head_dim && g_rope.theta == theta &&
                     (host ? !g_rope.dpos && !memcmp(g_rope.pos, pos, (size_t)m * sizeof(int))
                           : g_rope.dpos == pos && g_rope.region == cu_region());
    if (!same) {
        const int *dpos = (const int *)cu_in(pos, (size_t)m * sizeof(int));
        CU_LAUNCH(rope_table_k, (unsigned)((tab + OPS_THREADS - 1) / OPS_THREADS), OPS_THREADS)(cs, sn, dpos, m,
                                                                                              head_dim, theta);
        g_rope.m = -1;
        g_rope.dpos = NULL;
        if (!host) {   /* device positions: kept for the rest of this region (cu_region) */
            g_rope.dpos = pos;
            g_rope.region = cu_region();
            g_rope.m = m;
            g_rope.hd = head_dim;
            g_rope.theta = theta;
            g_rope.buf = cs;
        } else {
            if (m > g_rope.cap) {
                int *q = (int *)realloc(g_rope.pos, (size_t)m * sizeof(int));
                if (!q) {
                    fprintf(stderr, "specbed: CUDA rope: out of host memory\n");
                    abort();
                }
                g_rope.pos = q;
                g_rope.cap = m;
            }
            memcpy(g_rope.pos, pos, (size_t)m * sizeof(int));
            g_rope.m = m;
            g_rope.hd = head_dim;
            g_rope.theta = theta;
            g_rope.buf = cs;
        }
    }
    float *dx = (float *)cu_out(x, (size_t)m * n_heads * head_dim * sizeof(float), 1);
    if (fused && dx == x) {   /* held in turn: a KV store of these rows may join it */
        g_op.kind = HELD_NORM_ROPE;
        g_op.x = dx;
        g_op.g = ng;
        g_op.m = m * n_heads;
        g_op.n = head_dim;
        g_op.eps = neps;
        g_op.cs = cs;
        g_op.sn = sn;
        g_op.n_heads = n_heads;
    } else if (fused) {
        launch_norm<NORM_ROPE>(dx, dx, NULL, ng, m * n_heads, head_dim, neps, cs, sn, n_heads);
    } else {
        const size_t threads = tab * (size_t)n_heads;
        CU_LAUNCH(rope_apply_k, (unsigned)((threads + 255) / 256), 256)(dx, cs, sn, m, n_heads, head_dim);
    }
    cu_end(fused ? "rmsnorm + rope" : "rope");
}

/* ---- SwiGLU and add: element-wise ------------------------------------------- */

__global__ void swiglu_k(float *out, const float *gate, const float *up, size_t n) {
    CU_PDL_ENTRY();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float g = gate[i];
        out[i] = (g / (1.0f + kb_expf(-g))) * up[i];   /* torch's silu, as cpu_pointwise.c */
    }
}

__global__ void add_k(float *x, const float *y, size_t n) {
    CU_PDL_ENTRY();
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
    if (cuda_matmul_take_swiglu(out, gate, up, m, n)) return;   /* in the gate/up matmul's epilogue */
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
    if (cu_async_depth() && x != y && on_device_all(x, y, NULL)) {   /* an RMSNorm of x may follow */
        hold_op(HELD_ADD, x, y, NULL, m, n, 0.0f);
        return;
    }
    cu_begin();
    const float *dy = (const float *)cu_in(y, bytes);
    float *dx = (float *)cu_out(x, bytes, 1);
    CU_LAUNCH(add_k, grid_for(total), 256)(dx, dy, total);
    cu_end("add");
}

/* ---- rows to scattered destinations (the KV slots of a forward's rows) ------- */

/* Block i copies row i to dst[i] + delta bytes; dst[i] is device or
 * managed memory (backend.h). */
/* One row copied by a block: 8 loads in flight before the stores (the first
 * GPU run stored each element before loading the next: 5.2 µs for a 4 KiB
 * row). */
__device__ __forceinline__ void block_copy_row(float *__restrict__ d, const float *__restrict__ s, int row_floats) {
    for (int j0 = 0; j0 < row_floats; j0 += 8 * (int)blockDim.x) {
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int j = j0 + i * (int)blockDim.x + (int)threadIdx.x;
            v[i] = j < row_floats ? s[j] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int j = j0 + i * (int)blockDim.x + (int)threadIdx.x;
            if (j < row_floats) d[j] = v[i];
        }
    }
}

__global__ void scatter_rows_k(float *const *dst, long long delta0, const float *src0, long long delta1,
                               const float *src1, int row_floats) {
    CU_PDL_ENTRY();
    /* blockIdx.y: the first or the second scatter of a pair (a layer's K and V) */
    const long long delta = blockIdx.y ? delta1 : delta0;
    const float *src = blockIdx.y ? src1 : src0;
    block_copy_row((float *)((char *)dst[blockIdx.x] + delta), src + (size_t)blockIdx.x * row_floats, row_floats);
}

/* A forward scatters each layer's K rows and then its V rows to slots
 * that are the first call's slots moved by one distance (the next
 * layer's pool, or the V pool beside the K pool): the pointer array is
 * staged once and the later calls pass the distance, while the ring keeps
 * the staged bytes (each staged copy is a graph node: two a layer). The
 * distance is checked for every row at issue time, so any other layout
 * just stages its own array. */
static struct {
    float **base;   /* host copy of the staged array */
    int n, cap;
    unsigned long epoch;
    float *const *dev;
} g_scat = {NULL, 0, 0, ~0ul, NULL};

/* A layer scatters its K rows and then its V rows to slots the same
 * pointer array reaches (above): inside a region the first is held and
 * the second joins it, one launch of two block rows (flushed alone by
 * anything else, as cuda_matmul's held calls). */
static struct {
    int held;
    float *const *dd;
    long long delta;
    const float *src;
    int n, rf;
} g_hs;

static void launch_scatter(float *const *dd, long long d0, const float *s0, long long d1, const float *s1, int n,
                           int rf, int pair) {
    CU_LAUNCH(scatter_rows_k, dim3((unsigned)n, pair ? 2u : 1u), 128)(dd, d0, s0, d1, s1, rf);
}

/* With the lock held (cuda_ops_flush). */
static void scatter_flush(void) {
    if (!g_hs.held) return;
    g_hs.held = 0;
    launch_scatter(g_hs.dd, g_hs.delta, g_hs.src, 0, NULL, g_hs.n, g_hs.rf, 0);
}

void cuda_scatter_rows(float *const dst[], const float *src, int n, int row_floats) {
    if (n <= 0 || row_floats <= 0) return;
    cu_lock();   /* a held scatter this one may join, taken out before cu_begin would launch it */
    const int taken = g_hs.held && g_hs.n == n && g_hs.rf == row_floats;
    const float *const *t_dd = g_hs.dd;
    const long long t_delta = g_hs.delta;
    const float *t_src = g_hs.src;
    if (taken) g_hs.held = 0;
    cu_unlock();
    cu_begin();
    /* first: staging may reset the ring (the first staging of a call), and
     * nothing staged after the reuse decision may */
    const float *ds = (const float *)cu_in(src, (size_t)n * (size_t)row_floats * sizeof(float));
    float *const *dd = NULL;
    long long delta = 0;
    if (g_scat.epoch == cu_ring_epoch() && g_scat.n == n) {
        delta = (long long)((const char *)dst[0] - (const char *)g_scat.base[0]);
        dd = g_scat.dev;
        for (int i = 1; i < n && dd; i++)
            if ((long long)((const char *)dst[i] - (const char *)g_scat.base[i]) != delta) dd = NULL;
    }
    if (!dd) {
        if (taken) launch_scatter((float *const *)t_dd, t_delta, t_src, 0, NULL, n, row_floats, 0);   /* before
                                                                    staging anew can move the ring */
        if (n > g_scat.cap) {
            float **b = (float **)realloc(g_scat.base, (size_t)n * sizeof *b);
            if (!b) {
                fprintf(stderr, "specbed: CUDA scatter_rows: out of host memory\n");
                abort();
            }
            g_scat.base = b;
            g_scat.cap = n;
        }
        memcpy(g_scat.base, dst, (size_t)n * sizeof *dst);
        dd = (float *const *)cu_in(dst, (size_t)n * sizeof *dst);
        delta = 0;
        g_scat.dev = dd;
        g_scat.n = n;
        g_scat.epoch = cu_ring_epoch();
    } else if (taken) {   /* the same pointer array: one launch for both */
        if ((float *const *)t_dd == dd) launch_scatter(dd, t_delta, t_src, delta, ds, n, row_floats, 1);
        else {
            launch_scatter((float *const *)t_dd, t_delta, t_src, 0, NULL, n, row_floats, 0);
            launch_scatter(dd, delta, ds, 0, NULL, n, row_floats, 0);
        }
        cu_end("scatter_rows");
        return;
    }
    if (cu_async_depth() && cu_on_device(src)) {   /* the V rows may follow */
        g_hs.held = 1;
        g_hs.dd = dd;
        g_hs.delta = delta;
        g_hs.src = ds;
        g_hs.n = n;
        g_hs.rf = row_floats;
    } else {
        launch_scatter(dd, delta, ds, 0, NULL, n, row_floats, 0);
    }
    cu_end("scatter_rows");
}

/* ---- rows into slots (kb_store_rows: a layer's K and V, taps) ------------------ */

/* Block i copies row i of src to slot slots[i] of dst; blockIdx.y picks
 * the pair's first or second (dst, src). */
__global__ void store_rows_k(float *dst0, const float *src0, float *dst1, const float *src1, const int *slots,
                             int row_floats) {
    CU_PDL_ENTRY();
    block_copy_row((blockIdx.y ? dst1 : dst0) + (size_t)slots[blockIdx.x] * row_floats,
                   (blockIdx.y ? src1 : src0) + (size_t)blockIdx.x * row_floats, row_floats);
}

void cuda_store_rows(float *dst0, const float *src0, float *dst1, const float *src1, const int *slots, int n,
                     int row_floats) {
    if (n <= 0 || row_floats <= 0) return;
    if (!cu_on_device(dst0) || (dst1 && !cu_on_device(dst1))) {
        fprintf(stderr, "specbed: CUDA store_rows: the destinations must be device memory\n");
        abort();
    }
    /* a layer's K rows, normed and rotated by the held call, and its V rows: one kernel */
    cu_lock();
    const int join = g_op.kind == HELD_NORM_ROPE && dst1 && g_op.x == src0 && g_op.n > 0 &&
                     row_floats == g_op.n_heads * g_op.n && g_op.m == n * g_op.n_heads && cu_on_device(src1) &&
                     cu_on_device(slots);
    if (join) g_op.kind = HELD_NONE;
    cu_unlock();
    if (join) {
        cu_begin();
        const norm_store st = {dst0, dst1, src1, slots};
        launch_norm<NORM_ROPE_STORE>(g_op.x, g_op.x, NULL, g_op.g, g_op.m, g_op.n, g_op.eps, g_op.cs, g_op.sn,
                                     g_op.n_heads, st);
        cu_end("rmsnorm + rope + kv store");
        return;
    }
    cu_begin();
    const size_t rb = (size_t)n * (size_t)row_floats * sizeof(float);
    const float *s0 = (const float *)cu_in(src0, rb);
    const float *s1 = dst1 ? (const float *)cu_in(src1, rb) : NULL;
    const int *ds = (const int *)cu_in(slots, (size_t)n * sizeof(int));
    for (int i0 = 0; i0 < n; i0 += 65535) {   /* gridDim.x has room; kept for symmetry with weight_rows */
        const int m = n - i0 < 65535 ? n - i0 : 65535;
        CU_LAUNCH(store_rows_k, dim3((unsigned)m, dst1 ? 2u : 1u), 128)(dst0, s0 + (size_t)i0 * row_floats, dst1,
                                                                      s1 ? s1 + (size_t)i0 * row_floats : NULL,
                                                                      ds + i0, row_floats);
    }
    cu_end("store_rows");
}

/* ---- embedding rows ---------------------------------------------------------- */

/* Row blockIdx.y of the batch: w's row rows[blockIdx.y]. */
__global__ void weight_rows_k(float *dst, const void *w, const int *rows, kb_dtype dt, int cols) {
    CU_PDL_ENTRY();
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
 * Split context (flash-decoding, as FlashDecoding, FlashInfer and vLLM's
 * paged attention v2 do it). A row's positions 0..n_ctx−1 are cut into
 * chunks of ATT_CHUNK positions counted from position 0 — a constant of
 * the kernel, never derived from the batch, the rows or the grid — and a
 * block per (row, q head, chunk c) computes over its positions
 * P = [c·C, min(c·C + C, n_ctx)), slot i being position c·C + i:
 *   s_p = (q·k_p)·scale       a warp per position: lane L the fma chain over
 *                             d = L, L+32, … in increasing d, then the 32
 *                             lanes summed in one fixed tree (lanes paired
 *                             across bit 4, then 3, 2, 1, 0);
 *   m_c = max_{p∈P} s_p       (a max: any order gives the same value)
 *   e_p = kb_expf(s_p − m_c)
 *   l_c = Σ_p e_p             a fixed halving tree over the chunk's C slots
 *                             (zero past n_ctx);
 *   o_c[d] = Σ_p e_p·v_p[d]   warp w the fma chain over slots 32w..32w+31 in
 *                             increasing p, then ((w0+w1)+(w2+w3))+((w4+w5)+(w6+w7));
 * and a second kernel, a block per (row, q head), combines the row's own
 * ceil(n_ctx/C) chunks in chunk order:
 *   M = max_c m_c,  f_c = kb_expf(m_c − M),
 *   L = Σ_c f_c·l_c,  O[d] = Σ_c f_c·o_c[d]   (fma chains in increasing c),
 *   out[d] = O[d] / L.
 * Every operation of a (row, head) is fixed by its q, its context and
 * n_ctx alone: chunks start at absolute positions, a slot's lane and warp
 * are fixed, and the combine walks the row's own chunks. So a row alone,
 * in a span, beside other sequences, or in a launch whose grid has more
 * chunks than it needs (the recorded forward's bound: those blocks return
 * at once, writing nothing, and the combine never reads them) gives the
 * same bits; a row of one chunk goes through the same combine
 * (f_0 = kb_expf(0) = 1 exactly, L = l_0, O = o_0) whatever its
 * neighbours' lengths, so no row's bits change when another row crosses a
 * chunk. The order is not the CPU's (cpu_attention.c: one fma chain over
 * all positions); tests/test_cuda.c bounds the difference.
 * Loads: a warp reads a K or V row's head_dim floats as consecutive
 * 128-byte lines (lane L the floats L + 32j), 8 positions per warp in
 * flight in the scores and in P·V.
 * Tiles: a call of more than ATT_TILE_MIN_ROWS rows (a prefill chunk)
 * gives a block ATT_TILE consecutive rows instead of one. When they share
 * a page list (one sequence: the usual case) each K and V row is loaded
 * once and fed to every row's own chain; otherwise each row loads its own.
 * Each row still gets exactly the operations above, in the same order
 * (its positions past its own length recomputed and dropped, its P·V
 * chain stopping at its length, its trees in turn), so the tile changes
 * no bits (test_cuda: wide calls = rows alone) and only the traffic.
 * Fewer rows keep a block per row: batched decode's rows are of different
 * sequences, and a block each keeps the SMs busy.
 *
 * Roofline — a PREDICTION, no GPU has run this version. Qwen3-0.6B's shape
 * (16 q heads, 8 kv heads, head_dim 128), one decode row at a 4,096-token
 * context: K and V are 8 × 128 × 4 B = 4 KiB each per position, so
 * 2 × 4 KiB × 4,096 = 32 MiB (33.5 MB) per layer from DRAM (each kv head's
 * bytes are read by its 2 q heads' blocks, which are adjacent in the grid
 * and run side by side, the second from L2). Before (one block per (row,
 * head)): 16 blocks on 132 SMs, each thread's P·V one 4,096-step chain 32
 * loads ahead, ~128 serial DRAM round trips of ~0.7 µs: ~100 µs a layer.
 * Now: 16 heads × 16 chunks = 256 blocks, ~2 per SM, all resident at once,
 * bound by bandwidth: 33.5 MB / ~3 TB/s ≈ 11 µs a layer, plus the combine
 * (16 blocks reading 16 × 16 × 130 floats = 133 KB: a few µs of latency,
 * its launch overlapped by PDL). At bench_engine's 256-token history a
 * head is one chunk, 16 blocks as before, each ~4 round trips for the
 * scores (64 positions in flight) and ~4 for P·V (8 a warp): ~6 µs plus
 * the combine's ~1.5, about the old kernel's 8.6 µs measured on the H200
 * (bench/RECORD.md): no gain expected there. Prefill, 2,048 rows of one
 * sequence: each (row, head) reads its context's K and V (1 KB a position
 * and head), ~34 GB a layer into the SMs with a block per row, mostly from
 * L2 (~100–175 ms over 28 layers at 5–10 TB/s); tiles of 4 rows read a
 * quarter, ~8.6 GB a layer: ~25–45 ms predicted, the fp32 fmas (~17
 * GFLOP a layer, ~7 ms in all) and the per-row trees (~9 ms) beside it.
 * 117 registers at head_dim 128 (ptxas, sm_90): 2 blocks an SM; a tile of
 * 8 took 193 (one block an SM). A wide call through kb_attention_idx
 * launches a block per (tile, head, chunk of the bound), most of them
 * empty, and keeps (head_dim + 2) floats per chunk of each (row, head) in
 * scratch: at 2,048 rows, 16 heads and a 4,096 bound, 272 MB. */
#define ATT_CHUNK 256             /* positions per block: a constant, never of the call */
#define ATT_THREADS 256           /* 8 warps, one thread per slot of a chunk */
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_QREG 8                /* most q (and P·V sums) per lane in registers */
#define ATT_HB (32 * ATT_QREG)    /* head_dim elements per P·V pass: 256, one pass for head_dim ≤ 256 */
#define ATT_COMBINE_THREADS 128
#define ATT_TILE 4                /* rows a block in a wide call (attend_launch) */
#define ATT_TILE_MIN_ROWS 64      /* wider than this: tiles */
static_assert(ATT_THREADS == ATT_CHUNK && ATT_HB == ATT_THREADS && ATT_WARPS == 8,
              "a thread per slot and per P·V element; the warp tree below is of 8");

/* A block: the rows r0 .. r0 + RT − 1 (those below n_q) of head h, chunk c.
 * A chunk's partial: [m_c, l_c, o_c[0..hd)] at part + ((row·n_heads + head)·n_chunks + c)·(hd + 2).
 * G (1, 2, 4 or 8; att_groups): a lane's elements of a row, d = L + 32j
 * for j < G, every load unconditional (no branch between a row's loads
 * and the fmas, so all of them are issued first): an index past head_dim
 * reads element head_dim − 1 again, against a q of 0 in the scores
 * (fma(0, x, a) = a for the finite x a K row holds) and into a sum no
 * thread writes out in P·V, so the result is the same for any
 * G ≥ head_dim/32 (G follows head_dim alone in any case). head_dim > 256:
 * G = 8 and the rest one element a lane at a time. */
template <int G, int RT>
__global__ void __launch_bounds__(ATT_THREADS)
    attend_chunk_k(float *part, const float *q, const float *kp, const float *vp, const int *page_cat,
                   const int *page_off, const int *n_ctx, int page_size, int n_kv, int hd, int n_heads, float scale,
                   int n_chunks, int n_q) {
    CU_PDL_ENTRY();
    const int bx = (int)blockIdx.x, c = (int)blockIdx.y, r0 = bx / n_heads * RT, h = bx % n_heads;
    const int p0 = c * ATT_CHUNK;
    /* the tile's rows r0 + ρ (ρ < nr): each row's own chunk length (0: the
     * chunk is past its context, and the row writes nothing) */
    const int nr = n_q - r0 < RT ? n_q - r0 : RT;
    int len[RT], lmax = 0;
    const int *pages[RT];
    bool same = true;   /* every row of the tile on one page list: K and V read once for all */
#pragma unroll
    for (int u = 0; u < RT; u++) {
        const int n = u < nr ? n_ctx[r0 + u] : 0;
        len[u] = n - p0 <= 0 ? 0 : n - p0 < ATT_CHUNK ? n - p0 : ATT_CHUNK;
        lmax = len[u] > lmax ? len[u] : lmax;
        pages[u] = page_cat + (u < nr ? page_off[r0 + u] : page_off[r0]);
        same = same && (u >= nr || pages[u] == pages[0]);
    }
    if (lmax == 0) return;   /* past every row's context: the combine reads only a row's own chunks */
    const int kvh = h / (n_heads / n_kv);
    const size_t slot = (size_t)n_kv * hd, page_stride = (size_t)page_size * slot, head_off = (size_t)kvh * hd;
    const int t = (int)threadIdx.x, lane = t & 31, warp = t >> 5;
    __shared__ float s[RT][ATT_CHUNK];
    __shared__ float red[ATT_THREADS];
    __shared__ float po[ATT_WARPS][ATT_HB];

    /* scores: warp w takes slots i0 + 8w .. i0 + 8w + 7, all 8 rows' loads
     * in flight before the first fma; the 8 lane sums are then reduced
     * together: the lanes paired across bit 4 exchange half of them (4
     * shuffles), across bit 3 half again (2), across bit 2 (1), then
     * bits 1 and 0 (2): 9 shuffles for 8 positions, each position's sum
     * the same tree over the 32 lanes, slot (lane >> 2) & 7 in the 4 lanes
     * of that group. A tile's rows each get exactly that: one K row loaded
     * (when they share a page list) feeds each row's own chain. */
    const int last = hd - 1;
    float qr[RT][G];
#pragma unroll
    for (int u = 0; u < RT; u++)
#pragma unroll
        for (int j = 0; j < G; j++)
            qr[u][j] = u < nr && lane + 32 * j < hd ? q[((size_t)(r0 + u) * n_heads + h) * hd + lane + 32 * j] : 0.0f;
    for (int i0 = 0; i0 < lmax; i0 += 8 * ATT_WARPS) {   /* the same trip count in every warp (the shuffles) */
        float a[RT][8];
#pragma unroll
        for (int v8 = 0; v8 < 8; v8++) {
            int i = i0 + 8 * warp + v8;
            i = i < lmax ? i : lmax - 1;   /* past the end: recomputes the last, writes nothing */
            float kr[G];
            const float *k = kp;
            if (same) {   /* block-uniform: one K row for every row of the tile */
                const int p = p0 + i;
                k = kp + (size_t)pages[0][p / page_size] * page_stride + (size_t)(p % page_size) * slot + head_off;
#pragma unroll
                for (int j = 0; j < G; j++) kr[j] = k[lane + 32 * j < hd ? lane + 32 * j : last];
            }
#pragma unroll
            for (int u = 0; u < RT; u++) {
                if (!same) {   /* each row its own list, read only within its own context */
                    if (len[u] == 0) { a[u][v8] = 0.0f; continue; }
                    const int p = p0 + (i < len[u] ? i : len[u] - 1);
                    k = kp + (size_t)pages[u][p / page_size] * page_stride + (size_t)(p % page_size) * slot + head_off;
#pragma unroll
                    for (int j = 0; j < G; j++) kr[j] = k[lane + 32 * j < hd ? lane + 32 * j : last];
                }
                float acc = 0.0f;
#pragma unroll
                for (int j = 0; j < G; j++) acc = fmaf(qr[u][j], kr[j], acc);
                if (G == 8 && u < nr) {   /* head_dim > 256 (G < 8 covers head_dim: no branch between the loads) */
                    const float *qh = q + ((size_t)(r0 + u) * n_heads + h) * hd;
                    for (int d = lane + 32 * G; d < hd; d += 32) acc = fmaf(qh[d], k[d], acc);
                }
                a[u][v8] = acc;
            }
        }
        const int b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
        const int i = i0 + 8 * warp + ((lane >> 2) & 7);
#pragma unroll
        for (int u = 0; u < RT; u++) {
            float x[4], y[2];
#pragma unroll
            for (int j = 0; j < 4; j++)
                x[j] = (b4 ? a[u][4 + j] : a[u][j]) + __shfl_xor_sync(0xffffffffu, b4 ? a[u][j] : a[u][4 + j], 16);
#pragma unroll
            for (int j = 0; j < 2; j++)
                y[j] = (b3 ? x[2 + j] : x[j]) + __shfl_xor_sync(0xffffffffu, b3 ? x[j] : x[2 + j], 8);
            float z = (b2 ? y[1] : y[0]) + __shfl_xor_sync(0xffffffffu, b2 ? y[0] : y[1], 4);
            z = z + __shfl_xor_sync(0xffffffffu, z, 2);
            z = z + __shfl_xor_sync(0xffffffffu, z, 1);
            if ((lane & 3) == 0 && i < len[u]) s[u][i] = z * scale;
        }
    }
    __syncthreads();
    /* each row's max and sum of exps, in turn */
#pragma unroll 1
    for (int u = 0; u < nr; u++) {
        const int lu = len[u];
        if (lu == 0) continue;   /* block-uniform */
        red[t] = t < lu ? s[u][t] : -INFINITY;
        __syncthreads();
        for (int w = ATT_THREADS / 2; w > 0; w /= 2) {
            if (t < w && red[t + w] > red[t]) red[t] = red[t + w];
            __syncthreads();
        }
        const float m = red[0];
        __syncthreads();
        const float e = t < lu ? kb_expf(s[u][t] - m) : 0.0f;
        s[u][t] = e;
        red[t] = e;
        __syncthreads();
        for (int w = ATT_THREADS / 2; w > 0; w /= 2) {
            if (t < w) red[t] = red[t] + red[t + w];
            __syncthreads();
        }
        float *pc = part + (((size_t)(r0 + u) * n_heads + h) * n_chunks + c) * ((size_t)hd + 2);
        if (t == 0) {
            pc[0] = m;
            pc[1] = red[0];
        }
        __syncthreads();   /* red[0] read before the next row's tree */
    }

    /* P·V: warp w the slots 32w..32w+31 in increasing order (a V row's
     * loads coalesced across the lanes, 8 rows' loads issued ahead of their
     * fmas), each tile row's chain stopping at its own length; then the 8
     * warps' sums in a fixed tree, one thread per element */
    const int w0 = 32 * warp, w1 = lmax < w0 + 32 ? lmax : w0 + 32;
    for (int d0 = 0; d0 < hd; d0 += 32 * G) {
        float acc[RT][G];
#pragma unroll
        for (int u = 0; u < RT; u++)
#pragma unroll
            for (int j = 0; j < G; j++) acc[u][j] = 0.0f;
#pragma unroll 4
        for (int i = w0; i < w1; i++) {
            const int p = p0 + i;
            float vr[G];
            if (same) {   /* block-uniform: one V row for every row of the tile (i < lmax) */
                const float *v =
                    vp + (size_t)pages[0][p / page_size] * page_stride + (size_t)(p % page_size) * slot + head_off + d0;
#pragma unroll
                for (int j = 0; j < G; j++) vr[j] = v[d0 + lane + 32 * j < hd ? lane + 32 * j : last - d0];
            }
#pragma unroll
            for (int u = 0; u < RT; u++) {
                if (i >= len[u]) continue;   /* warp-uniform; a row's slots are a prefix */
                if (!same) {
                    const float *v = vp + (size_t)pages[u][p / page_size] * page_stride + (size_t)(p % page_size) * slot +
                                     head_off + d0;
#pragma unroll
                    for (int j = 0; j < G; j++) vr[j] = v[d0 + lane + 32 * j < hd ? lane + 32 * j : last - d0];
                }
                const float ei = s[u][i];
#pragma unroll
                for (int j = 0; j < G; j++) acc[u][j] = fmaf(ei, vr[j], acc[u][j]);
            }
        }
#pragma unroll
        for (int u = 0; u < RT; u++) {
            if (u >= nr || len[u] == 0) continue;   /* block-uniform */
#pragma unroll
            for (int j = 0; j < G; j++) po[warp][lane + 32 * j] = acc[u][j];
            __syncthreads();
            float *pc = part + (((size_t)(r0 + u) * n_heads + h) * n_chunks + c) * ((size_t)hd + 2);
            if (d0 + t < hd)
                pc[2 + d0 + t] = ((po[0][t] + po[1][t]) + (po[2][t] + po[3][t])) +
                                 ((po[4][t] + po[5][t]) + (po[6][t] + po[7][t]));
            __syncthreads();
        }
    }
}

/* A block per (row, q head): the row's chunks combined in chunk order. */
__global__ void __launch_bounds__(ATT_COMBINE_THREADS)
    attend_combine_k(float *out, const float *part, const int *n_ctx, int n_heads, int hd, int n_chunks) {
    CU_PDL_ENTRY();
    const int rh = (int)blockIdx.x, n = n_ctx[rh / n_heads];
    int nc = (n + ATT_CHUNK - 1) / ATT_CHUNK;
    nc = nc < n_chunks ? nc : n_chunks;   /* n_ctx ≤ the launch's bound (backend.h); never read past the grid's */
    const size_t rec = (size_t)hd + 2;
    const float *pr = part + (size_t)rh * n_chunks * rec;
    float mx = -INFINITY;
    for (int c = 0; c < nc; c++) mx = pr[c * rec] > mx ? pr[c * rec] : mx;
    float l = 0.0f;
    for (int c = 0; c < nc; c++) l = fmaf(kb_expf(pr[c * rec] - mx), pr[c * rec + 1], l);
    for (int d = (int)threadIdx.x; d < hd; d += (int)blockDim.x) {
        float o = 0.0f;
        for (int c = 0; c < nc; c++) o = fmaf(kb_expf(pr[c * rec] - mx), pr[c * rec + 2 + d], o);
        out[(size_t)rh * hd + d] = nc > 0 ? o / l : 0.0f;
    }
}

/* G of attend_chunk_k for head_dim hd */
static int att_groups(int hd) { return hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : 8; }

/* The chunks of a launch over contexts of at most max_ctx: from the bound,
 * never from the rows' own n_ctx. */
static int att_chunks(int max_ctx) { return (max_ctx + ATT_CHUNK - 1) / ATT_CHUNK; }

/* The partials of n_q rows (CU_SCRATCH_ATT, grown): before the call's
 * staging of its index arrays, like any scratch (cuda_attention_spans). */
static float *att_partials(int n_q, int n_heads, int hd, int max_ctx) {
    const int n_chunks = att_chunks(max_ctx);
    const size_t rh = (size_t)n_q * n_heads;
    if (n_chunks < 1 || n_chunks > 65535 || rh > 0x7fffffffu) {   /* gridDim.y's and .x's limits */
        fprintf(stderr, "specbed: CUDA attention: %zu (row, head) pairs over a %d-position bound\n", rh, max_ctx);
        abort();
    }
    return (float *)cu_scratch(CU_SCRATCH_ATT, rh * (size_t)n_chunks * ((size_t)hd + 2) * sizeof(float));
}

/* The two launches over n_q rows whose contexts are at most max_ctx: the
 * chunks' grid and the partials' layout from the bound, each row's
 * arithmetic from its own n_ctx. */
static void attend_launch(float *out, float *part, const float *q, const float *kp, const float *vp,
                          const int *page_cat, const int *page_off, const int *n_ctx, int n_q, int max_ctx,
                          int page_size, int n_kv, int hd, int n_heads, float scale) {
    const int n_chunks = att_chunks(max_ctx);
    /* tiles of ATT_TILE rows for a wide call (a prefill chunk, a long
     * verify span: K and V read once a tile); a row a block below, where
     * the rows are few and likely of different sequences (batched decode),
     * so that every row keeps a block of its own. Either gives every row
     * the same bits (attend_chunk_k). */
    const int rt = n_q > ATT_TILE_MIN_ROWS ? ATT_TILE : 1;
    const dim3 grid((unsigned)((n_q + rt - 1) / rt * n_heads), (unsigned)n_chunks);
#define ATT_GO(G, RT)                                                                                                 \
    CU_LAUNCH((attend_chunk_k<G, RT>), grid, ATT_THREADS)(part, q, kp, vp, page_cat, page_off, n_ctx, page_size, n_kv, \
                                                         hd, n_heads, scale, n_chunks, n_q)
#define ATT_GO_G(RT)                                  \
    switch (att_groups(hd)) {                         \
    case 1: ATT_GO(1, RT); break;                     \
    case 2: ATT_GO(2, RT); break;                     \
    case 4: ATT_GO(4, RT); break;                     \
    default: ATT_GO(8, RT);                           \
    }
    if (rt == 1) { ATT_GO_G(1) } else { ATT_GO_G(ATT_TILE) }
#undef ATT_GO_G
#undef ATT_GO
    CU_LAUNCH(attend_combine_k, (unsigned)(n_q * n_heads), ATT_COMBINE_THREADS)(out, part, n_ctx, n_heads, hd, n_chunks);
}

/* One launch over the rows of n_spans spans: span s is the next
 * span_rows[s] rows over views[s]. The spans' page lists (as far as their
 * rows reach) are laid end to end in one staged array and each row gets
 * its list's offset. n_ctx and the page lists are host-readable
 * (backend.h): the extent of what the kernel touches is found here. */
static int *g_page_cat, *g_page_off;   /* host staging of the lists, grown; under the bracket's lock */
static size_t g_page_cat_cap, g_page_off_cap;
static struct {   /* the last call's page lists, offsets and n_ctx, and their staged copy */
    int *host;
    size_t cap, n_cat;
    int n_q;
    unsigned long epoch;
    const int *dev;
} g_idx = {NULL, 0, 0, 0, ~0ul, NULL};

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
    const float *dk = kv->k_pages, *dv = kv->v_pages;
    if (!cu_on_device(dk) || !cu_on_device(dv)) {   /* a host KV pool (tests): stage the pages in use */
        const size_t bytes = (size_t)(top + 1) * ps * n_kv * hd * sizeof(float);
        dk = (const float *)cu_in(dk, bytes);
        dv = (const float *)cu_in(dv, bytes);
    }
    const size_t qbytes = (size_t)n_q * n_heads * hd * sizeof(float);
    const float *dq = (const float *)cu_in(q, qbytes);
    float *dout = (float *)cu_out(out, qbytes, 0);
    float *part = att_partials(n_q, n_heads, hd, max_ctx);
    /* (after every other staging of the call: one may reset the ring, and
     * none may follow a decision to reuse its bytes.)
     * Every layer of a forward attends with the same page lists, offsets
     * and n_ctx: staged by the first layer, reused by the others while the
     * ring keeps the bytes (a staged copy is a graph node of its own; three
     * per layer were ~80 of a decode step's nodes). */
    const int *dcat, *doff, *dctx;
    const size_t idx_n = n_cat + 2 * (size_t)n_q;
    const int ctx_host = !cu_on_device(n_ctx);
    if (ctx_host && g_idx.epoch == cu_ring_epoch() && g_idx.n_cat == n_cat && g_idx.n_q == n_q &&
        !memcmp(g_idx.host, g_page_cat, n_cat * sizeof(int)) &&
        !memcmp(g_idx.host + n_cat, g_page_off, (size_t)n_q * sizeof(int)) &&
        !memcmp(g_idx.host + n_cat + n_q, n_ctx, (size_t)n_q * sizeof(int))) {
        dcat = g_idx.dev;
    } else {
        g_idx.host = (int *)grow(g_idx.host, &g_idx.cap, idx_n, sizeof(int));
        memcpy(g_idx.host, g_page_cat, n_cat * sizeof(int));
        memcpy(g_idx.host + n_cat, g_page_off, (size_t)n_q * sizeof(int));
        memcpy(g_idx.host + n_cat + n_q, n_ctx, (size_t)n_q * sizeof(int));   /* host-readable (backend.h) */
        dcat = (const int *)cu_in(g_idx.host, idx_n * sizeof(int));   /* one copy for the three */
        g_idx.dev = dcat;
        g_idx.n_cat = ctx_host ? n_cat : (size_t)-1;
        g_idx.n_q = n_q;
        g_idx.epoch = cu_ring_epoch();
    }
    doff = dcat + n_cat;
    dctx = dcat + n_cat + n_q;

    attend_launch(dout, part, dq, dk, dv, dcat, doff, dctx, n_q, max_ctx, ps, n_kv, hd, n_heads, scale);
    cu_end("attention");
}

/* The same kernels over lists a step buffer holds (backend.h
 * kb_attention_idx): nothing read on the host, the chunks' grid and the
 * partials' layout from the caller's bound (fixed for a recording), so a
 * recorded forward replays it as it stands whatever the step's n_ctx. */
void cuda_attention_idx(float *out, const float *q, const kb_kv_view *pool, const int *page_cat, int n_cat,
                        const int *page_off, const int *n_ctx, int n_q, int max_ctx, int n_heads, float scale) {
    if (n_q <= 0 || n_heads <= 0) return;
    const int hd = pool->head_dim, ps = pool->page_size, n_kv = pool->n_kv_heads;
    if (n_kv <= 0 || n_heads % n_kv || !cu_on_device(pool->k_pages) || !cu_on_device(pool->v_pages) || max_ctx < 1) {
        fprintf(stderr, "specbed: CUDA attention_idx: %d heads over %d kv heads, device pools, max_ctx %d\n",
                n_heads, n_kv, max_ctx);
        abort();
    }
    cu_begin();
    const size_t qbytes = (size_t)n_q * n_heads * hd * sizeof(float);
    const float *dq = (const float *)cu_in(q, qbytes);
    float *dout = (float *)cu_out(out, qbytes, 0);
    const int *dcat = (const int *)cu_in(page_cat, (size_t)(n_cat > 0 ? n_cat : 1) * sizeof(int));
    const int *doff = (const int *)cu_in(page_off, (size_t)n_q * sizeof(int));
    const int *dctx = (const int *)cu_in(n_ctx, (size_t)n_q * sizeof(int));
    float *part = att_partials(n_q, n_heads, hd, max_ctx);
    attend_launch(dout, part, dq, pool->k_pages, pool->v_pages, dcat, doff, dctx, n_q, max_ctx, ps, n_kv, hd,
                  n_heads, scale);
    cu_end("attention");
}

void cuda_attention(float *out, const float *q, const kb_kv_view *kv, int n_q, const int *n_ctx, int n_heads,
                    float scale) {
    cuda_attention_spans(out, q, kv, &n_q, 1, n_ctx, n_heads, scale);
}
