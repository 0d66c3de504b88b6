/* model.c — binds the tensors of an HF checkpoint to a model's roles, with
 * every shape checked against config.json before model_load returns.
 *
 * Owns: the model struct, its layer table and the f32 copies of norm
 * vectors and biases (small, read on every row, so converted once). Matrix
 * weights stay in the st_model mapping; kb_weight.data points into it —
 * except on the CUDA device (backend.h kb_set_device), where each matrix is
 * uploaded once as it is bound and kb_weight.data points at the device copy
 * (the kernels layer owns it; layer_weights_free and model_free release
 * it, and model_free every other upload made from the model's mapping,
 * such as the MTP module's, which drafters bind through model_bind_matrix).
 * Must not: compute anything (forward.c does) or copy matrices on the CPU.
 *
 * Names are HF's: model.embed_tokens.weight, model.layers.N.self_attn.
 * {q,k,v,o}_proj.weight, .{q,k}_norm.weight (Qwen3), .{q,k,v}_proj.bias
 * (Qwen2), .mlp.{gate,up,down}_proj.weight, .input_layernorm.weight,
 * .post_attention_layernorm.weight, model.norm.weight, lm_head.weight;
 * on a Qwen3-MoE sparse layer the MLP is moe.c's (mlp.gate.weight and the
 * experts, per expert or fused). Tensors the model does not use (MTP modules
 * live in the same checkpoint) are allowed and ignored — except, in an MoE
 * checkpoint, MLP tensors of the decoder layers that their layer's kind does
 * not read (moe_check_names), which are refused by name. */
#include "model.h"
#include "errmsg.h"
#include "moe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* "[a, b, c]" into buf. */
static const char *fmt_shape(char *buf, size_t n, const int64_t *shape, int ndim) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* The directory holding the checkpoint, for messages about absent tensors
 * (which have no file of their own). */
static int missing(char *err, size_t errlen, const st_model *st, const char *name) {
    const st_tensor *any = st_at(st, 0);
    if (!any) {
        const char *src = st_source(st);
        return errf(err, errlen, "%s: tensor '%s' is missing: the checkpoint has no tensors", src ? src : "checkpoint",
                    name);
    }
    const char *slash = strrchr(any->file, '/');
    int dlen = slash ? (int)(slash - any->file) : 1;
    return errf(err, errlen, "%.*s: tensor '%s' is missing from the checkpoint",
                dlen, slash ? any->file : ".", name);
}

/* Finds name and checks its shape equals want[0..ndim). */
static int find_shaped(const st_tensor **out, const st_model *st, const char *name,
                       const int64_t *want, int ndim, char *err, size_t errlen) {
    const st_tensor *t = st_find(st, name);
    if (!t) return missing(err, errlen, st, name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == want[i];
    if (!same) {
        char a[160], b[160];
        return errf(err, errlen, "%s: tensor '%s' has shape %s, config.json says %s", t->file, name,
                    fmt_shape(a, sizeof a, t->shape, t->ndim), fmt_shape(b, sizeof b, want, ndim));
    }
    /* Kernels read elements with typed loads; safetensors does not promise
     * alignment, so say so here rather than fault later. */
    if ((uintptr_t)t->data % kb_dtype_size(t->dt) != 0)
        return errf(err, errlen, "%s: tensor '%s' data is not %zu-byte aligned in the file",
                    t->file, name, kb_dtype_size(t->dt));
    *out = t;
    return 0;
}

int model_bind_matrix(kb_weight *w, const st_model *st, const char *name, int rows, int cols,
                      char *err, size_t errlen) {
    const int64_t want[2] = { rows, cols };
    const st_tensor *t;
    if (find_shaped(&t, st, name, want, 2, err, errlen)) return -1;
    w->dt = t->dt;
    w->data = t->data;
    w->rows = rows;
    w->cols = cols;
    /* on cuda: into device memory, owned until st's model or layer is freed */
    if (kb_weight_upload(w, st, err, errlen)) {
        size_t n = strlen(err ? err : "");
        if (err && n + 1 < errlen) snprintf(err + n, errlen - n, " (tensor '%s')", name);
        return -1;
    }
    return 0;
}

/* *out is kb_alloc'd, so that under a device backend the kernels read the
 * vector where it is (managed memory: nothing staged per call, a step of
 * what CUDA graphs need); the caller frees it with kb_free
 * (layer_weights_free / model_free). */
int model_copy_vector(float **out, const st_model *st, const char *name, int n,
                      char *err, size_t errlen) {
    *out = NULL;
    const int64_t want[1] = { n };
    const st_tensor *t;
    if (find_shaped(&t, st, name, want, 1, err, errlen)) return -1;
    float *v = kb_alloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return errf(err, errlen, "%s: out of memory copying tensor '%s'", t->file, name);
    kb_to_f32(v, t->data, t->dt, (size_t)n);
    *out = v;
    return 0;
}

void layer_weights_free(layer_weights *lw) {
    if (!lw) return;
    kb_weight *mats[7] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down};
    for (int i = 0; i < 7; i++) kb_weight_release(mats[i]);   /* device copies (cuda only) */
    kb_free(lw->attn_norm);
    kb_free(lw->mlp_norm);
    kb_free(lw->q_norm);
    kb_free(lw->k_norm);
    kb_free(lw->bq);
    kb_free(lw->bk);
    kb_free(lw->bv);
    moe_weights_free(lw->moe);
    memset(lw, 0, sizeof *lw);
}

