/* dspark_ckpt.c — reads a DSpark checkpoint (see dspark_ckpt.h).
 * Owns: the DSpark config fields' meaning and checks, and the binding of
 * the checkpoint's tensors. Must not: compute anything (drafter_dspark.c
 * does). engine/config.c reads target configs only (it rejects the
 * DSpark architecture), so the Qwen3 fields of a DSpark config are read
 * here with the same HF defaults. */
#include "dspark_ckpt.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "file.h"
#include "json_strict.h"

/* Number field: 1 present, 0 absent/null, -1 wrong type (err set). */
static int num(const cJSON *root, const char *key, double *out, const char *path, char *err, size_t el) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (cJSON_IsBool(j)) { *out = cJSON_IsTrue(j); return 1; }
    if (!cJSON_IsNumber(j)) return errf(err, el, "%s: field \"%s\" must be a number", path, key);
    *out = j->valuedouble;
    return 1;
}

/* Integer field in [lo, hi]; absent → def (or an error if required). */
static int int_field(const cJSON *root, const char *key, int required, int def, int lo, int hi, int *out,
                     const char *path, char *err, size_t el) {
    double v = def;
    int r = num(root, key, &v, path, err, el);
    if (r < 0) return -1;
    if (r == 0 && required) return errf(err, el, "%s: required field \"%s\" is missing", path, key);
    if (v != floor(v) || v < lo || v > hi)
        return errf(err, el, "%s: field \"%s\" = %g must be an integer in [%d, %d]", path, key, v, lo, hi);
    *out = (int)v;
    return 0;
}

static int str_is(const cJSON *root, const char *key, const char *want) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    return j && cJSON_IsString(j) && !strcmp(j->valuestring, want);
}

