/* proc_launch.c — see proc_launch.h. */
#include "proc_launch.h"
#include "errmsg.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The group to kill from a signal handler; see proc_launch.h for why it is global. */
static volatile sig_atomic_t g_pgid = 0;

static void on_signal(int sig) {
    if (g_pgid > 0) kill(-(pid_t)g_pgid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

void proc_guard_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int proc_free_port(int *port, char *err, size_t errlen) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return errf(err, errlen, "socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t l = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &l)) {
        close(fd);
        return errf(err, errlen, "cannot find a free port: %s", strerror(errno));
    }
    *port = ntohs(a.sin_port);
    close(fd);
    return 0;
}

/* 0 when 127.0.0.1:port can be bound now. */
static int port_free(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    int ok = !bind(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    return ok;
}

int proc_pick_port(int base, int *port, char *err, size_t errlen) {
    if (base <= 0) return proc_free_port(port, err, errlen);
    for (int p = base; p < base + 100 && p <= 65535; p++)
        if (port_free(p)) { *port = p; return 0; }
    return errf(err, errlen, "no free port in %d..%d on 127.0.0.1 (--port-base %d)", base,
                base + 99 > 65535 ? 65535 : base + 99, base);
}

int proc_template_check(const char *tmpl, const char *what, char *err, size_t errlen) {
    if (tmpl && strstr(tmpl, "{port}")) return 0;
    return errf(err, errlen, "%s has no {port} placeholder: specbed picks the port (--port-base) and waits for "
                "/health there, e.g. \"... --port {port}\"", what);
}

int proc_expand(const char *t, int port, int depth, const char *drafter, const char *dargs, char *out, size_t outlen) {
    size_t o = 0;
    while (*t) {
        char v[256];
        const char *rep = NULL;
        size_t skip = 0;
        if (!strncmp(t, "{port}", 6) && port > 0) { snprintf(v, sizeof v, "%d", port); rep = v; skip = 6; }
        else if (!strncmp(t, "{depth}", 7) && depth >= 0) { snprintf(v, sizeof v, "%d", depth); rep = v; skip = 7; }
        else if (!strncmp(t, "{drafter}", 9) && drafter) { rep = drafter; skip = 9; }
        else if (!strncmp(t, "{drafter_args}", 14) && dargs) { rep = dargs; skip = 14; }
        if (rep) {
            size_t n = strlen(rep);
            if (o + n >= outlen) return -1;
            memcpy(out + o, rep, n);
            o += n;
            t += skip;
        } else {
            if (o + 1 >= outlen) return -1;
            out[o++] = *t++;
        }
    }
    out[o] = 0;
    return 0;
}

int proc_start(proc *s, const char *cmd, int port, const char *log_path, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->port = port;
    s->exit_status = -1;
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", port);
    snprintf(s->log_path, sizeof s->log_path, "%s", log_path);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return errf(err, errlen, "%s: %s", log_path, strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { close(fd); return errf(err, errlen, "fork: %s", strerror(errno)); }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) { dup2(nul, 0); close(nul); }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(fd);
    s->pid = pid;
    g_pgid = pid;
    return 0;
}

int proc_alive(void *p) {
    proc *s = p;
    if (s->pid <= 0) return 0;
    int st;
    pid_t r = waitpid(s->pid, &st, WNOHANG);
    if (r == s->pid) {
        s->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        kill(-s->pid, SIGKILL);   /* children the shell left behind */
        s->pid = 0;
        g_pgid = 0;
        return 0;
    }
    return 1;
}

void proc_stop(proc *s) {
    if (s->pid <= 0) return;
    kill(-s->pid, SIGTERM);
    for (int i = 0; i < 100; i++) {            /* 10 s grace */
        int st;
        pid_t r = waitpid(s->pid, &st, WNOHANG);
        if (r == s->pid) {
            s->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            kill(-s->pid, SIGKILL);
            s->pid = 0;
            g_pgid = 0;
            return;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(-s->pid, SIGKILL);
    int st;
    waitpid(s->pid, &st, 0);
    s->exit_status = 137;
    s->pid = 0;
    g_pgid = 0;
}

const char *proc_log_tail(const proc *s, size_t n) {
    static char buf[4096];
    if (n >= sizeof buf) n = sizeof buf - 1;
    buf[0] = 0;
    FILE *f = fopen(s->log_path, "rb");
    if (!f) return buf;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    long off = sz > (long)n ? sz - (long)n : 0;
    fseek(f, off, SEEK_SET);
    size_t k = fread(buf, 1, n, f);
    buf[k] = 0;
    fclose(f);
    return buf;
}
