/* canary_internal.h — what the steps of one live canary run share
 * (canary.c runs them: reference pass, load, probes, verdict, evidence;
 * canary_probes.c and canary_evidence.c hold the probe and evidence steps).
 * Not a public header: nothing outside bench/canary*.c includes it.
 *
 * Two records grow as the run goes: items (numbers, what cv_judge()
 * decides on) and findings (text, what a human reads), both appended by
 * canary_evidence.c's cn_item / cn_finding. A finding never decides
 * anything; an item never explains anything. */
#ifndef SPECBED_BENCH_CANARY_INTERNAL_H
#define SPECBED_BENCH_CANARY_INTERNAL_H
#include <stddef.h>
#include "canary.h"
#include "canary_verdict.h"
#include "load.h"

#define CN_MAX_FINDINGS 256

#define CN_NOTE (-1)               /* a finding that is context ("note: …"), not evidence of a check */

typedef struct {
    char *line[CN_MAX_FINDINGS];   /* malloc'd */
    int check[CN_MAX_FINDINGS];    /* the cv_check it is evidence for, or CN_NOTE */
    int n;
} cn_findings;

typedef struct {
    cv_item *v;                    /* malloc'd, [n] */
    int n, cap;
    int oom;                       /* an item could not be stored: the run cannot be judged */
} cn_items;

typedef struct {
    const canary_opts *o;
    const char *outdir;
    char base[1024];               /* server base URL */
    workload *wl;                  /* owned */
    int *rows;                     /* [wl->n] seeded shuffle of wl's rows, owned */
    workload sw;                   /* the probe set: the first n_probe of rows, borrowed (own .items only) */
    int max_tokens;
    int spec;                      /* the reference is speculation off (1) or a quiet run (0) */
    unsigned not_made;             /* checks asked for but not made (cv_input.not_made) */
    const char *ref_kind;          /* "spec off" or "quiet run" */
    char **ref;                    /* [sw.n] reference text per probe row; NULL = none */
    char **first;                  /* [sw.n] spec only: the first completion of each row under load */
    unsigned char *said;           /* [sw.n] text checks already reported for the row (bits 1, 2, 4) */
    double *ref_loop;              /* [sw.n] cc_loop() of the row's reference text; NaN = no reference */
    int n_loop_excused;            /* load texts over the loop threshold whose reference loops too */
    int n_loop_texts;              /* load texts scored for loops */
    ld_config lc;                  /* the load's configuration */
    ld_result *lr;                 /* the load; NULL before it ran */
    double t_origin;               /* http_now() of the load's t = 0 */
    char not_judged[512];          /* why the interval check judged nothing ("" when it did) */
    int n_ok;                      /* load requests that succeeded */
    cn_items items;
    cn_findings F;
} cn_run;

/* Adds a finding (check: a cv_check, or CN_NOTE with a "note: " text). */
void cn_finding(cn_findings *f, int check, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* What finding i is once v is known: 1 evidence for a failing check, 0
 * tolerated (its check passed: a calibrated share allows it), -1 a note. */
int  cn_finding_status(const cn_findings *f, int i, const cv_verdict *v);
void cn_item(cn_items *l, cv_check check, double score, double t, int id);
/* Text around byte offset at, control bytes escaped, at most ~160 bytes. */
void cn_excerpt(const char *t, long at, char *out, size_t outlen);

/* The rows of w once each, `concurrency` at a time, greedy, in order
 * (the reference pass and the passphrase probe). */
int  cn_probe_requests(const cn_run *R, const workload *w, int spec_depth, int max_tokens, int concurrency,
                       ld_result **res, char *err, size_t errlen);
/* A workload of borrowed rows of w (free only .items). */
workload cn_subset(const workload *w, const int *rows, int n, const char *name);

/* After the load: the flat-distribution and passphrase probes, as items
 * and findings. Never fails the run: a probe the server cannot answer is a note. */
void cn_probes(cn_run *R);

/* The metric source in words ("specbed /metrics", "the SGLang decode log", …). */
const char *cn_source_desc(const cn_run *R);

/* canary.json, evidence.txt, and the findings on stderr (unless quiet). */
void cn_write_evidence(const cn_run *R, const canary_result *res);
#endif
