/* cli_device.h — `--device cpu|cuda` for the commands that run the target
 * (generate, serve, profile, bench_engine, bench_spec): selects the
 * kernels' device (backend.h kb_set_device) before the engine is made. */
#ifndef SPECBED_CLI_DEVICE_H
#define SPECBED_CLI_DEVICE_H

#define CLI_DEVICE_HELP                                                                              \
    "  --device D          cpu (default) or cuda: the kernels on the first visible GPU\n"              \
    "                      (SPECBED_CUDA_MATMUL=cublas: cuBLAS matmuls, fast, not batch-invariant)\n"

/* name NULL or "cpu": nothing to do. Otherwise selects the device; on
 * failure prints "<cmd>: --device <name>: <why>" and returns -1 (the
 * command exits 1). --tp above 1 runs on the CPU only, for now. */
int cli_device_select(const char *cmd, const char *name, int tp);
/* For option parsing: 0 when name is cpu or cuda, else prints the usage
 * error and returns -1 (the command exits 2). */
int cli_device_check(const char *cmd, const char *name);

#endif
