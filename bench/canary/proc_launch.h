/* proc_launch.h — the process launcher: starting and stopping a server from a command template, for
 * the canary's cold boots and the sweep's relaunch per depth. The command
 * runs under /bin/sh in its own process group, stdout and stderr to a log
 * file; stopping sends SIGTERM to the group, then SIGKILL after a grace
 * period, and reaps it. Templates take {port}, {depth}, {drafter} and
 * {drafter_args} (per-drafter extra arguments, e.g. a draft model path).
 *
 * A launched server must not outlive specbed: proc_guard_signals() installs
 * SIGINT/SIGTERM/SIGHUP handlers that kill the registered group before
 * exiting (this is the one piece of process-global state in bench/, because
 * a signal handler can reach nothing else). */
#ifndef SPECBED_BENCH_PROC_LAUNCH_H
#define SPECBED_BENCH_PROC_LAUNCH_H
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;              /* also the process group id; 0 = not running */
    int port;
    char base[64];          /* http://127.0.0.1:PORT */
    char log_path[1024];
    int exit_status;        /* after proc_stop or a detected exit; -1 unknown */
} proc;

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int  proc_free_port(int *port, char *err, size_t errlen);
/* The port for the next launch: base 0 = any free port (the kernel's
 * choice, proc_free_port); else the first of base .. base + 99 that is free
 * on 127.0.0.1 now (a firewall or a proxy may allow only known ports). */
int  proc_pick_port(int base, int *port, char *err, size_t errlen);
/* 0 when the launch template tmpl holds {port}; else -1, err naming `what`
 * (e.g. "--launch"): specbed chooses the port and waits for /health there,
 * so a server started on a port of its own would only be found after the
 * whole boot timeout. */
int  proc_template_check(const char *tmpl, const char *what, char *err, size_t errlen);
/* Replaces {port}, {depth}, {drafter}, {drafter_args} (port ≤ 0, depth < 0
 * or NULL strings leave the placeholder). -1 when out is too small. */
int  proc_expand(const char *tmpl, int port, int depth, const char *drafter, const char *drafter_args, char *out,
                size_t outlen);
int  proc_start(proc *s, const char *cmd, int port, const char *log_path, char *err, size_t errlen);
int  proc_alive(void *s);    /* 1 while running (signature fits http_wait_health) */
void proc_stop(proc *s);
void proc_guard_signals(void);
/* The last n bytes of the server log, for error messages (static buffer). */
const char *proc_log_tail(const proc *s, size_t n);
#endif
