/* SPDX-License-Identifier: Apache-2.0 */
/* What a local user of a worker's host can plant in the file system, and
 * what ibus does about it (issue 43), against real processes:
 *
 *   - the marker file in a directory anyone may write: they can move the
 *     file aside, and the next start handles every event again. Refused
 *     (exit 2) by ibus run and ibus markers, naming the directory and
 *     --allow-insecure-db; a sticky directory is accepted, as for plugins;
 *   - a symbolic link at a path ibus writes (--summary-file, the audit
 *     example's file=, ibus publish --ids-file): refused, and the file it
 *     names is left as it was. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ib_test.h"
#include "it_support.h"
#include <infinity_bus/recorder.h>

#define DURABLE "local"
#define KEPT "kept: not ibus's to write\n"
#define NO_LINK "refusing to follow a symbolic link"
#define MARKED_ID "0f8fad5bd9cb469fa16570867728950e"

/* `ibus run` with text logs, the audit plugin writing <dir>/audit.log and
 * the marker file `uri`; the test adds its own flags. */
static void argv_run(it_argv *a, it_env *e, const char *uri)
{
    char path[PATH_MAX];
    it_argv_init(a);
    it_argv_addl(a, it_ibus(), "run", NULL);
    it_argv_connect(a, &e->server);
    it_argv_addl(a, "--create", "--stream", IT_STREAM, "--stream-subjects", IT_SUBJECTS,
                 "--durable", DURABLE, "--log-format", "text", "--recorder", uri, NULL);
    it_argv_plugin(a, "audit", NULL);
    it_argv_addf(a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
}

/* `ibus markers --recorder uri [--allow-insecure-db] ACTION...`: its exit
 * code, its stderr in *err. */
static int markers(char **err, it_env *e, const char *uri, bool allow, const char *action,
                   const char *id)
{
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", "--recorder", uri, NULL);
    if (allow)
        it_argv_add(&a, "--allow-insecure-db");
    if (id != NULL)
        it_argv_addl(&a, "--consumer", "local/audit/audit", action, id, NULL);
    else
        it_argv_add(&a, action);
    int st = it_run_capture(err, NULL, e, action, &a);
    it_argv_free(&a);
    return st;
}

/* The file ibus must leave alone, and a check that it did. */
static void make_target(char *path, it_env *e)
{
    assert_true(it_file_write(it_path(path, e, "target"), KEPT, strlen(KEPT)));
}

static void assert_target_kept(const char *path)
{
    char *text = it_file_read(NULL, path);
    assert_non_null(text);
    assert_string_equal(text, KEPT);
    free(text);
}

/* Item 3: a marker file in a 0777 directory. A local user moved it aside
 * and the same ids were handled twice; now nothing opens it there. */
static void marker_file_in_a_shared_directory_is_refused(void **state)
{
    it_env *e = *state;
    char dir[PATH_MAX], db[PATH_MAX + 16], uri[PATH_MAX + 32], want[3 * PATH_MAX + 256], *err;
    it_path(dir, e, "shared");
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    snprintf(db, sizeof(db), "%s/markers.db", dir);
    snprintf(uri, sizeof(uri), "sqlite:%s", db);
    snprintf(want, sizeof(want),
             "recorder %s: directory %s is writable by group or others without the sticky bit "
             "(mode 0777); fix with chown/chmod or pass --allow-insecure-db",
             uri, dir);

    it_argv a;
    argv_run(&a, e, uri);
    assert_int_equal(it_run_capture(&err, NULL, e, "run", &a), 2);
    it_assert_contains(err, want);
    free(err);
    assert_int_equal(access(db, F_OK), -1); /* nothing created */

    /* A file made there anyway (by the library, told it may) is refused
     * too, by --check and by every markers action. */
    ib_recorder *r = NULL;
    ib_recorder_options o = {.size = sizeof(o), .sqlite_allow_insecure = true};
    assert_int_equal(ib_recorder_open(&r, uri, &o, NULL), IB_OK);
    assert_int_equal(ib_recorder_mark(r, "local/audit/audit", MARKED_ID, NULL), IB_OK);
    ib_recorder_close(r);
    it_argv_add(&a, "--check");
    assert_int_equal(it_run_capture(&err, NULL, e, "check", &a), 2);
    it_assert_contains(err, want);
    free(err);
    static const char *const actions[] = {"stats", "list", "lookup", "forget"};
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
        const char *id = strcmp(actions[i], "stats") == 0 ? NULL : MARKED_ID;
        assert_int_equal(markers(&err, e, uri, false, actions[i], id), 2);
        it_assert_contains(err, want);
        free(err);
    }
    /* the escape, named in the message, opens it; the forget was refused */
    assert_int_equal(markers(&err, e, uri, true, "lookup", MARKED_ID), 0);
    free(err);

    /* Sticky (as /tmp is): others may not move our file. Accepted. */
    assert_int_equal(chmod(dir, 01777), 0);
    assert_int_equal(markers(&err, e, uri, false, "lookup", MARKED_ID), 0);
    free(err);
    assert_int_equal(it_run_capture(&err, NULL, e, "sticky", &a), 0);
    free(err);
    it_argv_free(&a);
    it_done(e);
}

