/* label: unit */
/* test_kv_cache.c — page accounting of the paged KV cache: append, truncate,
 * free, limits, and that a failed append changes nothing. */
#include "kv_cache.h"
#include "test_util.h"

#include <string.h>

static kv_config small_cfg(void) {
    return (kv_config){ .n_layers = 2, .n_kv_heads = 2, .head_dim = 4, .page_size = 4,
                        .n_pages = 10, .max_seqs = 3, .max_seq_len = 24 };
}

static void test_create_errors(void) {
    char err[256] = "";
    kv_cache *kv = (kv_cache *)1;
    kv_config c = small_cfg();
    c.page_size = 0;
    CHECK(kv_cache_create(&kv, &c, err, sizeof err) != 0 && kv == NULL);
    CHECKF(strstr(err, "page_size") != NULL, "%s", err);
    c = small_cfg();
    c.n_layers = -1;
    CHECK(kv_cache_create(&kv, &c, err, sizeof err) != 0 && strstr(err, "n_layers") != NULL);
    c = small_cfg();
    c.n_pages = 2000000000; c.page_size = 2000000000;
    CHECK(kv_cache_create(&kv, &c, err, sizeof err) != 0);
}

static void test_accounting(void) {
    char err[256];
    kv_config c = small_cfg();
    kv_cache *kv;
    CHECK(kv_cache_create(&kv, &c, err, sizeof err) == 0);
    CHECK(kv_pages_total(kv) == 10 && kv_pages_free(kv) == 10);
    CHECK(kv_get_config(kv)->page_size == 4);

    int a = kv_seq_new(kv), b = kv_seq_new(kv), d = kv_seq_new(kv);
    CHECK(a >= 0 && b >= 0 && d >= 0 && a != b && b != d && a != d);
    CHECK(kv_seq_new(kv) == -1);                 /* max_seqs = 3 */
    CHECK(kv_len(kv, a) == 0 && kv_len(kv, 99) == -1 && kv_len(kv, -1) == -1);

    CHECK(kv_append(kv, a, 5) == 0);              /* 2 pages */
    CHECK(kv_len(kv, a) == 5 && kv_pages_free(kv) == 8);
    CHECK(kv_append(kv, a, 3) == 0);              /* 8 rows: still 2 pages */
    CHECK(kv_len(kv, a) == 8 && kv_pages_free(kv) == 8);
    CHECK(kv_append(kv, a, 1) == 0);              /* 9 rows: 3 pages */
    CHECK(kv_pages_free(kv) == 7);
    CHECK(kv_append(kv, a, 0) == 0 && kv_len(kv, a) == 9);

    /* truncate: rejected draft rows disappear, pages past the kept rows return */
    kv_truncate(kv, a, 8);
    CHECK(kv_len(kv, a) == 8 && kv_pages_free(kv) == 8);
    kv_truncate(kv, a, 8);                        /* no-op */
    kv_truncate(kv, a, 20);                       /* beyond the length: no-op */
    CHECK(kv_len(kv, a) == 8 && kv_pages_free(kv) == 8);
    kv_truncate(kv, a, 1);
    CHECK(kv_len(kv, a) == 1 && kv_pages_free(kv) == 9);

    /* data written at a position survives appends and truncates before it */
    CHECK(kv_append(kv, a, 6) == 0);              /* 7 rows */
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 7; p++) {
            float *k = kv_k_at(kv, l, a, p), *v = kv_v_at(kv, l, a, p);
            for (int i = 0; i < 8; i++) { k[i] = (float)(1000 * l + 10 * p + i); v[i] = -k[i]; }
        }
    kv_truncate(kv, a, 5);
    CHECK(kv_append(kv, b, 9) == 0);
    CHECK(kv_append(kv, a, 2) == 0);
    int ok = 1;
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < 5; p++)
            for (int i = 0; i < 8; i++)
                ok &= kv_k_at(kv, l, a, p)[i] == (float)(1000 * l + 10 * p + i) &&
                      kv_v_at(kv, l, a, p)[i] == -(float)(1000 * l + 10 * p + i);
    CHECK(ok);
    /* slots of different (layer, seq, pos) never alias */
    CHECK(kv_k_at(kv, 0, a, 0) != kv_k_at(kv, 1, a, 0));
    CHECK(kv_k_at(kv, 0, a, 4) != kv_k_at(kv, 0, b, 4));
    CHECK(kv_k_at(kv, 0, a, 1) - kv_k_at(kv, 0, a, 0) == 8);

    /* kv_view agrees with kv_k_at */
    kb_kv_view vw = kv_view(kv, 1, a);
    CHECK(vw.page_size == 4 && vw.n_kv_heads == 2 && vw.head_dim == 4);
    const float *via_view = vw.k_pages + ((size_t)vw.pages[6 / 4] * 4 + 6 % 4) * 8;
    CHECK(via_view == kv_k_at(kv, 1, a, 6));
    CHECK(vw.v_pages + ((size_t)vw.pages[1] * 4 + 1) * 8 == kv_v_at(kv, 1, a, 5));

    /* out of pages: -1 and nothing changes */
    int free_before = kv_pages_free(kv), len_d = kv_len(kv, d);
    CHECK(free_before == 5);                      /* a: 7 rows = 2 pages, b: 9 rows = 3 pages */
    CHECK(kv_append(kv, d, 21) == -1);            /* needs 6 pages */
    CHECK(kv_pages_free(kv) == free_before && kv_len(kv, d) == len_d);
    CHECK(kv_append(kv, d, 20) == 0 && kv_pages_free(kv) == 0);
    CHECK(kv_append(kv, b, 3) == 0);              /* fits in b's last page (9 -> 12) */
    CHECK(kv_append(kv, b, 1) == -1 && kv_len(kv, b) == 12);

    /* max_seq_len = 24 enforced even with pages to spare */
    kv_seq_free(kv, d);
    CHECK(kv_len(kv, d) == -1 && kv_pages_free(kv) == 5);
    CHECK(kv_append(kv, d, 1) == -1);             /* freed seq is not live */
    kv_truncate(kv, b, 0);
    CHECK(kv_pages_free(kv) == 8);
    CHECK(kv_append(kv, b, 25) == -1 && kv_len(kv, b) == 0 && kv_pages_free(kv) == 8);
    CHECK(kv_append(kv, b, 24) == 0 && kv_pages_free(kv) == 2);
    kv_truncate(kv, b, 0);
    CHECK(kv_append(kv, b, -1) == -1);

    /* a freed slot is reused; freeing everything returns every page */
    int e = kv_seq_new(kv);
    CHECK(e == d && kv_len(kv, e) == 0);
    CHECK(kv_append(kv, e, 7) == 0);
    kv_seq_free(kv, a);
    kv_seq_free(kv, b);
    kv_seq_free(kv, e);
    kv_seq_free(kv, e);                           /* twice: harmless */
    CHECK(kv_pages_free(kv) == kv_pages_total(kv));
    kv_cache_free(kv);
    kv_cache_free(NULL);
}

