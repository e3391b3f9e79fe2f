/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: the file itself. Mode of a new file, pragmas, schema layout,
 * migration of the seed's layout and of versions 1, 2 and 3, refusal of a newer schema, pruning in
 * batches, waiting out a held write lock, sharing one file between
 * connections, and error messages that name the file. */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "ib_test.h"
#include "clock.h"
#include "rtest.h"
#include "sqlite_internal.h"

static ib_error err;
static char *dir;

#define SQL_OK(call)                                                                               \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != SQLITE_OK)                                                                      \
            fail_msg("%s -> %s", #call, sqlite3_errstr(rc_));                                      \
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

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static ib_recorder *open_uri(const char *fmt, const char *name)
{
    char path[4096], uri[4200];
    ib_recorder *r = NULL;
    path_of(path, sizeof(path), name);
    snprintf(uri, sizeof(uri), fmt, path);
    ib_recorder_options o = {.size = sizeof(o), .now_ms = rt_clock};
    CHECK(ib_recorder_open(&r, uri, &o, &err));
    return r;
}

static long long query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    SQL_OK(sqlite3_prepare_v2(db, sql, -1, &st, NULL));
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("%s: no row (%s)", sql, sqlite3_errmsg(db));
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static char *query_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    SQL_OK(sqlite3_prepare_v2(db, sql, -1, &st, NULL));
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("%s: no row (%s)", sql, sqlite3_errmsg(db));
    const unsigned char *t = sqlite3_column_text(st, 0);
    char *copy = strdup(t != NULL ? (const char *)t : "");
    sqlite3_finalize(st);
    return copy;
}

/* A second, plain connection: what another tool would see. */
static sqlite3 *raw_open(const char *name)
{
    char path[4096];
    sqlite3 *db = NULL;
    path_of(path, sizeof(path), name);
    SQL_OK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL));
    sqlite3_busy_timeout(db, 10000);
    return db;
}

static unsigned mode_of(const char *name)
{
    char path[4096];
    struct stat sb;
    path_of(path, sizeof(path), name);
    if (stat(path, &sb) != 0)
        fail_msg("stat %s failed", name);
    return (unsigned)sb.st_mode & 07777;
}

static void mark_n(ib_recorder *r, const char *consumer, uint64_t first, uint64_t n)
{
    char id[IB_ID_BUF_SIZE];
    for (uint64_t i = first; i < first + n; i++) {
        rt_id(id, i);
        CHECK(ib_recorder_mark(r, consumer, id, &err));
    }
}

static void exec_raw(sqlite3 *db, const char *sql);

static void test_new_file_mode_0600(void **state)
{
    (void)state;
    mode_t old = umask(022);
    ib_recorder *r = open_uri("sqlite:%s", "m.db");
    mark_n(r, "c", 0, 10);
    assert_int_equal(mode_of("m.db"), 0600);
    /* SQLite gives its side files the database's mode. */
    assert_int_equal(mode_of("m.db-wal"), 0600);
    assert_int_equal(mode_of("m.db-shm"), 0600);
    ib_recorder_close(r);

    /* A configured mode wins over a restrictive umask, too. */
    umask(077);
    r = open_uri("sqlite:%s?mode=0640", "g.db");
    mark_n(r, "c", 0, 10);
    assert_int_equal(mode_of("g.db"), 0640);
    assert_int_equal(mode_of("g.db-wal"), 0640);
    ib_recorder_close(r);
    umask(old);
}

static void test_existing_file_keeps_its_mode(void **state)
{
    (void)state;
    char path[4096];
    path_of(path, sizeof(path), "e.db");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(path, 0644), 0);
    ib_recorder *r = open_uri("sqlite:%s", "e.db");
    mark_n(r, "c", 0, 3);
    assert_int_equal(mode_of("e.db"), 0644);
    ib_recorder_close(r);
}

