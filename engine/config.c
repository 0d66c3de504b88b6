/* config.c — reads an HF config.json into model_config.
 *
 * Owns: the mapping from HF field names and HF defaults to model_config.
 * Must not: look at weights (model.c checks shapes against this config) or
 * accept anything whose meaning it cannot honour — an unsupported field that
 * changes the math (rope_scaling, attention/mlp biases on families that put
 * one on o_proj too, a non-SiLU activation) is an error, never ignored.
 *
 * Defaults follow the transformers config class of each family (4.57), so a
 * config.json means here what it means to HF:
 *   num_key_value_heads     = num_attention_heads
 *   head_dim                = hidden_size / num_attention_heads, except
 *                             Qwen3ForCausalLM whose HF default is 128
 *   rms_norm_eps            = 1e-6
 *   rope_theta              = 10000
 *   max_position_embeddings = 32768 (Qwen2, Qwen3), 2048 (Llama),
 *                             131072 (Mistral)
 *   tie_word_embeddings     = false
 * Sliding-window attention: where a window is active (Mistral's
 * sliding_window, default 4096; Qwen's when use_sliding_window is true),
 * max_position_embeddings is capped at the window, since below it sliding
 * and full attention are the same computation. */
#include "config.h"
#include "errmsg.h"
#include "file.h"
#include "json_strict.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *arch, *model_type;
    int qk_norm, qkv_bias;
    int default_head_dim;      /* 0: hidden_size / n_heads */
    int default_max_pos;
    int sliding_by_default;    /* Mistral: window active unless null */
    int moe;                   /* reads the mixture-of-experts fields */
} family;

static const family FAMILIES[] = {
    { "Qwen3ForCausalLM",    "qwen3",     1, 0, 128, 32768,  0, 0 },
    { "Qwen3MoeForCausalLM", "qwen3_moe", 1, 0, 0,   32768,  0, 1 },
    { "Qwen2ForCausalLM",    "qwen2",     0, 1, 0,   32768,  0, 0 },
    { "LlamaForCausalLM",    "llama",     0, 0, 0,   2048,   0, 0 },
    { "MistralForCausalLM",  "mistral",   0, 0, 0,   131072, 1, 0 },
};
#define N_FAMILIES ((int)(sizeof FAMILIES / sizeof FAMILIES[0]))

/* Field readers: return 1 if present (and valid), 0 if absent or null,
 * -1 (with err) if present with the wrong type or out of range. */
static int get_int(const cJSON *root, const char *key, int *out, const char *path,
                   char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
        fabs(j->valuedouble) > 2147483647.0)
        return errf(err, errlen, "%s: field \"%s\" must be an integer", path, key);
    *out = (int)j->valuedouble;
    return 1;
}

static int get_num(const cJSON *root, const char *key, double *out, const char *path,
                   char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return errf(err, errlen, "%s: field \"%s\" must be a number", path, key);
    *out = j->valuedouble;
    return 1;
}

static int get_bool(const cJSON *root, const char *key, int *out, const char *path,
                    char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsBool(j))
        return errf(err, errlen, "%s: field \"%s\" must be true or false", path, key);
    *out = cJSON_IsTrue(j);
    return 1;
}

static int get_str(const cJSON *root, const char *key, const char **out, const char *path,
                   char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsString(j))
        return errf(err, errlen, "%s: field \"%s\" must be a string", path, key);
    *out = j->valuestring;
    return 1;
}

/* A required positive integer. */
static int need_pos(const cJSON *root, const char *key, int *out, const char *path,
                    char *err, size_t errlen) {
    int r = get_int(root, key, out, path, err, errlen);
    if (r < 0) return -1;
    if (r == 0) return errf(err, errlen, "%s: required field \"%s\" is missing", path, key);
    if (*out <= 0) return errf(err, errlen, "%s: field \"%s\" must be > 0 (got %d)", path, key, *out);
    return 0;
}

