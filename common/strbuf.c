/* strbuf.c — see strbuf.h. */
#include "strbuf.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(strbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->n + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void strbuf_append(strbuf *b, const void *data, size_t len) {
    if (reserve(b, len)) return;
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = 0;
}

void strbuf_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    if (reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

char *strbuf_take(strbuf *b, size_t *len) {
    if (b->oom) {
        strbuf_free(b);
        return NULL;
    }
    if (reserve(b, 0)) {
        strbuf_free(b);
        return NULL;
    }
    b->p[b->n] = 0;
    char *p = b->p;
    if (len) *len = b->n;
    memset(b, 0, sizeof *b);
    return p;
}

void strbuf_free(strbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
