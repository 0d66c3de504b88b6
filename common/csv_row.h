/* csv_row.h — CSV rows through libcsv's quoting, so a field holding a comma,
 * quote or newline (a workload name, an error message) never breaks a file.
 * Call csv_row_field for each field and csv_row_end after the last. */
#ifndef SPECBED_CSV_ROW_H
#define SPECBED_CSV_ROW_H
#include <stdio.h>
typedef struct { FILE *f; int n; } csv_row;
void csv_row_field(csv_row *r, const char *s);
void csv_row_fieldf(csv_row *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void csv_row_end(csv_row *r);
#endif
