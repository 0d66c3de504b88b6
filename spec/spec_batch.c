/* spec_batch.c — continuous-batching speculative steps (see spec_batch.h).
 * Owns the step structure and per-request bookkeeping; drafting is the
 * drafter's, arithmetic the forward's, acceptance verify.c's, the choice of
 * how many drafts to verify the verify policy's (the hook). */
#include "spec_batch.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "verify.h"

typedef struct {
    int live;             /* admitted and not finished */
    int kv_seq;
    int *tokens;          /* prompt + generated [cap] */
    int n_tokens, n_prompt, fed, cap, n_gen;
    int depth;            /* resolved: 0 = no drafts */
    int begun;            /* drafter slot open */
    spec_req_params p;
    rng_state rng;
    float *prompt_taps;   /* [n_prompt, n_taps, H] while prefilling, if the drafter wants taps */
} req;

struct spec_batch {
    gen_engine *e;
    drafter *d;
    int default_depth, n_slots, V, H, n_taps, budget;
    int eos[3];                 /* config eos, <|endoftext|>, <|im_end|> (-1 if absent), looked up once */
    spec_callbacks cb;
    spec_verify_hook verify;
    req *r;                     /* [n_slots] */
    /* per-step scratch, sized for budget rows / n_slots requests */
    fwd_span *spans;
    int *span_slot, *span_row0, *span_verify;
    int *logit_rows, *logit_of_row, *rowtok, *committed;
    int *k_proposed;            /* [n_slots] drafts proposed before scheduling */
    unsigned char *gated;       /* [n_slots] by slot: the policy's gate kept it from drafting this step */
    float *logits, *probs, *scratch, *taps, *qbuf;
    spec_proposal *props;
    spec_accept *accs;
    spec_batch_stats st;
    spec_counters ctr;          /* the spec metrics (spec_metrics.h): written here only */
    int fault_on;
    fault_state fault;
    int *lrow_tok, *lrow_pos;   /* [budget] input token and position of each logits row (faults) */
    int *vk;                    /* [n_slots] drafts verified per verify span (faults) */
    unsigned char *corrupt;     /* [budget] rows to corrupt this step */
};

static int is_eos(const spec_batch *b, int id) {
    return id == b->eos[0] || id == b->eos[1] || id == b->eos[2];
}

static void release_slot(spec_batch *b, int s) {
    req *q = &b->r[s];
    if (!q->live) return;
    kv_seq_free(b->e->kv, q->kv_seq);
    if (b->d && q->begun) b->d->ops->release(b->d, s);
    free(q->tokens);
    free(q->prompt_taps);
    memset(q, 0, sizeof *q);
}

