/* device.c — which device the kernels run on (backend.h kb_set_device).
 * Owns: the process-wide switch (device_internal.h), the CUDA backend's
 * start-up, the weight-upload entry points, and the one place the
 * diagnostic SPECBED_CUDA_MATMUL is read.
 * Must not: initialise CUDA unless "cuda" is asked for (a CPU run of a CUDA
 * build must not pay for, or depend on, a driver), or name a CUDA symbol in
 * a build without CUDA (SPECBED_HAVE_CUDA is defined for this file only
 * when the .cu files are compiled in).
 *
 * The switch is process-wide state, like the SIMD path: it describes what
 * the process computes on, every kernel call must see the same one, and it
 * is set at startup (tools: before the engine is made; tests may switch
 * back and forth between runs, never while a kernel runs). */
#include "backend.h"
#include "device_internal.h"
#include "errmsg.h"

#include <stdlib.h>
#include <string.h>

const kb_cuda_ops *kb_dev_active = NULL;
const kb_cuda_ops *kb_dev_cuda = NULL;

int kb_set_device(const char *name, char *err, size_t errlen) {
    if (name && !strcmp(name, "cpu")) {
        kb_dev_active = NULL;
        return 0;
    }
    if (!name || strcmp(name, "cuda"))
        return errf(err, errlen, "unknown device '%s' (expected cpu or cuda)", name ? name : "(null)");
#ifdef SPECBED_HAVE_CUDA
    if (!kb_dev_cuda) {
        const kb_cuda_ops *ops;
        if (cuda_backend_init(&ops, err, errlen)) return -1;
        /* diagnostic (README lists it): the matmul mode, read once here */
        const char *mode = getenv("SPECBED_CUDA_MATMUL");
        if (mode && *mode && ops->set_matmul(mode))
            return errf(err, errlen, "SPECBED_CUDA_MATMUL=%s: expected invariant, tensor or cublas (and cuBLAS loadable)",
                        mode);
        /* diagnostic too: CUDA graphs off (0) or required (1) */
        const char *graphs = getenv("SPECBED_CUDA_GRAPHS"), *why = NULL;
        if (graphs && *graphs) {
            if (strcmp(graphs, "0") && strcmp(graphs, "1"))
                return errf(err, errlen, "SPECBED_CUDA_GRAPHS=%s: expected 0 (no CUDA graphs) or 1 (the default)",
                            graphs);
            if (ops->set_graphs(graphs[0] == '1')) {
                ops->graphs(&why);
                return errf(err, errlen, "SPECBED_CUDA_GRAPHS=1: CUDA graphs do not work here (%s)", why);
            }
        }
        /* diagnostic too: programmatic dependent launch off (0) or required (1) */
        const char *pdl = getenv("SPECBED_CUDA_PDL");
        if (pdl && *pdl) {
            if (strcmp(pdl, "0") && strcmp(pdl, "1"))
                return errf(err, errlen, "SPECBED_CUDA_PDL=%s: expected 0 (no programmatic dependent launch) or 1 "
                            "(the default)", pdl);
            if (ops->set_pdl(pdl[0] == '1')) {
                ops->pdl(&why);
                return errf(err, errlen, "SPECBED_CUDA_PDL=1: programmatic dependent launch does not work here (%s)",
                            why);
            }
        }
        kb_dev_cuda = ops;
    }
    kb_dev_active = kb_dev_cuda;
    return 0;
#else
    return errf(err, errlen, "this build has no CUDA backend (nvcc was not found, or SPECBED_CUDA=OFF, "
                             "when it was configured)");
#endif
}

const char *kb_device(void) { return kb_dev_active ? "cuda" : "cpu"; }

void kb_async_begin(void) {
    if (kb_dev_active) kb_dev_active->async_begin();
}
void kb_async_end(void) {
    if (kb_dev_active) kb_dev_active->async_end();
}
void kb_wait(void) {
    if (kb_dev_active) kb_dev_active->wait();
}
void kb_device_counts_now(kb_device_counts *c) {
    memset(c, 0, sizeof *c);
    if (kb_dev_cuda) kb_dev_cuda->counts(c);
}
long kb_device_waits(void) {
    kb_device_counts c;
    kb_device_counts_now(&c);
    return c.waits;
}

int kb_set_cuda_matmul(const char *mode) {
    if (!kb_dev_cuda) return -1;
    return kb_dev_cuda->set_matmul(mode);
}

const char *kb_cuda_matmul(void) { return kb_dev_cuda ? kb_dev_cuda->matmul_mode() : "invariant"; }

int kb_cuda_graphs(const char **why) {
    if (kb_dev_cuda) return kb_dev_cuda->graphs(why);
    if (why) *why = "no CUDA device was selected";
    return -1;
}

int kb_weight_upload(kb_weight *w, const void *owner, char *err, size_t errlen) {
    if (!kb_dev_active) return 0;
    return kb_dev_active->weight_upload(w, owner, err, errlen);
}

/* An expert's matrix may be in mapped host memory (cuda_moe.cu's uploads,
 * backend.h kb_set_experts_on_host): each side frees only what it made. */
void kb_weight_release(kb_weight *w) {
    if (!kb_dev_cuda || !w) return;
    kb_dev_cuda->weight_release(w);
    if (w->data) kb_dev_cuda->expert_release(w);
}

void kb_weight_release_owner(const void *owner) {
    if (!kb_dev_cuda) return;
    kb_dev_cuda->weight_release_owner(owner);
    kb_dev_cuda->expert_release_owner(owner);
}
