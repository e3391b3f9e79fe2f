/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: transactional work and its outbox (recorder.h, "transactional
 * work (sqlite)" and "the outbox").
 *
 * ib__recorder_transact holds the recorder mutex and the file's write lock
 * (BEGIN IMMEDIATE) from its first key to its COMMIT, so work runs one at
 * a time per file, and a crash anywhere before the COMMIT leaves nothing of
 * it: no effect, no marker, no outbox row. The recorder's other calls
 * retry their whole transaction on BUSY; this one only does so while no
 * work has run, since work is not ours to replay.
 *
 * Work gets the recorder's own connection. An authorizer stands between it
 * and what would break the guarantee: ending the transaction or our
 * savepoint, writing the recorder's tables, attaching files, pragmas. The
 * authorizer is installed once per call and only refuses while `guarded`
 * is set (while work runs, outside ib__txn_outbox_put), because installing
 * one expires every prepared statement of the connection: toggling it
 * around each work would re-prepare ours for every key. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"

struct ib__txn {
    sq_recorder *s;
    bool guarded; /* the authorizer refuses: work's own statements run */
};

/* Set by a pass when the work left SQLite in autocommit: not an SQLite
 * code, and never retried. */
#define TXN_GONE (-2)

/* SQLite asks this when a statement is prepared (and re-prepared). Denied
 * statements fail with SQLITE_AUTH and leave the transaction as it was. */
static int authorize(void *ud, int action, const char *a1, const char *a2, const char *db,
                     const char *trigger)
{
    const ib__txn *txn = ud;
    (void)db;
    (void)trigger;
    if (!txn->guarded)
        return SQLITE_OK;
    switch (action) {
    case SQLITE_TRANSACTION:
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
    case SQLITE_PRAGMA:
    /* A trigger outlives the work, and its body is only checked when a
     * statement that fires it is prepared, perhaps with no authorizer. */
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_TEMP_TRIGGER:
        return SQLITE_DENY;
    case SQLITE_SAVEPOINT: /* a1: BEGIN, RELEASE or ROLLBACK; a2: the name */
        return a2 != NULL && strcasecmp(a2, IB__SQ_SAVEPOINT) == 0 ? SQLITE_DENY : SQLITE_OK;
    case SQLITE_INSERT: /* a1: the table */
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_TEMP_TABLE:
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_TEMP_VIEW:
        return ib__sqlite_schema_owns(a1) ? SQLITE_DENY : SQLITE_OK;
    case SQLITE_ALTER_TABLE: /* a2: the table */
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TEMP_INDEX:
    case SQLITE_DROP_TRIGGER:
    case SQLITE_DROP_TEMP_TRIGGER:
        return ib__sqlite_schema_owns(a1) || ib__sqlite_schema_owns(a2) ? SQLITE_DENY : SQLITE_OK;
    default:
        return SQLITE_OK;
    }
}

sqlite3 *ib__txn_db(ib__txn *txn)
{
    return txn != NULL ? txn->s->db : NULL;
}

ib_status ib__txn_outbox_put(ib__txn *txn, const char *subject, const char *msg_id,
                             const void *data, size_t len, ib_error *err)
{
    if (txn == NULL || subject == NULL || subject[0] == '\0' || msg_id == NULL ||
        msg_id[0] == '\0' || (len > 0 && data == NULL) || len > INT32_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: bad outbox message");
    sq_recorder *s = txn->s;
    sqlite3_stmt *st = s->q[Q_OUTBOX_PUT];
    bool guarded = txn->guarded;
    txn->guarded = false;
    int rc = sqlite3_bind_text(st, 1, subject, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, msg_id, -1, SQLITE_STATIC);
    /* An empty message is a zero-length blob, never NULL (NOT NULL). */
    if (rc == SQLITE_OK)
        rc = len > 0 ? sqlite3_bind_blob(st, 3, data, (int)len, SQLITE_STATIC)
                     : sqlite3_bind_zeroblob(st, 3, 0);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, s->base.now_ms());
    if (rc == SQLITE_OK)
        rc = ib__sq_step_done(st);
    else
        sqlite3_reset(st);
    /* The caller's buffers are gone after this call. */
    sqlite3_clear_bindings(st);
    txn->guarded = guarded;
    if (rc != SQLITE_OK)
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: cannot stage a message: %s",
                            s->name, sqlite3_errmsg(s->db));
    return IB_OK;
}

/* --- ib__recorder_transact ----------------------------------------------- */

typedef struct txn_call {
    sq_recorder *s;
    ib__txn txn;
    ib__txn_result *out;
    const ib_marker_key *keys;
    size_t n;
    const ib__txn_request *req;
    ib__txn_work_fn work;
    void *ctx;
    size_t ran_to;  /* out[0..ran_to) holds every key whose work ran */
    ib_error local; /* why the file was refused (IB__SQLITE_REFUSED) */
    size_t decided;
} txn_call;

