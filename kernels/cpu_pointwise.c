/* cpu_pointwise.c — CPU backend: element-wise kernels (RoPE, SwiGLU, add).
 * Owns: matching HF's float32 formulas operation by operation, since these
 * have no reduction and so no batch-invariance question — only accuracy.
 * Must not: keep state between calls (no cached tables: a kernel is a pure
 * function of its arguments; a caller that rotates several tensors at the
 * same positions keeps kb_rope_table's output itself). */
#include "backend.h"
#include "cpu_internal.h"

#include <math.h>

/* HF Qwen3/Llama rotary ("default" rope type), in the same float32 steps:
 *   inv_freq[i] = 1 / theta^(float(2i)/float(d))   (float32 tensor ops)
 *   angle       = float(pos) * inv_freq[i]          (float32 product)
 *   out[i]      = x[i]·cos − x[i+d/2]·sin,  out[i+d/2] = x[i+d/2]·cos + x[i]·sin
 * pow/cos/sin are evaluated in double and rounded once to float, i.e. the
 * correctly rounded value; torch's vectorised float versions are within
 * 1 ulp of it (measured: 1 of 64 inv_freq entries differs by 1 ulp for
 * theta=1e6, d=128). The angle is formed in float like HF's, not in
 * double: its rounding (up to pos·2⁻²⁴ rad, ~4e-5 at position 680) is part
 * of what HF computes, and reproducing it keeps us closer (fixture goldens:
 * max |Δlogit| 1.14e-5 this way, 1.34e-5 with exact angles). */
typedef struct {
    float *x;                     /* kb_rope: rotated in place; NULL for kb_rope_table */
    float *cs, *sn;               /* kb_rope_table: the table written; NULL for kb_rope */
    const int *pos;
    int m, n_heads, head_dim, rows_per_chunk;
    float theta;
} rope_job;

static void inv_freqs(float *inv_freq, int head_dim, float theta) {
    for (int i = 0; i < head_dim / 2; i++) {
        float e = (float)(2 * i) / (float)head_dim;
        float p = (float)pow((double)theta, (double)e);
        inv_freq[i] = 1.0f / p;
    }
}

static void angles(float *cs, float *sn, int pos, const float *inv_freq, int half) {
    float fp = (float)pos;
    for (int i = 0; i < half; i++) {
        float ang = fp * inv_freq[i];
        cs[i] = (float)cos((double)ang);
        sn[i] = (float)sin((double)ang);
    }
}

static void rotate(float *x, const float *cs, const float *sn, int n_heads, int head_dim) {
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = a * cs[i] + (-b) * sn[i];
            v[i + half] = b * cs[i] + a * sn[i];
        }
    }
}

static void rope_rows(void *vp, int c, int slot) {
    (void)slot;
    const rope_job *j = vp;
    int half = j->head_dim / 2;
    float inv_freq[half > 0 ? half : 1], cs[half > 0 ? half : 1], sn[half > 0 ? half : 1];
    inv_freqs(inv_freq, j->head_dim, j->theta);
    int r1 = (c + 1) * j->rows_per_chunk < j->m ? (c + 1) * j->rows_per_chunk : j->m;
    for (int r = c * j->rows_per_chunk; r < r1; r++) {
        if (j->x) {
            angles(cs, sn, j->pos[r], inv_freq, half);
            rotate(j->x + (size_t)r * j->n_heads * j->head_dim, cs, sn, j->n_heads, j->head_dim);
        } else {
            angles(j->cs + (size_t)r * half, j->sn + (size_t)r * half, j->pos[r], inv_freq, half);
        }
    }
}

/* Rows are independent (each is one chunk's whole work), so the pool may
 * split them: the double-precision cos/sin per row is the cost (~1.3k
 * cycles per row at head_dim 64). 16 rows per chunk: splitting a few verify
 * rows costs more in hand-off than it saves (measured), a prefill chunk's
 * hundreds of rows gain. */
void kb_rope(float *x, const int *pos, int m, int n_heads, int head_dim, float theta) {
    if (m <= 0) return;
    if (kb_dev_active) { kb_dev_active->rope(x, pos, m, n_heads, head_dim, theta); return; }
    int per = 16;
    rope_job j = {.x = x, .pos = pos, .m = m, .n_heads = n_heads, .head_dim = head_dim, .rows_per_chunk = per,
                  .theta = theta};
    cpu_parallel(rope_rows, &j, (m + per - 1) / per, 0);
}

void kb_rope_table(float *cs, float *sn, const int *pos, int m, int head_dim, float theta) {
    if (m <= 0) return;
    int per = 16;
    rope_job j = {.cs = cs, .sn = sn, .pos = pos, .m = m, .head_dim = head_dim, .rows_per_chunk = per,
                  .theta = theta};
    cpu_parallel(rope_rows, &j, (m + per - 1) / per, 0);
}

void kb_rope_apply(float *x, const float *cs, const float *sn, int m, int n_heads, int head_dim) {
    const int half = head_dim / 2;
    for (int r = 0; r < m; r++)
        rotate(x + (size_t)r * n_heads * head_dim, cs + (size_t)r * half, sn + (size_t)r * half, n_heads, head_dim);
}

/* silu(g)·u with silu(g) = g / (1 + exp(−g)), torch's formula, exp being
 * kb_expf (≤ 1.01 ulp); the AVX2 version gives the scalar one's bits. */
typedef struct { float *out; const float *gate, *up; size_t total; } swiglu_job;
#define SWIGLU_CHUNK 32768

static void swiglu_scalar(float *out, const float *gate, const float *up, size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; i++) {
        float g = gate[i];
        out[i] = (g / (1.0f + kb_expf(-g))) * up[i];
    }
}

#if CPU_X86
/* The same float operations 8 lanes at a time: the same bits. */
__attribute__((target("avx2,fma"))) static void swiglu_avx2(float *out, const float *gate, const float *up,
                                                            size_t i0, size_t i1) {
    size_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = cpu_exp8_avx2(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));   /* −g, exactly */
        __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    swiglu_scalar(out, gate, up, i, i1);
}
#endif

static void swiglu_chunk(void *vp, int c, int slot) {
    (void)slot;
    const swiglu_job *j = vp;
    size_t i0 = (size_t)c * SWIGLU_CHUNK, i1 = i0 + SWIGLU_CHUNK < j->total ? i0 + SWIGLU_CHUNK : j->total;
#if CPU_X86
    if (cpu_path_get() != CPU_PATH_SCALAR) {
        swiglu_avx2(j->out, j->gate, j->up, i0, i1);
        return;
    }
#endif
    swiglu_scalar(j->out, j->gate, j->up, i0, i1);
}

void kb_swiglu(float *out, const float *gate, const float *up, int m, int n) {
    if (kb_dev_active) { if (m > 0 && n > 0) kb_dev_active->swiglu(out, gate, up, m, n); return; }
    size_t total = (size_t)m * (size_t)(n > 0 ? n : 0);
    swiglu_job j = {.out = out, .gate = gate, .up = up, .total = total};
    cpu_parallel(swiglu_chunk, &j, (int)((total + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK), 0);
}

void kb_add(float *x, const float *y, int m, int n) {
    if (kb_dev_active) { if (m > 0 && n > 0) kb_dev_active->add(x, y, m, n); return; }
    size_t total = (size_t)m * n;
    for (size_t i = 0; i < total; i++) x[i] += y[i];
}
