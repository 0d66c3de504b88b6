/* label: model */
/* test_moe.c — Qwen3-MoE beyond the forward goldens (ctest test_forward_moe
 * checks those and batch invariance):
 *   - the two expert layouts (per-expert tensors, transformers 5's fused
 *     3-D tensors) of the same weights give bit-identical logits;
 *   - greedy generation equals HF transformers' generate() token for token
 *     (tests/golden/forward/qwen3-moe-tiny/greedy.json);
 *   - greedy spec-on ≡ spec-off on the MoE target with the ngram drafter,
 *     the draft-model drafter drafting with the target itself (every draft
 *     accepted: the bonus path) and with the dense qwen3-tied fixture (same
 *     tokenizer; rejections), depths 1, 2, 3, 5, 8, batches 1, 3 and 8;
 *   - what is not supported is refused by name, never computed: tensor
 *     parallelism under the CUDA backend (where one is built and visible), and
 *     checkpoints with MLP tensors the layout does not read (a shared
 *     expert, an expert index ≥ num_experts, experts on a dense layer, both
 *     layouts at once).
 * `bundled`: the bundled MoE lab model models/tiny-moe (models/README.md):
 * greedy generation equals HF generate() (tests/golden/forward/tiny-moe/
 * greedy.json), and greedy spec-on ≡ spec-off on code and prose prompts
 * from workloads/ with ngram, the dense draft model models/tiny-draft and
 * tiny-moe's own MTP module (a dense block behind a sparse target), each
 * of which must get drafts accepted; depths 1, 3, 8 on batches 1 and 8.
 * `full` (label slow): depths 1, 2, 3, 5, 8 × batches 1, 3, 8 there. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend.h"
#include "generate.h"
#include "lossless.h"
#include "moe.h"
#include "test_util.h"

#define MOE "tests/fixtures/qwen3-moe-tiny"
#define MOE_FUSED "tests/fixtures/qwen3-moe-tiny-fused"
#define TINY_MOE "models/tiny-moe"

/* All rows' logits of one prompt, as one prefill span; malloc'd. */
static float *logits_of(const model *m, const int *ids, int n) {
    char err[512];
    kv_config kc = fwd_kv_config(m, (n + 15) / 16 + 1, 16, 1);
    kv_cache *kv;
    fwd_ctx *f;
    float *lg = malloc(sizeof(float) * (size_t)n * m->cfg.vocab_size);
    int *rows = malloc(sizeof(int) * (size_t)n);
    CHECK(kv_cache_create(&kv, &kc, err, sizeof err) == 0);
    CHECK(fwd_create(&f, m, n, err, sizeof err) == 0);
    for (int i = 0; i < n; i++) rows[i] = i;
    int s = kv_seq_new(kv);
    fwd_span sp = {.seq = s, .n = n, .tokens = ids};
    fwd_batch b = {.spans = &sp, .n_spans = 1};
    fwd_out o = {.logit_rows = rows, .n_logit_rows = n, .logits = lg};
    CHECKF(fwd_run(f, kv, &b, &o, err, sizeof err) == 0, "%s", err);
    fwd_free(f);
    kv_cache_free(kv);
    free(rows);
    return lg;
}

static void test_layouts(void) {
    char err[512];
    model *a = NULL, *b = NULL;
    CHECKF(model_load(&a, tu_path(MOE), err, sizeof err) == 0, "%s", err);
    CHECKF(model_load(&b, tu_path(MOE_FUSED), err, sizeof err) == 0, "%s", err);
    if (!a || !b) { model_free(a); model_free(b); return; }
    CHECK(a->layers[0].moe && !a->layers[0].moe->fused && !a->layers[1].moe && a->layers[2].moe);
    CHECK(b->layers[0].moe && b->layers[0].moe->fused && !b->layers[1].moe && b->layers[2].moe->fused);
    /* the fused experts are other bytes of other files, holding the same values */
    CHECK(a->layers[0].moe->up[5].data != b->layers[0].moe->up[5].data);
    const int n = 300, V = a->cfg.vocab_size;
    int ids[300];
    for (int i = 0; i < n; i++) ids[i] = (i * 193 + 11) % V;
    float *la = logits_of(a, ids, n), *lb = logits_of(b, ids, n);
    CHECKF(memcmp(la, lb, sizeof(float) * (size_t)n * V) == 0, "fused and per-expert layouts differ");
    printf("layouts: per-expert and fused, %d rows of logits bit-identical\n", n);
    free(la);
    free(lb);
    model_free(a);
    model_free(b);
}

