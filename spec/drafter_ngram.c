/* drafter_ngram.c — prompt-lookup drafting (see drafter_ngram.h). Stateless
 * per sequence: everything it needs is the context the loop passes in. */
#include "drafter_ngram.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"

static int ng_begin(drafter *d, int slot, const int *prompt, int n, const float *h, char *err, size_t el) {
    (void)d; (void)slot; (void)prompt; (void)n; (void)h; (void)err; (void)el;
    return 0;
}

/* Most recent start i < n - len such that t[i..i+len) == t[n-len..n); -1 if none. */
static int find_match(const int *t, int n, int len) {
    const int *suffix = t + n - len;
    for (int i = n - len - 1; i >= 0; i--)
        if (t[i + len - 1] == suffix[len - 1] && !memcmp(t + i, suffix, sizeof(int) * (size_t)len)) return i;
    return -1;
}

static int ng_propose(drafter *d, spec_proposal *reqs, int n, char *err, size_t el) {
    (void)err; (void)el;
    const ngram_opts *o = d->impl;
    for (int r = 0; r < n; r++) {
        spec_proposal *p = &reqs[r];
        p->k = 0;
        p->q_valid = 0;     /* deterministic drafts: q is one-hot */
        p->has_conf = 0;
        const int nt = p->n_tokens;
        for (int len = o->n_max; len >= o->n_min && p->k == 0; len--) {
            if (len >= nt) continue;
            int i = find_match(p->tokens, nt, len);
            if (i < 0) continue;
            int limit = p->max_k < o->lookahead ? p->max_k : o->lookahead;
            if (o->spec_factor > 0) {
                double cap = ceil(o->spec_factor * len);
                if (cap < limit) limit = (int)cap;
            }
            /* the context extended by the draft itself: past its end,
             * position j holds draft[j - nt] (j - nt < k, since i + len < nt) */
            for (int j = i + len; p->k < limit; j++) p->draft[p->k++] = j < nt ? p->tokens[j] : p->draft[j - nt];
        }
    }
    return 0;
}

static void ng_accept(drafter *d, const spec_accept *a, int n) { (void)d; (void)a; (void)n; }
static void ng_release(drafter *d, int slot) { (void)d; (void)slot; }
static void ng_free(drafter *d) {
    if (!d) return;
    free(d->impl);
    free(d);
}

static const drafter_ops NGRAM_OPS = {"ngram", ng_begin, ng_propose, ng_accept, ng_release, ng_free};

int drafter_ngram_create(drafter **out, const ngram_opts *o, int vocab_size, char *err, size_t errlen) {
    *out = NULL;
    ngram_opts v = *o;
    if (v.n_max <= 0) v.n_max = 3;
    if (v.n_min <= 0) v.n_min = 1;
    if (v.lookahead <= 0) v.lookahead = SPEC_MAX_DEPTH;
    /* 1: SuffixDecoding's and vLLM's default too, and of no cap, 1, 1.5, 2
     * and 3 the best on 61 prompts of each workload under the measured verify
     * cost curve (scripts/studies/ngram_replay.py; bench/RECORD.md "The ngram
     * drafter's length"). Below, 0 means no cap. */
    if (v.spec_factor == 0) v.spec_factor = 1;
    else if (v.spec_factor < 0) v.spec_factor = 0;
    if (!(v.spec_factor >= 0) || v.spec_factor > 1e6)
        return errf(err, errlen, "ngram: spec factor %g must be at most 1e6", v.spec_factor);
    if (v.n_min > v.n_max) return errf(err, errlen, "ngram: n_min %d exceeds n_max %d", v.n_min, v.n_max);
    drafter *d = calloc(1, sizeof *d);
    ngram_opts *impl = malloc(sizeof *impl);
    if (!d || !impl) { free(d); free(impl); return errf(err, errlen, "out of memory"); }
    *impl = v;
    d->ops = &NGRAM_OPS;
    /* the depth is only an upper bound now: say what bounds the drafts */
    if (!v.quiet && v.spec_factor > 0)
        fprintf(stderr, "ngram: matches suffixes of %d..%d tokens; drafts at most min(depth, ceil(%g x match length))\n",
                v.n_max, v.n_min, v.spec_factor);
    else if (!v.quiet)
        fprintf(stderr, "ngram: matches suffixes of %d..%d tokens; drafts up to the depth\n", v.n_max, v.n_min);
    d->vocab_size = vocab_size;
    d->impl = impl;
    *out = d;
    return 0;
}
