/* SPDX-License-Identifier: Apache-2.0 */
#include "it_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REGISTRY_MAX 256

/* PIDs started and not yet reaped. A reaped PID leaves the registry at
 * once, so a later kill can never hit a recycled PID. */
static pid_t registry[REGISTRY_MAX];
static bool atexit_installed;
static unsigned spawn_counter;

int64_t it_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void it_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void registry_add(pid_t pid)
{
    for (size_t i = 0; i < REGISTRY_MAX; i++)
        if (registry[i] == 0) {
            registry[i] = pid;
            return;
        }
    /* Full: better to kill the newcomer than to lose track of it. */
    fprintf(stderr, "it_proc: registry full; killing pid %ld\n", (long)pid);
    kill(pid, SIGKILL);
}

static void registry_remove(pid_t pid)
{
    for (size_t i = 0; i < REGISTRY_MAX; i++)
        if (registry[i] == pid)
            registry[i] = 0;
}

void it_proc_kill_all(void)
{
    for (size_t i = 0; i < REGISTRY_MAX; i++) {
        pid_t pid = registry[i];
        if (pid == 0)
            continue;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        registry[i] = 0;
    }
}

static void at_exit(void)
{
    it_proc_kill_all();
}

static int status_of(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return -WTERMSIG(wstatus);
    return -1;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child(const char *const paths[3], char *const argv[], pid_t parent)
{
    /* The death signal is armed now, but the parent may already be gone. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(126);
    const int flags[3] = {O_RDONLY, O_WRONLY | O_CREAT | O_TRUNC, O_WRONLY | O_CREAT | O_TRUNC};
    for (int fd = 0; fd < 3; fd++) {
        int f = open(paths[fd], flags[fd], 0600);
        if (f < 0)
            _exit(126);
        if (f != fd) {
            if (dup2(f, fd) < 0)
                _exit(126);
            close(f);
        }
    }
    /* Nothing of the test (its NATS sockets above all) may stay open in the
     * child: a server must see the test's connections close. */
    close_range(3, ~0u, 0);
    /* The test's own signal dispositions must not leak into the child. */
    sigset_t none;
    struct sigaction dfl;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, NULL);
    execv(argv[0], argv);
    _exit(127);
}

bool it_proc_spawn(it_proc *p, const char *dir, const char *name, const char *stdin_path,
                   char *const argv[])
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    unsigned n = ++spawn_counter;
    if (snprintf(p->out_path, sizeof(p->out_path), "%s/%s-%u.out", dir, name, n) >=
            (int)sizeof(p->out_path) ||
        snprintf(p->err_path, sizeof(p->err_path), "%s/%s-%u.err", dir, name, n) >=
            (int)sizeof(p->err_path)) {
        fprintf(stderr, "it_proc: log path too long under %s\n", dir);
        return false;
    }
    if (!atexit_installed) {
        atexit(at_exit);
        atexit_installed = true;
    }
    const char *paths[3] = {stdin_path != NULL ? stdin_path : "/dev/null", p->out_path,
                            p->err_path};
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "it_proc: fork for %s: %s\n", name, strerror(errno));
        return false;
    }
    if (pid == 0)
        child(paths, argv, parent);
    registry_add(pid);
    p->pid = pid;
    return true;
}

static bool reap(it_proc *p, int options)
{
    int ws = 0;
    pid_t r;
    do
        r = waitpid(p->pid, &ws, options);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return false;
    registry_remove(p->pid);
    p->status = r == p->pid ? status_of(ws) : -1;
    p->pid = 0;
    return true;
}

bool it_proc_running(it_proc *p)
{
    if (p->pid == 0)
        return false;
    return !reap(p, WNOHANG);
}

int it_proc_wait(it_proc *p, int64_t timeout_ms)
{
    int64_t deadline = it_now_ms() + timeout_ms;
    int64_t nap = 5;
    while (it_proc_running(p)) {
        if (it_now_ms() >= deadline)
            return IT_PROC_TIMEOUT;
        it_sleep_ms(nap);
        nap = nap < 50 ? nap * 2 : 50;
    }
    return p->status;
}

bool it_proc_signal(it_proc *p, int sig)
{
    if (!it_proc_running(p))
        return false;
    return kill(p->pid, sig) == 0;
}

int it_proc_stop(it_proc *p, int sig, int64_t grace_ms)
{
    if (!it_proc_running(p))
        return p->status;
    kill(p->pid, sig);
    int st = it_proc_wait(p, grace_ms);
    if (st != IT_PROC_TIMEOUT)
        return st;
    kill(p->pid, SIGKILL);
    reap(p, 0);
    return p->status;
}

int it_proc_run(it_proc *p, const char *dir, const char *name, const char *stdin_path,
                char *const argv[], int64_t timeout_ms)
{
    it_proc local;
    if (p == NULL)
        p = &local;
    if (!it_proc_spawn(p, dir, name, stdin_path, argv))
        return -1;
    int st = it_proc_wait(p, timeout_ms);
    if (st == IT_PROC_TIMEOUT) {
        fprintf(stderr, "it_proc: %s did not finish within %lld ms; killed\n", name,
                (long long)timeout_ms);
        it_proc_stop(p, SIGKILL, 1000);
        return IT_PROC_TIMEOUT;
    }
    return st;
}
