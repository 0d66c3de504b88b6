/* comm_internal.h — what the communicator implementations (comm.c: self,
 * comm_mpi.c, comm_nccl.c) share: the struct and its operation table.
 * kb_comm_allreduce_sum is built once, in comm.c, on top of allgather, so
 * every implementation adds in the same (rank) order. */
#ifndef SPECBED_COMM_INTERNAL_H
#define SPECBED_COMM_INTERNAL_H
#include <stddef.h>
#include "comm.h"

typedef struct {
    int  (*allgather)(kb_comm *c, const void *send, void *recv, size_t bytes, char *err, size_t errlen);
    int  (*bcast)(kb_comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen);
    int  (*barrier)(kb_comm *c, char *err, size_t errlen);
    void (*abort)(kb_comm *c, int code);
    void (*free)(kb_comm *c);   /* releases impl (and finalizes what it initialized) */
} comm_ops;

struct kb_comm {
    const comm_ops *ops;
    const char *kind;
    int rank, size, local_size;
    void *impl;
    float *gather;           /* allreduce scratch: [size · n] floats, grown on demand */
    size_t gather_floats;
};

/* A new communicator with its fields set; NULL when out of memory. */
kb_comm *comm_new(const comm_ops *ops, const char *kind, int rank, int size, int local_size, void *impl);

#endif
