/* row_queue.c — see row_queue.h. */
#include "row_queue.h"
#include <stdlib.h>
#include <string.h>

int rq_push(row_queue *q, const float *rows, int n) {
    if (q->n + n > q->cap) {
        int cap = q->cap * 2 > q->n + n ? q->cap * 2 : q->n + n + 16;
        float *p = realloc(q->rows, sizeof(float) * (size_t)cap * (size_t)q->width);
        if (!p) return -1;
        q->rows = p;
        q->cap = cap;
    }
    memcpy(q->rows + (size_t)q->n * q->width, rows, sizeof(float) * (size_t)n * (size_t)q->width);
    q->n += n;
    return 0;
}

void rq_free(row_queue *q) {
    free(q->rows);
    q->rows = NULL;
    q->n = q->cap = 0;
}
