/* cuda_check_attention.c — test_cuda's attention sections (cuda_ops.cu's
 * split-context kernel: spans, several sequences, long contexts, wide
 * calls in tiles of rows), against the CPU within the bound test_cuda.c's
 * header derives and against each row alone bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_check.h"

/* ---- attention ---------------------------------------------------------------- */

#define ATT_U (1.0 / 16777216.0)   /* u = 2^-24, float's unit roundoff */
#define ATT_CHUNK 256              /* cuda_ops.cu's chunk of positions (the bound counts its chunks) */
static double att_gamma(double k) { return k * ATT_U / (1.0 - k * ATT_U); }

/* Elements of rows [0, n_q) of gpu (CUDA) and cpu beyond the bound of the
 * header comment: each against a double reference (the GPU's bound, and
 * the CPU's), and gpu against cpu (the two added). Row i attends over
 * views[i] (host pools) to positions 0..n_ctx[i]−1. *maxd: the largest
 * |gpu − cpu|; *ratio: the largest |gpu − cpu| / bound. */
static long att_beyond(const float *gpu, const float *cpu, const float *q, const kb_kv_view *const *views,
                       const int *n_ctx, int n_q, int nh, float scale, double *maxd, double *ratio) {
    long bad = 0;
    for (int i = 0; i < n_q; i++) {
        const kb_kv_view *v = views[i];
        const int n = n_ctx[i], hd = v->head_dim, ps = v->page_size, nch = (n + ATT_CHUNK - 1) / ATT_CHUNK;
        const size_t slot = (size_t)v->n_kv_heads * hd;
        double *s = malloc(sizeof(double) * (size_t)n + 8), *w = malloc(sizeof(double) * (size_t)n + 8);
        for (int h = 0; h < nh; h++) {
            const int kvh = h / (nh / v->n_kv_heads);
            const float *qh = q + ((size_t)i * nh + h) * hd;
            double mx = -INFINITY, mn = INFINITY, esg = 0, esc = 0;
            for (int p = 0; p < n; p++) {
                const float *k = v->k_pages + ((size_t)v->pages[p / ps] * ps + p % ps) * slot + (size_t)kvh * hd;
                double dot = 0, mag = 0;
                for (int d = 0; d < hd; d++) {
                    dot += (double)qh[d] * k[d];
                    mag += fabs((double)qh[d] * k[d]);
                }
                s[p] = dot * scale;
                const double tail = ATT_U * fabs(dot) * scale + ATT_U * fabs(s[p]);
                esg = fmax(esg, att_gamma((hd + 31) / 32 + 5) * mag * scale + tail);
                esc = fmax(esc, att_gamma(hd / 8 + 3 + hd % 8) * mag * scale + tail);
                mx = fmax(mx, s[p]);
                mn = fmin(mn, s[p]);
            }
            double sum = 0;
            for (int p = 0; p < n; p++) sum += (w[p] = exp(s[p] - mx));
            for (int p = 0; p < n; p++) w[p] /= sum;
            const double tg = expm1(esg + ATT_U * (mx - mn + 2 * esg) + 5 * ATT_U);
            const double tc = expm1(esc + ATT_U * (mx - mn + 2 * esc) + 4 * ATT_U);
            const double ag = (1 + tg) * (1 + att_gamma(n + nch + 8)) - 1, ac = (1 + tc) * (1 + att_gamma(n)) - 1;
            const double fg = 2 * ag / (1 - ag) * (1 + ATT_U) + ATT_U, fc = 2 * ac / (1 - ac) * (1 + ATT_U) + ATT_U;
            for (int d = 0; d < hd; d++) {
                double ref = 0, a = 0;
                for (int p = 0; p < n; p++) {
                    const float x = v->v_pages[((size_t)v->pages[p / ps] * ps + p % ps) * slot + (size_t)kvh * hd + d];
                    ref += w[p] * x;
                    a += w[p] * fabs((double)x);
                }
                const size_t o = ((size_t)i * nh + h) * hd + d;
                const double tolg = fg * a + 1e-30, tolc = fc * a + 1e-30, dd = fabs((double)gpu[o] - cpu[o]);
                const int over = !(fabs(gpu[o] - ref) <= tolg) + !(fabs(cpu[o] - ref) <= tolc) + !(dd <= tolg + tolc);
                if (over && !bad)
                    fprintf(stderr, "attention row %d (n_ctx %d) head %d dim %d: cuda %.9g cpu %.9g ref %.9g, bounds "
                            "%.3g (cuda) %.3g (cpu)\n", i, n, h, d, gpu[o], cpu[o], ref, tolg, tolc);
                bad += over > 0;
                if (dd != dd || dd > *maxd) *maxd = dd;
                if (dd / (tolg + tolc) > *ratio) *ratio = dd / (tolg + tolc);
            }
        }
        free(s);
        free(w);
    }
    return bad;
}

