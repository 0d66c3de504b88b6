/* cli_generate.c — `specbed generate`: one prompt, streamed to stdout,
 * speeds to stderr, optional stats JSON. Owns option parsing and output
 * formatting only; generation is generate.c. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "args.h"
#include "file.h"

#define CMD "specbed generate"
#include "generate.h"
#include "drafters.h"
#include "outfile.h"
#include "verify_policy.h"
#include "spec_run.h"
#include "spec_cli.h"
#include "spec_stats_json.h"
#include "cli_tp.h"
#include "cli_device.h"

typedef struct {
    const char *model_dir, *prompt, *prompt_file, *stats_json, *device;
    int max_tokens, top_k, ignore_eos, depth, tp, experts_on_host;
    drafter_opts dr;
    vpolicy_args verify;
    float temperature, top_p;
    unsigned long long seed;
    spec_cli given;            /* which speculation options the command line gave (spec_cli_check) */
} gen_opts;

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed generate --model DIR (--prompt TEXT | --prompt-file F) [options]\n"
        "\n"
        "Generates a continuation of the prompt with the model in DIR (HF layout:\n"
        "config.json, model.safetensors[.index.json], tokenizer.json). Text streams\n"
        "to stdout; prefill and decode tokens/s go to stderr.\n"
        "\n"
        "  --model DIR         model directory (required)\n"
        "  --prompt TEXT       prompt text (special tokens such as <|im_start|> are recognised)\n"
        "  --prompt-file F     read the prompt from file F instead\n"
        "  --max-tokens N      tokens to generate (default 128)\n"
        "  --temperature T     0 = greedy (default 0)\n"
        "  --top-p P           nucleus sampling mass, 1 = off (default 1)\n"
        "  --top-k K           keep the K most likely tokens, 0 = off (default 0)\n"
        "  --seed S            RNG seed; same seed, same output in any process (default 0)\n"
        "  --ignore-eos        keep generating past end-of-text tokens\n"
        "  --drafter NAME      speculative drafter: " DRAFTER_NAMES " (default none)\n"
        "  --depth K           drafts per verify step, 1..16 (default 4); never read from a checkpoint\n"
        "  --draft-model DIR   --drafter draft: the draft model (same tokenizer required); dspark:\n"
        "                      its checkpoint\n"
        "  --dspark-final-tap S raw|normed: which target state a DSpark checkpoint's tap of the\n"
        "                      final layer was trained on (refused without it, as DeepSpec's\n"
        "                      evaluator refuses it)\n"
        "  --verify-schedule S how many drafts each step verifies: " VPOLICY_NAMES "\n"
        "                      (default fixed = all); see --p-min, --adaptive-alpha, --cost-table\n"
        "  --p-min P           threshold: stop at the first draft whose confidence (or draft\n"
        "                      distribution's top probability) is below P (default 0.5)\n"
        "  --adaptive-alpha A  adaptive: EMA weight on HISTORY, p = A*p_prev + (1-A)*observed\n"
        "                      (default 0.8, vLLM's; 0 keeps only the last step)\n"
        "  --cost-table FILE   seconds per verify step vs rows (from `specbed profile`); without\n"
        "                      it, confidence/adaptive profile the model and the drafter briefly\n"
        "                      at startup; with the drafter's cost (`profile --drafter`, same\n"
        "                      drafter) both count it, and adaptive drafts only in steps where\n"
        "                      drafting is expected to pay for itself\n"
        "  --ngram-max N       ngram: longest context suffix matched (default 3)\n"
        "  --ngram-min N       ngram: shortest suffix matched (default 1)\n"
        "  --ngram-spec-factor F  ngram: at most ceil(F x match length) drafts (default 1; 0 = no cap)\n"
        "                      An option the drafter or verify schedule given would not read (--depth\n"
        "                      without a drafter, --p-min without threshold, ...) is an error.\n"
        "  --stats-json FILE   write timing, token counts and drafter statistics as JSON: fields\n"
        "                      named like `vllm bench serve`'s hold vLLM's values, specbed's own\n"
        "                      start with specbed_ (written atomically after the run; a destination\n"
        "                      that cannot be written fails before it)\n"
        "  --tp N              tensor parallelism over N processes; start as\n"
        "                      `mpirun -np N specbed generate ... --tp N` (default 1)\n"
        CLI_DEVICE_HELP
        CLI_EXPERTS_HELP
        "  -h, --help          this text\n");
}

