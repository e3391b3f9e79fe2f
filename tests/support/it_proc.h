/* SPDX-License-Identifier: Apache-2.0 */
/* Child processes of an integration test: nats-server, ibus, curl, openssl.
 *
 * Every process is started with fork/exec from an argv array (no shell),
 * with stdout and stderr in its own log files and PR_SET_PDEATHSIG set to
 * SIGKILL, so nothing outlives a test process that dies. Every PID started
 * goes into a registry; it_proc_kill_all() (called by the cmocka teardown
 * and by an atexit handler installed on the first spawn) kills and reaps
 * whatever is still running, so a failed assertion leaks no process.
 *
 * Spawn from the test's main thread only: the death signal follows the
 * thread that forked, not the process. */
#ifndef IB_IT_PROC_H
#define IB_IT_PROC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* it_proc_wait() result when the deadline passed first. */
#define IT_PROC_TIMEOUT (-1000)

typedef struct it_proc {
    pid_t pid;  /* 0 once reaped (or never started) */
    int status; /* after reaping: exit code, or -signal when killed by one */
    char name[64];
    char out_path[PATH_MAX]; /* stdout log */
    char err_path[PATH_MAX]; /* stderr log */
} it_proc;

/* Starts argv[0] (a path; argv NULL-terminated) with stdout and stderr
 * redirected to "<dir>/<name>-<n>.out" and ".err" (n counts spawns, so a
 * restarted process keeps its old logs), stdin from `stdin_path` (NULL =
 * /dev/null). Returns false (with a message on stderr) if the fork or the
 * log files fail; an exec failure shows as exit code 127. */
bool it_proc_spawn(it_proc *p, const char *dir, const char *name, const char *stdin_path,
                   char *const argv[]);

/* True while the process runs; reaps it (setting p->status) once it ended. */
bool it_proc_running(it_proc *p);

/* Waits up to timeout_ms for the process to end. Returns its status (exit
 * code, or -signal) or IT_PROC_TIMEOUT; the process keeps running then.
 * An already reaped process returns its recorded status at once. */
int it_proc_wait(it_proc *p, int64_t timeout_ms);

/* Sends `sig` to a running process; false if it is not running. */
bool it_proc_signal(it_proc *p, int sig);

/* Sends `sig`, waits grace_ms, then SIGKILLs and reaps. Returns the status
 * (which shows whether `sig` sufficed: -9 means it did not). */
int it_proc_stop(it_proc *p, int sig, int64_t grace_ms);

/* Runs argv to completion (spawn + wait, SIGKILL after timeout_ms). Returns
 * the status, or IT_PROC_TIMEOUT after killing it. `p` (may be NULL) keeps
 * the log paths for reading the output. */
int it_proc_run(it_proc *p, const char *dir, const char *name, const char *stdin_path,
                char *const argv[], int64_t timeout_ms);

/* SIGKILLs and reaps every registered process still running. Safe to call
 * twice; called from the cmocka teardown and at exit. */
void it_proc_kill_all(void);

/* Monotonic milliseconds, and a sleep that survives signals. */
int64_t it_now_ms(void);
void it_sleep_ms(int64_t ms);

#endif
