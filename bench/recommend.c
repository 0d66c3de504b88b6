/* recommend.c — see recommend.h. Arithmetic and cost-table parsing only. */
#include "recommend.h"
#include "csv_table.h"
#include "errmsg.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rc_cost_from_points(rc_cost *t, const double *rows, const double *sec, int n, const char *source) {
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", source ? source : "");
    double sum[RC_MAX_POINTS];
    int cnt[RC_MAX_POINTS];
    for (int i = 0; i < n; i++) {
        if (!(rows[i] > 0) || !(sec[i] > 0) || isinf(sec[i])) continue;
        int j = 0;
        while (j < t->n && t->rows[j] != rows[i]) j++;
        if (j == t->n) {
            if (t->n == RC_MAX_POINTS) continue;
            t->rows[j] = rows[i];
            sum[j] = 0;
            cnt[j] = 0;
            t->n++;
        }
        sum[j] += sec[i];
        cnt[j]++;
    }
    for (int j = 0; j < t->n; j++) t->sec[j] = sum[j] / cnt[j];
    for (int i = 1; i < t->n; i++)                    /* insertion sort by rows */
        for (int j = i; j > 0 && t->rows[j] < t->rows[j - 1]; j--) {
            double a = t->rows[j], b = t->sec[j];
            t->rows[j] = t->rows[j - 1]; t->sec[j] = t->sec[j - 1];
            t->rows[j - 1] = a; t->sec[j - 1] = b;
        }
}

double rc_cost_at(const rc_cost *t, double r) {
    if (t->n == 0) return NAN;
    if (t->n == 1) return t->sec[0];   /* one point: flat */
    int i = 1;
    while (i < t->n - 1 && t->rows[i] < r) i++;
    /* segment [i-1, i]: interpolates inside, extrapolates past either end */
    double x0 = t->rows[i - 1], x1 = t->rows[i], y0 = t->sec[i - 1], y1 = t->sec[i];
    double y = y0 + (y1 - y0) * (r - x0) / (x1 - x0);
    double floor_ = 0.25 * (y0 < y1 ? y0 : y1);          /* never extrapolate to ≤ 0 */
    return y > floor_ ? y : floor_;
}

static int load_json(rc_cost *t, const char *path, const char *text, char *err, size_t errlen) {
    cJSON *j = cJSON_Parse(text);
    if (!j) return errf(err, errlen, "%s: not valid JSON", path);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(j, "seconds_per_step");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "draft_seconds_per_token");
    int n = cJSON_GetArraySize(rows);
    if (!cJSON_IsArray(rows) || !cJSON_IsArray(sec) || n < 1 || n != cJSON_GetArraySize(sec) || n > RC_MAX_POINTS) {
        cJSON_Delete(j);
        return errf(err, errlen, "%s: a cost table needs arrays \"rows\" and \"seconds_per_step\" of the same length (1..%d)",
                    path, RC_MAX_POINTS);
    }
    double r[RC_MAX_POINTS], s[RC_MAX_POINTS];
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(rows, i), *b = cJSON_GetArrayItem(sec, i);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 1 || !(b->valuedouble > 0)) {
            cJSON_Delete(j);
            return errf(err, errlen, "%s: entry %d of rows/seconds_per_step is not a positive number", path, i);
        }
        r[i] = a->valuedouble;
        s[i] = b->valuedouble;
    }
    char src[600];
    snprintf(src, sizeof src, "%s (cost table JSON)", path);
    rc_cost_from_points(t, r, s, n, src);
    if (cJSON_IsNumber(ds) && ds->valuedouble > 0) t->draft_s_per_token = ds->valuedouble;
    cJSON_Delete(j);
    return 0;
}

/* bench_engine CSV: metric,batch,rows_per_seq,value,unit with forward_ms rows. */
static int load_csv(rc_cost *t, const char *path, char *err, size_t errlen) {
    csv_table c;
    if (csvt_read(path, &c, err, errlen)) return -1;
    double r[RC_MAX_POINTS], s[RC_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < c.nrow && n < RC_MAX_POINTS; i++) {
        if (strcmp(csvt_get(&c, i, "metric"), "forward_ms")) continue;
        double b = csvt_num(&c, i, "batch"), k = csvt_num(&c, i, "rows_per_seq"), ms = csvt_num(&c, i, "value");
        if (!(b > 0 && k > 0 && ms > 0)) continue;
        r[n] = b * k;
        s[n++] = ms / 1e3;
    }
    csvt_free(&c);
    if (!n) return errf(err, errlen, "%s: no forward_ms rows (expected bench_engine --out CSV)", path);
    char src[600];
    snprintf(src, sizeof src, "%s (bench_engine forward cost)", path);
    rc_cost_from_points(t, r, s, n, src);
    return 0;
}

int rc_cost_load(rc_cost *t, const char *path, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) return errf(err, errlen, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = n >= 0 && n < (1 << 26) ? malloc((size_t)n + 1) : NULL;
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); fclose(f); return errf(err, errlen, "%s: read failed", path); }
    fclose(f);
    b[n] = 0;
    const char *p = b;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    int r = *p == '{' ? load_json(t, path, b, err, errlen) : load_csv(t, path, err, errlen);
    free(b);
    return r;
}

double rc_expected(const double *p, int n, int k) {
    double e = 1;
    for (int i = 0; i < k && i < n; i++) if (!isnan(p[i])) e += p[i];
    return e;
}

double rc_expected_cond(const double *a, int n, int k) {
    double e = 1, prod = 1;
    for (int i = 0; i < k && i < n; i++) {
        prod *= a[i];
        e += prod;
    }
    return e;
}

rc_pred rc_predict(const rc_cost *t, const double *p, int n, int k, int c, double n_out, double overhead_s) {
    rc_pred r;
    r.e_k = rc_expected(p, n, k);
    r.step_s = rc_cost_at(t, (double)c * (k + 1)) + (double)c * k * t->draft_s_per_token;
    if (!(r.step_s > 0)) r.tps = NAN;
    else if (n_out > 1 && !isnan(overhead_s) && overhead_s >= 0)
        r.tps = c * n_out / (overhead_s + (n_out - 1) * r.step_s / r.e_k);
    else r.tps = c * r.e_k / r.step_s;
    return r;
}

int rc_argmax(const double *v, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i]) && (best < 0 || v[i] > v[best])) best = i;
    return best;
}
