/* fault.h — fault injection for canary validation (serve --inject-fault):
 * one kind per published incident, so that the canary can be shown to
 * catch each (bench/RECORD.md has the evidence). A server running one says
 * so loudly at startup; none of this runs unless asked for.
 *
 *   collision  the SGLang/SM120 DSpark depth-5 hazard: a kernel's transient
 *              buffer landed in an NCCL symmetric-memory pool and overwrote
 *              in-flight data. In verify steps of ≥ rows verify rows (or,
 *              with depth=D, only requests verifying exactly D drafts), with
 *              probability p, one draft row's residual stream is overwritten
 *              after layer 0 (optionally only in the first `first` seconds
 *              after boot); what that row commits is corrupted. With
 *              scope=batch every draft row of the step is overwritten: a
 *              buffer spanning the whole batch, broad enough to collapse
 *              the interval accept length.
 *   flat       the DeepSeek V4 Flash report: at positions below `below`
 *              (128), when the newest token is `trigger`, the next-token
 *              distribution is replaced by one fixed, context-free
 *              distribution ('\n', '#', '<' … at the top).
 *   window     the tool-call tag 128 tokens back: keys more than `below`
 *              positions back (rounded to whole KV pages) are invisible to
 *              attention, so far copies fail while near ones succeed.
 *   nondet     the DeepSeek-V2-Lite port: a read of uninitialised scratch
 *              (or a race) — with probability p per step one logits row gets
 *              a perturbation drawn from a per-process seed, so greedy output
 *              differs between fresh processes.
 *
 * SPEC is KIND[,key=value…]; the old form rows=R,p=P,seed=S means
 * collision. */
#ifndef SPECBED_FAULT_H
#define SPECBED_FAULT_H
#include <stddef.h>
#include <stdint.h>
#include "sampler.h"

typedef enum { FAULT_COLLISION = 1, FAULT_FLAT = 2, FAULT_WINDOW = 3, FAULT_NONDET = 4 } fault_kind;

typedef struct {
    fault_kind kind;
    int min_rows;      /* collision: verify rows in the step, at least (default 4) */
    int depth;         /* collision: only requests verifying exactly this many drafts (0 = any) */
    int batch;         /* collision, scope=batch: every draft row of the step, not one (the
                          transient buffer spanning the whole verify batch) */
    double p;          /* collision, nondet: probability per eligible step (default 0.25) */
    double first_s;    /* collision: only this many seconds after boot (0 = always) */
    int below;         /* flat: positions below this; window: visible keys (default 128) */
    int trigger;       /* flat: the newest token that triggers it (-1: any; serve picks "\n") */
    uint64_t seed;     /* collision, flat: the fault's own RNG; nondet: ignored (per process) */
} spec_fault;

/* 0 ok; -1 with a message naming the bad part. */
int fault_parse(const char *spec, spec_fault *f, char *err, size_t errlen);
/* A one-line description for the startup banner. */
void fault_describe(const spec_fault *f, char *buf, size_t n);

/* The state the batch keeps for an armed fault. */
typedef struct {
    spec_fault f;
    rng_state rng;
    double t0;          /* arming time (gen_now) */
    long injected;
} fault_state;

void fault_arm(fault_state *s, const spec_fault *f, double now);
/* collision: whether this step corrupts a row, and which. k[i] = drafts
 * verified by verify span i, row0[i] its first row, n spans. Marks
 * corrupt[row] and returns 1, or returns 0. */
int fault_pick_row(fault_state *s, double now, int verify_rows, const int *k, const int *row0, int n,
                   unsigned char *corrupt);
/* flat, nondet: rewrites logits rows [n, V] in place; tok[i] and pos[i] are
 * the input token and position of logits row i. Returns rows changed. */
int fault_logits(fault_state *s, float *logits, int V, const int *tok, const int *pos, int n);
#endif
