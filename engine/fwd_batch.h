/* fwd_batch.h — one ragged batch and what to return from it: what fwd_run
 * (forward.h) computes and what tensor parallelism's step link (tp_link.h)
 * sends to the other ranks. Types only, below both, so that neither file
 * needs the other's header for them.
 * A batch is a list of spans; each span is n consecutive tokens of one
 * sequence starting at that sequence's current kv_len (a prefill chunk, one
 * decode row, or [last token, drafts...] verify rows: all the same thing). */
#ifndef SPECBED_FWD_BATCH_H
#define SPECBED_FWD_BATCH_H

/* Tap id of the hidden state after the final norm (the lm_head's input,
 * what MTP and EAGLE-style drafters condition on). */
#define FWD_TAP_FINAL_NORM (-1)

typedef struct {
    int seq;           /* kv sequence id */
    int n;             /* rows in this span */
    const int *tokens; /* [n] */
} fwd_span;

typedef struct {
    const fwd_span *spans;
    int n_spans;
} fwd_batch;

/* What to return. Row indices count rows across the whole batch in span order. */
typedef struct {
    const int *logit_rows; /* rows whose logits are wanted (ascending), NULL = none */
    int n_logit_rows;
    float *logits;         /* out: [n_logit_rows, vocab] */
    const int *tap_layers; /* decoder layer ids whose outputs are wanted (0-based; layer L = output of
                              layer L), or FWD_TAP_FINAL_NORM for the hidden state after the final norm */
    int n_taps;
    float *taps;           /* out: [total_rows, n_taps, hidden] */
    float *final_hidden;   /* out, optional: [total_rows, hidden] after the final norm */
    const unsigned char *corrupt_rows; /* fault injection only: [total_rows], non-zero rows get
                                          their hidden state overwritten after layer 0; NULL = none */
    int attn_window;       /* fault injection only: keys more than this many positions back are not
                              attended (layer_rows.window); 0 = none */
} fwd_out;

#endif
