/* fault.c — see fault.h. Owns the fault kinds' triggers and what each
 * does to rows or logits; the batch only asks and applies. */
#include "fault.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "errmsg.h"

static const char *const KINDS[] = {"", "collision", "flat", "window", "nondet"};

int fault_parse(const char *spec, spec_fault *f, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    *f = (spec_fault){.kind = FAULT_COLLISION, .min_rows = 4, .p = 0.25, .below = 128, .trigger = -1, .seed = 1};
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", spec ? spec : "") >= (int)sizeof buf)
        return errf(err, errlen, "--inject-fault: '%s' is too long", spec);
    char *save = NULL;
    int first = 1;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save), first = 0) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            int k = 1;
            while (k <= 4 && strcmp(kv, KINDS[k])) k++;
            if (!first || k > 4)
                return errf(err, errlen, "--inject-fault: '%s' is not a fault kind (collision, flat, window, nondet) "
                            "or key=value", kv);
            f->kind = (fault_kind)k;
            continue;
        }
        *eq = 0;
        const char *v = eq + 1;
        if (!strcmp(kv, "scope")) {
            if (!strcmp(v, "row")) f->batch = 0;
            else if (!strcmp(v, "batch")) f->batch = 1;
            else return errf(err, errlen, "--inject-fault: scope=%s (expected row or batch)", v);
            continue;
        }
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end || !isfinite(x) || x < 0)
            return errf(err, errlen, "--inject-fault: %s=%s is not a non-negative number", kv, v);
        if (!strcmp(kv, "rows") && x >= 1 && x <= 1 << 20) f->min_rows = (int)x;
        else if (!strcmp(kv, "depth") && x <= 16) f->depth = (int)x;
        else if (!strcmp(kv, "p") && x <= 1) f->p = x;
        else if (!strcmp(kv, "first")) f->first_s = x;
        else if (!strcmp(kv, "below") && x >= 1 && x <= 1 << 24) f->below = (int)x;
        else if (!strcmp(kv, "trigger") && x <= 1 << 24) f->trigger = (int)x;
        else if (!strcmp(kv, "seed")) f->seed = (uint64_t)x;
        else return errf(err, errlen, "--inject-fault: unknown key or value out of range: %s=%s", kv, v);
    }
    return 0;
}

void fault_describe(const spec_fault *f, char *buf, size_t n) {
    switch (f->kind) {
    case FAULT_COLLISION:
        snprintf(buf, n, "collision: %s hidden state overwritten in verify steps of >= %d rows%s%.0d, "
                 "p=%g%s, seed=%llu", f->batch ? "every draft row's" : "one draft row's", f->min_rows,
                 f->depth ? " at depth " : "", f->depth, f->p,
                 f->first_s > 0 ? " during the first seconds after boot" : "", (unsigned long long)f->seed);
        return;
    case FAULT_FLAT:
        snprintf(buf, n, "flat: a fixed context-free next-token distribution at positions below %d after token %d",
                 f->below, f->trigger);
        return;
    case FAULT_WINDOW:
        snprintf(buf, n, "window: keys more than %d positions back are invisible to attention", f->below);
        return;
    case FAULT_NONDET:
        snprintf(buf, n, "nondet: one logits row per step perturbed with p=%g from a per-process seed", f->p);
        return;
    }
    snprintf(buf, n, "none");
}

void fault_arm(fault_state *s, const spec_fault *f, double now) {
    memset(s, 0, sizeof *s);
    s->f = *f;
    s->t0 = now;
    uint64_t seed = f->seed;
    if (f->kind == FAULT_NONDET) {   /* what differs between fresh processes */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20;
    }
    rng_seed(&s->rng, seed);
}

int fault_pick_row(fault_state *s, double now, int verify_rows, const int *k, const int *row0, int n,
                   unsigned char *corrupt) {
    if (s->f.kind != FAULT_COLLISION || verify_rows < s->f.min_rows) return 0;
    if (s->f.first_s > 0 && now - s->t0 > s->f.first_s) return 0;
    if (rng_uniform(&s->rng) >= s->f.p) return 0;
    /* one draft row (never a request's first row, which holds no draft) of
     * one request that drafted — of the chosen depth, if one was given */
    int cand = 0;
    for (int i = 0; i < n; i++) cand += k[i] > 0 && (!s->f.depth || k[i] == s->f.depth);
    if (!cand) return 0;
    if (s->f.batch) {   /* every draft row of every eligible request */
        for (int i = 0; i < n; i++)
            if (k[i] > 0 && (!s->f.depth || k[i] == s->f.depth))
                for (int r = 1; r <= k[i]; r++) corrupt[row0[i] + r] = 1;
        s->injected++;
        return 1;
    }
    int pick = (int)(rng_next(&s->rng) % (uint64_t)cand);
    for (int i = 0; i < n; i++) {
        if (k[i] <= 0 || (s->f.depth && k[i] != s->f.depth) || pick--) continue;
        int r = 1 + (int)(rng_next(&s->rng) % (uint64_t)k[i]);
        corrupt[row0[i] + r] = 1;
        s->injected++;
        return 1;
    }
    return 0;
}

/* The fixed context-free distribution of the Flash report: a few
 * formatting tokens on top, the rest flat; independent of the context. */
static void flat_row(float *lg, int V) {
    for (int i = 0; i < V; i++) lg[i] = -12.0f;
    static const float top[6] = {-2.25f, -2.37f, -2.74f, -3.1f, -3.3f, -3.6f};
    for (int j = 0; j < 6 && j < V; j++) lg[(j * 2654435761u + 10u) % (unsigned)V] = top[j];
}

int fault_logits(fault_state *s, float *logits, int V, const int *tok, const int *pos, int n) {
    int changed = 0;
    if (s->f.kind == FAULT_FLAT) {
        for (int i = 0; i < n; i++)
            if (pos[i] < s->f.below && (s->f.trigger < 0 || tok[i] == s->f.trigger)) {
                flat_row(logits + (size_t)i * V, V);
                changed++;
            }
    } else if (s->f.kind == FAULT_NONDET && n > 0 && rng_uniform(&s->rng) < s->f.p) {
        /* garbage in one row: a random token lifted above the row's maximum */
        float *lg = logits + (size_t)(rng_next(&s->rng) % (uint64_t)n) * V;
        float mx = lg[0];
        for (int j = 1; j < V; j++) mx = lg[j] > mx ? lg[j] : mx;
        lg[rng_next(&s->rng) % (uint64_t)V] = mx + 1.0f;
        changed = 1;
    }
    s->injected += changed;
    return changed;
}
