/* test_comm.c — the single-process communicator (kernels/comm.h) and the
 * error paths that need no MPI job: rank 0 of 1, collectives that leave
 * data as it is, a broadcast from a rank that does not exist refused, and
 * --tp 2 in a process that was not started by mpirun refused with the
 * command to use. The MPI path itself runs under mpirun in test_tp. */
#include <string.h>
#include "comm.h"
#include "test_util.h"

int main(void) {
    char err[512];
    kb_comm *c = kb_comm_self();
    CHECK(kb_comm_rank(c) == 0 && kb_comm_size(c) == 1 && kb_comm_local_size(c) == 1);
    CHECK(!strcmp(kb_comm_kind(c), "self"));
    float x[5] = {1, -2, 3.5f, 0, 1e30f}, y[5];
    memcpy(y, x, sizeof x);
    CHECK(!kb_comm_allreduce_sum(c, x, 5, err, sizeof err) && !memcmp(x, y, sizeof x));
    float g[5] = {0};
    CHECK(!kb_comm_allgather(c, x, g, sizeof x, err, sizeof err) && !memcmp(g, x, sizeof x));
    CHECK(!kb_comm_bcast(c, x, sizeof x, 0, err, sizeof err) && !memcmp(x, y, sizeof x));
    err[0] = 0;
    CHECK(kb_comm_bcast(c, x, sizeof x, 1, err, sizeof err) && strstr(err, "root 1"));
    CHECK(!kb_comm_barrier(c, err, sizeof err));
    kb_comm_free(c);   /* the static one: a no-op */
    CHECK(kb_comm_size(kb_comm_self()) == 1);
    /* without mpirun (a singleton MPI job, or no MPI at all): a clear refusal */
    kb_comm *m = NULL;
    err[0] = 0;
    CHECK(kb_comm_open_mpi(&m, 2, err, sizeof err) != 0 && m == NULL);
    CHECKF(strstr(err, "mpirun -np 2") || strstr(err, "without MPI"), "message: %s", err);
    return tu_done("test_comm");
}
