/* cpu_prefetch_x86.h — software prefetch of the weight tile a matmul block
 * reads CPU_PF_TILES tiles from now, shared by the AVX2 and AVX-512 blocks.
 *
 * Why: a block walks its weight rows as tiles of J rows, and with 256
 * columns of bf16 a tile of 8 rows is exactly one 4 KB page. Hardware
 * prefetchers do not cross a page, so when the weights are not in cache
 * every tile starts at memory latency: after the drafter's forward has
 * pushed the target's weights out of the 8–16 MB of L3 this VM's core gets
 * (and the target the drafter's), a 1-row target step took 1.3 ms instead
 * of 0.3 (a throw-away driver timing fwd_run after sweeping 4 MB of other
 * memory; bench/RECORD.md). Each k step of a tile prefetches the same
 * k slice of the tile CPU_PF_TILES ahead (the rows are contiguous, so the
 * slice is J·16·esize bytes of one span), into L2 (T1), leaving L1 to
 * x and the accumulators. Only the first pass over a block's weights (its
 * first group of x rows) prefetches; a prompt chunk's later passes find them
 * cached. A prefetch never faults and changes no
 * arithmetic: the bits, and batch invariance, are as without it.
 * x86 only; include after immintrin.h. */
#ifndef SPECBED_CPU_PREFETCH_X86_H
#define SPECBED_CPU_PREFETCH_X86_H
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define CPU_PF_TILES 4   /* 2, 4 and 8 measured: 4 best or tied after a 4–48 MB sweep; a line every
                            128 bytes (the adjacent-line prefetcher for the rest) was slower */

/* Prefetches [a, a + bytes) into L2, one line per 64 bytes (at least one).
 * The address is an integer: the tile ahead may lie past the matrix, where
 * C's pointer arithmetic may not go (a prefetch of it does not fault).
 * bytes is a constant after inlining, so the loop unrolls. */
static inline __attribute__((always_inline)) void cpu_prefetch_span(uintptr_t a, size_t bytes) {
    size_t b = 0;
    do {
        _mm_prefetch((const char *)(a + b), _MM_HINT_T1);
        b += 64;
    } while (b < bytes);
}
#endif
