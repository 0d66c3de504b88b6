/* main.c — the `specbed` entry point: dispatches to one subcommand.
 * Each subcommand parses its own options into a config struct and owns
 * its --help text. */
#include <stdio.h>
#include <string.h>
#include "backend.h"
#include "cli.h"
#include "canary.h"     /* bench/canary: `specbed canary` */
#include "load_cli.h"   /* bench/load: `specbed load` */
#include "report.h"     /* bench/report: `specbed report` */
#include "sim.h"        /* bench/sim: `specbed simulate` */
#include "sweep.h"      /* bench/sweep: `specbed sweep` */

static void usage(FILE *f) {
    fprintf(f,
        "specbed — a speculative-decoding research testbed\n"
        "\n"
        "usage: specbed <command> [options]\n"
        "\n"
        "commands:\n"
        "  generate   generate text from a prompt with a local model\n"
        "  serve      OpenAI-compatible server with continuous batching and speculation\n"
        "  profile    measure the verify cost curve (seconds per step vs rows) as JSON\n"
        "  load       drive a server with streaming requests; latency and accept length per interval\n"
        "  canary     bursty load after a (cold) start; fail on the corruption signature\n"
        "  sweep      relaunch a server per draft depth, canary + load per workload x concurrency\n"
        "  report     gnuplot figures, tables and the depth recommendation for a sweep\n"
        "  simulate   discrete-event fleet simulation: depth x load x replicas from acceptance + a cost curve\n"
        "\n"
        "`specbed <command> --help` lists the command's options; `specbed --version` the\n"
        "version and the kernel path this CPU runs.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) {
        /* the kernel path is chosen at run time from this CPU's features */
        printf("specbed %s (built %s); kernels: %s on this CPU, %d threads\n", SPECBED_VERSION, __DATE__,
               kb_cpu_path(), kb_threads());
        return 0;
    }
    if (!strcmp(cmd, "generate")) return cli_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cli_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "profile")) return cli_profile(argc - 1, argv + 1);
    if (!strcmp(cmd, "load")) return cmd_load(argc - 1, argv + 1);
    if (!strcmp(cmd, "canary")) return cmd_canary(argc - 1, argv + 1);
    if (!strcmp(cmd, "sweep")) return cmd_sweep(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "simulate")) return cmd_simulate(argc - 1, argv + 1);
    fprintf(stderr, "specbed: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
