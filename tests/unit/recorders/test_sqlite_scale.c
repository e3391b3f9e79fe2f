/* sqlite: nothing beside the hot path scales with the file (issue 21).
 *
 * A file is filled with 1,000,000 markers (straight into the B-tree and
 * its counts, as merges leave them), then opened the way a host opens it:
 *  - counting markers (ibus markers stats, the keeper's gauge) reads a
 *    bounded number of rows: SQLite's VM steps for the stats query are the
 *    same at a million markers as at a thousand;
 *  - the filter is built by the upkeep in read transactions of at most
 *    IB__SQ_FILTER_CHUNK keys, each printed and bounded, never in the
 *    write lock; until it is complete every answer is still right;
 *  - a second recorder that falls behind catches up on exactly the journal
 *    rows written since its last look;
 *  - a prune counts what it deleted, so stats stay exact.
 * Not under valgrind: filling the file is a few seconds of real work. */
#include <sqlite3.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

#define BIG 1000000
#define SMALL 1000

static ib_error err;
static char *dir;
static char path[4096];

#define CHECK(call)                                                                                \
    do {                                                                                           \
        ib_status st_ = (call);                                                                    \
        if (st_ != IB_OK)                                                                          \
            fail_msg("%s -> %s: %s", #call, ib_status_str(st_), err.msg);                          \
    } while (0)

static int setup(void **state)
{
    (void)state;
    dir = rt_tempdir();
    rt_clock_set(1700000000000LL);
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

static ib_recorder *open_file(const char *name)
{
    char uri[4200];
    ib_recorder *r = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    ib_recorder_options o = {.size = sizeof(o), .now_ms = rt_clock};
    CHECK(ib_recorder_open(&r, uri, &o, &err));
    return r;
}

static void exec_on(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

/* `n` markers of consumer "big" with random ids, as merges write them. */
static void fill(const char *name, long n)
{
    ib_recorder *r = open_file(name);
    ib_recorder_close(r);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %ld) "
             "INSERT INTO processed_markers (consumer, event_id, ts, fp) "
             "SELECT 'big', lower(hex(randomblob(16))), 1700000000000 + i, NULL FROM n "
             "ORDER BY 2; "
             "INSERT INTO processed_counts VALUES ('big', %ld, 1700000000001, %ld); COMMIT",
             n, n, 1700000000000L + n);
    exec_on(db, sql);
    sqlite3_close(db);
}

/* SQLite's VM steps for one stats call. */
static int stats_steps(ib_recorder *r, uint64_t *markers)
{
    sq_recorder *s = (sq_recorder *)r;
    ib_recorder_stats st;
    sqlite3_stmt_status(s->q[Q_STATS], SQLITE_STMTSTATUS_VM_STEP, 1);
    CHECK(ib_recorder_stats_get(r, &st, &err));
    *markers = st.markers;
    return sqlite3_stmt_status(s->q[Q_STATS], SQLITE_STMTSTATUS_VM_STEP, 0);
}

/* Marks ids first.. as the host does (acquire, then mark). */
static void run_batch(ib_recorder *r, const char *consumer, uint64_t first, size_t n)
{
    char ids[64][IB_ID_BUF_SIZE];
    ib_marker_key keys[64];
    ib_claim_info info[64];
    bool marked[64];
    for (size_t i = 0; i < n; i++) {
        rt_id(ids[i], first + i);
        keys[i] = (ib_marker_key){consumer, ids[i]};
    }
    ib_claim_request req = {.owner = "A", .lease_ms = 60000};
    CHECK(ib__recorder_acquire_fp(r, info, keys, NULL, n, &req, &err));
    CHECK(ib__recorder_mark_owned_fp(r, marked, keys, NULL, n, "A", &err));
}

static void test_stats_do_not_scan(void **state)
{
    (void)state;
    uint64_t small_markers = 0, big_markers = 0;
    fill("small.db", SMALL);
    ib_recorder *small = open_file("small.db");
    run_batch(small, "svc", 0, 50);
    int small_steps = stats_steps(small, &small_markers);
    ib_recorder_close(small);
    fill("big.db", BIG);
    ib_recorder *big = open_file("big.db");
    run_batch(big, "svc", 0, 50);
    int big_steps = stats_steps(big, &big_markers);
    print_message("stats: %d VM steps at %d markers, %d at %d\n", small_steps, SMALL + 50,
                  big_steps, BIG + 50);
    assert_int_equal(small_markers, SMALL + 50);
    assert_int_equal(big_markers, BIG + 50);
    assert_true(big_steps <= small_steps + 100);
    ib_recorder_close(big);
}

static void test_filter_built_in_chunks(void **state)
{
    (void)state;
    fill("big.db", BIG);
    ib_recorder *r = open_file("big.db");
    sq_recorder *s = (sq_recorder *)r;
    /* an answer before the filter exists is right: it probes */
    run_batch(r, "svc", 0, 10);
    bool done = false;
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 3);
    CHECK(ib_recorder_is_processed(r, &done, "svc", id, &err));
    assert_true(done);
    int calls = 0;
    while (ib__recorder_upkeep(r) && calls < 100000)
        calls++;
    assert_true(s->filter_complete);
    assert_true(s->filter.count >= BIG);
    print_message("filter: %llu keys in %d upkeep calls and %llu read transactions, longest "
                  "%.1f ms\n",
                  (unsigned long long)s->filter.count, calls + 1,
                  (unsigned long long)s->filter_chunks, (double)s->upkeep_hold_max_ns / 1e6);
    /* transactions of at most one chunk each: bounded whatever the machine */
    assert_true(s->filter_chunks >= BIG / IB__SQ_FILTER_CHUNK);
    assert_true(s->upkeep_hold_max_ns < 2000LL * 1000000);
    CHECK(ib_recorder_is_processed(r, &done, "svc", id, &err));
    assert_true(done);
    rt_id(id, 999999);
    CHECK(ib_recorder_is_processed(r, &done, "svc", id, &err));
    assert_false(done);
    ib_recorder_close(r);
}

