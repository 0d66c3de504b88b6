/* fuzz_request.c — an HTTP request body → request parameters
 * (serve/server_openai.c, server_chat.c), on a server context holding the
 * fixture model's engine: any body is either a request whose prompt tokens
 * are in the vocabulary, or a 4xx/5xx with a message. */
#include <stdlib.h>
#include <string.h>
#include "server_internal.h"

#ifndef SPECBED_ROOT
#define SPECBED_ROOT "."
#endif

static server *ctx(void) {
    static server s;
    static int ready;
    if (!ready) {
        char err[1024];
        gen_engine_opts eo = {.model_dir = SPECBED_ROOT "/tests/fixtures/qwen3-tied", .max_seqs = 1};
        if (gen_engine_create(&s.e, &eo, err, sizeof err)) abort();
        server_opts_default(&s.o);
        s.o.model_dir = eo.model_dir;
        snprintf(s.served_name, sizeof s.served_name, "qwen3-tied");
        s.V = s.e->m->cfg.vocab_size;
        s.im_start = tok_id(s.e->tok, "<|im_start|>");
        s.im_end = tok_id(s.e->tok, "<|im_end|>");
        ready = 1;
    }
    return &s;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t n) {
    server *s = ctx();
    for (int kind = 0; kind < 2; kind++) {
        srv_req *r = NULL;
        int status = 0;
        const char *param = NULL;
        char err[1024] = "";
        if (!srv_parse_request(s, kind ? SRV_CHAT : SRV_COMPLETION, (const char *)data, n, &r, &status, &param, err,
                               sizeof err)) {
            for (int i = 0; i < r->n_prompt; i++)
                if (r->prompt[i] < 0 || r->prompt[i] >= s->V) __builtin_trap();
            srv_req_unref(r);
        } else if (!err[0] || status < 400 || status > 599) {
            __builtin_trap();
        }
    }
    return 0;
}