/* kb_attention_row on cuda for each of n_q rows, row i over views[i]: the bits a row has alone */
static void att_rows_alone(float *out, const float *q, const kb_kv_view *const *views, const int *n_ctx, int n_q,
                           int nh, float *scratch) {
    for (int i = 0; i < n_q; i++) {
        const size_t o = (size_t)i * nh * views[i]->head_dim;
        kb_attention_row(out + o, q + o, views[i], n_ctx[i], nh, 0.125f, scratch);
    }
}

void test_attention(void) {
    static const int cfg[][4] = {/* page_size, n_kv, group, head_dim */ {4, 2, 2, 16}, {16, 1, 4, 64}, {3, 2, 1, 20},
                                 {16, 2, 2, 128}, {7, 1, 2, 160}, {5, 1, 2, 288}};
    double maxd = 0, ratio = 0;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int ps = cfg[c][0], n_kv = cfg[c][1], nh = n_kv * cfg[c][2], hd = cfg[c][3];
        const int n_pages = 24, start = 37, n_q = 6, ctx = start + n_q;
        const size_t pool = (size_t)n_pages * ps * n_kv * hd;
        float *k = random_floats(pool, 1.0f), *v = random_floats(pool, 1.0f);
        int pages[24];
        for (int i = 0; i < n_pages; i++) pages[i] = (i * 7 + 3) % n_pages;   /* scattered */
        kb_kv_view view = {.k_pages = k, .v_pages = v, .pages = pages, .page_size = ps, .n_kv_heads = n_kv, .head_dim = hd};
        float *q = random_floats((size_t)n_q * nh * hd, 2.0f);
        int nctx[6];
        for (int i = 0; i < n_q; i++) nctx[i] = start + i + 1;
        size_t qn = (size_t)n_q * nh * hd;
        float *oc = calloc(qn, 4), *os = calloc(qn, 4), *orow = calloc(qn, 4), *om = calloc(qn, 4);
        use("cpu");
        size_t sf = kb_attention_span_scratch(nh, n_kv, ctx);
        float *scratch = malloc(sf * 4);
        kb_attention_span(oc, q, &view, n_q, nctx, nh, 0.125f, scratch, sf);
        use("cuda");
        kb_attention_span(os, q, &view, n_q, nctx, nh, 0.125f, scratch, sf);   /* host KV: staged */
        const kb_kv_view *vrow[6] = {&view, &view, &view, &view, &view, &view};
        att_rows_alone(orow, q, vrow, nctx, n_q, nh, scratch);
        /* the same pool in managed memory, as the engine has it */
        float *mk = kb_alloc(pool * 4), *mv = kb_alloc(pool * 4);
        kb_copy_to_device(mk, k, pool * 4);
        kb_copy_to_device(mv, v, pool * 4);
        kb_kv_view mview = view;
        mview.k_pages = mk;
        mview.v_pages = mv;
        kb_attention_span(om, q, &mview, n_q, nctx, nh, 0.125f, scratch, sf);
        double e;
        long d;
        CHECKF((d = att_beyond(os, oc, q, vrow, nctx, n_q, nh, 0.125f, &maxd, &ratio)) == 0,
               "attention ps %d kv %d heads %d hd %d: span %ld elements beyond the bound", ps, n_kv, nh, hd, d);
        CHECKF((d = bits_differ(os, orow, qn, &e)) == 0, "attention hd %d: rows alone differ from the span (%ld)", hd, d);
        CHECKF((d = bits_differ(os, om, qn, &e)) == 0, "attention hd %d: managed KV differs from staged KV (%ld)", hd, d);
        /* three sequences' spans in one call (one launch on cuda), each over
         * its own page list: within the bound of the CPU's, and each row the
         * bits it has alone */
        int pages2[24], pages3[24];
        for (int i = 0; i < n_pages; i++) pages2[i] = n_pages - 1 - i, pages3[i] = (i * 5 + 1) % n_pages;
        kb_kv_view views[3] = {mview, mview, mview};
        views[1].pages = pages2;
        views[2].pages = pages3;
        const int span_rows[3] = {3, 1, 2}, sctx[6] = {start + 1, start + 2, start + 3, 20, 30, 31};
        float *sc = calloc(qn, 4), *sg = calloc(qn, 4);
        use("cpu");
        kb_kv_view hviews[3] = {view, view, view};
        hviews[1].pages = pages2;
        hviews[2].pages = pages3;
        kb_attention_spans(sc, q, hviews, span_rows, 3, sctx, nh, 0.125f, scratch, sf);
        use("cuda");
        kb_attention_spans(sg, q, views, span_rows, 3, sctx, nh, 0.125f, scratch, sf);
        const kb_kv_view *hv[6] = {&hviews[0], &hviews[0], &hviews[0], &hviews[1], &hviews[2], &hviews[2]};
        const kb_kv_view *mvw[6] = {&views[0], &views[0], &views[0], &views[1], &views[2], &views[2]};
        CHECKF((d = att_beyond(sg, sc, q, hv, sctx, n_q, nh, 0.125f, &maxd, &ratio)) == 0,
               "attention hd %d: three spans in one call: %ld elements beyond the bound of the CPU's", hd, d);
        att_rows_alone(orow, q, mvw, sctx, n_q, nh, scratch);
        CHECKF((d = bits_differ(sg, orow, qn, &e)) == 0, "attention hd %d: three spans in one call differ from the "
               "rows alone (%ld)", hd, d);
        free(sc);
        free(sg);
        kb_free(mk);
        kb_free(mv);
        free(k); free(v); free(q); free(oc); free(os); free(orow); free(om); free(scratch);
    }
    printf("attention: span = rows = spans of 3 sequences in one call bit for bit (paged, GQA, head_dim "
           "16/20/64/128/160/288), within the bound of the CPU's: max |d| %.3g, at most %.3f of the bound\n",
           maxd, ratio);
}