/* Upper bounds far beyond any real checkpoint (DeepSeek-V3: hidden 7168,
 * 61 layers, vocab 129280; Llama-3 405B: 126 layers, 128 heads), checked
 * before anything is sized from the config, so a corrupt or hostile
 * config.json is refused by name instead of allocating gigabytes or
 * overflowing int products (heads × head_dim, vocab × hidden) later. */
static int at_most(int v, int hi, const char *key, const char *path, char *err, size_t errlen) {
    if (v > hi) return errf(err, errlen, "%s: field \"%s\" is %d; specbed accepts at most %d", path, key, v, hi);
    return 0;
}

/* An optional positive integer (keeps *out when absent). */
static int opt_pos(const cJSON *root, const char *key, int *out, const char *path,
                   char *err, size_t errlen) {
    int r = get_int(root, key, out, path, err, errlen);
    if (r < 0) return -1;
    if (r == 1 && *out <= 0) return errf(err, errlen, "%s: field \"%s\" must be > 0 (got %d)", path, key, *out);
    return 0;
}

/* bos/eos: an int, a list of ints (first one used), or absent/null (-1). */
static int get_token_id(const cJSON *root, const char *key, int *out, const char *path,
                        char *err, size_t errlen) {
    *out = -1;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (cJSON_IsArray(j)) {
        for (const cJSON *e = j->child; e; e = e->next)
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) ||
                e->valuedouble < 0 || e->valuedouble > 2147483647.0)
                return errf(err, errlen, "%s: field \"%s\" must be a token id or a list of token ids", path, key);
        if (j->child) *out = (int)j->child->valuedouble;
        return 0;
    }
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
        j->valuedouble < 0 || j->valuedouble > 2147483647.0)
        return errf(err, errlen, "%s: field \"%s\" must be a token id or a list of token ids", path, key);
    *out = (int)j->valuedouble;
    return 0;
}

static const family *find_family(const cJSON *root, const char *path, char *err, size_t errlen) {
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (arch && !cJSON_IsNull(arch)) {
        if (!cJSON_IsArray(arch) || !cJSON_IsString(arch->child)) {
            errf(err, errlen, "%s: field \"architectures\" must be a list of strings", path);
            return NULL;
        }
        const char *a = arch->child->valuestring;
        for (int i = 0; i < N_FAMILIES; i++)
            if (strcmp(a, FAMILIES[i].arch) == 0) return &FAMILIES[i];
        errf(err, errlen, "%s: architecture \"%s\" is not supported (Qwen3ForCausalLM, "
             "Qwen3MoeForCausalLM, Qwen2ForCausalLM, LlamaForCausalLM, MistralForCausalLM are)", path, a);
        return NULL;
    }
    const char *mt = NULL;
    int r = get_str(root, "model_type", &mt, path, err, errlen);
    if (r < 0) return NULL;
    if (r == 0) {
        errf(err, errlen, "%s: neither \"architectures\" nor \"model_type\" says what the model is", path);
        return NULL;
    }
    for (int i = 0; i < N_FAMILIES; i++)
        if (strcmp(mt, FAMILIES[i].model_type) == 0) return &FAMILIES[i];
    errf(err, errlen, "%s: model_type \"%s\" is not supported (qwen3, qwen3_moe, qwen2, llama, mistral are)", path, mt);
    return NULL;
}

/* The mixture-of-experts fields of Qwen3MoeConfig, with its defaults
 * (transformers 4.57 configuration_qwen3_moe.py): num_experts 128,
 * num_experts_per_tok 8, moe_intermediate_size 768, norm_topk_prob false,
 * decoder_sparse_step 1, mlp_only_layers []. Ranges are checked here so the
 * loader and the router can size from them: 0 <= num_experts <= 4096,
 * 1 <= num_experts_per_tok <= min(num_experts, 64), decoder_sparse_step >= 1
 * (HF divides by it), every mlp_only_layers entry a distinct layer index. */
