/* metrics_src.c — see metrics_src.h. Parses /metrics text; never fetches it
 * (HTTP is httpc.c's) and never reads engine state. */
#include "metrics_src.h"
#include "errmsg.h"
#include "prom.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void iv_row_clear(iv_row *r) {
    memset(r, 0, sizeof *r);
    r->t_start = r->t_end = NAN;
    r->running = r->waiting = r->accept_len = r->accept_rate = r->gen_tps = NAN;
    r->drafts = r->num_drafts = r->verify_steps = r->draft_tokens = r->accepted = NAN;
    r->inflight = r->client_tps = NAN;
}

static const char *const BASIS[] = {"client", "step", "completion", "log", "gauge"};

const char *iv_basis_name(iv_basis b) { return (unsigned)b < 5 ? BASIS[b] : "?"; }

int iv_basis_from_name(const char *s, iv_basis *out) {
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, BASIS[i])) { *out = (iv_basis)i; return 0; }
    return -1;
}

static const char *const NAMES[] = {"auto", "specbed", "vllm", "llamacpp", "sglang", "none"};

const char *msrc_name(msrc_kind k) { return (unsigned)k < 6 ? NAMES[k] : "?"; }

int msrc_from_name(const char *s, msrc_kind *out) {
    for (int i = 0; i < 6; i++)
        if (!strcmp(s, NAMES[i])) { *out = (msrc_kind)i; return 0; }
    if (!strcmp(s, "llama.cpp")) { *out = MSRC_LLAMACPP; return 0; }
    return -1;
}

msrc_kind msrc_detect(const char *text) {
    prom_doc d;
    if (prom_parse(text, &d, NULL, 0)) return MSRC_NONE;
    msrc_kind k = MSRC_NONE;
    if (prom_has_prefix(&d, "specbed:")) k = MSRC_SPECBED;
    else if (prom_has_prefix(&d, "vllm:")) k = MSRC_VLLM;
    else if (prom_has_prefix(&d, "llamacpp:")) k = MSRC_LLAMACPP;
    else if (prom_has_prefix(&d, "sglang:")) k = MSRC_SGLANG;
    prom_free(&d);
    return k;
}

/* Sum of prefix+name; NaN when absent. */
static double get(const prom_doc *d, const char *prefix, const char *name, int *found_any) {
    char full[160];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int n;
    double v = prom_sum(d, full, NULL, NULL, &n);
    if (n && found_any) *found_any = 1;
    return n ? v : NAN;
}

/* Mean of the samples named prefix+name (a gauge per rank: the ranks'
 * accept lengths average, they do not add up); NaN when absent. */
static double mean_of(const prom_doc *d, const char *prefix, const char *name, int *found_any) {
    char full[160];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int n;
    double v = prom_sum(d, full, NULL, NULL, &n);
    if (n && found_any) *found_any = 1;
    return n ? v / n : NAN;
}

enum { RK_DRAFTS, RK_ACCEPTED, RK_STEPS, RK_COMMITTED, RK_RUNNING, RK_GAUGE_AL };

static double *rank_field(msnap_rank *r, int f) {
    switch (f) {
    case RK_DRAFTS: return &r->drafts;
    case RK_ACCEPTED: return &r->accepted;
    case RK_STEPS: return &r->steps;
    case RK_COMMITTED: return &r->committed;
    case RK_RUNNING: return &r->running;
    default: return &r->g_accept_len;
    }
}

