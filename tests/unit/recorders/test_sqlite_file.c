/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: trust of the marker file. Whoever may write the file decides
 * which handlers run, so an existing file (or its -wal/-shm) owned by
 * someone else or writable by group or others is refused unless
 * sqlite_allow_insecure (--allow-insecure-db), and a symbolic link is
 * refused always. So is a directory above the file that another user owns
 * or that group or others may write without the sticky bit, as a plugin's
 * (issue 43): whoever may write to it may move the file aside. Each
 * refusal with its exact message. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

#define OPT_OUT "fix with chown/chmod or allow an insecure marker file"
#define NO_LINKS "name the real path (symbolic links are never followed)"

static ib_error err;
static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = rt_tempdir();
    return dir == NULL ? -1 : 0;
}

/* The directories the tests below make inside `dir`, emptied and removed
 * by teardown even when a test failed half way. */
static const char *const subdirs[] = {"open", "sticky", "theirs", "shared", "own"};

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
        char sub[1024];
        snprintf(sub, sizeof(sub), "%s/%s", dir, subdirs[i]);
        rt_rmtree(sub);
    }
    rt_rmtree(dir);
    free(dir);
    dir = NULL;
    return 0;
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* An empty file is a valid new SQLite database. */
static void make_file(const char *name, mode_t mode)
{
    char path[4096];
    path_of(path, sizeof(path), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* Opens sqlite:<dir>/<name>[query]; returns the status, closes on success. */
static ib_status try_open(const char *name, const char *query, bool allow_insecure)
{
    char uri[4200];
    ib_recorder *r = NULL;
    ib_recorder_options o = {.size = sizeof(o), .sqlite_allow_insecure = allow_insecure};
    snprintf(uri, sizeof(uri), "sqlite:%s/%s%s", dir, name, query);
    ib_error_clear(&err);
    ib_status st = ib_recorder_open(&r, uri, &o, &err);
    if (st == IB_OK) {
        /* Usable, not only opened. */
        char id[IB_ID_BUF_SIZE];
        rt_id(id, 1);
        assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_OK);
        ib_recorder_close(r);
    } else {
        assert_null(r);
    }
    return st;
}

/* Expects the open of `name` to be refused with IB_ERR_CONFIG and
 * "recorder sqlite:<dir>/<name>: <reason>". */
static void expect_refusal(const char *name, const char *query, bool allow_insecure,
                           const char *reason)
{
    char expected[512];
    snprintf(expected, sizeof(expected), "recorder sqlite:%s/%s: %s", dir, name, reason);
    assert_int_equal(try_open(name, query, allow_insecure), IB_ERR_CONFIG);
    assert_int_equal(err.status, IB_ERR_CONFIG);
    assert_string_equal(err.msg, expected);
}

static void refuses_a_symlinked_file(void **state)
{
    char target[4096], link[4096];
    (void)state;
    make_file("real.db", 0600);
    path_of(target, sizeof(target), "real.db");
    path_of(link, sizeof(link), "link.db");
    assert_int_equal(symlink(target, link), 0);
    expect_refusal("link.db", "", false, "file is a symbolic link; " NO_LINKS);
    /* The opt-out is about owner and mode, never links. */
    expect_refusal("link.db", "", true, "file is a symbolic link; " NO_LINKS);
    /* Not even a dangling one, which SQLite would otherwise create. */
    assert_int_equal(unlink(link), 0);
    path_of(target, sizeof(target), "nowhere.db");
    assert_int_equal(symlink(target, link), 0);
    expect_refusal("link.db", "", false, "file is a symbolic link; " NO_LINKS);
    assert_int_equal(access(target, F_OK), -1);
}

static void refuses_a_symlinked_wal_file(void **state)
{
    char target[4096], link[4096];
    (void)state;
    make_file("m.db", 0600);
    make_file("elsewhere", 0600);
    path_of(target, sizeof(target), "elsewhere");
    path_of(link, sizeof(link), "m.db-wal");
    assert_int_equal(symlink(target, link), 0);
    expect_refusal("m.db", "", true, "-wal file is a symbolic link; " NO_LINKS);
}

/* SQLite's NOFOLLOW refuses a link anywhere in the path; the check names
 * the link instead of SQLite's "unable to open database file". */
static void refuses_a_symlinked_directory(void **state)
{
    char real[4096], link[4096], name[4200], shown[4300];
    (void)state;
    path_of(real, sizeof(real), "real");
    path_of(link, sizeof(link), "ln");
    assert_int_equal(mkdir(real, 0700), 0);
    assert_int_equal(symlink(real, link), 0);
    snprintf(shown, sizeof(shown), "%s is a symbolic link; " NO_LINKS, link);
    snprintf(name, sizeof(name), "ln/m.db");
    expect_refusal(name, "", true, shown);
    snprintf(name, sizeof(name), "%s/m.db", real);
    assert_int_equal(access(name, F_OK), -1);
    assert_int_equal(rmdir(real), 0);
}

static void refuses_a_world_writable_file(void **state)
{
    (void)state;
    make_file("w.db", 0666);
    expect_refusal("w.db", "", false, "file is writable by group or others (mode 0666); " OPT_OUT);
    assert_int_equal(try_open("w.db", "", true), IB_OK);
}

static void refuses_a_group_writable_shm_file(void **state)
{
    (void)state;
    make_file("s.db", 0600);
    make_file("s.db-shm", 0660);
    expect_refusal("s.db", "", false,
                   "-shm file is writable by group or others (mode 0660); " OPT_OUT);
    assert_int_equal(try_open("s.db", "", true), IB_OK);
}

/* Group read is a choice an operator may make (a reporting user); only
 * write is refused. */
static void accepts_a_group_readable_file(void **state)
{
    (void)state;
    make_file("r.db", 0640);
    assert_int_equal(try_open("r.db", "", false), IB_OK);
}

/* mode=0660 would create a file the next start refuses: refused now,
 * before anything is created. */
static void refuses_a_writable_mode_for_a_new_file(void **state)
{
    char path[4096];
    struct stat st;
    (void)state;
    path_of(path, sizeof(path), "n.db");
    expect_refusal("n.db", "?mode=0660", false,
                   "mode 0660 would make a new file writable by group or others; use a mode "
                   "without group or other write, or allow an insecure marker file");
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(try_open("n.db", "?mode=0660", true), IB_OK);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0660);
}

