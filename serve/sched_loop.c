/* sched_loop.c — the scheduler loop: the only thread that touches the
 * spec_batch, the engine and the drafter. Between steps it drops requests
 * whose clients went away (freeing their KV pages at once), admits waiting
 * requests up to --max-running, then runs one continuous-batching step
 * (verify rows of generating requests + prompt chunks); callbacks turn
 * committed tokens into request output and metrics. It also owns shutdown
 * (drain, then cancel) and the decode-batch log cadence. */
#include <stdlib.h>
#include <string.h>
#include "server_internal.h"

enum { WHY_STOP = 0, WHY_LENGTH = 1, WHY_ABORT = 2 };

static void count_finish(server *s, srv_req *r, int why) {
    pthread_mutex_lock(&s->m.mu);
    s->m.finished[why]++;
    if (why != WHY_ABORT) srv_hist_observe(&s->m.e2e, gen_now() - r->t_arrival);
    pthread_mutex_unlock(&s->m.mu);
}

/* ---- batch callbacks (inside spec_batch_step, scheduler thread) ---- */

static void cb_token(void *user, int slot, int token, const float *logits) {
    server *s = user;
    srv_req *r = s->running[slot];
    if (!r || r->done) return;
    if (r->max_tokens > 0) {
        double now = gen_now();
        pthread_mutex_lock(&s->m.mu);
        if (r->last_step < 0) srv_hist_observe(&s->m.ttft, now - r->t_arrival);
        else if (r->last_step != s->step_no) srv_hist_observe(&s->m.itl, now - r->t_last);
        s->m.generation_tokens++;
        pthread_mutex_unlock(&s->m.mu);
        if (r->last_step != s->step_no) { r->last_step = s->step_no; r->t_last = now; }
        s->gen_total++;
    }
    srv_req_on_token(s, r, token, logits);
}

static void cb_prompt_logits(void *user, int slot, int i, const float *logits) {
    server *s = user;
    if (s->running[slot]) srv_req_on_prompt_logits(s, s->running[slot], i, logits);
}

static void cb_finish(void *user, int slot, spec_finish why, int n_generated) {
    server *s = user;
    srv_req *r = s->running[slot];
    if (!r) return;
    s->running[slot] = NULL;
    atomic_fetch_sub(&s->n_running, 1);
    if (why == SPEC_FINISH_NONFINITE) {
        /* this request only: the batch, the other requests and the server go on */
        fprintf(s->log, "specbed serve: request %s: the model produced NaN/Inf logits after %d tokens; "
                        "the request was ended with an error\n", r->id, n_generated);
        srv_req_fail(r, 500, "the model produced non-finite (NaN/Inf) logits for this request; see the server log");
        pthread_mutex_lock(&s->m.mu);
        s->m.failed++;
        pthread_mutex_unlock(&s->m.mu);
        srv_req_unref(r);
        return;
    }
    srv_req_finish(s, r, why == SPEC_FINISH_STOP ? "stop" : "length");
    count_finish(s, r, r->finish_reason && !strcmp(r->finish_reason, "stop") ? WHY_STOP : WHY_LENGTH);
    srv_req_unref(r);
}

/* ---- between steps ---- */

/* Drops slot's request: KV pages and drafter slot are freed now. */
static void drop_running(server *s, int slot, int status, const char *msg) {
    srv_req *r = s->running[slot];
    spec_batch_cancel(s->b, slot);
    s->running[slot] = NULL;
    atomic_fetch_sub(&s->n_running, 1);
    if (status) {
        srv_req_fail(r, status, msg);
        count_finish(s, r, WHY_ABORT);
    } else {               /* a stop string ended it */
        srv_req_finish(s, r, "stop");
        count_finish(s, r, WHY_STOP);
    }
    srv_req_unref(r);
}

static void drop_waiting(server *s, int i, int status, const char *msg) {   /* caller holds qmu */
    srv_req *r = s->waiting[i];
    memmove(s->waiting + i, s->waiting + i + 1, sizeof *s->waiting * (size_t)(s->n_wait - i - 1));
    s->n_wait--;
    srv_req_fail(r, status, msg);
    count_finish(s, r, WHY_ABORT);
    srv_req_unref(r);
}

