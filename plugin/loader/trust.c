/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin file trust checks (see trust.h). */
#include "trust.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dir_trust.h"

/* The way out the loader offers, in its own words: the CLI maps "allow
 * insecure plugin files" to its flag in its help. */
#define OPT_OUT "allow insecure plugin files (development only)"

static bool owner_trusted(uid_t owner, uid_t self_uid)
{
    return owner == 0 || owner == self_uid;
}

static ib_status check_file_perms(const char *path, const struct stat *st, uid_t self_uid,
                                  ib_error *err)
{
    if (!owner_trusted(st->st_uid, self_uid))
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: file is owned by uid %u, not by root or the running user "
                            "(uid %u); fix with chown or " OPT_OUT,
                            path, (unsigned)st->st_uid, (unsigned)self_uid);
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: file is writable by group or others (mode %04o); fix "
                            "with chmod go-w or " OPT_OUT,
                            path, (unsigned)(st->st_mode & 07777));
    return IB_OK;
}

/* Every directory from the file's own up to "/", by the one rule for
 * trusted files (core/dir_trust.h). `real` is absolute and canonical. */
static ib_status check_ancestors(const char *path, const char *real, uid_t self_uid, ib_error *err)
{
    char dir[PATH_MAX];
    struct stat st;

    switch (ib_dir_trust_walk(real, self_uid, dir, sizeof(dir), &st)) {
    case IB_DIR_TRUSTED:
        return IB_OK;
    case IB_DIR_FOREIGN_OWNER:
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: directory %s is owned by uid %u, not by root or the "
                            "running user (uid %u); fix with chown or " OPT_OUT,
                            path, dir, (unsigned)st.st_uid, (unsigned)self_uid);
    case IB_DIR_SHARED_WRITE:
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: directory %s is writable by group or others (mode %04o); "
                            "fix with chmod go-w or " OPT_OUT,
                            path, dir, (unsigned)(st.st_mode & 07777));
    default:
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot inspect directory %s: %s", path,
                            dir, strerror(errno));
    }
}

/* dlopen's own message for a stray file depends on the C library; this one
 * is stable and says what is wrong. */
static ib_status check_elf_header(const char *path, int fd, ib_error *err)
{
    unsigned char hdr[EI_NIDENT + 2];
    ssize_t got;
    unsigned type;

    do
        got = pread(fd, hdr, sizeof(hdr), 0);
    while (got < 0 && errno == EINTR);
    if (got < 0)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot read: %s", path,
                            strerror(errno));
    if ((size_t)got < sizeof(hdr) || memcmp(hdr, ELFMAG, SELFMAG) != 0)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: not a shared object (no ELF header)",
                            path);
    if (hdr[EI_DATA] == ELFDATA2MSB)
        type = (unsigned)hdr[EI_NIDENT] << 8 | hdr[EI_NIDENT + 1];
    else
        type = (unsigned)hdr[EI_NIDENT + 1] << 8 | hdr[EI_NIDENT];
    if (type != ET_DYN)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: not a shared object (ELF type %u)",
                            path, type);
    return IB_OK;
}

/* Refuses what `st` (the opened file) shows is no plugin, or not a trusted
 * one, before any byte of it is read. */
static ib_status check_opened(const char *path, const char *real, const struct stat *st,
                              bool allow_insecure, uid_t self_uid, ib_error *err)
{
    ib_status rc;

    if (!S_ISREG(st->st_mode))
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: not a regular file", path);
    if (allow_insecure)
        return IB_OK;
    rc = check_file_perms(path, st, self_uid, err);
    if (rc != IB_OK)
        return rc;
    return check_ancestors(path, real, self_uid, err);
}

ib_status ib__plugin_trust_open(int *fd, const char *path, bool allow_insecure, uid_t self_uid,
                                ib_error *err)
{
    char *real;
    struct stat st;
    ib_status rc;

    *fd = -1;
    if (path == NULL || path[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin: empty path");
    real = realpath(path, NULL);
    if (real == NULL) {
        if (errno == ENOMEM)
            return ib_error_set(err, IB_ERR_NOMEM, "plugin %s: out of memory", path);
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot open: %s", path,
                            strerror(errno));
    }
    /* O_NONBLOCK: a FIFO must be refused below, not block the host here.
     * O_NOFOLLOW: the canonical path has no link at its end; one that
     * appeared since is refused, not followed. */
    int f = open(real, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
    if (f < 0) {
        rc = ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(f, &st) != 0)
        rc = ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot inspect: %s", path,
                          strerror(errno));
    else
        rc = check_opened(path, real, &st, allow_insecure, self_uid, err);
    if (rc == IB_OK)
        rc = check_elf_header(path, f, err);
    if (rc == IB_OK)
        *fd = f;
    else
        close(f);
out:
    free(real);
    return rc;
}
