/* csv_table.c — see csv_table.h. */
#include "csv_table.h"
#include "errmsg.h"
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    csv_table *t;
    char **cur;
    int ncur, capcur;
    int rowcap;
    int oom;
} rd_t;

static void on_field(void *s, size_t len, void *ud) {
    rd_t *d = ud;
    if (d->ncur == d->capcur) {
        int nc = d->capcur ? d->capcur * 2 : 32;
        char **n = realloc(d->cur, sizeof *n * (size_t)nc);
        if (!n) { d->oom = 1; return; }
        d->cur = n;
        d->capcur = nc;
    }
    char *c = malloc(len + 1);
    if (!c) { d->oom = 1; return; }
    memcpy(c, s, len);
    c[len] = 0;
    d->cur[d->ncur++] = c;
}

static void on_record(int ch, void *ud) {
    (void)ch;
    rd_t *d = ud;
    csv_table *t = d->t;
    if (!t->hdr) {
        t->hdr = d->cur;
        t->ncol = d->ncur;
    } else {
        char **row = calloc((size_t)(t->ncol ? t->ncol : 1), sizeof *row);
        if (!row) { d->oom = 1; goto reset_free; }
        for (int i = 0; i < t->ncol; i++) {
            if (i < d->ncur) { row[i] = d->cur[i]; d->cur[i] = NULL; }
            else row[i] = calloc(1, 1);
        }
        for (int i = 0; i < d->ncur; i++) free(d->cur[i]);
        free(d->cur);
        if (t->nrow == d->rowcap) {
            int nc = d->rowcap ? d->rowcap * 2 : 64;
            char ***n = realloc(t->cell, sizeof *n * (size_t)nc);
            if (!n) { d->oom = 1; for (int i = 0; i < t->ncol; i++) free(row[i]); free(row); goto reset; }
            t->cell = n;
            d->rowcap = nc;
        }
        t->cell[t->nrow++] = row;
    }
reset:
    d->cur = NULL;
    d->ncur = d->capcur = 0;
    return;
reset_free:
    for (int i = 0; i < d->ncur; i++) free(d->cur[i]);
    free(d->cur);
    goto reset;
}

int csvt_read(const char *path, csv_table *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) return errf(err, errlen, "%s: %s", path, strerror(errno));
    struct csv_parser p;
    if (csv_init(&p, 0)) { fclose(f); return errf(err, errlen, "libcsv init failed"); }
    rd_t d = {.t = t};
    char buf[65536];
    size_t k;
    int bad = 0;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        if (csv_parse(&p, buf, k, on_field, on_record, &d) != k) { bad = 1; break; }
    if (!bad) csv_fini(&p, on_field, on_record, &d);
    fclose(f);
    for (int i = 0; i < d.ncur; i++) free(d.cur[i]);
    free(d.cur);
    if (bad || d.oom || !t->hdr) {
        int e = csv_error(&p);
        csv_free(&p);
        csvt_free(t);
        return errf(err, errlen, "%s: %s", path, bad ? csv_strerror(e) : d.oom ? "out of memory" : "empty file");
    }
    csv_free(&p);
    return 0;
}

void csvt_free(csv_table *t) {
    for (int r = 0; r < t->nrow; r++) {
        for (int c = 0; c < t->ncol; c++) free(t->cell[r][c]);
        free(t->cell[r]);
    }
    free(t->cell);
    for (int c = 0; c < t->ncol; c++) free(t->hdr[c]);
    free(t->hdr);
    memset(t, 0, sizeof *t);
}

int csvt_col(const csv_table *t, const char *name) {
    for (int c = 0; c < t->ncol; c++) if (!strcmp(t->hdr[c], name)) return c;
    return -1;
}

const char *csvt_get(const csv_table *t, int row, const char *name) {
    int c = csvt_col(t, name);
    return c < 0 || row < 0 || row >= t->nrow ? "" : t->cell[row][c];
}

double csvt_num(const csv_table *t, int row, const char *name) {
    const char *s = csvt_get(t, row, name);
    if (!*s) return NAN;
    char *e;
    double v = strtod(s, &e);
    return *e ? NAN : v;
}
