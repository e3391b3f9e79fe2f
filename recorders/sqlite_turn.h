/* A fair turn at the write lock of a marker file, for the processes (and
 * the recorders of one process) that share it.
 *
 * SQLite has no queue for writers: one that finds the file locked sleeps
 * and tries again, and a neighbour that commits in a tight loop can take
 * the lock back every time (PITFALLS.md, "Several writers on one SQLite
 * file"). So before BEGIN IMMEDIATE a recorder takes its turn here, on a
 * file beside the database ("<path>-lock"), with two open-file-description
 * locks (F_OFD_SETLKW), which the kernel queues and hands over without
 * polling, and releases when a process dies:
 *
 *   take the gate  ->  take the writer byte  ->  give the gate back
 *   ... BEGIN IMMEDIATE ... COMMIT ...
 *   give the writer byte back
 *
 * Whoever holds the gate is the next writer: a process that has just
 * committed cannot take the writer byte again before it, however fast it
 * loops, because it must first queue at the gate behind it. Waiting is
 * bounded: a timer interrupts the wait (a thread-directed real-time signal
 * whose handler does nothing), so a stopped peer makes the call fail with
 * a timeout instead of hanging it.
 *
 * Open-file-description locks belong to the descriptor, not the process:
 * two recorders of one process exclude each other, and closing one
 * descriptor never drops another's locks. Not thread-safe: the recorder
 * mutex guards it. */
#ifndef IB_SQLITE_TURN_H
#define IB_SQLITE_TURN_H

#include <stdbool.h>
#include <stdint.h>

#include "infinity_bus/status.h"

typedef struct sq_turn {
    int fd;              /* the lock file; -1 = none (in memory) */
    bool held;           /* the writer byte is ours */
    uint64_t waits;      /* turns that had to wait */
    int64_t max_wait_ns; /* the longest wait for a turn */
    int64_t last_wait_ns;
} sq_turn;

/* No lock file: every take succeeds at once (an in-memory database). */
void ib__sq_turn_init(sq_turn *t);

/* Opens (creating with `mode`, whatever the umask) the lock file
 * `<db_path>-lock`. It is never followed through a symbolic link. IB_OK, or
 * IB_ERR_IO with `err` naming the file (`name` is "sqlite:PATH"). */
ib_status ib__sq_turn_open(sq_turn *t, const char *db_path, const char *name, unsigned mode,
                           ib_error *err);

/* Waits for this recorder's turn to write, at most `timeout_ms`. 0 when it
 * is ours (give it back with ib__sq_turn_give), ETIMEDOUT when the wait
 * ran out, or another errno when the lock file cannot be locked. */
int ib__sq_turn_take(sq_turn *t, int64_t timeout_ms);

/* Gives the turn back; a no-op when it is not held. */
void ib__sq_turn_give(sq_turn *t);

/* Takes a shared lock on byte `slot` of the lock file for as long as the
 * file is open: a reader's sign of life (sqlite_readers.c). 0 or an errno. */
int ib__sq_turn_hold_slot(sq_turn *t, int64_t slot);

/* Whether anyone else (another process, or another recorder of this one)
 * holds a lock on byte `slot`: true when it cannot be told. */
bool ib__sq_turn_slot_held(const sq_turn *t, int64_t slot);

/* Gives the turn back and closes the file. */
void ib__sq_turn_close(sq_turn *t);

#endif
