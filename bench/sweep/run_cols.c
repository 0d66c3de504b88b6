/* run_cols.c — see run_cols.h. */
#include "run_cols.h"
#include <string.h>

double run_accept_length(const csv_table *t, int row) {
    if (csvt_col(t, RUN_COL_ACCEPT_LENGTH) >= 0) return csvt_num(t, row, RUN_COL_ACCEPT_LENGTH);
    return csvt_num(t, row, "spec_decode_acceptance_length");   /* sweeps before issue 37: specbed's value, vLLM's name */
}

int run_cell_cmp(const char *da, const char *wa, int ca, int ka, const char *db, const char *wb, int cb, int kb) {
    int an = !strcmp(da, "none"), bn = !strcmp(db, "none"), d;
    if (an != bn) return bn - an;
    if ((d = strcmp(da, db))) return d;
    if ((d = strcmp(wa, wb))) return d;
    if (ca != cb) return ca < cb ? -1 : 1;
    return ka < kb ? -1 : ka > kb;
}