static void test_pragmas_applied(void **state)
{
    (void)state;
    static const char *const names[] = {"off", "normal", "full", "extra"};
    for (int level = 0; level < 4; level++) {
        char fmt[128];
        snprintf(fmt, sizeof(fmt), "sqlite:%%s?synchronous=%s&busy_timeout_ms=%d", names[level],
                 1000 + level);
        ib_recorder *r = open_uri(fmt, "p.db");
        sqlite3 *db = ib__sqlite_db(r);
        assert_non_null(db);
        assert_int_equal(query_int(db, "PRAGMA synchronous"), level);
        assert_int_equal(((sq_recorder *)r)->busy_timeout_ms, 1000 + level);
        char *mode = query_text(db, "PRAGMA journal_mode");
        assert_string_equal(mode, "wal");
        free(mode);
        ib_recorder_close(r);
    }
    /* Defaults: FULL (durable by default) and 10 s. */
    ib_recorder *r = open_uri("sqlite:%s", "p.db");
    assert_int_equal(query_int(ib__sqlite_db(r), "PRAGMA synchronous"), 2);
    assert_int_equal(((sq_recorder *)r)->busy_timeout_ms, 10000);
    ib_recorder_close(r);
    /* Write-cost tuning: a new file gets 2 KiB pages and a 16 MiB cache;
     * the recorder checkpoints by itself (its WAL hook replaces SQLite's
     * autocheckpoint) and a WAL that starts over is cut back to 16 MiB. */
    r = open_uri("sqlite:%s", "tuned.db");
    assert_int_equal(query_int(ib__sqlite_db(r), "PRAGMA page_size"), 2048);
    assert_int_equal(query_int(ib__sqlite_db(r), "PRAGMA wal_autocheckpoint"), 0);
    assert_int_equal(query_int(ib__sqlite_db(r), "PRAGMA journal_size_limit"), 16 * 1024 * 1024);
    assert_int_equal(query_int(ib__sqlite_db(r), "PRAGMA cache_size"), -16384);
    ib_recorder_close(r);
    /* An existing file keeps its page size. */
    sqlite3 *old = raw_open("old.db");
    exec_raw(old, "PRAGMA page_size = 1024; CREATE TABLE unrelated (x)");
    sqlite3_close(old);
    r = open_uri("sqlite:%s", "old.db");
    assert_int_equal(query_int(ib__sqlite_db(r), "PRAGMA page_size"), 1024);
    assert_int_equal(((sq_recorder *)r)->wal.page_size, 1024);
    ib_recorder_close(r);
    /* The hook answers only for sqlite recorders. */
    ib_recorder *m = NULL;
    CHECK(ib_recorder_open(&m, "memory:", NULL, &err));
    assert_null(ib__sqlite_db(m));
    ib_recorder_close(m);
}

