/* model_shard.c — one rank's slice of the target for tensor parallelism
 * (Megatron-LM's split; see model.h), and the same slicing for a drafter's
 * decoder layers and head (engine/draft_stack.c). Column-parallel matrices
 * (q/k/v, gate/up — every expert's too on a sparse layer, whose router
 * stays whole — lm_head) are contiguous row ranges of the mmapped
 * tensor, so the shard points into the mapping; row-parallel ones (o_proj,
 * down, each expert's down) are a column range of every row and are copied once into memory
 * the caller owns (1/tp_size of each, per rank).
 * Owns: the slicing rules and the checks that the shapes divide.
 * Must not: compute (forward.c and layer.c run the shard; the all-reduce
 * after o_proj and down is layer.c's). */
#include "model.h"
#include "errmsg.h"
#include "moe.h"

#include <stdlib.h>
#include <string.h>

static kb_weight rows_of(const kb_weight *w, int r0, int n) {
    kb_weight s = *w;
    s.data = (const char *)w->data + (size_t)r0 * w->cols * kb_dtype_size(w->dt);
    s.rows = n;
    return s;
}

static int own(void ***owned, int *n_owned, void *p) {
    void **o = realloc(*owned, (size_t)(*n_owned + 1) * sizeof *o);
    if (!o) return -1;
    *owned = o;
    o[(*n_owned)++] = p;
    return 0;
}

/* Columns [c0, c0+n) of every row, copied (same dtype). */
static int cols_of(void ***owned, int *n_owned, kb_weight *out, const kb_weight *w, int c0, int n) {
    size_t es = kb_dtype_size(w->dt);
    char *p = malloc((size_t)w->rows * n * es);
    if (!p || own(owned, n_owned, p)) { free(p); return -1; }
    for (int r = 0; r < w->rows; r++)
        memcpy(p + (size_t)r * n * es, (const char *)w->data + ((size_t)r * w->cols + c0) * es, (size_t)n * es);
    *out = *w;
    out->data = p;
    out->cols = n;
    return 0;
}

/* Elements [i0, i0+n) of a kb_alloc'd f32 vector (model_copy_vector),
 * replacing it. */
static int slice_vec(float **v, int i0, int n) {
    if (!*v) return 0;
    float *s = kb_alloc((size_t)n * sizeof *s);
    if (!s) return -1;
    memcpy(s, *v + i0, (size_t)n * sizeof *s);
    kb_free(*v);
    *v = s;
    return 0;
}

int model_shard_config(const model_config *c, int rank, int tp, model_config *shard, int *kv_head_lo,
                       const char *what, char *err, size_t errlen) {
    if (tp < 1 || rank < 0 || rank >= tp) return errf(err, errlen, "tensor parallel rank %d of %d", rank, tp);
    const int nh = c->n_heads, nkv = c->n_kv_heads, I = c->intermediate_size;
    if (nh % tp || I % tp || (nkv % tp && tp % nkv))
        return errf(err, errlen, "%s: --tp %d does not fit the model: attention heads (%d) and intermediate_size (%d) "
                    "must be multiples of %d, kv heads (%d) a multiple or a divisor of it", what, tp, nh, I, tp, nkv);
    if (config_has_experts(c) && c->moe_intermediate_size % tp)
        return errf(err, errlen, "%s: --tp %d does not fit the model: moe_intermediate_size (%d) must be a multiple "
                    "of %d", what, tp, c->moe_intermediate_size, tp);
    const int nh_l = nh / tp, h0 = rank * nh_l;
    /* fewer kv heads than ranks: each rank keeps the one its q heads read */
    const int kv_l = nkv % tp == 0 ? nkv / tp : 1;
    *shard = *c;
    shard->n_heads = nh_l;
    shard->n_kv_heads = kv_l;
    shard->intermediate_size = I / tp;
    /* every expert split as a dense MLP is (gate/up by rows, down by
     * columns) and the router kept whole: each rank routes every row alike
     * and computes its slice of the same experts, summed after down as the
     * dense MLP is (layer.c) */
    if (config_has_experts(c)) shard->moe_intermediate_size = c->moe_intermediate_size / tp;
    *kv_head_lo = nkv % tp == 0 ? rank * kv_l : h0 / (nh / nkv);
    return 0;
}

