/* sqlite: the marker journal (schema version 4). Marks land in the journal
 * and the processed_log view shows them at once; merges move them into the
 * B-trees, by threshold or on demand, keeping claims and their attempts;
 * a second connection sees marks, forgets and merges of the first; a
 * rolled-back transaction leaves nothing in the tail; a connection that
 * slept through merges rebuilds its filter; the filter and the in-memory
 * tail themselves (sqlite_filter.c, sqlite_tail.c). */
#include <sqlite3.h>

#include "ib_test.h"
#include "rtest.h"
#include "sqlite_internal.h"
#include "sqlite_states.h"

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
    if (dir == NULL)
        return -1;
    snprintf(path, sizeof(path), "%s/journal.db", dir);
    rt_clock_set(1700000000000LL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    rt_rmtree(dir);
    free(dir);
    dir = NULL;
    return 0;
}

static ib_recorder *open_file(void)
{
    char uri[4200];
    ib_recorder *r = NULL;
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    ib_recorder_options o = {.size = sizeof(o), .now_ms = rt_clock};
    CHECK(ib_recorder_open(&r, uri, &o, &err));
    return r;
}

/* One number from a query on the recorder's own connection. */
static long long count_of(ib_recorder *r, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ib__sqlite_db(r), sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(ib__sqlite_db(r)));
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("%s: no row", sql);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Whether another tool's point query on the view finds the marker. */
static bool view_has(ib_recorder *r, const char *consumer, const char *id)
{
    sqlite3_stmt *st = NULL;
    const char *sql = "SELECT 1 FROM processed_log WHERE consumer = ?1 AND event_id = ?2";
    assert_int_equal(sqlite3_prepare_v2(ib__sqlite_db(r), sql, -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

static bool is_done(ib_recorder *r, const char *consumer, uint64_t n)
{
    char id[IB_ID_BUF_SIZE];
    bool done = false;
    rt_id(id, n);
    CHECK(ib_recorder_is_processed(r, &done, consumer, id, &err));
    return done;
}

/* Acquires and marks ids first.. in one batch each, as the host does. */
static void run_batch(ib_recorder *r, const char *owner, uint64_t first, size_t n)
{
    char ids[64][IB_ID_BUF_SIZE];
    ib_marker_key keys[64];
    ib_claim_info info[64];
    bool marked[64];
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++) {
        rt_id(ids[i], first + i);
        keys[i] = (ib_marker_key){"svc", ids[i]};
    }
    ib_claim_request req = {.owner = owner, .lease_ms = 60000};
    CHECK(ib__recorder_acquire_fp(r, info, keys, NULL, n, &req, &err));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(info[i].state, IB_CLAIM_ACQUIRED);
    CHECK(ib__recorder_mark_owned_fp(r, marked, keys, NULL, n, owner, &err));
    for (size_t i = 0; i < n; i++)
        assert_true(marked[i]);
}

static void test_marks_are_journalled_then_merged(void **state)
{
    (void)state;
    ib_recorder *r = open_file();
    run_batch(r, "A", 0, 10);
    /* claim and mark: two rows of ten states, nothing in the B-trees yet */
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_journal"), 2);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_states"), 20);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_markers"), 0);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_log"), 10);
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 3);
    assert_true(view_has(r, "svc", id));

    size_t moved = 0;
    CHECK(ib__sqlite_merge(r, &moved, &err));
    assert_int_equal(moved, 10);
    /* the merged rows stay one merge longer, outside every view */
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_journal"), 2);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_states"), 0);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_markers"), 10);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_claims"), 0);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_log"), 10);
    assert_int_equal(count_of(r, "SELECT merged_seq FROM processed_merge"), 2);
    assert_int_equal(count_of(r, "SELECT trimmed_seq FROM processed_merge"), 0);
    assert_true(view_has(r, "svc", id));
    for (uint64_t i = 0; i < 10; i++)
        assert_true(is_done(r, "svc", i));
    assert_false(is_done(r, "svc", 10));

    /* The next merge deletes them; seqs keep rising all the same. */
    run_batch(r, "A", 10, 1);
    CHECK(ib__sqlite_merge(r, &moved, &err));
    assert_int_equal(moved, 1);
    assert_int_equal(count_of(r, "SELECT min(seq) FROM processed_journal"), 3);
    assert_int_equal(count_of(r, "SELECT trimmed_seq FROM processed_merge"), 2);
    run_batch(r, "A", 11, 1);
    assert_int_equal(count_of(r, "SELECT max(seq) FROM processed_journal"), 6);
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.markers, 12);
    ib_recorder_close(r);
}