static int parse_moe(model_config *c, const cJSON *root, const char *path, char *err, size_t errlen) {
    c->n_experts = 128;
    c->n_experts_per_tok = 8;
    c->moe_intermediate_size = 768;
    c->norm_topk_prob = 0;
    c->decoder_sparse_step = 1;
    if (get_int(root, "num_experts", &c->n_experts, path, err, errlen) < 0) return -1;
    if (c->n_experts < 0) return errf(err, errlen, "%s: field \"num_experts\" must be >= 0 (got %d)", path, c->n_experts);
    if (at_most(c->n_experts, 4096, "num_experts", path, err, errlen) ||
        opt_pos(root, "num_experts_per_tok", &c->n_experts_per_tok, path, err, errlen) ||
        at_most(c->n_experts_per_tok, 64, "num_experts_per_tok", path, err, errlen) ||
        opt_pos(root, "moe_intermediate_size", &c->moe_intermediate_size, path, err, errlen) ||
        at_most(c->moe_intermediate_size, 1 << 20, "moe_intermediate_size", path, err, errlen) ||
        opt_pos(root, "decoder_sparse_step", &c->decoder_sparse_step, path, err, errlen) ||
        get_bool(root, "norm_topk_prob", &c->norm_topk_prob, path, err, errlen) < 0)
        return -1;
    if (c->n_experts > 0 && c->n_experts_per_tok > c->n_experts)
        return errf(err, errlen, "%s: field \"num_experts_per_tok\" (%d) is more than \"num_experts\" (%d)", path,
                    c->n_experts_per_tok, c->n_experts);
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    if (mo && !cJSON_IsNull(mo)) {
        if (!cJSON_IsArray(mo))
            return errf(err, errlen, "%s: field \"mlp_only_layers\" must be a list of layer indices", path);
        for (const cJSON *e = mo->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
                e->valuedouble >= c->n_layers)
                return errf(err, errlen, "%s: field \"mlp_only_layers\" holds %s; entries must be layer indices "
                            "0..%d", path, cJSON_IsNumber(e) ? "a value that is not a layer index" : "a non-number", c->n_layers - 1);
            int l = (int)e->valuedouble;
            if (c->mlp_only[l / 8] & (1u << (l % 8)))
                return errf(err, errlen, "%s: field \"mlp_only_layers\" lists layer %d twice", path, l);
            c->mlp_only[l / 8] |= (unsigned char)(1u << (l % 8));
        }
    }
    /* Shared experts (Qwen2-MoE) change the math and have no slot here. */
    int shared = 0;
    if (get_int(root, "shared_expert_intermediate_size", &shared, path, err, errlen) < 0) return -1;
    if (shared > 0)
        return errf(err, errlen, "%s: field \"shared_expert_intermediate_size\" is %d; shared experts are not supported",
                    path, shared);
    return 0;
}

int config_layer_is_sparse(const model_config *c, int layer) {
    if (c->n_experts <= 0 || c->decoder_sparse_step <= 0 || layer < 0 || layer >= c->n_layers || layer >= 1024)
        return 0;
    if (c->mlp_only[layer / 8] & (1u << (layer % 8))) return 0;
    return (layer + 1) % c->decoder_sparse_step == 0;
}

int config_has_experts(const model_config *c) {
    for (int l = 0; l < c->n_layers; l++)
        if (config_layer_is_sparse(c, l)) return 1;
    return 0;
}

