/* SPDX-License-Identifier: Apache-2.0 */
/* Whether the directories above a file the process trusts (a plugin, the
 * marker file) could let another user put a different file in its place:
 * one rule for every such file, as sshd's safe_path walks them. */
#ifndef IB_DIR_TRUST_H
#define IB_DIR_TRUST_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The first thing wrong with a directory, by ib_dir_trust_walk(). */
typedef enum ib_dir_trust {
    IB_DIR_TRUSTED = 0,   /* owned by root or the running user, and not writable by
                             group or others unless sticky */
    IB_DIR_FOREIGN_OWNER, /* owned by another user than root and the running one */
    IB_DIR_SHARED_WRITE,  /* writable by group or others without the sticky bit */
    IB_DIR_UNREADABLE,    /* stat failed: errno says why */
} ib_dir_trust;

/* Walks every directory from the one holding `real` (an absolute,
 * canonical path, as realpath gives) up to "/", nearest first, and
 * returns what is wrong with the first one that is not trusted, with its
 * path in `bad` (cap bytes) and its stat in `*st`; IB_DIR_TRUSTED when
 * none. Others may add entries to a sticky directory (/tmp) but not rename
 * or delete ones they do not own, and the entry below it is checked in its
 * turn. A `real` that is not absolute or does not fit PATH_MAX is reported
 * as IB_DIR_UNREADABLE with errno ENAMETOOLONG. */
ib_dir_trust ib_dir_trust_walk(const char *real, uid_t self_uid, char *bad, size_t cap,
                               struct stat *st);

#endif
