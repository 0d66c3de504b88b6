/* canary_io.c — the canary's file side: calibration from clean runs on
 * disk, and offline scans of SGLang logs and interval CSVs (canary.h). */
#include "canary.h"
#include "errmsg.h"
#include "interval_csv.h"
#include "metrics_sglang.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include "file.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file, or NULL if it cannot be read (these files are optional). */
static char *slurp(const char *path) {
    char *b;
    return read_file(path, 256u << 20, &b, NULL, NULL, 0) ? NULL : b;
}

/* The observations of a saved load: its intervals and one item per text
 * and text check, tallied by cv_observe() as the live canary's are. */
int canary_observe_load_dir(const char *dir, double min_drafts, cc_observed *o, char *err, size_t errlen) {
    cc_observed_init(o);
    char p[4200];
    snprintf(p, sizeof p, "%s/intervals.csv", dir);
    iv_row *rows;
    int n;
    if (iv_csv_read(p, &rows, &n, err, errlen)) return -1;
    cv_input in = {.iv = rows, .n_iv = n, .min_drafts = min_drafts};
    snprintf(p, sizeof p, "%s/outputs.jsonl", dir);
    char *txt = slurp(p);   /* none: intervals alone still calibrate the accept-length check */
    cv_item *items = NULL;
    int n_items = 0, cap = 0;
    for (char *line = txt, *e; line && *line; line = e ? e + 1 : NULL) {
        e = strchr(line, '\n');
        if (e) *e = 0;
        cJSON *j = cJSON_Parse(line);
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(j, "ok");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
        if (cJSON_IsTrue(ok) && cJSON_IsString(t)) {
            if (n_items + 3 > cap) {
                int nc = cap ? 2 * cap : 256;
                cv_item *ni = realloc(items, sizeof *ni * (size_t)nc);
                if (!ni) { cJSON_Delete(j); free(items); free(txt); free(rows); return errf(err, errlen, "out of memory"); }
                items = ni;
                cap = nc;
            }
            const char *s = t->valuestring;
            items[n_items++] = (cv_item){CV_BAD_CHARS, cc_bad_chars(s, NULL), NAN, -1};
            items[n_items++] = (cv_item){CV_SPRAY, cc_spray(s), NAN, -1};
            items[n_items++] = (cv_item){CV_LOOP, cc_loop(s), NAN, -1};
        }
        cJSON_Delete(j);
    }
    in.items = items;
    in.n_items = n_items;
    cv_observe(&in, o);
    free(items);
    free(txt);
    free(rows);
    return 0;
}

static double jnum(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int observe_canary_json(const char *path, cc_observed *o, int *failed) {
    char *t = slurp(path);
    if (!t) return -1;
    cJSON *j = cJSON_Parse(t);
    free(t);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "observed");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "verdict");
    /* DIR is asserted clean by the user: a "fail" verdict there means the
     * model itself trips a default threshold (the reason to calibrate). */
    if (!cJSON_IsObject(b)) { cJSON_Delete(j); return -1; }
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "fail") && failed) (*failed)++;
    cc_observed_init(o);
    o->n_intervals = (int)jnum(b, "n_intervals", 0);
    o->accept_len_min = jnum(b, "accept_len_min", NAN);
    o->n_texts = (int)jnum(b, "n_texts", 0);
    o->bad_frac = jnum(b, "bad_frac", 0);
    o->spray_max = jnum(b, "spray_max", 0);
    o->loop_max = jnum(b, "loop_max", 0);
    o->n_flat = (int)jnum(b, "n_flat", 0);
    o->flat_max = jnum(b, "flat_max", 0);
    o->ctxfree_max = jnum(b, "ctxfree_max", 0);
    o->n_copy = (int)jnum(b, "n_copy", 0);
    o->copy_fail_frac = jnum(b, "copy_fail_frac", 0);
    o->n_spec = (int)jnum(b, "n_spec", 0);
    o->spec_mismatch_frac = jnum(b, "spec_mismatch_frac", 0);
    o->n_det = (int)jnum(b, "n_det", 0);
    o->nondet_frac = jnum(b, "nondet_frac", 0);
    cJSON_Delete(j);
    return 0;
}

typedef struct {
    char (*canary)[1024];
    int nc;
    char (*loads)[1024];
    int nl;
    int cap;
} found_t;

static void walk(const char *dir, int depth, found_t *f) {
    if (depth > 6) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        int w = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (w < 0 || (size_t)w >= sizeof p) continue;
        struct stat st;
        if (stat(p, &st)) continue;
        if (S_ISDIR(st.st_mode)) { walk(p, depth + 1, f); continue; }
        int is_c = !strcmp(e->d_name, "canary.json"), is_l = !strcmp(e->d_name, "intervals.csv");
        if (!is_c && !is_l) continue;
        if (f->nc >= f->cap || f->nl >= f->cap) continue;
        snprintf(is_c ? f->canary[f->nc++] : f->loads[f->nl++], 1024, "%s", dir);
    }
    closedir(d);
}