/* sparse: the layer's MLP is a mixture of experts (moe.c binds it) instead
 * of mlp.{gate,up,down}_proj. */
static int bind_layer(layer_weights *lw, const st_model *st, const char *prefix, const model_config *cfg, int sparse,
                      char *err, size_t errlen) {
    memset(lw, 0, sizeof *lw);
    const int H = cfg->hidden_size, I = cfg->intermediate_size, hd = cfg->head_dim;
    const int q_dim = cfg->n_heads * hd, kv_dim = cfg->n_kv_heads * hd;
    char name[512];
#define NAME(suffix) (snprintf(name, sizeof name, "%s%s", prefix, suffix) < (int)sizeof name ? name : "")
    int rc =
        model_bind_matrix(&lw->wq, st, NAME("self_attn.q_proj.weight"), q_dim, H, err, errlen) ||
        model_bind_matrix(&lw->wk, st, NAME("self_attn.k_proj.weight"), kv_dim, H, err, errlen) ||
        model_bind_matrix(&lw->wv, st, NAME("self_attn.v_proj.weight"), kv_dim, H, err, errlen) ||
        model_bind_matrix(&lw->wo, st, NAME("self_attn.o_proj.weight"), H, q_dim, err, errlen) ||
        (sparse ? moe_weights_bind(&lw->moe, st, prefix, cfg, err, errlen) :
                  model_bind_matrix(&lw->w_gate, st, NAME("mlp.gate_proj.weight"), I, H, err, errlen) ||
                  model_bind_matrix(&lw->w_up, st, NAME("mlp.up_proj.weight"), I, H, err, errlen) ||
                  model_bind_matrix(&lw->w_down, st, NAME("mlp.down_proj.weight"), H, I, err, errlen)) ||
        model_copy_vector(&lw->attn_norm, st, NAME("input_layernorm.weight"), H, err, errlen) ||
        model_copy_vector(&lw->mlp_norm, st, NAME("post_attention_layernorm.weight"), H, err, errlen);
    if (!rc && cfg->qk_norm)
        rc = model_copy_vector(&lw->q_norm, st, NAME("self_attn.q_norm.weight"), hd, err, errlen) ||
             model_copy_vector(&lw->k_norm, st, NAME("self_attn.k_norm.weight"), hd, err, errlen);
    if (!rc && cfg->qkv_bias)
        rc = model_copy_vector(&lw->bq, st, NAME("self_attn.q_proj.bias"), q_dim, err, errlen) ||
             model_copy_vector(&lw->bk, st, NAME("self_attn.k_proj.bias"), kv_dim, err, errlen) ||
             model_copy_vector(&lw->bv, st, NAME("self_attn.v_proj.bias"), kv_dim, err, errlen);
#undef NAME
    if (rc) {
        layer_weights_free(lw);
        return -1;
    }
    return 0;
}

