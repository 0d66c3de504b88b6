/* cost_curve.c — see cost_curve.h. Parsing and arithmetic only. */
#include "cost_curve.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "csv_table.h"
#include "errmsg.h"
#include "file.h"
#include "outfile.h"

void cost_curve_from_points(cost_curve *c, const double *rows, const double *sec, int n, const char *source) {
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "%s", source ? source : "");
    double sum[COST_MAX_POINTS];
    int cnt[COST_MAX_POINTS];
    for (int i = 0; i < n; i++) {
        if (!(rows[i] > 0) || !(sec[i] > 0) || !isfinite(rows[i]) || !isfinite(sec[i])) continue;
        int j = 0;
        while (j < c->n && c->rows[j] != rows[i]) j++;
        if (j == c->n) {
            if (c->n == COST_MAX_POINTS) continue;
            c->rows[j] = rows[i];
            sum[j] = 0;
            cnt[j] = 0;
            c->n++;
        }
        sum[j] += sec[i];
        cnt[j]++;
    }
    for (int j = 0; j < c->n; j++) c->seconds[j] = sum[j] / cnt[j];
    for (int i = 1; i < c->n; i++)   /* insertion sort by rows */
        for (int j = i; j > 0 && c->rows[j] < c->rows[j - 1]; j--) {
            double a = c->rows[j], b = c->seconds[j];
            c->rows[j] = c->rows[j - 1];
            c->seconds[j] = c->seconds[j - 1];
            c->rows[j - 1] = a;
            c->seconds[j - 1] = b;
        }
    for (int i = 1; i < c->n; i++)
        if (c->seconds[i] < c->seconds[i - 1]) c->seconds[i] = c->seconds[i - 1];
}

static double eval(int n, const double *rows, const double *secs, double r) {
    if (n == 0) return NAN;
    if (n == 1) return secs[0];
    int i = 1;
    while (i < n - 1 && rows[i] < r) i++;
    /* segment [i-1, i]: interpolates inside, extends past either end */
    double x0 = rows[i - 1], x1 = rows[i], y0 = secs[i - 1], y1 = secs[i];
    double y = y0 + (y1 - y0) * (r - x0) / (x1 - x0);
    double floor_ = 0.25 * secs[0];   /* never extrapolate to ≤ 0 */
    return y > floor_ ? y : floor_;
}

double cost_curve_at(const cost_curve *c, double r) { return eval(c->n, c->rows, c->seconds, r); }

int cost_curve_add_seqs(cost_curve *c, int seqs, const double *rows, const double *sec, int n) {
    cost_curve t;   /* the main curve's rules (average, sort, non-decreasing) on these points */
    cost_curve_from_points(&t, rows, sec, n, NULL);
    if (seqs < 1 || t.n == 0) return -1;
    int i = 0;
    while (i < c->n_by_seqs && c->by_seqs[i].seqs < seqs) i++;
    if (i == c->n_by_seqs || c->by_seqs[i].seqs != seqs) {
        if (c->n_by_seqs == COST_MAX_SEQ_CURVES) return -1;
        memmove(&c->by_seqs[i + 1], &c->by_seqs[i], sizeof c->by_seqs[0] * (size_t)(c->n_by_seqs - i));
        c->n_by_seqs++;
    }
    cost_seq_curve *q = &c->by_seqs[i];
    q->seqs = seqs;
    q->n = t.n < COST_SEQ_POINTS ? t.n : COST_SEQ_POINTS;
    memcpy(q->rows, t.rows, sizeof(double) * (size_t)q->n);
    memcpy(q->seconds, t.seconds, sizeof(double) * (size_t)q->n);
    return 0;
}

/* Where `seqs` falls among n ascending sequence counts at[]: the two entries
 * around it (*lo, *hi) and the weight of *hi, linear in seqs; the nearest
 * entry alone (weight 0) past either end. n ≥ 1. */