static void admit(server *s) {   /* caller holds qmu */
    while (s->n_wait > 0 && atomic_load(&s->n_running) < s->o.max_running) {
        srv_req *r = s->waiting[0];
        memmove(s->waiting, s->waiting + 1, sizeof *s->waiting * (size_t)(s->n_wait - 1));
        s->n_wait--;
        char err[256];
        int slot;
        if (spec_batch_add(s->b, r->prompt, r->n_prompt, &r->p, &slot, err, sizeof err)) {
            srv_req_fail(r, 400, err);
            count_finish(s, r, WHY_ABORT);
            srv_req_unref(r);
            continue;
        }
        r->slot = slot;
        s->running[slot] = r;
        atomic_fetch_add(&s->n_running, 1);
        pthread_mutex_lock(&s->m.mu);
        s->m.prompt_tokens += r->n_prompt;
        pthread_mutex_unlock(&s->m.mu);
    }
}

static void publish(server *s, int n_wait) {
    srv_metrics *m = &s->m;
    pthread_mutex_lock(&m->mu);
    m->dc = *spec_batch_counters(s->b);
    m->bs = *spec_batch_get_stats(s->b);
    m->depth = s->d ? s->o.depth : 0;
    m->running = atomic_load(&s->n_running);
    m->waiting = n_wait;
    m->pages_total = kv_pages_total(s->e->kv);
    m->pages_used = m->pages_total - kv_pages_free(s->e->kv);
    m->tokens_in_kv = spec_batch_tokens_in_kv(s->b);
    pthread_mutex_unlock(&m->mu);
}

static void cancel_all(server *s, int status, const char *msg) {   /* caller holds qmu */
    for (int i = 0; i < s->o.max_running; i++)
        if (s->running[i]) drop_running(s, i, status, msg);
    while (s->n_wait) drop_waiting(s, 0, status, msg);
}

