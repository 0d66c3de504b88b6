/* vocab_par.h — the logits of a vocabulary-parallel head (Megatron-LM's
 * split of lm_head by rows; model.h model_head_part): each rank multiplies
 * its rows of the head, the parts are all-gathered in rank order (padded
 * to the shard width, kernels/comm.h) and laid side by side. The target's
 * lm_head (forward.c) and the drafters' heads (draft_stack.c) use it.
 * Owns nothing: the caller's buffers. A failed collective ends the job
 * (kb_comm_abort), as layer.c's all-reduce does, so the call cannot fail. */
#ifndef SPECBED_VOCAB_PAR_H
#define SPECBED_VOCAB_PAR_H
#include "backend.h"
#include "comm.h"

/* out[n, N] ← x[n, H] · headᵀ, where part holds this rank's rows of the
 * [N, H] head and width = ceil(N / size) (model_head_part). Scratch:
 * lpart[n · width], lall[size · n · width]. Every rank gets out. */
void vp_logits(kb_comm *c, const kb_weight *part, int N, int width, const float *x, int n, float *lpart,
               float *lall, float *out);

/* The logits of rows logit_rows[0..n) of normed[*, H]: gathered into
 * xl[n, H] with device copies (one per run of consecutive rows), then out[n, N] ← xl · headᵀ: vp_logits with
 * head = this rank's part when c is set (several ranks), one kb_matmul with
 * the full head otherwise. Inside an async region (backend.h) it waits
 * before the collective, which reads xl on the host. */
void vp_head_rows(kb_comm *c, const kb_weight *head, int N, int width, const float *normed, const int *logit_rows,
                  int n, int H, float *xl, float *lpart, float *lall, float *out);

#endif