static void refuses_a_foreign_owned_file(void **state)
{
    char path[4096];
    (void)state;
    make_file("f.db", 0600);
    path_of(path, sizeof(path), "f.db");
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 4242, (gid_t)-1), 0);
        expect_refusal("f.db", "", false,
                       "file is owned by uid 4242, not by the running user (uid 0); " OPT_OUT);
        assert_int_equal(try_open("f.db", "", true), IB_OK);
    } else {
        /* Without root, judge the file for another running user. */
        char expected[8600], name[4200];
        uid_t me = geteuid();
        snprintf(name, sizeof(name), "sqlite:%s", path);
        snprintf(expected, sizeof(expected),
                 "recorder %s: file is owned by uid %u, not by the running user (uid %u); " OPT_OUT,
                 name, (unsigned)me, (unsigned)me + 1);
        assert_int_equal(ib__sqlite_check_file(path, name, 0600, false, me + 1, &err),
                         IB_ERR_CONFIG);
        assert_string_equal(err.msg, expected);
    }
}

/* The rule is "owned by the running user": a root-owned file is no
 * exception for anyone but root. */
static void refuses_a_root_owned_file_when_not_root(void **state)
{
    char path[4096], name[4200], expected[8600];
    struct stat st;
    (void)state;
    make_file("root.db", 0600);
    path_of(path, sizeof(path), "root.db");
    assert_int_equal(stat(path, &st), 0);
    if (st.st_uid != 0)
        skip(); /* a non-root run cannot make a root-owned file */
    snprintf(name, sizeof(name), "sqlite:%s", path);
    snprintf(expected, sizeof(expected),
             "recorder %s: file is owned by uid 0, not by the running user (uid 4242); " OPT_OUT,
             name);
    assert_int_equal(ib__sqlite_check_file(path, name, 0600, false, 4242, &err), IB_ERR_CONFIG);
    assert_string_equal(err.msg, expected);
    assert_int_equal(ib__sqlite_check_file(path, name, 0600, false, 0, &err), IB_OK);
}

/* Makes <dir>/<name> with exactly `mode` (the umask aside). */
static void make_dir(const char *name, mode_t mode)
{
    char path[4096];
    path_of(path, sizeof(path), name);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* Issue 43: a 0777 directory let a local user move the file aside, and the
 * next run handled the same ids again. Refused before anything is created;
 * the opt-out covers directories too. */
static void refuses_a_world_writable_directory(void **state)
{
    char path[4096], reason[4400];
    (void)state;
    make_dir("open", 0777);
    path_of(path, sizeof(path), "open");
    snprintf(reason, sizeof(reason),
             "directory %s is writable by group or others without the sticky bit (mode 0777); "
             "" OPT_OUT,
             path);
    expect_refusal("open/m.db", "", false, reason);
    path_of(path, sizeof(path), "open/m.db");
    assert_int_equal(access(path, F_OK), -1);
    path_of(path, sizeof(path), "open");
    assert_int_equal(chmod(path, 0770), 0);
    snprintf(reason, sizeof(reason),
             "directory %s is writable by group or others without the sticky bit (mode 0770); "
             "" OPT_OUT,
             path);
    expect_refusal("open/m.db", "", false, reason);
    assert_int_equal(try_open("open/m.db", "", true), IB_OK);
    /* an existing file in it is refused all the same */
    expect_refusal("open/m.db", "", false, reason);
}

/* Others may add entries to a sticky directory (/tmp), not rename or
 * delete ours: accepted, as for plugins. */
static void accepts_a_sticky_directory(void **state)
{
    (void)state;
    make_dir("sticky", 01777);
    assert_int_equal(try_open("sticky/m.db", "", false), IB_OK);
    assert_int_equal(try_open("sticky/m.db", "", false), IB_OK);
}

/* A relative path is judged by the directories it resolves to. */
static void judges_a_relative_path_where_it_leads(void **state)
{
    char cwd[4096], path[4096], reason[4400];
    ib_recorder *r = NULL;
    (void)state;
    make_dir("open", 0777);
    path_of(path, sizeof(path), "open");
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(path), 0);
    ib_error_clear(&err);
    ib_status st = ib_recorder_open(&r, "sqlite:m.db", NULL, &err);
    assert_int_equal(chdir(cwd), 0);
    snprintf(reason, sizeof(reason),
             "recorder sqlite:m.db: directory %s is writable by group or others without the "
             "sticky bit (mode 0777); " OPT_OUT,
             path);
    assert_int_equal(st, IB_ERR_CONFIG);
    assert_string_equal(err.msg, reason);
    assert_null(r);
}

