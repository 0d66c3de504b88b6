/* run_cols.c — see run_cols.h. */
#include "run_cols.h"

double run_accept_length(const csv_table *t, int row) {
    if (csvt_col(t, RUN_COL_ACCEPT_LENGTH) >= 0) return csvt_num(t, row, RUN_COL_ACCEPT_LENGTH);
    return csvt_num(t, row, "spec_decode_acceptance_length");   /* sweeps before issue 37: specbed's value, vLLM's name */
}
