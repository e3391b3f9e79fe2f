/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: nothing beside the hot path scales with the file (issues 21, 30).
 *
 * Files of 1,000 and 1,000,000 markers, filled straight into the tables,
 * then opened the way a host opens them. The measure is the pages SQLite
 * reads (its page cache's hits plus misses on the recorder's connection),
 * which does not move with the load of the machine:
 *  - counting markers (ibus markers stats, the keeper's gauge) reads the
 *    same pages at a million markers as at a thousand;
 *  - opening a file reads its schema, not its markers, and a first batch
 *    of 64 new ids reads a few pages per id: a process that joins a busy
 *    file has nothing to catch up on;
 *  - a prune walks the markers in transactions of a bounded number of keys
 *    and keeps the counts exact.
 * Not under valgrind: filling the file is a few seconds of real work. */
#include <sqlite3.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"

#define BIG 1000000
#define SMALL 1000
#define T0 1700000000000LL

static ib_error err;
static char *dir;
static char path[4096];

static int setup(void **state)
{
    (void)state;
    dir = rt_tempdir();
    rt_clock_set(T0);
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

/* `n` markers of consumer "big" with random ids, marked at T0 + 1.. T0 + n,
 * and their count, as a migration leaves them. */
static void fill(const char *name, long n)
{
    ib_recorder *r = open_file(name);
    ib_recorder_close(r);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "BEGIN; INSERT INTO processed_consumers (name) VALUES ('big');"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %ld) "
             "INSERT INTO processed_markers (cid, event_id, ts, fp) "
             "SELECT (SELECT cid FROM processed_consumers WHERE name = 'big'), "
             "lower(hex(randomblob(16))), %lld + i, NULL FROM n ORDER BY 2; "
             "UPDATE processed_consumers SET markers = %ld, oldest_ms = %lld + 1, "
             "newest_ms = %lld + %ld; COMMIT",
             n, T0, n, T0, T0, n);
    exec_on(db, sql);
    sqlite3_close(db);
}

/* Pages the recorder's connection read (cache hits and misses) since the
 * last call. */
static int pages_read(ib_recorder *r)
{
    int hit = 0, miss = 0, hi = 0;
    sqlite3 *db = ib__sqlite_db(r);
    sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_HIT, &hit, &hi, 1);
    sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_MISS, &miss, &hi, 1);
    return hit + miss;
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
    for (size_t i = 0; i < n; i++)
        assert_int_equal(info[i].state, IB_CLAIM_ACQUIRED);
    CHECK(ib__recorder_mark_owned_fp(r, marked, keys, NULL, n, "A", &err));
}

static void test_stats_do_not_scan(void **state)
{
    (void)state;
    int pages[2];
    const long sizes[2] = {SMALL, BIG};
    for (int i = 0; i < 2; i++) {
        fill(i == 0 ? "small.db" : "big.db", sizes[i]);
        ib_recorder *r = open_file(i == 0 ? "small.db" : "big.db");
        ib_recorder_stats st;
        pages_read(r);
        CHECK(ib_recorder_stats_get(r, &st, &err));
        pages[i] = pages_read(r);
        assert_int_equal(st.markers, (uint64_t)sizes[i]);
        assert_int_equal(st.oldest_ts_ms, T0 + 1);
        assert_int_equal(st.newest_ts_ms, T0 + sizes[i]);
        ib_recorder_close(r);
    }
    print_message("[ stats    ] pages read: %d at %d markers, %d at %d\n", pages[0], SMALL,
                  pages[1], BIG);
    assert_int_equal(pages[1], pages[0]);
}

/* A joiner: the open reads the schema, not the markers, and a first batch
 * of new ids reads a few pages per id: at a million markers no more than
 * at a thousand, but for the levels the tree gained, which each id goes
 * through three times (the claim's look, the mark's look, the insert). */
static void test_joiner_reads_no_backlog(void **state)
{
    (void)state;
    int opened[2], batch[2];
    const long sizes[2] = {SMALL, BIG};
    for (int i = 0; i < 2; i++) {
        fill(i == 0 ? "small.db" : "big.db", sizes[i]);
        ib_recorder *r = open_file(i == 0 ? "small.db" : "big.db");
        opened[i] = pages_read(r);
        run_batch(r, "svc", 0, 64);
        batch[i] = pages_read(r);
        ib_recorder_close(r);
    }
    print_message("[ joiner   ] pages read to open: %d at %d markers, %d at %d; for a batch of 64 "
                  "new ids: %d, %d\n",
                  opened[0], SMALL, opened[1], BIG, batch[0], batch[1]);
    assert_int_equal(opened[1], opened[0]);
    assert_true(batch[1] <= batch[0] + 64 * 2 * 3);
}

static void test_prune_keeps_counts_exact(void **state)
{
    (void)state;
    fill("small.db", SMALL);
    ib_recorder *r = open_file("small.db");
    rt_clock_advance(100000);
    run_batch(r, "svc", 0, 30);
    uint64_t removed = 0;
    /* fill() stamped the markers T0 + 1..; prune the first 400 */
    CHECK(ib_recorder_prune(r, &removed, T0 + 401, &err));
    assert_int_equal(removed, 400);
    ib_recorder_stats st;
    CHECK(ib_recorder_stats_get(r, &st, &err));
    assert_int_equal(st.markers, SMALL - 400 + 30);
    assert_int_equal(st.oldest_ts_ms, T0 + 401);
    ib_recorder_close(r);
}

/* A seventh of a million markers, spread over the whole key range, goes
 * in transactions of at most 2000 keys each. */
static void test_prune_walks_in_bounded_transactions(void **state)
{
    (void)state;
    fill("big.db", BIG);
    ib_recorder *r = open_file("big.db");
    uint64_t removed = 0;
    CHECK(ib_recorder_prune(r, &removed, T0 + 1 + BIG / 7, &err));
    assert_int_equal(removed, BIG / 7);
    uint64_t tx = ib__sqlite_prune_transactions(r);
    print_message("[ prune    ] %llu markers in %llu transactions, the longest %.1f ms\n",
                  (unsigned long long)removed, (unsigned long long)tx,
                  (double)ib__sqlite_prune_hold_max_ns(r) / 1e6);
    /* one per 2000 keys, one for the claims, one for the seed's spellings */
    assert_int_equal(tx, BIG / 2000 + 1 + 1 + 1);
    ib_recorder_stats st;
    CHECK(ib_recorder_stats_get(r, &st, &err));
    assert_int_equal(st.markers, BIG - BIG / 7);
    ib_recorder_close(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_stats_do_not_scan, setup, teardown),
    cmocka_unit_test_setup_teardown(test_joiner_reads_no_backlog, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prune_keeps_counts_exact, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prune_walks_in_bounded_transactions, setup, teardown),
};

IB_TEST_MAIN(tests)
