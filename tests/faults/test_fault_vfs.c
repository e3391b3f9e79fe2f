/* SPDX-License-Identifier: Apache-2.0 */
/* The fault VFS itself (tests/support/fault_vfs.h): its spec text, its
 * counting (the nth call fails, then count calls, then none), each kind
 * failing a real SQLite statement with the chosen code, SQLite staying
 * whole under an out-of-memory sweep, the environment arming it at
 * install, a recorder failing through it without knowing it is there, and
 * giving its WAL back once a full disk has room again.
 *
 * The group setup installs the shim with IB_FAULT_VFS set to fail the
 * first sync: env_arms_the_first_sync checks that (and must be the first
 * to sync); every other test disarms first. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fault_vfs.h"
#include "ib_test.h"
#include "model_seed.h"
#include "rtest.h"

static char *dir;

static int group_setup(void **state)
{
    (void)state;
    char why[256] = "";
    setenv(FAULT_VFS_ENV, "sync:1:ioerr", 1);
    if (fault_vfs_install(why, sizeof(why)) != 0) {
        print_error("%s\n", why);
        return -1;
    }
    dir = rt_tempdir();
    return dir == NULL ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rt_rmtree(dir);
    free(dir);
    return 0;
}

static int disarm(void **state)
{
    (void)state;
    fault_vfs_disarm();
    return 0;
}

/* A fresh database <dir>/<name> in `mode` ("wal" or "delete") with one
 * table t(x), synchronous=FULL so that every commit syncs. */
static sqlite3 *fresh_db(const char *name, const char *mode)
{
    char path[4096], sql[256];
    sqlite3 *db = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_extended_result_codes(db, 1);
    snprintf(sql, sizeof(sql),
             "PRAGMA journal_mode=%s; PRAGMA synchronous=FULL; "
             "CREATE TABLE IF NOT EXISTS t(x INTEGER)",
             mode);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static long long count_rows(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static int insert(sqlite3 *db)
{
    int rc = sqlite3_exec(db, "INSERT INTO t VALUES (1)", NULL, NULL, NULL);
    return rc == SQLITE_OK ? rc : sqlite3_extended_errcode(db);
}

static void arm(const char *text)
{
    char why[256] = "";
    if (fault_vfs_arm_text(text, why, sizeof(why)) != 0)
        fail_msg("arm %s: %s", text, why);
}

/* --- the spec text ---------------------------------------------------- */

static void spec_text_is_parsed(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t n;
        fault_spec first;
    } ok[] = {
        {"", 0, {0}},
        {"none", 0, {0}},
        {"write:3:full", 1, {FAULT_WRITE, 3, FAULT_FULL, 1}},
        {"sync:1:ioerr:0", 1, {FAULT_SYNC, 1, FAULT_IOERR, 0}},
        {"alloc:250:nomem:4,lock:2:busy", 2, {FAULT_ALLOC, 250, FAULT_NOMEM, 4}},
        {"shmlock:1:ioerr,shmmap:2:full,read:9:ioerr", 3, {FAULT_SHMLOCK, 1, FAULT_IOERR, 1}},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        fault_spec f[FAULT_SPEC_MAX];
        size_t n = 99;
        char why[256] = "";
        if (fault_vfs_parse(f, FAULT_SPEC_MAX, &n, ok[i].text, why, sizeof(why)) != 0)
            fail_msg("\"%s\" refused: %s", ok[i].text, why);
        assert_int_equal(n, ok[i].n);
        if (n > 0)
            assert_memory_equal(&f[0], &ok[i].first, sizeof(fault_spec));
    }
}

static void bad_spec_text_is_refused_with_a_reason(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"write", "fault \"write\": want KIND:N:CODE[:COUNT]"},
        {"write:1:full:2:3", "want KIND:N:CODE[:COUNT]"},
        {"fsync:1:ioerr", "fault \"fsync:1:ioerr\": unknown kind"},
        {"write:0:full", "N must be a number from 1"},
        {"write:-1:full", "N must be a number from 1"},
        {"write:99999999999:full", "N must be a number from 1"},
        {"write:1:enospc", "unknown code (full, ioerr, busy, nomem)"},
        {"write:1:full:x", "COUNT must be a number (0 = no end)"},
        {"write:1:busy", "write cannot fail with busy"},
        {"write:1:nomem", "write cannot fail with nomem"},
        {"alloc:1:full", "alloc cannot fail with full"},
        {"write:1:full,", "fault \"\": want KIND:N:CODE[:COUNT]"},
        {"write:1:full,,sync:1:full", "fault \"\": want"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fault_spec f[FAULT_SPEC_MAX];
        size_t n = 0;
        char why[256] = "";
        assert_int_equal(fault_vfs_parse(f, FAULT_SPEC_MAX, &n, bad[i].text, why, sizeof(why)), -1);
        if (strstr(why, bad[i].why) == NULL)
            fail_msg("\"%s\": reason \"%s\" lacks \"%s\"", bad[i].text, why, bad[i].why);
    }
    /* all or nothing: a bad second fault arms neither */
    uint64_t before = fault_vfs_fired(FAULT_WRITE);
    assert_int_equal(fault_vfs_arm_text("write:1:full,bogus:1:full", NULL, 0), -1);
    sqlite3 *db = fresh_db("all-or-nothing.db", "wal");
    assert_int_equal(insert(db), SQLITE_OK);
    assert_int_equal(fault_vfs_fired(FAULT_WRITE), before);
    sqlite3_close(db);
}