/* model_dir's greedy continuation of greedy.json's prompt equals HF's tokens. */
static void test_greedy_vs_hf(const char *model_dir, const char *golden) {
    char err[512];
    cJSON *g = NULL;
    size_t len;
    char *txt = tu_read_file(tu_path(golden), &len);
    CHECKF(txt && (g = cJSON_Parse(txt)), "greedy.json missing or bad");
    free(txt);
    if (!g) return;
    const cJSON *jp = cJSON_GetObjectItem(g, "prompt_ids"), *jt = cJSON_GetObjectItem(g, "tokens");
    int np = cJSON_GetArraySize(jp), nt = cJSON_GetArraySize(jt);
    int *prompt = malloc(sizeof(int) * (size_t)np), *want = malloc(sizeof(int) * (size_t)nt);
    for (int i = 0; i < np; i++) prompt[i] = cJSON_GetArrayItem(jp, i)->valueint;
    for (int i = 0; i < nt; i++) want[i] = cJSON_GetArrayItem(jt, i)->valueint;
    cJSON_Delete(g);
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path(model_dir), .max_seqs = 1, .max_seq_len = 256};
    if (gen_engine_create(&e, &eo, err, sizeof err)) {
        CHECKF(0, "%s", err);
    } else {
        gen_params gp = {.max_tokens = nt, .ignore_eos = 1};
        gen_result r;
        const int *pp[1] = {prompt};
        CHECKF(gen_run(e, pp, &np, 1, &gp, NULL, NULL, &r, NULL, err, sizeof err) == 0, "%s", err);
        int same = r.n_tokens == nt;
        for (int i = 0; same && i < nt; i++) same = r.tokens[i] == want[i];
        CHECKF(same, "greedy tokens differ from HF generate()");
        printf("greedy (%s): %d tokens after a %d-token prompt, equal to HF generate()\n", model_dir, r.n_tokens, np);
        gen_results_free(&r, 1);
        gen_engine_free(e);
    }
    free(prompt);
    free(want);
}

static void test_lossless(void) {
    static const int depths[5] = {1, 2, 3, 5, 8}, batches[3] = {1, 3, 8};
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path(MOE), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    static int prompts[LL_NP][LL_MAXP];
    int lens[LL_NP];
    ll_synthetic_prompts(e->m->cfg.vocab_size, prompts, lens);
    ll_config cfgs[] = {
        {"moe ngram", {.name = "ngram"}, 0, NULL},
        {"moe draft(self)", {.name = "draft", .draft_model = tu_path(MOE), .max_seqs = 8}, 1, NULL},
        {"moe draft(dense qwen3-tied)", {.name = "draft", .draft_model = tu_path("tests/fixtures/qwen3-tied"),
                                         .max_seqs = 8}, 0, NULL},
    };
    for (int c = 0; c < (int)(sizeof cfgs / sizeof cfgs[0]); c++) {
        long n = ll_check(e, &cfgs[c], prompts, lens, depths, 5, batches, 3);
        printf("%s: %ld tokens compared\n", cfgs[c].label, n);
        CHECKF(n >= 2000, "%s: only %ld tokens", cfgs[c].label, n);
    }
    gen_engine_free(e);
}

/* A directory that is the per-expert fixture plus one more tensor `name`
 * (in a third shard, listed in the index). 0 ok. */
