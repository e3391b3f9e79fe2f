/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: the defects issue 30 reproduced on the marker file of schema 5,
 * kept as regression tests of the store that replaced it. Each drives the
 * recorder through its API and a plain SQLite connection, as a neighbour
 * process or another tool would (two connections in one process are as
 * separate to SQLite's locks as two processes):
 *  1. a write that fails (SQLITE_FULL) leaves no answer "never marked" for
 *     ids another connection marks afterwards;
 *  2. a seed-SQL row with a NUL byte in its id or consumer is refused, and
 *     every call keeps working;
 *  3. a reader holding an old snapshot does not make commits wait for it:
 *     the WAL grows while it reads, and starts over once it is gone;
 *  4. owner tokens are not kept: ten thousand owners cost no memory;
 *  5. the library installs no signal handler, and a wait for a stopped
 *     neighbour ends at the busy timeout.
 * Item 6 (the transactional guard) is test_sqlite_txn.c's
 * test_guard_covers_every_object_of_the_file. */
#include <pthread.h>
#include <malloc.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

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

static ib_recorder *open_file(const char *name, const char *params)
{
    char uri[4300];
    ib_recorder *r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s/%s%s", dir, name, params);
    CHECK(ib_recorder_open(&r, uri, NULL, &err));
    return r;
}

static sqlite3 *raw_open(const char *name)
{
    char path[4200];
    sqlite3 *db = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
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

/* Keys `consumer`/rt_id(first..first+n) in caller-owned arrays. */
static void make_keys(ib_marker_key *keys, char (*ids)[IB_ID_BUF_SIZE], const char *consumer,
                      uint64_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rt_id(ids[i], first + i);
        keys[i] = (ib_marker_key){consumer, ids[i]};
    }
}

/* Claims and marks n new ids as the host does; IB_OK or the first error. */
static ib_status claim_and_mark(ib_recorder *r, const char *consumer, uint64_t first, size_t n,
                                const char *owner)
{
    char(*ids)[IB_ID_BUF_SIZE] = calloc(n, sizeof(*ids));
    ib_marker_key *keys = calloc(n, sizeof(*keys));
    ib_claim_info *info = calloc(n, sizeof(*info));
    bool *marked = calloc(n, sizeof(*marked));
    assert_true(ids != NULL && keys != NULL && info != NULL && marked != NULL);
    make_keys(keys, ids, consumer, first, n);
    ib_claim_request req = {.owner = owner, .lease_ms = 60000};
    ib_status st = ib__recorder_acquire_fp(r, info, keys, NULL, n, &req, &err);
    if (st == IB_OK)
        st = ib__recorder_mark_owned_fp(r, marked, keys, NULL, n, owner, &err);
    free(ids);
    free(keys);
    free(info);
    free(marked);
    return st;
}

/* --- 1. a failed write ------------------------------------------------------- */

static void test_failed_write_never_hides_a_mark(void **state)
{
    (void)state;
    enum { OLD = 3000, NEW = 400 };
    ib_recorder *a = open_file("full.db", "");
    ib_recorder *b = open_file("full.db", "");
    CHECK(claim_and_mark(a, "svc/p/h", 0, OLD, "A"));
    /* a's connection may not grow the file: its next large write fails as
     * on a full disk, after its statements have run */
    sqlite3 *adb = ib__sqlite_db(a);
    char sql[96];
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(adb, "PRAGMA page_count", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
    exec_on(adb, sql);
    assert_int_equal(claim_and_mark(a, "svc/p/h", 100000, 5000, "A"), IB_ERR_RECORDER);
    assert_non_null(strstr(err.msg, "full"));
    /* b marks new ids, then a (with room again) must see every one */
    CHECK(claim_and_mark(b, "svc/p/h", 200000, NEW, "B"));
    exec_on(adb, "PRAGMA max_page_count = 1073741823");
    char ids[NEW][IB_ID_BUF_SIZE];
    ib_marker_key keys[NEW];
    bool done[NEW];
    ib_claim_info info[NEW];
    make_keys(keys, ids, "svc/p/h", 200000, NEW);
    CHECK(ib_recorder_check_batch(a, done, keys, NEW, &err));
    ib_claim_request req = {.owner = "A", .lease_ms = 60000};
    CHECK(ib__recorder_acquire_fp(a, info, keys, NULL, NEW, &req, &err));
    for (size_t i = 0; i < NEW; i++) {
        if (!done[i] || info[i].state != IB_CLAIM_DONE)
            fail_msg("id %zu marked by b: a says processed=%d, claim state %d", i, done[i],
                     info[i].state);
    }
    /* and the failed write left nothing behind */
    make_keys(keys, ids, "svc/p/h", 100000, NEW);
    CHECK(ib_recorder_check_batch(b, done, keys, NEW, &err));
    for (size_t i = 0; i < NEW; i++)
        assert_false(done[i]);
    ib_recorder_close(a);
    ib_recorder_close(b);
}

/* --- 2. a seed-SQL row with a NUL byte ---------------------------------------- */

/* The seed's INSERT OR IGNORE, with the id and consumer bound as bytes. */
static int seed_insert(sqlite3 *db, const char *consumer, size_t clen, const char *id, size_t len)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db, "INSERT OR IGNORE INTO processed_log (consumer, event_id, ts) VALUES (?, ?, ?)", -1,
        &st, NULL);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_bind_text(st, 1, consumer, (int)clen, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, id, (int)len, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, 1700000000.5);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc;
}

