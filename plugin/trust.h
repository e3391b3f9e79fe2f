/* Plugin file trust: whether a file is safe to dlopen (loader internals).
 *
 * Loading a shared object runs its code with the host's privileges, so the
 * file, and the directory that holds it, must be as trustworthy as the host
 * binary: owned by root or the running user and not writable by group or
 * others. This is the rule sshd applies to authorized_keys (StrictModes).
 * The directory matters because whoever can write to it can replace the
 * file between this check and dlopen. */
#ifndef IB_TRUST_H
#define IB_TRUST_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

/* Resolves `path` (symlinks included) and checks the file it names:
 *   - it exists and is a regular file (always checked);
 *   - unless `allow_insecure`: the file and its directory are owned by root
 *     or `self_uid`, and neither is writable by group or others;
 *   - it starts with an ELF header of a shared object (always checked), so
 *     a stray file gets a clearer refusal than dlopen's.
 * `self_uid` is the running user (geteuid()); tests pass another uid.
 * On success stores the resolved absolute path in `*resolved` (caller frees
 * with free()); dlopen must use it, so the checked file is the loaded one.
 * On refusal returns IB_ERR_PLUGIN with "plugin <path>: <reason>" (`path`
 * as given), or IB_ERR_NOMEM. */
ib_status ib__plugin_trust_check(char **resolved, const char *path, bool allow_insecure,
                                 uid_t self_uid, ib_error *err);

#endif
