/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: per-consumer summaries (ib__recorder_summarize, for ibus status):
 * the counts processed_consumers keeps (invariant 7 at the top of
 * sqlite.c), and the claim rows, which only keys not done have. One read
 * transaction, so the figures agree with one another; nothing scans the
 * markers. */
#include "sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

/* Markers per consumer. */
#define SQL_MARKERS                                                                                \
    "SELECT name, markers, coalesce(oldest_ms, 0), coalesce(newest_ms, 0) "                        \
    "FROM processed_consumers WHERE markers > 0"

/* Keys not marked that have a holder or attempts. */
#define SQL_CLAIMS                                                                                 \
    "SELECT k.name, c.owner, c.expires_ms, c.attempts FROM processed_claims c "                    \
    "JOIN processed_consumers k ON k.cid = c.cid WHERE (c.owner <> '' OR c.attempts > 0) "         \
    "AND NOT EXISTS (SELECT 1 FROM processed_markers m WHERE m.event_id = c.event_id "             \
    "AND m.cid = c.cid)"

typedef struct status_ctx {
    ib__summary_list list;
    uint32_t max_attempts;
} status_ctx;

/* The entry of the consumer in column 0 of `q`'s row; NULL when out of
 * memory or the column is not text. */
static ib__consumer_summary *row_entry(status_ctx *c, sqlite3_stmt *q)
{
    const char *name = (const char *)sqlite3_column_text(q, 0);
    if (name == NULL)
        return NULL;
    return ib__summary_entry(&c->list, name, (size_t)sqlite3_column_bytes(q, 0));
}

static int read_markers(status_ctx *c, sqlite3 *db)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, SQL_MARKERS, -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        ib__consumer_summary *s = row_entry(c, q);
        if (s == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        int64_t count = sqlite3_column_int64(q, 1);
        s->markers = count > 0 ? (uint64_t)count : 0;
        s->oldest_ms = sqlite3_column_int64(q, 2);
        s->newest_ms = sqlite3_column_int64(q, 3);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int read_claims(status_ctx *c, sqlite3 *db, int64_t now)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(db, SQL_CLAIMS, -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        ib__consumer_summary *s = row_entry(c, q);
        if (s == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        const char *owner = (const char *)sqlite3_column_text(q, 1);
        int64_t attempts = sqlite3_column_int64(q, 3);
        if (owner != NULL && owner[0] != '\0')
            ib__summary_claim(s, sqlite3_column_int64(q, 2) - now, owner);
        if (attempts > 0)
            ib__summary_attempts(s, attempts > UINT32_MAX ? UINT32_MAX : (uint32_t)attempts,
                                 c->max_attempts);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* May run more than once (a retried transaction): starts from nothing. */
static int body_status(sq_recorder *s, void *vctx, ib_error *local)
{
    status_ctx *c = vctx;
    (void)local;
    ib__consumer_summaries_free(c->list.v, c->list.n);
    memset(&c->list, 0, sizeof(c->list));
    int rc = read_markers(c, s->db);
    /* expires_ms is on the lease clock: this host's boot clock */
    return rc == SQLITE_OK ? read_claims(c, s->db, s->base.lease_now_ms()) : rc;
}

ib_status ib__sqlite_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                               uint32_t max_attempts, ib_error *err)
{
    status_ctx c = {.max_attempts = max_attempts};
    ib_status st = ib__sq_run_locked((sq_recorder *)r, TX_READ, body_status, &c, err);
    if (st != IB_OK) {
        ib__consumer_summaries_free(c.list.v, c.list.n);
        return st;
    }
    ib__summary_take(&c.list, out, n);
    return IB_OK;
}
