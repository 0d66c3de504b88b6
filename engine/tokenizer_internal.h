/* tokenizer_internal.h — the loaded tokenizer's layout, shared by
 * tokenizer.c (loading, validation, decoding) and tokenizer_encode.c
 * (encoding). Not a public header: everything outside the tokenizer uses
 * tokenizer.h. Everything here is read-only after tok_load. */
#ifndef SPECBED_TOKENIZER_INTERNAL_H
#define SPECBED_TOKENIZER_INTERNAL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct {
    const char *content;      /* as in the file (what decoding starts from) */
    const char *text;         /* as matched: content, NFC'd if normalized and the file says NFC */
    size_t len;               /* of text */
    int id;
    unsigned char special, normalized, lstrip, rstrip;
} tok_added;

enum { TOK_STAGE_SPLIT, TOK_STAGE_BYTELEVEL };
typedef struct {
    int kind;
    pcre2_code *re;           /* Split: its pattern; ByteLevel: GPT-2 pattern if use_regex, else NULL */
    int add_prefix_space;     /* ByteLevel only */
} tok_stage;

typedef struct { uint64_t key; int32_t rank, new_id; } tok_merge_slot;   /* key 0 = empty */

#define TOK_MAX_STAGES 8

struct tokenizer {
    char *path;
    int n_ids;                     /* highest id + 1 */
    char *pool;                    /* every string below points in here */
    /* per id [n_ids]: */
    const char **voc;              /* model.vocab key (byte-level form), NULL if none */
    int32_t *voc_len;
    const char **dec;              /* bytes HF's ByteLevel decoder gives for the id, NULL = hole */
    int32_t *dec_len;
    int32_t *added_of;             /* index into added[], -1 if not an added token */
    /* model.vocab key -> id, open addressing (-1 empty) */
    int32_t *vhash;
    uint32_t vmask;
    /* (left id, right id) -> (rank, merged id) */
    tok_merge_slot *mhash;
    uint64_t mmask;
    int byte_id[256];              /* id of the byte-level char of each byte, -1 if absent */
    int unk_id;                    /* -1 if none */
    int fuse_unk, ignore_merges, nfc;
    /* added tokens; order[] sorts them by (normalized, first byte, length desc);
     * bucket[normalized][byte] = [start, end) into order[] */
    tok_added *added;
    int n_added;
    int *order;
    int bucket[2][256][2];
    tok_stage stages[TOK_MAX_STAGES];
    int n_stages;
};

/* Merge lookup: 1 and (rank, new_id) if the pair merges. */
static inline uint64_t tok_mix64(uint64_t x) {
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
static inline int tok_merge_find(const struct tokenizer *t, int a, int b, int *rank, int *new_id) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    for (uint64_t h = tok_mix64(key) & t->mmask;; h = (h + 1) & t->mmask) {
        const tok_merge_slot *s = &t->mhash[h];
        if (s->key == 0) return 0;
        if (s->key == key) { *rank = s->rank; *new_id = s->new_id; return 1; }
    }
}

/* model.vocab lookup of a byte-level string; -1 if absent. */
int tok_vocab_find(const struct tokenizer *t, const char *s, size_t len);

#endif
