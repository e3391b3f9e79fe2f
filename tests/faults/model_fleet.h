/* SPDX-License-Identifier: Apache-2.0 */
/* The model test's worker processes: started with fork and exec, talked
 * to over two pipes (commands to its stdin, replies from its stdout, one
 * line each), its stderr into a log file, and ended by PID only. */
#ifndef IB_MODEL_FLEET_H
#define IB_MODEL_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model_wire.h"

typedef struct model_proc {
    pid_t pid; /* 0: none */
    int to;    /* the worker's stdin */
    int from;  /* the worker's stdout, non-blocking */
    char buf[2 * MODEL_LINE_MAX];
    size_t used;
    char log[4096]; /* its stderr */
} model_proc;

/* Starts `exe DB SALT` with IB_FAULT_VFS set to `faults` (NULL: unset)
 * and stderr appended to `log`. Returns 0, or -1 (errno) when it cannot. */
int proc_start(model_proc *p, const char *exe, const char *db, uint64_t salt, const char *log,
               const char *faults);

/* Sends one command line. -1 when the worker is gone. */
int proc_send(model_proc *p, const char *line, size_t len);

/* Takes the next complete reply line (without '\n') into `line`: 1 when
 * there is one, 0 when none has arrived yet, -1 when the worker closed its
 * stdout (it is gone) or sent a line longer than the wire allows. */
int proc_read_line(model_proc *p, char *line, size_t cap);

/* SIGKILL, then waits for it; the pipes are closed. Returns the wait
 * status. */
int proc_kill(model_proc *p);

/* Appends the stacks of the worker's threads to its log (gdb, when the
 * machine has it), for a worker that hangs. */
void proc_backtrace(const model_proc *p);

/* Waits up to `timeout_ms` for the worker to exit by itself, else writes
 * its stacks to its log and kills it. Returns the wait status; `*in_time`
 * says whether it exited alone. */
int proc_reap(model_proc *p, int64_t timeout_ms, bool *in_time);

/* The last `cap` - 1 bytes of the worker's log, for a report. */
void proc_log_tail(const model_proc *p, char *out, size_t cap);

/* CLOCK_BOOTTIME (the lease clock) and CLOCK_REALTIME. */
int64_t model_now_ns(void);
int64_t model_wall_ms(void);

#endif