int layer_weights_shard(layer_weights *w, const model_config *c, int rank, int tp, void ***owned, int *n_owned) {
    model_config s;
    int k0;
    if (model_shard_config(c, rank, tp, &s, &k0, "", NULL, 0)) return -1;
    if (tp == 1) return 0;
    const int hd = c->head_dim, nh_l = s.n_heads, h0 = rank * nh_l, kv_l = s.n_kv_heads;
    const int I_l = s.intermediate_size;
    w->wq = rows_of(&w->wq, h0 * hd, nh_l * hd);
    w->wk = rows_of(&w->wk, k0 * hd, kv_l * hd);
    w->wv = rows_of(&w->wv, k0 * hd, kv_l * hd);
    if (w->moe) {   /* a sparse layer: its experts instead of mlp.{gate,up,down}_proj */
        moe_weights *m = w->moe;
        const int Im = s.moe_intermediate_size;
        for (int e = 0; e < m->n_experts; e++) {
            m->gate[e] = rows_of(&m->gate[e], rank * Im, Im);
            m->up[e] = rows_of(&m->up[e], rank * Im, Im);
            kb_weight d = m->down[e];
            if (cols_of(owned, n_owned, &m->down[e], &d, rank * Im, Im)) return -1;
        }
        m->inter = Im;
    } else {
        w->w_gate = rows_of(&w->w_gate, rank * I_l, I_l);
        w->w_up = rows_of(&w->w_up, rank * I_l, I_l);
        kb_weight wd = w->w_down;
        if (cols_of(owned, n_owned, &w->w_down, &wd, rank * I_l, I_l)) return -1;
    }
    kb_weight wo = w->wo;
    if (cols_of(owned, n_owned, &w->wo, &wo, h0 * hd, nh_l * hd) || slice_vec(&w->bq, h0 * hd, nh_l * hd) ||
        slice_vec(&w->bk, k0 * hd, kv_l * hd) || slice_vec(&w->bv, k0 * hd, kv_l * hd))
        return -1;
    return 0;
}

kb_weight model_head_part(const kb_weight *head, int rank, int tp, int *lo, int *width) {
    const int V = head->rows, Vp = (V + tp - 1) / tp;
    int v0 = rank * Vp, vn = V - v0 < Vp ? V - v0 : Vp;
    if (vn < 0) vn = 0;
    *lo = v0 < V ? v0 : V;
    *width = Vp;
    return rows_of(head, *lo, vn);
}

int model_load_shard(model **out, const char *dir, int rank, int tp, char *err, size_t errlen) {
    *out = NULL;
    if (tp < 1 || rank < 0 || rank >= tp) return errf(err, errlen, "tensor parallel rank %d of %d", rank, tp);
    /* the shards slice and copy the mapping's bytes on the host; a device's
     * uploaded weights (an MoE model's experts among them) are not sliced */
    if (tp > 1 && strcmp(kb_device(), "cpu"))
        return errf(err, errlen, "%s: tensor parallelism (--tp %d) runs on the CPU only; the %s backend does not "
                    "shard a model (dense or mixture-of-experts)", dir, tp, kb_device());
    model *m;
    if (model_load(&m, dir, err, errlen)) return -1;
    if (tp == 1) { *out = m; return 0; }
    const model_config *c = &m->cfg;
    if (model_shard_config(c, rank, tp, &m->shard, &m->kv_head_lo, dir, err, errlen)) {
        model_free(m);
        return -1;
    }
    m->tp_rank = rank;
    m->tp_size = tp;
    for (int l = 0; l < c->n_layers; l++)
        if (layer_weights_shard(&m->layers[l], c, rank, tp, &m->owned, &m->n_owned)) {
            errf(err, errlen, "%s: out of memory slicing layer %d for rank %d of %d", dir, l, rank, tp);
            model_free(m);
            return -1;
        }
    m->lm_head_part = model_head_part(&m->lm_head, rank, tp, &m->vocab_lo, &m->vocab_part);
    *out = m;
    return 0;
}
