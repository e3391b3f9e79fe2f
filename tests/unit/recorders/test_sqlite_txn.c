/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: transactional work and the outbox. Work kept or rolled back with
 * its marker and its outbox rows, savepoints of the work's own, fencing,
 * hold_ms, what the authorizer refuses, a transaction the work ended, a
 * kill -9 inside and after the call, two processes over the same keys,
 * and the outbox reads. Real files in a scratch directory. */
#include <signal.h>
#include <sys/wait.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

static ib_error err;
static char *dir;

#define NKEYS 8
#define OWNER "A"

static char ids[NKEYS][IB_ID_BUF_SIZE];
static ib_marker_key keys[NKEYS];

static int setup(void **state)
{
    (void)state;
    dir = rt_tempdir();
    rt_clock_set(1700000000000LL);
    for (int i = 0; i < NKEYS; i++) {
        rt_id(ids[i], 9000 + (uint64_t)i);
        keys[i] = (ib_marker_key){"txn", ids[i]};
    }
    return dir == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    rt_rmtree(dir);
    free(dir);
    dir = NULL;
    return 0;
}

/* Opens the test's file (or ":memory:" when `file` is NULL) and makes the
 * work's own table. */
static ib_recorder *open_file(const char *file)
{
    char uri[4200];
    ib_recorder *r = NULL;
    if (file != NULL)
        snprintf(uri, sizeof(uri), "sqlite:%s/%s", dir, file);
    else
        snprintf(uri, sizeof(uri), "sqlite::memory:");
    ib_recorder_options o = {.size = sizeof(o), .now_ms = rt_clock};
    CHECK(ib_recorder_open(&r, uri, &o, &err));
    const char *ddl = "CREATE TABLE IF NOT EXISTS effects (event_id TEXT, who INTEGER);"
                      "CREATE TABLE IF NOT EXISTS counted (n INTEGER PRIMARY KEY AUTOINCREMENT, "
                      "v INTEGER)";
    assert_int_equal(sqlite3_exec(ib__sqlite_db(r), ddl, NULL, NULL, NULL), SQLITE_OK);
    return r;
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

static bool processed(ib_recorder *r, int i)
{
    bool p = false;
    CHECK(ib_recorder_is_processed(r, &p, keys[i].consumer, keys[i].event_id, &err));
    return p;
}

static uint64_t outbox_count(ib_recorder *r)
{
    uint64_t n = 0;
    CHECK(ib__recorder_outbox_count(r, &n, &err));
    return n;
}

/* --- work callbacks --------------------------------------------------------- */

typedef struct work_ctx {
    size_t base; /* keys[base] is the work's key 0 */
    unsigned calls;
    bool keep_even_only; /* keep keys 0, 2, ...; roll back the odd ones */
    int who;
    const char *extra_sql; /* run first, inside the work */
    int extra_rc;          /* what it returned */
} work_ctx;

static int exec_sql(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Writes an effect row for key i and stages one outbox message. */
static bool write_effect(work_ctx *w, size_t i, ib__txn *txn)
{
    sqlite3 *db = ib__txn_db(txn);
    i += w->base;
    char *sql = sqlite3_mprintf("INSERT INTO effects VALUES ('%s', %d)", ids[i], w->who);
    int rc = exec_sql(db, sql);
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
        return false;
    char subject[64];
    snprintf(subject, sizeof(subject), "out.%zu", i);
    return ib__txn_outbox_put(txn, subject, ids[i], "payload", 7, &err) == IB_OK;
}

static bool work_effect(void *ctx, size_t i, ib__txn *txn)
{
    work_ctx *w = ctx;
    w->calls++;
    if (w->extra_sql != NULL)
        w->extra_rc = exec_sql(ib__txn_db(txn), w->extra_sql);
    bool ok = write_effect(w, i, txn);
    return ok && (!w->keep_even_only || i % 2 == 0);
}

static ib__txn_result run_one(ib_recorder *r, int i, work_ctx *w)
{
    ib__txn_result out = (ib__txn_result)-1;
    size_t consumed = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 1000};
    w->base = (size_t)i;
    CHECK(ib__recorder_transact(r, &out, &consumed, &keys[i], 1, &req, work_effect, w, &err));
    assert_int_equal(consumed, 1);
    return out;
}

/* --- kept or rolled back -------------------------------------------------- */

static void test_keep_and_roll_back(void **state)
{
    (void)state;
    ib_recorder *r = open_file("keep.db");
    work_ctx w = {.keep_even_only = true};
    ib__txn_result out[4];
    size_t consumed = 0;
    uint64_t fps[4] = {11ull << 32, 12ull << 32, 13ull << 32, 14ull << 32};
    ib__txn_request req = {.owner = OWNER, .fingerprints = fps, .hold_ms = 60000};
    CHECK(ib__recorder_transact(r, out, &consumed, keys, 4, &req, work_effect, &w, &err));
    assert_int_equal(consumed, 4);
    assert_int_equal(w.calls, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(out[i], i % 2 == 0 ? IB__TXN_COMMITTED : IB__TXN_ROLLED_BACK);
        assert_int_equal(processed(r, i), i % 2 == 0);
    }
    sqlite3 *db = ib__sqlite_db(r);
    assert_int_equal(query_int(db, "SELECT count(*) FROM effects"), 2);
    assert_int_equal(outbox_count(r), 2);
    /* the markers hold their fingerprints (the top 32 bits), and are counted */
    assert_int_equal(query_int(db, "SELECT sum(fp) FROM processed_markers"), 11 + 13);
    ib_recorder_stats st;
    CHECK(ib_recorder_stats_get(r, &st, &err));
    assert_int_equal(st.markers, 2);
    ib_recorder_close(r);
}

static void test_own_savepoints_work(void **state)
{
    (void)state;
    ib_recorder *r = open_file("sp.db");
    work_ctx w = {.extra_sql = "SAVEPOINT mine; INSERT INTO counted (v) VALUES (1); "
                               "ROLLBACK TO mine; INSERT INTO counted (v) VALUES (2); "
                               "RELEASE mine; SAVEPOINT left_open; "
                               "INSERT INTO counted (v) VALUES (3)"};
    assert_int_equal(run_one(r, 0, &w), IB__TXN_COMMITTED);
    assert_int_equal(w.extra_rc, SQLITE_OK);
    sqlite3 *db = ib__sqlite_db(r);
    /* AUTOINCREMENT of the work's own table is not ours to refuse */
    assert_int_equal(query_int(db, "SELECT group_concat(v) = '2,3' FROM counted"), 1);
    assert_true(sqlite3_get_autocommit(db));
    ib_recorder_close(r);
}

static void test_lost_and_done_keys_do_not_run(void **state)
{
    (void)state;
    ib_recorder *r = open_file("fence.db");
    CHECK(ib_recorder_mark(r, keys[0].consumer, keys[0].event_id, &err));
    ib_claim_request by_b = {.owner = "B", .lease_ms = 60000};
    ib_claim_info info;
    CHECK(ib_recorder_acquire_batch(r, &info, &keys[1], 1, &by_b, &err));
    /* our own claim does not fence us out; the marker ends it */
    ib_claim_request by_a = {.owner = OWNER, .lease_ms = 60000};
    CHECK(ib_recorder_acquire_batch(r, &info, &keys[2], 1, &by_a, &err));
    work_ctx w = {0};
    ib__txn_result out[3];
    size_t consumed = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 60000};
    CHECK(ib__recorder_transact(r, out, &consumed, keys, 3, &req, work_effect, &w, &err));
    assert_int_equal(consumed, 3);
    assert_int_equal(out[0], IB__TXN_DONE);
    assert_int_equal(out[1], IB__TXN_LOST);
    assert_int_equal(out[2], IB__TXN_COMMITTED);
    assert_int_equal(w.calls, 1);
    assert_int_equal(query_int(ib__sqlite_db(r), "SELECT count(*) FROM processed_claims "
                                                 "WHERE owner = 'A'"),
                     0);
    /* B's lease ends (the injected clock is the lease clock too): the key
     * is ours to run */
    rt_clock_advance(60001);
    assert_int_equal(run_one(r, 1, &w), IB__TXN_COMMITTED);
    ib_recorder_close(r);
}

