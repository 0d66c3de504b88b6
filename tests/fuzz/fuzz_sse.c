/* fuzz_sse.c — the load generator's SSE framing (bench/load/sse.c), fed the
 * bytes in two pieces split at the first byte's value, as a network would. */
#include <string.h>
#include "sse.h"

static void on_event(void *ctx, const char *data, size_t len) {
    size_t *total = ctx;
    unsigned char x = 0;
    for (size_t i = 0; i < len; i++) x ^= (unsigned char)data[i];   /* every byte readable (ASan) */
    *total += len + x;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    size_t total = 0, cut = n ? data[0] % (n + 1) : 0;
    sse_parser p;
    sse_init(&p, on_event, &total);
    sse_feed(&p, (const char *)data, cut);
    sse_feed(&p, (const char *)data + cut, n - cut);
    sse_finish(&p);
    sse_free(&p);
    return 0;
}