static double bracket(const int *at, int n, double seqs, int *lo, int *hi) {
    int h = 0;
    while (h < n && at[h] < seqs) h++;
    if (h == n) h--;
    *hi = h;
    *lo = h > 0 && at[h] > seqs ? h - 1 : h;
    return *lo == h || !(seqs > at[*lo]) ? 0 : (seqs - at[*lo]) / (double)(at[h] - at[*lo]);
}

double cost_curve_at_seqs(const cost_curve *c, double seqs, double r) {
    if (c->n_by_seqs == 0 || !(seqs >= 1)) return cost_curve_at(c, r);
    int at[COST_MAX_SEQ_CURVES], lo, hi;
    for (int i = 0; i < c->n_by_seqs; i++) at[i] = c->by_seqs[i].seqs;
    double w = bracket(at, c->n_by_seqs, seqs, &lo, &hi);
    const cost_seq_curve *a = &c->by_seqs[lo], *b = &c->by_seqs[hi];
    double ya = eval(a->n, a->rows, a->seconds, r);
    return w > 0 ? ya + (eval(b->n, b->rows, b->seconds, r) - ya) * w : ya;
}

void cost_curve_draft_at(const cost_curve *c, double seqs, double *per_step, double *per_token) {
    *per_step = c->draft_seconds_per_step;
    *per_token = c->draft_seconds_per_token;
    if (c->n_draft_by_seqs == 0) return;
    int at[COST_MAX_SEQ_CURVES], lo, hi;
    for (int i = 0; i < c->n_draft_by_seqs; i++) at[i] = c->draft_by_seqs[i].seqs;
    double w = bracket(at, c->n_draft_by_seqs, seqs, &lo, &hi);
    const cost_draft_point *a = &c->draft_by_seqs[lo], *b = &c->draft_by_seqs[hi];
    *per_step = a->per_step + (b->per_step - a->per_step) * w;
    *per_token = a->per_token + (b->per_token - a->per_token) * w;
}

/* "draft_by_sequences" into c: ascending, distinct sequence counts, costs ≥ 0. */
static int load_draft_by_seqs(cost_curve *c, const cJSON *ds, const char *path, char *err, size_t errlen) {
    if (!ds) return 0;
    if (!cJSON_IsArray(ds) || cJSON_GetArraySize(ds) > COST_MAX_SEQ_CURVES)
        return errf(err, errlen, "%s: \"draft_by_sequences\" must be an array of at most %d entries", path,
                    COST_MAX_SEQ_CURVES);
    int idx = 0;
    for (const cJSON *e = ds->child; e; e = e->next, idx++) {
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(e, "sequences");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "seconds_per_step");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "seconds_per_token");
        if (!cJSON_IsNumber(sq) || !(sq->valuedouble >= 1 && sq->valuedouble <= 65536) || !cJSON_IsNumber(f) ||
            !cJSON_IsNumber(t) || !(f->valuedouble >= 0) || !(t->valuedouble >= 0) || !isfinite(f->valuedouble) ||
            !isfinite(t->valuedouble) || (idx > 0 && sq->valueint <= c->draft_by_seqs[idx - 1].seqs))
            return errf(err, errlen, "%s: draft_by_sequences[%d] needs \"sequences\" ≥ 1 (ascending) and "
                        "\"seconds_per_step\", \"seconds_per_token\" ≥ 0", path, idx);
        c->draft_by_seqs[idx] = (cost_draft_point){sq->valueint, f->valuedouble, t->valuedouble};
    }
    c->n_draft_by_seqs = idx;
    return 0;
}

