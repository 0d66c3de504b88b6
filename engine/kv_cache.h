/* kv_cache.h — paged KV storage for all sequences of one model.
 * The cache owns every page; a sequence owns only its page list.
 * kv_truncate() is how rejected draft rows disappear: no copy, no replay.
 * Pages are fixed-size blocks of page_size token slots holding K and V for
 * every layer: layer l's K for page p is at k[l][p][slot][kv_head][hd]. */
#ifndef SPECBED_KV_CACHE_H
#define SPECBED_KV_CACHE_H
#include <stddef.h>
#include "backend.h"

typedef struct {
    int n_layers, n_kv_heads, head_dim;
    int page_size;     /* tokens per page (default 16) */
    int n_pages;       /* total pages in the pool */
    int max_seqs;      /* sequence slots */
    int max_seq_len;   /* context limit per sequence */
} kv_config;

typedef struct kv_cache kv_cache;

int  kv_cache_create(kv_cache **out, const kv_config *cfg, char *err, size_t errlen);
void kv_cache_free(kv_cache *kv);

int  kv_seq_new(kv_cache *kv);                      /* seq id >= 0, or -1 if no slot */
void kv_seq_free(kv_cache *kv, int seq);            /* returns all its pages */
/* Makes slot `seq` live and empty if it is not: how a tensor-parallel rank
 * mirrors rank 0's sequence ids. 0 ok (or already live), -1 bad id. */
int  kv_seq_claim(kv_cache *kv, int seq);
int  kv_len(const kv_cache *kv, int seq);           /* committed + appended rows */
int  kv_append(kv_cache *kv, int seq, int n_rows);  /* 0 ok, -1 out of pages or over max_seq_len */
void kv_truncate(kv_cache *kv, int seq, int n_keep);/* frees pages past n_keep */
int  kv_pages_free(const kv_cache *kv);
int  kv_pages_total(const kv_cache *kv);
const kv_config *kv_get_config(const kv_cache *kv);

/* Slot of (layer, seq, pos), pos < kv_len: [n_kv_heads, head_dim] f32. */
float *kv_k_at(kv_cache *kv, int layer, int seq, int pos);
float *kv_v_at(kv_cache *kv, int layer, int seq, int pos);
/* View for kb_attention_row over seq's history in layer. */
kb_kv_view kv_view(const kv_cache *kv, int layer, int seq);
/* A step's indices into the pools (a forward that keeps its indices on the
 * device, forward.c): layer's K and V pools, where (seq, pos) is slot
 * kv_slot(kv, seq, pos) of every layer's pools, [n_kv_heads·head_dim]
 * floats each; seq's page list (kv_pages, as many as its length needs). */
float *kv_pool_k(kv_cache *kv, int layer);
float *kv_pool_v(kv_cache *kv, int layer);
int    kv_slot(const kv_cache *kv, int seq, int pos);
const int *kv_pages(const kv_cache *kv, int seq);
int    kv_max_pages(const kv_cache *kv);   /* a page list's longest */

#endif