static int parse_config(dspark_ckpt *c, const cJSON *root, const char *path, const model *t, char *err, size_t el) {
    const model_config *tc = &t->cfg;
    model_config *m = &c->cfg;
    if (!cJSON_IsObject(root)) return errf(err, el, "%s: not a JSON object", path);
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const char *a = arch && cJSON_IsArray(arch) && cJSON_IsString(arch->child) ? arch->child->valuestring : NULL;
    if (!cJSON_GetObjectItemCaseSensitive(root, "block_size") || !cJSON_GetObjectItemCaseSensitive(root, "target_layer_ids") ||
        (a && !strstr(a, "DSpark")))
        return errf(err, el, "%s: not a DSpark config (architectures %s%s%s; block_size and target_layer_ids are "
                    "required)", path, a ? "\"" : "", a ? a : "absent", a ? "\"" : "");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (mt && !cJSON_IsNull(mt) && !str_is(root, "model_type", "qwen3"))
        return errf(err, el, "%s: model_type must be \"qwen3\" (DeepSpec Qwen3 layout)", path);
    snprintf(m->architecture, sizeof m->architecture, "%s", a ? a : "DSpark");
    snprintf(m->model_type, sizeof m->model_type, "qwen3");
    m->qk_norm = 1;
    const int big = 1 << 30;
    if (int_field(root, "hidden_size", 1, 0, 1, big, &m->hidden_size, path, err, el) ||
        int_field(root, "intermediate_size", 1, 0, 1, big, &m->intermediate_size, path, err, el) ||
        int_field(root, "num_hidden_layers", 1, 0, 1, 1024, &m->n_layers, path, err, el) ||
        int_field(root, "num_attention_heads", 1, 0, 1, 4096, &m->n_heads, path, err, el) ||
        int_field(root, "vocab_size", 1, 0, 1, big, &m->vocab_size, path, err, el) ||
        int_field(root, "num_key_value_heads", 0, m->n_heads, 1, m->n_heads, &m->n_kv_heads, path, err, el) ||
        int_field(root, "head_dim", 0, m->hidden_size / m->n_heads, 2, 65536, &m->head_dim, path, err, el) ||
        int_field(root, "max_position_embeddings", 0, 32768, 1, big, &m->max_position_embeddings, path, err, el))
        return -1;
    if (m->n_heads % m->n_kv_heads || m->head_dim % 2)
        return errf(err, el, "%s: %d heads over %d kv heads with head_dim %d is not a valid attention shape", path,
                    m->n_heads, m->n_kv_heads, m->head_dim);
    double eps = 1e-6, theta = 10000.0, flag = 0;
    if (num(root, "rms_norm_eps", &eps, path, err, el) < 0) return -1;
    if (!(eps > 0)) return errf(err, el, "%s: rms_norm_eps must be > 0", path);
    if (config_rope_theta(root, path, &theta, err, el)) return -1;   /* the target's reader: one RoPE rule */
    m->rms_norm_eps = (float)eps;
    m->rope_theta = (float)theta;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && !str_is(root, "hidden_act", "silu")) return errf(err, el, "%s: hidden_act must be \"silu\"", path);
    if (num(root, "attention_bias", &flag, path, err, el) < 0) return -1;
    if (flag) return errf(err, el, "%s: attention_bias is true; attention biases are not supported", path);

    /* against the target */
    if (m->hidden_size != tc->hidden_size)
        return errf(err, el, "%s: hidden_size %d differs from the target's %d", path, m->hidden_size, tc->hidden_size);
    if (m->vocab_size != tc->vocab_size)
        return errf(err, el, "%s: vocab_size %d differs from the target's %d", path, m->vocab_size, tc->vocab_size);
    int ntl = tc->n_layers;
    if (int_field(root, "num_target_layers", 0, tc->n_layers, 1, 1024, &ntl, path, err, el)) return -1;
    if (ntl != tc->n_layers)
        return errf(err, el, "%s: num_target_layers %d, the target has %d layers", path, ntl, tc->n_layers);

    /* DSpark fields */
    if (int_field(root, "block_size", 1, 0, 1, 64, &c->block_size, path, err, el) ||
        int_field(root, "mask_token_id", 1, 0, 0, big, &c->mask_token_id, path, err, el) ||
        int_field(root, "markov_rank", 0, 0, 0, 65536, &c->markov_rank, path, err, el) ||
        int_field(root, "enable_confidence_head", 0, 0, 0, 1, &c->has_conf, path, err, el) ||
        int_field(root, "confidence_head_with_markov", 0, 0, 0, 1, &c->conf_with_markov, path, err, el))
        return -1;
    /* EAGLE-3's field; checked against the d2t map at load (0 = absent) */
    const cJSON *dvs = cJSON_GetObjectItemCaseSensitive(root, "draft_vocab_size");
    if (dvs && !cJSON_IsNull(dvs) &&
        int_field(root, "draft_vocab_size", 1, 0, 1, tc->vocab_size, &c->draft_vocab_size, path, err, el))
        return -1;
    if (c->mask_token_id >= tc->vocab_size)
        return errf(err, el, "%s: mask_token_id %d is outside the vocabulary (%d)", path, c->mask_token_id, tc->vocab_size);
    if (c->markov_rank > 0 && cJSON_GetObjectItemCaseSensitive(root, "markov_head_type") &&
        !str_is(root, "markov_head_type", "vanilla"))
        return errf(err, el, "%s: markov_head_type must be \"vanilla\" (the only Markov head implemented)", path);
    if (!c->has_conf) c->conf_with_markov = 0;
    if (c->conf_with_markov && c->markov_rank == 0)
        return errf(err, el, "%s: confidence_head_with_markov needs markov_rank > 0", path);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "target_layer_ids");
    int n = cJSON_IsArray(ids) ? cJSON_GetArraySize(ids) : -1;
    if (n < 1 || n > DSPARK_MAX_TAPS)
        return errf(err, el, "%s: target_layer_ids must be a list of 1..%d layer ids", path, DSPARK_MAX_TAPS);
    c->n_taps = n;
    for (int i = 0; i < n; i++) {
        const cJSON *j = cJSON_GetArrayItem(ids, i);
        double v = cJSON_IsNumber(j) ? j->valuedouble : -2;
        /* layer L = the output of decoder layer L (DeepSpec reads HF's
         * hidden_states[L + 1]); for the final layer that entry is the state
         * after the final norm, which the drafter taps as FWD_TAP_FINAL_NORM.
         * DeepSpec's -1 (embedding output) is not supported */
        if (v != floor(v) || v < 0 || v >= tc->n_layers)
            return errf(err, el, "%s: target_layer_ids[%d] = %g must be a decoder layer 0..%d of the target",
                        path, i, v, tc->n_layers - 1);
        c->target_layer_ids[i] = (int)v;
        /* fc reads the taps concatenated in this order; ascending, as
         * DeepSpec validates, is also the order the reference taps them in */
        if (i > 0 && c->target_layer_ids[i] <= c->target_layer_ids[i - 1])
            return errf(err, el, "%s: target_layer_ids must be strictly increasing", path);
    }
    return 0;
}

static int read_config(dspark_ckpt *c, const char *dir, const model *t, char *err, size_t el) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *buf;
    size_t n;
    if (read_file(path, 16u << 20, &buf, &n, err, el)) return -1;
    cJSON *root;
    int jrc = json_parse_strict(&root, buf, n, path, 1, err, el);
    free(buf);
    if (jrc) return -1;
    int rc = parse_config(c, root, path, t, err, el);
    cJSON_Delete(root);
    return rc;
}

void dspark_ckpt_free(dspark_ckpt *c) {
    if (!c) return;
    draft_vocab_free(&c->dv);   /* the gathered heads */
    if (c->layers)
        for (int l = 0; l < c->cfg.n_layers; l++) layer_weights_free(&c->layers[l]);
    free(c->layers);
    kb_free(c->norm);
    kb_free(c->hidden_norm);
    kb_weight_release_owner(c->st);   /* the device copies of its own weights (--device cuda) */
    st_close(c->st);
    memset(c, 0, sizeof *c);
}

