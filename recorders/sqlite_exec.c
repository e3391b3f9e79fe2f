/* sqlite: running transactions, for the recorder's calls (sqlite.c) and
 * its transactional work (sqlite_txn.c): the retry loop the top of
 * sqlite.c describes, the turn at the write lock, the schema check, and
 * what follows a commit (a merge that is due, a checkpoint). Every
 * function here expects the recorder mutex held, except
 * ib__sq_run_locked, which takes it. */
#include "sqlite_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "uuid.h"

/* The WAL's bounds (ib__sq_wal_bound): checkpoint past 16 MiB, insist
 * past 32 MiB; a transaction writes at most a merge's pages on top (a
 * merge touches at most IB__SQ_MERGE_KEYS leaves: 32 MiB at 4 KiB pages). */
#define WAL_PASSIVE_BYTES (16 * 1024 * 1024)
#define WAL_RESTART_BYTES (32 * 1024 * 1024)

/* --- the retry loop --------------------------------------------------------- */

/* SQLite's message for the connection's last error, or the code's own
 * text when the failure came from the recorder (out of memory, ...). */
static const char *error_text(sq_recorder *s, int rc)
{
    return sqlite3_errcode(s->db) == SQLITE_OK ? sqlite3_errstr(rc) : sqlite3_errmsg(s->db);
}

/* The recorder's turn at the write lock, waited for as long as SQLite's
 * busy timeout; a wait that runs out is a BUSY like SQLite's own. */
static int take_turn(sq_recorder *s)
{
    int e = ib__sq_turn_take(&s->turn, s->busy_timeout_ms);
    if (e == 0)
        return SQLITE_OK;
    return e == ETIMEDOUT ? SQLITE_BUSY : SQLITE_IOERR_LOCK;
}

/* The file must still speak the schema this recorder was opened with: a
 * newer version may have migrated it since (then nothing is written, and
 * the error tells the host to stop). user_version is read again only when
 * data_version says another connection committed. */
static int check_schema(sq_recorder *s, ib_error *local)
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

/* The work every write transaction does last: say how far this recorder
 * has read (once a second), build the filter a little when nobody runs
 * the upkeep, and insert the journal row being built. */
static int before_commit(sq_recorder *s)
{
    if (!s->check_schema)
        return ib__sq_pending_flush(s); /* still opening: no statements yet */
    int rc = ib__sq_reader_beat(s, false);
    if (rc == SQLITE_OK && ib__sq_filter_inline_due(s))
        rc = ib__sq_filter_advance(s, ib__sq_inline_chunk());
    return rc == SQLITE_OK ? ib__sq_pending_flush(s) : rc;
}

ib_status ib__sq_run(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err)
{
    ib_error local;
    unsigned delay_us = 1000;
    int64_t start = ib_clock_monotonic_ms();
    ib_error_clear(&local);
    for (;;) {
        int rc = SQLITE_OK;
        if (kind == TX_WRITE)
            rc = take_turn(s);
        if (rc == SQLITE_OK && kind != TX_NONE)
            rc = ib__sq_step_done(s->q[kind == TX_WRITE ? Q_BEGIN_WRITE : Q_BEGIN_READ]);
        if (rc == SQLITE_OK && kind != TX_NONE && s->check_schema)
            rc = check_schema(s, &local);
        if (rc == SQLITE_OK) {
            rc = body(s, ctx, &local);
            if (rc == SQLITE_OK && kind == TX_WRITE)
                rc = before_commit(s);
            if (rc == SQLITE_OK && kind != TX_NONE)
                rc = ib__sq_step_done(s->q[Q_COMMIT]);
        }
        if (rc == SQLITE_OK) {
            ib__sq_committed(s);
            if (kind == TX_WRITE)
                ib__sq_wal_bound(s); /* gives the turn back before a passive one */
            ib__sq_turn_give(&s->turn);
            return IB_OK;
        }

        /* Keep SQLite's message before the rollback replaces it. */
        char msg[IB_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "%s", rc == IB__SQLITE_REFUSED ? "" : error_text(s, rc));
        if (!sqlite3_get_autocommit(s->db))
            ib__sq_step_done(s->q[Q_ROLLBACK]);
        ib__sq_turn_give(&s->turn);
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
    if (s->beat_pending != 0)
        s->beat_at = s->beat_pending;
    s->beat_pending = 0;
    /* The catch-up under the write lock read every row before ours. */
    if (s->written_row > s->filter_row)
        s->filter_row = s->written_row;
    s->written_row = 0;
    s->tail_dirty = false;
}

void ib__sq_tail_rollback(sq_recorder *s)
{
    s->beat_pending = 0;
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

/* --- after a commit --------------------------------------------------------- */

void ib__sq_wal_bound(sq_recorder *s)
{
    int64_t bytes = (int64_t)s->wal_frames * (s->page_size > 0 ? s->page_size : 4096);
    if (s->in_memory || bytes < WAL_PASSIVE_BYTES)
        return;
    /* Past the window a passive checkpoint copies what no reader still
     * needs; past twice the window a restart waits (the busy timeout) for
     * the readers of old snapshots, so that the next write starts the WAL
     * over, holding the turn so that no writer of ours gets between. */
    int mode = bytes >= WAL_RESTART_BYTES ? SQLITE_CHECKPOINT_RESTART : SQLITE_CHECKPOINT_PASSIVE;
    /* A passive checkpoint excludes no writer, and its fsync of the
     * database file takes long enough (100 ms and more) that holding the
     * turn through it made every other process wait that long. */
    if (mode == SQLITE_CHECKPOINT_PASSIVE)
        ib__sq_turn_give(&s->turn);
    int log = 0, done = 0;
    if (sqlite3_wal_checkpoint_v2(s->db, NULL, mode, &log, &done) == SQLITE_OK && log == done)
        s->wal_frames = 0;
}

void ib__sq_maybe_merge(sq_recorder *s)
{
    if (s->tail.used < s->merge_keys)
        return;
    ib__sq_merge_ctx c = {.force = false};
    /* The call that got here has committed; a merge that fails now is
     * tried again after the next write, and nothing waits for it. */
    if (ib__sq_run(s, TX_WRITE, ib__sq_body_merge, &c, NULL) == IB_OK)
        s->merges += c.moved > 0;
    else
        s->merge_failures++;
}
