/* comm_mpi.c — the CPU backend's communicator: MPI_COMM_WORLD of a job
 * started by mpirun (Open MPI), on one host or several.
 * Owns: MPI's initialization and finalization (when it initialized MPI),
 * and a node-local communicator used only to count the ranks per host.
 * Errors: MPI's default handler (MPI_ERRORS_ARE_FATAL) stays in place, so a
 * failed or dead peer ends the whole job with mpirun's report instead of a
 * hang; the return codes below cover the arguments MPI cannot take. */
#include "comm_internal.h"
#include "errmsg.h"

#ifdef SPECBED_HAVE_MPI
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    MPI_Comm world;
    int we_initialized;
} mpi_impl;

static int too_big(size_t bytes, const char *what, char *err, size_t errlen) {
    return bytes > (size_t)INT_MAX ? errf(err, errlen, "%s of %zu bytes is over MPI's int count", what, bytes) : 0;
}

static int mpi_allgather(kb_comm *c, const void *send, void *recv, size_t bytes, char *err, size_t errlen) {
    mpi_impl *m = c->impl;
    if (too_big(bytes, "all-gather", err, errlen)) return -1;
    MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, m->world);
    return 0;
}

/* A rank waiting for the leader's next step may wait for as long as the
 * server is idle. MPI_Bcast would spin a core at 100% all that time, so the
 * receivers poll a non-blocking broadcast: tight for the first ~20k tests
 * (back-to-back steps arrive within them), then sleeping 10 µs doubling to
 * 1 ms, which bounds the latency of the first step after an idle spell. */
static void wait_polling(MPI_Request *rq) {
    int done = 0;
    for (int i = 0; i < 20000 && !done; i++) MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    long ns = 10000;
    while (!done) {
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    }
}

static int mpi_bcast(kb_comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen) {
    mpi_impl *m = c->impl;
    if (too_big(bytes, "broadcast", err, errlen)) return -1;
    /* every rank's broadcast is the non-blocking one: MPI does not match a
     * blocking collective with a non-blocking one */
    MPI_Request rq;
    MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, m->world, &rq);
    if (c->rank == root) MPI_Wait(&rq, MPI_STATUS_IGNORE);
    else wait_polling(&rq);
    return 0;
}

static int mpi_barrier(kb_comm *c, char *err, size_t errlen) {
    (void)err; (void)errlen;
    MPI_Barrier(((mpi_impl *)c->impl)->world);
    return 0;
}

static void mpi_abort(kb_comm *c, int code) { MPI_Abort(((mpi_impl *)c->impl)->world, code); }

static void mpi_free(kb_comm *c) {
    mpi_impl *m = c->impl;
    int fin = 0;
    MPI_Finalized(&fin);
    if (m->we_initialized && !fin) MPI_Finalize();
    free(m);
}

static const comm_ops mpi_ops = {mpi_allgather, mpi_bcast, mpi_barrier, mpi_abort, mpi_free};

int kb_comm_open_mpi(kb_comm **out, int want_size, char *err, size_t errlen) {
    *out = NULL;
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return errf(err, errlen, "MPI_Init_thread failed");
    if (inited) MPI_Query_thread(&provided);
    /* the engine's thread (the server's scheduler) is not the one that
     * initialized MPI, and only one thread calls MPI at a time */
    if (provided < MPI_THREAD_SERIALIZED) {
        if (!inited) MPI_Finalize();
        return errf(err, errlen, "this MPI provides thread level %d; specbed needs MPI_THREAD_SERIALIZED", provided);
    }
    int rank = 0, size = 1, local = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (want_size > 0 && size != want_size) {
        if (!inited) MPI_Finalize();
        return errf(err, errlen, "--tp %d needs %d processes, this job has %d: start it as "
                    "`mpirun -np %d specbed ... --tp %d`", want_size, want_size, size, want_size, want_size);
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    mpi_impl *m = calloc(1, sizeof *m);
    kb_comm *c = m ? comm_new(&mpi_ops, "mpi", rank, size, local, m) : NULL;
    if (!c) {
        free(m);
        return errf(err, errlen, "out of memory");
    }
    m->world = MPI_COMM_WORLD;
    m->we_initialized = !inited;
    *out = c;
    return 0;
}

#else

int kb_comm_open_mpi(kb_comm **out, int want_size, char *err, size_t errlen) {
    *out = NULL;
    return errf(err, errlen, "--tp %d: this specbed was built without MPI (install libopenmpi-dev and rebuild)",
                want_size);
}

#endif
