/* label: unit */
/* test_stop_match.c — serve/stop_match.c against a brute-force reference
 * of the same rule (the output ends before the earliest-starting stop
 * string; until one occurs, the longest tail that is a proper prefix of a
 * stop string is held back), on random texts over a 3-letter alphabet (so
 * overlaps and self-overlapping strings like "aab"/"aaa" are common), fed in
 * random chunks as tokens arrive. Then the case that used to stall the
 * scheduler: 16 stop strings of the maximum length against a long output. */
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include "stop_match.h"
#include "test_util.h"

/* earliest start of a stop string wholly inside text[0..len); -1 if none */
static long ref_find(char *const *st, int n, const char *text, size_t len) {
    long best = -1;
    for (int i = 0; i < n; i++) {
        size_t sl = strlen(st[i]);
        for (size_t p = 0; p + sl <= len; p++)
            if (!memcmp(text + p, st[i], sl)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

static size_t ref_hold(char *const *st, int n, const char *text, size_t len) {
    size_t best = 0;
    for (int i = 0; i < n; i++) {
        size_t sl = strlen(st[i]);
        for (size_t k = sl - 1; k > best; k--)
            if (k <= len && !memcmp(text + len - k, st[i], k)) { best = k; break; }
    }
    return best;
}

int main(void) {
    srand(12345);
    int cases = 0, cut = 0;
    for (int t = 0; t < 3000; t++) {
        char buf[STOP_MAX_STRINGS][8], *st[STOP_MAX_STRINGS];
        int n = 1 + rand() % 4;
        for (int i = 0; i < n; i++) {
            int len = 1 + rand() % 5;
            for (int k = 0; k < len; k++) buf[i][k] = (char)('a' + rand() % 3);
            buf[i][len] = 0;
            st[i] = buf[i];
        }
        char text[80];
        int tl = rand() % 60;
        for (int k = 0; k < tl; k++) text[k] = (char)('a' + rand() % 3);
        stop_match m;
        CHECK(!stop_match_init(&m, st, n));
        size_t fed = 0;
        long got = -1;
        while (fed < (size_t)tl && got < 0) {
            size_t chunk = 1 + (size_t)(rand() % 4);
            if (fed + chunk > (size_t)tl) chunk = (size_t)tl - fed;
            size_t hold = 99;
            got = stop_match_feed(&m, text + fed, chunk, fed, &hold);
            fed += chunk;
            long want = ref_find(st, n, text, fed);
            CHECKF(got == want, "case %d: cut at %ld, reference %ld", t, got, want);
            if (got < 0) CHECKF(hold == ref_hold(st, n, text, fed), "case %d: hold %zu, reference %zu", t, hold,
                                ref_hold(st, n, text, fed));
        }
        cut += got >= 0;
        cases++;
        stop_match_free(&m);
    }
    printf("%d random cases, %d cut by a stop string\n", cases, cut);
    CHECK(cut > 500 && cut < cases - 500);   /* both outcomes exercised */

    /* 16 strings of 1024 bytes, each "x...xy", against 1 MB of 'x': the
     * rescanning matcher did ~16 × 1024² byte compares per token here */
    static char big[STOP_MAX_STRINGS][STOP_MAX_BYTES + 1];
    char *bs[STOP_MAX_STRINGS];
    for (int i = 0; i < STOP_MAX_STRINGS; i++) {
        memset(big[i], 'x', STOP_MAX_BYTES - 1);
        big[i][STOP_MAX_BYTES - 1] = (char)('A' + i);
        big[i][STOP_MAX_BYTES] = 0;
        bs[i] = big[i];
    }
    size_t tn = 1u << 20;
    char *xs = malloc(tn);
    memset(xs, 'x', tn);
    stop_match m;
    CHECK(!stop_match_init(&m, bs, STOP_MAX_STRINGS));
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    size_t hold = 0;
    long r = -1;
    for (size_t at = 0; at < tn && r < 0; at += 4) r = stop_match_feed(&m, xs + at, 4, at, &hold);
    double dt = (double)clock() / CLOCKS_PER_SEC - t0;
    CHECK(r < 0 && hold == STOP_MAX_BYTES - 1);
    r = stop_match_feed(&m, "C", 1, tn, &hold);
    CHECK(r == (long)tn - (STOP_MAX_BYTES - 1));
    printf("16 x 1024-byte stop strings over 1 MiB of output: %.3f s of CPU\n", dt);
    stop_match_free(&m);
    free(xs);
    return tu_done("test_stop_match");
}