static void test_merge_starts_at_its_threshold(void **state)
{
    (void)state;
    ib_recorder *r = open_file();
    ib__sqlite_set_merge_keys(r, 50);
    for (uint64_t b = 0; b < 10; b++)
        run_batch(r, "A", b * 20, 20);
    assert_true(ib__sqlite_merges(r) >= 3);
    assert_int_equal(ib__sqlite_merge_failures(r), 0);
    assert_true(count_of(r, "SELECT count(*) FROM processed_states") < 100);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_log"), 200);
    for (uint64_t i = 0; i < 200; i++)
        assert_true(is_done(r, "svc", i));
    ib_recorder_close(r);
}

/* A released claim's attempts and a live claim survive a merge. */
static void test_claims_survive_a_merge(void **state)
{
    (void)state;
    ib_recorder *r = open_file();
    char a[IB_ID_BUF_SIZE], b[IB_ID_BUF_SIZE];
    rt_id(a, 1);
    rt_id(b, 2);
    ib_marker_key ka = {"svc", a}, kb = {"svc", b};
    ib_claim_request req = {.owner = "A", .lease_ms = 60000};
    ib_claim_info info;
    CHECK(ib__recorder_acquire_fp(r, &info, &ka, NULL, 1, &req, &err));
    CHECK(ib_recorder_release(r, "svc", a, "A", &err));
    CHECK(ib__recorder_acquire_fp(r, &info, &kb, NULL, 1, &req, &err));
    CHECK(ib__sqlite_merge(r, NULL, &err));
    /* the released claim is merged; the live one is carried over */
    assert_int_equal(count_of(r, "SELECT attempts FROM processed_claims WHERE owner = ''"), 1);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_claims WHERE owner = 'A'"), 0);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_states WHERE owner = 'A'"), 1);
    assert_int_equal(count_of(r, "SELECT seq FROM processed_journal WHERE seq > (SELECT "
                                 "merged_seq FROM processed_merge)"),
                     count_of(r, "SELECT merged_seq FROM processed_merge") + 1);
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.claims, 1);

    ib_claim_request other = {.owner = "B", .lease_ms = 60000};
    CHECK(ib__recorder_acquire_fp(r, &info, &ka, NULL, 1, &other, &err));
    assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(info.attempts, 2);
    CHECK(ib__recorder_acquire_fp(r, &info, &kb, NULL, 1, &other, &err));
    assert_int_equal(info.state, IB_CLAIM_BUSY);
    /* journal and B-tree claims counted together */
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.claims, 2);
    ib_recorder_close(r);
}

/* A second connection sees the first one's marks, forgets and merges. */
static void test_other_connection_follows(void **state)
{
    (void)state;
    ib_recorder *r1 = open_file(), *r2 = open_file();
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 7);
    assert_false(is_done(r2, "svc", 7));
    run_batch(r1, "A", 7, 1);
    assert_true(is_done(r2, "svc", 7)); /* from the journal */
    CHECK(ib__sqlite_merge(r1, NULL, &err));
    assert_true(is_done(r2, "svc", 7)); /* from the B-tree */

    bool existed = false;
    CHECK(ib_recorder_forget(r1, &existed, "svc", id, &err));
    assert_true(existed);
    assert_false(is_done(r2, "svc", 7));
    assert_false(view_has(r2, "svc", id)); /* the B-tree row is hidden */
    assert_int_equal(count_of(r2, "SELECT count(*) FROM processed_markers"), 1);
    CHECK(ib__sqlite_merge(r2, NULL, &err));
    assert_int_equal(count_of(r2, "SELECT count(*) FROM processed_markers"), 0);
    assert_false(is_done(r1, "svc", 7));

    /* r2 claims it; r1, which merged nothing since, must see the claim. */
    ib_marker_key key = {"svc", id};
    ib_claim_info info;
    ib_claim_request b = {.owner = "B", .lease_ms = 60000};
    CHECK(ib__recorder_acquire_fp(r2, &info, &key, NULL, 1, &b, &err));
    assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
    ib_claim_request a = {.owner = "A", .lease_ms = 60000};
    CHECK(ib__recorder_acquire_fp(r1, &info, &key, NULL, 1, &a, &err));
    assert_int_equal(info.state, IB_CLAIM_BUSY);
    ib_recorder_close(r1);
    ib_recorder_close(r2);
}

