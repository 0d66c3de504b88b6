/* fuzz_prom.c — the Prometheus text parser the metric sources read
 * /metrics with (bench/load/prom.c). */
#include <stdlib.h>
#include <string.h>
#include "prom.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    char *text = malloc(n + 1);
    if (!text) return 0;
    memcpy(text, data, n);
    text[n] = 0;
    prom_doc d;
    char err[256];
    if (!prom_parse(text, &d, err, sizeof err)) {
        int found;
        (void)prom_sum(&d, "specbed:spec_decode_num_drafts_total", NULL, NULL, &found);
        (void)prom_sum(&d, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position", "0", &found);
        (void)prom_has_prefix(&d, "sglang:");
        prom_free(&d);
    }
    free(text);
    return 0;
}