static void test_hold_ms_bounds_a_transaction(void **state)
{
    (void)state;
    ib_recorder *r = open_file("hold.db");
    work_ctx w = {0};
    ib__txn_result out[NKEYS];
    size_t consumed = 0, calls = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 0};
    for (size_t at = 0; at < 3; at += consumed, calls++) {
        w.base = at;
        CHECK(ib__recorder_transact(r, out + at, &consumed, keys + at, 3 - at, &req, work_effect,
                                    &w, &err));
        assert_int_equal(consumed, 1);
    }
    assert_int_equal(calls, 3);
    req.hold_ms = 600000;
    w.base = 3;
    CHECK(
        ib__recorder_transact(r, out, &consumed, keys + 3, NKEYS - 3, &req, work_effect, &w, &err));
    assert_int_equal(consumed, NKEYS - 3);
    assert_int_equal(w.calls, NKEYS);
    assert_int_equal(query_int(ib__sqlite_db(r), "SELECT count(*) FROM processed_log"), NKEYS);
    ib_recorder_close(r);
}

/* --- what work may not do --------------------------------------------------- */

static const char *const refused[] = {
    "COMMIT",
    "ROLLBACK",
    "BEGIN",
    "END",
    "RELEASE " IB__SQ_SAVEPOINT,
    "ROLLBACK TO " IB__SQ_SAVEPOINT,
    "SAVEPOINT " IB__SQ_SAVEPOINT,
    "INSERT INTO processed_markers (cid, event_id, ts) VALUES (1, 'y', 1)",
    "DELETE FROM processed_markers",
    "INSERT INTO processed_log (consumer, event_id, ts) VALUES ('x', "
    "'0123456789abcdef0123456789abcdef', 1)",
    "UPDATE processed_consumers SET markers = 0",
    "DROP VIEW processed_log",
    "DROP TRIGGER processed_log_insert",
    "UPDATE processed_claims SET owner = ''",
    "DELETE FROM processed_outbox",
    "UPDATE sqlite_sequence SET seq = 0",
    "CREATE INDEX sneaky ON processed_markers (ts)",
    "CREATE TRIGGER sneaky AFTER INSERT ON effects BEGIN DELETE FROM processed_markers; END",
    "CREATE TEMP TRIGGER sneaky AFTER INSERT ON main.processed_claims BEGIN SELECT 1; END",
    "ALTER TABLE processed_markers ADD COLUMN x",
    "DROP TABLE processed_claims",
    "ATTACH ':memory:' AS other",
    "PRAGMA user_version = 9",
    "PRAGMA journal_mode",
};

