/* fuzz_safetensors.c — safetensors header parsing and validation
 * (engine/safetensors.c): any bytes either open as a checkpoint whose
 * every tensor lies inside the file, or fail with a message. */
#include <string.h>
#include "fuzz_input.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    char path[64], err[512];
    int fd = fuzz_as_file(data, n, path, sizeof path);
    if (fd < 0) return 0;
    st_model *m = NULL;
    if (!st_open_file(&m, path, err, sizeof err)) {
        for (int i = 0; i < st_count(m); i++) {
            const st_tensor *t = st_at(m, i);
            volatile unsigned char sink = 0;
            if (t->nbytes) sink ^= ((const unsigned char *)t->data)[t->nbytes - 1];   /* in bounds, or ASan says so */
            (void)sink;
            if (st_find(m, t->name) != t) __builtin_trap();
        }
        st_close(m);
    } else if (!err[0]) {
        __builtin_trap();   /* a failure must say why */
    }
    close(fd);
    return 0;
}
