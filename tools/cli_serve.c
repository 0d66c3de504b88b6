/* cli_serve.c — `specbed serve`: option parsing, --help, and the process's
 * signal handling (SIGTERM/SIGINT: stop accepting, drain or cancel, exit 0).
 * The server itself is server.c and friends. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "args.h"

#define CMD "specbed serve"
#include "verify_policy.h"
#include "spec_cli.h"
#include "server.h"
#include "cli_tp.h"
#include "cli_device.h"

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed serve --model DIR [options]\n"
        "\n"
        "OpenAI-compatible HTTP server with continuous batching and batched speculative\n"
        "verification. Routes: POST /v1/completions, POST /v1/chat/completions (ChatML),\n"
        "GET /v1/models, GET /health, GET /metrics (Prometheus text, vLLM-style names with\n"
        "the specbed: prefix). Every --decode-log-interval decode steps one SGLang-shaped\n"
        "line goes to stderr:\n"
        "  Decode batch, #running-req: N, #token: T, token usage: U, accept len: L,\n"
        "  accept rate: R, gen throughput (token/s): X, #queue-req: Q\n"
        "(accept len = committed tokens / sequence verify steps over the interval, bonus\n"
        "token included; accept rate = accepted / drafted tokens).\n"
        "\n"
        "  --model DIR               target model directory (required)\n"
        "  --served-model-name NAME  model id in the API (default: the directory's name); non-empty\n"
        "                            UTF-8 of at most 255 bytes, no control characters\n"
        "  --drafter NAME            " DRAFTER_NAMES " (default none)\n"
        "  --draft-model DIR         draft model for --drafter draft\n"
        "  --dspark-final-tap S       raw|normed: which target state a DSpark checkpoint's tap of the\n"
        "                            final layer was trained on (refused without it: DeepSpec's\n"
        "                            evaluator refuses such a checkpoint)\n"
        "  --depth K                 default drafts per verify step, 1..16 (default 4)\n"
        "  --ngram-max N, --ngram-min N   ngram drafter suffix lengths (default 3, 1)\n"
        "  --ngram-spec-factor F  ngram drafts at most ceil(F x match length) tokens (default 1; 0 = no cap)\n"
        "  --verify-schedule S       how many drafts each step verifies: " VPOLICY_NAMES "\n"
        "                            (default fixed = all); see --p-min, --adaptive-alpha, --cost-table\n"
        "  --p-min P                 threshold: stop at the first draft whose confidence is below P\n"
        "                            (default 0.5)\n"
        "  --adaptive-alpha A        adaptive: EMA weight on HISTORY (default 0.8, vLLM's)\n"
        "  --cost-table FILE         confidence/adaptive: `specbed profile` output; without it the\n"
        "                            verify cost and the drafter's are profiled at startup; with the\n"
        "                            drafter's cost (`profile --drafter`, same drafter) both count it,\n"
        "                            and adaptive drafts only in steps where drafting pays\n"
        "  --host ADDR               numeric address to listen on (default 127.0.0.1)\n"
        "  --port P                  TCP port (default 8000; 0 = any free port, printed at startup)\n"
        "  --max-running N           requests batched together (default 16)\n"
        "  --max-queue N             requests waiting beyond those; more get 429 (default 256)\n"
        "  --max-seq-len N           context per request (default min(model's, 2048))\n"
        "  --decode-log-interval N   decode steps per Decode batch line, 0 = off (default 40)\n"
        "  --api-key KEY             require 'Authorization: Bearer KEY' on every route but /health\n"
        "                            (checked before any request body is read; printable, no\n"
        "                            leading or trailing space, which HTTP would strip)\n"
        "  --max-connections N       open HTTP connections (default 512). When all are taken, a new one\n"
        "                            closes the oldest that has been sending its request for 1 s or more;\n"
        "                            if none has, it gets a reserve slot (below)\n"
        "  --reserve-connections N   connections past --max-connections that answer only /health and\n"
        "                            /metrics (others get 503), so probes get through (default 16)\n"
        "  --max-connections-per-ip N  requests still being sent from one address; past this its oldest\n"
        "                            one that has been sending for 1 s or more is closed (default 128;\n"
        "                            requests being answered do not count)\n"
        "  --header-timeout S        a request line and headers must arrive within S seconds of the\n"
        "                            connection or of the previous answer, in total (default 10)\n"
        "  --body-timeout S          a request body must arrive within S seconds of its headers, in\n"
        "                            total (default 30)\n"
        "  --http-timeout S          close a connection that sends nothing for S seconds while its\n"
        "                            request is incomplete (default 15)\n"
        "  --max-body-memory MIB     request bodies being received hold at most MIB MiB in all, reserved\n"
        "                            from the Content-Length (4 MiB for a chunked body) before a byte is\n"
        "                            kept; past it the oldest stalled body is closed, else 503 (default 64)\n"
        "  --drain-timeout S         on SIGTERM, let running requests finish for up to S seconds,\n"
        "                            then cancel them (default 10)\n"
        "  --inject-fault [SPEC]     FOR CANARY VALIDATION ONLY: break the output the way a published\n"
        "                            incident did. SPEC is KIND[,key=value...] (default collision):\n"
        "                              collision rows=R,depth=D,p=P,first=S,seed=N  one draft row's hidden\n"
        "                                state overwritten in verify steps of >= R rows (default 4, p 0.25)\n"
        "                              flat below=B,trigger=ID  a fixed context-free distribution at\n"
        "                                positions < B (128) after token ID (default the newline token)\n"
        "                              window below=B  keys more than B (128) positions back invisible\n"
        "                              nondet p=P  one logits row per step perturbed, per-process seed\n"
        "  --tp N                    tensor parallelism over N processes: start as\n"
        "                            `mpirun -np N specbed serve ... --tp N`; rank 0 serves HTTP\n"
        "  --device D                cpu (default) or cuda: the kernels on the first visible GPU\n"
        "                            (SPECBED_CUDA_MATMUL=tensor: bf16 matmuls on the tensor cores, batch-invariant;\n"
        "                            SPECBED_CUDA_MATMUL=cublas: cuBLAS matmuls, fast, not batch-invariant;\n"
        "                            SPECBED_CUDA_GRAPHS=0: no CUDA graphs; SPECBED_CUDA_PDL=0: no programmatic\n"
        "                            dependent launch)\n"
        "  --experts-on-host         with --device cuda, a mixture-of-experts model's expert weights in\n"
        "                            pinned host memory that the GPU reads across the bus (attention,\n"
        "                            router and dense layers on the GPU); refused on the cpu\n"
        "  -h, --help                this text\n"
        "\n"
        "Request fields: model, prompt (completions: string or token ids) / messages (chat),\n"
        "max_tokens (chat: also max_completion_tokens), temperature (default 1), top_p, top_k,\n"
        "seed, stop (string or list), stream, stream_options.include_usage, logprobs (completions:\n"
        "0..20 alternatives; chat: true + top_logprobs 0..20), echo (completions; with\n"
        "max_tokens 0 and logprobs it scores the prompt), n (must be 1), ignore_eos (as vLLM),\n"
        "and the experiment override\n"
        "  \"spec_depth\": 0..16    drafts per step for this request; 0 = speculation off;\n"
        "                         absent = the server's --depth; above 0 on a server without\n"
        "                         a drafter: 400\n"
        "A streamed chat completion sends its first chunk (the role) once the prompt is\n"
        "prefilled, as vLLM does, so TTFT taken at the first chunk includes prefill.\n");
}

static int parse(int argc, char **argv, server_opts *o, int *tp, const char **device, int *experts_on_host) {
    server_opts_default(o);
    spec_cli given = {.dspark_model = -1};   /* speculation options given (spec_cli_check) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        float fl;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(stdout); exit(0); }
#define VAL() if (!(v = opt_value(CMD, argc, argv, &i))) return -1
        else if (!strcmp(a, "--model")) { VAL(); o->model_dir = v; }
        else if (!strcmp(a, "--experts-on-host")) *experts_on_host = 1;
        else if (!strcmp(a, "--served-model-name")) { VAL(); o->served_name = v; }
        else if (!strcmp(a, "--drafter")) { VAL(); o->dr.name = v; }
        else if (!strcmp(a, "--draft-model")) { VAL(); o->dr.draft_model = v; given.draft_model = 1; }
        else if (!strcmp(a, "--dspark-final-tap")) { VAL(); if (drafter_opt_dspark_final_tap(CMD, a, v, &o->dr)) return -1; given.dspark_final_tap = 1; }
        else if (!strcmp(a, "--host")) { VAL(); o->host = v; }
        else if (!strcmp(a, "--api-key")) { VAL(); o->api_key = v; }
        else if (!strcmp(a, "--depth")) { VAL(); if (opt_int(CMD, a, v, 1, SPEC_MAX_DEPTH, &o->depth)) return -1; given.depth_opt = "--depth"; }
        else if (!strcmp(a, "--ngram-max")) { VAL(); if (opt_int(CMD, a, v, 1, 64, &o->dr.ngram_n_max)) return -1; given.ngram = 1; }
        else if (!strcmp(a, "--ngram-min")) { VAL(); if (opt_int(CMD, a, v, 1, 64, &o->dr.ngram_n_min)) return -1; given.ngram = 1; }
        else if (!strcmp(a, "--ngram-spec-factor")) { VAL(); if (drafter_opt_ngram_factor(CMD, a, v, &o->dr)) return -1; given.ngram = 1; }
        else if (!strcmp(a, "--port")) { VAL(); if (opt_int(CMD, a, v, 0, 65535, &o->port)) return -1; }
        else if (!strcmp(a, "--max-running")) { VAL(); if (opt_int(CMD, a, v, 1, 1024, &o->max_running)) return -1; }
        else if (!strcmp(a, "--max-queue")) { VAL(); if (opt_int(CMD, a, v, 0, 1 << 20, &o->max_queue)) return -1; }
        else if (!strcmp(a, "--max-seq-len")) { VAL(); if (opt_int(CMD, a, v, 2, 1 << 20, &o->max_seq_len)) return -1; }
        else if (!strcmp(a, "--decode-log-interval")) { VAL(); if (opt_int(CMD, a, v, 0, 1 << 30, &o->decode_log_interval)) return -1; }
        else if (!strcmp(a, "--verify-schedule")) {
            VAL();
            vpolicy_kind k;
            if (vpolicy_parse(v, &k)) {
                fprintf(stderr, "specbed serve: --verify-schedule expects %s, got '%s'\n", VPOLICY_NAMES, v);
                return -1;
            }
            o->verify.name = v;
        }
        else if (!strcmp(a, "--p-min")) { VAL(); if (opt_float(CMD, a, v, 0, 1, &fl)) return -1; o->verify.p_min = fl; given.p_min = 1; }
        else if (!strcmp(a, "--adaptive-alpha")) { VAL(); if (opt_float(CMD, a, v, 0, 0.999, &fl)) return -1; o->verify.alpha = fl; given.alpha = 1; }
        else if (!strcmp(a, "--cost-table")) { VAL(); o->verify.cost_path = v; given.cost_table = 1; }
        else if (!strcmp(a, "--max-connections")) { VAL(); if (opt_int(CMD, a, v, 4, 65536, &o->max_connections)) return -1; }
        else if (!strcmp(a, "--http-timeout")) { VAL(); if (opt_int(CMD, a, v, 1, 86400, &o->http_timeout_s)) return -1; }
        else if (!strcmp(a, "--reserve-connections")) { VAL(); if (opt_int(CMD, a, v, 1, 4096, &o->reserve_connections)) return -1; }
        else if (!strcmp(a, "--max-connections-per-ip")) { VAL(); if (opt_int(CMD, a, v, 1, 65536, &o->max_connections_per_ip)) return -1; }
        else if (!strcmp(a, "--header-timeout")) { VAL(); if (opt_int(CMD, a, v, 1, 86400, &o->header_timeout_s)) return -1; }
        else if (!strcmp(a, "--body-timeout")) { VAL(); if (opt_int(CMD, a, v, 1, 86400, &o->body_timeout_s)) return -1; }
        else if (!strcmp(a, "--max-body-memory")) {
            VAL();
            int mib;
            if (opt_int(CMD, a, v, 4, 1 << 20, &mib)) return -1;   /* at least one 4 MiB body */
            o->body_memory = (size_t)mib << 20;
        }
        else if (!strcmp(a, "--tp")) { VAL(); if (opt_int(CMD, a, v, 1, 64, tp)) return -1; }
        else if (!strcmp(a, "--device")) { VAL(); *device = v; if (cli_device_check(CMD, v)) return -1; }
        else if (!strcmp(a, "--drain-timeout")) { VAL(); if (opt_float(CMD, a, v, 0, 86400, &fl)) return -1; o->drain_s = fl; }
        else if (!strcmp(a, "--inject-fault")) {
            o->fault_on = 1;
            char ferr[512];
            const char *spec = i + 1 < argc && strncmp(argv[i + 1], "--", 2) ? argv[++i] : "collision";
            if (fault_parse(spec, &o->fault, ferr, sizeof ferr)) {
                fprintf(stderr, "specbed serve: %s\n", ferr);
                return -1;
            }
        }
