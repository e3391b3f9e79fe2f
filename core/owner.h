/* SPDX-License-Identifier: Apache-2.0 */
/* Claim owner tokens: one per process incarnation.
 *
 * A claim in a recorder belongs to an owner token, and every mark and
 * release is fenced by it. Hostname and PID alone are not unique: the
 * containers of one pod share the hostname and each runs as PID 1. A token
 * therefore carries, besides a readable label, the facts that let another
 * process on the same kernel prove that the owner is gone, and 64 random
 * bits so that two incarnations never share a token:
 *
 *   <label>/<boot id>/<pid namespace>/<pid>/<start time>/<random>
 *
 * boot id is the kernel's (32 hex digits, dashes dropped), pid namespace the
 * inode number of /proc/self/ns/pid, start time the process's start in
 * clock ticks since boot (field 22 of /proc/PID/stat). Tokens that do not
 * have this form (older versions, other tools) are only ever "unknown". */
#ifndef IB_OWNER_H
#define IB_OWNER_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* Room for a token: the recorders' owner limit. */
#define IB_OWNER_TOKEN_MAX 128

/* Is the holder of a claim still running? */
typedef enum ib_owner_liveness {
    IB_OWNER_UNKNOWN = 0, /* cannot tell (another host or namespace, or a foreign token) */
    IB_OWNER_ALIVE = 1,   /* same kernel and PID namespace, and the process is there */
    IB_OWNER_GONE = 2,    /* provably not running any more */
} ib_owner_liveness;

/* Writes a fresh token for this process into `out` (at most `out_len`
 * bytes, NUL included; IB_OWNER_TOKEN_MAX is always enough). `label` is a
 * readable prefix such as "orders@host"; it is cut to 40 bytes and '/'
 * inside it becomes '_'. Errors: IB_ERR_IO when no randomness can be read,
 * IB_ERR_INVALID_ARG when `out_len` is too small. */
ib_status ib_owner_make(char *out, size_t out_len, const char *label, ib_error *err);

/* Tells whether the process that made `token` is still running, as seen
 * from this process. `host_local` says the store holding the token is only
 * ever used from one host (a SQLite file): a token from another boot of the
 * kernel then belongs to a process that died with the previous boot, so it
 * is GONE. For a store shared across hosts pass false: another boot id may
 * be another machine, so the answer is UNKNOWN. Reads /proc; never blocks
 * for long. */
ib_owner_liveness ib_owner_liveness_of(const char *token, bool host_local);

#endif
