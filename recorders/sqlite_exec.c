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

/* --- the retry loop --------------------------------------------------------- */

bool ib__sq_retryable(int rc)
{
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_PROTOCOL;
}

void ib__sq_backoff(sq_recorder *s, unsigned *delay_us)
{
    /* xorshift jitter keeps processes that collided from colliding again */
    s->jitter ^= s->jitter << 13;
    s->jitter ^= s->jitter >> 7;
    s->jitter ^= s->jitter << 17;
    unsigned us = *delay_us / 2 + (unsigned)(s->jitter % (*delay_us / 2 + 1));
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    if (*delay_us < BACKOFF_MAX_US)
        *delay_us *= 2;
}

int ib__sq_step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    int rrc = sqlite3_reset(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        return rrc;
    return rc;
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
            if (rc == SQLITE_OK && kind != TX_NONE)
                rc = ib__sq_step_done(s->q[Q_COMMIT]);
        }
        if (rc == SQLITE_OK)
            return IB_OK;

        /* Keep SQLite's message before the rollback replaces it. */
        char msg[IB_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", rc == IB__SQLITE_REFUSED ? "" : sqlite3_errmsg(s->db));
        if (!sqlite3_get_autocommit(s->db))
            ib__sq_step_done(s->q[Q_ROLLBACK]);
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

int ib__sq_put_marker(sq_recorder *s, const ib_marker_key *key, int64_t ts, uint64_t fp)
{
    sqlite3_stmt *mark = s->q[Q_MARK];
    int rc = sqlite3_bind_int64(mark, 3, ts);
    /* Bindings outlive a reset: "none" must be bound too. */
    if (rc == SQLITE_OK)
        rc = fp != 0 ? sqlite3_bind_int64(mark, 4, (sqlite3_int64)fp) : sqlite3_bind_null(mark, 4);
    if (rc != SQLITE_OK) {
        sqlite3_reset(mark);
        return rc;
    }
    return ib__sq_exec_key(mark, key->consumer, key->event_id);
}

int ib__sq_read_claim(sq_recorder *s, claim_row *row, const ib_marker_key *key)
{
    sqlite3_stmt *get = s->q[Q_CLAIM_GET];
    int rc = ib__sq_bind_key(get, key->consumer, key->event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(get);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(get);
        return rc == SQLITE_OK || rc == SQLITE_DONE ? SQLITE_INTERNAL : rc;
    }
    const char *holder = (const char *)sqlite3_column_text(get, 0);
    snprintf(row->holder, sizeof(row->holder), "%s", holder != NULL ? holder : "");
    row->expires = sqlite3_column_int64(get, 1);
    row->done = sqlite3_column_type(get, 2) != SQLITE_NULL;
    row->fp = row->done ? (uint64_t)sqlite3_column_int64(get, 2) : 0;
    int64_t attempts = sqlite3_column_int64(get, 3);
    row->attempts = attempts < 0 ? 0 : attempts > UINT32_MAX ? UINT32_MAX : (uint32_t)attempts;
    return sqlite3_reset(get);
}

int ib__sq_exec_owned(sqlite3_stmt *st, const ib_marker_key *key, const char *owner, int64_t ms)
{
    int rc = sqlite3_bind_text(st, 3, owner, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, ms);
    if (rc != SQLITE_OK) {
        sqlite3_reset(st);
        return rc;
    }
    return ib__sq_exec_key(st, key->consumer, key->event_id);
}

int ib__sq_write_marker(sq_recorder *s, const ib_marker_key *key, const char *owner,
                        int64_t lease_now, int64_t ts, uint64_t fp)
{
    int rc = ib__sq_exec_owned(s->q[Q_CLAIM_DEL_OWNED], key, owner, lease_now);
    if (rc == SQLITE_OK)
        rc = ib__sq_put_marker(s, key, ts, fp);
    return rc;
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