static void test_schema_layout(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s", "s.db");
    mark_n(r, "durable/p/h", 0, 5);
    ib_recorder_close(r);
    sqlite3 *db = raw_open("s.db");
    assert_int_equal(query_int(db, "PRAGMA user_version"), IB__SQLITE_SCHEMA_VERSION);
    char *sql = query_text(db, "SELECT sql FROM sqlite_master WHERE name = 'processed_markers'");
    assert_non_null(strstr(sql, "WITHOUT ROWID"));
    assert_non_null(strstr(sql, "cid INTEGER NOT NULL"));
    assert_non_null(strstr(sql, "event_id TEXT NOT NULL"));
    assert_non_null(strstr(sql, "ts INTEGER NOT NULL"));
    assert_non_null(strstr(sql, "PRIMARY KEY (event_id, cid)"));
    free(sql);
    sql = query_text(db, "SELECT sql FROM sqlite_master WHERE name = 'processed_claims'");
    assert_non_null(strstr(sql, "WITHOUT ROWID"));
    free(sql);
    /* processed_log is the view other tools read. */
    sql = query_text(db, "SELECT type FROM sqlite_master WHERE name = 'processed_log'");
    assert_string_equal(sql, "view");
    free(sql);
    /* An outbox seq names one message for good: every process deletes by
     * it after publishing, so a reused seq would delete an unsent one. A
     * cid names one consumer for good. */
    sql = query_text(db, "SELECT sql FROM sqlite_master WHERE name = 'processed_outbox'");
    assert_non_null(strstr(sql, "seq INTEGER PRIMARY KEY AUTOINCREMENT"));
    free(sql);
    sql = query_text(db, "SELECT sql FROM sqlite_master WHERE name = 'processed_consumers'");
    assert_non_null(strstr(sql, "cid INTEGER PRIMARY KEY AUTOINCREMENT"));
    free(sql);
    /* Only the consumers' UNIQUE name has an index of its own: the primary
     * keys are the tables. */
    assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"), 1);
    /* Another tool reads plain rows with ts in unix ms, through the key. */
    assert_int_equal(query_int(db,
                               "SELECT count(*) FROM processed_log WHERE consumer = "
                               "'durable/p/h' AND length(event_id) = 32 AND ts = 1700000000000"),
                     5);
    sqlite3_stmt *st = NULL;
    SQL_OK(sqlite3_prepare_v2(db,
                              "EXPLAIN QUERY PLAN SELECT 1 FROM processed_log WHERE consumer = "
                              "'durable/p/h' AND event_id = 'x'",
                              -1, &st, NULL));
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text(st, 3);
        if (detail != NULL && strstr(detail, "SCAN") != NULL)
            fail_msg("the seed's lookup scans: %s", detail);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void exec_raw(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
}

static void test_migrates_seed_schema(void **state)
{
    (void)state;
    char a[IB_ID_BUF_SIZE], b[IB_ID_BUF_SIZE], c[IB_ID_BUF_SIZE], d[IB_ID_BUF_SIZE],
        e[IB_ID_BUF_SIZE], f[IB_ID_BUF_SIZE];
    rt_id(a, 1);
    rt_id(b, 2);
    rt_id(c, 3);
    rt_id(d, 4);
    rt_id(e, 5);
    rt_id(f, 6);
    /* The Python template's layout and values: REAL seconds from
     * time.time(), in a rowid table. */
    sqlite3 *db = raw_open("seed.db");
    exec_raw(db, "CREATE TABLE processed_log (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "
                 "ts REAL NOT NULL, PRIMARY KEY (consumer, event_id))");
    char *sql = sqlite3_mprintf(
        "INSERT INTO processed_log VALUES "
        "('svc', '%s', 1700000000.123), ('svc', '%s', 1600000000), "
        "('other', '%s', 1700000000456), ('svc', '%s', '2024-01-02 03:04:05'), "
        /* the same uuid in dashed upper case: normalised on the way */
        "('svc', upper(substr('%s',1,8)||'-'||substr('%s',9,4)||'-'||substr('%s',13,4)||'-'||"
        "substr('%s',17,4)||'-'||substr('%s',21)), 1650000000.5), "
        "('svc', '%s', 'soon')",
        a, b, c, d, e, e, e, e, e, f);
    exec_raw(db, sql);
    sqlite3_free(sql);
    exec_raw(db, "BEGIN");
    for (int i = 0; i < 500; i++) {
        char id[IB_ID_BUF_SIZE];
        rt_id(id, 1000 + (uint64_t)i);
        sql = sqlite3_mprintf("INSERT INTO processed_log VALUES ('bulk', '%s', %d.25)", id,
                              1690000000 + i);
        exec_raw(db, sql);
        sqlite3_free(sql);
    }
    exec_raw(db, "COMMIT");
    assert_int_equal(query_int(db, "PRAGMA user_version"), 0);
    sqlite3_close(db);

    rt_clock_set(1800000000000LL);
    ib_recorder *r = open_uri("sqlite:%s", "seed.db");
    struct {
        const char *consumer, *id;
        int64_t ts;
    } want[] = {
        {"svc", a, 1700000000123LL}, {"svc", b, 1600000000000LL}, {"other", c, 1700000000456LL},
        {"svc", d, 1704164645000LL}, {"svc", e, 1650000000500LL}, {"svc", f, 1800000000000LL},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        bool found = false;
        int64_t ts = 0;
        CHECK(ib_recorder_lookup(r, &found, &ts, want[i].consumer, want[i].id, &err));
        if (!found || ts != want[i].ts)
            fail_msg("row %zu: found=%d ts=%lld, want %lld", i, found, (long long)ts,
                     (long long)want[i].ts);
    }
    for (int i = 0; i < 500; i++) {
        char id[IB_ID_BUF_SIZE];
        bool found = false;
        int64_t ts = 0;
        rt_id(id, 1000 + (uint64_t)i);
        CHECK(ib_recorder_lookup(r, &found, &ts, "bulk", id, &err));
        assert_true(found);
        assert_int_equal(ts, (1690000000LL + i) * 1000 + 250);
    }
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.markers, 506);
    /* Claims work on the migrated file. */
    ib_claim_state cs;
    CHECK(ib_recorder_claim(r, &cs, "svc", a, "A", 1000, &err));
    assert_int_equal(cs, IB_CLAIM_DONE);
    ib_recorder_close(r);

    db = raw_open("seed.db");
    assert_int_equal(query_int(db, "PRAGMA user_version"), IB__SQLITE_SCHEMA_VERSION);
    sql = query_text(db, "SELECT sql FROM sqlite_master WHERE name = 'processed_markers'");
    assert_non_null(strstr(sql, "WITHOUT ROWID"));
    free(sql);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log WHERE typeof(ts) <> "
                                   "'integer'"),
                     0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                   "name LIKE 'processed_log_%'"),
                     0);
    sqlite3_close(db);

    /* Opening again changes nothing. */
    r = open_uri("sqlite:%s", "seed.db");
    CHECK(ib_recorder_stats_get(r, &s, &err));
    assert_int_equal(s.markers, 506);
    ib_recorder_close(r);
}