static int parse(model_config *c, const cJSON *root, const char *path, char *err, size_t errlen) {
    if (!cJSON_IsObject(root)) return errf(err, errlen, "%s: not a JSON object", path);
    const family *fam = find_family(root, path, err, errlen);
    if (!fam) return -1;
    snprintf(c->architecture, sizeof c->architecture, "%s", fam->arch);
    snprintf(c->model_type, sizeof c->model_type, "%s", fam->model_type);
    c->qk_norm = fam->qk_norm;
    c->qkv_bias = fam->qkv_bias;

    const char *mt = NULL;
    if (get_str(root, "model_type", &mt, path, err, errlen) < 0) return -1;
    if (mt && strcmp(mt, fam->model_type) != 0)
        return errf(err, errlen, "%s: model_type \"%s\" contradicts architecture %s",
                    path, mt, fam->arch);

    if (need_pos(root, "hidden_size", &c->hidden_size, path, err, errlen) ||
        need_pos(root, "intermediate_size", &c->intermediate_size, path, err, errlen) ||
        need_pos(root, "num_hidden_layers", &c->n_layers, path, err, errlen) ||
        need_pos(root, "num_attention_heads", &c->n_heads, path, err, errlen) ||
        need_pos(root, "vocab_size", &c->vocab_size, path, err, errlen))
        return -1;
    if (at_most(c->hidden_size, 1 << 16, "hidden_size", path, err, errlen) ||
        at_most(c->intermediate_size, 1 << 20, "intermediate_size", path, err, errlen) ||
        at_most(c->n_layers, 1024, "num_hidden_layers", path, err, errlen) ||
        at_most(c->n_heads, 1024, "num_attention_heads", path, err, errlen) ||
        at_most(c->vocab_size, 1 << 24, "vocab_size", path, err, errlen))
        return -1;

    c->n_kv_heads = c->n_heads;
    if (opt_pos(root, "num_key_value_heads", &c->n_kv_heads, path, err, errlen)) return -1;
    if (c->n_heads % c->n_kv_heads != 0)
        return errf(err, errlen, "%s: field \"num_attention_heads\" (%d) is not a multiple of "
                    "\"num_key_value_heads\" (%d)", path, c->n_heads, c->n_kv_heads);

    if (fam->default_head_dim) {
        c->head_dim = fam->default_head_dim;
    } else {
        if (c->hidden_size % c->n_heads != 0)
            return errf(err, errlen, "%s: field \"hidden_size\" (%d) is not a multiple of "
                        "\"num_attention_heads\" (%d) and \"head_dim\" is absent",
                        path, c->hidden_size, c->n_heads);
        c->head_dim = c->hidden_size / c->n_heads;
    }
    if (opt_pos(root, "head_dim", &c->head_dim, path, err, errlen) ||
        at_most(c->head_dim, 1024, "head_dim", path, err, errlen))
        return -1;
    if (c->head_dim % 2 != 0)
        return errf(err, errlen, "%s: field \"head_dim\" (%d) must be even for rotary embeddings",
                    path, c->head_dim);

    c->max_position_embeddings = fam->default_max_pos;
    if (opt_pos(root, "max_position_embeddings", &c->max_position_embeddings, path, err, errlen) ||
        at_most(c->max_position_embeddings, 1 << 24, "max_position_embeddings", path, err, errlen))
        return -1;

    double eps = 1e-6, theta;
    if (get_num(root, "rms_norm_eps", &eps, path, err, errlen) < 0) return -1;
    if (!(eps > 0)) return errf(err, errlen, "%s: field \"rms_norm_eps\" must be > 0", path);
    if (config_rope_theta(root, path, &theta, err, errlen)) return -1;
    c->rms_norm_eps = (float)eps;
    c->rope_theta = (float)theta;

    c->tie_word_embeddings = 0;
    if (get_bool(root, "tie_word_embeddings", &c->tie_word_embeddings, path, err, errlen) < 0) return -1;

    const char *act = NULL;
    if (get_str(root, "hidden_act", &act, path, err, errlen) < 0) return -1;
    if (act && strcmp(act, "silu") != 0)
        return errf(err, errlen, "%s: field \"hidden_act\" is \"%s\"; only \"silu\" is supported", path, act);

    /* Llama/Mistral/Qwen3 attention_bias puts a bias on o_proj as well, which
     * layer_weights has no slot for; Qwen2's q/k/v bias is implied by the
     * family instead. */
    int ab = 0, mb = 0;
    if (get_bool(root, "attention_bias", &ab, path, err, errlen) < 0) return -1;
    if (ab && !fam->qkv_bias)
        return errf(err, errlen, "%s: field \"attention_bias\" is true; attention biases are not "
                    "supported for %s", path, fam->arch);
    if (get_bool(root, "mlp_bias", &mb, path, err, errlen) < 0) return -1;
    if (mb) return errf(err, errlen, "%s: field \"mlp_bias\" is true; MLP biases are not supported", path);

    int window = 4096, use_sw = fam->sliding_by_default;
    if (get_bool(root, "use_sliding_window", &use_sw, path, err, errlen) < 0) return -1;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (sw && cJSON_IsNull(sw)) window = 0;
    else if (get_int(root, "sliding_window", &window, path, err, errlen) < 0) return -1;
    if (use_sw && window > 0 && window < c->max_position_embeddings)
        c->max_position_embeddings = window;

    c->n_mtp_layers = 0;
    if (get_int(root, "num_nextn_predict_layers", &c->n_mtp_layers, path, err, errlen) < 0) return -1;
    if (c->n_mtp_layers < 0)
        return errf(err, errlen, "%s: field \"num_nextn_predict_layers\" must be >= 0", path);
    if (at_most(c->n_mtp_layers, 16, "num_nextn_predict_layers", path, err, errlen)) return -1;

    if (get_token_id(root, "bos_token_id", &c->bos_token_id, path, err, errlen) ||
        get_token_id(root, "eos_token_id", &c->eos_token_id, path, err, errlen))
        return -1;
    return fam->moe ? parse_moe(c, root, path, err, errlen) : 0;
}