int spec_batch_create(spec_batch **out, gen_engine *e, drafter *d, int default_depth,
                      const spec_callbacks *cb, char *err, size_t errlen) {
    *out = NULL;
    if (d && (default_depth < 0 || default_depth > SPEC_MAX_DEPTH))
        return errf(err, errlen, "depth %d outside 0..%d", default_depth, SPEC_MAX_DEPTH);
    spec_batch *b = calloc(1, sizeof *b);
    if (!b) return errf(err, errlen, "out of memory");
    b->e = e;
    b->d = d;
    b->default_depth = d ? default_depth : 0;
    b->n_slots = e->opts.max_seqs;
    b->V = e->m->cfg.vocab_size;
    b->H = e->m->cfg.hidden_size;
    b->n_taps = d ? d->n_taps : 0;
    b->budget = e->opts.max_batch_rows;
    if (cb) b->cb = *cb;
    b->eos[0] = e->m->cfg.eos_token_id;
    b->eos[1] = tok_id(e->tok, "<|endoftext|>");
    b->eos[2] = tok_id(e->tok, "<|im_end|>");
    size_t R = (size_t)b->budget, S = (size_t)b->n_slots, V = (size_t)b->V;
    b->r = calloc(S, sizeof *b->r);
    b->spans = calloc(S, sizeof *b->spans);
    b->span_slot = calloc(S, sizeof(int));
    b->span_row0 = calloc(S, sizeof(int));
    b->span_verify = calloc(S, sizeof(int));
    b->logit_rows = calloc(R, sizeof(int));
    b->logit_of_row = calloc(R, sizeof(int));
    b->rowtok = calloc(R, sizeof(int));
    b->committed = calloc(S * (SPEC_MAX_DEPTH + 1), sizeof(int));
    b->logits = malloc(sizeof(float) * R * V);
    b->probs = malloc(sizeof(float) * (SPEC_MAX_DEPTH + 1) * V);
    b->scratch = malloc(sizeof(float) * V);
    b->taps = b->n_taps ? malloc(sizeof(float) * R * (size_t)b->n_taps * (size_t)b->H) : NULL;
    b->qbuf = d ? malloc(sizeof(float) * S * SPEC_MAX_DEPTH * V) : NULL;
    b->props = calloc(S, sizeof *b->props);
    b->accs = calloc(S, sizeof *b->accs);
    b->corrupt = calloc(R, 1);
    b->k_proposed = calloc(S, sizeof(int));
    b->gated = calloc(S, 1);
    b->lrow_tok = calloc(R, sizeof(int));
    b->lrow_pos = calloc(R, sizeof(int));
    b->vk = calloc(S, sizeof(int));
    if (!b->corrupt || !b->k_proposed || !b->gated || !b->lrow_tok || !b->lrow_pos || !b->vk || !b->r || !b->spans || !b->span_slot || !b->span_row0 || !b->span_verify || !b->logit_rows ||
        !b->logit_of_row || !b->rowtok || !b->committed || !b->logits || !b->probs || !b->scratch ||
        (b->n_taps && !b->taps) || (d && !b->qbuf) || !b->props || !b->accs) {
        spec_batch_free(b);
        return errf(err, errlen, "out of memory");
    }
    *out = b;
    return 0;
}

void spec_batch_free(spec_batch *b) {
    if (!b) return;
    if (b->r)
        for (int s = 0; s < b->n_slots; s++) release_slot(b, s);
    free(b->r); free(b->spans); free(b->span_slot); free(b->span_row0); free(b->span_verify);
    free(b->logit_rows); free(b->logit_of_row); free(b->rowtok); free(b->committed); free(b->logits);
    free(b->probs); free(b->scratch); free(b->taps); free(b->qbuf); free(b->props); free(b->accs);
    free(b->corrupt);
    free(b->k_proposed);
    free(b->gated);
    free(b->lrow_tok); free(b->lrow_pos); free(b->vk);
    free(b);
}

void spec_batch_set_verify_hook(spec_batch *b, const spec_verify_hook *s) {
    if (s) b->verify = *s;
    else memset(&b->verify, 0, sizeof b->verify);
}

void spec_batch_set_fault(spec_batch *b, const spec_fault *f) {
    b->fault_on = f != NULL;
    if (f) fault_arm(&b->fault, f, gen_now());
}

int spec_batch_add(spec_batch *b, const int *prompt, int n, const spec_req_params *p, int *slot,
                   char *err, size_t errlen) {
    const gen_engine *e = b->e;
    if (n <= 0) return errf(err, errlen, "the prompt is empty");
    if (n + 1 > e->opts.max_seq_len)
        return errf(err, errlen, "the prompt has %d tokens; the context holds %d", n, e->opts.max_seq_len);
    for (int j = 0; j < n; j++)
        if (prompt[j] < 0 || prompt[j] >= b->V)
            return errf(err, errlen, "token id %d outside the vocabulary (%d)", prompt[j], b->V);
    if (p->max_tokens < 1) return errf(err, errlen, "max_tokens must be at least 1");
    int depth = p->depth < 0 ? b->default_depth : p->depth;
    if (depth > SPEC_MAX_DEPTH) return errf(err, errlen, "depth %d exceeds %d", depth, SPEC_MAX_DEPTH);
    if (!b->d) depth = 0;
    int s = 0;
    while (s < b->n_slots && b->r[s].live) s++;
    if (s == b->n_slots) return errf(err, errlen, "all %d request slots are busy", b->n_slots);
    req *q = &b->r[s];
    memset(q, 0, sizeof *q);
    q->kv_seq = kv_seq_new(e->kv);
    if (q->kv_seq < 0) return errf(err, errlen, "no free KV sequence");
    int max_total = n + p->max_tokens + SPEC_MAX_DEPTH + 1;
    q->cap = max_total < e->opts.max_seq_len + SPEC_MAX_DEPTH + 1 ? max_total : e->opts.max_seq_len + SPEC_MAX_DEPTH + 1;
    q->tokens = malloc(sizeof(int) * (size_t)q->cap);
    q->prompt_taps = b->n_taps ? malloc(sizeof(float) * (size_t)n * b->n_taps * b->H) : NULL;
    if (!q->tokens || (b->n_taps && !q->prompt_taps)) {
        kv_seq_free(e->kv, q->kv_seq);
        free(q->tokens); free(q->prompt_taps);
        memset(q, 0, sizeof *q);
        return errf(err, errlen, "out of memory");
    }
    memcpy(q->tokens, prompt, sizeof(int) * (size_t)n);
    q->n_tokens = q->n_prompt = n;
    q->depth = depth;
    q->p = *p;
    rng_seed(&q->rng, p->seed);
    q->live = 1;
    if (b->verify.reset) b->verify.reset(b->verify.ctx, s);
    *slot = s;
    return 0;
}