static void test_migrates_untyped_seed_with_nulls(void **state)
{
    (void)state;
    char a[IB_ID_BUF_SIZE];
    rt_id(a, 1);
    sqlite3 *db = raw_open("loose.db");
    exec_raw(db, "CREATE TABLE processed_log (consumer, event_id, ts, "
                 "PRIMARY KEY (consumer, event_id))");
    char *sql = sqlite3_mprintf("INSERT INTO processed_log VALUES ('svc', '%s', 1700000000), "
                                "(NULL, '%s', 1), ('svc', NULL, 1), ('', '%s', 1), "
                                "('svc2', '%s', NULL)",
                                a, a, a, a);
    exec_raw(db, sql);
    sqlite3_free(sql);
    sqlite3_close(db);
    rt_clock_set(1750000000000LL);
    ib_recorder *r = open_uri("sqlite:%s", "loose.db");
    ib_recorder_stats s;
    CHECK(ib_recorder_stats_get(r, &s, &err));
    /* Rows that can never match (NULL or empty key) are gone. */
    assert_int_equal(s.markers, 2);
    bool found = false;
    int64_t ts = 0;
    CHECK(ib_recorder_lookup(r, &found, &ts, "svc2", a, &err));
    assert_true(found);
    assert_int_equal(ts, 1750000000000LL);
    ib_recorder_close(r);
}

/* The layout of version 2 exactly as that build wrote it. */
#define V2_SCHEMA                                                                                  \
    "CREATE TABLE processed_log (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "                 \
    "ts INTEGER NOT NULL, PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;"                        \
    "CREATE TABLE processed_claims (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "              \
    "owner TEXT NOT NULL, expires_ms INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "      \
    "PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;"

/* Writes `n` markers of consumer "old" (ids n0..) with a plain INSERT. */
static void insert_old_markers(sqlite3 *db, uint64_t n0, uint64_t n)
{
    char id[IB_ID_BUF_SIZE];
    for (uint64_t i = n0; i < n0 + n; i++) {
        rt_id(id, i);
        char *sql = sqlite3_mprintf("INSERT INTO processed_log (consumer, event_id, ts) "
                                    "VALUES ('old', '%s', %lld)",
                                    id, 1600000000000LL + (long long)i);
        exec_raw(db, sql);
        sqlite3_free(sql);
    }
}

/* After a migration: the current version, old markers done whatever fingerprint a
 * claim brings, fp NULL in old rows, an empty outbox, and new marks
 * storing the top 32 bits of theirs. */
static void check_migrated(const char *name, uint64_t n0, uint64_t n)
{
    ib_recorder *r = open_uri("sqlite:%s", name);
    sqlite3 *db = ib__sqlite_db(r);
    assert_int_equal(query_int(db, "PRAGMA user_version"), IB__SQLITE_SCHEMA_VERSION);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_markers WHERE fp IS NULL"),
                     (long long)n);
    char id[IB_ID_BUF_SIZE];
    ib_claim_request req = {.owner = "A", .lease_ms = 1000};
    ib_claim_info info;
    for (uint64_t i = n0; i < n0 + n; i++) {
        rt_id(id, i);
        ib_marker_key key = {"old", id};
        uint64_t fp = 0x8000000000000000ull | i;
        CHECK(ib__recorder_acquire_fp(r, &info, &key, &fp, 1, &req, &err));
        assert_int_equal(info.state, IB_CLAIM_DONE);
    }
    uint64_t count = 99;
    CHECK(ib__recorder_outbox_count(r, &count, &err));
    assert_int_equal(count, 0);
    rt_id(id, n0 + n);
    ib_marker_key key = {"new", id};
    uint64_t fp = 0xfedcba9876543210ull;
    bool marked = false;
    CHECK(ib__recorder_mark_owned_fp(r, &marked, &key, &fp, 1, "A", &err));
    assert_int_equal(query_int(db, "SELECT fp FROM processed_markers m JOIN processed_consumers c "
                                   "USING (cid) WHERE name = 'new'"),
                     (long long)(int32_t)(uint32_t)(fp >> 32));
    ib_recorder_close(r);
}

