/* row_queue.h — a growable queue of fixed-width float rows: the target
 * features (hidden states, layer taps) a drafter has been handed by begin()
 * and accept() but has not yet fed into its own KV cache (MTP, DSpark feed
 * them lazily at the next propose, batched across sequences). */
#ifndef SPECBED_ROW_QUEUE_H
#define SPECBED_ROW_QUEUE_H

typedef struct {
    float *rows;   /* [cap, width] */
    int n, cap, width;
} row_queue;

/* Appends rows[n, width]. 0 ok, -1 out of memory (the queue is unchanged). */
int  rq_push(row_queue *q, const float *rows, int n);
/* Row i (0 ≤ i < n). */
static inline const float *rq_row(const row_queue *q, int i) { return q->rows + (long)i * q->width; }
void rq_free(row_queue *q);   /* frees the storage; width is kept */

#endif