/* "by_sequences" entries into c; an absent member is fine, a malformed one is not. */
static int load_by_seqs(cost_curve *c, const cJSON *bs, const char *path, char *err, size_t errlen) {
    if (!bs) return 0;
    if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) > COST_MAX_SEQ_CURVES)
        return errf(err, errlen, "%s: \"by_sequences\" must be an array of at most %d curves", path,
                    COST_MAX_SEQ_CURVES);
    int idx = 0;
    for (const cJSON *e = bs->child; e; e = e->next, idx++) {
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(e, "sequences");
        const cJSON *rows = cJSON_GetObjectItemCaseSensitive(e, "rows");
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(e, "seconds_per_step");
        int n = cJSON_GetArraySize(rows);
        if (!cJSON_IsNumber(sq) || !(sq->valuedouble >= 1 && sq->valuedouble <= 65536) || !cJSON_IsArray(rows) ||
            !cJSON_IsArray(sec) || n < 1 || n > COST_SEQ_POINTS || n != cJSON_GetArraySize(sec))
            return errf(err, errlen, "%s: by_sequences[%d] needs \"sequences\" ≥ 1 and arrays \"rows\" and "
                        "\"seconds_per_step\" of the same length (1..%d)", path, idx, COST_SEQ_POINTS);
        double r[COST_SEQ_POINTS], s[COST_SEQ_POINTS];
        for (int i = 0; i < n; i++) {
            const cJSON *a = cJSON_GetArrayItem(rows, i), *b = cJSON_GetArrayItem(sec, i);
            if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(a->valuedouble >= 1) || !(b->valuedouble > 0) ||
                !isfinite(a->valuedouble) || !isfinite(b->valuedouble))
                return errf(err, errlen, "%s: by_sequences[%d] entry %d: rows must be ≥ 1 and seconds > 0", path, idx, i);
            r[i] = a->valuedouble;
            s[i] = b->valuedouble;
        }
        if (cost_curve_add_seqs(c, sq->valueint, r, s, n))
            return errf(err, errlen, "%s: by_sequences[%d]: too many curves", path, idx);
    }
    return 0;
}

/* "moe" into c; absent is fine (a dense target), malformed is not. */
static int load_moe(cost_curve *c, const cJSON *m, const char *path, char *err, size_t errlen) {
    if (!m) return 0;
    const cJSON *E = cJSON_GetObjectItemCaseSensitive(m, "experts"), *K = cJSON_GetObjectItemCaseSensitive(m, "top_k");
    const cJSON *L = cJSON_GetObjectItemCaseSensitive(m, "sparse_layers");
    const cJSON *X = cJSON_GetObjectItemCaseSensitive(m, "expert_bytes");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "rows");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "distinct_experts_per_layer");
    const int n = cJSON_GetArraySize(r);
    if (!cJSON_IsNumber(E) || !cJSON_IsNumber(K) || !cJSON_IsNumber(L) || !cJSON_IsNumber(X) || E->valuedouble < 1 ||
        E->valuedouble > 65536 || K->valuedouble < 1 || K->valuedouble > E->valuedouble || L->valuedouble < 1 ||
        L->valuedouble > 65536 || !(X->valuedouble > 0) || !isfinite(X->valuedouble) || !cJSON_IsArray(r) ||
        !cJSON_IsArray(d) || n < 1 || n > COST_SEQ_POINTS || n != cJSON_GetArraySize(d))
        return errf(err, errlen, "%s: \"moe\" needs experts ≥ top_k ≥ 1, sparse_layers ≥ 1, expert_bytes > 0 and "
                    "arrays \"rows\" and \"distinct_experts_per_layer\" of the same length (1..%d)", path,
                    COST_SEQ_POINTS);
    c->moe_experts = E->valueint;
    c->moe_top_k = K->valueint;
    c->moe_sparse_layers = L->valueint;
    c->moe_expert_bytes = X->valuedouble;
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(r, i), *b = cJSON_GetArrayItem(d, i);
        /* a step reads at least one row's k experts and at most all of them */
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(a->valuedouble >= 1) || !isfinite(a->valuedouble) ||
            (i && !(a->valuedouble > c->moe_rows[i - 1])) || !(b->valuedouble >= c->moe_top_k) ||
            !(b->valuedouble <= c->moe_experts)) {
            c->n_moe = 0;
            return errf(err, errlen, "%s: moe entry %d: rows must ascend from 1 and distinct experts lie in "
                        "[top_k, experts]", path, i);
        }
        c->moe_rows[i] = a->valuedouble;
        c->moe_distinct[i] = b->valuedouble;
        c->n_moe = i + 1;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "text");
    if (cJSON_IsString(t)) snprintf(c->moe_text, sizeof c->moe_text, "%s", t->valuestring);
    return 0;
}