/* Contexts over several chunks (Qwen3-0.6B's head shape: 16 q heads over 8
 * kv heads, head_dim 128; pages of 12 positions, which the chunks of 256
 * cut mid-page, scattered over the pool). Rows of a long sequence at
 * 767, 768, 769 (both sides of a chunk's end) and 1,000 positions (4
 * chunks, the last ragged) beside a 5-position row of another sequence,
 * in one call: within the bound of the CPU's; each row the bits it has
 * alone; and the same through kb_attention_idx under a bound of 4,096
 * positions (16 chunks' grid, as a recorded forward launches it). */
void test_attention_long(void) {
    const int ps = 12, n_kv = 8, nh = 16, hd = 128, n_long = 1000, n_pages = (n_long + ps - 1) / ps + 4;
    const size_t pool = (size_t)n_pages * ps * n_kv * hd;
    float *k = random_floats(pool, 1.0f), *v = random_floats(pool, 1.0f);
    int pl[96], pshort[1] = {n_pages - 1};
    for (int i = 0; i < n_pages - 1; i++) pl[i] = (i * 37 + 11) % (n_pages - 1);   /* scattered (37 ⊥ 87) */
    kb_kv_view hl = {.k_pages = k, .v_pages = v, .pages = pl, .page_size = ps, .n_kv_heads = n_kv, .head_dim = hd};
    kb_kv_view hs = hl;
    hs.pages = pshort;
    enum { NQ = 5 };
    const int nctx[NQ] = {767, 768, 769, n_long, 5}, span_rows[2] = {4, 1};
    const size_t qn = (size_t)NQ * nh * hd;
    float *q = random_floats(qn, 2.0f);
    float *oc = calloc(qn, 4), *og = calloc(qn, 4), *oa = calloc(qn, 4), *oi = calloc(qn, 4);
    use("cpu");
    size_t sf = kb_attention_span_scratch(nh, n_kv, n_long);
    float *scratch = malloc(sf * 4);
    kb_kv_view hv2[2] = {hl, hs};
    kb_attention_spans(oc, q, hv2, span_rows, 2, nctx, nh, 0.125f, scratch, sf);
    use("cuda");
    float *mk = kb_alloc(pool * 4), *mv = kb_alloc(pool * 4);
    kb_copy_to_device(mk, k, pool * 4);
    kb_copy_to_device(mv, v, pool * 4);
    kb_kv_view ml = hl, ms = hs;
    ml.k_pages = ms.k_pages = mk;
    ml.v_pages = ms.v_pages = mv;
    kb_kv_view mv2[2] = {ml, ms};
    kb_attention_spans(og, q, mv2, span_rows, 2, nctx, nh, 0.125f, scratch, sf);
    const kb_kv_view *hrow[NQ] = {&hl, &hl, &hl, &hl, &hs}, *mrow[NQ] = {&ml, &ml, &ml, &ml, &ms};
    att_rows_alone(oa, q, mrow, nctx, NQ, nh, scratch);
    /* the lists end to end, as a step buffer holds them */
    const int np_long = (n_long + ps - 1) / ps;
    int cat[96], off[NQ] = {0, 0, 0, 0, np_long};
    memcpy(cat, pl, sizeof(int) * (size_t)np_long);
    cat[np_long] = pshort[0];
    kb_attention_idx(oi, q, &ml, cat, np_long + 1, off, nctx, NQ, 4096, nh, 0.125f, scratch, sf);
    double maxd = 0, ratio = 0, e;
    long d;
    CHECKF((d = att_beyond(og, oc, q, hrow, nctx, NQ, nh, 0.125f, &maxd, &ratio)) == 0,
           "long attention: %ld elements beyond the bound of the CPU's", d);
    CHECKF((d = bits_differ(og, oa, qn, &e)) == 0, "long attention: rows beside a short one differ from the rows "
           "alone (%ld)", d);
    CHECKF((d = bits_differ(oi, oa, qn, &e)) == 0, "long attention: kb_attention_idx under a 4,096 bound differs "
           "from the rows alone (%ld)", d);
    printf("attention over 767..1,000 positions (3-4 chunks, 12-position pages) beside a 5-position row: each row "
           "its bits alone, through kb_attention_idx's 16-chunk grid too; max |d| from the CPU %.3g, at most %.3f "
           "of the bound\n", maxd, ratio);
    kb_free(mk);
    kb_free(mv);
    free(k); free(v); free(q); free(oc); free(og); free(oa); free(oi); free(scratch);
}