/* A body that journals a mark, then fails: the transaction rolls back. */
static int mark_then_fail(sq_recorder *s, void *ctx, ib_error *local)
{
    const ib_marker_key *key = ctx;
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    if (rc == SQLITE_OK)
        rc = ib__sq_state_get(s, &st, key);
    st.done = true;
    st.ts = 1;
    if (rc == SQLITE_OK)
        rc = ib__sq_state_put(s, key, &st, false);
    return rc == SQLITE_OK ? SQLITE_CONSTRAINT : rc;
}

static void test_rollback_leaves_nothing_in_the_tail(void **state)
{
    (void)state;
    ib_recorder *r = open_file();
    run_batch(r, "A", 0, 3);
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 42);
    ib_marker_key key = {"svc", id};
    sq_recorder *s = (sq_recorder *)r;
    assert_int_not_equal(ib__sq_run_locked(s, TX_WRITE, mark_then_fail, &key, &err), IB_OK);
    assert_false(is_done(r, "svc", 42));
    for (uint64_t i = 0; i < 3; i++)
        assert_true(is_done(r, "svc", i)); /* read again from the journal */
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_journal"), 2);
    ib_recorder_close(r);
}

/* Prune merges first, so journalled markers are pruned like the others. */
static void test_prune_reaches_journalled_markers(void **state)
{
    (void)state;
    ib_recorder *r = open_file();
    run_batch(r, "A", 0, 5);
    rt_clock_advance(10000);
    run_batch(r, "A", 5, 3);
    uint64_t removed = 0;
    CHECK(ib_recorder_prune(r, &removed, 1700000005000LL, &err));
    assert_int_equal(removed, 5);
    assert_int_equal(count_of(r, "SELECT count(*) FROM processed_log"), 3);
    assert_false(is_done(r, "svc", 0));
    assert_true(is_done(r, "svc", 5));
    ib_recorder_close(r);
}

/* A live reader keeps the journal rows it has not read: merges do not
 * delete them, and it catches up from them without any scan. */
static void test_live_reader_keeps_its_rows(void **state)
{
    (void)state;
    ib_recorder *r1 = open_file(), *r2 = open_file();
    assert_false(is_done(r2, "svc", 1));
    for (uint64_t b = 0; b < 4; b++) {
        run_batch(r1, "A", b * 30, 30);
        CHECK(ib__sqlite_merge(r1, NULL, &err));
    }
    assert_int_equal(count_of(r1, "SELECT trimmed_seq FROM processed_merge"), 0);
    for (uint64_t i = 0; i < 120; i++)
        assert_true(is_done(r2, "svc", i));
    assert_int_equal(((sq_recorder *)r2)->stale_rebuilds, 0);
    /* once r2 says it has read them, they go */
    rt_clock_advance(2000);
    run_batch(r2, "B", 500, 1);
    run_batch(r1, "A", 200, 30);
    CHECK(ib__sqlite_merge(r1, NULL, &err));
    assert_true(count_of(r1, "SELECT trimmed_seq FROM processed_merge") > 0);
    ib_recorder_close(r1);
    ib_recorder_close(r2);
}

/* A reader that said nothing for longer than the readers' window (a
 * stopped process) is passed over; it finds on its return that it never
 * read the rows that put its keys in the B-tree, and probes the B-tree
 * rather than trust its filter. */