int layer_weights_bind(layer_weights *lw, const st_model *st, const char *prefix,
                       const model_config *cfg, char *err, size_t errlen) {
    return bind_layer(lw, st, prefix, cfg, 0, err, errlen);
}

void model_free(model *m) {
    if (!m) return;
    if (m->layers)
        for (int l = 0; l < m->cfg.n_layers; l++) layer_weights_free(&m->layers[l]);
    free(m->layers);
    kb_free(m->final_norm);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    /* device copies (cuda only): the embedding, lm_head unless it is the
     * embedding, and whatever else was bound from this mapping */
    if (m->lm_head.data != m->embed.data) kb_weight_release(&m->lm_head);
    kb_weight_release(&m->embed);
    if (m->st) kb_weight_release_owner(m->st);
    st_close(m->st);
    free(m);
}

int model_tensor_is_target(const st_model *st, const char *name, const model *target, int head) {
    const st_tensor *a = st_find(st, name);
    /* the head is lm_head.weight when the file has one (model_load binds it), else the tied embedding */
    const st_tensor *b = head ? st_find(target->st, "lm_head.weight") : NULL;
    if (!b) b = st_find(target->st, "model.embed_tokens.weight");
    if (!a || !b || a->dt != b->dt || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return a->data == b->data || memcmp(a->data, b->data, a->nbytes) == 0;
}

int model_load(model **out, const char *dir, char *err, size_t errlen) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) return errf(err, errlen, "%s: out of memory", dir);
    int k = snprintf(m->dir, sizeof m->dir, "%s", dir);
    char cpath[sizeof m->dir + 16];
    if (k < 0 || (size_t)k >= sizeof m->dir) {
        free(m);
        return errf(err, errlen, "%s: path too long", dir);
    }
    snprintf(cpath, sizeof cpath, "%s/config.json", dir);
    if (config_load(&m->cfg, cpath, err, errlen) || st_open_dir(&m->st, dir, err, errlen))
        goto fail;

    const model_config *c = &m->cfg;
    /* Mixture of experts: on every device (moe.c; tensor parallelism,
     * which runs on the CPU only, refuses a device in model_load_shard) */
    if (config_has_experts(c) && moe_check_names(m->st, c, err, errlen)) goto fail;
    if (model_bind_matrix(&m->embed, m->st, "model.embed_tokens.weight", c->vocab_size,
                          c->hidden_size, err, errlen))
        goto fail;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) {
        errf(err, errlen, "%s: out of memory", dir);
        goto fail;
    }
    for (int l = 0; l < c->n_layers; l++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "model.layers.%d.", l);
        if (bind_layer(&m->layers[l], m->st, prefix, c, config_layer_is_sparse(c, l), err, errlen)) goto fail;
    }
    if (model_copy_vector(&m->final_norm, m->st, "model.norm.weight", c->hidden_size, err, errlen))
        goto fail;
    /* A tied checkpoint normally omits lm_head.weight; if one is present
     * anyway it is what HF would have saved from the shared tensor, so use it. */
    if (st_find(m->st, "lm_head.weight") || !c->tie_word_embeddings) {
        if (model_bind_matrix(&m->lm_head, m->st, "lm_head.weight", c->vocab_size,
                              c->hidden_size, err, errlen)) {
            if (!st_find(m->st, "lm_head.weight"))
                errf(err, errlen, "%s: tensor 'lm_head.weight' is missing and config.json has "
                     "tie_word_embeddings false", dir);
            goto fail;
        }
    } else {
        m->lm_head = m->embed;
    }
    m->shard = m->cfg;
    m->tp_size = 1;
    m->lm_head_part = m->lm_head;
    m->vocab_part = c->vocab_size;
    *out = m;
    return 0;
fail:
    model_free(m);
    return -1;
}
