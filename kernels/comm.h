/* comm.h — the collectives tensor parallelism runs on: all-reduce (sum),
 * all-gather, broadcast, barrier, rank and size. specbed has no transport
 * of its own: the CPU backend's communicator is MPI (Open MPI; ranks on one
 * host or several, started by mpirun), the CUDA backend's is NCCL, and a
 * single process gets the trivial one (size 1, every call a no-op).
 *
 * Batch invariance across ranks (DESIGN §4): kb_comm_allreduce_sum adds the
 * ranks' partial sums in rank order 0, 1, …, N−1 for every element, on every
 * rank, whatever the message size. MPI_Allreduce and ncclAllReduce do not
 * promise that: their algorithm (and so the order of the additions) changes
 * with the message size, which is the row count, so a row's logits would
 * depend on the batch it was in. The sum is therefore an all-gather of the
 * partials followed by a fixed-order local sum: N× the bytes of a ring
 * all-reduce, a price the activations of one step can pay.
 *
 * Errors: every collective returns 0 or −1 with a message in (err, errlen).
 * A peer that died does not come back here: the MPI implementation's errors
 * are fatal (mpirun ends every rank and says which one died), so no rank
 * ever waits forever on a dead one.
 *
 * Ownership: kb_comm_free releases the communicator and, for MPI, finalizes
 * MPI; a communicator is used by one thread at a time (the thread that
 * drives the engine), which may differ from the thread that opened it. */
#ifndef SPECBED_COMM_H
#define SPECBED_COMM_H
#include <stddef.h>

typedef struct kb_comm kb_comm;

/* The single-process communicator: rank 0 of 1. Never fails. */
kb_comm *kb_comm_self(void);

/* MPI_COMM_WORLD of a process started by mpirun (MPI_Init_thread with
 * MPI_THREAD_SERIALIZED). want_size > 0: the world must have exactly that
 * many ranks, else an error that says how to start it. */
int kb_comm_open_mpi(kb_comm **out, int want_size, char *err, size_t errlen);

/* NCCL over the ranks of `boot` (an MPI communicator, which carries the
 * NCCL unique id), one GPU per rank: device = local rank modulo the devices
 * visible. The buffers passed to the collectives are host memory (the CPU
 * backend's); they are staged through device buffers. Errors when specbed
 * was built without NCCL or no GPU is visible. */
int kb_comm_open_nccl(kb_comm **out, kb_comm *boot, char *err, size_t errlen);

void kb_comm_free(kb_comm *c);

int kb_comm_rank(const kb_comm *c);
int kb_comm_size(const kb_comm *c);
/* Ranks of this communicator on this host (for the default thread count). */
int kb_comm_local_size(const kb_comm *c);
const char *kb_comm_kind(const kb_comm *c);   /* "self", "mpi" or "nccl" */

/* buf[n] ← Σ over ranks of buf[n], added in rank order (see above). */
int kb_comm_allreduce_sum(kb_comm *c, float *buf, size_t n, char *err, size_t errlen);
/* recv[size · bytes] ← every rank's send[bytes], in rank order. */
int kb_comm_allgather(kb_comm *c, const void *send, void *recv, size_t bytes, char *err, size_t errlen);
/* buf[bytes] ← root's buf[bytes]. */
int kb_comm_bcast(kb_comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen);
int kb_comm_barrier(kb_comm *c, char *err, size_t errlen);

/* Ends every rank of the job with `code` after printing msg (a rank that
 * cannot continue must not leave the others waiting in a collective). */
void kb_comm_abort(kb_comm *c, int code, const char *msg);

#endif
