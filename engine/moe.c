/* moe.c — a Qwen3-MoE sparse MLP: binding its weights (both layouts) and
 * its forward over rows (see moe.h).
 *
 * Owns: the expert tables (kb_weights pointing into the checkpoint
 * mapping, or on a device at their uploads: backend.h kb_weight_upload,
 * kb_weight_upload_expert), the check that a checkpoint's MLP tensors are
 * all ones this layout reads, and the routing scratch.
 * Must not: call model.c (model.c calls this file), or loop over
 * activations on the host: the router's logits are the one thing the host
 * reads (after a kb_wait: a device forward waits here once per sparse
 * layer), for the routing's float32 softmax and top-k, whose bits the CPU
 * defines (exp in double); the gather, the experts' matmuls and the
 * weighted sum are backend calls (kernels/cpu_moe.c, cuda_moe.cu), the
 * same on every device.
 *
 * Batch invariance: each expert's matmuls run over the rows routed to it,
 * gathered into a contiguous block (kb_matmul_grouped gives every row the
 * bits of one kb_matmul of its expert, whatever the number of rows); the
 * routing is per row; and a row's output is summed from zero in ascending
 * expert index (kb_combine_rows). Which other rows share an expert changes
 * only where a row sits in the gathered block. */
#include "moe.h"
#include "errmsg.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void moe_weights_free(moe_weights *w) {
    if (!w) return;
    /* device copies (on a device backend; nothing on the cpu) */
    kb_weight_release(&w->router);
    for (int e = 0; e < w->n_experts; e++) {
        if (w->gate) kb_weight_release(&w->gate[e]);
        if (w->up) kb_weight_release(&w->up[e]);
        if (w->down) kb_weight_release(&w->down[e]);
    }
    free(w->gate);
    free(w->up);
    free(w->down);
    free(w);
}

static int missing(char *err, size_t errlen, const st_model *st, const char *name) {
    const char *src = st_source(st);
    return errf(err, errlen, "%s: tensor '%s' is missing from the checkpoint", src ? src : "checkpoint", name);
}

