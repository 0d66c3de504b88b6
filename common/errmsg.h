/* errmsg.h — specbed's one error convention: a function that can fail
 * returns int (0 = ok, non-zero = failed) and writes a human message naming
 * the input that was wrong into (err, errlen). err may be NULL. */
#ifndef SPECBED_ERRMSG_H
#define SPECBED_ERRMSG_H
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>

static inline int errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes the message and returns -1, so error paths read `return errf(...)`. */
static inline int errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
#endif
