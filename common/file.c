/* file.c — see file.h. */
#include "file.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"

int read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t errlen) {
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return errf(err, errlen, "%s: cannot read (%s)", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            size_t nc = cap ? cap * 2 : 8192;
            if (nc > max_bytes + 1) nc = max_bytes + 1;
            if (nc <= cap) {   /* already holding max_bytes and more is coming */
                free(buf);
                fclose(f);
                return errf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
            }
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return errf(err, errlen, "%s: out of memory reading it", path);
            }
            buf = nb;
            cap = nc;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return errf(err, errlen, "%s: cannot read (read error)", path);
    }
    if (n > max_bytes) {
        free(buf);
        return errf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}