/* Whether key i may run: not marked, and no other owner's live claim. */
static int fence(txn_call *c, size_t i, ib__txn_result *res, sq_state *st)
{
    int64_t cid;
    int rc = ib__sq_state_get(c->s, st, &cid, &c->keys[i]);
    if (rc != SQLITE_OK)
        return rc;
    if (st->done)
        *res = IB__TXN_DONE;
    else if (ib__sq_foreign_claim(st, c->req->owner, c->s->base.lease_now_ms()))
        *res = IB__TXN_LOST;
    else
        *res = IB__TXN_NOT_RUN;
    return SQLITE_OK;
}

/* Runs key i's work in its savepoint and keeps or undoes it. */
static int run_work(txn_call *c, size_t i)
{
    sq_recorder *s = c->s;
    int rc = ib__sq_step_done(s->q[Q_SAVEPOINT]);
    if (rc != SQLITE_OK)
        return rc;
    c->txn.guarded = true;
    bool keep = c->work(c->ctx, i, &c->txn);
    c->txn.guarded = false;
    c->out[i] = IB__TXN_ROLLED_BACK;
    c->ran_to = i + 1;
    /* A failed statement inside work (a full disk, ...) may have rolled
     * the whole transaction back; what follows would run in autocommit. */
    if (sqlite3_get_autocommit(s->db))
        return TXN_GONE;
    if (!keep) {
        rc = ib__sq_step_done(s->q[Q_SAVEPOINT_UNDO]);
        return rc == SQLITE_OK ? ib__sq_step_done(s->q[Q_SAVEPOINT_RELEASE]) : rc;
    }
    const uint64_t *fps = c->req->fingerprints;
    rc = ib__sq_step_done(s->q[Q_SAVEPOINT_RELEASE]);
    /* the fence was passed above, and work may not write our tables */
    bool marked = false;
    if (rc == SQLITE_OK)
        rc = ib__sq_mark(s, &marked, &c->keys[i], c->req->owner, s->base.lease_now_ms(),
                         s->base.now_ms(), fps != NULL ? fps[i] : 0);
    if (rc == SQLITE_OK)
        c->out[i] = IB__TXN_COMMITTED;
    return rc;
}

/* One transaction: BEGIN, keys until hold_ms has passed, COMMIT. */
static int pass(txn_call *c)
{
    sq_recorder *s = c->s;
    for (size_t i = 0; i < c->n; i++)
        c->out[i] = IB__TXN_NOT_RUN;
    c->ran_to = c->decided = 0;
    int rc = ib__sq_begin(s, TX_MARK);
    if (rc == SQLITE_OK)
        rc = ib__sq_check_schema(s, &c->local);
    if (rc != SQLITE_OK)
        return rc;
    int64_t opened = ib_clock_monotonic_ms();
    for (size_t i = 0; i < c->n; i++) {
        if (i > 0 && (c->req->hold_ms <= 0 || ib_clock_monotonic_ms() - opened >= c->req->hold_ms))
            break;
        sq_state st;
        rc = fence(c, i, &c->out[i], &st);
        if (rc == SQLITE_OK && c->out[i] == IB__TXN_NOT_RUN)
            rc = run_work(c, i);
        if (rc != SQLITE_OK)
            return rc;
        c->decided = i + 1;
    }
    rc = ib__sq_tally_flush(s);
    return rc == SQLITE_OK ? ib__sq_step_done(s->q[Q_COMMIT]) : rc;
}

/* After a failed pass: nothing of it survives, so every key whose work
 * ran is ROLLED_BACK, and the keys after the last of them are not
 * consumed. */
static ib_status failed(txn_call *c, int rc, size_t *consumed, ib_error *err)
{
    sq_recorder *s = c->s;
    char msg[IB_ERROR_MSG_MAX];
    if (rc == IB__SQLITE_REFUSED) {
        if (!sqlite3_get_autocommit(s->db))
            ib__sq_step_done(s->q[Q_ROLLBACK]);
        *consumed = 0;
        if (err != NULL)
            *err = c->local;
        return c->local.status;
    }
    snprintf(msg, sizeof(msg), "%s",
             rc == TXN_GONE ? "the work ended the transaction (nothing was committed)"
                            : sqlite3_errmsg(s->db));
    if (!sqlite3_get_autocommit(s->db))
        ib__sq_step_done(s->q[Q_ROLLBACK]);
    for (size_t i = 0; i < c->n; i++) {
        if (i >= c->ran_to)
            c->out[i] = IB__TXN_NOT_RUN;
        else if (c->out[i] == IB__TXN_COMMITTED)
            c->out[i] = IB__TXN_ROLLED_BACK;
    }
    *consumed = c->ran_to;
    return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: transaction: %s", s->name, msg);
}

