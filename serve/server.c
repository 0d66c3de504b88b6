/* server.c — server lifetime: sizing and loading the engine and drafter,
 * starting the scheduler and HTTP threads, and the shutdown order (stop
 * accepting → drain or cancel → join HTTP → free). Request handling lives
 * in the other server_*.c files. */
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "errmsg.h"
#include "server_internal.h"

void server_opts_default(server_opts *o) {
    memset(o, 0, sizeof *o);
    o->dr.name = "none";
    o->depth = 4;
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_running = 16;
    o->max_queue = 256;
    o->decode_log_interval = 40;
    o->max_body = 4u << 20;
    o->max_connections = 512;
    o->http_timeout_s = 15;
    o->header_timeout_s = 10;
    o->body_timeout_s = 30;
    o->max_connections_per_ip = 128;
    o->reserve_connections = 16;
    o->body_memory = 64u << 20;
    o->drain_s = 10.0;
    o->verify = (vpolicy_args)VPOLICY_ARGS_DEFAULT;
}

/* --verify-schedule: how many of each request's drafts a step verifies. */
static int setup_policy(server *s, char *err, size_t errlen) {
    if (!s->d) return 0;
    if (vpolicy_setup(&s->policy, &s->cost, &s->o.verify, s->e, s->d, s->o.max_running, s->o.depth, s->log, err, errlen))
        return -1;
    spec_verify_hook hook = vpolicy_hook(s->policy);
    spec_batch_set_verify_hook(s->b, &hook);
    return 0;
}

static void base_name(const char *dir, char *out, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    snprintf(out, cap, "%.*s", (int)(n - b), dir + b);
}

gen_engine_opts server_engine_opts(const server_opts *o) {
    /* Verify rows for every running request at any depth a request may ask
     * for, plus room for a prefill chunk beside them. */
    int rows = o->max_running * (SPEC_MAX_DEPTH + 1) + 64;
    return (gen_engine_opts){.model_dir = o->model_dir, .max_seqs = o->max_running,
                             .max_batch_rows = rows > 256 ? rows : 256, .max_seq_len = o->max_seq_len,
                             .comm = o->comm};
}

/* The first control character (C0 or DEL) in s[0..n), or -1. */
static long first_ctl(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return (long)i;
    return -1;
}

int server_opts_check(const server_opts *o, char *err, size_t errlen) {
    if (!o->model_dir) return errf(err, errlen, "no model directory given");
    if (o->api_key) {
        const char *k = o->api_key;
        size_t n = strlen(k);
        long at = first_ctl(k, n);
        if (!n) return errf(err, errlen, "--api-key is empty");
        /* a CR LF in it would split the client's header; no client can send it */
        if (at >= 0)
            return errf(err, errlen, "--api-key has a control character (byte 0x%02x at offset %ld), which an HTTP "
                        "header value cannot carry: no client could send this key", (unsigned char)k[at], at);
        if (k[0] == ' ' || k[n - 1] == ' ')
            return errf(err, errlen, "--api-key begins or ends with a space, which HTTP strips from a header value: "
                        "no request could match this key");
    }
    char name[512];
    if (o->served_name) snprintf(name, sizeof name, "%s", o->served_name);
    else base_name(o->model_dir, name, sizeof name);
    const char *what = o->served_name ? "--served-model-name" : "the model directory's name (the default "
                                                                "--served-model-name)";
    size_t n = strlen(o->served_name ? o->served_name : name);
    long at = first_ctl(name, strlen(name));
    if (n == 0) return errf(err, errlen, "%s is empty: the API needs a model id", what);
    if (n >= sizeof ((server *)0)->served_name)
        return errf(err, errlen, "%s is %zu bytes; at most %zu", what, n, sizeof ((server *)0)->served_name - 1);
    if (at >= 0)
        return errf(err, errlen, "%s has a control character (byte 0x%02x at offset %ld); a model id goes into every "
                    "answer and must be plain text", what, (unsigned char)name[at], at);
    if (!srv_utf8_valid(name, n)) return errf(err, errlen, "%s is not valid UTF-8", what);
    return 0;
}