/* Prepared before the transaction, with no authorizer in place. */
static sqlite3_stmt *early;

static bool work_tries_refused(void *ctx, size_t i, ib__txn *txn)
{
    work_ctx *w = ctx;
    sqlite3 *db = ib__txn_db(txn);
    /* installing the authorizer expired it: it is checked again */
    assert_int_equal(sqlite3_step(early), SQLITE_AUTH);
    sqlite3_reset(early);
    assert_false(sqlite3_get_autocommit(db));
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        int rc = exec_sql(db, refused[k]);
        if (rc != SQLITE_AUTH || sqlite3_get_autocommit(db))
            fail_msg("\"%s\" gave %d (%s)", refused[k], rc, sqlite3_errmsg(db));
    }
    return work_effect(w, i, txn);
}

static void test_authorizer_refuses_and_transaction_survives(void **state)
{
    (void)state;
    ib_recorder *r = open_file("auth.db");
    assert_int_equal(
        sqlite3_prepare_v2(ib__sqlite_db(r), "DELETE FROM processed_markers", -1, &early, NULL),
        SQLITE_OK);
    work_ctx w = {0};
    ib__txn_result out[2];
    size_t consumed = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 60000};
    CHECK(ib__recorder_transact(r, out, &consumed, keys, 2, &req, work_tries_refused, &w, &err));
    assert_int_equal(out[0], IB__TXN_COMMITTED);
    assert_int_equal(out[1], IB__TXN_COMMITTED);
    assert_true(processed(r, 0) && processed(r, 1));
    sqlite3 *db = ib__sqlite_db(r);
    assert_int_equal(query_int(db, "SELECT count(*) FROM effects"), 2);
    /* outside work, the connection is the recorder's again */
    assert_int_equal(exec_sql(db, "PRAGMA user_version"), SQLITE_OK);
    sqlite3_finalize(early);
    ib_recorder_close(r);
}

/* The guard and the schema cannot drift apart (issue 30, item 6): every
 * table, view and trigger a fresh marker file holds, read from the file
 * itself, is refused to work, for every kind of write. */
typedef struct guard_ctx {
    char names[32][64];
    char types[32][16];
    size_t n;
    unsigned refused;
} guard_ctx;

