/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: the write turn (sqlite_turn.c), with real processes on one file:
 *  1. a process killed while it holds the turn does not block the others:
 *     the next writer takes it (EOWNERDEAD) and its call succeeds, where
 *     without the robust mutex it would wait out its busy timeout;
 *  2. a turn held by a live, stopped process bounds a writer's wait by its
 *     busy timeout: the call fails as BUSY would, it does not hang;
 *  3. a tool that knows nothing of the turn (a plain SQLite connection in
 *     BEGIN IMMEDIATE) still holds writers off, and they go on once it
 *     commits;
 *  4. the turn file gets the marker file's mode and is refused, like the
 *     -wal and -shm files, when others can write it. */
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

static ib_error err;
static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = rt_tempdir();
    return dir == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    rt_rmtree(dir);
    free(dir);
    return 0;
}

static ib_recorder *open_file(int busy_ms)
{
    char uri[4300];
    ib_recorder *r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s/m.db?busy_timeout_ms=%d", dir, busy_ms);
    CHECK(ib_recorder_open(&r, uri, NULL, &err));
    return r;
}

/* A child that opens the file, takes the turn, tells the parent through
 * `ready` and then waits to be killed or stopped. */
static pid_t child_holding_turn(void)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        ib_recorder *r = open_file(1000);
        sq_recorder *s = (sq_recorder *)r;
        if (s->turn == NULL)
            _exit(3);
        ib__sq_call_begin(s);
        if (ib__sq_turn_take(s) != SQLITE_OK || !s->turn_held)
            _exit(4);
        char c = 'y';
        if (write(fds[1], &c, 1) != 1)
            _exit(5);
        for (;;)
            pause();
    }
    close(fds[1]);
    char c = 0;
    assert_int_equal(read(fds[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    close(fds[0]);
    return pid;
}

static void mark_one(ib_recorder *r, unsigned n, ib_status want)
{
    char id[IB_ID_BUF_SIZE];
    rt_id(id, n);
    ib_error e = {0};
    assert_int_equal(ib_recorder_mark(r, "c", id, &e), want);
}

static void killed_holder_does_not_block(void **state)
{
    (void)state;
    ib_recorder *r = open_file(1000);
    mark_one(r, 1, IB_OK);
    pid_t pid = child_holding_turn();
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    /* the dead holder's turn is taken over, not waited out */
    mark_one(r, 2, IB_OK);
    mark_one(r, 3, IB_OK);
    ib_recorder_close(r);
}

static void stopped_holder_bounds_the_wait(void **state)
{
    (void)state;
    ib_recorder *r = open_file(300);
    pid_t pid = child_holding_turn();
    assert_int_equal(kill(pid, SIGSTOP), 0);
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 4);
    ib_error e = {0};
    assert_int_equal(ib_recorder_mark(r, "c", id, &e), IB_ERR_BUSY);
    assert_non_null(strstr(e.msg, "gave up after"));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    mark_one(r, 4, IB_OK);
    ib_recorder_close(r);
}

static void a_tool_without_the_turn_still_holds_writers_off(void **state)
{
    (void)state;
    ib_recorder *r = open_file(300);
    mark_one(r, 5, IB_OK);
    char path[4200];
    snprintf(path, sizeof(path), "%s/m.db", dir);
    sqlite3 *tool = NULL;
    assert_int_equal(sqlite3_open(path, &tool), SQLITE_OK);
    assert_int_equal(sqlite3_exec(tool, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 6);
    ib_error e = {0};
    assert_int_equal(ib_recorder_mark(r, "c", id, &e), IB_ERR_BUSY);
    assert_int_equal(sqlite3_exec(tool, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(tool);
    /* the turn was given back after the failed call */
    mark_one(r, 6, IB_OK);
    ib_recorder_close(r);
}

static void turn_file_mode_and_trust(void **state)
{
    (void)state;
    ib_recorder *r = open_file(1000);
    ib_recorder_close(r);
    char path[4200];
    struct stat st;
    snprintf(path, sizeof(path), "%s/m.db-turn", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(chmod(path, 0666), 0);
    char uri[4300];
    snprintf(uri, sizeof(uri), "sqlite:%s/m.db", dir);
    ib_recorder *again = NULL;
    ib_error e = {0};
    assert_int_equal(ib_recorder_open(&again, uri, NULL, &e), IB_ERR_CONFIG);
    assert_non_null(strstr(e.msg, "-turn file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(killed_holder_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(stopped_holder_bounds_the_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(a_tool_without_the_turn_still_holds_writers_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(turn_file_mode_and_trust, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