ib_status ib__sq_transact(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                          const ib_marker_key *keys, size_t n, const ib__txn_request *req,
                          ib__txn_work_fn work, void *ctx, ib_error *err)
{
    sq_recorder *s = (sq_recorder *)r;
    txn_call c = {.s = s,
                  .txn = {.s = s},
                  .out = out,
                  .keys = keys,
                  .n = n,
                  .req = req,
                  .work = work,
                  .ctx = ctx};
    unsigned delay_us = 1000;
    ib_status st = IB_OK;
    pthread_mutex_lock(&s->mu);
    ib__sq_call_begin(s);
    sqlite3_set_authorizer(s->db, authorize, &c.txn);
    for (;;) {
        int rc = pass(&c);
        if (rc == SQLITE_OK) {
            *consumed = c.decided;
            break;
        }
        /* Before any work ran, the pass is only reads: replay it. */
        if (c.ran_to == 0 && ib__sq_retryable(rc) && ib_clock_monotonic_ns() < s->deadline_ns) {
            if (!sqlite3_get_autocommit(s->db))
                ib__sq_step_done(s->q[Q_ROLLBACK]);
            ib__sq_turn_end(s);
            ib__sq_backoff(s, &delay_us);
            continue;
        }
        st = failed(&c, rc, consumed, err);
        break;
    }
    sqlite3_set_authorizer(s->db, NULL, NULL);
    if (st == IB_OK)
        ib__sq_wal_bound(s);
    ib__sq_turn_end(s);
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* --- the outbox ------------------------------------------------------------ */

typedef struct peek_ctx {
    ib__outbox_entry *entries;
    size_t n, cap, limit;
} peek_ctx;

static void peek_clear(peek_ctx *c)
{
    ib__outbox_entries_free(c->entries, c->n);
    c->entries = NULL;
    c->n = c->cap = 0;
}

/* Copies the current row of Q_OUTBOX_PEEK into the next entry. */
static int peek_copy(peek_ctx *c, sqlite3_stmt *st)
{
    if (c->n == c->cap) {
        size_t cap = c->cap == 0 ? 16 : c->cap * 2;
        cap = cap > c->limit ? c->limit : cap;
        ib__outbox_entry *grown = realloc(c->entries, cap * sizeof(*grown));
        if (grown == NULL)
            return SQLITE_NOMEM;
        c->entries = grown;
        c->cap = cap;
    }
    ib__outbox_entry *e = &c->entries[c->n];
    const char *subject = (const char *)sqlite3_column_text(st, 1);
    const char *msg_id = (const char *)sqlite3_column_text(st, 2);
    const void *data = sqlite3_column_blob(st, 3);
    int len = sqlite3_column_bytes(st, 3);
    *e = (ib__outbox_entry){.seq = sqlite3_column_int64(st, 0),
                            .len = (size_t)len,
                            .staged_ms = sqlite3_column_int64(st, 4)};
    e->subject = strdup(subject != NULL ? subject : "");
    e->msg_id = strdup(msg_id != NULL ? msg_id : "");
    e->data = malloc(len > 0 ? (size_t)len : 1);
    c->n++; /* counted now, so that peek_clear frees what was copied */
    if (e->subject == NULL || e->msg_id == NULL || e->data == NULL)
        return SQLITE_NOMEM;
    if (len > 0)
        memcpy(e->data, data, (size_t)len);
    return SQLITE_OK;
}

static int body_peek(sq_recorder *s, void *vctx, ib_error *local)
{
    peek_ctx *c = vctx;
    sqlite3_stmt *st = s->q[Q_OUTBOX_PEEK];
    (void)local;
    peek_clear(c); /* a retried body starts over */
    int rc = sqlite3_bind_int64(
        st, 1, (uint64_t)c->limit > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)c->limit);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        rc = peek_copy(c, st);
    int rrc = sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    return rrc;
}

ib_status ib__sq_outbox_peek(ib_recorder *r, ib__outbox_entry **out, size_t *n, size_t limit,
                             ib_error *err)
{
    peek_ctx c = {.limit = limit};
    ib_status st = ib__sq_run_locked((sq_recorder *)r, TX_READ, body_peek, &c, err);
    if (st != IB_OK) {
        peek_clear(&c);
        return st;
    }
    if (c.n == 0)
        peek_clear(&c);
    *out = c.entries;
    *n = c.n;
    return IB_OK;
}

typedef struct delete_ctx {
    const int64_t *seqs;
    size_t n;
} delete_ctx;

static int body_delete(sq_recorder *s, void *vctx, ib_error *local)
{
    delete_ctx *c = vctx;
    sqlite3_stmt *st = s->q[Q_OUTBOX_DEL];
    (void)local;
    for (size_t i = 0; i < c->n; i++) {
        int rc = sqlite3_bind_int64(st, 1, c->seqs[i]);
        if (rc == SQLITE_OK)
            rc = ib__sq_step_done(st);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

ib_status ib__sq_outbox_delete(ib_recorder *r, const int64_t *seqs, size_t n, ib_error *err)
{
    delete_ctx c = {.seqs = seqs, .n = n};
    return ib__sq_run_locked((sq_recorder *)r, TX_CLAIM, body_delete, &c, err);
}

static int body_count(sq_recorder *s, void *vctx, ib_error *local)
{
    (void)local;
    return ib__sq_read_count(vctx, s->q[Q_OUTBOX_COUNT]);
}

ib_status ib__sq_outbox_count(ib_recorder *r, uint64_t *count, ib_error *err)
{
    return ib__sq_run_locked((sq_recorder *)r, TX_NONE, body_count, count, err);
}
