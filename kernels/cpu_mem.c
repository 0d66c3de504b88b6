/* cpu_mem.c — CPU backend: memory and dtype conversion.
 * Owns: kb_alloc/kb_free (host memory stands in for device memory),
 * host<->device copies, and the exact widening of bf16/f16 to f32 (a
 * dtype's width is dtype.c's: the CUDA backend needs it too, and must not
 * call into this file, which reads the device switch).
 * Must not: know about models or tensors' meaning; allocate anything it
 * does not hand back to the caller.
 * The widening conversions are exact (every bf16/f16 value is an f32
 * value), so they cannot break batch invariance. */
#include "backend.h"
#include "cpu_internal.h"

#include <stdlib.h>
#include <string.h>

/* calloc: large blocks come zeroed straight from the OS (lazily, page by
 * page), which matters for a KV pool of gigabytes that is mostly unused.
 * Kernels use unaligned loads, so calloc's 16-byte alignment is enough.
 * On cuda: managed memory (device_internal.h). kb_free and the copies ask
 * the CUDA backend whenever it has ever been selected, so memory from
 * either device may be freed or copied under either. */
void *kb_alloc(size_t bytes) {
    if (kb_dev_active) return kb_dev_active->alloc(bytes);
    return calloc(1, bytes ? bytes : 1);
}
void kb_free(void *p) {
    if (kb_dev_cuda && p && kb_dev_cuda->free_if_ours(p)) return;
    free(p);
}
void kb_copy_to_device(void *dst, const void *src, size_t bytes) {
    if (kb_dev_cuda) { kb_dev_cuda->copy(dst, src, bytes); return; }
    memcpy(dst, src, bytes);
}
void kb_copy_to_host(void *dst, const void *src, size_t bytes) {
    if (kb_dev_cuda) { kb_dev_cuda->copy(dst, src, bytes); return; }
    memcpy(dst, src, bytes);
}

void kb_scatter_rows(float *const dst[], const float *src, int n, int row_floats) {
    if (kb_dev_active) { kb_dev_active->scatter_rows(dst, src, n, row_floats); return; }
    for (int i = 0; i < n; i++) memcpy(dst[i], src + (size_t)i * row_floats, (size_t)row_floats * sizeof(float));
}

/* IEEE half -> float, exact, including subnormals, inf and NaN. Used where
 * F16C is absent and for tails. */
float cpu_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400u));
            man &= 0x3ffu;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* On the host on every device: the loader converts mmapped 1-D tensors
 * (norm vectors, biases) with it. */
void kb_to_f32(float *dst, const void *src, kb_dtype dt, size_t n) {
    switch (dt) {
    case KB_F32:
        memcpy(dst, src, n * sizeof(float));
        return;
    case KB_BF16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = cpu_bf16_to_f32(s[i]);
        return;
    }
    case KB_F16: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = cpu_f16_to_f32(s[i]);
        return;
    }
    }
}

/* On cuda w->data is device memory (kb_weight_upload): the CUDA backend
 * converts the row there. */
void kb_weight_rows(float *dst, const kb_weight *w, const int *rows, int n) {
    if (kb_dev_active) { kb_dev_active->weight_rows(dst, w, rows, n); return; }
    size_t es = kb_dtype_size(w->dt);
    for (int i = 0; i < n; i++)
        kb_to_f32(dst + (size_t)i * w->cols, (const char *)w->data + (size_t)rows[i] * (size_t)w->cols * es, w->dt,
                  (size_t)w->cols);
}

void kb_weight_row(float *dst, const kb_weight *w, int r) { kb_weight_rows(dst, w, &r, 1); }
