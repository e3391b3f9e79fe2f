/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: running a call's transaction: the retry loop and its deadline,
 * the synchronous level of each kind of transaction, the schema check, and
 * the checkpoints after a commit (the top of sqlite.c says why each is so).
 * Every function here expects the recorder mutex held, except
 * ib__sq_run_locked, which takes it. */
#include "sqlite_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"

#define BACKOFF_MAX_US 100000
#define BUSY_FIRST_US 50
#define BUSY_MAX_US 2000
/* The WAL's bound (the top of sqlite.c, "The WAL"). */
#define WAL_CHECKPOINT_BYTES (16 * 1024 * 1024)
#define RESTART_WAIT_MS 20
/* After a full disk: a TRUNCATE checkpoint waits as long as a RESTART and
 * is tried at most this often until one ends. */
#define TRUNCATE_PAUSE_MS 1000

bool ib__sq_retryable(int rc)
{
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_PROTOCOL;
}

/* Sleeps between half and all of `us`, jittered by xorshift so that
 * processes that collided do not collide again. */
static void jittered_sleep(sq_recorder *s, unsigned us)
{
    s->jitter ^= s->jitter << 13;
    s->jitter ^= s->jitter >> 7;
    s->jitter ^= s->jitter << 17;
    us = us / 2 + (unsigned)(s->jitter % (us / 2 + 1));
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void ib__sq_backoff(sq_recorder *s, unsigned *delay_us)
{
    int64_t left_us = (s->deadline_ns - ib_clock_monotonic_ns()) / 1000;
    unsigned us = left_us <= 0 ? 1 : left_us < (int64_t)*delay_us ? (unsigned)left_us : *delay_us;
    jittered_sleep(s, us < 2 ? 2 : us);
    if (*delay_us < BACKOFF_MAX_US)
        *delay_us *= 2;
}

void ib__sq_call_begin(sq_recorder *s)
{
    s->deadline_ns = ib_clock_monotonic_ns() + s->busy_timeout_ms * 1000000;
}

int ib__sq_busy_wait(void *ctx, int count)
{
    sq_recorder *s = ctx;
    if (ib_clock_monotonic_ns() >= s->deadline_ns)
        return 0;
    jittered_sleep(s, count < 6 ? BUSY_FIRST_US << count : BUSY_MAX_US);
    return 1;
}

int ib__sq_on_wal(void *ctx, sqlite3 *db, const char *schema, int frames)
{
    (void)db;
    (void)schema;
    ((sq_recorder *)ctx)->wal.frames = frames;
    return SQLITE_OK;
}

int ib__sqlite_read_value(sqlite3 *db, const char *sql, long long *num, char *text,
                          size_t text_size)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (num != NULL)
            *num = sqlite3_column_int64(st, 0);
        if (text != NULL) {
            const unsigned char *t = sqlite3_column_text(st, 0);
            snprintf(text, text_size, "%s", t != NULL ? (const char *)t : "");
        }
        rc = SQLITE_OK;
    }
    int frc = sqlite3_finalize(st);
    return rc != SQLITE_OK ? rc : frc;
}