double cost_curve_experts_at(const cost_curve *c, double rows) {
    if (c->n_moe < 1) return NAN;
    const double *r = c->moe_rows, *d = c->moe_distinct;
    if (rows <= r[0]) return d[0];
    for (int i = 1; i < c->n_moe; i++)
        if (rows <= r[i]) return d[i - 1] + (d[i] - d[i - 1]) * (rows - r[i - 1]) / (r[i] - r[i - 1]);
    return d[c->n_moe - 1];
}

/* Distinct experts per layer that n sequences of r rows each read (cost_curve.h). */
static double experts_read(const cost_curve *c, double seqs, double rows_each) {
    const double E = c->moe_experts, one = cost_curve_experts_at(c, rows_each);
    return seqs <= 1 ? one : E * (1.0 - pow(1.0 - one / E, seqs));
}

int cost_curve_offload_experts(cost_curve *c, double bus_bytes_per_s, char *err, size_t errlen) {
    if (c->n_moe < 1)
        return errf(err, errlen, "the cost table has no routing curve (\"moe\"): experts on host need the distinct "
                    "experts a step reads, which `specbed profile --text` measures on a mixture-of-experts model");
    if (!(bus_bytes_per_s > 0) || !isfinite(bus_bytes_per_s)) return errf(err, errlen, "bus bandwidth must be > 0");
    const double per_expert = c->moe_sparse_layers * c->moe_expert_bytes / bus_bytes_per_s;
    for (int i = 0; i < c->n; i++) {
        const double seqs = c->rows[i] < 8 ? c->rows[i] : 8;
        c->seconds[i] += per_expert * experts_read(c, seqs, c->rows[i] / seqs);
    }
    for (int q = 0; q < c->n_by_seqs; q++) {
        cost_seq_curve *s = &c->by_seqs[q];
        for (int i = 0; i < s->n; i++) s->seconds[i] += per_expert * experts_read(c, s->seqs, s->rows[i] / s->seqs);
    }
    const size_t used = strlen(c->source);
    snprintf(c->source + used, sizeof c->source - used, ", experts on host at %g GB/s", bus_bytes_per_s / 1e9);
    return 0;
}

/* An optional cost: kept when it is a finite number > 0, else the field stays 0 (none). */
static void positive(const cJSON *j, const char *name, double *field) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    if (cJSON_IsNumber(v) && v->valuedouble > 0 && isfinite(v->valuedouble)) *field = v->valuedouble;
}