static void *sched_main(void *arg) {
    server *s = arg;
    char err[1024];
    double deadline = 0;
    pthread_mutex_lock(&s->qmu);
    for (;;) {
        for (int i = 0; i < s->n_wait; i++)
            if (atomic_load(&s->waiting[i]->cancelled)) drop_waiting(s, i--, 499, "the client closed the connection");
        if (s->stop_now) break;
        if (s->stopping) {
            if (!deadline) deadline = gen_now() + s->o.drain_s;
            while (s->n_wait) drop_waiting(s, 0, 503, "the server is shutting down");
            if (atomic_load(&s->n_running) == 0) break;
            if (gen_now() > deadline) {
                cancel_all(s, 503, "the server is shutting down (request cancelled)");
                break;
            }
        }
        admit(s);
        int n_wait = s->n_wait;
        if (atomic_load(&s->n_running) == 0) {
            if (s->m.tp > 1 && !s->tp_synced) {
                /* the other ranks free what the finished requests held, and
                 * say what they hold now (disconnects must free everywhere) */
                int pf[64];
                int tp = s->m.tp < 64 ? s->m.tp : 64;
                if (fwd_tp_sync(s->e->fwd, s->e->kv, pf, err, sizeof err)) {
                    fprintf(s->log, "specbed serve: tensor-parallel sync failed: %s\n", err);
                    atomic_store(&s->failed, 1);
                    break;
                }
                pthread_mutex_lock(&s->m.mu);
                for (int r = 0; r < tp; r++) s->m.tp_pages_used[r] = kv_pages_total(s->e->kv) - pf[r];
                pthread_mutex_unlock(&s->m.mu);
                s->tp_synced = 1;
            }
            publish(s, n_wait);
            double idle0 = gen_now();
            pthread_cond_wait(&s->qcv, &s->qmu);
            s->dl.t0 += gen_now() - idle0;     /* throughput over busy time only */
            continue;
        }
        pthread_mutex_unlock(&s->qmu);

        if (atomic_exchange(&s->any_cancel, 0))
            for (int i = 0; i < s->o.max_running; i++)
                if (s->running[i] && atomic_load(&s->running[i]->cancelled))
                    drop_running(s, i, 499, "the client closed the connection");
        long verify0 = spec_batch_get_stats(s->b)->verify_seq_steps;
        int pages = kv_pages_total(s->e->kv);
        srv_declog_batch bt = {.running = spec_batch_running(s->b), .kv_tokens = spec_batch_tokens_in_kv(s->b),
                               .usage = pages ? (double)(pages - kv_pages_free(s->e->kv)) / pages : 0.0};
        s->step_no++;
        s->tp_synced = 0;
        if (spec_batch_step(s->b, err, sizeof err)) {
            fprintf(s->log, "specbed serve: engine step failed: %s\n", err);
            fflush(s->log);
            atomic_store(&s->failed, 1);
            pthread_mutex_lock(&s->qmu);
            for (int i = 0; i < s->o.max_running; i++)
                if (s->running[i]) {
                    srv_req *r = s->running[i];
                    s->running[i] = NULL;
                    atomic_fetch_sub(&s->n_running, 1);
                    srv_req_fail(r, 500, "the engine failed; see the server log");
                    pthread_mutex_lock(&s->m.mu);
                    s->m.failed++;
                    pthread_mutex_unlock(&s->m.mu);
                    srv_req_unref(r);
                }
            while (s->n_wait) drop_waiting(s, 0, 503, "the engine failed; see the server log");
            break;
        }
        for (int i = 0; i < s->o.max_running; i++) {
            if (!s->running[i]) continue;
            if (s->running[i]->stop_hit) drop_running(s, i, 0, NULL);
            else srv_req_notify(s->running[i]);   /* one wake-up per step, not per token */
        }
        pthread_mutex_lock(&s->qmu);
        n_wait = s->n_wait;
        if (spec_batch_get_stats(s->b)->verify_seq_steps > verify0) {
            bt.waiting = n_wait;
            srv_declog_step(&s->dl, s, &bt);
        }
        publish(s, n_wait);
    }
    if (!atomic_load(&s->failed)) cancel_all(s, 503, "the server is shutting down");
    publish(s, s->n_wait);
    pthread_mutex_unlock(&s->qmu);
    return NULL;
}

void srv_loop_callbacks(server *s, spec_callbacks *cb) {
    *cb = (spec_callbacks){.user = s, .on_token = cb_token, .on_prompt_logits = cb_prompt_logits,
                           .on_finish = cb_finish};
}

int srv_loop_start(server *s, char *err, size_t errlen) {
    srv_declog_reset(&s->dl, s);
    publish(s, 0);
    if (pthread_create(&s->loop_thread, NULL, sched_main, s)) {
        snprintf(err, errlen, "cannot start the scheduler thread");
        return -1;
    }
    s->loop_started = 1;
    return 0;
}

int srv_enqueue(server *s, srv_req *r) {
    int status = 0;
    pthread_mutex_lock(&s->qmu);
    if (atomic_load(&s->failed)) status = 503;
    else if (s->stopping) status = 503;
    else if (s->n_wait >= s->o.max_queue &&
             s->n_wait + atomic_load(&s->n_running) >= s->o.max_queue + s->o.max_running) status = 429;
    if (!status) {
        srv_req_ref(r);
        s->waiting[s->n_wait++] = r;
        pthread_cond_signal(&s->qcv);
        pthread_mutex_lock(&s->m.mu);
        s->m.waiting = s->n_wait;
        pthread_mutex_unlock(&s->m.mu);
    }
    pthread_mutex_unlock(&s->qmu);
    return status;
}

void srv_cancel(server *s, srv_req *r) {
    atomic_store(&r->cancelled, 1);
    atomic_store(&s->any_cancel, 1);
    pthread_mutex_lock(&s->qmu);
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
}

void srv_loop_stop(server *s) {
    if (!s->loop_started) return;
    pthread_mutex_lock(&s->qmu);
    s->stopping = 1;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->loop_thread, NULL);
    s->loop_started = 0;
}