/* Finds name with shape want[0..ndim), data aligned for its dtype. */
static int find_shaped(const st_tensor **out, const st_model *st, const char *name, const int64_t *want, int ndim,
                       char *err, size_t errlen) {
    const st_tensor *t = st_find(st, name);
    if (!t) return missing(err, errlen, st, name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == want[i];
    if (!same) {
        char a[160], b[160];
        size_t ka = 0, kb = 0;
        a[0] = b[0] = 0;
        for (int i = 0; i < t->ndim && ka < sizeof a; i++)
            ka += (size_t)snprintf(a + ka, sizeof a - ka, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        for (int i = 0; i < ndim && kb < sizeof b; i++)
            kb += (size_t)snprintf(b + kb, sizeof b - kb, "%s%lld", i ? ", " : "", (long long)want[i]);
        return errf(err, errlen, "%s: tensor '%s' has shape [%s], config.json says [%s]", t->file, name, a, b);
    }
    if ((uintptr_t)t->data % kb_dtype_size(t->dt) != 0)
        return errf(err, errlen, "%s: tensor '%s' data is not %zu-byte aligned in the file", t->file, name,
                    kb_dtype_size(t->dt));
    *out = t;
    return 0;
}

/* On a device backend: w into device memory (the router; an expert where
 * kb_set_experts_on_host says), owned by st until released. The message
 * names the tensor. */
static int upload(kb_weight *w, int expert, const st_model *st, const char *name, char *err, size_t errlen) {
    if ((expert ? kb_weight_upload_expert : kb_weight_upload)(w, st, err, errlen) == 0) return 0;
    size_t n = strlen(err ? err : "");
    if (err && n + 1 < errlen) snprintf(err + n, errlen - n, " (tensor '%s')", name);
    return -1;
}

/* rows × cols matrix starting at element `first` of tensor t. */
static kb_weight slice(const st_tensor *t, size_t first, int rows, int cols) {
    kb_weight w = {0};
    w.dt = t->dt;
    w.data = (const char *)t->data + first * kb_dtype_size(t->dt);
    w.rows = rows;
    w.cols = cols;
    return w;
}

int moe_weights_bind(moe_weights **out, const st_model *st, const char *prefix, const model_config *c, char *err,
                     size_t errlen) {
    *out = NULL;
    const int E = c->n_experts, H = c->hidden_size, I = c->moe_intermediate_size;
    moe_weights *w = calloc(1, sizeof *w);
    if (!w) return errf(err, errlen, "%s: out of memory", prefix);
    w->n_experts = E;
    w->top_k = c->n_experts_per_tok;
    w->inter = I;
    w->hidden = H;
    w->gate = calloc((size_t)E, sizeof *w->gate);
    w->up = calloc((size_t)E, sizeof *w->up);
    w->down = calloc((size_t)E, sizeof *w->down);
    if (!w->gate || !w->up || !w->down) {
        moe_weights_free(w);
        return errf(err, errlen, "%s: out of memory for %d experts", prefix, E);
    }
    char name[512], fused_gu[512], fused_d[512], one[512];
    const st_tensor *t;
    snprintf(name, sizeof name, "%smlp.gate.weight", prefix);
    const int64_t rshape[2] = {E, H};
    if (find_shaped(&t, st, name, rshape, 2, err, errlen)) goto fail;
    w->router = slice(t, 0, E, H);

    snprintf(fused_gu, sizeof fused_gu, "%smlp.experts.gate_up_proj", prefix);
    snprintf(fused_d, sizeof fused_d, "%smlp.experts.down_proj", prefix);
    snprintf(one, sizeof one, "%smlp.experts.0.gate_proj.weight", prefix);
    int has_fused = st_find(st, fused_gu) || st_find(st, fused_d), has_split = st_find(st, one) != NULL;
    if (has_fused && has_split) {
        errf(err, errlen, "%s: the checkpoint holds both '%s' (fused experts) and '%s' (per-expert); one layout only",
             st_source(st) ? st_source(st) : "checkpoint", has_fused && st_find(st, fused_gu) ? fused_gu : fused_d, one);
        goto fail;
    }
    if (has_fused) {
        const int64_t gu[3] = {E, 2 * (int64_t)I, H}, dn[3] = {E, H, I};
        const st_tensor *tg, *td;
        if (find_shaped(&tg, st, fused_gu, gu, 3, err, errlen) || find_shaped(&td, st, fused_d, dn, 3, err, errlen))
            goto fail;
        for (int e = 0; e < E; e++) {
            size_t base = (size_t)e * 2 * (size_t)I * (size_t)H;
            w->gate[e] = slice(tg, base, I, H);                       /* rows [0, I) of gate_up_proj[e] */
            w->up[e] = slice(tg, base + (size_t)I * (size_t)H, I, H);   /* rows [I, 2I) */
            w->down[e] = slice(td, (size_t)e * (size_t)H * (size_t)I, H, I);
        }
        w->fused = 1;
    } else {
        const int64_t ih[2] = {I, H}, hi[2] = {H, I};
        static const char *const proj[3] = {"gate", "up", "down"};
        for (int e = 0; e < E; e++) {
            kb_weight *dst[3] = {&w->gate[e], &w->up[e], &w->down[e]};
            for (int p = 0; p < 3; p++) {
                snprintf(name, sizeof name, "%smlp.experts.%d.%s_proj.weight", prefix, e, proj[p]);
                if (find_shaped(&t, st, name, p == 2 ? hi : ih, 2, err, errlen)) goto fail;
                *dst[p] = p == 2 ? slice(t, 0, H, I) : slice(t, 0, I, H);
            }
        }
    }
    snprintf(name, sizeof name, "%smlp.gate.weight", prefix);
    if (upload(&w->router, 0, st, name, err, errlen)) goto fail;
    for (int e = 0; e < E; e++) {
        kb_weight *dst[3] = {&w->gate[e], &w->up[e], &w->down[e]};
        static const char *const proj[3] = {"gate", "up", "down"};
        for (int p = 0; p < 3; p++) {
            if (w->fused) snprintf(name, sizeof name, "%s", p == 2 ? fused_d : fused_gu);
            else snprintf(name, sizeof name, "%smlp.experts.%d.%s_proj.weight", prefix, e, proj[p]);
            if (upload(dst[p], 1, st, name, err, errlen)) goto fail;
        }
    }
    *out = w;
    return 0;
fail:
    moe_weights_free(w);
    return -1;
}

/* A decimal index without sign or leading zeros at s; returns the
 * characters read (0 if none) and the value in *v. */
static int read_index(const char *s, long *v) {
    int k = 0;
    *v = 0;
    if (s[0] == '0' && s[1] >= '0' && s[1] <= '9') return 0;
    while (s[k] >= '0' && s[k] <= '9' && k < 9) *v = *v * 10 + (s[k++] - '0');
    return k;
}

/* 1 when `rest` (the name after "model.layers.L.mlp.") is a tensor the
 * layer reads: sparse in layout fused (1), per expert (0) or either (-1). */
static int name_ok(const char *rest, int sparse, int n_experts) {
    if (!sparse) return !strcmp(rest, "gate_proj.weight") || !strcmp(rest, "up_proj.weight") ||
                        !strcmp(rest, "down_proj.weight");
    if (!strcmp(rest, "gate.weight") || !strcmp(rest, "experts.gate_up_proj") || !strcmp(rest, "experts.down_proj"))
        return 1;
    if (strncmp(rest, "experts.", 8)) return 0;
    long e;
    int k = read_index(rest + 8, &e);
    if (k == 0 || e >= n_experts || rest[8 + k] != '.') return 0;
    const char *p = rest + 8 + k + 1;
    return !strcmp(p, "gate_proj.weight") || !strcmp(p, "up_proj.weight") || !strcmp(p, "down_proj.weight");
}

int moe_check_names(const st_model *st, const model_config *c, char *err, size_t errlen) {
    for (int i = 0; i < st_count(st); i++) {
        const st_tensor *t = st_at(st, i);
        const char *n = t->name;
        if (strncmp(n, "model.layers.", 13)) continue;
        long l;
        int k = read_index(n + 13, &l);
        if (k == 0 || n[13 + k] != '.' || l >= c->n_layers) continue;   /* beyond the decoder: not ours to judge */
        const char *rest = n + 13 + k + 1;
        if (strncmp(rest, "mlp.", 4)) continue;
        int sparse = config_layer_is_sparse(c, (int)l);
        if (!name_ok(rest + 4, sparse, c->n_experts))
            return errf(err, errlen, "%s: tensor '%s' is not part of a Qwen3-MoE %s layer (layer %ld is %s: %s)",
                        t->file, n, sparse ? "sparse" : "dense", l, sparse ? "sparse" : "dense",
                        sparse ? "mlp.gate.weight and mlp.experts.E.{gate,up,down}_proj.weight (E < num_experts), "
                                 "or mlp.experts.gate_up_proj and mlp.experts.down_proj"
                               : "mlp.{gate,up,down}_proj.weight");
    }
    return 0;
}

struct moe_scratch {
    int max_rows, E, K, H, I, norm;
    float *logits;   /* [R, E] router logits (kb_alloc'd: managed memory on cuda, read after a kb_wait) */
    float *prob;     /* [E]    one row's softmax */
    unsigned char *taken;   /* [E] */
    int *sel;        /* [R, K] chosen experts, by rank */
    float *wt;       /* [R, K] their weights */
    int *start;      /* [E + 1] first slot of each expert in order[] */
    int *fill;       /* [E] */
    int *order;      /* [R·K] rows grouped by expert, ascending row within one */
    float *ordw;     /* [R·K] the matching weights */
    int *gstart;     /* [E + 1] the same starts, the active experts only */
    const kb_weight **gw;   /* [2E] their gate matrices, then their up ones */
    const kb_weight **dw;   /* [E]  their down matrices */
    int *rslot;      /* [R, K] each row's slots in ascending expert order */
    float *rw;       /* [R, K] the matching weights */
    int *rfill;      /* [R] */
    float *xg;       /* [R·K, H] the rows, gathered by expert */
    float *hg, *hu;  /* [R·K, I] */
    float *yo;       /* [R·K, H] the experts' outputs */
    moe_route_count count;   /* since the last moe_route_take */
};

void moe_scratch_free(moe_scratch *s) {
    if (!s) return;
    kb_free(s->logits);
    kb_free(s->xg);
    kb_free(s->hg);
    kb_free(s->hu);
    kb_free(s->yo);
    free(s->prob);
    free(s->taken);
    free(s->sel);
    free(s->wt);
    free(s->start);
    free(s->fill);
    free(s->order);
    free(s->ordw);
    free(s->gstart);
    free(s->gw);
    free(s->dw);
    free(s->rslot);
    free(s->rw);
    free(s->rfill);
    free(s);
}

int moe_scratch_create(moe_scratch **out, const model_config *c, int max_rows, char *err, size_t errlen) {
    *out = NULL;
    moe_scratch *s = calloc(1, sizeof *s);
    if (!s) return errf(err, errlen, "moe scratch: out of memory");
    s->max_rows = max_rows;
    s->E = c->n_experts;
    s->K = c->n_experts_per_tok;
    s->H = c->hidden_size;
    s->I = c->moe_intermediate_size;
    s->norm = c->norm_topk_prob;
    size_t R = (size_t)max_rows, E = (size_t)s->E, K = (size_t)s->K, H = (size_t)s->H, I = (size_t)s->I;
    s->logits = kb_alloc(R * E * sizeof(float));
    s->xg = kb_alloc(R * K * H * sizeof(float));
    s->hg = kb_alloc(R * K * I * sizeof(float));
    s->hu = kb_alloc(R * K * I * sizeof(float));
    s->yo = kb_alloc(R * K * H * sizeof(float));
    s->prob = malloc(E * sizeof(float));
    s->taken = malloc(E);
    s->sel = malloc(R * K * sizeof(int));
    s->wt = malloc(R * K * sizeof(float));
    s->start = malloc((E + 1) * sizeof(int));
    s->fill = malloc(E * sizeof(int));
    s->order = malloc(R * K * sizeof(int));
    s->ordw = malloc(R * K * sizeof(float));
    s->gstart = malloc((E + 1) * sizeof(int));
    s->gw = malloc(2 * E * sizeof *s->gw);
    s->dw = malloc(E * sizeof *s->dw);
    s->rslot = malloc(R * K * sizeof(int));
    s->rw = malloc(R * K * sizeof(float));
    s->rfill = malloc(R * sizeof(int));
    if (!s->logits || !s->xg || !s->hg || !s->hu || !s->yo || !s->prob || !s->taken || !s->sel || !s->wt ||
        !s->start || !s->fill || !s->order || !s->ordw || !s->gstart || !s->gw || !s->dw || !s->rslot || !s->rw ||
        !s->rfill) {
        moe_scratch_free(s);
        return errf(err, errlen, "moe scratch: out of memory for %d rows", max_rows);
    }
    *out = s;
    return 0;
}

/* One row's routing: softmax of logits[E] in float32 (the exponentials and
 * their sum in double, each probability rounded once), the K most probable
 * experts (a tie goes to the lower index: the scan is ascending and only a
 * strictly larger probability displaces), renormalised when asked. */
static void route(moe_scratch *s, const float *logits, int *sel, float *wt) {
    const int E = s->E, K = s->K;
    float mx = logits[0];
    for (int e = 1; e < E; e++) if (logits[e] > mx) mx = logits[e];
    double sum = 0;
    for (int e = 0; e < E; e++) sum += exp((double)logits[e] - (double)mx);
    for (int e = 0; e < E; e++) s->prob[e] = (float)(exp((double)logits[e] - (double)mx) / sum);
    memset(s->taken, 0, (size_t)E);
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!s->taken[e] && (best < 0 || s->prob[e] > s->prob[best])) best = e;
        s->taken[best] = 1;
        sel[k] = best;
        wt[k] = s->prob[best];
    }
    if (s->norm) {
        float tot = 0;
        for (int k = 0; k < K; k++) tot += wt[k];
        for (int k = 0; k < K; k++) wt[k] /= tot;
    }
}