/* Adds every sample of prefix+name that carries rank labels to its rank. */
static void by_rank(const prom_doc *d, const char *prefix, const char *name, int f, msnap *out) {
    char full[160], key[IV_RANK_LABEL];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->s[i].name, full) || !prom_rank_key(d->s[i].labels, key, sizeof key)) continue;
        int r = 0;
        while (r < out->n_ranks && strcmp(out->rank[r].key, key)) r++;
        if (r == out->n_ranks) {
            if (r == IV_MAX_RANKS) continue;
            msnap_rank *nr = &out->rank[out->n_ranks++];
            memset(nr, 0, sizeof *nr);
            snprintf(nr->key, sizeof nr->key, "%s", key);
            nr->drafts = nr->accepted = nr->steps = nr->committed = nr->running = nr->g_accept_len = NAN;
        }
        double *v = rank_field(&out->rank[r], f);
        *v = isnan(*v) ? d->s[i].value : *v + d->s[i].value;
    }
}

int msnap_parse(msrc_kind k, const char *text, msnap *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->drafts = out->draft_tokens = out->accepted = out->gen_tokens = NAN;
    out->steps = out->committed = NAN;
    out->running = out->waiting = out->g_accept_len = out->g_accept_rate = out->g_gen_tps = NAN;
    if (k == MSRC_AUTO || k == MSRC_NONE) return errf(err, errlen, "metrics: no source kind to parse as");
    prom_doc d;
    if (prom_parse(text, &d, err, errlen)) return -1;
    const char *px = k == MSRC_SPECBED ? "specbed:" : k == MSRC_VLLM ? "vllm:" : k == MSRC_LLAMACPP ? "llamacpp:" : "sglang:";
    int spec = 0;
    if (k == MSRC_SGLANG) {
        out->g_accept_len = mean_of(&d, px, "spec_accept_length", &spec);
        out->g_accept_rate = mean_of(&d, px, "spec_accept_rate", NULL);
        by_rank(&d, px, "spec_accept_length", RK_GAUGE_AL, out);
        by_rank(&d, px, "num_running_reqs", RK_RUNNING, out);
        out->g_gen_tps = get(&d, px, "gen_throughput", NULL);
        out->running = get(&d, px, "num_running_reqs", NULL);
        out->waiting = get(&d, px, "num_queue_reqs", NULL);
        out->gen_tokens = get(&d, px, "generation_tokens_total", NULL);
        out->has_spec = spec;
        prom_free(&d);
        return 0;
    }
    out->drafts = get(&d, px, "spec_decode_num_drafts_total", &spec);
    out->draft_tokens = get(&d, px, "spec_decode_num_draft_tokens_total", &spec);
    out->accepted = get(&d, px, "spec_decode_num_accepted_tokens_total", &spec);
    out->has_spec = spec;
    out->steps = get(&d, px, "spec_decode_num_verify_steps_total", NULL);
    out->committed = get(&d, px, "spec_decode_num_committed_tokens_total", NULL);
    by_rank(&d, px, "spec_decode_num_drafts_total", RK_DRAFTS, out);
    by_rank(&d, px, "spec_decode_num_accepted_tokens_total", RK_ACCEPTED, out);
    by_rank(&d, px, "spec_decode_num_verify_steps_total", RK_STEPS, out);
    by_rank(&d, px, "spec_decode_num_committed_tokens_total", RK_COMMITTED, out);
    by_rank(&d, px, k == MSRC_LLAMACPP ? "requests_processing" : "num_requests_running", RK_RUNNING, out);
    if (k == MSRC_LLAMACPP) {
        out->gen_tokens = get(&d, px, "tokens_predicted_total", NULL);
        out->running = get(&d, px, "requests_processing", NULL);
        out->waiting = get(&d, px, "requests_deferred", NULL);
    } else {
        out->gen_tokens = get(&d, px, "generation_tokens_total", NULL);
        out->running = get(&d, px, "num_requests_running", NULL);
        out->waiting = get(&d, px, "num_requests_waiting", NULL);
    }
    /* Per-position counters by their position label 0..IV_MAX_POS-1; which
     * ones were present is kept (a lazily created series is not a zero). */
    char full[160];
    snprintf(full, sizeof full, "%sspec_decode_num_accepted_tokens_per_pos_total", px);
    for (int i = 0; i < IV_MAX_POS; i++) {
        char pos[16];
        snprintf(pos, sizeof pos, "%d", i);
        int n;
        double v = prom_sum(&d, full, "position", pos, &n);
        if (!n) continue;
        out->per_pos[i] = v;
        out->pos_mask |= 1u << i;
    }
    prom_free(&d);
    return 0;
}

