/* canary_verdict.h — the one canary verdict: a pure function from a run's
 * intervals, its content-check results and the thresholds to pass / fail,
 * with every reason listed. The live canary, the offline scans
 * (--sglang-log, --intervals) and the sweep's per-launch canary all call
 * cv_judge(); no other code compares an accept length with the threshold or
 * decides whether a content score fails.
 *
 * The interval check. An interval is JUDGED (cv_interval_judged) when
 *   - it has an accept length: NaN means the source gave none (nothing
 *     drafted in it: SGLang and specbed omit "accept len" then, and a
 *     counter source has no verify steps), so there is nothing to judge;
 *   - it was under load: requests in flight (live), or #running-req > 0
 *     (log rows, which have no client view);
 *   - where the source counts verify steps, it has at least min_drafts of
 *     them (a couple of steps say nothing about a rate).
 * A judged interval FLAGS when its accept length is at or below the
 * threshold (≤, the field's rule); a threshold ≤ 0 disables the check.
 * Ranks (iv_row.rank: SGLang DP/TP gauges or log lines, vLLM engines): each
 * rank is judged on its own — its own accept length, its own verify steps
 * against min_drafts, not idle where its running count is known — and the
 * interval's judged value is the LOWEST judged rank's (cv_interval_value),
 * named in the reason; ranks are never summed or averaged here.
 *
 * No silent pass: when the interval check is on (threshold > 0) and not
 * one interval could be judged, the check counts as not made
 * (cv_verdict.not_made has CV_ACCEPT_LEN; cv_not_judged_format() says why,
 * "not judged: SOURCE gives no accept length"), so the verdict is
 * inconclusive unless a content check failed.
 *
 * The content checks come as items, one per thing checked (a completion, a
 * pair of completions, a probe), each with its score on one check. Two kinds:
 *   share checks (bad characters, spec-on/off mismatch, non-determinism,
 *     passphrase copy): an item fails when its score is > 0; the run fails
 *     when the share of failing items exceeds the threshold (0 = any one);
 *   max checks (punctuation spray, trigram loop, flat distribution,
 *     context-free distribution): an item
 *     is over when its score exceeds the threshold; the run fails when any is.
 *
 * Three verdicts: fail when any check failed; otherwise
 * INCONCLUSIVE when a check the run was asked to make could not be made
 * (cv_input.not_made: e.g. --spec-check on against a server that ignores
 * "spec_depth": 0, so the "spec-off" reference was speculative); otherwise
 * pass. A check that was not made is never a pass.
 * Nothing here does I/O or allocates. */
#ifndef SPECBED_BENCH_CANARY_VERDICT_H
#define SPECBED_BENCH_CANARY_VERDICT_H
#include <stddef.h>
#include "canary_checks.h"
#include "interval.h"

/* Verify steps an interval needs to be judged, unless a command's
 * --min-drafts says otherwise. A step commits 1..K+1 tokens (sd ~1.1 at
 * depth 3 and a 0.7 acceptance rate), so over n steps the accept length
 * wanders by ~1.1/sqrt(n): 16 steps put a healthy 2.8-3.0 three standard
 * errors above the default threshold 2.0; 4 did not (a cold, slow server's
 * first 2 s interval — 5 steps for 8 requests, mostly prefill — read 2.0
 * on the clean bundled model under ASan). A loaded interval of a real
 * server runs hundreds of steps. */
#define CV_MIN_DRAFTS_DEFAULT 16

typedef enum {
    CV_ACCEPT_LEN,      /* loaded interval at or below the accept-length threshold */
    CV_BAD_CHARS,       /* share: texts with U+FFFD / control / invalid bytes (score = how many) */
    CV_SPEC_MISMATCH,   /* share: greedy output under load ≠ the spec-off reference (score 1) */
    CV_NONDET,          /* share: identical greedy requests differed (score 1) */
    CV_COPY,            /* share: passphrase not copied across the 128-token boundary (score 1) */
    CV_SPRAY,           /* max: punctuation spray share of a text */
    CV_LOOP,            /* max: repeated-trigram loop score of a text */
    CV_FLAT,            /* max: flat next-token distribution drop of a probe, nats */
    CV_CTXFREE,         /* max: prompt positions whose top-k distribution repeats one at another context (count) */
    CV_N_CHECKS
} cv_check;

