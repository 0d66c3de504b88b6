/* cli_device.h — `--device cpu|cuda` for the commands that run the target
 * (generate, serve, profile, bench_engine, bench_spec): selects the
 * kernels' device (backend.h kb_set_device) before the engine is made. */
#ifndef SPECBED_CLI_DEVICE_H
#define SPECBED_CLI_DEVICE_H

#define CLI_DEVICE_HELP                                                                              \
    "  --device D          cpu (default) or cuda: the kernels on the first visible GPU\n"              \
    "                      (SPECBED_CUDA_MATMUL=tensor: bf16 matmuls on the tensor cores, batch-invariant;\n" \
    "                      SPECBED_CUDA_MATMUL=cublas: cuBLAS matmuls, fast, not batch-invariant)\n"

/* --experts-on-host, for the commands that take it (generate, serve, profile,
 * bench_engine), beside CLI_DEVICE_HELP. */
#define CLI_EXPERTS_HELP                                                                             \
    "  --experts-on-host   with --device cuda, a mixture-of-experts model's expert weights in\n"      \
    "                      pinned host memory that the GPU reads across the bus (attention,\n"        \
    "                      router and dense layers on the GPU); refused on the cpu\n"

/* name NULL or "cpu": nothing to do. Otherwise selects the device; on
 * failure prints "<cmd>: --device <name>: <why>" and returns -1 (the
 * command exits 1). --tp above 1 runs on the CPU only, for now. */
int cli_device_select(const char *cmd, const char *name, int tp);
/* cli_device_select, then where expert weights live (backend.h
 * kb_set_experts_on_host): experts_on_host without --device cuda prints
 * "<cmd>: --experts-on-host needs --device cuda ..." and returns -1. */
int cli_device_select_experts(const char *cmd, const char *name, int tp, int experts_on_host);
/* For option parsing: 0 when name is cpu or cuda, else prints the usage
 * error and returns -1 (the command exits 2). */
int cli_device_check(const char *cmd, const char *name);

#endif