static double delta(double a, double b) {
    if (isnan(a) || isnan(b) || b < a) return NAN;
    return b - a;
}

/* The deepest position the run can have drafted (module comment), given the
 * accepted counts dp[0..n-1] (NaN = not reported), S drafts and D draft
 * tokens; n - 1 when the counts do not allow the bound. */
static int deepest_drafted(const double *dp, int n, double S, double D) {
    if (!(S > 0) || isnan(D) || D < S) return n - 1;
    double suf[IV_MAX_POS];
    double m = 0;
    int last_acc = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (!isnan(dp[i]) && dp[i] > m) m = dp[i];
        if (!isnan(dp[i]) && dp[i] > 0 && !last_acc) last_acc = i;
        suf[i] = m;
    }
    double need = S;
    int deepest = 0;
    for (int p = 1; p < n; p++) {
        need += suf[p] > 1 ? suf[p] : 1;
        if (need > D + 1e-9) break;
        deepest = p;
    }
    return deepest > last_acc ? deepest : last_acc;   /* an accepted count is proof of drafting */
}

void msnap_totals(const msnap *a, const msnap *b, mtotals *out) {
    memset(out, 0, sizeof *out);
    double steps = delta(a->steps, b->steps), committed = delta(a->committed, b->committed);
    int by_steps = !isnan(steps) && !isnan(committed);
    out->num_drafts = delta(a->drafts, b->drafts);
    out->steps = by_steps ? steps : NAN;
    out->drafts = by_steps ? steps : out->num_drafts;
    out->draft_tokens = delta(a->draft_tokens, b->draft_tokens);
    out->accepted = delta(a->accepted, b->accepted);
    out->accept_len = out->accept_rate = NAN;
    if (by_steps && steps > 0) out->accept_len = committed / steps;
    else if (!by_steps && out->drafts > 0 && !isnan(out->accepted)) out->accept_len = 1.0 + out->accepted / out->drafts;
    if (out->draft_tokens > 0 && !isnan(out->accepted)) out->accept_rate = out->accepted / out->draft_tokens;
    /* vLLM: 1 + accepted / drafts if drafts > 0 else 0.0 (vllm/benchmarks/serve.py) */
    out->vllm_accept_len = NAN;
    if (!isnan(out->num_drafts) && !isnan(out->accepted))
        out->vllm_accept_len = out->num_drafts > 0 ? 1.0 + out->accepted / out->num_drafts : 0.0;
    for (int i = 0; i < IV_MAX_POS; i++) out->pos_rate[i] = out->vllm_pos_rate[i] = NAN;
    if (!(out->drafts > 0) && !(out->num_drafts > 0)) return;
    unsigned any = a->pos_mask | b->pos_mask;
    int n = 0;
    for (int i = 0; i < IV_MAX_POS; i++) if (any >> i & 1) n = i + 1;
    double dp[IV_MAX_POS];
    for (int i = 0; i < n; i++) {
        int in_a = a->pos_mask >> i & 1, in_b = b->pos_mask >> i & 1;
        dp[i] = NAN;
        if (!in_a && !in_b) continue;                       /* never created: not reported */
        double va = in_a ? a->per_pos[i] : 0.0;             /* created during the run: counts from 0 */
        double vb = in_b ? b->per_pos[i] : va;              /* vanished: no change (vLLM's rule) */
        dp[i] = delta(va, vb);
    }
    /* vLLM's list: every position seen, over num_drafts, no pruning
     * (vllm/benchmarks/serve.py, benchmark(): per_pos_rates) */
    if (out->num_drafts > 0)
        for (int i = 0; i < n; i++) {
            if (!((a->pos_mask | b->pos_mask) >> i & 1)) continue;   /* vLLM lists the positions seen, in order */
            out->vllm_pos_rate[out->vllm_n_pos++] = isnan(dp[i]) ? NAN : dp[i] / out->num_drafts;
        }
    if (!(out->drafts > 0)) return;
    int deepest = deepest_drafted(dp, n, out->num_drafts, out->draft_tokens);
    for (int i = 0; i <= deepest && i < n; i++) {
        out->pos_rate[i] = isnan(dp[i]) ? NAN : dp[i] / out->drafts;
        if (!isnan(out->pos_rate[i])) out->n_pos = i + 1;
    }
}

