/* label: unit */
/* test_config.c — config.json parsing: the Qwen3/Qwen2/Llama/Mistral
 * families with HF's defaults, and bad configs (missing required field,
 * wrong type, unsupported rope_scaling, bad head counts, unknown
 * architecture), each rejected with a message naming the file and field. */
#include "config.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];
static char cfg_path[512];

static void write_cfg(const char *json) {
    FILE *f = fopen(cfg_path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(json, f);
    fclose(f);
}

static int load(model_config *c, const char *json, char *err, size_t errlen) {
    write_cfg(json);
    return config_load(c, cfg_path, err, errlen);
}

static void expect_ok(model_config *c, const char *what, const char *json) {
    char err[512] = "";
    int rc = load(c, json, err, sizeof err);
    CHECKF(rc == 0, "%s: %s", what, err);
}

static void expect_fail(const char *what, const char *json, const char *n1, const char *n2) {
    model_config c;
    char err[512] = "";
    int rc = load(&c, json, err, sizeof err);
    CHECKF(rc != 0, "%s: accepted a bad config", what);
    printf("  %-34s -> %s\n", what, err);
    CHECKF(strstr(err, cfg_path) != NULL, "%s: message \"%s\" does not name the file", what, err);
    if (n1) CHECKF(strstr(err, n1) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err, n1);
    if (n2) CHECKF(strstr(err, n2) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err, n2);
}

/* A minimal Qwen3 config with one field's text replaced: "KEY": VALUE. */
#define BASE_FIELDS \
    "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2," \
    "\"num_attention_heads\": 4, \"vocab_size\": 4096"

static void test_fixture_config(void) {
    model_config c;
    char err[512] = "";
    int rc = config_load(&c, tu_path("tests/fixtures/qwen3-tied/config.json"), err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    CHECK(strcmp(c.architecture, "Qwen3ForCausalLM") == 0 && strcmp(c.model_type, "qwen3") == 0);
    CHECK(c.hidden_size == 64 && c.intermediate_size == 128 && c.n_layers == 2);
    CHECK(c.n_heads == 4 && c.n_kv_heads == 2 && c.head_dim == 16 && c.vocab_size == 4096);
    CHECK(c.max_position_embeddings == 1024 && c.rope_theta == 10000.0f);
    CHECK(fabsf(c.rms_norm_eps - 1e-6f) < 1e-12f);
    CHECK(c.tie_word_embeddings == 1 && c.qk_norm == 1 && c.qkv_bias == 0 && c.n_mtp_layers == 0);
    CHECK(c.bos_token_id == -1 && c.eos_token_id == 4092);
    rc = config_load(&c, tu_path("tests/fixtures/qwen3-untied/config.json"), err, sizeof err);
    CHECKF(rc == 0 && c.tie_word_embeddings == 0, "%s", err);
}

static void test_families(void) {
    model_config c;
    /* Qwen3 without head_dim: HF's Qwen3Config default is 128, not H/heads. */
    expect_ok(&c, "qwen3 defaults", "{\"architectures\": [\"Qwen3ForCausalLM\"], " BASE_FIELDS "}");
    CHECK(c.head_dim == 128 && c.n_kv_heads == 4 && c.qk_norm == 1 && c.qkv_bias == 0);
    CHECK(c.max_position_embeddings == 32768 && c.rope_theta == 10000.0f && c.tie_word_embeddings == 0);
    CHECK(c.eos_token_id == -1 && c.bos_token_id == -1 && c.n_mtp_layers == 0);
    CHECK(fabsf(c.rms_norm_eps - 1e-6f) < 1e-12f);

    expect_ok(&c, "qwen2", "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", " BASE_FIELDS
              ", \"num_key_value_heads\": 1, \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-5,"
              "\"tie_word_embeddings\": true, \"eos_token_id\": [151645, 151643], \"bos_token_id\": 151643,"
              "\"rope_scaling\": null, \"use_sliding_window\": false, \"sliding_window\": 32768,"
              "\"max_position_embeddings\": 32768}");
    CHECK(strcmp(c.architecture, "Qwen2ForCausalLM") == 0 && c.qkv_bias == 1 && c.qk_norm == 0);
    CHECK(c.head_dim == 16 && c.n_kv_heads == 1 && c.rope_theta == 1e6f);
    CHECK(fabsf(c.rms_norm_eps - 1e-5f) < 1e-12f);
    CHECK(c.tie_word_embeddings == 1 && c.eos_token_id == 151645 && c.bos_token_id == 151643);
    CHECK(c.max_position_embeddings == 32768);

    /* model_type alone decides the family when architectures is absent. */
    expect_ok(&c, "llama via model_type", "{\"model_type\": \"llama\", " BASE_FIELDS
              ", \"eos_token_id\": 2, \"bos_token_id\": 1, \"num_nextn_predict_layers\": 1}");
    CHECK(strcmp(c.architecture, "LlamaForCausalLM") == 0 && strcmp(c.model_type, "llama") == 0);
    CHECK(c.qk_norm == 0 && c.qkv_bias == 0 && c.head_dim == 16 && c.max_position_embeddings == 2048);
    CHECK(c.eos_token_id == 2 && c.bos_token_id == 1 && c.n_mtp_layers == 1);

    expect_ok(&c, "llama explicit head_dim", "{\"architectures\": [\"LlamaForCausalLM\"], " BASE_FIELDS
              ", \"head_dim\": 32, \"eos_token_id\": [], \"attention_bias\": false, \"mlp_bias\": false}");
    CHECK(c.head_dim == 32 && c.eos_token_id == -1);

    /* Mistral's window (default 4096) caps the usable context. */
    expect_ok(&c, "mistral", "{\"architectures\": [\"MistralForCausalLM\"], " BASE_FIELDS
              ", \"num_key_value_heads\": 2, \"max_position_embeddings\": 32768}");
    CHECK(strcmp(c.model_type, "mistral") == 0 && c.max_position_embeddings == 4096);
    expect_ok(&c, "mistral no window", "{\"architectures\": [\"MistralForCausalLM\"], " BASE_FIELDS
              ", \"sliding_window\": null, \"max_position_embeddings\": 32768}");
    CHECK(c.max_position_embeddings == 32768);
    expect_ok(&c, "qwen3 active window", "{\"architectures\": [\"Qwen3ForCausalLM\"], " BASE_FIELDS
              ", \"use_sliding_window\": true, \"sliding_window\": 512}");
    CHECK(c.max_position_embeddings == 512);
}

static void test_bad(void) {
    const char *fields[] = { "hidden_size", "intermediate_size", "num_hidden_layers",
                             "num_attention_heads", "vocab_size" };
    const char *vals[] = { "64", "128", "2", "4", "4096" };
    for (int miss = 0; miss < 5; miss++) {
        char json[1024] = "{\"architectures\": [\"Qwen3ForCausalLM\"]";
        for (int i = 0; i < 5; i++)
            if (i != miss)
                snprintf(json + strlen(json), sizeof json - strlen(json), ", \"%s\": %s", fields[i], vals[i]);
        strcat(json, "}");
        char what[64], needle[64];
        snprintf(what, sizeof what, "missing %s", fields[miss]);
        snprintf(needle, sizeof needle, "\"%s\"", fields[miss]);
        expect_fail(what, json, needle, "missing");
        /* Zero and negative sizes. */
        snprintf(json, sizeof json, "{\"architectures\": [\"Qwen3ForCausalLM\"]");
        for (int i = 0; i < 5; i++)
            snprintf(json + strlen(json), sizeof json - strlen(json), ", \"%s\": %s", fields[i],
                     i == miss ? (miss % 2 ? "0" : "-8") : vals[i]);
        strcat(json, "}");
        snprintf(what, sizeof what, "non-positive %s", fields[miss]);
        expect_fail(what, json, needle, "> 0");
    }
#define Q3 "{\"architectures\": [\"Qwen3ForCausalLM\"], "
    expect_fail("hidden_size a string", "{\"architectures\": [\"Qwen3ForCausalLM\"], "
                "\"hidden_size\": \"64\", \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
                "\"num_attention_heads\": 4, \"vocab_size\": 4096}", "\"hidden_size\"", "integer");
    expect_fail("vocab_size fractional", Q3 "\"hidden_size\": 64, \"intermediate_size\": 128,"
                "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 4096.5}",
                "\"vocab_size\"", "integer");
    expect_fail("tie_word_embeddings a string", Q3 BASE_FIELDS ", \"tie_word_embeddings\": \"true\"}",
                "\"tie_word_embeddings\"", NULL);
    expect_fail("rms_norm_eps a string", Q3 BASE_FIELDS ", \"rms_norm_eps\": \"1e-6\"}", "\"rms_norm_eps\"", NULL);
    expect_fail("rms_norm_eps zero", Q3 BASE_FIELDS ", \"rms_norm_eps\": 0}", "\"rms_norm_eps\"", NULL);
    expect_fail("rope_theta negative", Q3 BASE_FIELDS ", \"rope_theta\": -1}", "\"rope_theta\"", NULL);
    expect_fail("eos_token_id a string", Q3 BASE_FIELDS ", \"eos_token_id\": \"</s>\"}", "\"eos_token_id\"", NULL);
    expect_fail("eos_token_id list of strings", Q3 BASE_FIELDS ", \"eos_token_id\": [1, \"x\"]}",
                "\"eos_token_id\"", NULL);
    expect_fail("rope_scaling set", Q3 BASE_FIELDS ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}",
                "rope_scaling", "not supported");
    expect_fail("kv heads do not divide heads", Q3 BASE_FIELDS ", \"num_key_value_heads\": 3}",
                "\"num_key_value_heads\"", "\"num_attention_heads\"");
    expect_fail("kv heads zero", Q3 BASE_FIELDS ", \"num_key_value_heads\": 0}", "\"num_key_value_heads\"", "> 0");
    expect_fail("head_dim odd", Q3 BASE_FIELDS ", \"head_dim\": 15}", "\"head_dim\"", NULL);
    expect_fail("hidden not divisible, no head_dim", "{\"architectures\": [\"LlamaForCausalLM\"], "
                "\"hidden_size\": 66, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
                "\"num_attention_heads\": 4, \"vocab_size\": 4096}", "\"hidden_size\"", "\"head_dim\"");
    expect_fail("unknown architecture", "{\"architectures\": [\"GPT2LMHeadModel\"], " BASE_FIELDS "}",
                "GPT2LMHeadModel", "not supported");
    expect_fail("unknown model_type", "{\"model_type\": \"gpt2\", " BASE_FIELDS "}", "gpt2", NULL);
    expect_fail("no architecture at all", "{" BASE_FIELDS "}", "architectures", "model_type");
    expect_fail("architectures not a list", "{\"architectures\": \"Qwen3ForCausalLM\", " BASE_FIELDS "}",
                "architectures", NULL);
    expect_fail("model_type contradicts", "{\"architectures\": [\"Qwen3ForCausalLM\"], "
                "\"model_type\": \"llama\", " BASE_FIELDS "}", "model_type", NULL);
    expect_fail("attention_bias on qwen3", Q3 BASE_FIELDS ", \"attention_bias\": true}", "attention_bias", NULL);
    expect_fail("mlp_bias", "{\"model_type\": \"llama\", " BASE_FIELDS ", \"mlp_bias\": true}", "mlp_bias", NULL);
    expect_fail("gelu", Q3 BASE_FIELDS ", \"hidden_act\": \"gelu\"}", "hidden_act", "gelu");
    expect_fail("negative mtp layers", Q3 BASE_FIELDS ", \"num_nextn_predict_layers\": -1}",
                "num_nextn_predict_layers", NULL);
    /* sizes are bounded before anything is allocated from them (a config that
     * once took 2.2 GB and 15 s to fail, or overflowed heads × head_dim) */
    expect_fail("10^7 layers", Q3 "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 10000000,"
                "\"num_attention_heads\": 4, \"vocab_size\": 4096}", "\"num_hidden_layers\"", "at most");
    expect_fail("2^31-1 heads", Q3 "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
                "\"num_attention_heads\": 2147483647, \"num_key_value_heads\": 1, \"vocab_size\": 4096}",
                "\"num_attention_heads\"", "at most");
    expect_fail("huge head_dim", Q3 BASE_FIELDS ", \"head_dim\": 1048576}", "\"head_dim\"", "at most");
    expect_fail("huge vocab", Q3 "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2,"
                "\"num_attention_heads\": 4, \"vocab_size\": 2000000000}", "\"vocab_size\"", "at most");
    expect_fail("many mtp layers", Q3 BASE_FIELDS ", \"num_nextn_predict_layers\": 1000}", "num_nextn_predict_layers",
                "at most");
    expect_fail("not JSON", "{\"hidden_size\": 64,", "JSON", NULL);
    /* RoPE in transformers >= 5's rope_parameters: read, and non-default types refused */
    model_config rp;
    expect_ok(&rp, "rope_parameters", Q3 BASE_FIELDS ", \"rope_parameters\": {\"rope_type\": \"default\", "
              "\"rope_theta\": 1000000.0}}");
    CHECKF(rp.rope_theta == 1e6f, "rope_parameters.rope_theta read as %g, want 1e6", rp.rope_theta);
    expect_ok(&rp, "rope_scaling default", Q3 BASE_FIELDS ", \"rope_theta\": 5e5, \"rope_scaling\": {\"rope_type\": \"default\"}}");
    CHECK(rp.rope_theta == 5e5f);
    expect_fail("rope_parameters yarn", Q3 BASE_FIELDS ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                "\"rope_theta\": 1e6}}", "rope_parameters", "yarn");
    expect_fail("rope_parameters llama3", Q3 BASE_FIELDS ", \"rope_parameters\": {\"rope_type\": \"llama3\"}}",
                "rope_parameters", "llama3");
    expect_fail("two thetas", Q3 BASE_FIELDS ", \"rope_theta\": 10000, \"rope_parameters\": {\"rope_theta\": 1e6}}",
                "disagree", NULL);
    expect_fail("per layer type", Q3 BASE_FIELDS ", \"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1e6}}}",
                "per-layer-type", NULL);
    expect_fail("trailing data", Q3 BASE_FIELDS "} {}", "after the JSON value", NULL);
    model_config dup;
    expect_ok(&dup, "duplicate key: the last wins, as in Python's json",
              Q3 BASE_FIELDS ", \"num_attention_heads\": 8, \"num_attention_heads\": 2}");
    CHECKF(dup.n_heads == 2, "duplicate num_attention_heads read as %d, HF reads 2", dup.n_heads);
    expect_fail("number 064", Q3 BASE_FIELDS ", \"head_dim\": 064}", "malformed number", NULL);
    expect_fail("NUL in a string", Q3 BASE_FIELDS ", \"hidden_act\": \"silu\\u0000x\"}", "NUL", NULL);
    expect_fail("JSON array", "[1, 2]", "object", NULL);
    expect_fail("empty file", "", "JSON", NULL);
#undef Q3

    /* A missing file names the path. */
    model_config c;
    char err[512] = "";
    char path[600];
    snprintf(path, sizeof path, "%s/nope.json", tmpdir);
    CHECK(config_load(&c, path, err, sizeof err) != 0 && strstr(err, path));
}

/* Qwen3-MoE: HF's defaults, the sparse-layer rule of transformers'
 * Qwen3MoeDecoderLayer (not in mlp_only_layers, num_experts > 0,
 * (layer + 1) % decoder_sparse_step == 0), and the ranges refused. */
static void test_moe(void) {
    model_config c;
    char err[512] = "";
    int rc = config_load(&c, tu_path("tests/fixtures/qwen3-moe-tiny/config.json"), err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    CHECK(strcmp(c.architecture, "Qwen3MoeForCausalLM") == 0 && strcmp(c.model_type, "qwen3_moe") == 0);
    CHECK(c.n_experts == 8 && c.n_experts_per_tok == 2 && c.moe_intermediate_size == 32 && c.norm_topk_prob == 1);
    CHECK(c.decoder_sparse_step == 1 && c.qk_norm == 1 && c.head_dim == 16 && c.intermediate_size == 64);
    CHECK(config_layer_is_sparse(&c, 0) && !config_layer_is_sparse(&c, 1) && config_layer_is_sparse(&c, 2));
    CHECK(!config_layer_is_sparse(&c, 3) && !config_layer_is_sparse(&c, -1) && config_has_experts(&c));

#define QM "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": 128, " \
           "\"num_hidden_layers\": 6, \"num_attention_heads\": 4, \"vocab_size\": 4096"
    expect_ok(&c, "qwen3_moe defaults", QM "}");
    CHECK(c.n_experts == 128 && c.n_experts_per_tok == 8 && c.moe_intermediate_size == 768);
    CHECK(c.norm_topk_prob == 0 && c.decoder_sparse_step == 1 && c.head_dim == 16);
    for (int l = 0; l < 6; l++) CHECK(config_layer_is_sparse(&c, l));
    expect_ok(&c, "sparse step 2, mlp_only [3]", QM ", \"decoder_sparse_step\": 2, \"mlp_only_layers\": [3],"
              "\"num_experts\": 4, \"num_experts_per_tok\": 4, \"norm_topk_prob\": true}");
    /* (l + 1) % 2 == 0: layers 1, 3, 5; 3 is mlp-only */
    int want[6] = {0, 1, 0, 0, 0, 1};
    for (int l = 0; l < 6; l++) CHECKF(config_layer_is_sparse(&c, l) == want[l], "layer %d", l);
    expect_ok(&c, "num_experts 0: all dense", QM ", \"num_experts\": 0}");
    CHECK(!config_has_experts(&c));
    expect_ok(&c, "model_type qwen3_moe", "{\"model_type\": \"qwen3_moe\", " BASE_FIELDS ", \"mlp_only_layers\": null}");
    CHECK(c.n_experts == 128 && config_has_experts(&c));
    /* a dense family ignores the MoE fields (transformers' Qwen3Config has none) */
    expect_ok(&c, "qwen3 with num_experts", "{\"architectures\": [\"Qwen3ForCausalLM\"], " BASE_FIELDS
              ", \"num_experts\": 8}");
    CHECK(c.n_experts == 0 && !config_has_experts(&c));

    expect_fail("top-k above experts", QM ", \"num_experts\": 4, \"num_experts_per_tok\": 5}", "\"num_experts_per_tok\"",
                "more than");
    expect_fail("top-k 0", QM ", \"num_experts_per_tok\": 0}", "\"num_experts_per_tok\"", "> 0");
    expect_fail("top-k 65", QM ", \"num_experts_per_tok\": 65}", "\"num_experts_per_tok\"", "at most");
    expect_fail("negative experts", QM ", \"num_experts\": -1}", "\"num_experts\"", ">= 0");
    expect_fail("huge experts", QM ", \"num_experts\": 100000}", "\"num_experts\"", "at most");
    expect_fail("sparse step 0", QM ", \"decoder_sparse_step\": 0}", "\"decoder_sparse_step\"", "> 0");
    expect_fail("moe_intermediate_size 0", QM ", \"moe_intermediate_size\": 0}", "\"moe_intermediate_size\"", NULL);
    expect_fail("mlp_only_layers past the end", QM ", \"mlp_only_layers\": [6]}", "\"mlp_only_layers\"", "0..5");
    expect_fail("mlp_only_layers negative", QM ", \"mlp_only_layers\": [-1]}", "\"mlp_only_layers\"", NULL);
    expect_fail("mlp_only_layers twice", QM ", \"mlp_only_layers\": [2, 2]}", "\"mlp_only_layers\"", "twice");
    expect_fail("mlp_only_layers a string", QM ", \"mlp_only_layers\": \"1\"}", "\"mlp_only_layers\"", NULL);
    expect_fail("mlp_only_layers [1.5]", QM ", \"mlp_only_layers\": [1.5]}", "\"mlp_only_layers\"", NULL);
    expect_fail("norm_topk_prob 1", QM ", \"norm_topk_prob\": 1}", "\"norm_topk_prob\"", NULL);
    expect_fail("shared experts", QM ", \"shared_expert_intermediate_size\": 64}", "shared experts", NULL);
    expect_fail("qwen3_moe vs qwen3", "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3\", "
                BASE_FIELDS "}", "contradicts", NULL);
#undef QM
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/specbed_cfg_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", tmpdir);
    test_fixture_config();
    test_families();
    test_bad();
    test_moe();
    remove(cfg_path);
    rmdir(tmpdir);
    return tu_done("test_config");
}