static void test_migrates_version_2(void **state)
{
    (void)state;
    sqlite3 *db = raw_open("v2.db");
    exec_raw(db, V2_SCHEMA "PRAGMA user_version = 2;");
    insert_old_markers(db, 100, 20);
    char held[IB_ID_BUF_SIZE];
    rt_id(held, 999);
    char *ins = sqlite3_mprintf("INSERT INTO processed_claims VALUES ('old', '%s', 'A', 5, 2),"
                                " ('old', 'x', 'A', 5, 2)",
                                held);
    exec_raw(db, ins);
    sqlite3_free(ins);
    sqlite3_close(db);
    check_migrated("v2.db", 100, 20);
    db = raw_open("v2.db");
    /* The claim kept its attempts; one whose id no event can have is gone. */
    assert_int_equal(query_int(db, "SELECT attempts FROM processed_claims"), 2);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_claims"), 1);
    char *sql = query_text(db, "SELECT sql FROM sqlite_master WHERE name = 'processed_markers'");
    assert_non_null(strstr(sql, "WITHOUT ROWID"));
    assert_non_null(strstr(sql, "fp INTEGER"));
    free(sql);
    sqlite3_close(db);
}

/* Version 1 migrates in the one opening transaction too. */
static void test_migrates_version_1(void **state)
{
    (void)state;
    sqlite3 *db = raw_open("v1.db");
    exec_raw(db, "CREATE TABLE processed_log (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "
                 "ts INTEGER NOT NULL, PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;"
                 "CREATE TABLE processed_claims (consumer TEXT NOT NULL, event_id TEXT NOT "
                 "NULL, owner TEXT NOT NULL, expires_ms INTEGER NOT NULL, "
                 "PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;"
                 "PRAGMA user_version = 1;");
    insert_old_markers(db, 200, 5);
    sqlite3_close(db);
    check_migrated("v1.db", 200, 5);
}

/* The layout of version 3 exactly as that build wrote it. */
#define V3_SCHEMA                                                                                  \
    "CREATE TABLE processed_log (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "                 \
    "ts INTEGER NOT NULL, fp INTEGER, PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;"            \
    "CREATE TABLE processed_claims (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "              \
    "owner TEXT NOT NULL, expires_ms INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "      \
    "PRIMARY KEY (consumer, event_id)) WITHOUT ROWID;"                                             \
    "CREATE TABLE processed_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, subject TEXT NOT "      \
    "NULL, msg_id TEXT NOT NULL, data BLOB NOT NULL, staged_ms INTEGER NOT NULL);"

/* Version 3: fingerprints, claims with their attempts and staged messages
 * all carry over. */
static void test_migrates_version_3(void **state)
{
    (void)state;
    char id[IB_ID_BUF_SIZE], held[IB_ID_BUF_SIZE];
    sqlite3 *db = raw_open("v3.db");
    exec_raw(db, V3_SCHEMA "PRAGMA user_version = 3;");
    insert_old_markers(db, 300, 30);
    rt_id(id, 300);
    /* a fingerprint as ib_fingerprint makes them: all 64 bits used */
    char *sql = sqlite3_mprintf("UPDATE processed_log SET fp = %lld WHERE event_id = '%s'",
                                (long long)0x4d3c2b1a00000077ll, id);
    exec_raw(db, sql);
    sqlite3_free(sql);
    rt_id(held, 999);
    sql = sqlite3_mprintf("INSERT INTO processed_claims VALUES ('old', '%s', 'A', 5, 3)", held);
    exec_raw(db, sql);
    sqlite3_free(sql);
    exec_raw(db, "INSERT INTO processed_outbox (subject, msg_id, data, staged_ms) "
                 "VALUES ('out.x', 'm1', x'01', 1)");
    sqlite3_close(db);

    ib_recorder *r = open_uri("sqlite:%s", "v3.db");
    db = ib__sqlite_db(r);
    assert_int_equal(query_int(db, "PRAGMA user_version"), IB__SQLITE_SCHEMA_VERSION);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log"), 30);
    bool found = false;
    int64_t ts = 0;
    CHECK(ib_recorder_lookup(r, &found, &ts, "old", id, &err));
    assert_true(found);
    assert_int_equal(ts, 1600000000300LL);
    /* the fingerprint came along: another payload under the id conflicts */
    ib_marker_key key = {"old", id};
    ib_claim_info info;
    ib_claim_request req = {.owner = "B", .lease_ms = 1000};
    uint64_t other_fp = 0x4e3c2b1a00000077ull;
    CHECK(ib__recorder_acquire_fp(r, &info, &key, &other_fp, 1, &req, &err));
    assert_int_equal(info.state, IB_CLAIM_CONFLICT);
    /* the lapsed claim kept its three attempts */
    key.event_id = held;
    CHECK(ib__recorder_acquire_fp(r, &info, &key, NULL, 1, &req, &err));
    assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(info.attempts, 4);
    uint64_t staged = 0;
    CHECK(ib__recorder_outbox_count(r, &staged, &err));
    assert_int_equal(staged, 1);
    ib_recorder_close(r);
}

