/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: pruning markers older than a cutoff (the tables: the top of
 * sqlite.c). There is no index on ts, so prune walks the markers' primary
 * key in ranges of prune_rows keys, one write transaction per range, each
 * examining and deleting a bounded number of rows however few are old: no
 * transaction holds the write lock for long, and other processes (and
 * other threads of this one: the mutex is given back between ranges) get
 * their turn in between. Claims whose lease ended before the cutoff go
 * last, in batches as well. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "uuid.h"

/* One range: the keys after the cursor up to the end key (inclusive; none
 * = to the end). The cursor only moves once the transaction committed. */
typedef struct prune_ctx {
    int64_t cur_cid;
    char cur_id[IB_ID_BUF_SIZE + 1]; /* exclusive lower bound */
    bool has_end;
    int64_t end_cid;
    char end_id[IB_ID_BUF_SIZE + 1];
    int64_t older_than_ms;
    int64_t lease_cutoff;
    int64_t deleted;
} prune_ctx;

static void copy_id(char *out, const unsigned char *id)
{
    snprintf(out, IB_ID_BUF_SIZE + 1, "%s", id != NULL ? (const char *)id : "");
}

/* Finds the range's end: the prune_rows-th key after the cursor. */
static int find_end(sq_recorder *s, prune_ctx *c)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT cid, event_id FROM processed_markers WHERE (event_id, cid) "
                                "> (?2, ?1) ORDER BY event_id, cid LIMIT 1 OFFSET ?3",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 1, c->cur_cid);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, c->cur_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 3, (sqlite3_int64)s->prune_rows - 1);
    c->has_end = false;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        c->has_end = true;
        c->end_cid = sqlite3_column_int64(st, 0);
        copy_id(c->end_id, sqlite3_column_text(st, 1));
        rc = SQLITE_DONE;
    }
    int frc = sqlite3_finalize(st);
    return rc == SQLITE_DONE ? frc : rc;
}

static int body_prune_range(sq_recorder *s, void *vctx, ib_error *local)
{
    prune_ctx *c = vctx;
    sqlite3_stmt *st = NULL;
    (void)local;
    int rc = find_end(s, c);
    /* two statements, so that the range's end bounds the search */
    if (rc == SQLITE_OK)
        rc =
            sqlite3_prepare_v2(s->db,
                               c->has_end ? "DELETE FROM processed_markers WHERE (event_id, cid) > "
                                            "(?2, ?1) AND (event_id, cid) <= (?4, ?3) AND ts < ?5 "
                                            "RETURNING cid"
                                          : "DELETE FROM processed_markers WHERE (event_id, cid) > "
                                            "(?2, ?1) AND ts < ?5 RETURNING cid",
                               -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 1, c->cur_cid);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, c->cur_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && c->has_end)
        rc = sqlite3_bind_int64(st, 3, c->end_cid);
    if (rc == SQLITE_OK && c->has_end)
        rc = sqlite3_bind_text(st, 4, c->end_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 5, c->older_than_ms);
    c->deleted = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        c->deleted++;
        rc = ib__sq_tally(s, sqlite3_column_int64(st, 0), -1, 0);
    }
    int frc = sqlite3_finalize(st);
    return rc == SQLITE_DONE ? frc : rc;
}

/* After a pass that reached the end: nothing older than the cutoff is
 * left, so each consumer's oldest bound rises to it; then lapsed claims. */
static int body_prune_rest(sq_recorder *s, void *vctx, ib_error *local)
{
    prune_ctx *c = vctx;
    sqlite3_stmt *st = NULL;
    (void)local;
    int rc = sqlite3_prepare_v2(s->db,
                                "UPDATE processed_consumers SET oldest_ms = max(oldest_ms, ?1) "
                                "WHERE markers > 0 AND oldest_ms < ?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 1, c->older_than_ms);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return rc;
    rc = sqlite3_prepare_v2(
        s->db,
        "DELETE FROM processed_claims WHERE (event_id, cid) IN (SELECT event_id, "
        "cid FROM processed_claims WHERE expires_ms <= ?1 LIMIT ?2)",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 1, c->lease_cutoff);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 2, s->prune_rows);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    c->deleted = rc == SQLITE_DONE ? sqlite3_changes64(s->db) : 0;
    int frc = sqlite3_finalize(st);
    return rc == SQLITE_DONE ? frc : rc;
}

/* One transaction under the mutex, timed. */
static ib_status prune_step(sq_recorder *s, tx_body body, prune_ctx *c, uint64_t *transactions,
                            ib_error *err)
{
    pthread_mutex_lock(&s->mu);
    ib__sq_call_begin(s);
    int64_t t0 = ib_clock_monotonic_ns();
    ib_status st = ib__sq_run(s, TX_MARK, body, c, err);
    int64_t held = ib_clock_monotonic_ns() - t0;
    if (held > s->prune_hold_max_ns)
        s->prune_hold_max_ns = held;
    s->prune_transactions = ++*transactions;
    pthread_mutex_unlock(&s->mu);
    return st;
}

ib_status ib__sq_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err)
{
    sq_recorder *s = (sq_recorder *)r;
    int64_t window = r->now_ms() - older_than_ms;
    /* Claims count from the lease clock: those whose lease ended more than
     * the retention window ago (never a lease still running). */
    prune_ctx c = {.older_than_ms = older_than_ms,
                   .lease_cutoff = r->lease_now_ms() - (window > 0 ? window : 0)};
    uint64_t transactions = 0;
    ib_status st = IB_OK;
    *removed = 0;
    pthread_mutex_lock(&s->mu);
    s->prune_hold_max_ns = 0;
    pthread_mutex_unlock(&s->mu);
    do {
        st = prune_step(s, body_prune_range, &c, &transactions, err);
        if (st != IB_OK)
            return st;
        *removed += (uint64_t)c.deleted;
        c.cur_cid = c.end_cid;
        memcpy(c.cur_id, c.end_id, sizeof(c.cur_id));
    } while (c.has_end);
    do
        st = prune_step(s, body_prune_rest, &c, &transactions, err);
    while (st == IB_OK && c.deleted >= (int64_t)s->prune_rows);
    return st;
}