static int count_one(void *ctx, const ib_marker_info *m)
{
    (void)m;
    (*(int *)ctx)++;
    return 0;
}

static void test_seed_row_with_nul_is_refused(void **state)
{
    (void)state;
    ib_recorder *r = open_file("nul.db", "");
    CHECK(claim_and_mark(r, "svc/p/h", 0, 10, "A"));
    sqlite3 *db = raw_open("nul.db");
    char id[IB_ID_BUF_SIZE + 8];
    rt_id(id, 500);
    memcpy(id + 32, "\0junk", 6); /* 32 hex digits, a NUL, more bytes */
    assert_int_equal(seed_insert(db, "svc/p/h", 7, id, 37), SQLITE_CONSTRAINT);
    assert_int_equal(seed_insert(db, "\0svc", 4, id, 32), SQLITE_CONSTRAINT);
    assert_int_equal(seed_insert(db, "svc/p/h", 7, "not-a-uuid", 10), SQLITE_CONSTRAINT);
    /* the seed's own well-formed row is taken, and seen by the recorder */
    assert_int_equal(seed_insert(db, "svc/p/h", 7, id, 32), SQLITE_DONE);
    id[32] = '\0';
    bool done = false;
    CHECK(ib_recorder_is_processed(r, &done, "svc/p/h", id, &err));
    assert_true(done);
    /* a tool that writes the table itself (not through processed_log) cannot
     * stall anyone either; its row is not counted */
    exec_on(db, "INSERT INTO processed_markers VALUES (1, CAST(X'6161610062' AS TEXT), 1, NULL)");
    sqlite3_close(db);
    CHECK(claim_and_mark(r, "svc/p/h", 1000, 10, "A"));
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.markers, 10 + 1 + 10);
    int listed = 0;
    CHECK(ib_recorder_list(r, NULL, 0, count_one, &listed, &err));
    assert_int_equal(listed, 22);
    ib_recorder_close(r);
}

/* --- 3. a reader on an old snapshot --------------------------------------------- */

static uint64_t fill_wal(ib_recorder *r, uint64_t *next, uint64_t until)
{
    while (ib__recorder_wal_bytes(r) < until) {
        CHECK(claim_and_mark(r, "svc/p/h", *next, 512, "A"));
        *next += 512;
    }
    return ib__recorder_wal_bytes(r);
}