int canary_calibrate_dir(const char *dir, double min_drafts, cc_thresholds *t, cc_observed *clean, int *n_runs,
                         char *explain, size_t explen, char *err, size_t errlen) {
    found_t f = {0};
    f.cap = 4096;
    f.canary = malloc(sizeof *f.canary * (size_t)f.cap);
    f.loads = malloc(sizeof *f.loads * (size_t)f.cap);
    if (!f.canary || !f.loads) { free(f.canary); free(f.loads); return errf(err, errlen, "out of memory"); }
    walk(dir, 0, &f);
    cc_observed_init(clean);
    *n_runs = 0;
    int n_failed = 0;
    for (int i = 0; i < f.nc; i++) {
        char p[1100];
        snprintf(p, sizeof p, "%s/canary.json", f.canary[i]);
        cc_observed o;
        if (observe_canary_json(p, &o, &n_failed)) continue;
        cc_observed_merge(clean, &o);
        (*n_runs)++;
    }
    for (int i = 0; i < f.nl; i++) {
        /* A canary's own load/ is already in its canary.json. */
        const char *sl = strrchr(f.loads[i], '/');
        if (sl && !strcmp(sl, "/load")) {
            char parent[1024], p[1100];
            snprintf(parent, sizeof parent, "%.*s", (int)(sl - f.loads[i]), f.loads[i]);
            snprintf(p, sizeof p, "%s/canary.json", parent);
            if (!access(p, R_OK)) continue;
        }
        cc_observed o;
        char e2[256];
        if (canary_observe_load_dir(f.loads[i], min_drafts, &o, e2, sizeof e2)) continue;
        cc_observed_merge(clean, &o);
        (*n_runs)++;
    }
    free(f.canary);
    free(f.loads);
    if (!*n_runs) return errf(err, errlen, "%s: no clean run found (a passing canary.json, or a load --out with intervals.csv)", dir);
    cc_calibrate(clean, t, explain, explen);
    size_t el = explain ? strlen(explain) : 0;
    if (n_failed && explain && el < explen)
        snprintf(explain + el, explen - el, "note: %d of these canary runs had verdict 'fail' (the model trips a default "
                 "threshold when healthy); DIR is taken as clean, so their scores are the clean level\n", n_failed);
    return 0;
}

/* The intervals of a scan, gathered first so that one cv_judge() decides. */
typedef struct {
    iv_row *r;
    int n, cap, oom;
} rows_t;

static void keep_row(void *ctx, const iv_row *r) {
    rows_t *s = ctx;
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 256;
        iv_row *nr = realloc(s->r, sizeof *nr * (size_t)nc);
        if (!nr) { s->oom = 1; return; }
        s->r = nr;
        s->cap = nc;
    }
    s->r[s->n++] = *r;
}

/* Lists the flagged intervals, then judges them all. */
static void scan_judge(const iv_row *rows, int n, int csv, const cc_thresholds *t, double min_drafts, FILE *out,
                       cv_verdict *v) {
    for (int i = 0; i < n; i++) {
        const iv_row *r = &rows[i];
        if (!cv_interval_flagged(r, min_drafts, t->accept_len)) continue;
        int rk;
        double al = cv_interval_value(r, min_drafts, &rk);   /* with ranks: the lowest judged rank's */
        char rank[IV_RANK_LABEL + 16] = "";
        if (rk >= 0) snprintf(rank, sizeof rank, " (rank %s)", r->rank[rk].label);
        if (csv)
            fprintf(out, "row %d [%.1f s, %.1f s]: accept len %.3f%s <= %.3f, running %g\n", i + 1, r->t_start, r->t_end,
                    al, rank, t->accept_len, isnan(r->inflight) ? r->running : r->inflight);
        else
            fprintf(out, "line %ld: accept len %.2f%s <= %.2f, #running-req %g\n", r->line_no, al, rank, t->accept_len,
                    r->running);
    }
    cv_input in = {.iv = rows, .n_iv = n, .min_drafts = min_drafts};
    cv_judge(&in, t, v);
}

int canary_scan_sglang(const char *path, const cc_thresholds *t, double min_drafts, FILE *out, int *n_rows,
                       cv_verdict *v, char *err, size_t errlen) {
    sgl_tail *tl;
    if (sgl_tail_open(&tl, path, 0, err, errlen)) return -1;
    rows_t s = {0};
    for (;;) {
        if (sgl_tail_poll(tl, 0, 0, keep_row, &s) < 0) {
            sgl_tail_close(tl);
            free(s.r);
            return errf(err, errlen, "%s: read error", path);
        }
        if (sgl_tail_eof(tl)) break;
        usleep(20 * 1000);   /* stdin with nothing yet */
    }
    sgl_tail_close(tl);
    if (s.oom) { free(s.r); return errf(err, errlen, "%s: out of memory", path); }
    scan_judge(s.r, s.n, 0, t, min_drafts, out, v);
    free(s.r);
    *n_rows = s.n;
    return 0;
}

int canary_scan_csv(const char *path, const cc_thresholds *t, double min_drafts, FILE *out, int *n_rows,
                    cv_verdict *v, char *err, size_t errlen) {
    iv_row *rows;
    int n;
    if (iv_csv_read(path, &rows, &n, err, errlen)) return -1;
    scan_judge(rows, n, 1, t, min_drafts, out, v);
    free(rows);
    *n_rows = n;
    return 0;
}
