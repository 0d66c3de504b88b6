/* machine.h — what the machine a sweep ran on is, for sweep.json and the
 * report beside the load average: the same sweep picks different depths on
 * different CPUs (a Xeon's AVX-512 against an EPYC's), so a decision without
 * its machine cannot be compared. Client side: /proc/cpuinfo's model name
 * and flags (the SIMD path specbed's kernels would take there: avx512 when
 * avx512f, avx2 when avx2 and fma, else scalar), the CPUs this process may
 * use, OMP_NUM_THREADS, and `nvidia-smi`'s GPUs and driver when it is on the
 * PATH. Server side: only what the server says — specbed serve's startup
 * line "kernels PATH xN" — else "unknown". */
#ifndef SPECBED_BENCH_MACHINE_H
#define SPECBED_BENCH_MACHINE_H
#include <stddef.h>
#include <cjson/cJSON.h>

typedef struct {
    char cpu_model[256];     /* "unknown" when /proc/cpuinfo has none */
    char simd[32];           /* avx512 / avx2 / scalar / unknown */
    int cpus;                /* CPUs this process may run on; 0 unknown */
    char omp_threads[32];    /* OMP_NUM_THREADS as set, or "unset" */
    char gpu[512];           /* "NAME (driver V)[; ...]", or "none" (no nvidia-smi or no GPU) */
} machine_info;

void machine_probe(machine_info *m);
/* "NAME (driver V); ..." from `nvidia-smi --query-gpu=name,driver_version
 * --format=csv,noheader` output ("NVIDIA H200, 580.159.04" per line); "none"
 * when it has no such line. */
void machine_gpu_from_smi(const char *text, char *out, size_t n);
/* The SIMD path from a /proc/cpuinfo "flags" line's words. */
const char *machine_simd_from_flags(const char *flags);
/* From a specbed serve log: "avx512 x1" out of "kernels avx512 x1"; -1 when
 * the log has no such line (another engine: the caller says unknown). */
int  machine_server_kernels(const char *log_text, char *out, size_t n);
/* {"cpu_model", "simd", "cpus", "omp_num_threads", "gpu"} */
cJSON *machine_json(const machine_info *m);
/* "AMD EPYC 7B13, avx512, 2 CPUs, OMP_NUM_THREADS=1, GPU none" */
void machine_line(const machine_info *m, char *out, size_t n);
#endif
