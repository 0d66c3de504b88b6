/* kv_cache.c — paged KV storage (see kv_cache.h).
 * Owns: one K and one V pool for all layers (kb_alloc'd), the free-page
 * stack, and per-sequence page lists. A sequence's length counts every row
 * appended, committed or not; kv_truncate drops the tail and returns the
 * pages that no longer hold a row.
 * Must not: compute anything, or leave partial state behind a failed call:
 * kv_append either takes every page it needs or changes nothing.
 *
 * Layout: layer l's K for page p, slot s, kv head h is at
 *   k[((l·n_pages + p)·page_size + s)·n_kv_heads·head_dim + h·head_dim],
 * so layer l's page array (what kb_attention_row reads) is one contiguous
 * block starting at k + l·n_pages·page_size·n_kv_heads·head_dim. */
#include "kv_cache.h"
#include "errmsg.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int active;
    int len;       /* rows appended (committed + pending) */
    int n_pages;   /* pages held: ceil(len / page_size) */
    int *pages;    /* [max_pages_per_seq] page ids, in position order */
} kv_seq;

struct kv_cache {
    kv_config cfg;
    size_t slot_floats;   /* n_kv_heads · head_dim */
    size_t layer_floats;  /* n_pages · page_size · slot_floats */
    float *k, *v;         /* [n_layers, n_pages, page_size, n_kv_heads, head_dim] */
    int *free_pages;      /* stack of free page ids */
    int n_free;
    int max_pages_per_seq;
    kv_seq *seqs;         /* [max_seqs] */
    int *page_lists;      /* backing store of every seq's pages */
};

int kv_cache_create(kv_cache **out, const kv_config *cfg, char *err, size_t errlen) {
    *out = NULL;
    if (cfg->n_layers <= 0 || cfg->n_kv_heads <= 0 || cfg->head_dim <= 0)
        return errf(err, errlen, "kv_cache: bad shape (n_layers %d, n_kv_heads %d, head_dim %d)",
                    cfg->n_layers, cfg->n_kv_heads, cfg->head_dim);
    if (cfg->page_size <= 0 || cfg->n_pages <= 0 || cfg->max_seqs <= 0 || cfg->max_seq_len <= 0)
        return errf(err, errlen,
                    "kv_cache: page_size %d, n_pages %d, max_seqs %d and max_seq_len %d must be > 0",
                    cfg->page_size, cfg->n_pages, cfg->max_seqs, cfg->max_seq_len);
    size_t slot = (size_t)cfg->n_kv_heads * (size_t)cfg->head_dim;
    size_t layer = slot * (size_t)cfg->page_size * (size_t)cfg->n_pages;
    if (layer / slot / (size_t)cfg->page_size != (size_t)cfg->n_pages ||
        layer > SIZE_MAX / sizeof(float) / (size_t)cfg->n_layers)
        return errf(err, errlen, "kv_cache: pool of %d pages x %d tokens is too large",
                    cfg->n_pages, cfg->page_size);

    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return errf(err, errlen, "kv_cache: out of memory");
    kv->cfg = *cfg;
    kv->slot_floats = slot;
    kv->layer_floats = layer;
    kv->max_pages_per_seq = (int)(((long long)cfg->max_seq_len + cfg->page_size - 1) / cfg->page_size);
    size_t bytes = layer * (size_t)cfg->n_layers * sizeof(float);
    kv->k = kb_alloc(bytes);
    kv->v = kb_alloc(bytes);
    kv->free_pages = malloc((size_t)cfg->n_pages * sizeof(int));
    kv->seqs = calloc((size_t)cfg->max_seqs, sizeof(kv_seq));
    kv->page_lists = malloc((size_t)cfg->max_seqs * (size_t)kv->max_pages_per_seq * sizeof(int));
    if (!kv->k || !kv->v || !kv->free_pages || !kv->seqs || !kv->page_lists) {
        kv_cache_free(kv);
        return errf(err, errlen, "kv_cache: out of memory allocating %zu bytes x 2 for %d pages",
                    bytes, cfg->n_pages);
    }
    /* Stack order: page 0 is handed out first. */
    for (int i = 0; i < cfg->n_pages; i++) kv->free_pages[i] = cfg->n_pages - 1 - i;
    kv->n_free = cfg->n_pages;
    for (int s = 0; s < cfg->max_seqs; s++)
        kv->seqs[s].pages = kv->page_lists + (size_t)s * kv->max_pages_per_seq;
    *out = kv;
    return 0;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    kb_free(kv->k);
    kb_free(kv->v);
    free(kv->free_pages);
    free(kv->seqs);
    free(kv->page_lists);
    free(kv);
}

