/* drafter_model.h — a smaller model with the same tokenizer, run
 * autoregressively with its own paged KV cache; rejected rows are dropped
 * from that cache by truncation, exactly as in the target. */
#ifndef SPECBED_DRAFTER_MODEL_H
#define SPECBED_DRAFTER_MODEL_H
#include "drafter.h"
#include "tokenizer.h"

typedef struct {
    const char *model_dir;
    int max_seqs;        /* sequence slots (default 16) */
    int max_seq_len;     /* context per slot (default: the draft model's limit, ≤ 2048) */
} draft_model_opts;

/* target_tok: the target's tokenizer; the draft model's tokenizer.json must
 * hold the same tokens under the same ids, else an error says which differs. */
int drafter_model_create(drafter **out, const draft_model_opts *o, const tokenizer *target_tok,
                         int target_vocab, char *err, size_t errlen);

/* dir/tokenizer.json must hold the same tokens under the same ids as target
 * (else an error names the first id that differs). required = 0: a
 * directory without tokenizer.json passes (DSpark checkpoints may ship none). */
int drafter_check_tokenizer(const char *dir, const tokenizer *target, int required, char *err, size_t errlen);

#endif
