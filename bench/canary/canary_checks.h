/* canary_checks.h — the content checks of `specbed canary`, as pure
 * functions of text and numbers (so they are tested on fixed strings), and
 * the thresholds they are judged by, with their calibration from clean runs.
 *
 * Scores (higher is worse unless said otherwise):
 *   bad chars     U+FFFD, invalid UTF-8, and control characters other than
 *                 \t \n \r (C0, DEL, C1) — a count per text
 *   spray         punctuation spray: among non-space characters, the share
 *                 that are ASCII punctuation and differ from the character
 *                 before (so an underline "=====" counts once); 0 below 20
 *                 non-space characters
 *   loop          repeated-trigram loops: 1 − distinct word trigrams ÷ word
 *                 trigrams (0 below 10 trigrams), or the same over character
 *                 8-grams (0 below 32 of them) when that is higher, so loops
 *                 inside one "word" (foofoofoo) and newline runs count too
 *   flat          flat next-token distribution: for each prompt position whose
 *                 top-1 logprob is ≤ −2 (no token above ~13.5 %), how far it
 *                 sits below the median top-1 logprob of its ±8 neighbours
 *                 (nats); the score is the largest such drop
 *   context-free  positions of the probe prompts whose top-k next-token
 *                 distribution (tokens and logprobs, to 1e-4 nats) is exactly
 *                 one already seen at another position — a distribution that
 *                 ignores its context (the DeepSeek V4 Flash signature: '\n'
 *                 −2.25, '#' −2.37, '<' −2.74 … wherever it struck). The flat
 *                 drop above cannot see that one: a top-1 of −2.25 sits at
 *                 most 2.25 nats below anything, under its 3-nat threshold
 *   copy          the continuation reproduces the planted passphrase
 * and the fractions of probe requests whose greedy output differed between
 * speculation on and off, or between identical requests. */
#ifndef SPECBED_BENCH_CANARY_CHECKS_H
#define SPECBED_BENCH_CANARY_CHECKS_H
#include <stddef.h>

int    cc_bad_chars(const char *text, size_t *first_at);   /* count; *first_at = byte offset of the first */
double cc_spray(const char *text);
double cc_loop(const char *text);
/* top1[i] = top-1 logprob at position i (NaN = unknown). Returns the largest
 * drop, *at = its position (-1 when none qualifies). */
double cc_flat(const double *top1, int n, int *at);
/* sig[i] = a hash of position i's top-k distribution (0 = none). Returns
 * how many positions repeat an earlier position's signature; *at = the
 * first such position (-1 when none). */
int    cc_ctxfree(const unsigned long long *sig, int n, int *at);
int    cc_copy_ok(const char *text, const char *expected);
/* The passphrase probes: of the rows whose n_back[i] lies in [lo, hi]
 * (n_back[i] < 0: not a copy row), ordered by distance (stable), every
 * (candidates / want)-th, so the picks spread evenly over the range (both
 * sides of a boundary inside it). Writes up to `want` row indices to out;
 * returns how many. */
int    cc_copy_pick(const int *n_back, int n, int lo, int hi, int want, int *out);
/* Byte offset of the first difference of a and b, -1 when equal. */
long   cc_first_diff(const char *a, const char *b);

/* What a (clean or suspect) run showed; fractions are of the requests checked. */
typedef struct {
    int n_intervals;            /* loaded intervals with an accept length */
    double accept_len_min;      /* NaN when none */
    int n_texts;
    double bad_frac;            /* texts with any bad character */
    double spray_max, loop_max;
    int n_flat;                 /* flat probes run */
    double flat_max;
    double ctxfree_max;         /* context-free repeats, the most in one probe */
    int n_copy;
    double copy_fail_frac;
    int n_spec;                 /* spec-on/off pairs compared */
    double spec_mismatch_frac;
    int n_det;                  /* identical-request pairs compared */
    double nondet_frac;
} cc_observed;

void cc_observed_init(cc_observed *o);   /* nothing seen yet */
/* Folds run b into the aggregate a (worst case of each). */
void cc_observed_merge(cc_observed *a, const cc_observed *b);

typedef struct {
    double accept_len;          /* an interval at or below this flags; ≤ 0 disables */
    double bad_frac, spray, loop, flat, copy_fail_frac, spec_mismatch_frac, nondet_frac;   /* flag when above */
    double ctxfree;             /* context-free repeats in one probe: flag when above (default 0) */
} cc_thresholds;

/* The field's defaults: accept length 2.0; any bad character, spec mismatch,
 * non-determinism or copy failure; spray 0.5; loop 0.6 (a text whose prompt's
 * reference output loops too is the model's own loop, not counted: canary.c);
 * flat 4.0 nats; any context-free repeat. */
void cc_thresholds_default(cc_thresholds *t, double accept_len);

/* A threshold of INFINITY is a DISABLED check (calibration puts it there
 * when the clean runs leave no room inside the quantity's range). Writes the
 * disabled checks' names, comma-separated, to buf; returns how many. */
int cc_disabled_list(const cc_thresholds *t, char *buf, size_t n);

/* Thresholds from clean observations (the worst clean value of each):
 *   accept length: halfway between 1 (nothing accepted) and the lowest clean
 *     interval, t = 1 + (m − 1)/2; disabled when the clean runs accepted
 *     (almost) nothing (m ≤ 1.05) or had no intervals
 *   fractions (bad chars, copy, spec, determinism): the clean fraction, plus
 *     0.1 when it was not zero (so a healthy-but-imperfect model passes and a
 *     perfect one fails on the first miss)
 *   spray, loop: max(default, clean + 0.1); flat: max(default, clean + 1 nat)
 *   a share or text-score threshold that lands at 1 or above (the top of its
 *     range: it could never be exceeded) is INFINITY: the check is disabled
 *     and explain says so in capitals
 *   context-free repeats: the clean maximum (0 for any real model)
 * explain gets one line per threshold saying where it came from. */
void cc_calibrate(const cc_observed *clean, cc_thresholds *t, char *explain, size_t explen);
#endif
