/* SPDX-License-Identifier: Apache-2.0 */
/* The directories above a trusted file (dir_trust.h). */
#include "dir_trust.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static ib_dir_trust judge(const char *dir, uid_t self_uid, struct stat *st)
{
    if (stat(dir, st) != 0)
        return IB_DIR_UNREADABLE;
    if (st->st_uid != 0 && st->st_uid != self_uid)
        return IB_DIR_FOREIGN_OWNER;
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st->st_mode & S_ISVTX) == 0)
        return IB_DIR_SHARED_WRITE;
    return IB_DIR_TRUSTED;
}

ib_dir_trust ib_dir_trust_walk(const char *real, uid_t self_uid, char *bad, size_t cap,
                               struct stat *st)
{
    char dir[PATH_MAX];
    size_t len = strlen(real);

    if (len >= sizeof(dir) || real[0] != '/') {
        errno = ENAMETOOLONG;
        snprintf(bad, cap, "%s", real);
        return IB_DIR_UNREADABLE;
    }
    memcpy(dir, real, len + 1);
    for (;;) {
        char *slash = strrchr(dir, '/');
        slash[slash == dir ? 1 : 0] = '\0';
        ib_dir_trust t = judge(dir, self_uid, st);
        if (t != IB_DIR_TRUSTED || slash == dir) {
            snprintf(bad, cap, "%s", dir);
            return t;
        }
    }
}