/* A version-2 file with an outbox table someone else made is not ours. */
static void test_v2_with_foreign_outbox_refused(void **state)
{
    (void)state;
    sqlite3 *db = raw_open("v2x.db");
    exec_raw(db, V2_SCHEMA "CREATE TABLE processed_outbox (x); PRAGMA user_version = 2;");
    sqlite3_close(db);
    char path[4096], uri[4200];
    ib_recorder *r = NULL;
    path_of(path, sizeof(path), "v2x.db");
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_ERR_SCHEMA);
    assert_non_null(strstr(err.msg, "processed_outbox"));
}

/* A newer version migrates the file while this recorder has it open: the
 * next transaction sees the new user_version and refuses, IB_ERR_SCHEMA,
 * writing nothing (issue 23, part 4). */
static void test_schema_changed_under_an_open_recorder(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s", "live.db");
    mark_n(r, "c", 0, 3);
    sqlite3 *db = raw_open("live.db");
    exec_raw(db, "PRAGMA user_version = 8");
    sqlite3_close(db);
    char id[IB_ID_BUF_SIZE];
    rt_id(id, 7);
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, "A", 1000, &err), IB_ERR_SCHEMA);
    assert_non_null(strstr(err.msg, "schema is now version 8, this process speaks version 7"));
    bool done = true;
    assert_int_equal(ib_recorder_is_processed(r, &done, "c", id, &err), IB_ERR_SCHEMA);
    ib_recorder_close(r);
    db = raw_open("live.db");
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log"), 3);
    sqlite3_close(db);
}

static void test_newer_schema_refused(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s", "new.db");
    mark_n(r, "c", 0, 3);
    ib_recorder_close(r);
    sqlite3 *db = raw_open("new.db");
    exec_raw(db, "PRAGMA user_version = 8");
    sqlite3_close(db);

    char path[4096], uri[4200];
    path_of(path, sizeof(path), "new.db");
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    r = (ib_recorder *)&r;
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_ERR_SCHEMA);
    assert_null(r);
    assert_non_null(strstr(err.msg, "schema version 8 is newer than this build understands (7)"));
    assert_non_null(strstr(err.msg, "new.db"));
    /* Left untouched. */
    db = raw_open("new.db");
    assert_int_equal(query_int(db, "PRAGMA user_version"), 8);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log"), 3);
    sqlite3_close(db);
}

static void test_unknown_layout_refused(void **state)
{
    (void)state;
    sqlite3 *db = raw_open("odd.db");
    exec_raw(db, "CREATE TABLE processed_log (key TEXT PRIMARY KEY, at INTEGER)");
    exec_raw(db, "INSERT INTO processed_log VALUES ('k', 1)");
    sqlite3_close(db);
    char path[4096], uri[4200];
    path_of(path, sizeof(path), "odd.db");
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    ib_recorder *r = NULL;
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_ERR_SCHEMA);
    assert_non_null(strstr(err.msg, "not a layout this build can migrate"));
    db = raw_open("odd.db");
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log"), 1);
    assert_int_equal(query_int(db, "PRAGMA user_version"), 0);
    sqlite3_close(db);
}