static void too_many_faults_are_refused(void **state)
{
    (void)state;
    char text[1024] = "";
    for (int i = 0; i <= FAULT_SPEC_MAX; i++)
        strcat(text, i == 0 ? "read:1:ioerr" : ",read:1:ioerr");
    fault_spec f[FAULT_SPEC_MAX];
    size_t n = 0;
    char why[256] = "";
    assert_int_equal(fault_vfs_parse(f, FAULT_SPEC_MAX, &n, text, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "more than 16 faults"));
}

/* --- counting, on the VFS's own methods ------------------------------------ */

/* Opens <dir>/<name> through the default VFS directly. The name must
 * outlive the file (SQLite keeps the pointer): it lives right after it. */
static sqlite3_file *raw_open(const char *name)
{
    sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
    sqlite3_file *f = calloc(1, (size_t)vfs->szOsFile + 4096);
    assert_non_null(f);
    char *path = (char *)f + vfs->szOsFile;
    snprintf(path, 4096, "%s/%s", dir, name);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_MAIN_DB;
    assert_int_equal(vfs->xOpen(vfs, path, f, flags, NULL), SQLITE_OK);
    return f;
}

static void raw_close(sqlite3_file *f)
{
    f->pMethods->xClose(f);
    free(f);
}

static void the_nth_call_fails_then_count_calls(void **state)
{
    (void)state;
    sqlite3_file *f = raw_open("raw.bin");
    char buf[64] = "x";
    fault_spec spec = {FAULT_WRITE, 2, FAULT_FULL, 3};
    assert_int_equal(fault_vfs_arm(&spec), 0);
    uint64_t fired = fault_vfs_fired(FAULT_WRITE), calls = fault_vfs_calls(FAULT_WRITE);
    int want[] = {SQLITE_OK, SQLITE_FULL, SQLITE_FULL, SQLITE_FULL, SQLITE_OK, SQLITE_OK};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_int_equal(f->pMethods->xWrite(f, buf, sizeof(buf), 0), want[i]);
    assert_int_equal(fault_vfs_fired(FAULT_WRITE) - fired, 3);
    assert_int_equal(fault_vfs_calls(FAULT_WRITE) - calls, 6);

    /* count 0: from the nth on, until disarmed */
    spec = (fault_spec){FAULT_SYNC, 1, FAULT_IOERR, 0};
    assert_int_equal(fault_vfs_arm(&spec), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL), SQLITE_IOERR_FSYNC);
    fault_vfs_disarm();
    assert_int_equal(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL), SQLITE_OK);

    /* an unlock never fails, nor counts */
    spec = (fault_spec){FAULT_LOCK, 1, FAULT_BUSY, 0};
    uint64_t locks = fault_vfs_calls(FAULT_LOCK);
    assert_int_equal(fault_vfs_arm(&spec), 0);
    assert_int_equal(f->pMethods->xLock(f, SQLITE_LOCK_SHARED), SQLITE_BUSY);
    assert_int_equal(f->pMethods->xUnlock(f, SQLITE_LOCK_NONE), SQLITE_OK);
    assert_int_equal(fault_vfs_calls(FAULT_LOCK) - locks, 1);
    raw_close(f);
}

