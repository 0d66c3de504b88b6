/* spec_cli.c — spec_cli_check (see spec_cli.h). */
#include "spec_cli.h"
#include <string.h>
#include "drafters.h"
#include "errmsg.h"
#include "verify_policy.h"

enum { D_NGRAM, D_DRAFT, D_MTP, D_DSPARK, D_N };
static const char *const dnames[D_N] = {"ngram", "draft", "mtp", "dspark"};

/* Calls one(item) on each comma-separated item of list (NULL: on dflt). */
static int each(const char *list, const char *dflt, int (*one)(const char *, size_t, void *), void *ctx) {
    const char *p = list ? list : dflt;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (one(p, n, ctx)) return -1;
        if (!p[n]) return 0;
        p += n + 1;
    }
}

typedef struct { int has[D_N]; char *err; size_t errlen; } dset;

static int one_drafter(const char *s, size_t n, void *ctx) {
    dset *d = ctx;
    if (n == 4 && !strncmp(s, "none", 4)) return 0;
    for (int i = 0; i < D_N; i++)
        if (strlen(dnames[i]) == n && !strncmp(s, dnames[i], n)) { d->has[i] = 1; return 0; }
    return errf(d->err, d->errlen, "unknown drafter '%.*s' (expected %s)", (int)(n > 64 ? 64 : n), s, DRAFTER_NAMES);
}

typedef struct { int has[VPOLICY_ADAPTIVE + 1]; char *err; size_t errlen; } sset;

static int one_schedule(const char *s, size_t n, void *ctx) {
    sset *v = ctx;
    char name[32];
    vpolicy_kind k;
    if (n >= sizeof name || (snprintf(name, sizeof name, "%.*s", (int)n, s), vpolicy_parse(name, &k)))
        return errf(v->err, v->errlen, "unknown verify schedule '%.*s' (expected %s)", (int)(n > 64 ? 64 : n), s,
                    VPOLICY_NAMES);
    v->has[k] = 1;
    return 0;
}

int spec_cli_check(const spec_cli *c, char *err, size_t errlen) {
    dset d = {.err = err, .errlen = errlen};
    sset v = {.err = err, .errlen = errlen};
    if (each(c->drafters, "none", one_drafter, &d) || each(c->schedules, "fixed", one_schedule, &v)) return -1;
    int any = d.has[D_NGRAM] || d.has[D_DRAFT] || d.has[D_MTP] || d.has[D_DSPARK];
    /* without a drafter nothing is drafted, so nothing of speculation applies */
    if (!any && c->depth_opt)
        return errf(err, errlen, "%s needs a drafter (ngram, draft, mtp or dspark): without one nothing is drafted",
                    c->depth_opt);
    int nonfixed = v.has[VPOLICY_THRESHOLD] || v.has[VPOLICY_CONFIDENCE] || v.has[VPOLICY_ADAPTIVE];
    if (!any && nonfixed)
        return errf(err, errlen, "a verify schedule other than fixed needs a drafter (ngram, draft, mtp or dspark)");
    /* a checkpoint option feeds only the drafters that load one */
    int own_dspark = c->dspark_model >= 0;
    int draft_used = d.has[D_DRAFT] || (!own_dspark && d.has[D_DSPARK]);
    if (c->draft_model && !draft_used)
        return errf(err, errlen, "--draft-model is read only by the draft drafter%s; with drafter '%.64s' it "
                    "would be ignored", own_dspark ? " (dspark's checkpoint is --dspark-model)" : " and dspark",
                    c->drafters ? c->drafters : "none");
    if (c->dspark_model > 0 && !d.has[D_DSPARK])
        return errf(err, errlen, "--dspark-model is read only by the dspark drafter, which is not among the drafters");
    if (d.has[D_DRAFT] && !c->draft_model)
        return errf(err, errlen, "the draft drafter needs --draft-model DIR (the draft model)");
    if (d.has[D_DSPARK] && !(own_dspark ? c->dspark_model > 0 : c->draft_model))
        return errf(err, errlen, "the dspark drafter needs %s DIR (the DSpark checkpoint)",
                    own_dspark ? "--dspark-model" : "--draft-model");
    if (c->dspark_final_tap && !d.has[D_DSPARK])
        return errf(err, errlen, "--dspark-final-tap is read only by the dspark drafter; with drafter '%.64s' it "
                    "would be ignored", c->drafters ? c->drafters : "none");
    if (c->ngram && !d.has[D_NGRAM])
        return errf(err, errlen, "the --ngram-* options are read only by the ngram drafter; with drafter '%.64s' "
                    "they would be ignored", c->drafters ? c->drafters : "none");
    /* each schedule's own knob */
    if (c->p_min && !v.has[VPOLICY_THRESHOLD])
        return errf(err, errlen, "--p-min is read only by the threshold verify schedule (--verify-schedule threshold)");
    if (c->alpha && !v.has[VPOLICY_ADAPTIVE])
        return errf(err, errlen, "--adaptive-alpha is read only by the adaptive verify schedule "
                    "(--verify-schedule adaptive)");
    if (c->cost_table && !v.has[VPOLICY_CONFIDENCE] && !v.has[VPOLICY_ADAPTIVE])
        return errf(err, errlen, "--cost-table is read only by the confidence and adaptive verify schedules");
    return 0;
}