static void test_sleeper_rebuilds_its_filter(void **state)
{
    (void)state;
    ib_recorder *r1 = open_file(), *r2 = open_file();
    assert_false(is_done(r2, "svc", 1)); /* r2 has read the journal once */
    rt_clock_advance(20000);
    run_batch(r1, "A", 0, 30);
    CHECK(ib__sqlite_merge(r1, NULL, &err));
    run_batch(r1, "A", 30, 30);
    CHECK(ib__sqlite_merge(r1, NULL, &err)); /* deletes the rows of ids 0..29 */
    assert_true(count_of(r1, "SELECT trimmed_seq FROM processed_merge") > 0);
    for (uint64_t i = 0; i < 60; i++)
        assert_true(is_done(r2, "svc", i));
    assert_false(is_done(r2, "svc", 60));
    /* and one a single merge behind catches up from the kept rows */
    run_batch(r1, "A", 60, 5);
    CHECK(ib__sqlite_merge(r1, NULL, &err));
    for (uint64_t i = 60; i < 65; i++)
        assert_true(is_done(r2, "svc", i));
    ib_recorder_close(r1);
    ib_recorder_close(r2);
}

/* --- the states' text ------------------------------------------------------ */

static int count_states(void *ctx, size_t index, const sq_state *st)
{
    size_t *n = ctx;
    (void)st;
    assert_int_equal(index, *n);
    (*n)++;
    return 0;
}

static int parse(const char *text, size_t *n)
{
    *n = 0;
    return ib__sq_states_parse(text, strlen(text), count_states, n);
}

