/* machine.c — see machine.h. */
#include "machine.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int has_word(const char *s, const char *w) {
    size_t n = strlen(w);
    for (const char *p = s; (p = strstr(p, w)); p += n)
        if ((p == s || p[-1] == ' ' || p[-1] == '\t') && (p[n] == 0 || p[n] == ' ' || p[n] == '\n' || p[n] == '\t'))
            return 1;
    return 0;
}

const char *machine_simd_from_flags(const char *flags) {
    if (!flags) return "unknown";
    if (has_word(flags, "avx512f")) return "avx512";
    if (has_word(flags, "avx2") && has_word(flags, "fma")) return "avx2";
    return "scalar";
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r')) s[--n] = 0;
}

void machine_gpu_from_smi(const char *text, char *out, size_t n) {
    size_t o = 0;
    out[0] = 0;
    for (const char *s = text; s && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), s);
        s = e ? e + 1 : NULL;
        trim(line);
        char *comma = strrchr(line, ',');
        if (!comma || o + 1 >= n) continue;
        *comma = 0;
        const char *drv = comma + 1;
        while (*drv == ' ') drv++;
        o += (size_t)snprintf(out + o, n - o, "%s%s (driver %s)", o ? "; " : "", line, drv);
        if (o >= n) o = n - 1;
    }
    if (!o) snprintf(out, n, "none");
}

static void probe_gpu(machine_info *m) {
    snprintf(m->gpu, sizeof m->gpu, "none");
    /* only when nvidia-smi is on the PATH: no shell error text in the report */
    FILE *p = popen("command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version "
                    "--format=csv,noheader 2>/dev/null", "r");
    if (!p) return;
    char text[2048];
    size_t k = fread(text, 1, sizeof text - 1, p);
    text[k] = 0;
    pclose(p);
    machine_gpu_from_smi(text, m->gpu, sizeof m->gpu);
}

void machine_probe(machine_info *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->cpu_model, sizeof m->cpu_model, "unknown");
    snprintf(m->simd, sizeof m->simd, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        int got_model = 0, got_flags = 0;
        while (getline(&line, &cap, f) > 0 && !(got_model && got_flags)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            const char *v = colon + 1;
            while (*v == ' ') v++;
            if (!got_model && !strncmp(line, "model name", 10)) {
                snprintf(m->cpu_model, sizeof m->cpu_model, "%s", v);
                trim(m->cpu_model);
                got_model = 1;
            } else if (!got_flags && !strncmp(line, "flags", 5)) {
                snprintf(m->simd, sizeof m->simd, "%s", machine_simd_from_flags(v));
                got_flags = 1;
            }
        }
        free(line);
        fclose(f);
    }
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set)) m->cpus = CPU_COUNT(&set);
    const char *omp = getenv("OMP_NUM_THREADS");
    snprintf(m->omp_threads, sizeof m->omp_threads, "%s", omp && *omp ? omp : "unset");
    probe_gpu(m);
}

int machine_server_kernels(const char *log, char *out, size_t n) {
    const char *p = log ? strstr(log, "kernels ") : NULL;
    if (!p) return -1;
    p += 8;
    char path[32];
    int threads;
    if (sscanf(p, "%31[a-z0-9_] x%d", path, &threads) != 2) return -1;
    snprintf(out, n, "%s x%d", path, threads);
    return 0;
}

cJSON *machine_json(const machine_info *m) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "cpu_model", m->cpu_model);
    cJSON_AddStringToObject(j, "simd", m->simd);
    cJSON_AddNumberToObject(j, "cpus", m->cpus);
    cJSON_AddStringToObject(j, "omp_num_threads", m->omp_threads);
    cJSON_AddStringToObject(j, "gpu", m->gpu);
    return j;
}

void machine_line(const machine_info *m, char *out, size_t n) {
    snprintf(out, n, "%s, SIMD %s, %d CPUs, OMP_NUM_THREADS=%s, GPU %s", m->cpu_model, m->simd, m->cpus, m->omp_threads,
             m->gpu);
}