static int dir_with_extra(const char *dir, const char *name) {
    char path[1024];
    const char *files[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "config.json"};
    for (int i = 0; i < 3; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%s/%s", tu_path(MOE), files[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
        if (symlink(src, path)) return -1;
    }
    size_t len;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", tu_path(MOE));
    char *txt = tu_read_file(path, &len);
    cJSON *idx = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!idx) return -1;
    cJSON_AddStringToObject(cJSON_GetObjectItem(idx, "weight_map"), name, "extra.safetensors");
    char *out = cJSON_Print(idx);
    cJSON_Delete(idx);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f || !out) { free(out); if (f) fclose(f); return -1; }
    fputs(out, f);
    fclose(f);
    free(out);
    /* one f32 scalar: header length, JSON header padded to 8 bytes, 4 bytes of data */
    char hdr[512];
    int h = snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
    while (h % 8) hdr[h++] = ' ';
    uint64_t hl = (uint64_t)h;
    float v = 1.0f;
    snprintf(path, sizeof path, "%s/extra.safetensors", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(&hl, 8, 1, f);
    fwrite(hdr, 1, (size_t)h, f);
    fwrite(&v, 4, 1, f);
    fclose(f);
    return 0;
}

static void test_refusals(void) {
    char err[1024] = "";
    model *m = NULL;
    /* tensor parallelism: every expert split as a dense MLP is (rank 1 of 2
     * holds rows 16..31 of each gate/up and those columns of each down), the
     * router whole; test_tp runs the shards against one process */
    CHECK(model_load_shard(&m, tu_path(MOE), 1, 2, err, sizeof err) == 0 && m);
    if (m) {
        const moe_weights *w = m->layers[0].moe;
        CHECKF(w && w->inter == 16 && w->gate[7].rows == 16 && w->down[7].cols == 16 && w->router.rows == 8 &&
                   m->shard.moe_intermediate_size == 16 && !m->layers[1].moe && m->layers[1].w_gate.rows == 32,
               "tp 2 shard: inter %d", w ? w->inter : -1);
        model_free(m);
        m = NULL;
    }
    printf("  tp 2    -> experts split 32 -> 16 per rank, router whole\n");

    /* the CUDA backend, where this build has one and a GPU is visible: the
     * model loads (test_cuda runs it), tensor parallelism is refused */
    if (kb_set_device("cuda", err, sizeof err) == 0) {
        CHECKF(model_load(&m, tu_path(MOE), err, sizeof err) == 0 && m, "cuda: %s", err);
        model_free(m);
        m = NULL;
        CHECK(model_load_shard(&m, tu_path(MOE), 1, 2, err, sizeof err) != 0 && !m);
        printf("  cuda tp 2 -> %s\n", err);
        CHECKF(strstr(err, "tensor parallelism") && strstr(err, "cuda"), "%s", err);
        CHECK(kb_set_device("cpu", err, sizeof err) == 0);
    } else {
        printf("  cuda    -> not checked here (%s)\n", err);
    }

    /* names the layout does not read */
    char dir[] = "/tmp/specbed_moe_XXXXXX";
    if (!mkdtemp(dir)) { CHECKF(0, "mkdtemp"); return; }
    static const struct { const char *name, *needle; } bad[] = {
        {"model.layers.0.mlp.shared_expert.gate_proj.weight", "model.layers.0.mlp.shared_expert.gate_proj.weight"},
        {"model.layers.2.mlp.experts.8.up_proj.weight", "model.layers.2.mlp.experts.8.up_proj.weight"},
        {"model.layers.0.mlp.experts.07.up_proj.weight", "model.layers.0.mlp.experts.07.up_proj.weight"},
        {"model.layers.1.mlp.experts.0.up_proj.weight", "dense"},
        {"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.gate.weight"},
        {"model.layers.0.mlp.gate_proj.weight", "sparse"},
        {"model.layers.0.mlp.experts.gate_up_proj", "one layout only"},
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        CHECK(dir_with_extra(dir, bad[i].name) == 0);
        err[0] = 0;
        CHECKF(model_load(&m, dir, err, sizeof err) != 0 && !m, "%s accepted", bad[i].name);
        printf("  %-50s -> %s\n", bad[i].name, err);
        CHECKF(strstr(err, bad[i].needle) != NULL, "message lacks \"%s\": %s", bad[i].needle, err);
    }
    /* and the same directory with a tensor outside the decoder's MLPs loads (an MTP module's, say) */
    CHECK(dir_with_extra(dir, "model.layers.3.mlp.experts.0.up_proj.weight") == 0);
    CHECKF(model_load(&m, dir, err, sizeof err) == 0, "%s", err);
    model_free(m);
    const char *files[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "config.json",
                           "model.safetensors.index.json", "extra.safetensors"};
    for (int i = 0; i < 5; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The bundled MoE lab model: greedy = HF, and lossless for every drafter
 * kind that serves it (full: the whole depth × batch sweep). */
static int run_bundled(int full) {
    if (!tu_have(TINY_MOE "/model.safetensors", "models/tiny-draft/model.safetensors", "workloads/code.jsonl",
                 "workloads/prose.jsonl", "tests/golden/forward/tiny-moe/greedy.json", NULL))
        return tu_skip("test_moe", "models/tiny-moe, models/tiny-draft, workloads/ or its greedy golden absent");
    test_greedy_vs_hf(TINY_MOE, "tests/golden/forward/tiny-moe/greedy.json");
    static const int all_depths[5] = {1, 2, 3, 5, 8}, all_batches[3] = {1, 3, 8};
    static const int some_depths[3] = {1, 3, 8}, some_batches[2] = {1, 8};
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path(TINY_MOE), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_moe"); }
    CHECKF(e->m->cfg.n_experts > 0 && e->m->cfg.n_mtp_layers == 1, "%s: not an MoE target with one MTP module",
           TINY_MOE);
    ll_config cfgs[] = {
        {"tiny-moe ngram", {.name = "ngram"}, 1, NULL},
        {"tiny-moe draft(tiny-draft)", {.name = "draft", .draft_model = tu_path("models/tiny-draft"), .max_seqs = 8,
                                        .quiet = 1}, 1, NULL},
        {"tiny-moe mtp", {.name = "mtp", .max_seqs = 8, .quiet = 1}, 1, NULL},
    };
    const char *wl[2] = {"code", "prose"};
    for (int w = 0; w < 2; w++) {
        static int prompts[LL_NP][LL_MAXP];
        int lens[LL_NP];
        if (ll_load_prompts(e, wl[w], prompts, lens, LL_NP) < LL_NP) {
            CHECKF(0, "workloads/%s.jsonl: too few prompts", wl[w]);
            continue;
        }
        for (int c = 0; c < (int)(sizeof cfgs / sizeof cfgs[0]); c++) {
            double t0 = gen_now();
            long n = ll_check(e, &cfgs[c], prompts, lens, full ? all_depths : some_depths, full ? 5 : 3,
                              full ? all_batches : some_batches, full ? 3 : 2);
            printf("%s on %s: %ld tokens compared in %.1f s\n", cfgs[c].label, wl[w], n, gen_now() - t0);
        }
    }
    gen_engine_free(e);
    return tu_done("test_moe");
}

int main(int argc, char **argv) {
    tu_part part = tu_parse_part(argc, argv);
    if (part != TU_FIXTURES) {
        printf("kernels: %s\n", kb_cpu_path());
        return run_bundled(part == TU_FULL);
    }
    if (!tu_have(MOE "/config.json", MOE_FUSED "/config.json", "tests/golden/forward/qwen3-moe-tiny/greedy.json", NULL))
        return tu_skip("test_moe", "MoE fixtures absent");
    printf("kernels: %s\n", kb_cpu_path());
    test_layouts();
    test_greedy_vs_hf(MOE, "tests/golden/forward/qwen3-moe-tiny/greedy.json");
    test_refusals();
    test_lossless();
    return tu_done("test_moe");
}
