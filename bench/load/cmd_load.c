/* cmd_load.c — `specbed load`: option parsing, running the load generator,
 * writing its outputs, printing the summary. The shared load options live
 * here too (load_cli.h). */
#include "args.h"
#include "httpc.h"
#include "load_cli.h"
#include "stats.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One text per option, shared by LOAD_CLI_HELP and load_cli_help(), so the
 * two cannot say different things. The four options whose default a
 * command changes (--workload, --num-prompts, --max-tokens, --interval) are
 * printed from its load_help_spec; LOAD_CLI_HELP has load's own. */
#define H_URL        "  --url URL             server base, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)\n"
#define H_ENDPOINT   "  --endpoint E          completions (default) or chat\n"
#define H_MODEL      "  --model NAME          model field of requests (default: first id of /v1/models)\n"
#define H_API_KEY    "  --api-key KEY         sent as Authorization: Bearer KEY (printable ASCII; CR/LF and\n" \
                     "                        other control characters are refused)\n"
#define H_TEMP       "  --temperature T       default 0 (greedy)\n"
#define H_TOP_P      "  --top-p P             nucleus sampling mass in (0, 1], sent as top_p when < 1\n" \
                     "                        (default 1: not sent, the server's default)\n"
#define H_SEED       "  --seed S              request seed and prompt-order shuffle (default 0)\n"
#define H_NO_SHUFFLE "  --no-shuffle          send prompts in file order\n"
#define H_IGNORE_EOS "  --ignore-eos          ask the server to ignore end-of-text\n"
#define H_CONC       "  --concurrency N       closed loop: N requests in flight (default 1)\n"
#define H_RATE       "  --rate R              open loop: R requests/s (inf = all at once)\n"
#define H_BURST      "  --burstiness B        gamma shape of arrival gaps (1 = Poisson, default)\n"
#define H_MAXCONC    "  --max-concurrency N   cap on in-flight requests in open loop\n"
#define H_PROFILE    "  --profile SPEC        phases, e.g. 180s@4,180s@20,120s@2,240s@14 (@N closed\n" \
                     "                        loop of N, @rX open loop at X req/s)\n"
#define H_DURATION   "  --duration S          stop sending after S seconds\n"
#define H_MSRC       "  --metrics-source K    auto (default), specbed, vllm, llamacpp, sglang, none\n"
#define H_SGLANG     "  --sglang-log FILE     read SGLang 'Decode batch' lines from FILE as it grows (- = stdin)\n"
#define H_SPEC_DEPTH "  --spec-depth K        send \"spec_depth\": K per request (specbed; 0 = off: a server\n" \
                     "                        whose draft counters still move is reported, loudly; K > 0\n" \
                     "                        against one whose counters do not move is reported too)\n"
#define H_LOGPROBS   "  --logprobs N          ask for N top logprobs per token\n"
#define H_TIMEOUT    "  --request-timeout S   per request (default 600)\n"
#define H_PCTS       "  --percentiles LIST    default 50,90,99\n"
#define H_GOODPUT    "  --goodput SLOS        e.g. ttft:500,tpot:50,e2el:10000 (ms)\n"
#define H_OUT        "  --out DIR             where the CSV/JSON outputs go\n"
#define H_QUIET      "  --quiet               no progress line\n"

const char LOAD_CLI_HELP[] =
    H_URL
    "  --workload FILE|NAME  JSONL prompts; a bare NAME means workloads/NAME.jsonl\n"
    H_ENDPOINT H_MODEL H_API_KEY
    "  --num-prompts N       requests to send (default: one pass over the workload,\n"
    "                        or unlimited with --duration / --profile)\n"
    "  --max-tokens N        output tokens per request (default: the row's, else 128)\n"
    H_TEMP H_TOP_P H_SEED H_NO_SHUFFLE H_IGNORE_EOS H_CONC H_RATE H_BURST H_MAXCONC H_PROFILE H_DURATION
    "  --interval S          metrics interval in seconds (default 5)\n"
    H_MSRC H_SGLANG H_SPEC_DEPTH H_LOGPROBS H_TIMEOUT H_PCTS H_GOODPUT H_OUT H_QUIET;