void spec_batch_cancel(spec_batch *b, int slot) {
    if (slot >= 0 && slot < b->n_slots) release_slot(b, slot);
}

int spec_batch_running(const spec_batch *b) {
    int n = 0;
    for (int s = 0; s < b->n_slots; s++) n += b->r[s].live;
    return n;
}

int spec_batch_prefilling(const spec_batch *b) {
    int n = 0;
    for (int s = 0; s < b->n_slots; s++) n += b->r[s].live && b->r[s].fed < b->r[s].n_prompt;
    return n;
}

long spec_batch_tokens_in_kv(const spec_batch *b) {
    long n = 0;
    for (int s = 0; s < b->n_slots; s++)
        if (b->r[s].live) n += kv_len(b->e->kv, b->r[s].kv_seq);
    return n;
}

const spec_batch_stats *spec_batch_get_stats(const spec_batch *b) { return &b->st; }
const spec_counters *spec_batch_counters(const spec_batch *b) { return &b->ctr; }

/* Commits tokens[0..n) to request s, delivering each with its logits row;
 * stops at EOS, max_tokens or the context limit. Returns 1 if it finished. */
static int commit(spec_batch *b, int s, const int *toks, const float *rows, int n, spec_finish *why) {
    req *q = &b->r[s];
    for (int j = 0; j < n; j++) {
        int t = toks[j];
        q->tokens[q->n_tokens++] = t;
        q->n_gen++;
        if (b->cb.on_token) b->cb.on_token(b->cb.user, s, t, rows + (size_t)j * b->V);
        if (!q->p.ignore_eos && is_eos(b, t)) { *why = SPEC_FINISH_STOP; return 1; }
        if (q->n_gen >= q->p.max_tokens) { *why = SPEC_FINISH_LENGTH; return 1; }
        /* the next step feeds the newest token: it needs one more KV row */
        if (q->n_tokens + 1 > b->e->opts.max_seq_len) { *why = SPEC_FINISH_CONTEXT; return 1; }
    }
    return 0;
}

/* Logits rows row0..row0+n-1 of this step (through logit_of_row) are all
 * finite; otherwise the request cannot be sampled or verified. */
static int rows_finite(const spec_batch *b, int row0, int n) {
    for (int r = 0; r < n; r++)
        if (sampler_first_nonfinite(b->logits + (size_t)b->logit_of_row[row0 + r] * b->V, b->V) >= 0) return 0;
    return 1;
}

static void finish(spec_batch *b, int s, spec_finish why) {
    int n = b->r[s].n_gen;
    if (why == SPEC_FINISH_NONFINITE) b->st.nonfinite++;
    release_slot(b, s);
    if (b->cb.on_finish) b->cb.on_finish(b->cb.user, s, why, n);
}