static int parse(int argc, char **argv, gen_opts *o) {
    *o = (gen_opts){.max_tokens = 128, .top_p = 1.0f, .depth = 4, .dr = {.name = "none", .max_seqs = 1},
                    .verify = VPOLICY_ARGS_DEFAULT, .given = {.dspark_model = -1}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(stdout); exit(0); }
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "--experts-on-host")) o->experts_on_host = 1;
        else if (!strcmp(a, "--model")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->model_dir = v; }
        else if (!strcmp(a, "--prompt")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->prompt = v; }
        else if (!strcmp(a, "--prompt-file")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->prompt_file = v; }
        else if (!strcmp(a, "--drafter")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->dr.name = v; }
        else if (!strcmp(a, "--draft-model")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->dr.draft_model = v; o->given.draft_model = 1; }
        else if (!strcmp(a, "--dspark-final-tap")) { if (!(v = opt_value(CMD, argc, argv, &i)) || drafter_opt_dspark_final_tap(CMD, a, v, &o->dr)) return -1; o->given.dspark_final_tap = 1; }
        else if (!strcmp(a, "--depth")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, SPEC_MAX_DEPTH, &o->depth)) return -1; o->given.depth_opt = "--depth"; }
        else if (!strcmp(a, "--ngram-max")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 64, &o->dr.ngram_n_max)) return -1; o->given.ngram = 1; }
        else if (!strcmp(a, "--ngram-min")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 64, &o->dr.ngram_n_min)) return -1; o->given.ngram = 1; }
        else if (!strcmp(a, "--ngram-spec-factor")) { if (!(v = opt_value(CMD, argc, argv, &i)) || drafter_opt_ngram_factor(CMD, a, v, &o->dr)) return -1; o->given.ngram = 1; }
        else if (!strcmp(a, "--verify-schedule")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->verify.name = v; }
        else if (!strcmp(a, "--cost-table")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->verify.cost_path = v; o->given.cost_table = 1; }
        else if (!strcmp(a, "--p-min")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_double(CMD, a, v, 0, 1, &o->verify.p_min)) return -1; o->given.p_min = 1; }
        else if (!strcmp(a, "--adaptive-alpha")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_double(CMD, a, v, 0, 0.999, &o->verify.alpha)) return -1; o->given.alpha = 1; }
        else if (!strcmp(a, "--stats-json")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->stats_json = v; }
        else if (!strcmp(a, "--max-tokens")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 0, 1 << 20, &o->max_tokens)) return -1; }
        else if (!strcmp(a, "--top-k")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 0, 1 << 30, &o->top_k)) return -1; }
        else if (!strcmp(a, "--temperature")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_float(CMD, a, v, 0, 100, &o->temperature)) return -1; }
        else if (!strcmp(a, "--top-p")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_float(CMD, a, v, 0, 1, &o->top_p)) return -1; }
        else if (!strcmp(a, "--tp")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 64, &o->tp)) return -1; }
        else if (!strcmp(a, "--device")) { if (!(v = opt_value(CMD, argc, argv, &i))) return -1; o->device = v; if (cli_device_check(CMD, v)) return -1; }
        else if (!strcmp(a, "--seed")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_u64(CMD, a, v, &o->seed)) return -1; }
        else { fprintf(stderr, "specbed generate: unknown option '%s' (see --help)\n", a); return -1; }
    }
    if (!o->model_dir) { fprintf(stderr, "specbed generate: --model DIR is required\n"); return -1; }
    char err[512];
    o->given.drafters = o->dr.name;
    o->given.schedules = o->verify.name;
    if (spec_cli_check(&o->given, err, sizeof err)) { fprintf(stderr, CMD ": %s\n", err); return -1; }
    if (!o->prompt == !o->prompt_file) {
        fprintf(stderr, "specbed generate: give exactly one of --prompt and --prompt-file\n");
        return -1;
    }
    return 0;
}

