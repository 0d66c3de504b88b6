/* csv_row.c — see csv_row.h. */
#include "csv_row.h"
#include <csv.h>
#include <stdarg.h>
#include <string.h>

void csv_row_field(csv_row *r, const char *s) {
    if (r->n++) fputc(',', r->f);
    csv_fwrite(r->f, s, strlen(s));
}

void csv_row_fieldf(csv_row *r, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* numbers need no quoting; libcsv would quote every field */
    if (r->n++) fputc(',', r->f);
    if (strpbrk(buf, ",\"\n\r")) csv_fwrite(r->f, buf, strlen(buf));
    else fputs(buf, r->f);
}

void csv_row_end(csv_row *r) {
    fputc('\n', r->f);
    r->n = 0;
}
