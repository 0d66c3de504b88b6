/* fuzz_sglang.c — the SGLang decode-batch log line parser
 * (bench/load/metrics_sglang.c), one line at a time as the log tailer feeds it. */
#include <stdlib.h>
#include <string.h>
#include "metrics_sglang.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    char *line = malloc(n + 1);
    if (!line) return 0;
    memcpy(line, data, n);
    line[n] = 0;
    sgl_line l;
    (void)sgl_parse_line(line, &l);
    free(line);
    return 0;
}
