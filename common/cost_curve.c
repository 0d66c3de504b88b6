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

double cost_curve_at(const cost_curve *c, double r) {
    if (c->n == 0) return NAN;
    if (c->n == 1) return c->seconds[0];
    int i = 1;
    while (i < c->n - 1 && c->rows[i] < r) i++;
    /* segment [i-1, i]: interpolates inside, extends past either end */
    double x0 = c->rows[i - 1], x1 = c->rows[i], y0 = c->seconds[i - 1], y1 = c->seconds[i];
    double y = y0 + (y1 - y0) * (r - x0) / (x1 - x0);
    double floor_ = 0.25 * c->seconds[0];   /* never extrapolate to ≤ 0 */
    return y > floor_ ? y : floor_;
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
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "draft_seconds_per_token");
    if (cJSON_IsNumber(ds) && ds->valuedouble > 0 && isfinite(ds->valuedouble))
        c->draft_seconds_per_token = ds->valuedouble;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "threads");
    if (cJSON_IsNumber(th)) c->threads = th->valueint;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "history");
    if (cJSON_IsNumber(h)) c->history = h->valueint;
    const cJSON *tp = cJSON_GetObjectItemCaseSensitive(j, "tp");
    if (cJSON_IsNumber(tp) && tp->valuedouble >= 1 && tp->valuedouble <= 4096) c->tp = tp->valueint;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (cJSON_IsString(m)) snprintf(c->model, sizeof c->model, "%s", m->valuestring);
    cJSON_Delete(j);
    return 0;
}

/* bench_engine CSV: metric,batch,rows_per_seq,value,unit with forward_ms rows. */
static int load_csv(cost_curve *c, const char *path, char *err, size_t errlen) {
    csv_table t;
    if (csvt_read(path, &t, err, errlen)) return -1;
    double r[COST_MAX_POINTS], s[COST_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < t.nrow && n < COST_MAX_POINTS; i++) {
        if (strcmp(csvt_get(&t, i, "metric"), "forward_ms")) continue;
        double b = csvt_num(&t, i, "batch"), k = csvt_num(&t, i, "rows_per_seq"), ms = csvt_num(&t, i, "value");
        if (!(b > 0 && k > 0 && ms > 0)) continue;
        r[n] = b * k;
        s[n++] = ms / 1e3;
    }
    csvt_free(&t);
    if (!n) return errf(err, errlen, "%s: no forward_ms rows (expected bench_engine --out CSV)", path);
    char src[600];
    snprintf(src, sizeof src, "%.500s (bench_engine forward cost)", path);
    cost_curve_from_points(c, r, s, n, src);
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
    cJSON_AddNumberToObject(j, "draft_seconds_per_token", c->draft_seconds_per_token);
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    if (!s) return errf(err, errlen, "out of memory");
    int rc = write_file_atomic(path, s, strlen(s), err, errlen);
    free(s);
    return rc;
}