int ib__sqlite_exec_fmt(sqlite3 *db, const char *fmt, long long value)
{
    char sql[96];
    snprintf(sql, sizeof(sql), fmt, value);
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

int ib__sq_check_schema(sq_recorder *s, ib_error *local)
{
    uint64_t dv = 0, version = 0;
    int rc = ib__sq_read_count(&dv, s->q[Q_DATA_VERSION]);
    if (rc != SQLITE_OK || (s->version_known && (long long)dv == s->data_version))
        return rc;
    rc = ib__sq_read_count(&version, s->q[Q_USER_VERSION]);
    if (rc != SQLITE_OK)
        return rc;
    if (version != IB__SQLITE_SCHEMA_VERSION) {
        ib_error_set(local, IB_ERR_SCHEMA,
                     "recorder %s: the file's schema is now version %llu, this process speaks "
                     "version %d; %s",
                     s->name, (unsigned long long)version, IB__SQLITE_SCHEMA_VERSION,
                     version > IB__SQLITE_SCHEMA_VERSION
                         ? "a newer infinity-bus migrated it: upgrade this one"
                         : "the file was replaced by an older one: restore it or use another");
        return IB__SQLITE_REFUSED;
    }
    s->data_version = (long long)dv;
    s->version_known = true;
    return SQLITE_OK;
}

/* Claims commit without an fsync of their own when marks use FULL or
 * EXTRA (invariant 5); the level is switched only when it changes. PRAGMA
 * synchronous takes effect when it is prepared, not when it is stepped
 * (its program only expires itself, so a kept statement's first step does
 * nothing): it is run through sqlite3_exec, which prepares it each time. */
static int set_sync(sq_recorder *s, tx_kind kind)
{
    int want = kind == TX_CLAIM && s->claims_unsynced ? 1 : s->sync_configured;
    if (!s->claims_unsynced || s->sync_now == want)
        return SQLITE_OK;
    int rc = ib__sqlite_exec_fmt(s->db, "PRAGMA synchronous = %lld", want);
    s->sync_now = rc == SQLITE_OK ? want : -1;
    return rc;
}

int ib__sq_begin(sq_recorder *s, tx_kind kind)
{
    s->cids.n = 0; /* resolved again in every transaction (invariant 6) */
    s->tally.n = 0;
    if (kind == TX_NONE)
        return SQLITE_OK;
    if (kind == TX_READ)
        return ib__sq_step_done(s->q[Q_BEGIN_READ]);
    int rc = set_sync(s, kind);
    if (rc != SQLITE_OK)
        return rc;
    int64_t t0 = ib_clock_monotonic_ns();
    rc = ib__sq_turn_take(s);
    if (rc == SQLITE_OK)
        rc = ib__sq_step_done(s->q[Q_BEGIN_WRITE]);
    int64_t waited = ib_clock_monotonic_ns() - t0;
    if (waited > s->lock_wait_max_ns)
        s->lock_wait_max_ns = waited;
    return rc;
}

/* One try: BEGIN, schema check, body, COMMIT. */
static int attempt(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *local)
{
    int rc = ib__sq_begin(s, kind);
    if (rc == SQLITE_OK && kind != TX_NONE && s->check_schema)
        rc = ib__sq_check_schema(s, local);
    if (rc == SQLITE_OK)
        rc = body(s, ctx, local);
    if (rc == SQLITE_OK && (kind == TX_CLAIM || kind == TX_MARK))
        rc = ib__sq_tally_flush(s);
    if (rc == SQLITE_OK && kind != TX_NONE)
        rc = ib__sq_step_done(s->q[Q_COMMIT]);
    return rc;
}

void ib__sq_wal_bound(sq_recorder *s)
{
    int page = s->wal.page_size > 0 ? s->wal.page_size : 4096;
    int bound = WAL_CHECKPOINT_BYTES / page, frames = s->wal.frames;
    if (s->in_memory || frames < bound)
        return;
    /* After a RESTART that could not end, the next waits until the WAL has
     * grown by as much again (or was started over by another writer), so a
     * reader on an old snapshot costs one 20 ms wait per bound written. */
    int failed = s->wal.failed_at_frames;
    if (failed > 0 && frames >= failed && frames - failed < bound)
        return;
    int64_t wait_end = ib_clock_monotonic_ns() + (int64_t)RESTART_WAIT_MS * 1000000;
    if (wait_end < s->deadline_ns)
        s->deadline_ns = wait_end;
    int log = 0, done = 0;
    if (sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_RESTART, &log, &done) ==
        SQLITE_OK) {
        s->wal.frames = 0;
        s->wal.failed_at_frames = 0;
    } else {
        s->wal.restarts_failed++;
        s->wal.failed_at_frames = frames;
    }
}

