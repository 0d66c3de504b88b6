/* cuda_check.h — what test_cuda's files share (test_cuda.c: the helpers,
 * the kernels' and the engine's sections, main; cuda_check_attention.c,
 * cuda_check_moe.c, cuda_check_tensor.c: a section each). One test
 * program: these are its helpers, not a library. */
#ifndef SPECBED_TESTS_CUDA_CHECK_H
#define SPECBED_TESTS_CUDA_CHECK_H
#include <stddef.h>
#include <stdint.h>
#include "backend.h"
#include "generate.h"
#include "lossless.h"
#include "test_util.h"

uint32_t rnd(void);                      /* the test's one deterministic stream */
void rnd_seed(uint64_t seed);            /* restart it (the same data twice) */
float frand(void);                       /* [-1, 1) */
void use(const char *dev);               /* kb_set_device, a CHECK on failure */
/* elements whose bits differ, and the largest |a − b| (NaN = NaN when both are) */
long bits_differ(const float *a, const float *b, size_t n, double *maxabs);
/* a random [rows, cols] weight of dt, malloc'd (bf16/f16 exponents near 1) */
kb_weight random_weight(kb_dtype dt, int rows, int cols);
float *random_floats(size_t n, float scale);
const char *dt_name(kb_dtype dt);
/* a random weight and m rows multiplied on the CPU (*yc) and on CUDA (*yg); cuda after */
void matmul_both(kb_dtype dt, int m, int rows, int cols, kb_weight *w, float **x, float **yc, float **yg);
/* elements of yg beyond u_rel·Σ|x_k·w_k| from yc (a double reference when NULL) */
long beyond_bound(const float *yc, const float *yg, const float *x, const kb_weight *w, int m, double u_rel,
                  double *worst);
/* held q/k/v and gate/up sets of m rows = each matmul alone, bit for bit */
void test_matmul_held_m(int m);

/* an engine on a fixture dir on dev (the experts in mapped host memory when asked) */
int make_engine_at(gen_engine **e, const char *dev, const char *dir, int experts_on_host);
/* logits[n, V] of a fresh sequence's n-token prefill */
int prefill_logits(gen_engine *e, const int *toks, int n, float *logits);
/* An n-token prefill of toks on the CPU (ec) and on CUDA (eg, its logits
 * into lg[n, V]): argmax equal at every row and max |Δ| ≤ 1e-4
 * (test_cuda.c's header says why), printed under label. Returns the
 * elements whose bits differ, -1 when a run failed; cuda after. */
long prefill_vs_cpu(gen_engine *ec, gen_engine *eg, const int *toks, int n, const char *label, float *lg);
/* equal drafts and acceptances on both devices (after equal logits) */
void same_drafts(const char *label, const spec_counters *kc, const spec_counters *kg, int n);
/* greedy generation of the LL_NP prompts on both: how many agree, -1 on a failed run */
int greedy_same(gen_engine *ec, gen_engine *eg, int (*prompts)[LL_MAXP], const int *lens);

/* the sections in the other files */
void test_attention(void);
void test_attention_long(void);
void test_attention_prefill(void);
void test_moe_grouped(void);
void test_moe_cuda(void);
void test_tensor(void);
#endif