const char *cv_check_name(cv_check c);   /* "accept_len", "bad_chars", … (canary.json keys) */

/* One content-check result. */
typedef struct {
    cv_check check;     /* any but CV_ACCEPT_LEN */
    double score;       /* see cv_check */
    double t;           /* when it was seen, run seconds (NaN: a probe after the load) */
    int id;             /* the caller's handle for evidence (request index, probe row); -1 none */
} cv_item;

typedef struct {
    const iv_row *iv;           /* the run's intervals (may be NULL when n_iv = 0) */
    int n_iv;
    double min_drafts;          /* verify steps an interval needs to be judged */
    const cv_item *items;       /* content-check results (may be NULL when n_items = 0) */
    int n_items;
    unsigned not_made;          /* bit (1u << check): a check the run was asked to make but could not */
} cv_input;

/* Why a run failed, one per failing check. */
typedef struct {
    cv_check check;
    double observed;            /* accept length: the lowest flagged; share checks: the share; max checks: the max */
    double threshold;           /* what it was compared with */
    int count;                  /* intervals flagged / items failing or over */
    int of;                     /* intervals judged / items checked */
    double first_s;             /* time of the first of them (interval end, item time); NaN unknown */
    int first_id;               /* interval index / item id of the first; -1 */
    int low_id;                 /* accept length: the interval index of the lowest; -1 */
    char rank[IV_RANK_LABEL];   /* accept length: the rank that gave the lowest ("" without ranks) */
} cv_reason;

typedef struct {
    int failed;                 /* n_reasons > 0 */
    int inconclusive;           /* not failed, but a required check was not made (not_made) */
    unsigned not_made;          /* cv_input.not_made */
    int interval_failed;        /* a reason is CV_ACCEPT_LEN */
    int content_failed;         /* a reason is a content check */
    int n_reasons;
    cv_reason reason[CV_N_CHECKS];   /* in cv_check order */
    int n_judged;               /* intervals judged (whether or not the check is enabled) */
    int n_rows;                 /* intervals given */
    int n_with_al;              /* intervals with an accept length (any rank), judged or not */
    int n_clean;                /* judged, not flagged, before the first flagged one (0 when the check is off) */
    double accept_len_min;      /* lowest judged accept length; NaN when none */
    double first_flag_s;        /* earliest first_s of the reasons; NaN when none has one */
} cv_verdict;

/* The interval rules (see the top of this file). cv_interval_value() is
 * the accept length judged for r (the lowest judged rank's, with ranks;
 * *rank = its index, or -1 without ranks), NaN when r is not judged. */
double cv_interval_value(const iv_row *r, double min_drafts, int *rank);
int cv_interval_judged(const iv_row *r, double min_drafts);
int cv_interval_flagged(const iv_row *r, double min_drafts, double threshold);

/* 1 when the item counts against its check: share checks score > 0, max
 * checks score > threshold (the per-item line evidence is written for). */
int cv_item_over(const cv_item *it, const cc_thresholds *t);
/* 1 when this item alone fails the run, whatever comes later (a max check
 * over its threshold, or a share check whose threshold is 0): the live
 * canary's --fail-fast stops here. */
int cv_item_settles(const cv_item *it, const cc_thresholds *t);

/* The verdict. */
void cv_judge(const cv_input *in, const cc_thresholds *t, cv_verdict *out);
/* "fail", "inconclusive" or "pass" (canary.json's verdict). */
const char *cv_verdict_name(const cv_verdict *v);

/* The observations the same input shows (for canary.json and calibration):
 * judged intervals and their lowest accept length, shares and maxima per
 * check. Checks without items leave their defaults (cc_observed_init). */
void cv_observe(const cv_input *in, cc_observed *o);

/* Why the interval check judged nothing (call when v->not_made has
 * CV_ACCEPT_LEN): "accept length: not judged: SOURCE gives no accept
 * length (…)", or that the intervals with one were idle or had too few
 * verify steps. source names the metric source ("specbed /metrics",
 * "SGLang decode log", …). */
void cv_not_judged_format(const cv_verdict *v, const char *source, double min_drafts, char *buf, size_t len);

/* One line for a reason, e.g. "accept length: 3 of 20 judged intervals at or
 * below 2.000 (lowest 1.420, first at 4.0 s)". */
void cv_reason_format(const cv_reason *r, char *buf, size_t len);
#endif