static void arming_refuses_what_the_rules_refuse(void **state)
{
    (void)state;
    fault_spec bad[] = {
        {FAULT_WRITE, 0, FAULT_FULL, 1},
        {FAULT_SYNC, 1, FAULT_BUSY, 1},
        {FAULT_ALLOC, 1, FAULT_IOERR, 1},
        {FAULT_KINDS, 1, FAULT_FULL, 1},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(fault_vfs_arm(&bad[i]), -1);
    assert_int_equal(fault_vfs_arm(NULL), -1);
    assert_string_equal(fault_kind_name(FAULT_SHMMAP), "shmmap");
    assert_string_equal(fault_code_name(FAULT_NOMEM), "nomem");
    assert_string_equal(fault_kind_name(FAULT_KINDS), "?");
}

/* --- each kind through SQLite ------------------------------------------ */

static void env_arms_the_first_sync(void **state)
{
    (void)state;
    assert_string_equal(sqlite3_vfs_find(NULL)->zName, FAULT_VFS_NAME);
    assert_int_equal(fault_vfs_fired(FAULT_SYNC), 0);
    sqlite3_file *f = raw_open("env.bin");
    assert_int_equal(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL), SQLITE_IOERR_FSYNC);
    assert_int_equal(f->pMethods->xSync(f, SQLITE_SYNC_NORMAL), SQLITE_OK);
    assert_int_equal(fault_vfs_fired(FAULT_SYNC), 1);
    raw_close(f);
}