static int load_json(cost_curve *c, const char *path, const char *text, char *err, size_t errlen) {
    cJSON *j = cJSON_Parse(text);
    if (!j) return errf(err, errlen, "%s: not valid JSON", path);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(j, "seconds_per_step");
    int n = cJSON_GetArraySize(rows);
    if (!cJSON_IsArray(rows) || !cJSON_IsArray(sec) || n < 1 || n != cJSON_GetArraySize(sec) ||
        n > COST_MAX_POINTS) {
        cJSON_Delete(j);
        return errf(err, errlen,
                    "%s: a cost table needs arrays \"rows\" and \"seconds_per_step\" of the same length (1..%d)", path,
                    COST_MAX_POINTS);
    }
    double r[COST_MAX_POINTS], s[COST_MAX_POINTS];
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(rows, i), *b = cJSON_GetArrayItem(sec, i);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !(a->valuedouble >= 1) || !(b->valuedouble > 0) ||
            !isfinite(a->valuedouble) || !isfinite(b->valuedouble)) {
            cJSON_Delete(j);
            return errf(err, errlen, "%s: entry %d of rows/seconds_per_step: rows must be ≥ 1 and seconds > 0", path,
                        i);
        }
        r[i] = a->valuedouble;
        s[i] = b->valuedouble;
    }
    char src[600];
    snprintf(src, sizeof src, "%.500s (cost table JSON)", path);
    cost_curve_from_points(c, r, s, n, src);
    positive(j, "draft_seconds_per_token", &c->draft_seconds_per_token);
    positive(j, "draft_seconds_per_step", &c->draft_seconds_per_step);
    positive(j, "draft_seconds_per_prompt_token", &c->draft_seconds_per_prompt_token);
    positive(j, "logits_seconds_per_row", &c->logits_seconds_per_row);
    positive(j, "context_seconds_per_row_token", &c->context_seconds_per_row_token);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "threads");
    if (cJSON_IsNumber(th)) c->threads = th->valueint;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "history");
    if (cJSON_IsNumber(h)) c->history = h->valueint;
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(j, "tp");
    if (cJSON_IsNumber(tp) && tp->valuedouble >= 1 && tp->valuedouble <= 4096) c->tp = tp->valueint;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (cJSON_IsString(m)) snprintf(c->model, sizeof c->model, "%s", m->valuestring);
    const cJSON *dn = cJSON_GetObjectItemCaseSensitive(j, "drafter");
    if (cJSON_IsString(dn)) snprintf(c->drafter, sizeof c->drafter, "%s", dn->valuestring);
    int rc = load_by_seqs(c, cJSON_GetObjectItemCaseSensitive(j, "by_sequences"), path, err, errlen);
    if (!rc) rc = load_draft_by_seqs(c, cJSON_GetObjectItemCaseSensitive(j, "draft_by_sequences"), path, err, errlen);
    if (!rc) rc = load_moe(c, cJSON_GetObjectItemCaseSensitive(j, "moe"), path, err, errlen);
    cJSON_Delete(j);
    return rc;
}

/* bench_engine CSV: metric,batch,rows_per_seq,value,unit with forward_ms rows. */
static int load_csv(cost_curve *c, const char *path, char *err, size_t errlen) {
    csv_table t;
    if (csvt_read(path, &t, err, errlen)) return -1;
    double r[COST_MAX_POINTS], s[COST_MAX_POINTS], bt[COST_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < t.nrow && n < COST_MAX_POINTS; i++) {
        if (strcmp(csvt_get(&t, i, "metric"), "forward_ms")) continue;
        double b = csvt_num(&t, i, "batch"), k = csvt_num(&t, i, "rows_per_seq"), ms = csvt_num(&t, i, "value");
        if (!(b > 0 && k > 0 && ms > 0)) continue;
        bt[n] = b;
        r[n] = b * k;
        s[n++] = ms / 1e3;
    }
    csvt_free(&t);
    if (!n) return errf(err, errlen, "%s: no forward_ms rows (expected bench_engine --out CSV)", path);
    char src[600];
    snprintf(src, sizeof src, "%.500s (bench_engine forward cost)", path);
    cost_curve_from_points(c, r, s, n, src);
    for (int i = 0; i < n; i++) {   /* one curve per batch (= sequences) */
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= bt[j] == bt[i];
        if (seen) continue;
        double rr[COST_SEQ_POINTS], ss[COST_SEQ_POINTS];
        int m = 0;
        for (int j = i; j < n && m < COST_SEQ_POINTS; j++)
            if (bt[j] == bt[i]) rr[m] = r[j], ss[m++] = s[j];
        if (cost_curve_add_seqs(c, (int)bt[i], rr, ss, m)) break;
    }
    return 0;
}

int cost_curve_load(cost_curve *c, const char *path, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    char *text;
    if (read_file(path, 64u << 20, &text, NULL, err, errlen)) return -1;
    const char *p = text;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    int rc = *p == '{' ? load_json(c, path, text, err, errlen) : load_csv(c, path, err, errlen);
    free(text);
    return rc;
}

