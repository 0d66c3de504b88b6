/* test_util.h — the few helpers every test uses. A test is a program that
 * exits 0 when every CHECK held; each failed CHECK prints file:line and the
 * condition, and the test goes on so one run shows every failure. */
#ifndef SPECBED_TEST_UTIL_H
#define SPECBED_TEST_UTIL_H
#include <stdio.h>
#include <stddef.h>

extern int tu_failures;

#define CHECK(cond) do { if (!(cond)) { tu_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { if (!(cond)) { tu_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Ends main(): prints a summary, returns the exit status. */
int tu_done(const char *name);

/* Test parts. A model test binary runs its fixture part with no argument;
 * "bundled" runs the part that needs the bundled models/ and "full" the full
 * depth × batch sweeps there (ctest label slow, run in a Release build by
 * scripts/studies/test_slow.sh). A part whose inputs are missing exits TU_SKIP, which
 * ctest reports as skipped (SKIP_RETURN_CODE), never as passed. */
typedef enum { TU_FIXTURES = 0, TU_BUNDLED = 1, TU_FULL = 2 } tu_part;
#define TU_SKIP 77
/* Exits 2 with a message on an unknown argument. */
tu_part tu_parse_part(int argc, char **argv);
/* 1 when every path (relative to the source tree, NULL-terminated list) exists. */
int tu_have(const char *rel, ...);
/* Prints "NAME: skipped: WHY" and returns TU_SKIP, for `return tu_skip(...)`. */
int tu_skip(const char *name, const char *why);

/* Path under the source tree (SPECBED_ROOT), in a static buffer per call slot. */
const char *tu_path(const char *rel);

/* Reads a whole file (malloc'd, NUL-terminated); NULL on error. */
char *tu_read_file(const char *path, size_t *len);
/* Model directories the tests rewrite: SRC_DIR/config.json (repo-relative)
 * parsed (NULL and a failed CHECK when it cannot be), and a cJSON written to
 * DIR/config.json (a failed CHECK when it cannot be); the caller frees j. */
struct cJSON;
struct cJSON *tu_read_config(const char *src_dir);
void tu_write_config(const char *dir, const struct cJSON *j);

/* Upper 0.1% critical value of chi-square with dof degrees of freedom
 * (Wilson–Hilferty approximation, good to ~1% for dof ≥ 3). */
double tu_chi2_crit(int dof);

/* Two-sample chi-square of count vectors a and b (equal sample sizes) over n
 * bins; bins with fewer than 10 combined counts are pooled into one.
 * Returns the statistic; *dof gets the degrees of freedom. */
double tu_chi2_two_sample(const int *a, const int *b, int n, int *dof);

#endif
