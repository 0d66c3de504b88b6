/* fuzz_config.c — config.json (engine/config.c): any bytes either load as
 * a config whose sizes are in range, or fail with a message. */
#include "config.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    char path[64], err[512] = "";
    int fd = fuzz_as_file(data, n, path, sizeof path);
    if (fd < 0) return 0;
    model_config c;
    if (!config_load(&c, path, err, sizeof err)) {
        if (c.hidden_size <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
            c.n_heads % c.n_kv_heads || c.head_dim <= 0 || c.vocab_size <= 0 || !(c.rope_theta > 0))
            __builtin_trap();
        /* mixture of experts: what moe.c sizes from */
        if (config_has_experts(&c) && (c.n_experts <= 0 || c.n_experts_per_tok <= 0 ||
                                       c.n_experts_per_tok > c.n_experts || c.moe_intermediate_size <= 0 ||
                                       c.decoder_sparse_step <= 0))
            __builtin_trap();
    } else if (!err[0]) {
        __builtin_trap();
    }
    close(fd);
    return 0;
}