typedef struct { const tokenizer *tok; tok_stream ts; } stream_ctx;

static void on_token(void *user, int seq, int token) {
    (void)seq;
    stream_ctx *s = user;
    /* special tokens (<|endoftext|>, <|im_end|>) are not text: skipped, as
     * both servers and llama.cpp's llama-simple do */
    if (tok_is_special(s->tok, token)) return;
    char buf[512];
    size_t n = tok_stream_put(s->tok, &s->ts, token, buf, sizeof buf);
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
}

static int write_stats(const char *path, const gen_opts *o, const gen_result *r, const spec_timing *t,
                       double load_s, const drafter *d) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model_dir);
    cJSON_AddNumberToObject(j, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(j, "completion_tokens", r->n_tokens);
    cJSON_AddStringToObject(j, "finish_reason", r->hit_eos ? "stop" : "length");
    cJSON_AddNumberToObject(j, "load_s", load_s);
    double decode_s = t->total_s - t->prefill_s;
    cJSON_AddNumberToObject(j, "prefill_s", t->prefill_s);
    cJSON_AddNumberToObject(j, "decode_s", decode_s);
    cJSON_AddNumberToObject(j, "draft_s", t->draft_s);
    cJSON_AddNumberToObject(j, "verify_s", t->verify_s);
    cJSON_AddNumberToObject(j, "other_s", decode_s - t->draft_s - t->verify_s);
    cJSON_AddNumberToObject(j, "prefill_tokens_per_s", t->prefill_s > 0 ? t->prefill_tokens / t->prefill_s : 0);
    cJSON_AddNumberToObject(j, "decode_tokens_per_s", decode_s > 0 ? (r->n_tokens - 1) / decode_s : 0);
    /* the sequence's decode (verify) steps; the prefill's forwards are counted apart */
    cJSON_AddNumberToObject(j, "verify_steps", (double)t->verify_steps);
    cJSON_AddNumberToObject(j, "forward_steps", (double)t->forward_steps);
    cJSON_AddStringToObject(j, "drafter", o->dr.name);
    if (d) {
        cJSON_AddNumberToObject(j, "depth", o->depth);
        spec_stats_add_json(j, &t->counters, o->depth);
    }
    cJSON_AddNumberToObject(j, "temperature", o->temperature);
    cJSON_AddNumberToObject(j, "seed", (double)o->seed);
    cJSON *ids = cJSON_AddArrayToObject(j, "completion_ids");
    for (int i = 0; i < r->n_tokens; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->tokens[i]));
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    char err[512];
    int rc = text ? write_file_atomic(path, text, strlen(text), err, sizeof err) : -1;
    if (rc) fprintf(stderr, "specbed generate: %s\n", text ? err : "out of memory");
    free(text);
    return rc;
}