/* The ranks of b (matched by key in a) into the row: each rank's accept
 * length by the same definition as the row's own. */
static void ranks_interval(msrc_kind k, const msnap *a, const msnap *b, iv_row *r) {
    for (int i = 0; i < b->n_ranks && r->n_ranks < IV_MAX_RANKS; i++) {
        const msnap_rank *y = &b->rank[i], *x = NULL;
        for (int j = 0; j < a->n_ranks && !x; j++)
            if (!strcmp(a->rank[j].key, y->key)) x = &a->rank[j];
        iv_rank *o = &r->rank[r->n_ranks++];
        snprintf(o->label, sizeof o->label, "%s", y->key);
        o->accept_len = o->drafts = NAN;
        o->running = y->running;
        if (k == MSRC_SGLANG) {
            if (y->g_accept_len > 0) o->accept_len = y->g_accept_len;
            continue;
        }
        /* a rank absent from the start snapshot counts from 0 (created lazily) */
        double dd = delta(x ? x->drafts : 0, y->drafts), da = delta(x ? x->accepted : 0, y->accepted);
        double ds = delta(x ? x->steps : 0, y->steps), dc = delta(x ? x->committed : 0, y->committed);
        if (!isnan(ds) && !isnan(dc)) {
            o->drafts = ds;
            if (ds > 0) o->accept_len = dc / ds;
        } else {
            o->drafts = dd;
            if (dd > 0 && !isnan(da)) o->accept_len = 1.0 + da / dd;
        }
    }
}

void msnap_interval(msrc_kind k, const msnap *a, const msnap *b, double t0, double t1, iv_row *r) {
    iv_row_clear(r);
    r->t_start = t0;
    r->t_end = t1;
    r->running = b->running;
    r->waiting = b->waiting;
    r->basis = k == MSRC_SGLANG ? IV_BASIS_GAUGE : k == MSRC_LLAMACPP ? IV_BASIS_COMPLETION : IV_BASIS_STEP;
    double dt = t1 - t0;
    double dg = delta(a->gen_tokens, b->gen_tokens);
    if (dt > 0 && !isnan(dg)) r->gen_tps = dg / dt;
    if (k == MSRC_SGLANG) {
        /* Gauges hold the value of SGLang's last decode log interval. */
        if (b->g_accept_len > 0) r->accept_len = b->g_accept_len;
        if (b->g_accept_rate > 0) r->accept_rate = b->g_accept_rate;
        if (isnan(r->gen_tps)) r->gen_tps = b->g_gen_tps;
        ranks_interval(k, a, b, r);
        return;
    }
    mtotals t;
    msnap_totals(a, b, &t);
    r->drafts = t.drafts;
    r->num_drafts = t.num_drafts;
    r->verify_steps = t.steps;
    r->draft_tokens = t.draft_tokens;
    r->accepted = t.accepted;
    r->accept_len = t.accept_len;
    r->accept_rate = t.accept_rate;
    r->n_pos = t.n_pos;
    memcpy(r->pos_rate, t.pos_rate, sizeof r->pos_rate);
    ranks_interval(k, a, b, r);
}