/* Random churn: page accounting always equals Σ ceil(len / page_size). */
static void test_churn(void) {
    char err[256];
    kv_config c = { .n_layers = 1, .n_kv_heads = 1, .head_dim = 2, .page_size = 3,
                    .n_pages = 40, .max_seqs = 5, .max_seq_len = 50 };
    kv_cache *kv;
    CHECK(kv_cache_create(&kv, &c, err, sizeof err) == 0);
    int seqs[5];
    for (int i = 0; i < 5; i++) seqs[i] = kv_seq_new(kv);
    unsigned r = 12345;
    int bad = 0;
    for (int it = 0; it < 5000; it++) {
        r = r * 1103515245u + 12345u;
        int s = seqs[(r >> 8) % 5], op = (r >> 16) % 3, n = (int)((r >> 20) % 9);
        int len = kv_len(kv, s), fr = kv_pages_free(kv);
        if (op < 2) {
            int rc = kv_append(kv, s, n);
            if (rc != 0) bad += kv_len(kv, s) != len || kv_pages_free(kv) != fr;
            else bad += kv_len(kv, s) != len + n;
        } else {
            kv_truncate(kv, s, len - n);
            bad += kv_len(kv, s) != (len - n < 0 || len - n >= len ? len : len - n);
        }
        int used = 0;
        for (int i = 0; i < 5; i++) used += (kv_len(kv, seqs[i]) + 2) / 3;
        bad += used + kv_pages_free(kv) != 40;
    }
    CHECKF(bad == 0, "%d accounting errors in random churn", bad);
    for (int i = 0; i < 5; i++) kv_seq_free(kv, seqs[i]);
    CHECK(kv_pages_free(kv) == 40);
    kv_cache_free(kv);
}

int main(void) {
    test_create_errors();
    test_accounting();
    test_churn();
    return tu_done("test_kv_cache");
}
