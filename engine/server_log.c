/* server_log.c — the decode-batch log line, in SGLang's shape so that
 * tools written for SGLang logs (and specbed's own log source) parse it:
 *   [2026-11-29 18:00:00] Decode batch, #running-req: N, #token: T, token usage: U,
 *   accept len: L, accept rate: R, gen throughput (token/s): X, #queue-req: Q
 * (one line). Over the interval since the previous line: accept len =
 * committed tokens ÷ sequence verify steps (bonus included, all running
 * requests: a request with speculation off counts 1 per step), accept rate
 * = accepted ÷ drafted tokens, gen throughput = tokens generated ÷ busy
 * seconds (idle time between requests excluded). #running-req, #token and
 * token usage describe the batch of the interval's last step as it went in
 * (requests in it, their KV tokens, the pool's fraction in use).
 * Scheduler thread only. */
#include <time.h>
#include "server_internal.h"

void srv_declog_reset(srv_declog *l, const server *s) {
    const spec_batch_stats *bs = spec_batch_get_stats(s->b);
    l->steps = 0;
    l->t0 = gen_now();
    l->committed0 = bs->committed;
    l->verify0 = bs->verify_seq_steps;
    l->drafted0 = s->d ? s->d->counters.drafted_tokens : 0;
    l->accepted0 = s->d ? s->d->counters.accepted_tokens : 0;
    l->gen0 = s->gen_total;
}

void srv_declog_step(srv_declog *l, server *s, const srv_declog_batch *bt) {
    if (s->o.decode_log_interval <= 0 || ++l->steps < s->o.decode_log_interval) return;
    const spec_batch_stats *bs = spec_batch_get_stats(s->b);
    double dt = gen_now() - l->t0;
    long steps = bs->verify_seq_steps - l->verify0;
    long drafted = (s->d ? s->d->counters.drafted_tokens : 0) - l->drafted0;
    long accepted = (s->d ? s->d->counters.accepted_tokens : 0) - l->accepted0;
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(s->log,
            "[%s] Decode batch, #running-req: %d, #token: %ld, token usage: %.2f, accept len: %.2f, "
            "accept rate: %.2f, gen throughput (token/s): %.2f, #queue-req: %d\n",
            ts, bt->running, bt->kv_tokens, bt->usage,
            steps ? (double)(bs->committed - l->committed0) / (double)steps : 0.0,
            drafted ? (double)accepted / (double)drafted : 0.0, dt > 0 ? (double)(s->gen_total - l->gen0) / dt : 0.0,
            bt->waiting);
    fflush(s->log);
    srv_declog_reset(l, s);
}
