/* device_internal.h — the device switch between the CPU kernels (cpu_*.c)
 * and the CUDA backend (cuda_*.cu), shared by kernels/ alone; engine/ never
 * includes it.
 *
 * The CUDA backend is a table of functions. kb_dev_active points at it
 * while the device is "cuda" (each public kb_* compute call begins with
 * `if (kb_dev_active) return kb_dev_active->fn(...)`: one load and branch on
 * the CPU path); kb_dev_cuda points at it once CUDA has been selected at
 * least once, so that kb_free and the copies still recognise CUDA memory
 * after a switch back to "cpu". Both stay NULL in a process that never asks
 * for CUDA, and in a build without it (the table is then never linked).
 * Set only by kb_set_device (device.c), at startup, like the SIMD path. */
#ifndef SPECBED_DEVICE_INTERNAL_H
#define SPECBED_DEVICE_INTERNAL_H
#ifdef __cplusplus
extern "C" {   /* the .cu files are C++: backend.h's functions keep C linkage */
#endif
#include "backend.h"

typedef struct {
    /* memory */
    void *(*alloc)(size_t bytes);                 /* managed, zeroed; NULL on failure */
    int   (*free_if_ours)(void *p);               /* 1: p was CUDA memory and is freed */
    void  (*copy)(void *dst, const void *src, size_t bytes);   /* any host/managed/device pair */
    int   (*weight_upload)(kb_weight *w, const void *owner, char *err, size_t errlen);
    void  (*weight_release)(kb_weight *w);
    void  (*weight_release_owner)(const void *owner);
    void  (*weight_rows)(float *dst, const kb_weight *w, const int *rows, int n);
    void  (*scatter_rows)(float *const dst[], const float *src, int n, int row_floats);
    /* compute: backend.h's semantics */
    void  (*matmul)(float *y, const float *x, const kb_weight *w, int m);
    void  (*rmsnorm)(float *y, const float *x, const float *g, int m, int n, float eps);
    void  (*rope)(float *x, const int *pos, int m, int n_heads, int head_dim, float theta);
    void  (*swiglu)(float *out, const float *gate, const float *up, int m, int n);
    void  (*add)(float *x, const float *y, int m, int n);
    /* n_q rows of one sequence; row i over positions 0..n_ctx[i]−1 */
    void  (*attention)(float *out, const float *q, const kb_kv_view *kv, int n_q, const int *n_ctx,
                       int n_heads, float scale);
    /* span s: the next span_rows[s] rows over views[s] */
    void  (*attention_spans)(float *out, const float *q, const kb_kv_view *views, const int *span_rows,
                             int n_spans, const int *n_ctx, int n_heads, float scale);
    /* matmul mode: "invariant" | "cublas"; 0 ok, -1 unknown or unavailable */
    int   (*set_matmul)(const char *mode);
    const char *(*matmul_mode)(void);
    /* CUDA graphs: set 0 ok, -1 when on is asked of a device that failed the
     * probe; state as backend.h kb_cuda_graphs */
    int   (*set_graphs)(int on);
    int   (*graphs)(const char **why);
    /* stream order: backend.h kb_async_begin / kb_async_end / kb_wait */
    void  (*async_begin)(void);
    void  (*async_end)(void);
    void  (*wait)(void);
    void  (*counts)(kb_device_counts *c);
    /* programmatic dependent launch (cuda_internal.cuh), like graphs: set 0
     * ok, -1 when on is asked of a device that failed the probe; state 1
     * on, 0 off, -1 unavailable (*why) */
    int   (*set_pdl)(int on);
    int   (*pdl)(const char **why);
    /* a step the host does not rebuild (backend.h): step buffers (an
     * opaque handle of the backend's), stores into slots, attention from
     * concatenated page lists, record/replay */
    void *(*stepbuf_create)(size_t bytes);
    void  (*stepbuf_free)(void *b);
    void *(*stepbuf_host)(void *b);
    void *(*stepbuf_dev)(void *b);
    void  (*stepbuf_push)(void *b, size_t bytes);
    void  (*store_rows)(float *dst0, const float *src0, float *dst1, const float *src1, const int *slots, int n,
                        int row_floats);
    void  (*attention_idx)(float *out, const float *q, const kb_kv_view *pool, const int *page_cat, int n_cat,
                           const int *page_off, const int *n_ctx, int n_q, int max_ctx, int n_heads, float scale);
    int   (*graph_begin)(const void *key, size_t key_bytes);
    void  (*graph_end)(void);
    /* mixture of experts (cuda_moe.cu): backend.h's semantics; expert
     * weights in mapped host memory are released by their own calls
     * (kb_weight_release asks both: each frees only what it uploaded) */
    void  (*gather_rows)(float *dst, const float *src, const int *idx, int n, int row_floats);
    void  (*matmul_grouped)(int n_sets, float *const ys[], const kb_weight *const ws[], const float *x,
                            const int *start, int n_groups);
    void  (*combine_rows)(float *y, const float *src, const int *slots, const float *w, int n, int k,
                          int row_floats);
    void  (*set_experts_on_host)(int on);
    int   (*experts_on_host)(void);
    int   (*weight_upload_expert)(kb_weight *w, const void *owner, char *err, size_t errlen);
    void  (*expert_release)(kb_weight *w);
    void  (*expert_release_owner)(const void *owner);
} kb_cuda_ops;

extern const kb_cuda_ops *kb_dev_active;   /* non-NULL while the device is cuda */
extern const kb_cuda_ops *kb_dev_cuda;     /* non-NULL once cuda was selected */

/* The CUDA backend (cuda_backend.cu), linked only in a CUDA build: makes
 * device 0 current and checks it can run this build's code; 0 ok, else -1
 * and a message. Returns the table in *ops. */
int cuda_backend_init(const kb_cuda_ops **ops, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
