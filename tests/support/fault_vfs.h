/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection into SQLite for tests, the way SQLite tests itself (its
 * test VFS and its I/O-error and out-of-memory tests): a shim VFS over the
 * process's default one ("unix") that fails the Nth write, sync, read,
 * lock, shared-memory lock or shared-memory map with the SQLite code the
 * test chose, and a wrapper of SQLite's allocator that fails the Nth
 * allocation with SQLITE_NOMEM.
 *
 * fault_vfs_install() registers the shim as the default VFS, so every
 * connection the process opens afterwards (a recorder's included) uses it
 * without knowing; the allocator goes in through
 * sqlite3_config(SQLITE_CONFIG_MALLOC), so the install must come before
 * anything else in the process touches SQLite. Faults are process-wide:
 * one armed fault per kind, counted over every connection of the process.
 *
 * A fault is armed as "the nth call of this kind from now fails, and the
 * count - 1 calls after it" (count 0: every call from the nth on, until
 * disarmed: a disk that stays full). Calls of a kind are counted from the
 * install: a write is one xWrite, a sync one xSync, a lock one xLock (an
 * unlock never fails), a shared-memory lock one xShmLock that takes a lock,
 * a map one xShmMap, an allocation one xMalloc or xRealloc.
 *
 * The same faults as text, for the command line or the environment of a
 * process the test execs (IB_FAULT_VFS, read by fault_vfs_install):
 *
 *   SPEC  := FAULT [ "," FAULT ]...      at most FAULT_SPEC_MAX faults
 *   FAULT := KIND ":" N ":" CODE [ ":" COUNT ]
 *   KIND  := write | sync | read | lock | shmlock | shmmap | alloc
 *   CODE  := full | ioerr | busy | nomem
 *
 * e.g. "write:3:full" or "sync:1:ioerr,alloc:200:nomem:0". N is 1 or more
 * (1 = the next call); COUNT defaults to 1. "busy" is for lock and shmlock
 * only, "nomem" for alloc only (and alloc takes only nomem). "" and "none"
 * arm nothing. Test support: not thread-safe against concurrent arming,
 * but the counting itself is (SQLite may call from any thread). */
#ifndef IB_FAULT_VFS_H
#define IB_FAULT_VFS_H

#include <stddef.h>
#include <stdint.h>

/* The environment variable fault_vfs_install() arms from. */
#define FAULT_VFS_ENV "IB_FAULT_VFS"
/* The name the shim registers under. */
#define FAULT_VFS_NAME "ib-fault"
#define FAULT_SPEC_MAX 16

typedef enum fault_kind {
    FAULT_WRITE = 0,
    FAULT_SYNC,
    FAULT_READ,
    FAULT_LOCK,
    FAULT_SHMLOCK,
    FAULT_SHMMAP,
    FAULT_ALLOC,
    FAULT_KINDS
} fault_kind;

typedef enum fault_code {
    FAULT_FULL = 0, /* SQLITE_FULL: the disk is full */
    FAULT_IOERR,    /* the kind's SQLITE_IOERR_* (SQLITE_IOERR_WRITE, _FSYNC, ...) */
    FAULT_BUSY,     /* SQLITE_BUSY: another process holds the lock (lock, shmlock) */
    FAULT_NOMEM,    /* the allocation returns NULL: SQLITE_NOMEM (alloc) */
    FAULT_CODES
} fault_code;

/* One fault: the nth call of `kind` from the arming fails with `code`,
 * and so do the count - 1 after it (0: all after it). */
typedef struct fault_spec {
    fault_kind kind;
    unsigned nth;
    fault_code code;
    unsigned count;
} fault_spec;

/* Registers the shim as the default VFS and wraps SQLite's default
 * allocator, then arms what IB_FAULT_VFS says. Must run before any other
 * use of SQLite in the process (it initialises SQLite, shuts it down and
 * initialises it again to learn the default allocator); a second call is
 * a no-op. Returns 0, or -1 with the reason in `why` (a bad IB_FAULT_VFS,
 * or SQLite in use already). */
int fault_vfs_install(char *why, size_t why_len);

/* Arms one fault, replacing any armed fault of the same kind; the call
 * counter it counts from is the kind's count now. Returns 0, or -1 when the
 * spec breaks the rules above (nth 0, a code the kind does not take). */
int fault_vfs_arm(const fault_spec *f);

/* Parses SPEC text into out[0..*n) (at most `cap`). Returns 0, or -1 with
 * the reason in `why`, which names the fault and what is wrong with it.
 * Arms nothing. */
int fault_vfs_parse(fault_spec *out, size_t cap, size_t *n, const char *text, char *why,
                    size_t why_len);

/* Parses and arms SPEC text: all of it, or (on error) none of it. */
int fault_vfs_arm_text(const char *text, char *why, size_t why_len);

/* Disarms every kind. Counters keep counting. */
void fault_vfs_disarm(void);

/* Calls of `kind` seen, and faults of `kind` injected, since the install. */
uint64_t fault_vfs_calls(fault_kind kind);
uint64_t fault_vfs_fired(fault_kind kind);

/* Faults of every kind injected since the install. */
uint64_t fault_vfs_fired_total(void);

/* The SQLite result code a fault of `kind` with `code` injects (0 for a
 * pair the rules refuse; SQLITE_NOMEM for an allocation). */
int fault_vfs_result(fault_kind kind, fault_code code);

/* Names as the spec text spells them ("write", "full", ...); "?" when out
 * of range. */
const char *fault_kind_name(fault_kind kind);
const char *fault_code_name(fault_code code);

#endif