/* Item 4: a link planted at --summary-file before the start is refused
 * at once (exit 2); one planted while the host runs is not followed at
 * exit, and the host says so. The file it names is never written. */
static void summary_file_link_is_not_followed(void **state)
{
    it_env *e = *state;
    char target[PATH_MAX], summary[PATH_MAX], want[2 * PATH_MAX], *err;
    make_target(target, e);
    it_path(summary, e, "summary.jsonl");
    assert_int_equal(symlink(target, summary), 0);

    it_argv a;
    it_argv_run(&a, e, DURABLE);
    it_argv_plugin(&a, "audit", NULL);
    char audit[PATH_MAX];
    it_argv_addf(&a, "--plugin-config=audit=file=%s", it_path(audit, e, "audit.log"));
    assert_int_equal(it_run_capture(&err, NULL, e, "planted", &a), 2);
    snprintf(want, sizeof(want), "summary file %s: " NO_LINK, summary);
    it_assert_contains(err, want);
    free(err);
    assert_target_kept(target);

    assert_int_equal(unlink(summary), 0);
    it_proc p;
    assert_true(it_spawn(&p, e, "running", &a));
    assert_true(it_wait_consumer(&e->server, IT_STREAM, DURABLE, it_timeout(15000)));
    assert_int_equal(symlink(target, summary), 0);
    assert_int_equal(it_proc_stop(&p, SIGTERM, it_timeout(10000)), 0);
    assert_target_kept(target);
    assert_true(it_file_contains(p.err_path, "\"msg\":\"cannot open the summary file\""));
    assert_true(it_file_contains(p.err_path, "\"error\":\"" NO_LINK "\""));
    it_argv_free(&a);
    it_done(e);
}

/* Item 4: the audit example's file= (and flaky's, the same code). */
static void audit_file_link_is_not_followed(void **state)
{
    it_env *e = *state;
    char target[PATH_MAX], log[PATH_MAX], db[PATH_MAX], uri[PATH_MAX + 8], want[2 * PATH_MAX];
    char *err;
    make_target(target, e);
    it_path(log, e, "audit.log");
    assert_int_equal(symlink(target, log), 0);
    snprintf(uri, sizeof(uri), "sqlite:%s", it_path(db, e, "markers.db"));
    snprintf(want, sizeof(want), "init failed: cannot open %s: " NO_LINK, log);

    it_argv a;
    argv_run(&a, e, uri);
    assert_int_equal(it_run_capture(&err, NULL, e, "run", &a), 2);
    it_assert_contains(err, want);
    free(err);
    it_argv_add(&a, "--check");
    assert_int_equal(it_run_capture(&err, NULL, e, "check", &a), 2);
    it_assert_contains(err, want);
    free(err);
    it_argv_free(&a);
    assert_target_kept(target);
    it_done(e);
}

/* Item 4: ibus publish --ids-file. */
static void ids_file_link_is_not_followed(void **state)
{
    it_env *e = *state;
    char target[PATH_MAX], ids[PATH_MAX], want[2 * PATH_MAX], *err;
    make_target(target, e);
    it_path(ids, e, "ids.txt");
    assert_int_equal(symlink(target, ids), 0);

    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "publish", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_addl(&a, "--type", "order.created", "--count", "3", "--ids-file", ids, NULL);
    assert_int_not_equal(it_run_capture(&err, NULL, e, "publish", &a), 0);
    snprintf(want, sizeof(want), "ibus publish: --ids-file: cannot write %s: " NO_LINK, ids);
    it_assert_contains(err, want);
    free(err);
    it_argv_free(&a);
    assert_target_kept(target);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(marker_file_in_a_shared_directory_is_refused, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(summary_file_link_is_not_followed, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(audit_file_link_is_not_followed, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(ids_file_link_is_not_followed, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
