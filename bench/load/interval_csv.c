/* interval_csv.c — see interval_csv.h. */
#include "interval_csv.h"
#include "csv_row.h"
#include "errmsg.h"
#include "input_file.h"
#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "drafts" is the server's drafts counter (vLLM's num_drafts), "verify_steps"
 * its sequence verify steps (specbed; empty elsewhere): the accept length is
 * committed ÷ verify_steps where there are steps, else 1 + accepted ÷ drafts.
 * (Files written before verify_steps existed held the steps under "drafts";
 * read back, they give the same accept-length denominator.) */
static const char *const COLS[] = {"t_start_s", "t_end_s", "running", "waiting", "inflight", "accept_len",
                                   "accept_rate", "gen_tps", "client_tps", "drafts", "draft_tokens", "accepted",
                                   "line_no", "basis", "verify_steps"};
enum { NCOLS = 15, COL_BASIS = 13, COL_RANKS = 1000 };

static void num(csv_row *r, double v) {
    if (isnan(v)) csv_row_field(r, "");
    else csv_row_fieldf(r, "%.6g", v);
}

/* The "ranks" cell: LABEL|accept_len|drafts|running;… (empty number = NaN;
 * ';' and '|' in a label become '_'). */
static void ranks_cell(const iv_row *v, char *b, size_t n) {
    size_t o = 0;
    b[0] = 0;
    for (int i = 0; i < v->n_ranks && i < IV_MAX_RANKS; i++) {
        const iv_rank *k = &v->rank[i];
        char lab[IV_RANK_LABEL], x[3][32];
        snprintf(lab, sizeof lab, "%s", k->label);
        for (char *c = lab; *c; c++) if (*c == ';' || *c == '|') *c = '_';
        const double xs[3] = {k->accept_len, k->drafts, k->running};
        for (int j = 0; j < 3; j++) {
            if (isnan(xs[j])) x[j][0] = 0;
            else snprintf(x[j], sizeof x[j], "%.6g", xs[j]);
        }
        int w = snprintf(b + o, n - o, "%s%s|%s|%s|%s", i ? ";" : "", lab, x[0], x[1], x[2]);
        if (w < 0 || (size_t)w >= n - o) break;
        o += (size_t)w;
    }
}

static void ranks_parse(const char *s, iv_row *r) {
    r->n_ranks = 0;
    while (*s && r->n_ranks < IV_MAX_RANKS) {
        const char *e = strchr(s, ';');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char part[IV_RANK_LABEL + 100];
        snprintf(part, sizeof part, "%.*s", (int)len, s);
        char *f[4] = {part, NULL, NULL, NULL};
        for (int j = 1; j < 4; j++) {
            f[j] = f[j - 1] ? strchr(f[j - 1], '|') : NULL;
            if (f[j]) *f[j]++ = 0;
        }
        iv_rank *k = &r->rank[r->n_ranks++];
        size_t ll = strlen(part) < sizeof k->label - 1 ? strlen(part) : sizeof k->label - 1;
        memcpy(k->label, part, ll);
        k->label[ll] = 0;
        double *dst[3] = {&k->accept_len, &k->drafts, &k->running};
        for (int j = 0; j < 3; j++) {
            *dst[j] = NAN;
            if (f[j + 1] && *f[j + 1]) { char *q; double v = strtod(f[j + 1], &q); if (!*q) *dst[j] = v; }
        }
        s += len + (e ? 1 : 0);
    }
}

int iv_csv_write(const char *path, const iv_row *rows, int n, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) return errf(err, errlen, "%s: %s", path, strerror(errno));
    int np = 0, any_rank = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].n_pos > np) np = rows[i].n_pos;
        any_rank |= rows[i].n_ranks > 0;
    }
    csv_row r = {f, 0};
    for (int c = 0; c < NCOLS; c++) csv_row_field(&r, COLS[c]);
    if (any_rank) csv_row_field(&r, "ranks");
    for (int p = 0; p < np; p++) csv_row_fieldf(&r, "pos_%d", p);
    csv_row_end(&r);
    for (int i = 0; i < n; i++) {
        const iv_row *v = &rows[i];
        double vals[NCOLS] = {v->t_start, v->t_end, v->running, v->waiting, v->inflight, v->accept_len,
                              v->accept_rate, v->gen_tps, v->client_tps, v->num_drafts, v->draft_tokens, v->accepted,
                              v->line_no ? (double)v->line_no : NAN, NAN, v->verify_steps};
        for (int c = 0; c < NCOLS; c++) {
            if (c == COL_BASIS) csv_row_field(&r, iv_basis_name(v->basis));
            else num(&r, vals[c]);
        }
        if (any_rank) {
            char cell[IV_MAX_RANKS * (IV_RANK_LABEL + 64)];
            ranks_cell(v, cell, sizeof cell);
            csv_row_field(&r, cell);
        }
        for (int p = 0; p < np; p++) num(&r, p < v->n_pos ? v->pos_rate[p] : NAN);
        csv_row_end(&r);
    }
    if (fclose(f)) return errf(err, errlen, "%s: write failed", path);
    return 0;
}

typedef struct {
    int col, row;                /* current field / record */
    int map[NCOLS + IV_MAX_POS]; /* header column → our index (-1 unknown) */
    int ncol_hdr;
    iv_row *rows;
    int n, cap, oom;
    iv_row cur;
} rd_t;

