/* sse.h — Server-Sent Events framing (what OpenAI-compatible servers
 * stream): bytes in, one callback per event with its data lines joined by
 * '\n'. Comment lines (":…") and other fields (event:, id:) are ignored;
 * CRLF and LF line ends both work; an event ends at a blank line.
 *
 * Bounded: a line longer than SSE_MAX_LINE bytes, or an event whose data
 * grows past SSE_MAX_EVENT bytes, stops the parser with p->err set (a
 * server that never ends a line must not grow the client without limit);
 * the caller fails the request with sse_error(). */
#ifndef SPECBED_BENCH_SSE_H
#define SPECBED_BENCH_SSE_H
#include <stddef.h>

#define SSE_MAX_LINE  (1u << 20)   /* 1 MiB: one SSE line (a token chunk is < 1 KiB) */
#define SSE_MAX_EVENT (1u << 20)   /* 1 MiB: the joined data of one event */

typedef enum { SSE_OK = 0, SSE_OOM, SSE_LINE_TOO_LONG, SSE_EVENT_TOO_BIG } sse_status;

typedef void (*sse_event_cb)(void *ctx, const char *data, size_t len);

typedef struct {
    char *line;  size_t line_len, line_cap;    /* current, unfinished line */
    char *data;  size_t data_len, data_cap;    /* data of the current event */
    int has_data;
    sse_event_cb cb;
    void *ctx;
    sse_status err;                            /* set once; further input is dropped */
} sse_parser;

void sse_init(sse_parser *p, sse_event_cb cb, void *ctx);
void sse_feed(sse_parser *p, const char *buf, size_t n);
void sse_finish(sse_parser *p);   /* delivers a last event not followed by a blank line */
void sse_free(sse_parser *p);
/* Why the parser stopped ("" when it did not), e.g. "an SSE line exceeded 1 MiB". */
const char *sse_error(const sse_parser *p);
#endif