static kv_seq *seq_get(const kv_cache *kv, int seq) {
    if (seq < 0 || seq >= kv->cfg.max_seqs || !kv->seqs[seq].active) return NULL;
    return &kv->seqs[seq];
}

int kv_seq_new(kv_cache *kv) {
    for (int s = 0; s < kv->cfg.max_seqs; s++) {
        if (!kv->seqs[s].active) {
            kv->seqs[s].active = 1;
            kv->seqs[s].len = 0;
            kv->seqs[s].n_pages = 0;
            return s;
        }
    }
    return -1;
}

int kv_seq_claim(kv_cache *kv, int seq) {
    if (seq < 0 || seq >= kv->cfg.max_seqs) return -1;
    kv_seq *s = &kv->seqs[seq];
    if (!s->active) {
        s->active = 1;
        s->len = 0;
        s->n_pages = 0;
    }
    return 0;
}

void kv_seq_free(kv_cache *kv, int seq) {
    kv_seq *s = seq_get(kv, seq);
    if (!s) return;
    kv_truncate(kv, seq, 0);
    s->active = 0;
}

/* -1 for a sequence id that is not live (a caller bug, never a length). */
int kv_len(const kv_cache *kv, int seq) {
    const kv_seq *s = seq_get(kv, seq);
    return s ? s->len : -1;
}

int kv_append(kv_cache *kv, int seq, int n_rows) {
    kv_seq *s = seq_get(kv, seq);
    if (!s || n_rows < 0) return -1;
    if (n_rows > kv->cfg.max_seq_len - s->len) return -1;
    int new_len = s->len + n_rows;
    int need = (new_len + kv->cfg.page_size - 1) / kv->cfg.page_size - s->n_pages;
    if (need > kv->n_free) return -1;
    for (int i = 0; i < need; i++) s->pages[s->n_pages++] = kv->free_pages[--kv->n_free];
    s->len = new_len;
    return 0;
}

void kv_truncate(kv_cache *kv, int seq, int n_keep) {
    kv_seq *s = seq_get(kv, seq);
    if (!s || n_keep < 0 || n_keep >= s->len) return;
    int keep_pages = (n_keep + kv->cfg.page_size - 1) / kv->cfg.page_size;
    /* Push back last-first so the next append gets the same pages again. */
    while (s->n_pages > keep_pages) kv->free_pages[kv->n_free++] = s->pages[--s->n_pages];
    s->len = n_keep;
}

int kv_pages_free(const kv_cache *kv) { return kv->n_free; }
int kv_pages_total(const kv_cache *kv) { return kv->cfg.n_pages; }
const kv_config *kv_get_config(const kv_cache *kv) { return &kv->cfg; }

static size_t slot_offset(const kv_cache *kv, int layer, int seq, int pos) {
    const kv_seq *s = &kv->seqs[seq];
    int page = s->pages[pos / kv->cfg.page_size];
    return (size_t)layer * kv->layer_floats +
           ((size_t)page * kv->cfg.page_size + (size_t)(pos % kv->cfg.page_size)) * kv->slot_floats;
}

/* pos < kv_len(seq) and a live seq are the caller's contract (the forward
 * pass checks them once per batch); this is the hot path, so no checks. */
float *kv_k_at(kv_cache *kv, int layer, int seq, int pos) { return kv->k + slot_offset(kv, layer, seq, pos); }
float *kv_v_at(kv_cache *kv, int layer, int seq, int pos) { return kv->v + slot_offset(kv, layer, seq, pos); }

kb_kv_view kv_view(const kv_cache *kv, int layer, int seq) {
    kb_kv_view v = {
        .k_pages = kv->k + (size_t)layer * kv->layer_floats,
        .v_pages = kv->v + (size_t)layer * kv->layer_floats,
        .pages = kv->seqs[seq].pages,
        .page_size = kv->cfg.page_size,
        .n_kv_heads = kv->cfg.n_kv_heads,
        .head_dim = kv->cfg.head_dim,
    };
    return v;
}

float *kv_pool_k(kv_cache *kv, int layer) { return kv->k + (size_t)layer * kv->layer_floats; }
float *kv_pool_v(kv_cache *kv, int layer) { return kv->v + (size_t)layer * kv->layer_floats; }

int kv_slot(const kv_cache *kv, int seq, int pos) {
    return kv->seqs[seq].pages[pos / kv->cfg.page_size] * kv->cfg.page_size + pos % kv->cfg.page_size;
}

const int *kv_pages(const kv_cache *kv, int seq) { return kv->seqs[seq].pages; }
int kv_max_pages(const kv_cache *kv) { return kv->max_pages_per_seq; }