int cost_curve_save(const cost_curve *c, const char *path, char *err, size_t errlen) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return errf(err, errlen, "out of memory");
    cJSON_AddStringToObject(j, "model", c->model);
    cJSON_AddNumberToObject(j, "threads", c->threads);
    cJSON_AddNumberToObject(j, "history", c->history);
    if (c->tp > 0) cJSON_AddNumberToObject(j, "tp", c->tp);
    cJSON *rows = cJSON_AddArrayToObject(j, "rows"), *secs = cJSON_AddArrayToObject(j, "seconds_per_step");
    for (int i = 0; i < c->n; i++) {
        cJSON_AddItemToArray(rows, cJSON_CreateNumber(c->rows[i]));
        cJSON_AddItemToArray(secs, cJSON_CreateNumber(c->seconds[i]));
    }
    if (c->drafter[0]) cJSON_AddStringToObject(j, "drafter", c->drafter);
    cJSON_AddNumberToObject(j, "draft_seconds_per_token", c->draft_seconds_per_token);
    if (c->draft_seconds_per_step > 0) cJSON_AddNumberToObject(j, "draft_seconds_per_step", c->draft_seconds_per_step);
    if (c->logits_seconds_per_row > 0) cJSON_AddNumberToObject(j, "logits_seconds_per_row", c->logits_seconds_per_row);
    if (c->context_seconds_per_row_token > 0)
        cJSON_AddNumberToObject(j, "context_seconds_per_row_token", c->context_seconds_per_row_token);
    if (c->draft_seconds_per_prompt_token > 0)
        cJSON_AddNumberToObject(j, "draft_seconds_per_prompt_token", c->draft_seconds_per_prompt_token);
    if (c->n_draft_by_seqs) {
        cJSON *ds = cJSON_AddArrayToObject(j, "draft_by_sequences");
        for (int i = 0; i < c->n_draft_by_seqs; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToArray(ds, e);
            cJSON_AddNumberToObject(e, "sequences", c->draft_by_seqs[i].seqs);
            cJSON_AddNumberToObject(e, "seconds_per_step", c->draft_by_seqs[i].per_step);
            cJSON_AddNumberToObject(e, "seconds_per_token", c->draft_by_seqs[i].per_token);
        }
    }
    if (c->n_by_seqs) {
        cJSON *bs = cJSON_AddArrayToObject(j, "by_sequences");
        for (int i = 0; i < c->n_by_seqs; i++) {
            const cost_seq_curve *q = &c->by_seqs[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToArray(bs, e);
            cJSON_AddNumberToObject(e, "sequences", q->seqs);
            cJSON *r = cJSON_AddArrayToObject(e, "rows"), *t = cJSON_AddArrayToObject(e, "seconds_per_step");
            for (int k = 0; k < q->n; k++) {
                cJSON_AddItemToArray(r, cJSON_CreateNumber(q->rows[k]));
                cJSON_AddItemToArray(t, cJSON_CreateNumber(q->seconds[k]));
            }
        }
    }
    if (c->n_moe > 0) {
        cJSON *m = cJSON_AddObjectToObject(j, "moe");
        cJSON_AddNumberToObject(m, "experts", c->moe_experts);
        cJSON_AddNumberToObject(m, "top_k", c->moe_top_k);
        cJSON_AddNumberToObject(m, "sparse_layers", c->moe_sparse_layers);
        cJSON_AddNumberToObject(m, "expert_bytes", c->moe_expert_bytes);
        cJSON_AddStringToObject(m, "text", c->moe_text);
        cJSON *r = cJSON_AddArrayToObject(m, "rows"), *d = cJSON_AddArrayToObject(m, "distinct_experts_per_layer");
        for (int i = 0; i < c->n_moe; i++) {
            cJSON_AddItemToArray(r, cJSON_CreateNumber(c->moe_rows[i]));
            cJSON_AddItemToArray(d, cJSON_CreateNumber(c->moe_distinct[i]));
        }
    }
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    if (!s) return errf(err, errlen, "out of memory");
    int rc = write_file_atomic(path, s, strlen(s), err, errlen);
    free(s);
    return rc;
}
