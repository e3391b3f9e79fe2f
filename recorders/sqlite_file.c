/* SPDX-License-Identifier: Apache-2.0 */
/* Trust checks of the sqlite: recorder's marker file (sqlite_internal.h).
 *
 * The markers decide which handlers run: whoever may write the file can
 * make every process that shares it skip events or run them again. So the
 * file, and the -wal and -shm files SQLite keeps beside it, must belong to
 * the running user and be writable by nobody else. So must every directory
 * above it, as the plugin loader requires of a plugin's (owned by root or
 * the running user, not writable by group or others unless sticky, like
 * /tmp): whoever may write to one of them may move the file aside, and the
 * fresh file that takes its place knows no marker, so every event is
 * handled again. A symbolic link is never followed (SQLite opens the file
 * with SQLITE_OPEN_NOFOLLOW too), so a link planted where the file should
 * be cannot point the recorder at another file. The opt-out covers owner
 * and mode only, of the files and the directories alike, never links:
 * SQLite would refuse those anyway. */
#include "sqlite_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dir_trust.h"
#include "recorder_internal.h"

#define OPT_OUT "fix with chown/chmod or allow an insecure marker file"
#define NO_LINKS "name the real path (symbolic links are never followed)"

/* SQLite with SQLITE_OPEN_NOFOLLOW refuses a path with a symbolic link in
 * any directory of it, with no more than "unable to open database file":
 * name the link instead. A directory that cannot be looked at is left to
 * the open, whose message says why. */
static ib_status check_no_linked_dirs(const char *path, const char *name, ib_error *err)
{
    char dir[IB__RECORDER_PATH_MAX];
    size_t len = strlen(path);
    struct stat st;

    if (len >= sizeof(dir))
        return ib_error_set(err, IB_ERR_CONFIG, "recorder %s: path too long", name);
    memcpy(dir, path, len + 1);
    for (size_t i = 1; i < len; i++) {
        if (dir[i] != '/')
            continue;
        dir[i] = '\0';
        if (lstat(dir, &st) != 0)
            return IB_OK;
        if (S_ISLNK(st.st_mode))
            return ib_error_set(err, IB_ERR_CONFIG, "recorder %s: %s is a symbolic link; " NO_LINKS,
                                name, dir);
        dir[i] = '/';
    }
    return IB_OK;
}

/* Every directory from the file's own up to "/", nearest first, by the
 * rule plugins are held to (core/dir_trust.h), resolved from the working
 * directory for a relative path. Links in `path` were refused before; a
 * directory that does not resolve is left to the open, whose message says
 * why. */
static ib_status check_dirs(const char *path, const char *name, uid_t self_uid, ib_error *err)
{
    char dir[PATH_MAX], file[PATH_MAX + 2];
    const char *slash = strrchr(path, '/');
    struct stat st;

    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    char *real = realpath(dir, NULL);
    if (real == NULL)
        return errno == ENOMEM ? ib_error_set(err, IB_ERR_NOMEM, "recorder %s: out of memory", name)
                               : IB_OK;
    /* the walk starts at the directory holding `file` */
    snprintf(file, sizeof(file), "%s/f", strcmp(real, "/") == 0 ? "" : real);
    free(real);
    switch (ib_dir_trust_walk(file, self_uid, dir, sizeof(dir), &st)) {
    case IB_DIR_TRUSTED:
        return IB_OK;
    case IB_DIR_FOREIGN_OWNER:
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder %s: directory %s is owned by uid %u, not by root or the "
                            "running user (uid %u); " OPT_OUT,
                            name, dir, (unsigned)st.st_uid, (unsigned)self_uid);
    case IB_DIR_SHARED_WRITE:
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder %s: directory %s is writable by group or others without "
                            "the sticky bit (mode %04o); " OPT_OUT,
                            name, dir, (unsigned)(st.st_mode & 07777));
    default:
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot inspect directory %s: %s", name,
                            dir, strerror(errno));
    }
}

/* One existing file: `what` names it in messages ("file", "-wal file").
 * `*exists` says whether there was one. */
static ib_status check_one(bool *exists, const char *file, const char *what, const char *name,
                           bool allow_insecure, uid_t self_uid, ib_error *err)
{
    struct stat st;

    *exists = false;
    if (lstat(file, &st) != 0) {
        if (errno == ENOENT)
            return IB_OK;
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot inspect the %s: %s", name, what,
                            strerror(errno));
    }
    *exists = true;
    if (S_ISLNK(st.st_mode))
        return ib_error_set(err, IB_ERR_CONFIG, "recorder %s: %s is a symbolic link; " NO_LINKS,
                            name, what);
    if (!S_ISREG(st.st_mode))
        return ib_error_set(err, IB_ERR_CONFIG, "recorder %s: %s is not a regular file", name,
                            what);
    if (allow_insecure)
        return IB_OK;
    if (st.st_uid != self_uid)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder %s: %s is owned by uid %u, not by the running user (uid "
                            "%u); " OPT_OUT,
                            name, what, (unsigned)st.st_uid, (unsigned)self_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "recorder %s: %s is writable by group or others (mode %04o); " OPT_OUT,
                            name, what, (unsigned)(st.st_mode & 07777));
    return IB_OK;
}

ib_status ib__sqlite_check_file(const char *path, const char *name, unsigned new_mode,
                                bool allow_insecure, uid_t self_uid, ib_error *err)
{
    static const char *const sides[] = {"-wal", "-shm", "-turn"};
    char side[IB__RECORDER_PATH_MAX + 8];
    bool exists, main_exists = false;
    ib_status st = check_no_linked_dirs(path, name, err);

    if (st == IB_OK)
        st = check_one(&main_exists, path, "file", name, allow_insecure, self_uid, err);
    for (size_t i = 0; st == IB_OK && i < sizeof(sides) / sizeof(sides[0]); i++) {
        char what[16];
        snprintf(side, sizeof(side), "%s%s", path, sides[i]);
        snprintf(what, sizeof(what), "%s file", sides[i]);
        st = check_one(&exists, side, what, name, allow_insecure, self_uid, err);
    }
    if (st == IB_OK && !allow_insecure)
        st = check_dirs(path, name, self_uid, err);
    /* A file created now gets `new_mode`: refuse it here rather than at the
     * next start, and before anything is created. */
    if (st == IB_OK && !main_exists && !allow_insecure && (new_mode & (S_IWGRP | S_IWOTH)) != 0)
        st = ib_error_set(err, IB_ERR_CONFIG,
                          "recorder %s: mode %04o would make a new file writable by group or "
                          "others; use a mode without group or other write, or allow an insecure "
                          "marker file",
                          name, new_mode);
    return st;
}