static bool work_writes_every_object(void *ctx, size_t i, ib__txn *txn)
{
    guard_ctx *g = ctx;
    sqlite3 *db = ib__txn_db(txn);
    (void)i;
    for (size_t k = 0; k < g->n; k++) {
        const char *t = g->types[k], *name = g->names[k];
        char *sql[4] = {
            sqlite3_mprintf("DROP %s %s", t, name),
            strcmp(t, "trigger") == 0 ? NULL : sqlite3_mprintf("DELETE FROM %s", name),
            strcmp(t, "trigger") == 0 ? NULL
                                      : sqlite3_mprintf("INSERT INTO %s DEFAULT VALUES", name),
            strcmp(t, "table") == 0 ? sqlite3_mprintf("ALTER TABLE %s ADD COLUMN sneaky", name)
                                    : NULL,
        };
        for (int j = 0; j < 4; j++) {
            if (sql[j] == NULL)
                continue;
            int rc = exec_sql(db, sql[j]);
            /* SQLite refuses some writes to its own tables before asking */
            bool own = strncmp(name, "sqlite_", 7) == 0 && rc != SQLITE_OK;
            if ((rc != SQLITE_AUTH && !own) || sqlite3_get_autocommit(db))
                fail_msg("\"%s\" gave %d (%s)", sql[j], rc, sqlite3_errmsg(db));
            g->refused++;
            sqlite3_free(sql[j]);
        }
    }
    return true;
}

static void test_guard_covers_every_object_of_the_file(void **state)
{
    (void)state;
    char uri[4200];
    ib_recorder *r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s/guard.db", dir);
    CHECK(ib_recorder_open(&r, uri, NULL, &err));
    guard_ctx g = {0};
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(ib__sqlite_db(r),
                                        "SELECT name, type FROM sqlite_master WHERE type IN "
                                        "('table', 'view', 'trigger')",
                                        -1, &st, NULL),
                     SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW && g.n < 32) {
        snprintf(g.names[g.n], sizeof(g.names[0]), "%s", sqlite3_column_text(st, 0));
        snprintf(g.types[g.n], sizeof(g.types[0]), "%s", sqlite3_column_text(st, 1));
        g.n++;
    }
    sqlite3_finalize(st);
    assert_true(g.n >= 8); /* five tables, a view, two triggers */
    ib__txn_result out;
    size_t consumed = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 60000};
    CHECK(ib__recorder_transact(r, &out, &consumed, keys, 1, &req, work_writes_every_object, &g,
                                &err));
    assert_int_equal(out, IB__TXN_COMMITTED);
    print_message("[ guard    ] %zu objects, %u writes refused\n", g.n, g.refused);
    ib_recorder_close(r);
}

/* Work that takes the authorizer off and ends the transaction: every key
 * that ran (the one before it too) comes back ROLLED_BACK, and nothing of
 * them is in the file. */
static bool work_ends_transaction(void *ctx, size_t i, ib__txn *txn)
{
    work_ctx *w = ctx;
    bool ok = work_effect(w, i, txn);
    if (i == 1) {
        sqlite3_set_authorizer(ib__txn_db(txn), NULL, NULL);
        assert_int_equal(exec_sql(ib__txn_db(txn), "ROLLBACK"), SQLITE_OK);
    }
    return ok;
}

static void test_ended_transaction_rolls_every_key_back(void **state)
{
    (void)state;
    ib_recorder *r = open_file("gone.db");
    work_ctx w = {0};
    ib__txn_result out[3];
    size_t consumed = 9;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 60000};
    assert_int_equal(
        ib__recorder_transact(r, out, &consumed, keys, 3, &req, work_ends_transaction, &w, &err),
        IB_ERR_RECORDER);
    assert_non_null(strstr(err.msg, "ended the transaction"));
    assert_int_equal(consumed, 2);
    assert_int_equal(out[0], IB__TXN_ROLLED_BACK);
    assert_int_equal(out[1], IB__TXN_ROLLED_BACK);
    assert_int_equal(out[2], IB__TXN_NOT_RUN);
    assert_false(processed(r, 0) || processed(r, 1));
    sqlite3 *db = ib__sqlite_db(r);
    assert_int_equal(query_int(db, "SELECT count(*) FROM effects"), 0);
    assert_int_equal(outbox_count(r), 0);
    /* the recorder goes on */
    assert_int_equal(run_one(r, 2, &w), IB__TXN_COMMITTED);
    ib_recorder_close(r);
}

/* --- crashes ------------------------------------------------------------------ */

static int signal_fd = -1;

