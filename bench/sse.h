/* sse.h — Server-Sent Events framing (what OpenAI-compatible servers
 * stream): bytes in, one callback per event with its data lines joined by
 * '\n'. Comment lines (":…") and other fields (event:, id:) are ignored;
 * CRLF and LF line ends both work; an event ends at a blank line. */
#ifndef SPECBED_BENCH_SSE_H
#define SPECBED_BENCH_SSE_H
#include <stddef.h>

typedef void (*sse_event_cb)(void *ctx, const char *data, size_t len);

typedef struct {
    char *line;  size_t line_len, line_cap;    /* current, unfinished line */
    char *data;  size_t data_len, data_cap;    /* data of the current event */
    int has_data;
    sse_event_cb cb;
    void *ctx;
    int oom;                                   /* set when memory ran out; further input is dropped */
} sse_parser;

void sse_init(sse_parser *p, sse_event_cb cb, void *ctx);
void sse_feed(sse_parser *p, const char *buf, size_t n);
void sse_finish(sse_parser *p);   /* delivers a last event not followed by a blank line */
void sse_free(sse_parser *p);
#endif
