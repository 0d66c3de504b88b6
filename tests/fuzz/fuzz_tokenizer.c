/* fuzz_tokenizer.c — tokenizer.json loading (engine/tokenizer.c), then an
 * encode/decode round trip of a fixed text with whatever loaded. */
#include <stdlib.h>
#include <string.h>
#include "fuzz_input.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    char path[64], err[512] = "";
    int fd = fuzz_as_file(data, n, path, sizeof path);
    if (fd < 0) return 0;
    tokenizer *t = NULL;
    if (!tok_load(&t, path, err, sizeof err)) {
        static const char text[] = "def f(x):\n    return x + 1  # héllo <|im_end|>";
        int *ids = NULL, n_ids = 0;
        if (!tok_encode(t, text, sizeof text - 1, &ids, &n_ids, err, sizeof err))
            for (int i = 0; i < n_ids; i++)
                if (ids[i] < 0 || ids[i] >= tok_vocab_size(t)) __builtin_trap();
        free(ids);
        tok_free(t);
    } else if (!err[0]) {
        __builtin_trap();
    }
    close(fd);
    return 0;
}
