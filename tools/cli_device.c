/* cli_device.c — see cli_device.h. */
#include "cli_device.h"
#include <stdio.h>
#include <string.h>
#include "backend.h"

int cli_device_check(const char *cmd, const char *name) {
    if (name && (!strcmp(name, "cpu") || !strcmp(name, "cuda"))) return 0;
    fprintf(stderr, "%s: --device %s: expected cpu or cuda\n", cmd, name ? name : "(none)");
    return -1;
}

int cli_device_select(const char *cmd, const char *name, int tp) {
    if (!name || !strcmp(name, "cpu")) return 0;
    char err[512];
    if (cli_device_check(cmd, name)) return -1;
    if (tp > 1) {
        fprintf(stderr, "%s: --device cuda: tensor parallelism (--tp %d) runs on the CPU only for now\n", cmd, tp);
        return -1;
    }
    if (kb_set_device(name, err, sizeof err)) {
        fprintf(stderr, "%s: --device %s: %s\n", cmd, name, err);
        return -1;
    }
    fprintf(stderr, "%s: device cuda, matmul %s\n", cmd, kb_cuda_matmul());
    return 0;
}

int cli_device_select_experts(const char *cmd, const char *name, int tp, int experts_on_host) {
    if (experts_on_host && (!name || strcmp(name, "cuda"))) {
        fprintf(stderr, "%s: --experts-on-host needs --device cuda (on the cpu every weight is in host memory "
                "already)\n", cmd);
        return -1;
    }
    if (cli_device_select(cmd, name, tp)) return -1;
    char err[512];
    if (experts_on_host && kb_set_experts_on_host(1, err, sizeof err)) {
        fprintf(stderr, "%s: --experts-on-host: %s\n", cmd, err);
        return -1;
    }
    if (experts_on_host) fprintf(stderr, "%s: expert weights in pinned host memory, read across the bus\n", cmd);
    return 0;
}
