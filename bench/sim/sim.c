/* sim.c — the event loop of `specbed simulate` (sim.h): replicas, the load
 * balancer, traffic, one scheduler step per replica, acceptance sampling,
 * and the metrics of one run. Arithmetic only; no files.
 *
 * Memory: requests live in one pool (indices stay valid while the pool
 * grows; a finished request's slot is reused). Per-request TTFT, TPOT and
 * E2E are kept exactly; ITL (one sample per step that gave a request
 * tokens: far more samples than requests) goes into a log-binned histogram
 * whose percentiles are within 0.1% of the exact ones, its mean exact. */
#include "sim.h"
#include "errmsg.h"
#include "run_cols.h"
#include "stats.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const SIM_METRIC_NAMES[SIM_N_METRICS] = {
    "completed", "duration", "total_input_tokens", "total_output_tokens",
    "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
    RUN_COL_ACCEPT_LENGTH, "spec_decode_acceptance_rate",
    "specbed_sim_steps", "specbed_sim_mean_rows", "specbed_sim_max_waiting",
};

void sim_alpha_from_rates(const double *p, int n, double *alpha) {
    double prev = 1;
    for (int i = 0; i < n; i++) {
        double pi = p[i] > 0 ? p[i] : 0;
        alpha[i] = prev > 0 ? pi / prev : 0;
        if (alpha[i] > 1) alpha[i] = 1;
        prev = pi;
    }
}

int sim_sample_accept(const double *alpha, int n, int k, ld_rng *r) {
    int a = 0;
    while (a < k && a < n && ld_rng_uniform(r) < alpha[a]) a++;
    return a;
}

void sim_config_defaults(sim_config *c) {
    memset(c, 0, sizeof *c);
    c->max_running = 16;
    c->row_budget = 16 * (SIM_MAX_DEPTH + 1) + 64;   /* specbed serve: max_running × 17 + 64, ≥ 256 */
    c->replicas = 1;
    c->balance = SIM_BAL_ROUND_ROBIN;
    c->burstiness = 1;
    c->prompt_len = 256;
    c->output_len = 128;
    c->draft_s_per_token = -1;   /* the cost table's */
    c->profile.n = 1;
    c->profile.ph[0].dur_s = 60;
    c->profile.ph[0].concurrency = 1;
}

int sim_config_check(const sim_config *c, char *err, size_t errlen) {
    if (c->max_running < 1) return errf(err, errlen, "max-running must be ≥ 1");
    if (c->row_budget < c->max_running)
        return errf(err, errlen, "row-budget %d is below max-running %d: every running request needs a row per step",
                    c->row_budget, c->max_running);
    if (c->prefill_chunk < 0) return errf(err, errlen, "prefill-chunk must be ≥ 0");
    if (!c->cost || c->cost->n < 1) return errf(err, errlen, "no cost curve");
    if (c->depth < 0 || c->depth > SIM_MAX_DEPTH) return errf(err, errlen, "depth %d outside 0..%d", c->depth, SIM_MAX_DEPTH);
    if (c->depth > 0 && !c->acc) return errf(err, errlen, "depth %d needs acceptance rates", c->depth);
    if (c->replicas < 1 || c->replicas > SIM_MAX_REPLICAS) return errf(err, errlen, "replicas must be in 1..%d", SIM_MAX_REPLICAS);
    if (!(c->burstiness > 0)) return errf(err, errlen, "burstiness must be > 0");
    if (!(c->think_s >= 0) || !isfinite(c->think_s)) return errf(err, errlen, "think time must be ≥ 0");
    if (!(c->token_overhead_s >= 0) || !isfinite(c->token_overhead_s)) return errf(err, errlen, "token overhead must be ≥ 0");
    if (!(c->request_overhead_s >= 0) || !isfinite(c->request_overhead_s))
        return errf(err, errlen, "request overhead must be ≥ 0");
    if (c->profile.n < 1) return errf(err, errlen, "no traffic phases");
    for (int i = 0; i < c->profile.n; i++) {
        const ld_phase *p = &c->profile.ph[i];
        if (!(p->dur_s > 0)) return errf(err, errlen, "phase %d has no duration", i + 1);
        if (isinf(p->dur_s) && c->n_requests <= 0) return errf(err, errlen, "an endless phase needs a request count");
        if (!(p->concurrency > 0) && !(p->rate > 0 && isfinite(p->rate)))
            return errf(err, errlen, "phase %d needs a concurrency or a finite rate", i + 1);
    }
    if (!c->lengths && (c->prompt_len < 1 || c->output_len < 1)) return errf(err, errlen, "prompt and output lengths must be ≥ 1");
    if (c->lengths && c->lengths->n < 1) return errf(err, errlen, "the length list is empty");
    if (c->acc) {
        if (!(c->acc->proposal_rate > 0 && c->acc->proposal_rate <= 1)) return errf(err, errlen, "proposal_rate must be in (0, 1]");
        if (!(c->acc->draft_fill > 0 && c->acc->draft_fill <= 1)) return errf(err, errlen, "draft_fill must be in (0, 1]");
    }
    return 0;
}