/* A [rows, cols] matrix that may be absent: 1 bound, 0 absent, -1 wrong. */
static int optional_matrix(kb_weight *w, const st_model *st, const char *name, int rows, int cols, char *err, size_t el) {
    if (!st_find(st, name)) return 0;
    return model_bind_matrix(w, st, name, rows, cols, err, el) ? -1 : 1;
}

int dspark_ckpt_load(dspark_ckpt *c, const char *dir, const model *t, char *err, size_t el) {
    memset(c, 0, sizeof *c);
    if (read_config(c, dir, t, err, el)) { memset(c, 0, sizeof *c); return -1; }
    if (st_open_dir(&c->st, dir, err, el)) { memset(c, 0, sizeof *c); return -1; }
    const int H = c->cfg.hidden_size, V = c->cfg.vocab_size, r = c->markov_rank;
    c->layers = calloc((size_t)c->cfg.n_layers, sizeof *c->layers);
    if (!c->layers) { errf(err, el, "%s: out of memory", dir); goto fail; }
    for (int l = 0; l < c->cfg.n_layers; l++) {
        char pre[64];
        snprintf(pre, sizeof pre, "layers.%d.", l);
        if (layer_weights_bind(&c->layers[l], c->st, pre, &c->cfg, err, el)) goto fail;
    }
    if (model_copy_vector(&c->norm, c->st, "norm.weight", H, err, el) ||
        model_copy_vector(&c->hidden_norm, c->st, "hidden_norm.weight", H, err, el) ||
        model_bind_matrix(&c->fc, c->st, "fc.weight", H, c->n_taps * H, err, el))
        goto fail;
    if (r > 0 && (model_bind_matrix(&c->w1, c->st, "markov_head.markov_w1.weight", V, r, err, el) ||
                  model_bind_matrix(&c->w2, c->st, "markov_head.markov_w2.weight", V, r, err, el)))
        goto fail;
    if (draft_vocab_load(&c->dv, dir, V, err, el)) goto fail;
    const int N = c->dv.n;
    if (c->draft_vocab_size && c->draft_vocab_size != (N ? N : V)) {
        if (N) errf(err, el, "%s/config.json: draft_vocab_size %d, but %s maps %d ids", dir, c->draft_vocab_size,
                    c->dv.path, N);
        else errf(err, el, "%s/config.json: draft_vocab_size %d of %d, but there is no %s (the d2t map)", dir,
                  c->draft_vocab_size, V, c->dv.path);
        goto fail;
    }
    if (c->has_conf) {
        float *b = NULL;
        if (model_bind_matrix(&c->conf_w, c->st, "confidence_head.proj.weight", 1, H + (c->conf_with_markov ? r : 0),
                              err, el) ||
            model_copy_vector(&b, c->st, "confidence_head.proj.bias", 1, err, el))
            goto fail;
        c->conf_b = b[0];
        kb_free(b);
    }
    /* with a draft vocabulary, lm_head.weight may be the reduced [N, H] */
    const st_tensor *lh = st_find(c->st, "lm_head.weight");
    c->reduced_head = N && N != V && lh && lh->ndim == 2 && lh->shape[0] == N;
    /* DeepSpec saves frozen copies of the target's embedding and head: when
     * the bytes are the target's, use the target's weights (one copy in the
     * cache instead of two; measured in bench/RECORD.md) */
    c->shared_embed = model_tensor_is_target(c->st, "embed_tokens.weight", t, 0);
    c->shared_lm_head = !c->reduced_head && model_tensor_is_target(c->st, "lm_head.weight", t, 1);
    int re = c->shared_embed ? 0 : optional_matrix(&c->embed, c->st, "embed_tokens.weight", V, H, err, el);
    int rl = c->shared_lm_head ? 0
             : optional_matrix(&c->lm_head, c->st, "lm_head.weight", c->reduced_head ? N : V, H, err, el);
    if (re < 0) goto fail;
    if (rl < 0) {
        if (err && N && N != V) {
            size_t n = strlen(err);
            snprintf(err + n, el > n ? el - n : 0, " (with the draft vocabulary of %s: [%d, %d] reduced, or [%d, %d])",
                     c->dv.path, N, H, V, H);
        }
        goto fail;
    }
    c->own_embed = re;
    c->own_lm_head = rl;
    if (!re) c->embed = t->embed;
    if (!rl) c->lm_head = t->lm_head;
    if (N && !c->reduced_head &&
        draft_vocab_gather(&c->dv, &c->lm_head, &c->lm_head, rl ? "lm_head.weight" : "the target's lm_head", err, el))
        goto fail;
    if (N && r > 0 && draft_vocab_gather(&c->dv, &c->w2, &c->w2, "markov_head.markov_w2.weight", err, el)) goto fail;
    return 0;
fail:
    dspark_ckpt_free(c);
    return -1;
}
