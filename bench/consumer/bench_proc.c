/* SPDX-License-Identifier: Apache-2.0 */
/* Child processes of the benchmark: started with fork/exec from an argv
 * (no shell), their output in a log file, and a parent-death signal so a
 * driver killed halfway leaves no consumer or server behind. */
#include "bench.h"

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

int64_t ib__bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t ib__bench_now_ms(void)
{
    return ib__bench_now_ns() / 1000000;
}

void ib__bench_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

pid_t ib__bench_spawn(const char *log_path, char *const argv[])
{
    pid_t parent = getpid();
    int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log < 0) {
        fprintf(stderr, "consumer_bench: %s: %s\n", log_path, strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "consumer_bench: fork: %s\n", strerror(errno));
        close(log);
        return -1;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls from here to exec. */
        int in = open("/dev/null", O_RDONLY);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        if (in >= 0)
            dup2(in, 0);
        dup2(log, 1);
        dup2(log, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(log);
    return pid;
}

static int decode_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 255;
}

int ib__bench_wait(pid_t pid, int64_t timeout_ms)
{
    int64_t deadline = ib__bench_now_ms() + timeout_ms;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return decode_status(status);
        if (r < 0 && errno != EINTR)
            return 255; /* not our child, or reaped already */
        if (ib__bench_now_ms() >= deadline)
            return -1;
        ib__bench_sleep_ms(10);
    }
}

int ib__bench_stop(pid_t pid, int64_t grace_ms)
{
    if (pid <= 0)
        return 255;
    kill(pid, SIGTERM);
    int rc = ib__bench_wait(pid, grace_ms);
    if (rc >= 0)
        return rc;
    kill(pid, SIGKILL);
    rc = ib__bench_wait(pid, 5000);
    return rc >= 0 ? rc : 255;
}

long ib__bench_proc_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t flen = strlen(field);
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            kib = strtol(line + flen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

int ib__bench_run(const char *log_path, char *const argv[], int64_t timeout_ms)
{
    pid_t pid = ib__bench_spawn(log_path, argv);
    if (pid < 0)
        return -1;
    int rc = ib__bench_wait(pid, timeout_ms);
    if (rc < 0) {
        ib__bench_stop(pid, 2000);
        return -1;
    }
    return rc;
}

double ib__bench_proc_cpu_s(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    /* The command name may hold spaces and parentheses: count fields from
     * the last ')'. utime and stime are fields 14 and 15. */
    const char *p = strrchr(text, ')');
    if (p == NULL)
        return -1;
    unsigned long long utime = 0, stime = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}
