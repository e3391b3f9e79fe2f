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

#define OPT_OUT "pass --allow-insecure-plugins"

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

/* The directory of an absolute, resolved path: whoever may write there may
 * swap the file after we checked it. */
static ib_status check_dir_perms(const char *path, const char *resolved, uid_t self_uid,
                                 ib_error *err)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(resolved, '/');
    size_t len = slash == NULL || slash == resolved ? 1 : (size_t)(slash - resolved);
    struct stat st;

    if (len >= sizeof(dir))
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: path too long", path);
    memcpy(dir, slash == NULL ? "/" : resolved, len);
    dir[len] = '\0';
    if (stat(dir, &st) != 0)
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot inspect directory %s: %s", path,
                            dir, strerror(errno));
    if (!owner_trusted(st.st_uid, self_uid))
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: directory %s is owned by uid %u, not by root or the "
                            "running user (uid %u); fix with chown or " OPT_OUT,
                            path, dir, (unsigned)st.st_uid, (unsigned)self_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return ib_error_set(err, IB_ERR_PLUGIN,
                            "plugin %s: directory %s is writable by group or others (mode %04o); "
                            "fix with chmod go-w or " OPT_OUT,
                            path, dir, (unsigned)(st.st_mode & 07777));
    return IB_OK;
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

ib_status ib__plugin_trust_check(char **resolved, const char *path, bool allow_insecure,
                                 uid_t self_uid, ib_error *err)
{
    char *real = NULL;
    int fd = -1;
    struct stat st;
    ib_status rc;

    *resolved = NULL;
    if (path == NULL || path[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "plugin: empty path");
    real = realpath(path, NULL);
    if (real == NULL) {
        if (errno == ENOMEM)
            return ib_error_set(err, IB_ERR_NOMEM, "plugin %s: out of memory", path);
        return ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot open: %s", path,
                            strerror(errno));
    }
    /* O_NONBLOCK: a FIFO must be refused below, not block the host here. */
    fd = open(real, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        rc = ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot open: %s", path, strerror(errno));
        goto fail_real;
    }
    if (fstat(fd, &st) != 0) {
        rc = ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: cannot inspect: %s", path,
                          strerror(errno));
        goto fail_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = ib_error_set(err, IB_ERR_PLUGIN, "plugin %s: not a regular file", path);
        goto fail_fd;
    }
    if (!allow_insecure) {
        rc = check_file_perms(path, &st, self_uid, err);
        if (rc != IB_OK)
            goto fail_fd;
        rc = check_dir_perms(path, real, self_uid, err);
        if (rc != IB_OK)
            goto fail_fd;
    }
    rc = check_elf_header(path, fd, err);
    if (rc != IB_OK)
        goto fail_fd;
    close(fd);
    *resolved = real;
    return IB_OK;

fail_fd:
    close(fd);
fail_real:
    free(real);
    return rc;
}
