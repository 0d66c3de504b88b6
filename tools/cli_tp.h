/* cli_tp.h — `--tp N` for the commands that run the target (generate,
 * serve, profile, bench_engine, bench_spec): all N ranks of an mpirun job
 * run the same command line; rank 0 does the command's work and the others
 * only serve its forwards and its MTP / DSpark drafters' sharded passes
 * (engine.h gen_engine_serve, spec/drafters.h drafter_tp_host). */
#ifndef SPECBED_CLI_TP_H
#define SPECBED_CLI_TP_H
#include "comm.h"
#include "engine.h"

typedef struct {
    kb_comm *comm;   /* the collectives' communicator; NULL when tp ≤ 1 */
    kb_comm *boot;   /* the MPI one under it when comm is NCCL (SPECBED_TP_COMM=nccl), else NULL */
    int rank, size;
} tp_job;

/* tp ≤ 1: a single process, nothing opened. Otherwise opens MPI (the job
 * must have exactly tp ranks) and, unless OMP_NUM_THREADS says otherwise,
 * gives each rank an equal share of this host's CPUs. SPECBED_TP_COMM=nccl
 * (a diagnostic) moves the collectives to NCCL. Prints the error
 * with cmd as prefix and returns -1 on failure. */
int  tp_job_open(tp_job *job, const char *cmd, int tp);
/* Ranks > 0: creates the engine from eo (eo.comm is set here), serves rank
 * 0's forwards until it stops, frees. Returns the exit status. */
int  tp_job_worker(tp_job *job, const char *cmd, gen_engine_opts eo);
void tp_job_close(tp_job *job);

#endif