#undef VAL
        else { fprintf(stderr, "specbed serve: unknown option '%s' (see --help)\n", a); return -1; }
    }
    if (!o->model_dir) { fprintf(stderr, "specbed serve: --model DIR is required\n"); return -1; }
    given.drafters = o->dr.name;
    given.schedules = o->verify.name;
    char err[512];
    if (spec_cli_check(&given, err, sizeof err) || server_opts_check(o, err, sizeof err)) {
        fprintf(stderr, CMD ": %s\n", err);
        return -1;
    }
    return 0;
}

int cli_serve(int argc, char **argv) {
    server_opts o;
    int tp = 1;
    const char *device = "cpu";
    int experts_on_host = 0;
    if (parse(argc, argv, &o, &tp, &device, &experts_on_host)) return 2;
    if (cli_device_select_experts(CMD, device, tp, experts_on_host)) return 1;
    /* Signals are taken synchronously by this thread; every thread the
     * server (and MPI, under --tp) starts inherits the blocked mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    tp_job job;
    if (tp_job_open(&job, CMD, tp)) return 1;
    if (job.rank > 0) return tp_job_worker(&job, CMD, server_engine_opts(&o));
    o.comm = job.comm;
    char err[1024];
    server *s;
    if (server_create(&s, &o, err, sizeof err)) {
        fprintf(stderr, "specbed serve: %s\n", err);
        if (job.comm) kb_comm_abort(job.comm, 1, NULL);
        return 1;
    }
    if (o.fault_on && !strcmp(o.dr.name, "none"))
        fprintf(stderr, "specbed serve: warning: --inject-fault without a drafter: there are no draft rows to corrupt\n");
    int rc = 0;
    for (;;) {
        struct timespec ts = {0, 200 * 1000000L};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            fprintf(stderr, "specbed serve: %s: no new requests; draining running ones (up to %gs)\n",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT", o.drain_s);
            break;
        }
        if (server_failed(s)) { rc = 1; break; }
    }
    server_free(s);   /* stops the other ranks too */
    tp_job_close(&job);
    fprintf(stderr, "specbed serve: stopped\n");
    return rc;
}