static bool work_then_hang(void *ctx, size_t i, ib__txn *txn)
{
    if (!write_effect(ctx, i, txn))
        _exit(3);
    if (write(signal_fd, "w", 1) != 1)
        _exit(4);
    pause();
    return true;
}

/* A child runs key 0 on `file` and signals: from inside the work when
 * `inside`, else after the call returned. The parent kills it then. */
static void crash_child(const char *file, bool inside)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        signal_fd = p[1];
        ib_recorder *r = NULL;
        char uri[4200];
        snprintf(uri, sizeof(uri), "sqlite:%s/%s", dir, file);
        if (ib_recorder_open(&r, uri, NULL, &err) != IB_OK)
            _exit(2);
        work_ctx w = {0};
        ib__txn_result out;
        size_t consumed = 0;
        ib__txn_request req = {.owner = OWNER, .hold_ms = 1000};
        if (ib__recorder_transact(r, &out, &consumed, keys, 1, &req,
                                  inside ? work_then_hang : work_effect, &w, &err) != IB_OK ||
            out != IB__TXN_COMMITTED)
            _exit(5);
        if (write(p[1], "d", 1) != 1)
            _exit(4);
        pause();
        _exit(0);
    }
    close(p[1]);
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, inside ? 'w' : 'd');
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(p[0]);
}

static void test_kill_inside_work_leaves_nothing(void **state)
{
    (void)state;
    ib_recorder_close(open_file("crash.db"));
    crash_child("crash.db", true);
    ib_recorder *r = open_file("crash.db");
    assert_false(processed(r, 0));
    assert_int_equal(query_int(ib__sqlite_db(r), "SELECT count(*) FROM effects"), 0);
    assert_int_equal(outbox_count(r), 0);
    ib_recorder_close(r);
}

static void test_kill_after_the_call_keeps_all_three(void **state)
{
    (void)state;
    ib_recorder_close(open_file("crash.db"));
    crash_child("crash.db", false);
    ib_recorder *r = open_file("crash.db");
    assert_true(processed(r, 0));
    assert_int_equal(query_int(ib__sqlite_db(r), "SELECT count(*) FROM effects"), 1);
    assert_int_equal(outbox_count(r), 1);
    ib_recorder_close(r);
}

/* --- two processes --------------------------------------------------------- */

/* Runs every key until each is decided, in transactions of a few keys. */
static void transact_all(ib_recorder *r, work_ctx *w)
{
    ib__txn_result out[NKEYS];
    ib__txn_request req = {.owner = w->who == 1 ? "P1" : "P2", .hold_ms = 2};
    size_t consumed = 0;
    for (size_t at = 0; at < NKEYS; at += consumed) {
        w->base = at;
        if (ib__recorder_transact(r, out + at, &consumed, keys + at, NKEYS - at, &req, work_effect,
                                  w, &err) != IB_OK)
            _exit(2);
    }
}

static void test_two_processes_keep_each_effect_once(void **state)
{
    (void)state;
    ib_recorder_close(open_file("two.db"));
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0) {
            ib_recorder *r = NULL;
            char uri[4200];
            snprintf(uri, sizeof(uri), "sqlite:%s/two.db", dir);
            if (ib_recorder_open(&r, uri, NULL, &err) != IB_OK)
                _exit(1);
            work_ctx w = {.who = k + 1};
            for (int round = 0; round < 20; round++)
                transact_all(r, &w);
            ib_recorder_close(r);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ib_recorder *r = open_file("two.db");
    sqlite3 *db = ib__sqlite_db(r);
    assert_int_equal(query_int(db, "SELECT count(*) FROM effects"), NKEYS);
    assert_int_equal(query_int(db, "SELECT count(DISTINCT event_id) FROM effects"), NKEYS);
    assert_int_equal(outbox_count(r), NKEYS);
    for (int i = 0; i < NKEYS; i++)
        assert_true(processed(r, i));
    ib_recorder_close(r);
}

/* --- the outbox ------------------------------------------------------------ */