/* The busy timeout is a minute: were any commit to wait it out for the
 * reader, the test would outlive its ctest timeout. */
static void test_open_reader_does_not_stall_commits(void **state)
{
    (void)state;
    ib_recorder *r = open_file("reader.db", "?synchronous=off&busy_timeout_ms=60000");
    sqlite3 *reader = raw_open("reader.db");
    uint64_t next = 0;
    CHECK(claim_and_mark(r, "svc/p/h", next, 20000, "A"));
    next += 20000;
    exec_on(reader, "BEGIN; SELECT count(*) FROM processed_log");
    uint64_t grown = fill_wal(r, &next, 80u << 20);
    uint64_t failed = ib__sqlite_restarts_failed(r);
    print_message("[ reader   ] WAL at %.1f MiB behind the reader, %llu restarts it kept from "
                  "ending\n",
                  (double)grown / (1 << 20), (unsigned long long)failed);
    assert_true(failed >= 1);
    exec_on(reader, "COMMIT");
    sqlite3_close(reader);
    /* the next restart ends, the WAL starts over and is cut back */
    struct timespec pause = {1, 100000000};
    nanosleep(&pause, NULL); /* a restart is tried at most once a second */
    for (int i = 0; i < 40 && ib__recorder_wal_bytes(r) > (20u << 20); i++) {
        CHECK(claim_and_mark(r, "svc/p/h", next, 512, "A"));
        next += 512;
    }
    uint64_t after = ib__recorder_wal_bytes(r);
    print_message("[ reader   ] after the reader left: WAL %.1f MiB\n", (double)after / (1 << 20));
    assert_true(after <= (20u << 20));
    ib_recorder_close(r);
}

/* Two writers on one file (two connections, as two processes have), each
 * claiming and marking batches without a pause. Each starts the WAL over
 * once it passed its bound, while it still holds the write turn: a
 * checkpoint after the turn was given back never lets the WAL start over
 * while the other writes, so the WAL grew to the RESTART bound (64 MiB)
 * with a checkpoint after every commit. */
typedef struct wal_writer {
    ib_recorder *r;
    uint64_t first;
    int rounds;
    uint64_t max_wal;
    ib_status st;
} wal_writer;

static void *wal_writer_main(void *arg)
{
    wal_writer *w = arg;
    enum { N = 512 };
    static _Thread_local char ids[N][IB_ID_BUF_SIZE];
    static _Thread_local ib_marker_key keys[N];
    static _Thread_local ib_claim_info info[N];
    static _Thread_local bool marked[N];
    ib_error e;
    ib_claim_request req = {.owner = "W", .lease_ms = 60000};
    for (int i = 0; i < w->rounds && w->st == IB_OK; i++) {
        make_keys(keys, ids, "svc/p/h", w->first + (uint64_t)i * N, N);
        w->st = ib__recorder_acquire_fp(w->r, info, keys, NULL, N, &req, &e);
        if (w->st == IB_OK)
            w->st = ib__recorder_mark_owned_fp(w->r, marked, keys, NULL, N, "W", &e);
        uint64_t wal = ib__recorder_wal_bytes(w->r);
        if (wal > w->max_wal)
            w->max_wal = wal;
    }
    return NULL;
}

static void test_busy_writers_start_the_wal_over(void **state)
{
    (void)state;
    wal_writer w[2] = {
        {.r = open_file("busy.db", "?synchronous=off"), .first = 0, .rounds = 120},
        {.r = open_file("busy.db", "?synchronous=off"), .first = 1000000, .rounds = 120},
    };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, wal_writer_main, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    uint64_t most = w[0].max_wal > w[1].max_wal ? w[0].max_wal : w[1].max_wal;
    print_message("[ writers  ] the WAL reached %.1f MiB with two busy writers\n",
                  (double)most / (1 << 20));
    for (int i = 0; i < 2; i++) {
        CHECK(w[i].st);
        ib_recorder_close(w[i].r);
    }
    assert_true(most <= (24u << 20));
}

