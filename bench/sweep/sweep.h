/* sweep.h — `specbed sweep` (sweep.c): launches every (drafter, depth) arm,
 * runs the canary and the loads, and writes the sweep directory that
 * `specbed report` (bench/report/) and `specbed simulate` (bench/sim/) read
 * (runs.csv's acceptance columns: run_cols.h). */
#ifndef SPECBED_BENCH_SWEEP_H
#define SPECBED_BENCH_SWEEP_H
/* argv[0] is "sweep" (tools/main.c dispatches to it): 0 ok, 1 failed,
 * 2 bad usage / could not run (the bench commands' convention). */
int cmd_sweep(int argc, char **argv);
#endif
