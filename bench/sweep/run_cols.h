/* run_cols.h — the acceptance columns of a sweep's runs.csv, read in one
 * place by the report and the simulator.
 *
 * Depth decisions need specbed's accept length: committed tokens per verify
 * step, steps in which the drafter proposed nothing included, because that
 * is what a step's cost buys. Since issue 37 a run's summary.json keeps
 * vLLM's figure (1 + accepted ÷ drafts) under vLLM's name and specbed's
 * under `specbed_acceptance_length`; runs.csv carries both. Sweeps written
 * before that held specbed's figure under vLLM's name, so a runs.csv
 * without the specbed_ column is read from that one. The pos_i columns
 * have always held specbed's per-position rates (accepted at i ÷ verify
 * steps). */
#ifndef SPECBED_RUN_COLS_H
#define SPECBED_RUN_COLS_H

#include "csv_table.h"

#define RUN_COL_ACCEPT_LENGTH "specbed_acceptance_length"

/* specbed's accept length of row `row`; NaN when the run has none. */
double run_accept_length(const csv_table *t, int row);

/* The order in which a sweep's cells are listed everywhere (report,
 * simulate --compare): speculation off ("none") first, then drafter,
 * workload, concurrency, depth. strcmp-like. */
int run_cell_cmp(const char *drafter_a, const char *workload_a, int conc_a, int depth_a, const char *drafter_b,
                 const char *workload_b, int conc_b, int depth_b);

#endif