/* A RoPE-type field ("rope_type", or "type" in older rope_scaling) that
 * says plain RoPE: absent, null or "default". */
static int rope_type_ok(const cJSON *o, const char *field, const char *path, char *err, size_t errlen) {
    const char *keys[2] = {"rope_type", "type"};
    for (int i = 0; i < 2; i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (!t || cJSON_IsNull(t)) continue;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "default"))
            return errf(err, errlen, "%s: \"%s\" asks for RoPE type %s%s%s; specbed implements only the default "
                        "RoPE (other types are not supported)", path, field, cJSON_IsString(t) ? "\"" : "", cJSON_IsString(t) ? t->valuestring : "(not a string)",
                        cJSON_IsString(t) ? "\"" : "");
    }
    return 0;
}

int config_rope_theta(const cJSON *root, const char *path, double *theta, char *err, size_t errlen) {
    *theta = 10000.0;
    double top = 0, nested = 0;
    int has_top = get_num(root, "rope_theta", &top, path, err, errlen);
    if (has_top < 0) return -1;
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    int has_nested = 0;
    if (rp && !cJSON_IsNull(rp)) {
        if (!cJSON_IsObject(rp)) return errf(err, errlen, "%s: field \"rope_parameters\" must be an object", path);
        for (const cJSON *k = rp->child; k; k = k->next)
            if (cJSON_IsObject(k))
                return errf(err, errlen, "%s: \"rope_parameters\" holds per-layer-type parameters (\"%s\"); only "
                            "one RoPE for every layer is supported", path, k->string ? k->string : "?");
        if (rope_type_ok(rp, "rope_parameters", path, err, errlen)) return -1;
        if ((has_nested = get_num(rp, "rope_theta", &nested, path, err, errlen)) < 0) return -1;
    }
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        if (!cJSON_IsObject(rs)) return errf(err, errlen, "%s: field \"rope_scaling\" must be an object or null", path);
        if (rope_type_ok(rs, "rope_scaling", path, err, errlen)) return -1;
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(rs, "factor");
        if (f && !(cJSON_IsNumber(f) && f->valuedouble == 1.0))
            return errf(err, errlen, "%s: field \"rope_scaling\" sets a factor; rope scaling is not supported", path);
    }
    if (has_top && has_nested && top != nested)
        return errf(err, errlen, "%s: \"rope_theta\" (%g) and \"rope_parameters\".\"rope_theta\" (%g) disagree", path,
                    top, nested);
    if (has_nested) *theta = nested;
    else if (has_top) *theta = top;
    if (!(*theta > 0)) return errf(err, errlen, "%s: field \"rope_theta\" must be > 0", path);
    return 0;
}

int config_load(model_config *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    char *txt;
    size_t n;
    if (read_file(path, 64u << 20, &txt, &n, err, errlen)) return -1;
    cJSON *root;
    int jrc = json_parse_strict(&root, txt, n, path, 1, err, errlen);
    free(txt);
    if (jrc) return -1;
    int rc = parse(c, root, path, err, errlen);
    cJSON_Delete(root);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}