static void on_field(void *s, size_t len, void *ud) {
    rd_t *d = ud;
    if (d->row > 0 && d->col < d->ncol_hdr && d->col < NCOLS + IV_MAX_POS && d->map[d->col] == COL_RANKS) {
        char cell[IV_MAX_RANKS * (IV_RANK_LABEL + 64)];
        size_t k = len < sizeof cell - 1 ? len : sizeof cell - 1;
        memcpy(cell, s, k);
        cell[k] = 0;
        ranks_parse(cell, &d->cur);
        d->col++;
        return;
    }
    char b[64];
    size_t k = len < sizeof b - 1 ? len : sizeof b - 1;
    memcpy(b, s, k);
    b[k] = 0;
    if (d->row == 0) {
        int idx = -1;
        for (int c = 0; c < NCOLS; c++) if (!strcmp(b, COLS[c])) idx = c;
        if (idx < 0 && !strcmp(b, "ranks")) idx = COL_RANKS;
        if (idx < 0 && !strncmp(b, "pos_", 4)) {
            int p = atoi(b + 4);
            if (p >= 0 && p < IV_MAX_POS) idx = NCOLS + p;
        }
        if (d->col < NCOLS + IV_MAX_POS) d->map[d->col] = idx;
        d->ncol_hdr = d->col + 1;
    } else if (d->col < d->ncol_hdr && d->col < NCOLS + IV_MAX_POS) {
        int idx = d->map[d->col];
        double v = NAN;
        iv_row *r = &d->cur;
        if (idx == COL_BASIS) {
            iv_basis bs;
            if (!iv_basis_from_name(b, &bs)) r->basis = bs;
            d->col++;
            return;
        }
        if (k) { char *e; v = strtod(b, &e); if (*e) v = NAN; }
        switch (idx) {
        case 0: r->t_start = v; break;
        case 1: r->t_end = v; break;
        case 2: r->running = v; break;
        case 3: r->waiting = v; break;
        case 4: r->inflight = v; break;
        case 5: r->accept_len = v; break;
        case 6: r->accept_rate = v; break;
        case 7: r->gen_tps = v; break;
        case 8: r->client_tps = v; break;
        case 9: r->num_drafts = v; break;
        case 10: r->draft_tokens = v; break;
        case 11: r->accepted = v; break;
        case 12: r->line_no = isnan(v) ? 0 : (long)v; break;
        case 14: r->verify_steps = v; break;
        default:
            if (idx >= NCOLS) {
                int p = idx - NCOLS;
                r->pos_rate[p] = v;
                if (!isnan(v) && p + 1 > r->n_pos) r->n_pos = p + 1;
            }
        }
    }
    d->col++;
}

static void on_record(int c, void *ud) {
    (void)c;
    rd_t *d = ud;
    if (d->row > 0) {
        iv_row *c = &d->cur;
        c->drafts = !isnan(c->verify_steps) ? c->verify_steps : c->num_drafts;   /* the accept length's denominator */
        if (d->n == d->cap) {
            int nc = d->cap ? d->cap * 2 : 64;
            iv_row *nr = realloc(d->rows, (size_t)nc * sizeof *nr);
            if (!nr) { d->oom = 1; return; }
            d->rows = nr;
            d->cap = nc;
        }
        d->rows[d->n++] = d->cur;
    }
    iv_row_clear(&d->cur);
    d->row++;
    d->col = 0;
}

int iv_csv_read(const char *path, iv_row **rows, int *n, char *err, size_t errlen) {
    *rows = NULL;
    *n = 0;
    /* checked before reading (canary --intervals /dev/zero used to read
     * without end: libcsv keeps a field that never ends in memory) */
    if (input_file_check(path, IV_CSV_MAX_BYTES, "interval CSV", err, errlen)) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return errf(err, errlen, "%s: %s", path, strerror(errno));
    struct csv_parser p;
    if (csv_init(&p, CSV_APPEND_NULL)) { fclose(f); return errf(err, errlen, "libcsv init failed"); }
    rd_t d;
    memset(&d, 0, sizeof d);
    iv_row_clear(&d.cur);
    char buf[65536];
    size_t k;
    int bad = 0;
    size_t total = 0;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        if ((total += k) > IV_CSV_MAX_BYTES) { bad = 2; break; }   /* a pipe: the same limit, counted */
        if (csv_parse(&p, buf, k, on_field, on_record, &d) != k) { bad = 1; break; }
    }
    if (!bad) csv_fini(&p, on_field, on_record, &d);
    csv_free(&p);
    fclose(f);
    if (bad == 2) {
        free(d.rows);
        return errf(err, errlen, "%s: more than the %u MiB an interval CSV may hold; stopped reading", path,
                    IV_CSV_MAX_BYTES >> 20);
    }
    if (bad || d.oom) { free(d.rows); return errf(err, errlen, "%s: not a valid CSV (%s)", path, bad ? csv_strerror(csv_error(&p)) : "out of memory"); }
    int has_accept = 0;
    for (int c = 0; c < d.ncol_hdr && c < NCOLS + IV_MAX_POS; c++) if (d.map[c] == 5) has_accept = 1;
    if (!has_accept) { free(d.rows); return errf(err, errlen, "%s: no accept_len column (not an intervals.csv)", path); }
    *rows = d.rows;
    *n = d.n;
    return 0;
}