static void test_prune_in_batches(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s", "prune.db");
    /* Old and new markers interleaved in key order, over three consumers. */
    for (uint64_t i = 0; i < 145; i++) {
        char id[IB_ID_BUF_SIZE];
        const char *consumer = i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c";
        rt_id(id, i);
        rt_clock_set(i < 95 ? 1000 + (int64_t)i : 900000 + (int64_t)i);
        CHECK(ib_recorder_mark(r, consumer, id, &err));
    }
    ib__sqlite_set_prune_batch(r, 10);
    uint64_t removed = 0;
    CHECK(ib_recorder_prune(r, &removed, 900000, &err));
    assert_int_equal(removed, 95);
    /* 145 rows in ranges of 10: 15 transactions, plus one for claims and
     * one for the seed's spellings. */
    assert_int_equal(ib__sqlite_prune_transactions(r), 17);
    for (uint64_t i = 0; i < 145; i++) {
        char id[IB_ID_BUF_SIZE];
        bool p = true;
        rt_id(id, i);
        CHECK(ib_recorder_is_processed(r, &p, i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c", id, &err));
        assert_int_equal(p, i >= 95);
    }
    ib_recorder_close(r);
    sqlite3 *db = raw_open("prune.db");
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log"), 50);
    assert_int_equal(query_int(db, "SELECT min(ts) FROM processed_log"), 900095);
    sqlite3_close(db);
}

typedef struct holder {
    sqlite3 *db;
    int hold_ms;
    atomic_bool let_go;   /* set by the test: commit now */
    atomic_bool released; /* set just before the COMMIT */
} holder;

/* Holds the write lock for hold_ms, or until the test says let go, then
 * commits. Not cancelled: ASan reports a cancelled thread's own teardown
 * as a stack-buffer-underflow. */
static void *hold_then_commit(void *arg)
{
    holder *h = arg;
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 1000000L};
    for (int ms = 0; ms < h->hold_ms && !atomic_load(&h->let_go); ms++)
        nanosleep(&tick, NULL);
    atomic_store(&h->released, true);
    exec_raw(h->db, "COMMIT");
    return NULL;
}

/* Another connection holds the write lock: a call waits for it while its
 * busy timeout lasts, and succeeds once the lock is free. */
static void test_held_write_lock_is_waited_out(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s?busy_timeout_ms=30000", "busy.db");
    sqlite3 *db = raw_open("busy.db");
    sqlite3_busy_timeout(db, 0);
    exec_raw(db, "BEGIN IMMEDIATE");
    exec_raw(db, "INSERT INTO processed_log (consumer, event_id, ts) VALUES ('other', "
                 "'0123456789abcdef0123456789abcdef', 1)");
    holder h = {db, rt_under_valgrind() ? 1500 : 400, false, false};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_then_commit, &h), 0);
    char id[IB_ID_BUF_SIZE];
    ib_claim_state cs;
    rt_id(id, 1);
    CHECK(ib_recorder_claim(r, &cs, "c", id, "A", 1000, &err));
    assert_true(atomic_load(&h.released));
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_mark(r, "c", id, &err));
    pthread_join(t, NULL);
    assert_int_equal(query_int(db, "SELECT count(*) FROM processed_log"), 2);
    sqlite3_close(db);
    ib_recorder_close(r);
}

/* Every wait of a call ends at the busy timeout the user set (issue 30,
 * item 5): with the write lock held far longer, the call fails with the
 * recorder's error while the holder still holds it, whatever it asked. */
static void test_wait_ends_at_the_busy_timeout(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s?busy_timeout_ms=100", "stuck.db");
    sqlite3 *db = raw_open("stuck.db");
    sqlite3_busy_timeout(db, 0);
    exec_raw(db, "BEGIN IMMEDIATE");
    holder h = {db, 20000, false, false};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_then_commit, &h), 0);
    char id[IB_ID_BUF_SIZE];
    ib_claim_state cs;
    rt_id(id, 1);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", id, "A", 1000, &err), IB_ERR_BUSY);
    assert_non_null(strstr(err.msg, "gave up after"));
    assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_ERR_BUSY);
    ib_marker_key key = {"c", id};
    uint64_t fp = 0;
    ib_claim_info info;
    ib_claim_request req = {.owner = "A", .lease_ms = 1000};
    assert_int_equal(ib__recorder_acquire_fp(r, &info, &key, &fp, 1, &req, &err), IB_ERR_BUSY);
    assert_false(atomic_load(&h.released));
    atomic_store(&h.let_go, true);
    pthread_join(t, NULL);
    sqlite3_close(db);
    ib_recorder_close(r);
}

