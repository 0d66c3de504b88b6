/* csv_table.h — a whole CSV file in memory as strings (header + rows),
 * read through libcsv, for the report (runs.csv, requests.csv). */
#ifndef SPECBED_BENCH_CSV_TABLE_H
#define SPECBED_BENCH_CSV_TABLE_H
#include <stddef.h>

typedef struct {
    int ncol, nrow;
    char **hdr;      /* [ncol] */
    char ***cell;    /* [nrow][ncol]; a short row's missing cells are "" */
} csv_table;

int  csvt_read(const char *path, csv_table *t, char *err, size_t errlen);
void csvt_free(csv_table *t);
int  csvt_col(const csv_table *t, const char *name);         /* -1 when absent */
const char *csvt_get(const csv_table *t, int row, const char *name);   /* "" when absent */
double csvt_num(const csv_table *t, int row, const char *name);        /* NaN when empty or absent */
#endif