static const struct { const char *opt, *text; } OPT_HELP[] = {
    {"--url", H_URL}, {"--workload", NULL}, {"--endpoint", H_ENDPOINT}, {"--model", H_MODEL},
    {"--api-key", H_API_KEY}, {"--num-prompts", NULL}, {"--max-tokens", NULL}, {"--temperature", H_TEMP},
    {"--top-p", H_TOP_P}, {"--seed", H_SEED}, {"--no-shuffle", H_NO_SHUFFLE}, {"--ignore-eos", H_IGNORE_EOS},
    {"--concurrency", H_CONC}, {"--rate", H_RATE}, {"--burstiness", H_BURST}, {"--max-concurrency", H_MAXCONC},
    {"--profile", H_PROFILE}, {"--duration", H_DURATION}, {"--interval", NULL}, {"--metrics-source", H_MSRC},
    {"--sglang-log", H_SGLANG}, {"--spec-depth", H_SPEC_DEPTH}, {"--logprobs", H_LOGPROBS},
    {"--request-timeout", H_TIMEOUT}, {"--percentiles", H_PCTS}, {"--goodput", H_GOODPUT}, {"--out", H_OUT},
    {"--quiet", H_QUIET}};

void load_cli_help(FILE *f, const load_help_spec *s) {
    for (size_t i = 0; i < sizeof OPT_HELP / sizeof *OPT_HELP; i++) {
        const char *o = OPT_HELP[i].opt;
        int omit = 0;
        for (int k = 0; s->omit && s->omit[k] && !omit; k++) omit = !strcmp(s->omit[k], o);
        if (omit) continue;
        if (OPT_HELP[i].text) fputs(OPT_HELP[i].text, f);
        else if (!strcmp(o, "--workload"))
            fprintf(f, "  --workload FILE|NAME  JSONL prompts; a bare NAME means workloads/NAME.jsonl (%s)\n",
                    s->workload ? s->workload : "required");
        else if (!strcmp(o, "--num-prompts"))
            fprintf(f, "  --num-prompts N       requests to send (default: %s)\n", s->num_prompts);
        else if (!strcmp(o, "--max-tokens"))
            fprintf(f, "  --max-tokens N        output tokens per request (default: %s)\n", s->max_tokens);
        else if (!strcmp(o, "--interval"))
            fprintf(f, "  --interval S          metrics interval in seconds (default %g)\n", s->interval_s);
    }
}

void load_cli_defaults(load_cli *o) {
    memset(o, 0, sizeof *o);
    ld_config_defaults(&o->c);
    ld_pcts_parse("50,90,99", &o->pcts, NULL, 0);
}

static int parse_goodput(const char *cmd, const char *v, ld_slo *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", ")) {
        char *c = strchr(tok, ':');
        double ms;
        if (!c || opt_double(cmd, "--goodput", c + 1, 0.001, 1e9, &ms)) {
            fprintf(stderr, "%s: --goodput '%s': expected KEY:MS with KEY ttft, tpot or e2el\n", cmd, v);
            return -1;
        }
        *c = 0;
        if (!strcmp(tok, "ttft")) s->ttft_ms = ms;
        else if (!strcmp(tok, "tpot")) s->tpot_ms = ms;
        else if (!strcmp(tok, "e2el")) s->e2el_ms = ms;
        else { fprintf(stderr, "%s: --goodput: unknown metric '%s' (ttft, tpot, e2el)\n", cmd, tok); return -1; }
    }
    return 0;
}

