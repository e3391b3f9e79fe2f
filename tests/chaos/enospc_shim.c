/* SPDX-License-Identifier: Apache-2.0 */
/* enospc_shim: a disk that fills up under the marker database, for the
 * chaos test's recorder outage.
 *
 * Loaded with LD_PRELOAD into `ibus run`. While the file named by
 * IB_SHIM_FLAG exists, every write, pwrite, pwrite64, writev, fsync and
 * fdatasync on a descriptor of the database named by IB_SHIM_DB, or of its
 * "-wal" or "-journal" file, fails with ENOSPC; so does an ftruncate or a
 * fallocate that would make such a file larger (shrinking a file needs no
 * space, and a real full disk allows it). Every other descriptor, and every
 * call while the flag file is absent, goes to the real function found with
 * dlsym(RTLD_NEXT).
 *
 * The "-shm" file is left alone: SQLite writes it through a shared mapping,
 * and it lives in memory on a real system too.
 *
 * The path of a descriptor is read from /proc/self/fd/N on each call, and
 * only while the flag exists. A cache per descriptor would go stale when a
 * number is reused after close, dup2 or close_range, and catching every way
 * a descriptor is replaced is more fragile than one readlink during the
 * outage. Outside the outage a call costs one access(2). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

/* Set once by the constructor, read-only afterwards. */
static char shim_flag[PATH_MAX];
static char shim_db[PATH_MAX];
static size_t shim_db_len;

/* The canonical path of the database, which may not exist yet: the
 * directory is resolved, the name is kept, so it compares equal to what
 * /proc/self/fd shows. */
static void canonical_db(const char *db)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(db, '/');
    const char *name = slash != NULL ? slash + 1 : db;
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == db)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - db), db);
    if (realpath(dir, real) == NULL)
        return;
    int n = snprintf(shim_db, sizeof(shim_db), "%s/%s", strcmp(real, "/") == 0 ? "" : real, name);
    if (n < 0 || (size_t)n >= sizeof(shim_db)) {
        shim_db[0] = '\0';
        return;
    }
    shim_db_len = (size_t)n;
}

__attribute__((constructor)) static void shim_init(void)
{
    const char *flag = getenv("IB_SHIM_FLAG");
    const char *db = getenv("IB_SHIM_DB");
    if (flag == NULL || db == NULL || flag[0] == '\0' || db[0] == '\0')
        return;
    if (snprintf(shim_flag, sizeof(shim_flag), "%s", flag) >= (int)sizeof(shim_flag)) {
        shim_flag[0] = '\0';
        return;
    }
    canonical_db(db);
}

/* Resolves a real function once; a race between threads stores the same
 * pointer twice, which is harmless. */
#define REAL(type, name)                                                                           \
    static type real_##name;                                                                       \
    if (__atomic_load_n(&real_##name, __ATOMIC_ACQUIRE) == NULL)                                   \
        __atomic_store_n(&real_##name, (type)dlsym(RTLD_NEXT, #name), __ATOMIC_RELEASE);

static bool is_marker_path(const char *path)
{
    if (strncmp(path, shim_db, shim_db_len) != 0)
        return false;
    const char *rest = path + shim_db_len;
    return strcmp(rest, "") == 0 || strcmp(rest, "-wal") == 0 || strcmp(rest, "-journal") == 0;
}

/* True when a call on `fd` must fail now. errno is kept as the caller
 * left it. */
static bool outage_for(int fd)
{
    if (shim_db_len == 0 || fd < 0)
        return false;
    int saved = errno;
    bool hit = false;
    if (access(shim_flag, F_OK) == 0) {
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        if (n > 0) {
            path[n] = '\0';
            hit = is_marker_path(path);
        }
    }
    errno = saved;
    return hit;
}

/* True when growing the file of `fd` to `len` bytes must fail now. */
static bool outage_grows(int fd, off_t len)
{
    if (!outage_for(fd))
        return false;
    struct stat st;
    int saved = errno;
    bool grows = fstat(fd, &st) != 0 || len > st.st_size;
    errno = saved;
    return grows;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pwrite64_fn)(int, const void *, size_t, off64_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*sync_fn)(int);
typedef int (*ftruncate_fn)(int, off_t);
typedef int (*ftruncate64_fn)(int, off64_t);
typedef int (*fallocate_fn)(int, int, off_t, off_t);
typedef int (*fallocate64_fn)(int, int, off64_t, off64_t);
typedef int (*posix_fallocate_fn)(int, off_t, off_t);
typedef int (*posix_fallocate64_fn)(int, off64_t, off64_t);

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t count)
{
    REAL(write_fn, write);
    if (outage_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real_write(fd, buf, count);
}

SHIM_EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    REAL(pwrite_fn, pwrite);
    if (outage_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real_pwrite(fd, buf, count, offset);
}

SHIM_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset)
{
    REAL(pwrite64_fn, pwrite64);
    if (outage_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real_pwrite64(fd, buf, count, offset);
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    REAL(writev_fn, writev);
    if (outage_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real_writev(fd, iov, iovcnt);
}

SHIM_EXPORT int fsync(int fd)
{
    REAL(sync_fn, fsync);
    if (outage_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real_fsync(fd);
}

SHIM_EXPORT int fdatasync(int fd)
{
    REAL(sync_fn, fdatasync);
    if (outage_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real_fdatasync(fd);
}

SHIM_EXPORT int ftruncate(int fd, off_t length)
{
    REAL(ftruncate_fn, ftruncate);
    if (outage_grows(fd, length)) {
        errno = ENOSPC;
        return -1;
    }
    return real_ftruncate(fd, length);
}

SHIM_EXPORT int ftruncate64(int fd, off64_t length)
{
    REAL(ftruncate64_fn, ftruncate64);
    if (outage_grows(fd, (off_t)length)) {
        errno = ENOSPC;
        return -1;
    }
    return real_ftruncate64(fd, length);
}

SHIM_EXPORT int fallocate(int fd, int mode, off_t offset, off_t len)
{
    REAL(fallocate_fn, fallocate);
    if (outage_grows(fd, offset + len)) {
        errno = ENOSPC;
        return -1;
    }
    return real_fallocate(fd, mode, offset, len);
}

/* posix_fallocate reports its error as the return value, not in errno. */
SHIM_EXPORT int posix_fallocate(int fd, off_t offset, off_t len)
{
    REAL(posix_fallocate_fn, posix_fallocate);
    if (outage_grows(fd, offset + len))
        return ENOSPC;
    return real_posix_fallocate(fd, offset, len);
}

SHIM_EXPORT int fallocate64(int fd, int mode, off64_t offset, off64_t len)
{
    REAL(fallocate64_fn, fallocate64);
    if (outage_grows(fd, (off_t)(offset + len))) {
        errno = ENOSPC;
        return -1;
    }
    return real_fallocate64(fd, mode, offset, len);
}

SHIM_EXPORT int posix_fallocate64(int fd, off64_t offset, off64_t len)
{
    REAL(posix_fallocate64_fn, posix_fallocate64);
    if (outage_grows(fd, (off_t)(offset + len)))
        return ENOSPC;
    return real_posix_fallocate64(fd, offset, len);
}