int server_create(server **out, const server_opts *o, char *err, size_t errlen) {
    *out = NULL;
    if (server_opts_check(o, err, errlen)) return -1;
    if (o->max_running < 1 || o->max_running > 1024) return errf(err, errlen, "max_running %d outside 1..1024", o->max_running);
    if (o->max_queue < 0) return errf(err, errlen, "max_queue %d is negative", o->max_queue);
    if (o->depth < 1 || o->depth > SPEC_MAX_DEPTH) return errf(err, errlen, "depth %d outside 1..%d", o->depth, SPEC_MAX_DEPTH);
    if (o->port < 0 || o->port > 65535) return errf(err, errlen, "port %d outside 0..65535", o->port);
    server *s = calloc(1, sizeof *s);
    if (!s) return errf(err, errlen, "out of memory");
    s->o = *o;
    s->log = o->log ? o->log : stderr;
    s->listen_fd = -1;
    if (!s->o.host) s->o.host = "127.0.0.1";
    if (!s->o.max_body) s->o.max_body = 4u << 20;
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    srv_metrics_init(&s->m);
    if (o->served_name) snprintf(s->served_name, sizeof s->served_name, "%s", o->served_name);
    else base_name(o->model_dir, s->served_name, sizeof s->served_name);

    int N = o->max_running;
    gen_engine_opts eo = server_engine_opts(o);
    if (gen_engine_create(&s->e, &eo, err, errlen)) goto fail;
    s->m.tp = fwd_tp_size(s->e->fwd);
    if (!(s->m.tp_pages_used = malloc((size_t)s->m.tp * sizeof(int)))) { errf(err, errlen, "out of memory"); goto fail; }
    for (int r = 0; r < s->m.tp; r++) s->m.tp_pages_used[r] = -1;   /* not synced yet: not exported */
    s->V = s->e->m->cfg.vocab_size;
    s->im_start = tok_id(s->e->tok, "<|im_start|>");
    s->im_end = tok_id(s->e->tok, "<|im_end|>");
    s->eos[0] = s->e->m->cfg.eos_token_id;
    s->eos[1] = tok_id(s->e->tok, "<|endoftext|>");
    s->eos[2] = s->im_end;
    s->o.dr.max_seqs = N;
    s->o.dr.depth = s->o.depth;
    if (drafter_create(&s->d, &s->o.dr, s->e, err, errlen)) goto fail;
    spec_callbacks cb = {0};
    srv_loop_callbacks(s, &cb);
    if (spec_batch_create(&s->b, s->e, s->d, s->d ? o->depth : 0, &cb, err, errlen)) goto fail;
    if (o->fault_on) {
        spec_fault f = o->fault;
        if (f.kind == FAULT_FLAT && f.trigger < 0) {   /* the report's trigger: a line break */
            int *ids = NULL, n = 0;
            char terr[256];
            if (!tok_encode(s->e->tok, "\n", 1, &ids, &n, terr, sizeof terr) && n > 0) f.trigger = ids[n - 1];
            free(ids);
        }
        s->o.fault = f;
        spec_batch_set_fault(s->b, &f);
    }
    if (setup_policy(s, err, errlen)) goto fail;
    s->waiting = calloc((size_t)(o->max_queue + N), sizeof *s->waiting);
    s->running = calloc((size_t)N, sizeof *s->running);
    if (!s->waiting || !s->running) { errf(err, errlen, "out of memory"); goto fail; }
    if (srv_loop_start(s, err, errlen)) goto fail;
    if (srv_http_start(s, err, errlen)) goto fail;
    fprintf(s->log, "specbed serve: listening on http://%s%s%s:%d (model %s as '%s', drafter %s, depth %d, "
            "verify schedule %s, max-running %d, max-queue %d, context %d, batch rows %d, kernels %s x%d, tp %d)\n",
            strchr(s->o.host, ':') ? "[" : "", s->o.host, strchr(s->o.host, ':') ? "]" : "", s->port,
            o->model_dir, s->served_name, s->d ? s->d->ops->name : "none", s->d ? o->depth : 0,
            s->policy ? o->verify.name : "fixed", N, o->max_queue,
            s->e->opts.max_seq_len, s->e->opts.max_batch_rows, kb_cpu_path(), kb_threads(), s->m.tp);
    if (o->fault_on) {
        char what[256];
        fault_describe(&s->o.fault, what, sizeof what);
        fprintf(s->log, "specbed serve: FAULT INJECTION IS ON (%s); output WILL be wrong\n", what);
    }
    fflush(s->log);
    *out = s;
    return 0;
fail:
    server_free(s);
    return -1;
}

int server_port(const server *s) { return s->port; }

int server_failed(const server *s) { return atomic_load(&s->failed); }

void server_shutdown(server *s) {
    if (!s || s->shut) return;
    s->shut = 1;
    srv_http_quiesce(s);
    srv_loop_stop(s);    /* drains or cancels: every connection thread's wait ends */
    srv_http_stop(s);
}

void server_free(server *s) {
    if (!s) return;
    server_shutdown(s);
    spec_batch_free(s->b);
    vpolicy_free(s->policy);
    drafter_free(s->d);
    gen_engine_free(s->e);
    free(s->waiting);
    free(s->running);
    srv_metrics_destroy(&s->m);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    free(s);
}
