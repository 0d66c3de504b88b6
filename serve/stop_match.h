/* stop_match.h — a request's stop strings, matched in time linear in the
 * text it generates: one KMP automaton per string, fed each new byte once.
 * (Rescanning the text for every string on every token let one client with
 * 16 stop strings of 250 KB stall the scheduler loop for everyone.)
 *
 * Semantics (the same as OpenAI / vLLM): the output ends just before the
 * earliest-starting occurrence of any stop string; until one occurs, the
 * longest tail of the text that is a proper prefix of some stop string is
 * held back, because the next token may complete it.
 * Ownership: the matcher borrows the strings (the request owns them) and
 * owns its tables (stop_match_free). Scheduler thread only. */
#ifndef SPECBED_STOP_MATCH_H
#define SPECBED_STOP_MATCH_H
#include <stddef.h>

#define STOP_MAX_STRINGS 16
#define STOP_MAX_BYTES 1024   /* per string */

typedef struct {
    int n;
    const char *s[STOP_MAX_STRINGS];
    int len[STOP_MAX_STRINGS];
    int *fail[STOP_MAX_STRINGS];   /* KMP failure function [len] */
    int state[STOP_MAX_STRINGS];   /* bytes of s[i] the text's current suffix matches */
} stop_match;

/* 0 ok, -1 out of memory. Strings must be non-empty and ≤ STOP_MAX_BYTES. */
int  stop_match_init(stop_match *m, char *const *stops, int n);
void stop_match_free(stop_match *m);
/* Feeds text[0..n) (the bytes after those already fed; `at` is the offset
 * of text[0] in the whole output). Returns the whole-output offset where the
 * earliest-starting stop string in the fed bytes begins, or -1 (and then
 * *hold gets the length of the tail to hold back). After a match the
 * matcher must not be fed again. */
long stop_match_feed(stop_match *m, const char *text, size_t n, size_t at, size_t *hold);
#endif