/* ---- state ---- */

typedef struct {
    double arrival, first, last;   /* arrival, first token, latest token times */
    int prompt, output, fed, gen;  /* prompt rows fed, output tokens committed */
    int replica, steps;
    int k, chunk;                  /* this step: drafts (decoding) or prompt rows (prefilling) */
    unsigned char drafted;         /* its drafter has begun (its first proposal ran) */
    unsigned char decoding, closed; /* decoding this step; came from a closed-loop client */
    int next_free;
} req;

typedef struct {
    int *run, n_run;               /* running request indices, admission order [max_running] */
    int *wq; long wq_head, wq_n, wq_cap; /* waiting FIFO ring */
    long load;                     /* requests dispatched here and not yet finished */
    int state;                     /* 0 idle, 1 batch start pending, 2 step in flight */
    double step_start;
} replica;

/* At equal times, in this order: a request that reaches a replica's queue
 * at the instant a batch forms joins it. */
enum { EV_STEP_END = 0, EV_PHASE = 1, EV_CLIENT = 2, EV_ARRIVAL = 3, EV_ENQUEUE = 4, EV_BATCH = 5 };
typedef struct { double t; int kind, who; long gen; } event;

/* ITL histogram: S linear sub-bins per octave (frexp, no log per sample),
 * octaves 2^-30 s (~1 ns) .. 2^20 s; a bin is at most 1/S = 0.2% wide
 * relative to its value, and a percentile is read at the bin's middle. */
#define ITL_S 512
#define ITL_EMIN (-30)
#define ITL_EMAX 20
#define ITL_BINS ((ITL_EMAX - ITL_EMIN) * ITL_S + 2)

typedef struct {
    const sim_config *c;
    double alpha[SIM_MAX_POS];
    ld_rng traffic, accept;
    req *pool; long pool_n, pool_cap; int free_head;
    replica *rep;
    event *heap; int heap_n, heap_cap;
    int phase;                     /* current phase, -1 when arrivals have stopped */
    long open_gen;                 /* invalidates a pending arrival of an earlier phase */
    int closed_active;
    long arrivals;
    int rr;                        /* round-robin cursor */
    /* metrics */
    dvec ttft, tpot, e2el;
    long *itl_bins; long itl_n; double itl_sum;
    long good, done, in_tok, out_tok, steps;
    double rows_sum, last_finish;
    long max_waiting;
    sim_result *res;
} sim;

/* ---- heap ordered by (t, kind, who) ---- */

static int ev_less(const event *a, const event *b) {
    if (a->t != b->t) return a->t < b->t;
    if (a->kind != b->kind) return a->kind < b->kind;
    return a->who < b->who;
}