static void a_failed_write_rolls_the_commit_back(void **state)
{
    (void)state;
    sqlite3 *db = fresh_db("write.db", "wal");
    arm("write:1:full");
    assert_int_equal(insert(db), SQLITE_FULL);
    assert_int_equal(insert(db), SQLITE_OK);
    arm("write:1:ioerr:0");
    assert_int_equal(insert(db), SQLITE_IOERR_WRITE);
    fault_vfs_disarm();
    assert_int_equal(count_rows(db), 1);
    assert_int_equal(sqlite3_exec(db, "PRAGMA integrity_check", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void a_failed_sync_fails_the_commit(void **state)
{
    (void)state;
    sqlite3 *db = fresh_db("sync.db", "delete");
    arm("sync:1:ioerr");
    assert_int_equal(insert(db), SQLITE_IOERR_FSYNC);
    arm("sync:1:full");
    assert_int_equal(insert(db), SQLITE_FULL);
    fault_vfs_disarm();
    assert_int_equal(insert(db), SQLITE_OK);
    /* a rollback journal is undone when the sync fails: one row */
    assert_int_equal(count_rows(db), 1);
    sqlite3_close(db);
}

static void a_failed_lock_fails_the_statement(void **state)
{
    (void)state;
    sqlite3 *db = fresh_db("lock.db", "delete");
    arm("lock:1:ioerr");
    assert_int_equal(insert(db), SQLITE_IOERR_LOCK);
    arm("lock:1:busy:0");
    assert_int_equal(insert(db), SQLITE_BUSY);
    fault_vfs_disarm();
    assert_int_equal(insert(db), SQLITE_OK);
    assert_int_equal(count_rows(db), 1);
    sqlite3_close(db);
}

static void a_failed_shm_lock_fails_the_statement(void **state)
{
    (void)state;
    sqlite3 *db = fresh_db("shmlock.db", "wal");
    arm("shmlock:1:ioerr:0");
    assert_int_equal(insert(db), SQLITE_IOERR_SHMLOCK);
    fault_vfs_disarm();
    assert_int_equal(insert(db), SQLITE_OK);
    assert_int_equal(count_rows(db), 1);
    sqlite3_close(db);
}

static void a_failed_shm_map_fails_the_statement(void **state)
{
    (void)state;
    sqlite3 *db = fresh_db("shmmap.db", "wal");
    sqlite3_close(db);
    /* a new connection maps the wal-index at its first read */
    char path[4096];
    snprintf(path, sizeof(path), "%s/shmmap.db", dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_extended_result_codes(db, 1);
    arm("shmmap:1:ioerr:0");
    assert_int_equal(insert(db), SQLITE_IOERR_SHMMAP);
    fault_vfs_disarm();
    assert_int_equal(insert(db), SQLITE_OK);
    sqlite3_close(db);
}

/* SQLite's own malloc test, in small: fail the 1st, 2nd, ... allocation
 * of a transaction until one runs without a fault. Each either commits
 * or leaves nothing, and the file stays whole. */
static void an_allocation_sweep_keeps_the_file_whole(void **state)
{
    (void)state;
    sqlite3 *db = fresh_db("alloc.db", "wal");
    long long rows = 0;
    unsigned failures = 0;
    for (unsigned n = 1; n < 10000; n++) {
        uint64_t fired = fault_vfs_fired(FAULT_ALLOC);
        fault_spec f = {FAULT_ALLOC, n, FAULT_NOMEM, n % 2 == 0 ? 1 : 0};
        assert_int_equal(fault_vfs_arm(&f), 0);
        int rc = sqlite3_exec(db,
                              "BEGIN; INSERT INTO t VALUES (1); "
                              "INSERT INTO t SELECT x FROM t LIMIT 1; COMMIT",
                              NULL, NULL, NULL);
        fault_vfs_disarm();
        if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        rows += rc == SQLITE_OK ? 2 : 0;
        failures += rc != SQLITE_OK;
        if (rc != SQLITE_OK)
            assert_int_equal(rc & 0xff, SQLITE_NOMEM);
        assert_int_equal(count_rows(db), rows);
        if (fault_vfs_fired(FAULT_ALLOC) == fired)
            break; /* ran to the end without reaching the nth allocation */
    }
    assert_true(failures > 0);
    assert_int_equal(sqlite3_exec(db, "PRAGMA integrity_check", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* --- the model test's seed SQL under faults ------------------------------ */

/* Removes the database at `path` and its WAL and shared-memory files. */
static void remove_db(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char file[4200];
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        snprintf(file, sizeof(file), "%s%s", path, suffixes[i]);
        unlink(file);
    }
}

/* Whether a connection of its own sees (consumer "c", id) in <dir>/name. */
static bool row_seen_by_another(const char *name, const char *id)
{
    char path[4096];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT 1 FROM processed_log WHERE consumer = 'c' "
                                        "AND event_id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    bool seen = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return seen;
}

/* The model test's oracle is the seed connection's own SELECT: after a
 * failed INSERT it must see what every other connection sees. A ROLLBACK
 * run while the fault was still armed failed too (an allocation), left
 * the connection in its transaction, and its SELECT saw its own
 * uncommitted row: two false violations in 300 seeds. Every kind, at
 * every nth call, with counts 1 to 3 and "from then on". */
static void the_seed_sql_ends_its_transaction_under_every_fault(void **state)
{
    (void)state;
    static const char *kinds[] = {"alloc:%u:nomem:%u",  "write:%u:ioerr:%u", "write:%u:full:%u",
                                  "sync:%u:ioerr:%u",   "read:%u:ioerr:%u",  "lock:%u:busy:%u",
                                  "shmlock:%u:busy:%u", "shmmap:%u:ioerr:%u"};
    char path[4096], why[256], id[IB_ID_BUF_SIZE];
    unsigned failed = 0;
    snprintf(path, sizeof(path), "%s/seed.db", dir);
    rt_id(id, 1);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (unsigned count = 0; count <= 3; count++)
            for (unsigned n = 1; n < 60; n++) {
                remove_db(path);
                seed_db *s = NULL;
                assert_int_equal(seed_open(&s, path, 20, why, sizeof(why)), 0);
                char spec[64];
                snprintf(spec, sizeof(spec), kinds[k], n, count);
                arm(spec);
                int rc = seed_insert(s, "c", id, strlen(id), 1.0);
                fault_vfs_disarm();
                assert_true(seed_end_transaction(s));
                bool own = false;
                assert_int_equal(seed_select(s, &own, "c", id), SQLITE_OK);
                if (own != row_seen_by_another("seed.db", id))
                    fail_msg("%s: insert -> %d, own SELECT %d, another's %d", spec, rc, own, !own);
                failed += rc != SQLITE_OK;
                seed_close(s);
            }
    assert_true(failed > 0);
}

/* --- a recorder, unchanged, over the shim -------------------------------- */

static void a_recorder_fails_through_the_shim(void **state)
{
    (void)state;
    char uri[4200], id[IB_ID_BUF_SIZE];
    ib_recorder *r = NULL;
    ib_error err;
    bool done = true;
    snprintf(uri, sizeof(uri), "sqlite:%s/recorder.db", dir);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_OK);
    rt_id(id, 1);
    arm("write:1:full:0");
    assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_ERR_RECORDER);
    assert_non_null(strstr(err.msg, "database or disk is full"));
    fault_vfs_disarm();
    assert_int_equal(ib_recorder_is_processed(r, &done, "c", id, &err), IB_OK);
    assert_false(done);
    assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_OK);
    assert_int_equal(ib_recorder_is_processed(r, &done, "c", id, &err), IB_OK);
    assert_true(done);
    ib_recorder_close(r);
}

/* The size of <dir>/<name>-wal; 0 when there is none. */
static long long wal_bytes(const char *name)
{
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/%s-wal", dir, name);
    return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

/* Issue 43: on a small disk the WAL took the space, and nothing gave it
 * back: a checkpoint ran only after a commit, and the WAL is cut back only
 * when a checkpoint starts it over. Now a write that finds the disk full
 * leads to a TRUNCATE checkpoint, tried at once and then at most once a
 * second before later writes until one ends, so once the space is back the
 * WAL is copied into the file and cut to nothing. Below 16 MiB no other
 * checkpoint runs: before the change the WAL only grew. */
static void a_full_disk_gives_the_wal_back_once_space_returns(void **state)
{
    (void)state;
    char uri[4200], id[IB_ID_BUF_SIZE];
    ib_recorder *r = NULL;
    ib_error err;
    bool done = false;
    snprintf(uri, sizeof(uri), "sqlite:%s/full.db", dir);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_OK);
    for (unsigned i = 0; i < 300; i++) {
        rt_id(id, 5000 + i);
        assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_OK);
    }
    long long grown = wal_bytes("full.db");
    assert_true(grown > 256 * 1024);

    arm("write:1:full:0"); /* the disk is full, and stays so */
    uint64_t fired = fault_vfs_fired(FAULT_WRITE);
    for (unsigned i = 0; i < 50; i++) {
        rt_id(id, 9000 + i);
        assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_ERR_RECORDER);
        assert_non_null(strstr(err.msg, "database or disk is full"));
    }
    /* One failed write per mark, and one checkpoint tried at the first:
     * an outage does not spin on checkpoints. */
    assert_true(fault_vfs_fired(FAULT_WRITE) - fired <= 52);
    fault_vfs_disarm(); /* space is back */
    assert_true(wal_bytes("full.db") >= grown);

    usleep(1100 * 1000); /* past the pause between two checkpoint tries */
    rt_id(id, 9000);
    assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_OK);
    long long after = wal_bytes("full.db");
    print_message("WAL %lld bytes when the disk filled, %lld after the next mark\n", grown, after);
    assert_true(after < grown / 10);
    for (unsigned i = 0; i < 300; i += 37) {
        rt_id(id, 5000 + i);
        assert_int_equal(ib_recorder_is_processed(r, &done, "c", id, &err), IB_OK);
        assert_true(done);
    }
    rt_id(id, 9001);
    assert_int_equal(ib_recorder_is_processed(r, &done, "c", id, &err), IB_OK);
    assert_false(done);
    ib_recorder_close(r);
}