void moe_forward(moe_scratch *s, const moe_weights *w, const float *x, int n, float *y) {
    const int E = s->E, K = s->K, H = s->H, I = s->I, nk = n * K;
    if (n <= 0) return;
    kb_matmul(s->logits, x, &w->router, n);
    kb_wait();   /* the routing reads the logits on the host (on the cpu: nothing to wait for) */
    for (int r = 0; r < n; r++) route(s, s->logits + (size_t)r * E, s->sel + (size_t)r * K, s->wt + (size_t)r * K);

    /* rows grouped by expert (a counting sort: ascending rows within each) */
    memset(s->start, 0, (size_t)(E + 1) * sizeof(int));
    for (int i = 0; i < nk; i++) s->start[s->sel[i] + 1]++;
    for (int e = 0; e < E; e++) {
        s->start[e + 1] += s->start[e];
        s->fill[e] = s->start[e];
    }
    for (int r = 0; r < n; r++)
        for (int k = 0; k < K; k++) {
            int e = s->sel[(size_t)r * K + k], slot = s->fill[e]++;
            s->order[slot] = r;
            s->ordw[slot] = s->wt[(size_t)r * K + k];
        }
    /* the active experts (ascending), and each row's slots in ascending
     * expert order: the order its contributions are summed in */
    int ng = 0;
    for (int e = 0; e < E; e++)
        if (s->start[e + 1] > s->start[e]) ng++;
    memset(s->rfill, 0, (size_t)n * sizeof(int));
    for (int e = 0, g = 0; e < E; e++) {
        const int b = s->start[e], m = s->start[e + 1] - b;
        if (m == 0) continue;
        s->gstart[g] = b;
        s->gw[g] = &w->gate[e];
        s->gw[ng + g] = &w->up[e];
        s->dw[g] = &w->down[e];
        g++;
        for (int i = b; i < b + m; i++) {
            const int r = s->order[i], k = s->rfill[r]++;
            s->rslot[(size_t)r * K + k] = i;
            s->rw[(size_t)r * K + k] = s->ordw[i];
        }
    }
    s->gstart[ng] = nk;

    s->count.calls++;
    s->count.rows += n;
    s->count.distinct += ng;   /* the experts whose weights this step reads */
    kb_gather_rows(s->xg, x, s->order, nk, H);
    float *gu[2] = {s->hg, s->hu};
    kb_matmul_grouped(2, gu, s->gw, s->xg, s->gstart, ng);
    kb_swiglu(s->hg, s->hg, s->hu, nk, I);
    kb_matmul_grouped(1, &s->yo, s->dw, s->hg, s->gstart, ng);
    kb_combine_rows(y, s->yo, s->rslot, s->rw, n, K, H);
}

size_t moe_expert_bytes(const moe_weights *w) {
    const kb_weight *x[3] = {&w->gate[0], &w->up[0], &w->down[0]};
    size_t b = 0;
    for (int i = 0; i < 3; i++) b += (size_t)x[i]->rows * x[i]->cols * kb_dtype_size(x[i]->dt);
    return b;
}

void moe_route_take(moe_scratch *s, moe_route_count *out) {
    *out = s->count;
    memset(&s->count, 0, sizeof s->count);
}