static void test_catch_up_reads_what_was_missed(void **state)
{
    (void)state;
    fill("big.db", BIG);
    ib_recorder *a = open_file("big.db"), *b = open_file("big.db");
    sq_recorder *sb = (sq_recorder *)b;
    bool done = false;
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 1);
    CHECK(ib_recorder_is_processed(b, &done, "svc", id, &err));
    uint64_t before = sb->catchup_rows;
    for (uint64_t k = 0; k < 20; k++)
        run_batch(a, "svc", k * 64, 64);
    CHECK(ib_recorder_is_processed(b, &done, "svc", id, &err));
    assert_true(done);
    /* 20 acquires and 20 marks: one journal row each */
    assert_int_equal(sb->catchup_rows - before, 40);
    assert_int_equal(sb->stale_rebuilds, 0);
    ib_recorder_close(a);
    ib_recorder_close(b);
}

static void test_prune_keeps_counts_exact(void **state)
{
    (void)state;
    fill("small.db", SMALL);
    ib_recorder *r = open_file("small.db");
    rt_clock_advance(100000);
    run_batch(r, "svc", 0, 30);
    uint64_t removed = 0, markers = 0;
    /* fill() stamped the markers 1700000000001..; prune the first 400 */
    CHECK(ib_recorder_prune(r, &removed, 1700000000401LL, &err));
    assert_int_equal(removed, 400);
    stats_steps(r, &markers);
    assert_int_equal(markers, SMALL - 400 + 30);
    ib_recorder_close(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_stats_do_not_scan, setup, teardown),
    cmocka_unit_test_setup_teardown(test_filter_built_in_chunks, setup, teardown),
    cmocka_unit_test_setup_teardown(test_catch_up_reads_what_was_missed, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prune_keeps_counts_exact, setup, teardown),
};

IB_TEST_MAIN(tests)
