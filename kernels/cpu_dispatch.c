/* cpu_dispatch.c — CPU backend: which SIMD path the kernels run.
 * Owns: detecting the CPU's features once, the process-wide path choice,
 * and its names ("avx512", "avx2", "scalar", and "avx512bf16": never the
 * default, since it rounds matmul inputs to bf16; chosen by name only).
 * Must not: pick a path the CPU (and OS: the compiler's feature check also
 * asks XGETBV whether the AVX/AVX-512 register state is enabled) lacks.
 *
 * The choice is process-wide state on purpose: it describes the machine,
 * like the thread pool, and every kernel call must see the same one. The
 * only writers are kb_set_cpu_path and the first resolution; both must not
 * race with running kernels (set it at startup, as tests do). */
#include "backend.h"
#include "cpu_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define N_PATHS 4
static const char *const path_names[N_PATHS] = {"scalar", "avx2", "avx512", "avx512bf16"};

static atomic_int active = -1;   /* cpu_path, or -1 before the first call */

static int supported(cpu_path p) {
    if (p == CPU_PATH_SCALAR) return 1;
#if CPU_X86
    __builtin_cpu_init();
    /* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports
     * does not know "f16c"; the OS's AVX state is already implied by avx2 */
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (p == CPU_PATH_AVX2) return avx2;
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl");
    if (p == CPU_PATH_AVX512) return avx512;
    if (p == CPU_PATH_AVX512_BF16) return avx512 && __builtin_cpu_supports("avx512bf16");
#endif
    return 0;
}

static int path_by_name(const char *name) {
    for (int i = 0; i < N_PATHS; i++)
        if (name && !strcmp(name, path_names[i])) return i;
    return -1;
}

cpu_path cpu_path_get(void) {
    int p = atomic_load_explicit(&active, memory_order_relaxed);
    if (p >= 0) return (cpu_path)p;
    p = supported(CPU_PATH_AVX512) ? CPU_PATH_AVX512 : supported(CPU_PATH_AVX2) ? CPU_PATH_AVX2 : CPU_PATH_SCALAR;
    /* Override (backend.h lists it; the only way to the avx512bf16 path
     * besides kb_set_cpu_path); read once, here only. */
    int want = path_by_name(getenv("SPECBED_CPU_PATH"));
    if (want >= 0 && supported((cpu_path)want)) p = want;
    atomic_store(&active, p);
    return (cpu_path)p;
}

const char *kb_cpu_path(void) { return path_names[cpu_path_get()]; }

int kb_cpu_path_supported(const char *name) {
    int p = path_by_name(name);
    return p >= 0 && supported((cpu_path)p);
}

int kb_set_cpu_path(const char *name) {
    int p = path_by_name(name);
    if (p < 0 || !supported((cpu_path)p)) return -1;
    atomic_store(&active, p);
    return 0;
}
