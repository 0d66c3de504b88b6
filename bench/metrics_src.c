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
    r->drafts = r->draft_tokens = r->accepted = NAN;
    r->inflight = r->client_tps = NAN;
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
        out->g_accept_len = get(&d, px, "spec_accept_length", &spec);
        out->g_accept_rate = get(&d, px, "spec_accept_rate", NULL);
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
    if (k == MSRC_LLAMACPP) {
        out->gen_tokens = get(&d, px, "tokens_predicted_total", NULL);
        out->running = get(&d, px, "requests_processing", NULL);
        out->waiting = get(&d, px, "requests_deferred", NULL);
    } else {
        out->gen_tokens = get(&d, px, "generation_tokens_total", NULL);
        out->running = get(&d, px, "num_requests_running", NULL);
        out->waiting = get(&d, px, "num_requests_waiting", NULL);
    }
    /* Per-position counters: position labels 0..IV_MAX_POS-1, contiguous. */
    char full[160];
    snprintf(full, sizeof full, "%sspec_decode_num_accepted_tokens_per_pos_total", px);
    for (int i = 0; i < IV_MAX_POS; i++) {
        char pos[16];
        snprintf(pos, sizeof pos, "%d", i);
        int n;
        double v = prom_sum(&d, full, "position", pos, &n);
        if (!n) break;
        out->per_pos[i] = v;
        out->n_pos = i + 1;
    }
    prom_free(&d);
    return 0;
}

static double delta(double a, double b) {
    if (isnan(a) || isnan(b) || b < a) return NAN;
    return b - a;
}

void msnap_totals(const msnap *a, const msnap *b, mtotals *out) {
    memset(out, 0, sizeof *out);
    double steps = delta(a->steps, b->steps), committed = delta(a->committed, b->committed);
    int by_steps = !isnan(steps) && !isnan(committed);
    out->drafts = by_steps ? steps : delta(a->drafts, b->drafts);
    out->draft_tokens = delta(a->draft_tokens, b->draft_tokens);
    out->accepted = delta(a->accepted, b->accepted);
    out->accept_len = out->accept_rate = NAN;
    if (by_steps && steps > 0) out->accept_len = committed / steps;
    else if (!by_steps && out->drafts > 0 && !isnan(out->accepted)) out->accept_len = 1.0 + out->accepted / out->drafts;
    if (out->draft_tokens > 0 && !isnan(out->accepted)) out->accept_rate = out->accepted / out->draft_tokens;
    int np = a->n_pos < b->n_pos ? a->n_pos : b->n_pos;
    if (out->drafts > 0) {
        for (int i = 0; i < np; i++) {
            double dp = delta(a->per_pos[i], b->per_pos[i]);
            out->pos_rate[i] = isnan(dp) ? NAN : dp / out->drafts;
        }
        out->n_pos = np;
    }
}

void msnap_interval(msrc_kind k, const msnap *a, const msnap *b, double t0, double t1, iv_row *r) {
    iv_row_clear(r);
    r->t_start = t0;
    r->t_end = t1;
    r->running = b->running;
    r->waiting = b->waiting;
    double dt = t1 - t0;
    double dg = delta(a->gen_tokens, b->gen_tokens);
    if (dt > 0 && !isnan(dg)) r->gen_tps = dg / dt;
    if (k == MSRC_SGLANG) {
        /* Gauges hold the value of SGLang's last decode log interval. */
        if (b->g_accept_len > 0) r->accept_len = b->g_accept_len;
        if (b->g_accept_rate > 0) r->accept_rate = b->g_accept_rate;
        if (isnan(r->gen_tps)) r->gen_tps = b->g_gen_tps;
        return;
    }
    mtotals t;
    msnap_totals(a, b, &t);
    r->drafts = t.drafts;
    r->draft_tokens = t.draft_tokens;
    r->accepted = t.accepted;
    r->accept_len = t.accept_len;
    r->accept_rate = t.accept_rate;
    r->n_pos = t.n_pos;
    memcpy(r->pos_rate, t.pos_rate, sizeof r->pos_rate);
}
