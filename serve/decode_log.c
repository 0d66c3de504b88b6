/* decode_log.c — the decode-batch log line, in SGLang's shape so that
 * tools written for SGLang logs (and specbed's own log source) parse it:
 *   [2026-11-29 18:00:00] Decode batch, #running-req: N, #token: T, token usage: U,
 *   accept len: L, accept rate: R, gen throughput (token/s): X, #queue-req: Q
 * (one line). Over the interval since the previous line, accept len and
 * accept rate are spec_rates_between() of the batch's counters — the same
 * numbers /metrics gives for the same interval: requests with speculation
 * off are left out, and when no request drafted in the interval both
 * fields are omitted, as SGLang prints neither for a server that does not
 * speculate. gen throughput = tokens generated ÷ busy seconds (idle time
 * between requests excluded). #running-req, #token and token usage describe
 * the batch of the interval's last step as it went in (requests in it,
 * their KV tokens, the pool's fraction in use). Scheduler thread only. */
#include <time.h>
#include "server_internal.h"

void srv_declog_reset(srv_declog *l, const server *s) {
    l->steps = 0;
    l->t0 = gen_now();
    l->c0 = *spec_batch_counters(s->b);
    l->gen0 = s->gen_total;
}

void srv_declog_step(srv_declog *l, server *s, const srv_declog_batch *bt) {
    if (s->o.decode_log_interval <= 0 || ++l->steps < s->o.decode_log_interval) return;
    spec_rates r = spec_rates_between(&l->c0, spec_batch_counters(s->b));
    double dt = gen_now() - l->t0;
    char ts[32], spec[96] = "";
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S", &tm);
    if (r.drafted)
        snprintf(spec, sizeof spec, "accept len: %.2f, accept rate: %.2f, ", r.accept_length, r.acceptance_rate);
    fprintf(s->log,
            "[%s] Decode batch, #running-req: %d, #token: %ld, token usage: %.2f, %s"
            "gen throughput (token/s): %.2f, #queue-req: %d\n",
            ts, bt->running, bt->kv_tokens, bt->usage, spec,
            dt > 0 ? (double)(s->gen_total - l->gen0) / dt : 0.0, bt->waiting);
    fflush(s->log);
    srv_declog_reset(l, s);
}