/* Whether a failed write says the disk is full: SQLite's SQLITE_FULL (a
 * write that found no space), or an I/O error whose errno says so (an
 * fsync or a truncate on a full disk, or a user's quota). */
static bool disk_full(int rc, int sys_errno)
{
    int primary = rc & 0xff;
    return primary == SQLITE_FULL ||
           (primary == SQLITE_IOERR && (sys_errno == ENOSPC || sys_errno == EDQUOT));
}

/* While a full disk is not yet answered by a TRUNCATE checkpoint, tries one,
 * at most once every TRUNCATE_PAUSE_MS and waiting RESTART_WAIT_MS at most
 * for readers and writers: it copies the WAL into the file and cuts the
 * WAL to nothing, so the space it held is the filesystem's again. It needs
 * no space when the WAL's pages are already in the file, and only what the
 * file must grow by otherwise. The call's deadline is kept. */
static void wal_truncate_after_full(sq_recorder *s)
{
    int64_t now = ib_clock_monotonic_ms();
    if (!s->wal.full || s->in_memory || now < s->wal.truncate_after_ms)
        return;
    s->wal.truncate_after_ms = now + TRUNCATE_PAUSE_MS;
    int64_t deadline = s->deadline_ns;
    int64_t wait_end = ib_clock_monotonic_ns() + (int64_t)RESTART_WAIT_MS * 1000000;
    if (wait_end < s->deadline_ns)
        s->deadline_ns = wait_end;
    if (sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) ==
        SQLITE_OK) {
        s->wal.full = false;
        s->wal.frames = 0;
    }
    s->deadline_ns = deadline;
}

ib_status ib__sq_run(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err)
{
    ib_error local;
    unsigned delay_us = 1000;
    int64_t start = ib_clock_monotonic_ms();
    ib_error_clear(&local);
    if (kind == TX_CLAIM || kind == TX_MARK)
        wal_truncate_after_full(s);
    for (;;) {
        int rc = attempt(s, kind, body, ctx, &local);
        if (rc == SQLITE_OK) {
            if (kind == TX_CLAIM || kind == TX_MARK)
                ib__sq_wal_bound(s);
            ib__sq_turn_end(s);
            return IB_OK;
        }
        /* Keep SQLite's message before the rollback replaces it. */
        char msg[IB_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "%s",
                 rc == IB__SQLITE_REFUSED              ? ""
                 : sqlite3_errcode(s->db) == SQLITE_OK ? sqlite3_errstr(rc)
                                                       : sqlite3_errmsg(s->db));
        int sys_errno = sqlite3_system_errno(s->db);
        if (!sqlite3_get_autocommit(s->db))
            ib__sq_step_done(s->q[Q_ROLLBACK]);
        ib__sq_turn_end(s);
        if (disk_full(rc, sys_errno)) {
            s->wal.full = true;
            wal_truncate_after_full(s);
        }
        if (rc == IB__SQLITE_REFUSED) {
            if (err != NULL)
                *err = local;
            return local.status;
        }
        if (ib__sq_retryable(rc) && ib_clock_monotonic_ns() < s->deadline_ns) {
            ib__sq_backoff(s, &delay_us);
            continue;
        }
        /* busy, not broken: another process holds the file's lock */
        if (ib__sq_retryable(rc))
            return ib_error_set(err, IB_ERR_BUSY, "recorder %s: %s (gave up after %lld ms)",
                                s->name, msg, (long long)(ib_clock_monotonic_ms() - start));
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name, msg);
    }
}

ib_status ib__sq_run_locked(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err)
{
    pthread_mutex_lock(&s->mu);
    ib__sq_call_begin(s);
    ib_status st = ib__sq_run(s, kind, body, ctx, err);
    pthread_mutex_unlock(&s->mu);
    return st;
}
