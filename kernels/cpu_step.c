/* cpu_step.c — a step's index memory, stores into slots, attention from
 * concatenated page lists, and record/replay (backend.h, "a step the host
 * does not rebuild"): the switch to the CUDA backend, and the CPU's own
 * versions, which are the existing kernels over host memory.
 * Owns: the kb_stepbuf of a CPU run (one malloc'd block).
 * Must not: compute anything the other CPU kernels do not: a row's bits
 * here are kb_attention_spans' and memcpy's, so the CPU and the CUDA
 * backend's tests compare the same definition. */
#include "backend.h"
#include "device_internal.h"

#include <stdlib.h>
#include <string.h>

struct kb_stepbuf {
    void *host;   /* the CPU's: host and device at once */
    void *cuda;   /* the CUDA backend's, when it made this one */
};

kb_stepbuf *kb_stepbuf_create(size_t bytes) {
    kb_stepbuf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    if (kb_dev_active) b->cuda = kb_dev_active->stepbuf_create(bytes);
    else b->host = calloc(1, bytes ? bytes : 1);
    if (!b->cuda && !b->host) {
        free(b);
        return NULL;
    }
    return b;
}

void kb_stepbuf_free(kb_stepbuf *b) {
    if (!b) return;
    if (b->cuda) kb_dev_cuda->stepbuf_free(b->cuda);
    free(b->host);
    free(b);
}

void *kb_stepbuf_host(kb_stepbuf *b) { return b->cuda ? kb_dev_cuda->stepbuf_host(b->cuda) : b->host; }
void *kb_stepbuf_dev(kb_stepbuf *b) { return b->cuda ? kb_dev_cuda->stepbuf_dev(b->cuda) : b->host; }

void kb_stepbuf_push(kb_stepbuf *b, size_t bytes) {
    if (b->cuda) kb_dev_cuda->stepbuf_push(b->cuda, bytes);
}

void kb_store_rows(float *dst0, const float *src0, float *dst1, const float *src1, const int *slots, int n,
                   int row_floats) {
    if (n <= 0 || row_floats <= 0) return;
    if (kb_dev_active) { kb_dev_active->store_rows(dst0, src0, dst1, src1, slots, n, row_floats); return; }
    const size_t rb = (size_t)row_floats * sizeof(float);
    for (int i = 0; i < n; i++) {
        memcpy(dst0 + (size_t)slots[i] * row_floats, src0 + (size_t)i * row_floats, rb);
        if (dst1) memcpy(dst1 + (size_t)slots[i] * row_floats, src1 + (size_t)i * row_floats, rb);
    }
}

/* On the CPU: the rows grouped into spans by their list (consecutive rows
 * with one offset), then kb_attention_spans: the same bits. */
void kb_attention_idx(float *out, const float *q, const kb_kv_view *pool, const int *page_cat, int n_cat,
                      const int *page_off, const int *n_ctx, int n_q, int max_ctx, int n_heads, float scale,
                      float *scratch, size_t scratch_floats) {
    if (n_q <= 0) return;
    if (kb_dev_active) {
        kb_dev_active->attention_idx(out, q, pool, page_cat, n_cat, page_off, n_ctx, n_q, max_ctx, n_heads, scale);
        return;
    }
    const size_t row = (size_t)n_heads * (size_t)pool->head_dim;
    for (int i0 = 0, i1; i0 < n_q; i0 = i1) {
        for (i1 = i0 + 1; i1 < n_q && page_off[i1] == page_off[i0]; i1++) {}
        kb_kv_view v = *pool;
        v.pages = page_cat + page_off[i0];
        kb_attention_span(out + (size_t)i0 * row, q + (size_t)i0 * row, &v, i1 - i0, n_ctx + i0, n_heads, scale,
                          scratch, scratch_floats);
    }
}

int kb_graph_begin(const void *key, size_t key_bytes) {
    return kb_dev_active ? kb_dev_active->graph_begin(key, key_bytes) : 0;
}

void kb_graph_end(void) {
    if (kb_dev_active) kb_dev_active->graph_end();
}
