/* SPDX-License-Identifier: Apache-2.0 */
/* The connection every layout runs on, set up as `ibus run` sets up its
 * recorder's, and the write transaction with its measurements
 * (store_layouts.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_layouts.h"

#define BUSY_TIMEOUT_MS 10000
#define BUSY_FIRST_US 50
#define BUSY_MAX_US 1000
#define WAL_PASSIVE_BYTES (16 * 1024 * 1024)
#define WAL_RESTART_BYTES (32 * 1024 * 1024)
#define WAL_KEEP_BYTES (64 * 1024 * 1024)

void ib__sl_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("store_layouts: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void ib__sl_check(sqlite3 *db, int rc, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        ib__sl_die("%s: %s (%s)", what, db != NULL ? sqlite3_errmsg(db) : "", sqlite3_errstr(rc));
}

void ib__sl_exec(sqlite3 *db, const char *sql)
{
    ib__sl_check(db, sqlite3_exec(db, sql, NULL, NULL, NULL), sql);
}

sqlite3_stmt *ib__sl_prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    ib__sl_check(db, sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL), sql);
    return st;
}

bool ib__sl_row(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return true;
    if (rc != SQLITE_DONE)
        ib__sl_die("%s: %s", sqlite3_sql(st), sqlite3_errmsg(sqlite3_db_handle(st)));
    sqlite3_reset(st);
    return false;
}

void ib__sl_done(sqlite3_stmt *st)
{
    while (ib__sl_row(st)) {
    }
}

int64_t ib__sl_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = ib__sl_prepare(db, sql);
    int64_t v = ib__sl_row(st) ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return v;
}

double ib__sl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int64_t ib__sl_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls for the lock from 50 us up to 1 ms between tries, as the
 * recorder's handler does (SQLite's own sleeps 1, 2, 5, 10 ms...). */
static int busy_wait(void *ctx, int count)
{
    ib__sl_store *s = ctx;
    if (count == 0)
        s->busy_since = ib__sl_now_ms();
    if (ib__sl_now_ms() - s->busy_since > BUSY_TIMEOUT_MS)
        return 0;
    usleep(count < 5 ? BUSY_FIRST_US << count : BUSY_MAX_US);
    return 1;
}

static int on_wal(void *ctx, sqlite3 *db, const char *schema, int frames)
{
    ib__sl_store *s = ctx;
    int64_t bytes = (int64_t)frames * IB__SL_PAGE_SIZE;
    (void)db;
    (void)schema;
    s->wal_frames = frames;
    if (bytes > s->stats.wal_max_bytes)
        s->stats.wal_max_bytes = bytes;
    return SQLITE_OK;
}

void ib__sl_store_open(ib__sl_store *s, const char *path, const ib__sl_layout *layout,
                       int synchronous)
{
    char sql[96];
    memset(s, 0, sizeof(*s));
    s->layout = layout;
    snprintf(s->owner, sizeof(s->owner), "store_layouts-%d-%llx", (int)getpid(),
             (unsigned long long)ib__sl_unix_ms());
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    ib__sl_check(s->db, rc, path);
    sqlite3_busy_handler(s->db, busy_wait, s);
    snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%d", IB__SL_CACHE_KIB);
    ib__sl_exec(s->db, sql);
    ib__sl_exec(s->db, "PRAGMA journal_mode = WAL");
    snprintf(sql, sizeof(sql), "PRAGMA synchronous = %d", synchronous);
    ib__sl_exec(s->db, sql);
    snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %d", WAL_KEEP_BYTES);
    ib__sl_exec(s->db, sql);
    if (ib__sl_int(s->db, "PRAGMA page_size") != IB__SL_PAGE_SIZE)
        ib__sl_die("%s: page size is not %d", path, IB__SL_PAGE_SIZE);
    /* Replaces SQLite's automatic checkpoint, as the recorder's hook does. */
    sqlite3_wal_hook(s->db, on_wal, s);
    s->begin = ib__sl_prepare(s->db, "BEGIN IMMEDIATE");
    s->commit = ib__sl_prepare(s->db, "COMMIT");
    s->rollback = ib__sl_prepare(s->db, "ROLLBACK");
}

void ib__sl_store_close(ib__sl_store *s)
{
    if (s->impl != NULL && s->layout->close != NULL)
        s->layout->close(s);
    sqlite3_finalize(s->begin);
    sqlite3_finalize(s->commit);
    sqlite3_finalize(s->rollback);
    ib__sl_check(s->db, sqlite3_close(s->db), "close");
    free(s->stats.hold_ms);
    memset(s, 0, sizeof(*s));
}

/* The recorder's policy: a passive checkpoint past 16 MiB of WAL, a
 * restart (which waits for readers) past 32 MiB. */
static void checkpoint_maybe(ib__sl_store *s)
{
    int64_t bytes = (int64_t)s->wal_frames * IB__SL_PAGE_SIZE;
    if (bytes < WAL_PASSIVE_BYTES)
        return;
    int mode = bytes >= WAL_RESTART_BYTES ? SQLITE_CHECKPOINT_RESTART : SQLITE_CHECKPOINT_PASSIVE;
    int log = 0, done = 0;
    double t0 = ib__sl_now_ms();
    int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, mode, &log, &done);
    double ms = ib__sl_now_ms() - t0;
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        ib__sl_check(s->db, rc, "checkpoint");
    if (rc == SQLITE_OK && log == done)
        s->wal_frames = 0;
    s->stats.checkpoints++;
    s->stats.checkpoint_total_ms += ms;
    if (ms > s->stats.checkpoint_max_ms)
        s->stats.checkpoint_max_ms = ms;
}

static void keep_hold(ib__sl_stats *st, double ms)
{
    if (st->n == st->cap) {
        st->cap = st->cap != 0 ? st->cap * 2 : 4096;
        st->hold_ms = realloc(st->hold_ms, st->cap * sizeof(*st->hold_ms));
        if (st->hold_ms == NULL)
            ib__sl_die("out of memory");
    }
    st->hold_ms[st->n++] = ms;
}

double ib__sl_txn(ib__sl_store *s, void (*body)(ib__sl_store *, void *), void *ctx)
{
    double t0 = ib__sl_now_ms();
    ib__sl_done(s->begin);
    double t1 = ib__sl_now_ms();
    body(s, ctx);
    ib__sl_done(s->commit);
    double hold = ib__sl_now_ms() - t1;
    if (t1 - t0 > s->stats.wait_max_ms)
        s->stats.wait_max_ms = t1 - t0;
    if (s->stats.keep)
        keep_hold(&s->stats, hold);
    checkpoint_maybe(s);
    return hold;
}
