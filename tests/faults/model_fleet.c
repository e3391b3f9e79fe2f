/* SPDX-License-Identifier: Apache-2.0 */
/* The model test's worker processes (model_fleet.h). */
#include "model_fleet.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault_vfs.h"

int64_t model_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t model_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* In the child: wires the pipes and the log, then execs. Never returns. */
static void exec_worker(int in, int out, const char *exe, const char *db, uint64_t salt,
                        const char *log, const char *faults)
{
    char salt_text[32];
    int err = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (err < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(err, STDERR_FILENO) < 0)
        _exit(126);
    if (faults != NULL)
        setenv(FAULT_VFS_ENV, faults, 1);
    else
        unsetenv(FAULT_VFS_ENV);
    snprintf(salt_text, sizeof(salt_text), "%llu", (unsigned long long)salt);
    execl(exe, exe, db, salt_text, (char *)NULL);
    _exit(127);
}

int proc_start(model_proc *p, const char *exe, const char *db, uint64_t salt, const char *log,
               const char *faults)
{
    int down[2], up[2];
    memset(p, 0, sizeof(*p));
    snprintf(p->log, sizeof(p->log), "%s", log);
    if (pipe2(down, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(up, O_CLOEXEC) != 0) {
        close(down[0]);
        close(down[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        exec_worker(down[0], up[1], exe, db, salt, log, faults);
    close(down[0]);
    close(up[1]);
    if (pid < 0) {
        close(down[1]);
        close(up[0]);
        return -1;
    }
    fcntl(up[0], F_SETFL, fcntl(up[0], F_GETFL) | O_NONBLOCK);
    p->pid = pid;
    p->to = down[1];
    p->from = up[0];
    return 0;
}

int proc_send(model_proc *p, const char *line, size_t len)
{
    for (size_t at = 0; at < len;) {
        ssize_t n = write(p->to, line + at, len - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        at += (size_t)n;
    }
    return 0;
}

/* Moves a complete line out of the buffer, if there is one. */
static int take_line(model_proc *p, char *line, size_t cap)
{
    char *nl = memchr(p->buf, '\n', p->used);
    if (nl == NULL)
        return p->used == sizeof(p->buf) ? -1 : 0;
    size_t len = (size_t)(nl - p->buf);
    if (len >= cap)
        return -1;
    memcpy(line, p->buf, len);
    line[len] = '\0';
    p->used -= len + 1;
    memmove(p->buf, nl + 1, p->used);
    return 1;
}

int proc_read_line(model_proc *p, char *line, size_t cap)
{
    int got = take_line(p, line, cap);
    if (got != 0)
        return got;
    for (;;) {
        ssize_t n = read(p->from, p->buf + p->used, sizeof(p->buf) - p->used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        p->used += (size_t)n;
        return take_line(p, line, cap);
    }
}

static void close_pipes(model_proc *p)
{
    if (p->to >= 0)
        close(p->to);
    if (p->from >= 0)
        close(p->from);
    p->to = p->from = -1;
}

int proc_kill(model_proc *p)
{
    int status = 0;
    if (p->pid <= 0)
        return 0;
    kill(p->pid, SIGKILL);
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close_pipes(p);
    p->pid = 0;
    return status;
}

void proc_backtrace(const model_proc *p)
{
    char pid[32];
    if (p->pid <= 0 || access("/usr/bin/gdb", X_OK) != 0)
        return;
    snprintf(pid, sizeof(pid), "%d", (int)p->pid);
    pid_t g = fork();
    if (g == 0) {
        int log = open(p->log, O_WRONLY | O_APPEND | O_CLOEXEC);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (log < 0 || null < 0 || dup2(log, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0 ||
            dup2(null, STDIN_FILENO) < 0)
            _exit(126);
        execl("/usr/bin/gdb", "gdb", "-q", "-batch", "-p", pid, "-ex", "thread apply all bt",
              (char *)NULL);
        _exit(127);
    }
    int status;
    while (g > 0 && waitpid(g, &status, 0) < 0 && errno == EINTR) {
    }
}

int proc_reap(model_proc *p, int64_t timeout_ms, bool *in_time)
{
    int status = 0;
    int64_t deadline = model_now_ns() + timeout_ms * 1000000LL;
    *in_time = false;
    if (p->pid <= 0)
        return 0;
    close(p->to); /* EOF on its stdin ends its loop, too */
    p->to = -1;
    while (model_now_ns() < deadline) {
        pid_t got = waitpid(p->pid, &status, WNOHANG);
        if (got == p->pid) {
            *in_time = true;
            close_pipes(p);
            p->pid = 0;
            return status;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    proc_backtrace(p);
    return proc_kill(p);
}

void proc_log_tail(const model_proc *p, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(p->log, "r");
    if (f == NULL || cap < 2)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)cap - 1 ? size - (long)cap + 1 : 0;
    fseek(f, from, SEEK_SET);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}