int spec_batch_step(spec_batch *b, char *err, size_t errlen) {
    gen_engine *e = b->e;
    drafter *d = b->d;
    const int V = b->V, H = b->H, T = b->n_taps;

    /* 1. Proposals for every generating request. */
    int np = 0, n_dec = 0;
    for (int s = 0; s < b->n_slots; s++) n_dec += b->r[s].live && b->r[s].fed == b->r[s].n_prompt;
    /* verify rows must fit the budget: at most this many drafts each */
    int k_cap = n_dec ? b->budget / n_dec - 1 : 0;
    for (int s = 0; s < b->n_slots; s++) {
        req *q = &b->r[s];
        if (!q->live || q->fed < q->n_prompt) continue;
        int room = q->p.max_tokens - q->n_gen - 1;                  /* the bonus takes one */
        int ctx_room = e->opts.max_seq_len - (q->n_tokens + 1);
        if (ctx_room < room) room = ctx_room;
        int k = q->depth < room ? q->depth : room;
        if (k > k_cap) k = k_cap;
        if (k < 0) k = 0;
        b->gated[s] = k > 0 && q->begun && b->verify.gate && !b->verify.gate(b->verify.ctx, s, k, n_dec);
        if (b->gated[s]) k = 0;
        b->props[np] = (spec_proposal){.slot = s, .tokens = q->tokens, .n_tokens = q->n_tokens, .max_k = k,
                                       .sp = &q->p.sp, .rng = &q->rng,
                                       .keep = b->verify.keep, .keep_ctx = b->verify.ctx,
                                       .q = b->qbuf ? b->qbuf + (size_t)np * SPEC_MAX_DEPTH * V : NULL};
        np++;
    }
    /* Only requests that asked for drafts go to the drafter (depth 0 = off). */
    if (d && np) {
        spec_proposal *tmp = b->props;
        int nd = 0;
        /* partition: requests with max_k > 0 first, preserving order */
        for (int i = 0; i < np; i++)
            if (tmp[i].max_k > 0) {
                spec_proposal t = tmp[i];
                memmove(&tmp[nd + 1], &tmp[nd], sizeof *tmp * (size_t)(i - nd));
                tmp[nd++] = t;
            }
        if (nd) {
            double td = gen_now();
            int rc = d->ops->propose(d, tmp, nd, err, errlen);
            b->ctr.draft_s += gen_now() - td;
            if (rc) return -1;
        }
        for (int i = nd; i < np; i++) tmp[i].k = 0;
        for (int i = 0; i < nd; i++) {
            spec_proposal *pr = &tmp[i];
            if (pr->k < 0 || pr->k > pr->max_k)
                return errf(err, errlen, "drafter %s proposed %d tokens, asked for at most %d", d->ops->name,
                            pr->k, pr->max_k);
            for (int r = 0; r < pr->k; r++)
                if (pr->draft[r] < 0 || pr->draft[r] >= V)
                    return errf(err, errlen, "drafter %s proposed token id %d outside the vocabulary (%d)",
                                d->ops->name, pr->draft[r], V);
        }
        for (int i = 0; i < np; i++) b->k_proposed[i] = tmp[i].k;
        if (b->verify.choose) {
            b->verify.choose(b->verify.ctx, tmp, nd);
            for (int i = 0; i < nd; i++)
                if (tmp[i].k < 0 || tmp[i].k > tmp[i].max_k) tmp[i].k = tmp[i].max_k < 0 ? 0 : tmp[i].max_k;
        }
    } else {
        for (int i = 0; i < np; i++) b->props[i].k = b->k_proposed[i] = 0;
    }

    /* 2. One ragged batch: verify spans, then prompt chunks. */
    int ns = 0, rows = 0, nl = 0;
    for (int i = 0; i < np; i++) {
        spec_proposal *pr = &b->props[i];
        req *q = &b->r[pr->slot];
        b->span_slot[ns] = pr->slot; b->span_row0[ns] = rows; b->span_verify[ns] = i;
        b->rowtok[rows] = q->tokens[q->n_tokens - 1];
        memcpy(b->rowtok + rows + 1, pr->draft, sizeof(int) * (size_t)pr->k);
        b->spans[ns++] = (fwd_span){.seq = q->kv_seq, .n = pr->k + 1, .tokens = b->rowtok + rows};
        for (int r = 0; r <= pr->k; r++) { b->logit_of_row[rows + r] = nl; b->logit_rows[nl++] = rows + r; }
        rows += pr->k + 1;
    }
    int prefill_rows = 0;
    for (int s = 0; s < b->n_slots && rows < b->budget; s++) {
        req *q = &b->r[s];
        if (!q->live || q->fed >= q->n_prompt) continue;
        int chunk = q->n_prompt - q->fed;
        if (chunk > b->budget - rows) chunk = b->budget - rows;
        b->span_slot[ns] = s; b->span_row0[ns] = rows; b->span_verify[ns] = -1;
        b->spans[ns++] = (fwd_span){.seq = q->kv_seq, .n = chunk, .tokens = q->tokens + q->fed};
        int want_all = q->p.prompt_logits;
        for (int r = 0; r < chunk; r++) {
            int last = q->fed + r == q->n_prompt - 1;
            if (want_all || last) { b->logit_of_row[rows + r] = nl; b->logit_rows[nl++] = rows + r; }
        }
        rows += chunk;
        prefill_rows += chunk;
    }
    if (ns == 0) return 0;

    int verify_rows = rows - prefill_rows, faulty = 0;
    if (b->fault_on && b->fault.f.kind == FAULT_COLLISION) {
        for (int i = 0; i < np; i++) b->vk[i] = b->props[i].k;   /* verify spans come first, in props order */
        faulty = fault_pick_row(&b->fault, gen_now(), verify_rows, b->vk, b->span_row0, np, b->corrupt);
    }
    fwd_batch fb = {.spans = b->spans, .n_spans = ns};
    fwd_out fo = {.logit_rows = b->logit_rows, .n_logit_rows = nl, .logits = b->logits,
                  .tap_layers = T ? d->tap_layers : NULL, .n_taps = T, .taps = b->taps,
                  .corrupt_rows = faulty ? b->corrupt : NULL,
                  .attn_window = b->fault_on && b->fault.f.kind == FAULT_WINDOW ? b->fault.f.below : 0};
    double t0 = gen_now();
    int frc = fwd_run(e->fwd, e->kv, &fb, &fo, err, errlen);
    if (faulty) memset(b->corrupt, 0, (size_t)rows);
    if (frc) return -1;
    if (b->fault_on && (b->fault.f.kind == FAULT_FLAT || b->fault.f.kind == FAULT_NONDET)) {
        /* each logits row's input token and position, for the triggers */
        for (int k = 0; k < ns; k++) {
            const req *q = &b->r[b->span_slot[k]];
            int pos0 = b->span_verify[k] >= 0 ? q->n_tokens - 1 : q->fed;
            for (int r = 0; r < b->spans[k].n; r++) {
                int row = b->span_row0[k] + r, li = b->logit_of_row[row];
                if (li < 0 || li >= nl || b->logit_rows[li] != row) continue;
                b->lrow_tok[li] = b->spans[k].tokens[r];
                b->lrow_pos[li] = pos0 + r;
            }
        }
        fault_logits(&b->fault, b->logits, V, b->lrow_tok, b->lrow_pos, nl);
    }
    b->st.faults_injected = b->fault.injected;
    double t1 = gen_now();
    b->st.forward_s += t1 - t0;
    b->st.steps++;
    b->st.prefill_tokens += prefill_rows;

    /* 3. Verify, commit, truncate. */
    int na = 0;
    for (int k = 0; k < ns; k++) {
        int s = b->span_slot[k], row0 = b->span_row0[k];
        req *q = &b->r[s];
        spec_finish why = SPEC_FINISH_LENGTH;
        if (b->span_verify[k] < 0) {
            /* prompt chunk */
            int first = q->fed;
            q->fed += b->spans[k].n;
            if (T) memcpy(q->prompt_taps + (size_t)first * T * H, b->taps + (size_t)row0 * T * H,
                          sizeof(float) * (size_t)b->spans[k].n * T * H);
            int last = q->fed >= q->n_prompt;
            if ((q->p.prompt_logits && !rows_finite(b, row0, b->spans[k].n)) ||
                (last && !rows_finite(b, row0 + b->spans[k].n - 1, 1))) {
                finish(b, s, SPEC_FINISH_NONFINITE);
                continue;
            }
            if (q->p.prompt_logits && b->cb.on_prompt_logits)
                for (int r = 0; r < b->spans[k].n; r++)
                    b->cb.on_prompt_logits(b->cb.user, s, first + r,
                                           b->logits + (size_t)b->logit_of_row[row0 + r] * V);
            if (q->fed < q->n_prompt) continue;
            const float *lg = b->logits + (size_t)b->logit_of_row[row0 + b->spans[k].n - 1] * V;
            int tok = sampler_sample(lg, V, &q->p.sp, &q->rng, b->scratch);
            if (commit(b, s, &tok, lg, 1, &why)) { finish(b, s, why); continue; }
            if (d && q->depth > 0) {
                double td = gen_now();
                int rc = d->ops->begin(d, s, q->tokens, q->n_tokens, q->prompt_taps, err, errlen);
                b->ctr.draft_s += gen_now() - td;
                if (rc) return -1;
                q->begun = 1;
            }
            free(q->prompt_taps);
            q->prompt_taps = NULL;
            continue;
        }
        spec_proposal *pr = &b->props[b->span_verify[k]];
        if (!rows_finite(b, row0, pr->k + 1)) {
            finish(b, s, SPEC_FINISH_NONFINITE);
            continue;
        }
        const float *lg = b->logits + (size_t)b->logit_of_row[row0] * V;
        int next, a;
        if (q->p.sp.temperature <= 0.0f) {
            a = verify_greedy(pr->draft, pr->k, lg, V, &next);
        } else {
            for (int r = 0; r <= pr->k; r++)
                sampler_probs(b->probs + (size_t)r * V, lg + (size_t)r * V, V, &q->p.sp);
            a = verify_sample(pr->draft, pr->k, b->probs, pr->q_valid ? pr->q : NULL, V, &q->rng, b->scratch,
                              &next);
        }
        /* keep KV rows of [last, d_1..d_a]; d_{a+1}.. vanish by truncation */
        kv_truncate(e->kv, q->kv_seq, q->n_tokens + a);
        int *ct = b->committed + (size_t)k * (SPEC_MAX_DEPTH + 1);
        memcpy(ct, pr->draft, sizeof(int) * (size_t)a);
        ct[a] = next;
        b->st.verify_seq_steps++;
        if (d && q->begun && b->gated[s]) {
            b->ctr.gated_steps++;
        } else if (d && q->begun) {
            spec_counters *c = &b->ctr;
            c->steps++;
            c->committed_tokens += a + 1;
            if (pr->k > 0) {
                c->drafts++;
                c->drafted_tokens += pr->k;
                c->accepted_tokens += a;
                for (int r = 0; r < pr->k; r++) c->drafted_at[r]++;
                if (pr->has_conf) {
                    double surv = 1.0;
                    for (int r = 0; r < pr->k; r++) c->pred_survival_at[r] += surv *= pr->conf[r];
                }
                for (int r = 0; r < a; r++) c->accepted_at[r]++;
            } else if (pr->max_k > 0 && b->k_proposed[b->span_verify[k]] == 0) {
                c->empty_proposals++;
            }
            c->unverified_tokens += b->k_proposed[b->span_verify[k]] - pr->k;
            if (b->verify.observe) b->verify.observe(b->verify.ctx, pr, a);
        }
        int done = commit(b, s, ct, lg, a + 1, &why);
        if (d && q->begun && !done)
            b->accs[na++] = (spec_accept){.slot = s, .n_accepted = a, .committed = ct, .n_committed = a + 1,
                                          .tokens = q->tokens, .n_tokens = q->n_tokens,
                                          .hidden = T ? b->taps + (size_t)row0 * T * H : NULL};
        if (done) finish(b, s, why);
    }
    b->st.verify_s += gen_now() - t1;
    if (d && na) {
        double td = gen_now();
        d->ops->accept(d, b->accs, na);
        b->ctr.draft_s += gen_now() - td;
    }
    return 0;
}
