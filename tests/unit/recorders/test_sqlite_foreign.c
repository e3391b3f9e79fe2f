/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: rows that other tools write (issue 44), driven through a plain
 * SQLite connection as such a tool would, beside the recorder:
 *  1. the seed's SELECT 1 and DELETE find an id by the spelling its INSERT
 *     wrote (upper or mixed case, dashes), and so do they after a seed file
 *     with such ids was migrated;
 *  2. prune walks markers whose key holds any value (a BLOB id, a long or
 *     odd id, a consumer that is no integer, a ts that is no number) once,
 *     in a bounded number of transactions, and removes exactly the rows its
 *     rule says: a row goes when its ts is a number before the cutoff.
 *  3. a prune asked to stop ends after the transaction in progress.
 * A prune that never ends fails its test after a deadline instead of
 * hanging the suite: it runs in a child process. */
#include <ctype.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

#define CONSUMER "svc/p/h"
#define SEED_INSERT "INSERT OR IGNORE INTO processed_log (consumer, event_id, ts) VALUES (?, ?, ?)"
#define SEED_SELECT "SELECT 1 FROM processed_log WHERE consumer = ? AND event_id = ?"
#define SEED_DELETE "DELETE FROM processed_log WHERE consumer = ? AND event_id = ?"

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

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static ib_recorder *open_file(const char *name)
{
    char uri[4300];
    ib_recorder *r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s/%s", dir, name);
    CHECK(ib_recorder_open(&r, uri, NULL, &err));
    return r;
}

static sqlite3 *raw_open(const char *name)
{
    char path[4200];
    sqlite3 *db = NULL;
    path_of(path, sizeof(path), name);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    return db;
}

