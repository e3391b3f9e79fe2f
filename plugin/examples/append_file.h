/* SPDX-License-Identifier: Apache-2.0 */
/* The file the audit and flaky examples append one line per handled event
 * to, and what --check may do with it. Header-only, shared by the two
 * examples, so each is still one .c file to build. */
#ifndef IB_EXAMPLE_APPEND_FILE_H
#define IB_EXAMPLE_APPEND_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Returned by example_append_open when checking: nothing is open. */
#define EXAMPLE_FILE_CHECKED (-2)

/* Opens `path` for appending, created 0600 when missing, and returns the
 * descriptor (the caller closes it), or -1 with the reason in `errbuf`.
 * A symbolic link at `path` is refused, never followed: one planted there
 * would have the host append to whatever file it names.
 * When `checking` (the host's IB_HOST_CHECKING) it creates nothing: an
 * existing file is opened without O_CREAT, to prove it can be written,
 * and closed again; a missing one needs a directory it could be created
 * in. Returns EXAMPLE_FILE_CHECKED then, or -1 with the reason. */
static inline int example_append_open(const char *path, int checking, char *errbuf, size_t errlen)
{
    int fd =
        open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (checking ? 0 : O_CREAT), 0600);
    if (fd >= 0 && !checking)
        return fd;
    if (fd >= 0) {
        close(fd);
        return EXAMPLE_FILE_CHECKED;
    }
    if (errno == ELOOP) {
        snprintf(errbuf, errlen, "cannot open %s: refusing to follow a symbolic link", path);
        return -1;
    }
    if (!checking || errno != ENOENT) {
        snprintf(errbuf, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof(dir), "%.*s",
             slash == NULL   ? 1
             : slash == path ? 1
                             : (int)(slash - path),
             slash == NULL ? "." : path);
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(errbuf, errlen, "cannot create %s: directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    return EXAMPLE_FILE_CHECKED;
}

#endif