static void test_states_text(void **state)
{
    (void)state;
    char id[IB_ID_BUF_SIZE], text[2 * IB__SQ_STATE_TEXT_MAX];
    sq_state st = {.done = true,
                   .ts = 1700000000000LL,
                   .fp = 0x8000000000000001ULL,
                   .expires = -5,
                   .attempts = 4};
    snprintf(st.owner, sizeof(st.owner), "%s", "a\"b\\c\x01");
    rt_id(id, 9);
    assert_true(ib_id_pack(st.id, id));
    text[0] = '[';
    size_t len = 1 + ib__sq_state_encode(text + 1, id, &st);
    text[len++] = ',';
    len += ib__sq_state_encode(text + len, id, &st);
    text[len++] = ']';
    text[len] = '\0';
    assert_non_null(strstr(text, "\"a\\\"b\\\\c\\u0001\""));
    assert_non_null(strstr(text, ",-9223372036854775807,"));
    size_t n = 0;
    assert_int_equal(parse(text, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(parse("[]", &n), 0);
    assert_int_equal(parse(" [ ] ", &n), 0);
    static const char *const bad[] = {
        "",
        "[",
        "[[]]",
        "[] x",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,1,1,\"\",0,0]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,1,1,\"\",0,0],]",
        "[[\"9203EBD1544C452FAEBA0D150000012C\",1,1,1,\"\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012\",1,1,1,\"\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",2,1,1,\"\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,01,1,\"\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,9223372036854775808,1,\"\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,1,1,\"\",0,4294967296]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,1,1,\"\\u0000\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,1,1,\"\\x\",0,0]]",
        "[[\"9203ebd1544c452faeba0d150000012c\",1,1,1,\"\x01\",0,0]]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse(bad[i], &n) != -1)
            fail_msg("accepted: %s", bad[i]);
}

/* --- the filter and the tail ---------------------------------------------- */

static void test_filter_answers(void **state)
{
    (void)state;
    sq_filter f = {0};
    char id[IB_ID_BUF_SIZE];
    uint8_t packed[16];
    rt_id(id, 1);
    assert_true(ib_id_pack(packed, id));
    assert_true(ib__sq_filter_maybe(&f, "a", packed)); /* unbuilt: maybe */
    assert_true(ib__sq_filter_reset(&f, 1000));
    assert_int_equal(f.nbits, 1u << 20); /* the floor */
    for (uint64_t i = 0; i < 50000; i++) {
        rt_id(id, i);
        assert_true(ib_id_pack(packed, id));
        ib__sq_filter_add(&f, "a", packed);
    }
    for (uint64_t i = 0; i < 50000; i++) {
        rt_id(id, i);
        assert_true(ib_id_pack(packed, id));
        assert_true(ib__sq_filter_maybe(&f, "a", packed)); /* never a false "no" */
    }
    unsigned false_maybe = 0, other_consumer = 0;
    for (uint64_t i = 100000; i < 200000; i++) {
        rt_id(id, i);
        assert_true(ib_id_pack(packed, id));
        false_maybe += ib__sq_filter_maybe(&f, "a", packed);
    }
    for (uint64_t i = 0; i < 10000; i++) {
        rt_id(id, i);
        assert_true(ib_id_pack(packed, id));
        other_consumer += ib__sq_filter_maybe(&f, "b", packed);
    }
    /* 50 000 keys in 2^20 bits: about 0.24 % at its sized load, far less here */
    assert_true(false_maybe < 500);
    assert_true(other_consumer < 50);
    assert_false(ib__sq_filter_full(&f));
    for (uint64_t i = 50000; i <= 65536; i++) {
        rt_id(id, i);
        assert_true(ib_id_pack(packed, id));
        ib__sq_filter_add(&f, "a", packed);
    }
    assert_true(ib__sq_filter_full(&f));
    ib__sq_filter_free(&f);
    assert_null(f.words);
}

static void tail_put(sq_tail *t, uint64_t seq, const char *consumer, uint64_t n, bool done)
{
    char id[IB_ID_BUF_SIZE];
    uint8_t packed[16];
    rt_id(id, n);
    assert_true(ib_id_pack(packed, id));
    sq_state st = {.done = done, .ts = (int64_t)seq, .attempts = 1};
    snprintf(st.owner, sizeof(st.owner), "%s", done ? "" : "owner");
    assert_true(ib__sq_tail_put(t, seq, consumer, packed, &st));
}

static const sq_tail_entry *tail_get(const sq_tail *t, const char *consumer, uint64_t n)
{
    char id[IB_ID_BUF_SIZE];
    uint8_t packed[16];
    rt_id(id, n);
    assert_true(ib_id_pack(packed, id));
    return ib__sq_tail_find(t, consumer, packed);
}

static void test_tail_keeps_newest_and_sweeps(void **state)
{
    (void)state;
    sq_tail t;
    ib__sq_tail_init(&t);
    assert_null(tail_get(&t, "a", 1));
    /* enough keys to grow the table several times */
    for (uint64_t i = 1; i <= 5000; i++)
        tail_put(&t, i, i % 2 ? "a" : "b", i, false);
    assert_int_equal(t.used, 5000);
    assert_int_equal(t.seen, 5000);
    assert_non_null(tail_get(&t, "a", 1));
    assert_null(tail_get(&t, "b", 1)); /* consumer is part of the key */
    tail_put(&t, 6000, "a", 1, true);
    tail_put(&t, 10, "a", 1, false); /* older: ignored */
    const sq_tail_entry *e = tail_get(&t, "a", 1);
    assert_true(e->done);
    assert_int_equal(e->seq, 6000);
    assert_string_equal(e->owner, "");
    assert_int_equal(t.used, 5000);

    assert_true(ib__sq_tail_sweep(&t, 2500));
    assert_int_equal(t.used, 2501);
    assert_int_equal(t.merged, 2500);
    assert_non_null(tail_get(&t, "a", 1)); /* its newest row is above */
    assert_null(tail_get(&t, "b", 2));
    assert_non_null(tail_get(&t, "a", 2501));
    ib__sq_tail_clear(&t);
    assert_int_equal(t.seen, 0);
    assert_null(tail_get(&t, "a", 2501));
    ib__sq_tail_free(&t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_marks_are_journalled_then_merged, setup, teardown),
    cmocka_unit_test_setup_teardown(test_merge_starts_at_its_threshold, setup, teardown),
    cmocka_unit_test_setup_teardown(test_claims_survive_a_merge, setup, teardown),
    cmocka_unit_test_setup_teardown(test_other_connection_follows, setup, teardown),
    cmocka_unit_test_setup_teardown(test_rollback_leaves_nothing_in_the_tail, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prune_reaches_journalled_markers, setup, teardown),
    cmocka_unit_test_setup_teardown(test_live_reader_keeps_its_rows, setup, teardown),
    cmocka_unit_test_setup_teardown(test_sleeper_rebuilds_its_filter, setup, teardown),
    cmocka_unit_test(test_states_text),
    cmocka_unit_test(test_filter_answers),
    cmocka_unit_test(test_tail_keeps_newest_and_sweeps),
};

IB_TEST_MAIN(tests)
