/* SPDX-License-Identifier: Apache-2.0 */
#include "it_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "it_proc.h"

bool it_tmpdir_create(char *out, size_t cap)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = P_tmpdir;
    if (snprintf(out, cap, "%s/ibus-it-XXXXXX", base) >= (int)cap)
        return false;
    if (mkdtemp(out) == NULL) {
        fprintf(stderr, "it_files: mkdtemp %s: %s\n", out, strerror(errno));
        return false;
    }
    return true;
}

bool it_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < cap;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        fprintf(stderr, "it_files: cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

void it_tmpdir_remove(const char *dir)
{
    if (dir == NULL || dir[0] == '\0')
        return;
    /* depth first, never across a symlink or another file system */
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

char *it_file_read(size_t *len, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2 + 1);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (buf != NULL) {
        buf[n] = '\0';
        if (len != NULL)
            *len = n;
    }
    return buf;
}

bool it_file_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return close(fd) == 0;
}

size_t it_file_lines(const char *path)
{
    size_t len = 0, n = 0;
    char *buf = it_file_read(&len, path);
    if (buf == NULL)
        return 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n';
    free(buf);
    return n;
}

size_t it_wait_lines(const char *path, size_t n, int64_t timeout_ms)
{
    int64_t deadline = it_now_ms() + timeout_ms;
    size_t have;
    while ((have = it_file_lines(path)) < n && it_now_ms() < deadline)
        it_sleep_ms(20);
    return have;
}

bool it_file_contains(const char *path, const char *needle)
{
    char *buf = it_file_read(NULL, path);
    bool found = buf != NULL && strstr(buf, needle) != NULL;
    free(buf);
    return found;
}

size_t it_file_read_lines(char ***lines, const char *path)
{
    size_t len = 0, n = 0, cap = 0;
    char *buf = it_file_read(&len, path);
    *lines = NULL;
    if (buf == NULL)
        return 0;
    char *start = buf;
    for (char *nl; (nl = memchr(start, '\n', len - (size_t)(start - buf))) != NULL;
         start = nl + 1) {
        if (n == cap) {
            size_t ncap = cap == 0 ? 256 : cap * 2;
            char **bigger = realloc(*lines, ncap * sizeof(char *));
            if (bigger == NULL)
                break;
            *lines = bigger;
            cap = ncap;
        }
        (*lines)[n++] = strndup(start, (size_t)(nl - start));
    }
    free(buf);
    return n;
}

void it_lines_free(char **lines, size_t n)
{
    if (lines == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

bool it_field(char *out, size_t cap, const char *line, unsigned n)
{
    const char *p = line;
    for (unsigned i = 0; i < n; i++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return false;
        p++;
    }
    size_t len = strcspn(p, " ");
    if (len >= cap)
        return false;
    memcpy(out, p, len);
    out[len] = '\0';
    return true;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static bool is_log(const struct dirent *d)
{
    size_t len = strlen(d->d_name);
    return len > 4 &&
           (strcmp(d->d_name + len - 4, ".err") == 0 || strcmp(d->d_name + len - 4, ".out") == 0);
}

static int log_filter(const struct dirent *d)
{
    return is_log(d);
}

void it_dump_logs(const char *dir, size_t max_lines)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, log_filter, by_name);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        char **lines = NULL;
        size_t count = it_file_read_lines(&lines, path);
        if (count > 0) {
            fprintf(stderr, "---- %s (last %zu of %zu lines)\n", names[i]->d_name,
                    count < max_lines ? count : max_lines, count);
            for (size_t l = count > max_lines ? count - max_lines : 0; l < count; l++)
                fprintf(stderr, "%s\n", lines[l] != NULL ? lines[l] : "");
        }
        it_lines_free(lines, count);
        free(names[i]);
    }
    free(names);
}
