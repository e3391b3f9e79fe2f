/* sqlite: running statements and transactions, for the recorder's calls
 * (sqlite.c) and its transactional work (sqlite_txn.c): the retry loop
 * the top of sqlite.c describes, and the statements on one key that both
 * use. Every function here expects the recorder mutex held, except
 * ib__sq_run_locked, which takes it. */
#include "sqlite_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "uuid.h"

#define BACKOFF_MAX_US 100000
#define BUSY_FIRST_US 50
#define BUSY_MAX_US 2000

/* --- the retry loop --------------------------------------------------------- */

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
    jittered_sleep(s, *delay_us);
    if (*delay_us < BACKOFF_MAX_US)
        *delay_us *= 2;
}

int ib__sq_busy_wait(void *ctx, int count)
{
    sq_recorder *s = ctx;
    int64_t now = ib_clock_monotonic_ns();
    if (count == 0)
        s->busy_since_ns = now;
    if (now - s->busy_since_ns >= s->busy_timeout_ms * 1000000)
        return 0;
    jittered_sleep(s, count < 6 ? BUSY_FIRST_US << count : BUSY_MAX_US);
    return 1;
}

int ib__sq_step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    int rrc = sqlite3_reset(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        return rrc;
    return rc;
}

/* SQLite's message for the connection's last error, or the code's own
 * text when the failure came from the recorder (out of memory, ...). */
static const char *error_text(sq_recorder *s, int rc)
{
    return sqlite3_errcode(s->db) == SQLITE_OK ? sqlite3_errstr(rc) : sqlite3_errmsg(s->db);
}

ib_status ib__sq_run(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err)
{
    ib_error local;
    unsigned delay_us = 1000;
    int64_t start = ib_clock_monotonic_ms();
    ib_error_clear(&local);
    for (;;) {
        int rc = SQLITE_OK;
        if (kind != TX_NONE)
            rc = ib__sq_step_done(s->q[kind == TX_WRITE ? Q_BEGIN_WRITE : Q_BEGIN_READ]);
        if (rc == SQLITE_OK) {
            rc = body(s, ctx, &local);
            if (rc == SQLITE_OK && kind == TX_WRITE)
                rc = ib__sq_pending_flush(s);
            if (rc == SQLITE_OK && kind != TX_NONE)
                rc = ib__sq_step_done(s->q[Q_COMMIT]);
        }
        if (rc == SQLITE_OK) {
            ib__sq_committed(s);
            return IB_OK;
        }

        /* Keep SQLite's message before the rollback replaces it. */
        char msg[IB_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", rc == IB__SQLITE_REFUSED ? "" : error_text(s, rc));
        if (!sqlite3_get_autocommit(s->db))
            ib__sq_step_done(s->q[Q_ROLLBACK]);
        ib__sq_tail_rollback(s);
        if (rc == IB__SQLITE_REFUSED) {
            if (err != NULL)
                *err = local;
            return local.status;
        }
        int64_t spent = ib_clock_monotonic_ms() - start;
        if (ib__sq_retryable(rc) && spent < s->retry_budget_ms) {
            ib__sq_backoff(s, &delay_us);
            continue;
        }
        if (ib__sq_retryable(rc))
            return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s (gave up after %lld ms)",
                                s->name, msg, (long long)spent);
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name, msg);
    }
}

void ib__sq_committed(sq_recorder *s)
{
    /* The catch-up under the write lock read every row before ours. */
    if (s->written_row > s->filter_row)
        s->filter_row = s->written_row;
    s->written_row = 0;
    s->tail_dirty = false;
}

void ib__sq_tail_rollback(sq_recorder *s)
{
    ib__sq_pending_drop(s);
    s->written_row = 0;
    if (s->tail_dirty)
        ib__sq_tail_clear(&s->tail);
    s->tail_dirty = false;
    s->claims_known = false; /* a merge may have been rolled back */
}

ib_status ib__sq_run_locked(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err)
{
    pthread_mutex_lock(&s->mu);
    ib_status st = ib__sq_run(s, kind, body, ctx, err);
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* --- statement helpers --------------------------------------------------- */

int ib__sq_bind_key(sqlite3_stmt *st, const char *consumer, const char *event_id)
{
    int rc = sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, event_id, IB_ID_LEN, SQLITE_STATIC);
    return rc;
}

int ib__sq_exec_key(sqlite3_stmt *st, const char *consumer, const char *event_id)
{
    int rc = ib__sq_bind_key(st, consumer, event_id);
    if (rc != SQLITE_OK) {
        sqlite3_reset(st);
        return rc;
    }
    return ib__sq_step_done(st);
}

int ib__sq_read_count(uint64_t *out, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = (uint64_t)sqlite3_column_int64(st, 0);
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(st);
    return rc != SQLITE_DONE ? rc : rrc;
}