/* --- 4. owner tokens ---------------------------------------------------------------- */

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks;
}

/* Ten thousand owners take and release one key, as ib_idempotent_call
 * with a fresh token per call and a failing handler does. */
static void test_owner_tokens_are_not_kept(void **state)
{
    (void)state;
    ib_recorder *r = open_file("owners.db", "?synchronous=off");
    char id[IB_ID_BUF_SIZE], owner[64];
    rt_id(id, 1);
    ib_marker_key key = {"svc/p/h", id};
    ib_claim_info info;
    size_t start = 0;
    for (int i = 0; i < 11000; i++) {
        if (i == 1000)
            start = heap_in_use();
        snprintf(owner, sizeof(owner), "host-%d-boot-token-%08x", i, (unsigned)i * 2654435761u);
        ib_claim_request req = {.owner = owner, .lease_ms = 60000};
        CHECK(ib__recorder_acquire_fp(r, &info, &key, NULL, 1, &req, &err));
        assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
        CHECK(ib_recorder_release(r, "svc/p/h", id, owner, &err));
    }
    size_t grown = heap_in_use() - start;
    print_message("[ owners   ] heap grew %zu bytes over 10000 owners (%.1f per owner)\n", grown,
                  (double)grown / 10000);
    assert_true(grown < 64 * 1024); /* not a byte per owner, let alone a token */
    assert_int_equal(info.attempts, 11000);
    ib_recorder_close(r);
}

/* --- 5. no signal handler; a stopped neighbour -------------------------------------- */

static void test_no_signal_handler_and_a_stopped_neighbour(void **state)
{
    (void)state;
    static struct sigaction before[65], after[65];
    int top = SIGRTMAX < 64 ? SIGRTMAX : 64;
    for (int sig = 1; sig <= top; sig++)
        sigaction(sig, NULL, &before[sig]);
    ib_recorder *r = open_file("stop.db", "?busy_timeout_ms=300");
    CHECK(claim_and_mark(r, "svc/p/h", 0, 10, "A"));
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        /* holds the write lock, then stops with it */
        sqlite3 *db = raw_open("stop.db");
        exec_on(db, "BEGIN IMMEDIATE");
        kill(getpid(), SIGSTOP);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, WUNTRACED), child);
    assert_true(WIFSTOPPED(status));
    /* every kind of call gives up at the busy timeout, still stopped */
    assert_int_equal(claim_and_mark(r, "svc/p/h", 100, 10, "A"), IB_ERR_BUSY);
    assert_non_null(strstr(err.msg, "gave up after"));
    assert_int_equal(ib_recorder_mark(r, "svc/p/h", "0123456789abcdef0123456789abcdef", &err),
                     IB_ERR_BUSY);
    assert_int_equal(waitpid(child, &status, WNOHANG), 0);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    /* its death freed the lock */
    CHECK(claim_and_mark(r, "svc/p/h", 100, 10, "A"));
    ib_recorder_close(r);
    for (int sig = 1; sig <= top; sig++) {
        sigaction(sig, NULL, &after[sig]);
        if (after[sig].sa_handler != before[sig].sa_handler ||
            after[sig].sa_flags != before[sig].sa_flags)
            fail_msg("signal %d: its disposition changed", sig);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_failed_write_never_hides_a_mark, setup, teardown),
    cmocka_unit_test_setup_teardown(test_seed_row_with_nul_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(test_open_reader_does_not_stall_commits, setup, teardown),
    cmocka_unit_test_setup_teardown(test_busy_writers_start_the_wal_over, setup, teardown),
    cmocka_unit_test_setup_teardown(test_owner_tokens_are_not_kept, setup, teardown),
    cmocka_unit_test_setup_teardown(test_no_signal_handler_and_a_stopped_neighbour, setup,
                                    teardown),
};

IB_TEST_MAIN(tests)
