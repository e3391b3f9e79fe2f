/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin file trust: whether a file is safe to dlopen (loader internals).
 *
 * Loading a shared object runs its code with the host's privileges, so the
 * file, and every directory above it, must be as trustworthy as the host
 * binary: owned by root or the running user and not writable by group or
 * others (a sticky directory such as /tmp passes the mode test). This is
 * the rule sshd applies to authorized_keys (StrictModes, safe_path).
 * Whoever can write to one of those directories can put another file where
 * the path leads. The file is opened once and every check, and the load,
 * go through that descriptor, so a file swapped in after the check is
 * never the one loaded. */
#ifndef IB_TRUST_H
#define IB_TRUST_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

/* Resolves `path` to its canonical absolute form (symlinks included), opens
 * it once and checks, through that descriptor:
 *   - it is a regular file (always checked);
 *   - unless `allow_insecure`: the file, and each directory of the
 *     resolved path up to "/", is owned by root or `self_uid` and is not
 *     writable by group or others; a sticky directory passes that mode
 *     test (its owner is still checked);
 *   - it starts with an ELF header of a shared object (always checked), so
 *     a stray file gets a clearer refusal than dlopen's.
 * `self_uid` is the running user (geteuid()); tests pass another uid.
 * On success stores the open descriptor (read-only, close-on-exec) in
 * `*fd`; the caller loads through it (/proc/self/fd/N), not the path, and
 * closes it. On refusal `*fd` is -1 and the result is IB_ERR_PLUGIN with
 * "plugin <path>: <reason>" (`path` as given), IB_ERR_INVALID_ARG for an
 * empty path, or IB_ERR_NOMEM. */
ib_status ib__plugin_trust_open(int *fd, const char *path, bool allow_insecure, uid_t self_uid,
                                ib_error *err);

#endif