static void exec_on(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

static long long query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* One of the seed's statements with (CONSUMER, id[, ts]): the rows a
 * SELECT returned, or the SQLite code of a statement that failed. */
static int seed_run(sqlite3 *db, const char *sql, const char *id)
{
    sqlite3_stmt *st = NULL;
    int rows = 0, rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_bind_text(st, 1, CONSUMER, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(st) == 3)
        sqlite3_bind_double(st, 3, (double)time(NULL));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        rows++;
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? rows : -rc;
}

/* The spellings of `id` (normalised) that the id rules accept besides it. */
enum { N_SPELLINGS = 4 };

static void spellings(char out[N_SPELLINGS][40], const char *id)
{
    char dashed[40];
    snprintf(dashed, sizeof(dashed), "%.8s-%.4s-%.4s-%.4s-%.12s", id, id + 8, id + 12, id + 16,
             id + 20);
    snprintf(out[0], 40, "%s", id);
    snprintf(out[1], 40, "%s", dashed);
    snprintf(out[2], 40, "%s", dashed);
    snprintf(out[3], 40, "%s", id);
    for (size_t i = 0; out[0][i] != '\0'; i++) {
        out[0][i] = (char)toupper((unsigned char)out[0][i]); /* upper case */
        if (i % 2 == 0)
            out[3][i] = (char)toupper((unsigned char)out[3][i]); /* mixed case */
    }
    for (size_t i = 0; out[2][i] != '\0'; i++)
        out[2][i] = (char)toupper((unsigned char)out[2][i]); /* dashed, upper case */
}

static bool marked(ib_recorder *r, const char *id)
{
    bool found = false;
    CHECK(ib_recorder_lookup(r, &found, NULL, CONSUMER, id, &err));
    return found;
}

/* --- 1. the seed's SQL and the spelling it wrote ----------------------------- */

static void test_seed_finds_and_deletes_its_spelling(void **state)
{
    (void)state;
    ib_recorder *r = open_file("spell.db");
    sqlite3 *db = raw_open("spell.db");
    for (uint64_t n = 0; n < 3; n++) {
        char id[IB_ID_BUF_SIZE], s[N_SPELLINGS][40];
        rt_id(id, n);
        spellings(s, id);
        for (size_t k = 0; k < N_SPELLINGS; k++) {
            assert_int_equal(seed_run(db, SEED_INSERT, s[k]), 0);
            if (seed_run(db, SEED_SELECT, s[k]) != 1)
                fail_msg("the seed's SELECT of %s, which its INSERT wrote, found %d rows", s[k],
                         seed_run(db, SEED_SELECT, s[k]));
            assert_true(marked(r, id));
            /* a repeated INSERT is harmless, and one key it stays */
            assert_int_equal(seed_run(db, SEED_INSERT, s[k]), 0);
            assert_int_equal(seed_run(db, SEED_SELECT, s[k]), 1);
            assert_int_equal(seed_run(db, SEED_DELETE, s[k]), 0);
            if (marked(r, id))
                fail_msg("the seed's DELETE of %s left the marker", s[k]);
            assert_int_equal(seed_run(db, SEED_SELECT, s[k]), 0);
        }
    }
    /* the normalised spelling works as before, and a DELETE by it ends a
     * key whatever spelling marked it */
    char id[IB_ID_BUF_SIZE], s[N_SPELLINGS][40];
    rt_id(id, 9);
    spellings(s, id);
    assert_int_equal(seed_run(db, SEED_INSERT, s[1]), 0);
    assert_int_equal(seed_run(db, SEED_SELECT, id), 1);
    assert_int_equal(seed_run(db, SEED_DELETE, id), 0);
    assert_false(marked(r, id));
    assert_int_equal(seed_run(db, SEED_SELECT, s[1]), 0);
    /* a marker of ours, then the seed's spelling: still one marker */
    CHECK(ib_recorder_mark(r, CONSUMER, id, &err));
    assert_int_equal(seed_run(db, SEED_INSERT, s[0]), 0);
    assert_int_equal(seed_run(db, SEED_SELECT, s[0]), 1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_markers"), 1);
    sqlite3_close(db);
    ib_recorder_close(r);
}

static void test_seed_finds_its_spelling_after_a_migration(void **state)
{
    (void)state;
    sqlite3 *db = raw_open("old.db");
    exec_on(db, "CREATE TABLE IF NOT EXISTS processed_log (consumer TEXT NOT NULL, "
                "event_id TEXT NOT NULL, ts REAL NOT NULL, PRIMARY KEY (consumer, event_id))");
    char ids[5][IB_ID_BUF_SIZE], s[5][N_SPELLINGS][40];
    for (size_t n = 0; n < 5; n++) {
        rt_id(ids[n], 100 + n);
        spellings(s[n], ids[n]);
        for (size_t k = 0; k < N_SPELLINGS; k++)
            assert_int_equal(seed_run(db, SEED_INSERT, s[n][k]), 0);
    }
    sqlite3_close(db);
    ib_recorder *r = open_file("old.db"); /* migrates it */
    db = raw_open("old.db");
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_markers"), 5);
    for (size_t n = 0; n < 5; n++) {
        assert_true(marked(r, ids[n]));
        for (size_t k = 0; k < N_SPELLINGS; k++)
            if (seed_run(db, SEED_SELECT, s[n][k]) != 1)
                fail_msg("the seed's mark of %s is lost after the migration", s[n][k]);
    }
    assert_int_equal(seed_run(db, SEED_DELETE, s[0][1]), 0);
    assert_false(marked(r, ids[0]));
    sqlite3_close(db);
    ib_recorder_close(r);
}

/* --- 2. prune and rows of any value ------------------------------------------- */

/* What a prune in a child reported: -1 when it did not end in time. */
typedef struct prune_report {
    int64_t removed;
    int64_t transactions;
    int status;
} prune_report;

/* Prunes markers older than `cutoff` in a child process that opens
 * `name` with `batch` rows per transaction, waiting at most `seconds`. */
static prune_report prune_in_child(const char *name, unsigned batch, int64_t cutoff, int seconds)
{
    int fd[2];
    prune_report rep = {.status = -1};
    assert_int_equal(pipe(fd), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(fd[0]);
        ib_recorder *r = open_file(name);
        uint64_t removed = 0;
        ib__sqlite_set_prune_batch(r, batch);
        prune_report out = {.status = (int)ib_recorder_prune(r, &removed, cutoff, &err)};
        if (out.status != IB_OK)
            fprintf(stderr, "prune of %s: %s\n", name, err.msg);
        out.removed = (int64_t)removed;
        out.transactions = (int64_t)ib__sqlite_prune_transactions(r);
        ib_recorder_close(r);
        _exit(write(fd[1], &out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 1);
    }
    close(fd[1]);
    int status = 0;
    for (int waited = 0; waited < seconds * 10; waited++) {
        if (waitpid(child, &status, WNOHANG) == child) {
            if (read(fd[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
                rep.status = -2;
            close(fd[0]);
            return rep;
        }
        struct timespec tick = {0, 100000000};
        nanosleep(&tick, NULL);
    }
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    close(fd[0]);
    return rep;
}

#define OLD_TS 1000000000000LL /* 2001: before any cutoff */
#define YOUNG_TS 4000000000000LL
#define CUTOFF 2000000000000LL

/* A file with `ours` markers of our own (old) and the rows `insert` (one
 * statement, run `n` times with ?1 = 0..n-1) writes straight into
 * processed_markers, as another tool would. */
static void fill(const char *name, int ours, const char *insert, int n)
{
    ib_recorder *r = open_file(name);
    sqlite3 *db = raw_open(name);
    for (int i = 0; i < ours; i++) {
        char id[IB_ID_BUF_SIZE];
        rt_id(id, (uint64_t)i);
        CHECK(ib_recorder_mark(r, CONSUMER, id, &err));
    }
    char sql[128];
    snprintf(sql, sizeof(sql), "UPDATE processed_markers SET ts = %lld", OLD_TS);
    exec_on(db, sql);
    sqlite3_stmt *st = NULL;
    exec_on(db, "BEGIN");
    assert_int_equal(sqlite3_prepare_v2(db, insert, -1, &st, NULL), SQLITE_OK);
    for (int i = 0; i < n; i++) {
        sqlite3_bind_int(st, 1, i);
        if (sqlite3_step(st) != SQLITE_DONE)
            fail_msg("%s with %d: %s", insert, i, sqlite3_errmsg(db));
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    exec_on(db, "COMMIT");
    sqlite3_close(db);
    ib_recorder_close(r);
}

/* Prunes `name` in batches of `batch` rows, checks it ended within a bound
 * of transactions, and returns the rows left. */
static long long prune_checked(const char *name, unsigned batch, long long rows)
{
    prune_report rep = prune_in_child(name, batch, CUTOFF, 15);
    if (rep.status == -1)
        fail_msg("prune of %s did not end within 15 s", name);
    assert_int_equal(rep.status, IB_OK);
    /* every range holds `batch` keys; then the last range, the claims and
     * the spellings */
    long long bound = rows / batch + 4;
    if (rep.transactions > bound)
        fail_msg("prune of %lld rows took %lld transactions, over %lld", rows,
                 (long long)rep.transactions, bound);
    sqlite3 *db = raw_open(name);
    long long left = query_int(db, "SELECT count(*) FROM processed_markers");
    assert_int_equal(left + rep.removed, rows);
    sqlite3_close(db);
    return left;
}

static void test_prune_walks_blob_ids(void **state)
{
    (void)state;
    /* 2,100 BLOB ids: 2,000 old, 100 young; a NUL byte in some */
    fill("blob.db", 50,
         "INSERT INTO processed_markers (cid, event_id, ts) VALUES (1, "
         "CAST(CASE WHEN ?1 % 7 = 0 THEN char(0) || printf('%031x', ?1) "
         "ELSE printf('%032x', ?1) END AS BLOB), "
         "CASE WHEN ?1 < 2000 THEN 1000000000000 ELSE 4000000000000 END)",
         2100);
    assert_int_equal(prune_checked("blob.db", 2000, 2150), 100);
    sqlite3 *db = raw_open("blob.db");
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_markers "
                                   "WHERE typeof(event_id) = 'blob' AND ts > 2000000000000"),
                     100);
    sqlite3_close(db);
}

static void test_prune_walks_keys_of_any_value(void **state)
{
    (void)state;
    /* ids longer than a buffer for one, all alike in their first 200 bytes */
    fill("long.db", 0,
         "INSERT INTO processed_markers (cid, event_id, ts) "
         "VALUES (1, printf('%0200d%05d', 0, ?1), 1000000000000)",
         2100);
    assert_int_equal(prune_checked("long.db", 500, 2100), 0);
    /* one id, consumers that are no integers: text, real, blob */
    fill("cid.db", 0,
         "INSERT INTO processed_markers (cid, event_id, ts) VALUES (CASE ?1 % 3 "
         "WHEN 0 THEN printf('c%05d', ?1) WHEN 1 THEN ?1 + 0.5 ELSE CAST(printf('%05d', ?1) "
         "AS BLOB) END, '0123456789abcdef0123456789abcdef', 1000000000000)",
         2100);
    assert_int_equal(prune_checked("cid.db", 500, 2100), 0);
    /* ids stored as numbers by a tool (TEXT affinity makes them text), and
     * a ts that is no number: those have no age and stay */
    fill("ts.db", 10,
         "INSERT INTO processed_markers (cid, event_id, ts) VALUES (?1 % 4 - 2, "
         "CASE WHEN ?1 % 2 = 0 THEN ?1 ELSE ?1 * 1.5 END, "
         "CASE ?1 % 3 WHEN 0 THEN 'soon' WHEN 1 THEN X'01' ELSE 1000000000000 END)",
         2100);
    assert_int_equal(prune_checked("ts.db", 500, 2110), 1400);
}

/* The seed's SELECT and DELETE reach both branches of the view by primary
 * keys: no statement of theirs scans a table (the DELETE then walks the
 * view rows it found, as every DELETE on a view does). */
static void test_seed_statements_use_the_keys(void **state)
{
    (void)state;
    ib_recorder *r = open_file("plan.db");
    sqlite3 *db = raw_open("plan.db");
    const char *stmts[] = {SEED_SELECT, SEED_DELETE};
    for (size_t i = 0; i < 2; i++) {
        char sql[256];
        sqlite3_stmt *st = NULL;
        snprintf(sql, sizeof(sql), "EXPLAIN QUERY PLAN %s", stmts[i]);
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *step = (const char *)sqlite3_column_text(st, 3);
            /* the DELETE walks the view's rows it found: those are no table */
            if (strncmp(step, "SCAN", 4) == 0 && strcmp(step, "SCAN processed_log") != 0)
                fail_msg("%s: %s", stmts[i], step);
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    ib_recorder_close(r);
}

static bool stop_after(void *ctx)
{
    int *left = ctx;
    return (*left)-- <= 0;
}

/* A prune asked to stop ends after the transaction in progress, and a
 * later one finishes the walk. */
static void test_prune_stops_between_transactions(void **state)
{
    (void)state;
    fill("stop.db", 0,
         "INSERT INTO processed_markers (cid, event_id, ts) "
         "VALUES (1, CAST(printf('%032x', ?1) AS BLOB), 1000000000000)",
         2100);
    ib_recorder *r = open_file("stop.db");
    ib__sqlite_set_prune_batch(r, 100);
    uint64_t removed = 0;
    int left = 3;
    CHECK(ib__recorder_prune_until(r, &removed, CUTOFF, stop_after, &left, &err));
    assert_int_equal(ib__sqlite_prune_transactions(r), 3);
    assert_int_equal(removed, 300);
    CHECK(ib__recorder_prune_until(r, &removed, CUTOFF, NULL, NULL, &err));
    assert_int_equal(removed, 1800);
    ib_recorder_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_seed_finds_and_deletes_its_spelling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seed_finds_its_spelling_after_a_migration, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_seed_statements_use_the_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_walks_blob_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_walks_keys_of_any_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prune_stops_between_transactions, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
