/* cpu_internal.h — helpers shared by the CPU backend's files (cpu_*.c) and
 * nothing else: exact scalar dtype widening and the SIMD feature switch.
 * Not part of the backend interface; engine/ never includes it. */
#ifndef SPECBED_CPU_INTERNAL_H
#define SPECBED_CPU_INTERNAL_H
#include <stdint.h>
#include <string.h>

/* AVX2 + FMA + F16C path when the compiler targets them (-march=native on any
 * x86-64 from 2013 on); otherwise the portable scalar path. Both are always
 * compiled so the scalar one cannot rot. */
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_AVX2 1
#include <immintrin.h>
#else
#define CPU_AVX2 0
#endif

static inline float cpu_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float cpu_f16_to_f32(uint16_t h);

#endif