static int heap_push(sim *s, event e) {
    if (s->heap_n == s->heap_cap) {
        int nc = s->heap_cap ? s->heap_cap * 2 : 64;
        event *nh = realloc(s->heap, (size_t)nc * sizeof *nh);
        if (!nh) return -1;
        s->heap = nh;
        s->heap_cap = nc;
    }
    int i = s->heap_n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!ev_less(&e, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = e;
    return 0;
}

static event heap_pop(sim *s) {
    event top = s->heap[0], last = s->heap[--s->heap_n];
    int i = 0, n = s->heap_n;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const event *best = &last;
        if (l < n && ev_less(&s->heap[l], best)) { m = l; best = &s->heap[l]; }
        if (r < n && ev_less(&s->heap[r], best)) m = r;
        if (m == i) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (n) s->heap[i] = last;
    return top;
}

/* ---- requests ---- */

static int req_new(sim *s, double t, int closed, char *err, size_t errlen) {
    const sim_config *c = s->c;
    long cap = c->max_arrivals > 0 ? c->max_arrivals : 50000000L;
    if (s->arrivals >= cap)
        return errf(err, errlen, "more than %ld arrivals in one run: the load is far beyond what the fleet serves "
                    "(shorten --duration, lower the load, or set --requests)", cap);
    int id;
    if (s->free_head >= 0) {
        id = s->free_head;
        s->free_head = s->pool[id].next_free;
    } else {
        if (s->pool_n == s->pool_cap) {
            long nc = s->pool_cap ? s->pool_cap * 2 : 1024;
            req *np = realloc(s->pool, (size_t)nc * sizeof *np);
            if (!np) return errf(err, errlen, "out of memory (%ld requests in flight)", s->pool_n);
            s->pool = np;
            s->pool_cap = nc;
        }
        id = (int)s->pool_n++;
    }
    req *q = &s->pool[id];
    memset(q, 0, sizeof *q);
    q->arrival = t;
    q->closed = (unsigned char)closed;
    if (c->lengths) {
        int i = (int)(ld_rng_uniform(&s->traffic) * c->lengths->n);
        if (i >= c->lengths->n) i = c->lengths->n - 1;
        q->prompt = c->lengths->prompt[i];
        q->output = c->lengths->output[i] > 0 ? c->lengths->output[i] : c->output_len;
    } else {
        q->prompt = c->prompt_len;
        q->output = c->output_len;
    }
    if (q->prompt < 1) q->prompt = 1;
    if (q->output < 1) q->output = 1;
    s->arrivals++;
    if (c->n_requests > 0 && s->arrivals >= c->n_requests) s->phase = -1;   /* the last one */
    if (s->res->rec) {
        if (s->arrivals > s->res->n_rec) {   /* an open loop's arrivals are not known ahead */
            long nc = s->res->n_rec * 2;
            sim_req_rec *nr = realloc(s->res->rec, (size_t)nc * sizeof *nr);
            if (!nr) return errf(err, errlen, "out of memory");
            memset(nr + s->res->n_rec, 0, (size_t)(nc - s->res->n_rec) * sizeof *nr);
            s->res->rec = nr;
            s->res->n_rec = nc;
        }
        sim_req_rec *r = &s->res->rec[s->arrivals - 1];
        memset(r, 0, sizeof *r);
        r->arrival_s = t;
        r->prompt = q->prompt;
        r->output = q->output;
    }
    q->next_free = (int)(s->arrivals - 1);   /* record index while in flight */
    return id;
}

static int replica_pick(sim *s) {
    int n = s->c->replicas;
    if (n == 1) return 0;
    if (s->c->balance == SIM_BAL_ROUND_ROBIN) {
        int r = s->rr;
        s->rr = (s->rr + 1) % n;
        return r;
    }
    /* least loaded: fewest running + waiting; ties go to the first from a rotating start */
    int best = -1;
    long bl = 0;
    for (int j = 0; j < n; j++) {
        int r = (s->rr + j) % n;
        long l = s->rep[r].load;
        if (best < 0 || l < bl) { best = r; bl = l; }
    }
    s->rr = (s->rr + 1) % n;
    return best;
}

/* Request id joins its replica's waiting queue. */
static int enqueue(sim *s, int id, double t) {
    int r = s->pool[id].replica;
    replica *R = &s->rep[r];
    if (R->wq_n == R->wq_cap) {
        long nc = R->wq_cap ? R->wq_cap * 2 : 64;
        int *nq = malloc((size_t)nc * sizeof *nq);
        if (!nq) return -1;
        for (long i = 0; i < R->wq_n; i++) nq[i] = R->wq[(R->wq_head + i) % R->wq_cap];
        free(R->wq);
        R->wq = nq;
        R->wq_cap = nc;
        R->wq_head = 0;
    }
    R->wq[(R->wq_head + R->wq_n) % R->wq_cap] = id;
    R->wq_n++;
    if (R->state == 0) {
        R->state = 1;
        if (heap_push(s, (event){t, EV_BATCH, r, 0})) return -1;
    }
    return 0;
}

/* The balancer picks a replica at arrival; the request reaches its queue
 * request_overhead_s later (the server's HTTP and tokenising). */
static int dispatch(sim *s, int id, double t) {
    int r = replica_pick(s);
    s->pool[id].replica = r;
    s->rep[r].load++;
    if (r < 64) s->res->replica_requests[r]++;
    if (s->res->rec) s->res->rec[s->pool[id].next_free].replica = r;
    if (s->c->request_overhead_s > 0) return heap_push(s, (event){t + s->c->request_overhead_s, EV_ENQUEUE, id, 0});
    return enqueue(s, id, t);
}

static int arrive(sim *s, double t, int closed, char *err, size_t errlen) {
    int id = req_new(s, t, closed, err, errlen);
    if (id < 0) return -1;
    if (closed) s->closed_active++;
    if (dispatch(s, id, t)) return errf(err, errlen, "out of memory");
    return 0;
}

/* Closed-loop clients of the current phase top up to its concurrency. */
static int closed_fill(sim *s, double t, char *err, size_t errlen) {
    while (s->phase >= 0 && s->c->profile.ph[s->phase].concurrency > 0 &&
           s->closed_active < s->c->profile.ph[s->phase].concurrency)
        if (arrive(s, t, 1, err, errlen)) return -1;
    return 0;
}

static double gap(sim *s) {
    const ld_phase *p = &s->c->profile.ph[s->phase];
    return ld_interarrival(&s->traffic, p->rate, s->c->burstiness);
}

/* ---- one replica's step ---- */

static int batch_start(sim *s, int r, double t) {
    const sim_config *c = s->c;
    replica *R = &s->rep[r];
    while (R->n_run < c->max_running && R->wq_n) {
        R->run[R->n_run++] = R->wq[R->wq_head];
        R->wq_head = (R->wq_head + 1) % R->wq_cap;
        R->wq_n--;
    }
    if (R->wq_n > s->max_waiting) s->max_waiting = R->wq_n;   /* left waiting once the batch is full */
    if (!R->n_run) { R->state = 0; return 0; }
    int n_dec = 0;
    for (int i = 0; i < R->n_run; i++) n_dec += s->pool[R->run[i]].fed >= s->pool[R->run[i]].prompt;
    int k_cap = n_dec ? c->row_budget / n_dec - 1 : 0;
    double fill = c->acc ? c->acc->draft_fill : 1, prop = c->acc ? c->acc->proposal_rate : 1;
    double rows = 0, drafted = 0;
    int n_seqs = 0, n_drafting = 0;   /* sequences in the step (a row's cost depends on how many share it); with drafts */
    double no_logits = 0;             /* prompt rows whose logits nobody needs (the curves count every row's) */
    /* Σ rows × (span start − the table's history): the context the step's
     * rows attend to beyond (or short of) what the curves were measured at */
    const double H = c->cost->history, per_ctx = H > 0 ? c->cost->context_seconds_per_row_token : 0;
    double ctx = 0;
    double tokens = 0;                /* expected tokens the step commits (first tokens included) */
    double begun = 0;                 /* prompt tokens of requests drafting for the first time */
    for (int i = 0; i < R->n_run; i++) {
        req *q = &s->pool[R->run[i]];
        q->k = q->chunk = 0;
        q->decoding = q->fed >= q->prompt;
        if (!q->decoding) continue;
        int k = c->depth, room = q->output - q->gen - 1;
        if (k > room) k = room;
        if (k > k_cap) k = k_cap;
        if (k < 0) k = 0;
        if (k > 0 && prop < 1 && ld_rng_uniform(&s->accept) >= prop) k = 0;   /* no proposal this step */
        q->k = k;
        n_seqs++;
        n_drafting += k > 0;
        if (k > 0 && !q->drafted) {   /* its first proposal catches the drafter up on the prompt */
            begun += q->prompt;
            q->drafted = 1;
        }
        rows += 1 + k * fill;
        drafted += k * fill;
        ctx += (1 + k * fill) * (q->prompt + q->gen - 1 - H);   /* the KV holds the prompt and all but the last token */
        tokens += 1;   /* E(k) = 1 + Σ_{i<k} p_i (a short draft already counts as a rejection in p_i) */
        for (int j = 0; j < k && c->acc && j < c->acc->n_pos; j++) tokens += c->acc->p[j];
    }
    for (int i = 0; i < R->n_run && rows < c->row_budget; i++) {
        req *q = &s->pool[R->run[i]];
        if (q->decoding) continue;
        int chunk = q->prompt - q->fed, left = (int)floor(c->row_budget - rows);
        if (c->prefill_chunk > 0 && chunk > c->prefill_chunk) chunk = c->prefill_chunk;
        if (chunk > left) chunk = left;
        if (chunk < 0) chunk = 0;
        q->chunk = chunk;
        rows += chunk;
        n_seqs += chunk > 0;
        no_logits += chunk - (chunk > 0 && q->fed + chunk >= q->prompt);   /* only a last chunk's last row */
        ctx += chunk * (q->fed - H);
        tokens += chunk > 0 && q->fed + chunk >= q->prompt;
    }
    double full = cost_curve_at_seqs(c->cost, n_seqs, rows);
    double less = no_logits * c->cost->logits_seconds_per_row - ctx * per_ctx;
    double dt = (less < 0.75 * full ? full - less : 0.25 * full) + c->step_overhead_s + tokens * c->token_overhead_s;
    if (n_drafting) {   /* the drafter, batched over the step's drafting sequences */
        double F, T;
        cost_curve_draft_at(c->cost, n_drafting, &F, &T);
        if (c->draft_s_per_token >= 0) T = c->draft_s_per_token;   /* a given per-token cost overrides the table's */
        dt += n_drafting * F + drafted * T + begun * c->cost->draft_seconds_per_prompt_token;
    }
    if (!(dt > 0)) dt = 1e-9;
    s->rows_sum += rows;
    s->steps++;
    R->state = 2;
    R->step_start = t;
    return heap_push(s, (event){t + dt, EV_STEP_END, r, 0});
}

static int finish(sim *s, req *q, double t, char *err, size_t errlen) {
    const sim_config *c = s->c;
    double ttft = q->first - q->arrival, e2e = t - q->arrival;
    double tpot = q->output > 1 ? (e2e - ttft) / (q->gen - 1) : NAN;
    int bad = dvec_push(&s->ttft, ttft * 1e3) || dvec_push(&s->e2el, e2e * 1e3) ||
              (q->gen > 1 && dvec_push(&s->tpot, tpot * 1e3));
    if (bad) return errf(err, errlen, "out of memory");
    int good = 1;
    if (c->slo_ttft_s > 0 && ttft > c->slo_ttft_s) good = 0;
    if (c->slo_tpot_s > 0 && q->gen > 1 && tpot > c->slo_tpot_s) good = 0;
    s->good += good;
    s->done++;
    s->rep[q->replica].load--;
    s->in_tok += q->prompt;
    s->out_tok += q->gen;
    if (t > s->last_finish) s->last_finish = t;
    if (s->res->rec) {
        sim_req_rec *r = &s->res->rec[q->next_free];
        r->first_s = q->first;
        r->finish_s = t;
        r->committed = q->gen;
        r->steps = q->steps;
        r->finished++;
    }
    return 0;
}

/* A closed-loop client got its reply: it sends the next request after its think time. */
static int client_back(sim *s, double t, char *err, size_t errlen) {
    s->closed_active--;
    return closed_fill(s, t, err, errlen);
}

static void itl_add(sim *s, double dt) {
    s->itl_sum += dt;
    s->itl_n++;
    int e, b;
    double m = frexp(dt, &e);   /* dt = m · 2^e, m in [0.5, 1) */
    if (!(dt > 0) || e <= ITL_EMIN) b = 0;
    else if (e > ITL_EMAX) b = ITL_BINS - 1;
    else b = 1 + (e - 1 - ITL_EMIN) * ITL_S + (int)((2 * m - 1) * ITL_S);
    s->itl_bins[b]++;
}

static double itl_percentile(const sim *s, double p) {
    if (!s->itl_n) return NAN;
    /* the value at rank p/100·(n−1), taken at the middle of its bin */
    double rank = p / 100.0 * (double)(s->itl_n - 1);
    long acc = 0;
    for (int b = 0; b < ITL_BINS; b++) {
        acc += s->itl_bins[b];
        if ((double)acc > rank) {
            if (b == 0) return 0;
            int e = (b - 1) / ITL_S + 1 + ITL_EMIN, k = (b - 1) % ITL_S;
            return ldexp(0.5 + (k + 0.5) / (2.0 * ITL_S), e);
        }
    }
    return NAN;
}

static int step_end(sim *s, int r, double t, char *err, size_t errlen) {
    const sim_config *c = s->c;
    replica *R = &s->rep[r];
    int kept = 0, n_pos = c->acc ? c->acc->n_pos : 0;
    for (int i = 0; i < R->n_run; i++) {
        int id = R->run[i];
        req *q = &s->pool[id];
        int gave = 0;
        if (q->decoding) {
            int a = sim_sample_accept(s->alpha, n_pos, q->k, &s->accept);
            int got = a + 1;
            if (got > q->output - q->gen) got = q->output - q->gen;
            q->gen += got;
            itl_add(s, t - q->last);
            q->last = t;
            gave = 1;
            if (c->depth > 0) {
                s->res->verify_steps++;
                s->res->committed_verify += got;
                if (q->k > 0) {
                    s->res->drafts++;
                    s->res->drafted_tokens += q->k;
                    s->res->accepted_tokens += a;
                }
            }
        } else if (q->chunk > 0) {
            q->fed += q->chunk;
            if (q->fed >= q->prompt) {   /* the last chunk's logits give the first token */
                q->gen = 1;
                q->first = q->last = t;
                gave = 1;
            }
        }
        q->steps += gave;
        if (q->gen >= q->output) {
            if (finish(s, q, t, err, errlen)) return -1;
            q->next_free = s->free_head;
            s->free_head = id;
            if (q->closed) {
                if (c->think_s > 0) {
                    if (heap_push(s, (event){t + c->think_s, EV_CLIENT, -1, 0})) return errf(err, errlen, "out of memory");
                } else if (client_back(s, t, err, errlen)) return -1;
            }
        } else R->run[kept++] = id;
    }
    R->n_run = kept;
    if (R->n_run || R->wq_n) {
        R->state = 1;
        return heap_push(s, (event){t, EV_BATCH, r, 0});
    }
    R->state = 0;
    return 0;
}

/* ---- the run ---- */

static int start_phase(sim *s, int i, double t, char *err, size_t errlen) {
    const ld_profile *p = &s->c->profile;
    s->open_gen++;
    if (s->phase < 0 && i > 0) return 0;   /* arrivals already stopped (request count reached) */
    if (i >= p->n) { s->phase = -1; return 0; }
    s->phase = i;
    if (isfinite(p->ph[i].dur_s) && heap_push(s, (event){t + p->ph[i].dur_s, EV_PHASE, i + 1, 0}))
        return errf(err, errlen, "out of memory");
    if (p->ph[i].concurrency > 0) return closed_fill(s, t, err, errlen);
    if (heap_push(s, (event){t + gap(s), EV_ARRIVAL, -1, s->open_gen})) return errf(err, errlen, "out of memory");
    return 0;
}

static void summarize(sim *s) {
    double *m = s->res->m;
    for (int i = 0; i < SIM_N_METRICS; i++) m[i] = NAN;
    double dur = s->last_finish;
    m[SIM_M_COMPLETED] = (double)s->done;
    m[SIM_M_DURATION] = dur;
    m[SIM_M_TOTAL_INPUT] = (double)s->in_tok;
    m[SIM_M_TOTAL_OUTPUT] = (double)s->out_tok;
    if (dur > 0) {
        m[SIM_M_REQ_TPUT] = s->done / dur;
        m[SIM_M_GOODPUT] = s->good / dur;
        m[SIM_M_OUT_TPUT] = s->out_tok / dur;
        m[SIM_M_TOTAL_TPUT] = (s->in_tok + s->out_tok) / dur;
    }
    dvec *v[3] = {&s->ttft, &s->tpot, &s->e2el};
    int base[3] = {SIM_M_MEAN_TTFT, SIM_M_MEAN_TPOT, SIM_M_MEAN_E2EL};
    for (int j = 0; j < 3; j++) {
        st_sort(v[j]->v, v[j]->n);
        m[base[j]] = st_mean(v[j]->v, v[j]->n);
        m[base[j] + 1] = st_percentile_sorted(v[j]->v, v[j]->n, 50);
        m[base[j] + 2] = st_percentile_sorted(v[j]->v, v[j]->n, 99);
    }
    if (s->itl_n) {
        m[SIM_M_MEAN_ITL] = s->itl_sum / s->itl_n * 1e3;
        m[SIM_M_MEDIAN_ITL] = itl_percentile(s, 50) * 1e3;
        m[SIM_M_P99_ITL] = itl_percentile(s, 99) * 1e3;
    }
    if (s->c->depth > 0 && s->res->verify_steps)
        m[SIM_M_ACCEPT_LEN] = (double)s->res->committed_verify / s->res->verify_steps;
    if (s->c->depth > 0 && s->res->drafted_tokens)
        m[SIM_M_ACCEPT_RATE] = 100.0 * s->res->accepted_tokens / s->res->drafted_tokens;
    m[SIM_M_STEPS] = (double)s->steps;
    m[SIM_M_MEAN_ROWS] = s->steps ? s->rows_sum / s->steps : NAN;
    m[SIM_M_MAX_WAITING] = (double)s->max_waiting;
    s->res->arrivals = s->arrivals;
}

static void sim_free(sim *s) {
    if (s->rep)
        for (int r = 0; r < s->c->replicas; r++) { free(s->rep[r].run); free(s->rep[r].wq); }
    free(s->rep);
    free(s->pool);
    free(s->heap);
    free(s->itl_bins);
    dvec_free(&s->ttft);
    dvec_free(&s->tpot);
    dvec_free(&s->e2el);
}

int sim_run(const sim_config *c, sim_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (sim_config_check(c, err, errlen)) return -1;
    sim s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.res = out;
    s.free_head = -1;
    s.phase = 0;
    if (c->acc) sim_alpha_from_rates(c->acc->p, c->acc->n_pos, s.alpha);
    ld_rng_seed(&s.traffic, c->seed * 2 + 1);
    ld_rng_seed(&s.accept, c->seed * 2 + 2);
    s.rep = calloc((size_t)c->replicas, sizeof *s.rep);
    s.itl_bins = calloc(ITL_BINS, sizeof *s.itl_bins);
    int rc = -1;
    if (!s.rep || !s.itl_bins) { errf(err, errlen, "out of memory"); goto done; }
    for (int r = 0; r < c->replicas; r++)
        if (!(s.rep[r].run = malloc((size_t)c->max_running * sizeof(int)))) { errf(err, errlen, "out of memory"); goto done; }
    if (c->keep_records) {
        long cap = c->n_requests > 0 ? c->n_requests : 1024;
        out->rec = calloc((size_t)cap, sizeof *out->rec);
        if (!out->rec) { errf(err, errlen, "out of memory"); goto done; }
        out->n_rec = cap;
    }
    if (start_phase(&s, 0, 0.0, err, errlen)) goto done;
    while (s.heap_n) {
        event e = heap_pop(&s);
        int r = 0;
        switch (e.kind) {
        case EV_STEP_END: r = step_end(&s, e.who, e.t, err, errlen); break;
        case EV_BATCH: r = batch_start(&s, e.who, e.t); if (r) errf(err, errlen, "out of memory"); break;
        case EV_PHASE: r = start_phase(&s, e.who, e.t, err, errlen); break;
        case EV_CLIENT: r = client_back(&s, e.t, err, errlen); break;
        case EV_ENQUEUE: r = enqueue(&s, e.who, e.t); if (r) errf(err, errlen, "out of memory"); break;
        case EV_ARRIVAL:
            if (e.gen != s.open_gen || s.phase < 0) break;   /* a phase change or the request count ended it */
            r = arrive(&s, e.t, 0, err, errlen);
            if (!r && s.phase >= 0 && heap_push(&s, (event){e.t + gap(&s), EV_ARRIVAL, -1, s.open_gen}))
                r = errf(err, errlen, "out of memory");
            break;
        }
        if (r) goto done;
    }
    summarize(&s);
    if (out->rec) out->n_rec = s.arrivals;
    rc = 0;
done:
    sim_free(&s);
    if (rc) sim_result_free(out);
    return rc;
}

void sim_result_free(sim_result *r) {
    free(r->rec);
    r->rec = NULL;
    r->n_rec = 0;
}
