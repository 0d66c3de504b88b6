/* stop_match.c — see stop_match.h. */
#include "stop_match.h"
#include <stdlib.h>
#include <string.h>

int stop_match_init(stop_match *m, char *const *stops, int n) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < n && i < STOP_MAX_STRINGS; i++) {
        int len = (int)strlen(stops[i]);
        int *f = malloc(sizeof(int) * (size_t)(len > 0 ? len : 1));
        if (!f) {
            stop_match_free(m);
            return -1;
        }
        /* f[k] = length of the longest proper prefix of s[0..k] that is also its suffix */
        f[0] = 0;
        for (int k = 1, q = 0; k < len; k++) {
            while (q > 0 && stops[i][k] != stops[i][q]) q = f[q - 1];
            if (stops[i][k] == stops[i][q]) q++;
            f[k] = q;
        }
        m->s[i] = stops[i];
        m->len[i] = len;
        m->fail[i] = f;
        m->n = i + 1;
    }
    return 0;
}

void stop_match_free(stop_match *m) {
    for (int i = 0; i < m->n; i++) free(m->fail[i]);
    memset(m, 0, sizeof *m);
}

long stop_match_feed(stop_match *m, const char *text, size_t n, size_t at, size_t *hold) {
    long best = -1;
    size_t keep = 0;
    for (int i = 0; i < m->n; i++) {
        const char *s = m->s[i];
        const int len = m->len[i], *f = m->fail[i];
        int q = m->state[i];
        for (size_t j = 0; j < n; j++) {
            while (q > 0 && text[j] != s[q]) q = f[q - 1];
            if (text[j] == s[q]) q++;
            if (q == len) {   /* the first occurrence of this string ends here */
                long start = (long)(at + j + 1) - len;
                if (best < 0 || start < best) best = start;
                q = f[q - 1];
                break;
            }
        }
        m->state[i] = q;
        if ((size_t)q > keep) keep = (size_t)q;
    }
    if (hold) *hold = best >= 0 ? 0 : keep;
    return best;
}