int cli_generate(int argc, char **argv) {
    gen_opts o;
    if (parse(argc, argv, &o)) return 2;
    char err[1024];
    /* the statistics are written after the run: a destination that cannot take them fails now */
    if (o.stats_json && outfile_check(o.stats_json, err, sizeof err)) {
        fprintf(stderr, CMD ": --stats-json %s\n", err);
        return 1;
    }
    char *prompt_buf = NULL;
    size_t prompt_len;
    if (o.prompt_file) {
        if (read_file(o.prompt_file, 64u << 20, &prompt_buf, &prompt_len, err, sizeof err)) {
            fprintf(stderr, "specbed generate: --prompt-file %s\n", err);
            return 1;
        }
    } else {
        prompt_len = strlen(o.prompt);
    }
    const char *prompt = prompt_buf ? prompt_buf : o.prompt;
    if (cli_device_select_experts(CMD, o.device, o.tp, o.experts_on_host)) { free(prompt_buf); return 1; }

    double t0 = gen_now();
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = o.model_dir, .max_seqs = 1};
    tp_job job;
    if (tp_job_open(&job, CMD, o.tp)) { free(prompt_buf); return 1; }
    if (job.rank > 0) { free(prompt_buf); return tp_job_worker(&job, CMD, eo); }
    eo.comm = job.comm;
    if (gen_engine_create(&e, &eo, err, sizeof err)) {
        fprintf(stderr, "specbed generate: %s\n", err);
        free(prompt_buf);
        if (job.comm) kb_comm_abort(job.comm, 1, NULL);
        return 1;
    }
    double load_s = gen_now() - t0;
    int *ids = NULL, n_ids = 0, rc = 1;
    drafter *d = NULL;
    vpolicy *sc_ = NULL;
    cost_curve cost = {0};
    if (tok_encode(e->tok, prompt, prompt_len, &ids, &n_ids, err, sizeof err)) {
        fprintf(stderr, "specbed generate: prompt: %s\n", err);
        goto out;
    }
    if (n_ids == 0) { fprintf(stderr, "specbed generate: the prompt is empty\n"); goto out; }
    gen_params gp = {.max_tokens = o.max_tokens, .seed = o.seed, .ignore_eos = o.ignore_eos,
                     .sp = {.temperature = o.temperature, .top_p = o.top_p, .top_k = o.top_k}};
    o.dr.depth = o.depth;   /* for startup messages (DSpark prints it beside its block_size) */
    if (drafter_create(&d, &o.dr, e, err, sizeof err)) {
        fprintf(stderr, "specbed generate: %s\n", err);
        goto out;
    }
    if (d) fprintf(stderr, "drafter %s, serving depth %d (from --depth)\n", d->ops->name, o.depth);
    if (d && vpolicy_setup(&sc_, &cost, &o.verify, e, d, 1, o.depth, stderr, err, sizeof err)) {
        fprintf(stderr, "specbed generate: %s\n", err);
        goto out;
    }
    stream_ctx sc = {.tok = e->tok};
    gen_result r;
    spec_timing t;
    const int *pp = ids;
    spec_params sp = {.gen = gp, .depth = o.depth, .verify = vpolicy_hook(sc_)};
    if (spec_run(e, d, &pp, &n_ids, 1, &sp, on_token, &sc, &r, &t, err, sizeof err)) {
        fprintf(stderr, "specbed generate: %s\n", err);
        goto out;
    }
    char tail[64];
    size_t nt = tok_stream_flush(&sc.ts, tail, sizeof tail);
    fwrite(tail, 1, nt, stdout);
    printf("\n");
    fflush(stdout);
    if (!r.hit_eos && r.n_tokens < o.max_tokens)
        fprintf(stderr, "specbed generate: stopped after %d of --max-tokens %d: the context holds %d tokens "
                        "(prompt %d)\n", r.n_tokens, o.max_tokens, e->opts.max_seq_len, n_ids);
    double decode_s = t.total_s - t.prefill_s;
    fprintf(stderr, "prompt %d tokens, prefill %.1f tokens/s; generated %d tokens, decode %.1f tokens/s\n",
            n_ids, t.prefill_s > 0 ? t.prefill_tokens / t.prefill_s : 0.0, r.n_tokens,
            decode_s > 0 ? (r.n_tokens - 1) / decode_s : 0.0);
    if (d) {
        drafter_print_stats(stderr, d, &t.counters, o.depth);
        fprintf(stderr, "time: draft %.3f s, verify %.3f s, other %.3f s\n", t.draft_s, t.verify_s,
                decode_s - t.draft_s - t.verify_s);
    }
    rc = 0;
    if (o.stats_json && write_stats(o.stats_json, &o, &r, &t, load_s, d)) rc = 1;
    gen_results_free(&r, 1);
out:
    free(ids);
    free(prompt_buf);
    vpolicy_free(sc_);
    drafter_free(d);
    gen_engine_free(e);
    tp_job_close(&job);
    return rc;
}