int load_cli_opt(const char *cmd, int argc, char **argv, int *i, load_cli *o) {
    const char *a = argv[*i], *v;
    ld_config *c = &o->c;
#define VAL() do { if (!(v = opt_value(cmd, argc, argv, i))) return -1; } while (0)
    if (!strcmp(a, "--url")) { VAL(); c->url = v; }
    else if (!strcmp(a, "--workload")) { VAL(); o->workload = v; }
    else if (!strcmp(a, "--endpoint")) {
        VAL();
        if (!strcmp(v, "completions")) c->endpoint = EP_COMPLETIONS;
        else if (!strcmp(v, "chat")) c->endpoint = EP_CHAT;
        else { fprintf(stderr, "%s: --endpoint '%s' must be completions or chat\n", cmd, v); return -1; }
    }
    else if (!strcmp(a, "--model")) { VAL(); c->model = v; }
    else if (!strcmp(a, "--api-key")) {
        VAL();
        char e[256];
        if (ld_api_key_check(v, e, sizeof e)) { fprintf(stderr, "%s: %s\n", cmd, e); return -1; }
        c->api_key = v;
    }
    else if (!strcmp(a, "--num-prompts")) { VAL(); if (opt_int(cmd, a, v, 1, 10000000, &c->num_prompts)) return -1; o->set_num_prompts = 1; }
    else if (!strcmp(a, "--max-tokens")) { VAL(); if (opt_int(cmd, a, v, 1, 1000000, &c->max_tokens)) return -1; o->set_max_tokens = 1; }
    else if (!strcmp(a, "--temperature")) { VAL(); if (opt_double(cmd, a, v, 0, 100, &c->temperature)) return -1; }
    else if (!strcmp(a, "--top-p")) {
        VAL();
        if (opt_double(cmd, a, v, 0, 1, &c->top_p)) return -1;
        if (!(c->top_p > 0)) { fprintf(stderr, "%s: --top-p must be in (0, 1], got '%s'\n", cmd, v); return -1; }
    }
    else if (!strcmp(a, "--seed")) {
        VAL();
        char *e;
        unsigned long long s = strtoull(v, &e, 10);
        if (e == v || *e) { fprintf(stderr, "%s: --seed '%s' must be a non-negative integer\n", cmd, v); return -1; }
        c->seed = s;
    }
    else if (!strcmp(a, "--no-shuffle")) c->shuffle = 0;
    else if (!strcmp(a, "--ignore-eos")) c->ignore_eos = 1;
    else if (!strcmp(a, "--concurrency")) { VAL(); if (opt_int(cmd, a, v, 1, 100000, &c->concurrency)) return -1; }
    else if (!strcmp(a, "--rate")) {
        VAL();
        if (!strcmp(v, "inf")) c->rate = INFINITY;
        else if (opt_double(cmd, a, v, 1e-6, 1e6, &c->rate)) return -1;
    }
    else if (!strcmp(a, "--burstiness")) { VAL(); if (opt_double(cmd, a, v, 0.01, 1000, &c->burstiness)) return -1; }
    else if (!strcmp(a, "--max-concurrency")) { VAL(); if (opt_int(cmd, a, v, 1, 100000, &c->max_concurrency)) return -1; }
    else if (!strcmp(a, "--profile")) {
        VAL();
        char err[256];
        if (ld_profile_parse(v, &c->profile, err, sizeof err)) { fprintf(stderr, "%s: %s\n", cmd, err); return -1; }
        c->use_profile = 1;
    }
    else if (!strcmp(a, "--duration")) { VAL(); if (opt_double(cmd, a, v, 0.1, 1e7, &c->duration_s)) return -1; }
    else if (!strcmp(a, "--interval")) { VAL(); if (opt_double(cmd, a, v, 0.05, 3600, &c->interval_s)) return -1; o->set_interval = 1; }
    else if (!strcmp(a, "--metrics-source")) {
        VAL();
        if (msrc_from_name(v, &c->msrc)) {
            fprintf(stderr, "%s: --metrics-source '%s' must be auto, specbed, vllm, llamacpp, sglang or none\n", cmd, v);
            return -1;
        }
    }
    else if (!strcmp(a, "--sglang-log")) { VAL(); c->sglang_log = v; }
    else if (!strcmp(a, "--spec-depth")) { VAL(); if (opt_int(cmd, a, v, 0, 64, &c->spec_depth)) return -1; }
    else if (!strcmp(a, "--logprobs")) { VAL(); if (opt_int(cmd, a, v, 0, 20, &c->logprobs)) return -1; }
    else if (!strcmp(a, "--request-timeout")) { VAL(); if (opt_double(cmd, a, v, 0.1, 1e6, &c->request_timeout_s)) return -1; }
    else if (!strcmp(a, "--percentiles")) {
        VAL();
        char err[256];
        if (ld_pcts_parse(v, &o->pcts, err, sizeof err)) { fprintf(stderr, "%s: %s\n", cmd, err); return -1; }
    }
    else if (!strcmp(a, "--goodput")) { VAL(); if (parse_goodput(cmd, v, &c->slo)) return -1; }
    else if (!strcmp(a, "--out")) { VAL(); o->out = v; }
    else if (!strcmp(a, "--quiet")) o->quiet = 1;
    else return 0;
#undef VAL
    return 1;
}

