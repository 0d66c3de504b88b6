/* test_util.c — see test_util.h. */
#include "test_util.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tu_failures = 0;

int tu_done(const char *name) {
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

tu_part tu_parse_part(int argc, char **argv) {
    if (argc < 2) return TU_FIXTURES;
    if (!strcmp(argv[1], "bundled")) return TU_BUNDLED;
    if (!strcmp(argv[1], "full")) return TU_FULL;
    fprintf(stderr, "%s: unknown part '%s' (expected nothing, bundled or full)\n", argv[0], argv[1]);
    exit(2);
}

int tu_have(const char *rel, ...) {
    va_list ap;
    va_start(ap, rel);
    int ok = 1;
    for (const char *r = rel; r; r = va_arg(ap, const char *))
        if (access(tu_path(r), R_OK)) ok = 0;
    va_end(ap);
    return ok;
}

int tu_skip(const char *name, const char *why) {
    printf("%s: skipped: %s\n", name, why);
    return TU_SKIP;
}

const char *tu_path(const char *rel) {
    static char buf[8][4096];
    static int slot = 0;
    char *b = buf[slot++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", SPECBED_ROOT, rel);
    return b;
}

char *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; if (len) *len = (size_t)n; }
    return b;
}

double tu_chi2_crit(int dof) {
    double z = 3.09, k = dof, t = 1 - 2 / (9 * k) + z * sqrt(2 / (9 * k));
    return k * t * t * t;
}

double tu_chi2_two_sample(const int *a, const int *b, int n, int *dof) {
    double x2 = 0, pa = 0, pb = 0;
    int bins = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] + b[i] == 0) continue;
        if (a[i] + b[i] < 10) { pa += a[i]; pb += b[i]; continue; }
        x2 += (double)(a[i] - b[i]) * (a[i] - b[i]) / (a[i] + b[i]);
        bins++;
    }
    if (pa + pb >= 10) { x2 += (pa - pb) * (pa - pb) / (pa + pb); bins++; }
    *dof = bins - 1;
    return x2;
}

cJSON *tu_read_config(const char *src_dir) {
    char p[1024];
    snprintf(p, sizeof p, "%s/config.json", src_dir);
    char *txt = tu_read_file(tu_path(p), NULL);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECKF(j != NULL, "%s: cannot read or parse", p);
    return j;
}

void tu_write_config(const char *dir, const cJSON *j) {
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    char *out = cJSON_Print(j);
    FILE *f = out ? fopen(p, "w") : NULL;
    int ok = f && fputs(out, f) >= 0;
    if (f && fclose(f)) ok = 0;
    CHECKF(ok, "%s: cannot write", p);
    free(out);
}