/* A directory another user owns is theirs to rearrange: refused whatever
 * its mode. Root's directories (/, /var) are trusted, as for plugins. */
static void refuses_a_directory_another_user_owns(void **state)
{
    char path[4096], file[4200], name[4300], reason[8800];
    (void)state;
    if (geteuid() != 0) {
        /* Without root, judge our own directory for another running user. */
        uid_t me = geteuid();
        snprintf(file, sizeof(file), "%s/m.db", dir);
        snprintf(name, sizeof(name), "sqlite:%s", file);
        snprintf(reason, sizeof(reason),
                 "recorder %s: directory %s is owned by uid %u, not by root or the running user "
                 "(uid %u); " OPT_OUT,
                 name, dir, (unsigned)me, (unsigned)me + 1);
        assert_int_equal(ib__sqlite_check_file(file, name, 0600, false, me + 1, &err),
                         IB_ERR_CONFIG);
        assert_string_equal(err.msg, reason);
        return;
    }
    make_dir("theirs", 0755);
    path_of(path, sizeof(path), "theirs");
    assert_int_equal(chown(path, 65534, 65534), 0);
    snprintf(
        reason, sizeof(reason),
        "directory %s is owned by uid 65534, not by root or the running user (uid 0); " OPT_OUT,
        path);
    expect_refusal("theirs/m.db", "", false, reason);
    assert_int_equal(try_open("theirs/m.db", "", true), IB_OK);
}

/* In the child, as uid/gid 65534: a directory root made 0777 is refused,
 * one the user owns inside root's 0711 is accepted. Exit status: 0 when
 * both hold, else which step failed. */
static int as_nobody(void)
{
    char uri[4200];
    ib_recorder *r = NULL;
    ib_error e;

    if (setgid(65534) != 0 || setuid(65534) != 0 || geteuid() != 65534)
        return 10;
    snprintf(uri, sizeof(uri), "sqlite:%s/shared/m.db", dir);
    if (ib_recorder_open(&r, uri, NULL, &e) != IB_ERR_CONFIG)
        return 11;
    if (strstr(e.msg, "/shared is writable by group or others without the sticky bit (mode "
                      "0777)") == NULL)
        return 12;
    if (access(uri + strlen("sqlite:"), F_OK) == 0) /* nothing created */
        return 13;
    snprintf(uri, sizeof(uri), "sqlite:%s/own/m.db", dir);
    if (ib_recorder_open(&r, uri, NULL, &e) != IB_OK)
        return 14;
    ib_recorder_close(r);
    return 0;
}

/* The rules hold for whoever runs: another user (uid 65534, forked from a
 * root run) is refused the directory everyone may write, and trusts its
 * own directory under root's. Needs root to become that user. */
static void another_user_is_held_to_the_same_rules(void **state)
{
    char path[4096];
    int status;
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(chmod(dir, 0711), 0);
    make_dir("shared", 0777);
    make_dir("own", 0700);
    path_of(path, sizeof(path), "own");
    assert_int_equal(chown(path, 65534, 65534), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(as_nobody());
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void memory_database_is_exempt(void **state)
{
    ib_recorder *r = NULL;
    (void)state;
    assert_int_equal(ib_recorder_open(&r, "sqlite::memory:?mode=0666", NULL, &err), IB_OK);
    ib_recorder_close(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(refuses_a_symlinked_file, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_symlinked_wal_file, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_symlinked_directory, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_world_writable_file, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_group_writable_shm_file, setup, teardown),
    cmocka_unit_test_setup_teardown(accepts_a_group_readable_file, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_writable_mode_for_a_new_file, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_foreign_owned_file, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_root_owned_file_when_not_root, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_world_writable_directory, setup, teardown),
    cmocka_unit_test_setup_teardown(accepts_a_sticky_directory, setup, teardown),
    cmocka_unit_test_setup_teardown(judges_a_relative_path_where_it_leads, setup, teardown),
    cmocka_unit_test_setup_teardown(refuses_a_directory_another_user_owns, setup, teardown),
    cmocka_unit_test_setup_teardown(another_user_is_held_to_the_same_rules, setup, teardown),
    cmocka_unit_test_setup_teardown(memory_database_is_exempt, setup, teardown),
};

IB_TEST_MAIN(tests)
