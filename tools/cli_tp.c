/* cli_tp.c — the mpirun side of `--tp N` (see cli_tp.h).
 * Ranks > 0 ignore SIGTERM and SIGINT: mpirun forwards them to every rank,
 * and the leader decides how the job ends (a server drains, then stops the
 * other ranks through the engine). */
#include "cli_tp.h"
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "drafters.h"

int tp_job_open(tp_job *job, const char *cmd, int tp) {
    *job = (tp_job){.comm = NULL, .boot = NULL, .rank = 0, .size = 1};
    if (tp <= 1) return 0;
    char err[1024];
    if (kb_comm_open_mpi(&job->comm, tp, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return -1;
    }
    job->rank = kb_comm_rank(job->comm);
    job->size = kb_comm_size(job->comm);
    /* diagnostic: carry the collectives over NCCL (one GPU per rank, host
     * buffers staged) instead of MPI; MPI stays the job's launcher */
    const char *kind = getenv("SPECBED_TP_COMM");
    if (kind && strcmp(kind, "mpi")) {
        kb_comm *n = NULL;
        int bad = strcmp(kind, "nccl") != 0;
        if (bad) snprintf(err, sizeof err, "SPECBED_TP_COMM=%s: expected mpi or nccl", kind);
        if (bad || kb_comm_open_nccl(&n, job->comm, err, sizeof err)) {
            char msg[1200];
            snprintf(msg, sizeof msg, "%s: %s", cmd, err);
            kb_comm_abort(job->comm, 1, msg);
        }
        job->boot = job->comm;
        job->comm = n;
    }
    /* mpirun binds each rank to its own core when the ranks fit; when it
     * does not (--oversubscribe, --bind-to none), split the CPUs instead of
     * letting every rank start a thread per CPU */
    if (!getenv("OMP_NUM_THREADS")) {
        cpu_set_t set;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) >= online) {
            int share = CPU_COUNT(&set) / kb_comm_local_size(job->comm);
            kb_threads_init(share > 0 ? share : 1);
        }
    }
    if (job->rank > 0) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
    }
    return 0;
}

int tp_job_worker(tp_job *job, const char *cmd, gen_engine_opts eo) {
    char err[1024];
    gen_engine *e;
    eo.comm = job->comm;
    if (gen_engine_create(&e, &eo, err, sizeof err)) {
        /* rank 0 fails the same way on the same model and says so; a rank
         * that alone cannot load must not leave it waiting */
        char msg[1200];
        snprintf(msg, sizeof msg, "%s: %s", cmd, err);
        kb_comm_abort(job->comm, 1, msg);
    }
    drafter_tp_host(e);   /* rank 0's MTP and DSpark drafters are sharded over every rank */
    gen_engine_serve(e);
    gen_engine_free(e);
    tp_job_close(job);
    return 0;
}

void tp_job_close(tp_job *job) {
    kb_comm_free(job->comm);
    if (job->boot != job->comm) kb_comm_free(job->boot);
    job->comm = job->boot = NULL;
}
