/* SPDX-License-Identifier: Apache-2.0 */
/* Files: sizes, copies, and the OS page cache (store_layouts.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_layouts.h"

#define CHUNK (1 << 20)

uint64_t ib__sl_file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

uint64_t ib__sl_db_bytes(const char *path)
{
    char wal[4200];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    return ib__sl_file_bytes(path) + ib__sl_file_bytes(wal);
}

void ib__sl_remove_db(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char p[4200];
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, suffixes[i]);
        if (unlink(p) != 0 && errno != ENOENT)
            ib__sl_die("cannot remove %s: %s", p, strerror(errno));
    }
}

/* Writes all of buf, or dies. */
static void write_all(int fd, const char *buf, size_t len, const char *path)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ib__sl_die("cannot write %s: %s", path, strerror(errno));
        buf += w;
        len -= (size_t)w;
    }
}

/* Copies `from` to a fresh `to` (with no -wal or -shm beside it) and
 * syncs it, so that its pages are clean and can be evicted. */
void ib__sl_copy_file(const char *from, const char *to)
{
    ib__sl_remove_db(to);
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        ib__sl_die("cannot open %s: %s", from, strerror(errno));
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        ib__sl_die("cannot create %s: %s", to, strerror(errno));
    char *buf = malloc(CHUNK);
    if (buf == NULL)
        ib__sl_die("out of memory");
    for (;;) {
        ssize_t r = read(in, buf, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            ib__sl_die("cannot read %s: %s", from, strerror(errno));
        if (r == 0)
            break;
        write_all(out, buf, (size_t)r, to);
    }
    if (fsync(out) != 0)
        ib__sl_die("cannot sync %s: %s", to, strerror(errno));
    free(buf);
    close(in);
    close(out);
}

void ib__sl_evict(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)fdatasync(fd);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

void ib__sl_read_through(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        ib__sl_die("cannot open %s: %s", path, strerror(errno));
    char *buf = malloc(CHUNK);
    if (buf == NULL)
        ib__sl_die("out of memory");
    while (read(fd, buf, CHUNK) > 0) {
    }
    free(buf);
    close(fd);
}
