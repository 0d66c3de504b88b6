/* comm.c — the communicator's dispatch, the single-process communicator,
 * and the one all-reduce every implementation uses (see comm.h for why it
 * is an all-gather plus a sum in rank order).
 * Owns: the kb_comm struct and its all-reduce scratch.
 * Must not: move bytes between processes itself (MPI and NCCL do). */
#include "comm_internal.h"
#include "errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kb_comm *comm_new(const comm_ops *ops, const char *kind, int rank, int size, int local_size, void *impl) {
    kb_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ops = ops;
    c->kind = kind;
    c->rank = rank;
    c->size = size;
    c->local_size = local_size > 0 ? local_size : 1;
    c->impl = impl;
    return c;
}

/* ---- the single process: rank 0 of 1 ------------------------------------ */

static int self_allgather(kb_comm *c, const void *send, void *recv, size_t bytes, char *err, size_t errlen) {
    (void)c; (void)err; (void)errlen;
    if (recv != send) memmove(recv, send, bytes);
    return 0;
}
static int self_bcast(kb_comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen) {
    (void)c; (void)buf; (void)bytes;
    return root == 0 ? 0 : errf(err, errlen, "broadcast from rank %d in a single process", root);
}
static int self_barrier(kb_comm *c, char *err, size_t errlen) { (void)c; (void)err; (void)errlen; return 0; }
static void self_abort(kb_comm *c, int code) { (void)c; exit(code); }
static void self_free(kb_comm *c) { (void)c; }

static const comm_ops self_ops = {self_allgather, self_bcast, self_barrier, self_abort, self_free};
static kb_comm self_comm = {.ops = &self_ops, .kind = "self", .rank = 0, .size = 1, .local_size = 1};

kb_comm *kb_comm_self(void) { return &self_comm; }

/* ---- dispatch ------------------------------------------------------------ */

void kb_comm_free(kb_comm *c) {
    if (!c || c == &self_comm) return;
    c->ops->free(c);
    free(c->gather);
    free(c);
}

int kb_comm_rank(const kb_comm *c) { return c->rank; }
int kb_comm_size(const kb_comm *c) { return c->size; }
int kb_comm_local_size(const kb_comm *c) { return c->local_size; }
const char *kb_comm_kind(const kb_comm *c) { return c->kind; }

int kb_comm_allgather(kb_comm *c, const void *send, void *recv, size_t bytes, char *err, size_t errlen) {
    return c->ops->allgather(c, send, recv, bytes, err, errlen);
}
int kb_comm_bcast(kb_comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen) {
    if (root < 0 || root >= c->size) return errf(err, errlen, "broadcast root %d outside 0..%d", root, c->size - 1);
    return c->size == 1 ? 0 : c->ops->bcast(c, buf, bytes, root, err, errlen);
}
int kb_comm_barrier(kb_comm *c, char *err, size_t errlen) {
    return c->size == 1 ? 0 : c->ops->barrier(c, err, errlen);
}

void kb_comm_abort(kb_comm *c, int code, const char *msg) {
    if (msg) fprintf(stderr, "specbed (rank %d of %d): %s\n", c->rank, c->size, msg);
    fflush(stderr);
    c->ops->abort(c, code);
    exit(code);   /* an implementation whose abort returned */
}

int kb_comm_allreduce_sum(kb_comm *c, float *buf, size_t n, char *err, size_t errlen) {
    if (c->size == 1 || n == 0) return 0;
    size_t need = (size_t)c->size * n;
    if (need > c->gather_floats) {
        float *g = realloc(c->gather, need * sizeof *g);
        if (!g) return errf(err, errlen, "all-reduce: out of memory for %zu floats", need);
        c->gather = g;
        c->gather_floats = need;
    }
    if (c->ops->allgather(c, buf, c->gather, n * sizeof *buf, err, errlen)) return -1;
    /* rank order, every element, every rank: the same bits everywhere */
    memcpy(buf, c->gather, n * sizeof *buf);
    for (int r = 1; r < c->size; r++) {
        const float *p = c->gather + (size_t)r * n;
        for (size_t i = 0; i < n; i++) buf[i] += p[i];
    }
    return 0;
}