/* Syncs of the file one call makes. */
#define SYNCS_OF(call)                                                                             \
    ({                                                                                             \
        uint64_t before_ = fault_vfs_calls(FAULT_SYNC);                                            \
        assert_int_equal((call), IB_OK);                                                           \
        fault_vfs_calls(FAULT_SYNC) - before_;                                                     \
    })

/* Invariant 5 of recorders/sqlite.c: at synchronous FULL (the default) a
 * mark is on disk when the call returns, because its commit syncs the WAL;
 * a claim does not sync (the next mark's sync covers it); at NORMAL nothing
 * syncs. A sync that fails fails the call and the commit: nobody sees the
 * mark, and a retry makes it. */
static void a_mark_syncs_its_commit_and_a_claim_does_not(void **state)
{
    (void)state;
    char uri[4200], id[IB_ID_BUF_SIZE];
    ib_recorder *r = NULL;
    ib_error err;
    ib_marker_key key = {"c", id};
    ib_claim_info info;
    ib_claim_request req = {.owner = "o", .lease_ms = 60000};
    bool marked = false, done = false;
    snprintf(uri, sizeof(uri), "sqlite:%s/durable.db", dir);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_OK);
    rt_id(id, 7);
    assert_int_equal(SYNCS_OF(ib_recorder_acquire_batch(r, &info, &key, 1, &req, &err)), 0);
    assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
    assert_int_equal(SYNCS_OF(ib_recorder_mark_owned_batch(r, &marked, &key, 1, "o", &err)), 1);
    assert_true(marked);
    rt_id(id, 8);
    arm("sync:1:ioerr");
    assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_ERR_RECORDER);
    fault_vfs_disarm();
    assert_false(row_seen_by_another("durable.db", id));
    assert_int_equal(ib_recorder_is_processed(r, &done, "c", id, &err), IB_OK);
    assert_false(done);
    assert_int_equal(SYNCS_OF(ib_recorder_mark(r, "c", id, &err)), 1);
    assert_true(row_seen_by_another("durable.db", id));
    ib_recorder_close(r);

    snprintf(uri, sizeof(uri), "sqlite:%s/normal.db?synchronous=normal", dir);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_OK);
    assert_int_equal(SYNCS_OF(ib_recorder_mark(r, "c", id, &err)), 0);
    ib_recorder_close(r);
}

