/* strbuf.h — a growable byte buffer for building text (Prometheus pages,
 * JSON lines, reports). Append never fails loudly: on out-of-memory the
 * buffer remembers it (oom) and ignores further appends, so a builder
 * checks once at the end. The buffer owns its bytes until strbuf_take. */
#ifndef SPECBED_STRBUF_H
#define SPECBED_STRBUF_H
#include <stddef.h>

typedef struct {
    char *p;       /* NUL-terminated when n > 0 or after any append */
    size_t n, cap;
    int oom;
} strbuf;

void strbuf_append(strbuf *b, const void *data, size_t len);
void strbuf_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the bytes (the caller frees; *len may be NULL) and empties b, or
 * NULL if an append ran out of memory (b is then freed). */
char *strbuf_take(strbuf *b, size_t *len);
void strbuf_free(strbuf *b);
#endif