static void test_outbox_reads(void **state)
{
    (void)state;
    ib_recorder *r = open_file("outbox.db");
    work_ctx w = {0};
    ib__txn_result out[4];
    size_t consumed = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 60000};
    CHECK(ib__recorder_transact(r, out, &consumed, keys, 4, &req, work_effect, &w, &err));
    assert_true(ib__recorder_wal_bytes(r) > 0);
    ib__outbox_entry *e = NULL;
    size_t n = 0;
    CHECK(ib__recorder_outbox_peek(r, &e, &n, 3, &err));
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        char subject[64];
        snprintf(subject, sizeof(subject), "out.%zu", i);
        assert_string_equal(e[i].subject, subject);
        assert_string_equal(e[i].msg_id, ids[i]);
        assert_int_equal(e[i].len, 7);
        assert_memory_equal(e[i].data, "payload", 7);
        assert_int_equal(e[i].staged_ms, 1700000000000LL);
        assert_true(i == 0 || e[i].seq > e[i - 1].seq);
    }
    int64_t seqs[3] = {e[0].seq, e[2].seq, 999999};
    ib__outbox_entries_free(e, n);
    CHECK(ib__recorder_outbox_delete(r, seqs, 3, &err));
    assert_int_equal(outbox_count(r), 2);
    CHECK(ib__recorder_outbox_peek(r, &e, &n, 10, &err));
    assert_int_equal(n, 2);
    assert_string_equal(e[0].msg_id, ids[1]);
    assert_string_equal(e[1].msg_id, ids[3]);
    int64_t rest[2] = {e[0].seq, e[1].seq};
    ib__outbox_entries_free(e, n);
    CHECK(ib__recorder_outbox_delete(r, rest, 2, &err));
    CHECK(ib__recorder_outbox_peek(r, &e, &n, 10, &err));
    assert_int_equal(n, 0);
    assert_null(e);
    ib_recorder_close(r);
}

static bool work_bad_outbox(void *ctx, size_t i, ib__txn *txn)
{
    (void)ctx;
    (void)i;
    assert_int_equal(ib__txn_outbox_put(txn, "", "id", "x", 1, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib__txn_outbox_put(txn, "s", "", "x", 1, &err), IB_ERR_INVALID_ARG);
    /* an empty message is fine */
    return ib__txn_outbox_put(txn, "s", "id", NULL, 0, &err) == IB_OK;
}

static void test_other_kinds_and_memory_files(void **state)
{
    (void)state;
    ib_recorder *r = open_file(NULL);
    assert_true(ib__recorder_has_transactions(r));
    assert_int_equal(ib__recorder_wal_bytes(r), 0);
    ib__txn_result out;
    size_t consumed = 0;
    ib__txn_request req = {.owner = OWNER, .hold_ms = 0};
    CHECK(ib__recorder_transact(r, &out, &consumed, keys, 1, &req, work_bad_outbox, NULL, &err));
    assert_int_equal(outbox_count(r), 1);
    ib_recorder_close(r);

    CHECK(ib_recorder_open(&r, "memory:", NULL, &err));
    assert_false(ib__recorder_has_transactions(r));
    assert_int_equal(
        ib__recorder_transact(r, &out, &consumed, keys, 1, &req, work_bad_outbox, NULL, &err),
        IB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "sqlite"));
    assert_int_equal(outbox_count(r), 0);
    assert_int_equal(ib__recorder_wal_bytes(r), 0);
    ib__outbox_entry *e = NULL;
    size_t n = 9;
    CHECK(ib__recorder_outbox_peek(r, &e, &n, 10, &err));
    assert_int_equal(n, 0);
    ib_recorder_close(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_keep_and_roll_back, setup, teardown),
    cmocka_unit_test_setup_teardown(test_own_savepoints_work, setup, teardown),
    cmocka_unit_test_setup_teardown(test_lost_and_done_keys_do_not_run, setup, teardown),
    cmocka_unit_test_setup_teardown(test_hold_ms_bounds_a_transaction, setup, teardown),
    cmocka_unit_test_setup_teardown(test_authorizer_refuses_and_transaction_survives, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_guard_covers_every_object_of_the_file, setup, teardown),
    cmocka_unit_test_setup_teardown(test_ended_transaction_rolls_every_key_back, setup, teardown),
    cmocka_unit_test_setup_teardown(test_kill_inside_work_leaves_nothing, setup, teardown),
    cmocka_unit_test_setup_teardown(test_kill_after_the_call_keeps_all_three, setup, teardown),
    cmocka_unit_test_setup_teardown(test_two_processes_keep_each_effect_once, setup, teardown),
    cmocka_unit_test_setup_teardown(test_outbox_reads, setup, teardown),
    cmocka_unit_test_setup_teardown(test_other_kinds_and_memory_files, setup, teardown),
};

IB_TEST_MAIN(tests)