/* A claim after a mark switches the connection to NORMAL; every
 * allocation of that claim fails in turn. Whatever failed (the switch
 * itself included), the next claim still commits without a sync and the
 * next mark with one: a failed switch leaves the level unknown, never
 * taken for the one asked. */
static void a_failed_level_switch_is_made_again(void **state)
{
    (void)state;
    char uri[4200], id[IB_ID_BUF_SIZE];
    ib_recorder *r = NULL;
    ib_error err;
    ib_marker_key key = {"c", id};
    ib_claim_info info;
    ib_claim_request req = {.owner = "o", .lease_ms = 60000};
    bool marked = false;
    unsigned failures = 0, next_id = 1000;
    snprintf(uri, sizeof(uri), "sqlite:%s/switch.db", dir);
    assert_int_equal(ib_recorder_open(&r, uri, NULL, &err), IB_OK);
    for (unsigned n = 1; n < 10000; n++) {
        rt_id(id, next_id++);
        assert_int_equal(ib_recorder_mark(r, "c", id, &err), IB_OK); /* at FULL now */
        rt_id(id, next_id++);
        uint64_t fired = fault_vfs_fired(FAULT_ALLOC);
        fault_spec f = {FAULT_ALLOC, n, FAULT_NOMEM, 1};
        assert_int_equal(fault_vfs_arm(&f), 0);
        ib_status st = ib_recorder_acquire_batch(r, &info, &key, 1, &req, &err);
        fault_vfs_disarm();
        failures += st != IB_OK;
        rt_id(id, next_id++);
        assert_int_equal(SYNCS_OF(ib_recorder_acquire_batch(r, &info, &key, 1, &req, &err)), 0);
        assert_int_equal(info.state, IB_CLAIM_ACQUIRED);
        assert_int_equal(SYNCS_OF(ib_recorder_mark_owned_batch(r, &marked, &key, 1, "o", &err)), 1);
        assert_true(marked);
        if (fault_vfs_fired(FAULT_ALLOC) == fired)
            break; /* ran to the end without reaching the nth allocation */
    }
    assert_true(failures > 0);
    ib_recorder_close(r);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(env_arms_the_first_sync),
        cmocka_unit_test_setup(spec_text_is_parsed, disarm),
        cmocka_unit_test_setup(bad_spec_text_is_refused_with_a_reason, disarm),
        cmocka_unit_test_setup(too_many_faults_are_refused, disarm),
        cmocka_unit_test_setup(the_nth_call_fails_then_count_calls, disarm),
        cmocka_unit_test_setup(arming_refuses_what_the_rules_refuse, disarm),
        cmocka_unit_test_setup(a_failed_write_rolls_the_commit_back, disarm),
        cmocka_unit_test_setup(a_failed_sync_fails_the_commit, disarm),
        cmocka_unit_test_setup(a_failed_lock_fails_the_statement, disarm),
        cmocka_unit_test_setup(a_failed_shm_lock_fails_the_statement, disarm),
        cmocka_unit_test_setup(a_failed_shm_map_fails_the_statement, disarm),
        cmocka_unit_test_setup(an_allocation_sweep_keeps_the_file_whole, disarm),
        cmocka_unit_test_setup(a_recorder_fails_through_the_shim, disarm),
        cmocka_unit_test_setup(a_full_disk_gives_the_wal_back_once_space_returns, disarm),
        cmocka_unit_test_setup(a_mark_syncs_its_commit_and_a_claim_does_not, disarm),
        cmocka_unit_test_setup(a_failed_level_switch_is_made_again, disarm),
        cmocka_unit_test_setup(the_seed_sql_ends_its_transaction_under_every_fault, disarm),
    };
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