/* A wide call (over 64 rows: cuda_ops.cu's tiles of rows sharing a block,
 * K and V read once for a tile on one page list) gives every row the bits
 * it has alone (a block of its own): a prefill chunk of 100 rows of one
 * sequence (contexts 201..300, across the first chunk's end, so tiles hold
 * rows of different lengths); three spans whose tiles straddle sequences
 * (40 rows at 221..260, 1 row at 5, 30 rows at 500..529: a tile of rows on
 * different page lists, and one whose rows reach different chunks); and
 * the prefill rows through kb_attention_idx under a 4,096 bound. Within the
 * bound of the CPU's too. Qwen3-0.6B's head shape; head_dim 64 and 288
 * (another lane count, and the part past 256) on the prefill span. */
void test_attention_prefill(void) {
    static const int cfg[][3] = {/* n_kv, q heads, head_dim */ {8, 16, 128}, {1, 2, 64}, {1, 2, 288}};
    double maxd = 0, ratio = 0;
    for (int c = 0; c < 3; c++) {
        const int ps = 12, n_kv = cfg[c][0], nh = cfg[c][1], hd = cfg[c][2], n_pages = 48 + 48 + 4;
        const size_t pool = (size_t)n_pages * ps * n_kv * hd;
        float *k = random_floats(pool, 1.0f), *v = random_floats(pool, 1.0f);
        int pa[48], pb[1] = {n_pages - 1}, pc[48];
        for (int i = 0; i < 48; i++) pa[i] = (i * 37 + 11) % 48, pc[i] = 48 + (i * 5 + 3) % 48;   /* scattered, disjoint */
        float *mk = kb_alloc(pool * 4), *mv = kb_alloc(pool * 4);
        kb_copy_to_device(mk, k, pool * 4);
        kb_copy_to_device(mv, v, pool * 4);
        kb_kv_view ha = {.k_pages = k, .v_pages = v, .pages = pa, .page_size = ps, .n_kv_heads = n_kv, .head_dim = hd};
        kb_kv_view hb = ha, hc = ha;
        hb.pages = pb;
        hc.pages = pc;
        kb_kv_view ma = ha, mb = hb, mc = hc;
        ma.k_pages = mb.k_pages = mc.k_pages = mk;
        ma.v_pages = mb.v_pages = mc.v_pages = mv;
        enum { NQ = 100 };
        const size_t qn = (size_t)NQ * nh * hd;
        float *q = random_floats(qn, 2.0f);
        float *oc = calloc(qn, 4), *og = calloc(qn, 4), *oa = calloc(qn, 4), *oi = calloc(qn, 4);
        int nctx[NQ];
        const kb_kv_view *hrow[NQ], *mrow[NQ];
        use("cpu");
        size_t sf = kb_attention_span_scratch(nh, n_kv, 560);
        float *scratch = malloc(sf * 4);
        double e;
        long d;
        for (int layout = 0; layout < (c == 0 ? 2 : 1); layout++) {
            int n_q = NQ, n_spans = 1, span_rows[3] = {NQ, 0, 0};
            kb_kv_view hv[3] = {ha, hb, hc}, mvw[3] = {ma, mb, mc};
            if (layout == 0) {
                for (int i = 0; i < NQ; i++) nctx[i] = 201 + i, hrow[i] = &hv[0], mrow[i] = &mvw[0];
            } else {
                n_q = 71, n_spans = 3, span_rows[0] = 40, span_rows[1] = 1, span_rows[2] = 30;
                for (int i = 0; i < 40; i++) nctx[i] = 221 + i, hrow[i] = &hv[0], mrow[i] = &mvw[0];
                nctx[40] = 5, hrow[40] = &hv[1], mrow[40] = &mvw[1];
                for (int i = 0; i < 30; i++) nctx[41 + i] = 500 + i, hrow[41 + i] = &hv[2], mrow[41 + i] = &mvw[2];
            }
            const size_t qm = (size_t)n_q * nh * hd;
            use("cpu");
            kb_attention_spans(oc, q, hv, span_rows, n_spans, nctx, nh, 0.125f, scratch, sf);
            use("cuda");
            memset(og, 0xff, qm * 4);
            kb_attention_spans(og, q, mvw, span_rows, n_spans, nctx, nh, 0.125f, scratch, sf);
            att_rows_alone(oa, q, mrow, nctx, n_q, nh, scratch);
            CHECKF((d = att_beyond(og, oc, q, hrow, nctx, n_q, nh, 0.125f, &maxd, &ratio)) == 0,
                   "wide attention (hd %d, layout %d): %ld elements beyond the bound of the CPU's", hd, layout, d);
            CHECKF((d = bits_differ(og, oa, qm, &e)) == 0, "wide attention (hd %d, layout %d): %ld elements differ "
                   "from the rows alone", hd, layout, d);
            if (layout == 0) {   /* the same rows from a step buffer's lists, under a 4,096 bound */
                kb_attention_idx(oi, q, &ma, pa, 48, (int[NQ]){0}, nctx, NQ, 4096, nh, 0.125f, scratch, sf);
                CHECKF((d = bits_differ(oi, oa, qm, &e)) == 0, "wide attention (hd %d) through kb_attention_idx: %ld "
                       "elements differ from the rows alone", hd, d);
            }
        }
        kb_free(mk);
        kb_free(mv);
        free(k); free(v); free(q); free(oc); free(og); free(oa); free(oi); free(scratch);
    }
    printf("attention, wide calls (tiles of rows): a 100-row prefill span (head_dim 64/128/288), three spans whose "
           "tiles straddle sequences, and kb_attention_idx under a 4,096 bound: each row its bits alone; max |d| "
           "from the CPU %.3g, at most %.3f of the bound\n", maxd, ratio);
}
