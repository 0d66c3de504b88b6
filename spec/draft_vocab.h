/* draft_vocab.h — an optional reduced draft vocabulary for a drafter's
 * final projection: the drafter scores only N of the target's V tokens (the
 * N most frequent of its training corpus), picks or samples among them, and
 * hands the verifier target ids with a full-vocabulary q that is zero
 * outside the set. Verification is unchanged, so output stays lossless;
 * what changes is the cost of the head (N·H instead of V·H per draft) and
 * how often the target's token is one the drafter can propose at all.
 *
 * The map, as EAGLE-3 stores it (SafeAILab/EAGLE eagle/model/cnets.py:
 * buffers d2t = int64 [draft_vocab_size] and t2d = bool [vocab_size]; a
 * draft id i means target id i + d2t[i]; the head is
 * lm_head = Linear(H, draft_vocab_size) and drafts are topk_index +
 * d2t[topk_index]. vLLM's llama_eagle3.py loads d2t as
 * draft_id_to_target_id and scatters the draft logits to
 * arange(N) + d2t in a full row of -inf; the trainers build it as
 * d2t = sorted(top-N ids) − arange(N), t2d[top-N ids] = True). FR-Spec
 * (thunlp/FR-Spec, ACL 2025) is the same restriction without retraining:
 * the frequency-ranked rows of the existing lm_head.
 *
 * File: DIR/draft_vocab.safetensors (DIR: the DSpark checkpoint, or for MTP
 * the target's own directory), holding
 *   d2t  I64  [N]  offsets, target id = i + d2t[i]   (required)
 *   t2d  BOOL [V]  1 exactly at the N target ids       (optional; checked)
 * It is a file of its own, not a tensor of model.safetensors as in an
 * EAGLE-3 checkpoint, only because specbed's checkpoint reader
 * (engine/safetensors.c) accepts float tensors only; the tensors, dtypes
 * and meaning are EAGLE-3's, so an EAGLE-3 d2t/t2d pair saved into this
 * file reads the same. It is not listed in model.safetensors.index.json.
 *
 * Refused, naming the file: a wrong dtype or shape, N = 0 or N > V, a
 * target id outside [0, V), two draft ids with one target id, a t2d that
 * disagrees with d2t, a truncated or malformed header.
 *
 * Ownership: the map owns d2t and every head it gathers (the host copy,
 * and on cuda the device copy); the drafter frees the map after it stops
 * using those heads. */
#ifndef SPECBED_DRAFT_VOCAB_H
#define SPECBED_DRAFT_VOCAB_H
#include <stddef.h>
#include "backend.h"

#define DRAFT_VOCAB_FILE "draft_vocab.safetensors"

typedef struct {
    int n;              /* N draft ids; 0 = no map (the drafter scores all V) */
    int vocab;          /* V, the target's vocabulary */
    int *d2t;           /* [N] target id of draft id i (absolute: i + the file's offset) */
    char path[4200];    /* the file it was read from, for messages */
    /* heads gathered to the N rows, owned here */
    kb_weight *gathered;        /* [n_gathered] */
    const void **gathered_src;  /* [n_gathered] the data each came from (one copy per source) */
    void **gathered_host;       /* [n_gathered] host rows (what gathered[i] points at on cpu) */
    int n_gathered;
} draft_vocab;

/* Reads dir/draft_vocab.safetensors for a target of `vocab` ids. Absent
 * file: 0 with dv->n = 0. Malformed: -1 with a message naming the file. */
int  draft_vocab_load(draft_vocab *dv, const char *dir, int vocab, char *err, size_t errlen);
void draft_vocab_free(draft_vocab *dv);

/* *out = the rows of full ([V, cols], V = dv->vocab) at the map's target
 * ids, in draft-id order ([N, cols], same dtype), copied once into memory
 * the map owns and, on the cuda device, uploaded. A second call for the
 * same source returns the same copy. `what` names the weight in errors. */
int  draft_vocab_gather(draft_vocab *dv, kb_weight *out, const kb_weight *full, const char *what, char *err,
                        size_t errlen);

/* Scatters a row of draft logits[N] into row[V], -INFINITY outside the map
 * (vLLM's compute_logits convention; for test traces and messages). */
void draft_vocab_scatter(const draft_vocab *dv, float *row, const float *logits);

#endif