int load_cli_check(const char *cmd, load_cli *o) {
    ld_config *c = &o->c;
    if (!c->url) { fprintf(stderr, "%s: --url is required\n", cmd); return -1; }
    if (!o->workload) { fprintf(stderr, "%s: --workload is required\n", cmd); return -1; }
    if (c->use_profile && c->rate > 0) { fprintf(stderr, "%s: --profile and --rate exclude each other\n", cmd); return -1; }
    if (isinf(c->rate) && !c->num_prompts) { fprintf(stderr, "%s: --rate inf needs --num-prompts\n", cmd); return -1; }
    if (c->msrc == MSRC_SGLANG && !c->sglang_log)
        fprintf(stderr, "%s: note: without --sglang-log, SGLang intervals come from its /metrics gauges\n", cmd);
    c->progress = !o->quiet && isatty(2);
    return 0;
}

void load_print_summary(FILE *f, const load_cli *o, const ld_result *r) {
    cJSON *j = ld_summary_json(&o->c, r, &o->pcts);
    if (!j) return;
    fprintf(f, "============ Serving Benchmark Result ============\n");
    const char *keys[] = {"completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
                          "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
                          "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                          "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
                          "max_output_tokens_per_s", "max_concurrent_requests",
                          "spec_decode_acceptance_length", "specbed_acceptance_length", "spec_decode_acceptance_rate",
                          "spec_decode_num_drafts",
                          "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "specbed_num_intervals",
                          "specbed_min_interval_accept_length", "specbed_truncated_streams",
                          "specbed_metrics_scrapes_failed"};
    /* counts as integers, everything else with three decimals */
    static const char *const COUNTS[] = {"completed", "failed", "total_input_tokens", "total_output_tokens",
                                         "max_concurrent_requests", "spec_decode_num_drafts", "spec_decode_draft_tokens",
                                         "spec_decode_accepted_tokens", "specbed_num_intervals",
                                         "specbed_truncated_streams", "specbed_metrics_scrapes_failed", NULL};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (!cJSON_IsNumber(v)) continue;
        int count = 0;
        for (int k = 0; COUNTS[k] && !count; k++) count = !strcmp(keys[i], COUNTS[k]);
        if (count) fprintf(f, "%-40s %12.0f\n", keys[i], v->valuedouble);
        else fprintf(f, "%-40s %12.3f\n", keys[i], v->valuedouble);
    }
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(j, "spec_decode_per_position_acceptance_rates");
    if (cJSON_GetArraySize(pp) > 0) {
        fprintf(f, "%-40s", "per-position acceptance");
        const cJSON *e;
        cJSON_ArrayForEach(e, pp) fprintf(f, " %.3f", cJSON_IsNumber(e) ? e->valuedouble : NAN);
        fprintf(f, "\n");
    }
    fprintf(f, "metrics source: %s (interval basis %s)%s%s\n", msrc_name(r->msrc),
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "specbed_interval_basis")), r->note[0] ? " — " : "",
            r->note);
    fprintf(f, "==================================================\n");
    cJSON_Delete(j);
}

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed load --url URL --workload FILE|NAME [options]\n"
        "\n"
        "Drives an OpenAI-compatible server (specbed, vLLM, SGLang, llama.cpp) with\n"
        "streaming requests; measures TTFT, ITL, TPOT and E2E per request and the\n"
        "server's accept length per interval. Writes requests.csv, intervals.csv,\n"
        "summary.json (vllm bench serve's field names and units; specbed's own\n"
        "fields start with specbed_) and outputs.jsonl under --out.\n"
        "\n"
        "Exit status: 0 ran; 1 no request succeeded, a /metrics scrape failed (the\n"
        "interval series has holes), or the outputs could not be written; 2 could\n"
        "not run. --spec-depth 0 against a server whose draft counters still move\n"
        "prints a WARNING and records specbed_spec_depth_ignored in summary.json.\n"
        "\n");
    static const load_help_spec spec = {
        .workload = NULL, .interval_s = 5,
        .num_prompts = "one pass over the workload, or unlimited with --duration / --profile",
        .max_tokens = "the row's, else 128"};
    load_cli_help(f, &spec);
}