/* The busy handler polls until the call's deadline. */
static void test_busy_handler_honours_the_timeout(void **state)
{
    (void)state;
    ib_recorder *r = open_uri("sqlite:%s?busy_timeout_ms=50", "bh.db");
    sq_recorder *s = (sq_recorder *)r;
    int64_t start = ib_clock_monotonic_ns();
    int tries = 0;
    ib__sq_call_begin(s);
    while (ib__sq_busy_wait(s, tries) == 1)
        tries++;
    int64_t waited_ms = (ib_clock_monotonic_ns() - start) / 1000000;
    assert_true(waited_ms >= 50);
    assert_true(tries >= 5); /* short sleeps first: more than a handful of tries */
    s->busy_timeout_ms = 0;
    ib__sq_call_begin(s);
    assert_int_equal(ib__sq_busy_wait(s, 0), 0);
    ib_recorder_close(r);
}

static void test_two_connections_share_markers_and_claims(void **state)
{
    (void)state;
    ib_recorder *r1 = open_uri("sqlite:%s", "shared.db");
    ib_recorder *r2 = open_uri("sqlite:%s", "shared.db");
    char id[IB_ID_BUF_SIZE];
    bool p = false;
    ib_claim_state cs;
    rt_id(id, 77);
    CHECK(ib_recorder_claim(r1, &cs, "c", id, "one", 60000, &err));
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    CHECK(ib_recorder_claim(r2, &cs, "c", id, "two", 60000, &err));
    assert_int_equal(cs, IB_CLAIM_BUSY);
    CHECK(ib_recorder_mark(r1, "c", id, &err));
    CHECK(ib_recorder_is_processed(r2, &p, "c", id, &err));
    assert_true(p);
    CHECK(ib_recorder_claim(r2, &cs, "c", id, "two", 60000, &err));
    assert_int_equal(cs, IB_CLAIM_DONE);
    ib_recorder_close(r1);
    ib_recorder_close(r2);
}

static void test_errors_name_the_file(void **state)
{
    (void)state;
    char path[4096], uri[4200];
    ib_recorder *r = NULL;
    path_of(path, sizeof(path), "missing-dir/x.db");
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    /* a missing directory is a configuration error (issue 25): no restart
     * can fix it, so ibus exits 2 and the unit does not loop */
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, uri));
    assert_non_null(strstr(err.msg, "missing-dir does not exist (create it, or name a file in an "
                                    "existing directory)"));

    /* a tool that must not create the file is told it is missing, and
     * nothing is left behind */
    path_of(path, sizeof(path), "typo.db");
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    ib_recorder_options ro = {.size = sizeof(ro), .sqlite_must_exist = true};
    assert_int_equal(ib_recorder_open(&r, uri, &ro, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "no such file (check the path; only ibus run creates a "
                                    "marker file)"));
    assert_int_equal(access(path, F_OK), -1);

    path_of(path, sizeof(path), "junk.db");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 512; i++)
        fputs("this is not a database ", f);
    fclose(f);
    snprintf(uri, sizeof(uri), "sqlite:%s", path);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_ERR_RECORDER);
    assert_non_null(strstr(err.msg, uri));
    assert_non_null(strstr(err.msg, "not a database"));
    assert_null(r);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_new_file_mode_0600, setup, teardown),
    cmocka_unit_test_setup_teardown(test_existing_file_keeps_its_mode, setup, teardown),
    cmocka_unit_test_setup_teardown(test_pragmas_applied, setup, teardown),
    cmocka_unit_test_setup_teardown(test_schema_layout, setup, teardown),
    cmocka_unit_test_setup_teardown(test_migrates_seed_schema, setup, teardown),
    cmocka_unit_test_setup_teardown(test_migrates_untyped_seed_with_nulls, setup, teardown),
    cmocka_unit_test_setup_teardown(test_migrates_version_2, setup, teardown),
    cmocka_unit_test_setup_teardown(test_migrates_version_1, setup, teardown),
    cmocka_unit_test_setup_teardown(test_migrates_version_3, setup, teardown),
    cmocka_unit_test_setup_teardown(test_v2_with_foreign_outbox_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(test_schema_changed_under_an_open_recorder, setup, teardown),
    cmocka_unit_test_setup_teardown(test_unknown_layout_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(test_prune_in_batches, setup, teardown),
    cmocka_unit_test_setup_teardown(test_held_write_lock_is_waited_out, setup, teardown),
    cmocka_unit_test_setup_teardown(test_wait_ends_at_the_busy_timeout, setup, teardown),
    cmocka_unit_test_setup_teardown(test_busy_handler_honours_the_timeout, setup, teardown),
    cmocka_unit_test_setup_teardown(test_two_connections_share_markers_and_claims, setup, teardown),
    cmocka_unit_test_setup_teardown(test_errors_name_the_file, setup, teardown),
};

IB_TEST_MAIN(tests)