int cmd_load(int argc, char **argv) {
    load_cli o;
    load_cli_defaults(&o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(stdout); return 0; }
        int r = load_cli_opt("load", argc, argv, &i, &o);
        if (r < 0) return 2;
        if (r == 0) { fprintf(stderr, "load: unknown option '%s' (see specbed load --help)\n", argv[i]); return 2; }
    }
    if (load_cli_check("load", &o)) return 2;
    char err[1024];
    workload *wl;
    if (workload_load(&wl, o.workload, err, sizeof err)) { fprintf(stderr, "load: %s\n", err); return 2; }
    o.c.wl = wl;
    if (!o.c.num_prompts && !o.c.duration_s && !o.c.use_profile) o.c.num_prompts = wl->n;
    char outdir[1024];
    if (o.out) snprintf(outdir, sizeof outdir, "%s", o.out);
    else {
        char d[32];
        time_t now = time(NULL);
        strftime(d, sizeof d, "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(outdir, sizeof outdir, "results/load-%s", d);
    }
    if (http_init(err, sizeof err)) { fprintf(stderr, "load: %s\n", err); workload_free(wl); return 2; }
    ld_result *res;
    int rc = 0;
    if (ld_run(&o.c, &res, err, sizeof err)) { fprintf(stderr, "load: %s\n", err); rc = 2; }
    else {
        load_print_summary(stdout, &o, res);
        if (ld_write_outputs(outdir, &o.c, res, &o.pcts, err, sizeof err)) { fprintf(stderr, "load: %s\n", err); rc = 1; }
        else fprintf(stderr, "load: outputs in %s\n", outdir);
        if (res->spec_depth_ignored)
            fprintf(stderr, "load: WARNING: --spec-depth 0 was NOT honoured: the server drafted during the run "
                    "(%.0f draft(s), %.0f draft token(s) by its counters): it ignores \"spec_depth\", or another "
                    "client drafted meanwhile. This is not a speculation-off run.\n",
                    isnan(res->ignored_drafts) ? 0.0 : res->ignored_drafts,
                    isnan(res->ignored_draft_tokens) ? 0.0 : res->ignored_draft_tokens);
        if (res->spec_depth_unused)
            fprintf(stderr, "load: WARNING: --spec-depth %d was sent, but %s. Is this server speculating at all?\n",
                    o.c.spec_depth, res->spec_depth_unused == 1 ? "the server's draft counters did not move: nothing was "
                    "drafted (no drafter, or \"spec_depth\" ignored)" : "nothing (no draft counters, no accept length) "
                    "shows that the server drafted");
        if (res->n_scrapes_failed) {
            fprintf(stderr, "load: %d of %d /metrics scrape(s) failed (first: %s); the interval series has holes\n",
                    res->n_scrapes_failed, res->n_scrapes, res->scrape_error);
            rc = 1;
        }
        int ok = 0, truncated = 0;
        for (int i = 0; i < res->n_req; i++) {
            ok += res->req[i].ok;
            truncated += !res->req[i].ok && res->req[i].error && !strncmp(res->req[i].error, "truncated stream", 16);
        }
        if (truncated)
            fprintf(stderr, "load: %d request(s) failed with a truncated stream (closed without finish_reason, usage or "
                    "[DONE])\n", truncated);
        if (!ok) {
            fprintf(stderr, "load: no request succeeded");
            for (int i = 0; i < res->n_req; i++)
                if (res->req[i].error) { fprintf(stderr, " (first error: %s)", res->req[i].error); break; }
            fprintf(stderr, "\n");
            rc = 1;
        }
        ld_result_free(res);
    }
    http_cleanup();
    workload_free(wl);
    return rc;
}
