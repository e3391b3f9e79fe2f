/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: the admin calls (ibus markers, ibus status, the host's gauges):
 * one key's state, listings, counts and summaries. None of them scans the
 * markers but a listing (there is no index on ts: the top of sqlite.c). */
#include "sqlite_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct key_ctx {
    ib_marker_key key;
    sq_state st;
} key_ctx;

static int body_state(sq_recorder *s, void *vctx, ib_error *local)
{
    key_ctx *c = vctx;
    int64_t cid;
    (void)local;
    return ib__sq_state_get(s, &c->st, &cid, &c->key);
}

ib_status ib__sq_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                        const char *event_id, ib_error *err)
{
    key_ctx c = {.key = {consumer, event_id}};
    ib_status st = ib__sq_run_locked((sq_recorder *)r, TX_READ, body_state, &c, err);
    *found = st == IB_OK && c.st.done;
    *ts_ms = *found ? c.st.ts : 0;
    return st;
}

/* Forgetting removes the marker and ends the attempts; a claim's holder
 * and lease stay. */
static int body_forget(sq_recorder *s, void *vctx, ib_error *local)
{
    key_ctx *c = vctx;
    int64_t cid;
    (void)local;
    int rc = ib__sq_state_get(s, &c->st, &cid, &c->key);
    if (rc == SQLITE_OK && c->st.done) {
        sqlite3_stmt *q = s->q[Q_MARKER_DEL];
        rc = sqlite3_bind_int64(q, 1, cid);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_text(q, 2, c->key.event_id, -1, SQLITE_STATIC);
        rc = rc == SQLITE_OK ? ib__sq_step_done(q) : (sqlite3_reset(q), rc);
        if (rc == SQLITE_OK)
            rc = ib__sq_tally(s, cid, -1, 0);
    }
    if (rc != SQLITE_OK || c->st.attempts == 0)
        return rc;
    sq_state ended = c->st;
    ended.attempts = 0;
    return ib__sq_claim_save(s, cid, c->key.event_id, &ended);
}

ib_status ib__sq_forget(ib_recorder *r, bool *existed, const char *consumer, const char *event_id,
                        ib_error *err)
{
    key_ctx c = {.key = {consumer, event_id}};
    ib_status st = ib__sq_run_locked((sq_recorder *)r, TX_MARK, body_forget, &c, err);
    *existed = st == IB_OK && c.st.done;
    return st;
}

ib_status ib__sq_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                         const char *event_id, ib_error *err)
{
    key_ctx c = {.key = {consumer, event_id}};
    ib_status st = ib__sq_run_locked((sq_recorder *)r, TX_READ, body_state, &c, err);
    memset(out, 0, sizeof(*out));
    if (st != IB_OK)
        return st;
    int64_t left = c.st.owner[0] != '\0' ? c.st.expires - r->lease_now_ms() : 0;
    out->marked = c.st.done;
    out->ts_ms = c.st.done ? c.st.ts : 0;
    out->attempts = c.st.attempts;
    memcpy(out->owner, c.st.owner, sizeof(out->owner));
    out->lease_left_ms = left > 0 ? left : 0;
    return IB_OK;
}

/* --- listings ------------------------------------------------------------------ */

typedef struct list_ctx {
    const char *consumer;
    size_t limit;
    ib_marker_visit_fn visit;
    void *ctx;
    bool visited; /* a retry after visits would repeat them */
} list_ctx;

static int body_list(sq_recorder *s, void *vctx, ib_error *local)
{
    list_ctx *c = vctx;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT consumer, event_id, ts FROM processed_log "
                                "WHERE ?2 IS NULL OR consumer = ?2 ORDER BY ts DESC LIMIT ?1",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 1, c->limit == 0 ? -1 : (sqlite3_int64)c->limit);
    if (rc == SQLITE_OK && c->consumer != NULL)
        rc = sqlite3_bind_text(st, 2, c->consumer, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        ib_marker_info info = {
            .consumer = (const char *)sqlite3_column_text(st, 0),
            .event_id = (const char *)sqlite3_column_text(st, 1),
            .ts_ms = sqlite3_column_int64(st, 2),
        };
        if (info.consumer == NULL || info.event_id == NULL)
            continue; /* a row another tool wrote: nothing to show */
        c->visited = true;
        rc = c->visit(c->ctx, &info) != 0 ? SQLITE_DONE : SQLITE_OK;
    }
    int frc = sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return SQLITE_OK;
    if (c->visited) {
        ib_error_set(local, IB_ERR_RECORDER, "recorder %s: %s (listing cut short)", s->name,
                     sqlite3_errstr(rc != SQLITE_OK ? rc : frc));
        return IB__SQLITE_REFUSED;
    }
    return rc;
}

ib_status ib__sq_list(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err)
{
    list_ctx c = {.consumer = consumer, .limit = limit, .visit = visit, .ctx = ctx};
    return ib__sq_run_locked((sq_recorder *)r, TX_READ, body_list, &c, err);
}

/* --- counts ------------------------------------------------------------------- */

/* Runs `sql` (no parameters but ?1 = `bind`) and reads up to `n` integer
 * columns of its one row into `out`. */
static int read_row(sq_recorder *s, const char *sql, int64_t bind, int64_t *out, int n)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(st) > 0)
        rc = sqlite3_bind_int64(st, 1, bind);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < n; i++)
            out[i] = sqlite3_column_int64(st, i);
        rc = SQLITE_OK;
    }
    int frc = sqlite3_finalize(st);
    return rc != SQLITE_OK ? rc : frc;
}

/* The counts the triggers keep, and the claims (a small table). */
static int body_stats(sq_recorder *s, void *vctx, ib_error *local)
{
    ib_recorder_stats *out = vctx;
    int64_t v[5] = {0};
    (void)local;
    int rc = read_row(s,
                      "SELECT coalesce(sum(markers), 0), count(*), coalesce(min(oldest_ms), 0), "
                      "coalesce(max(newest_ms), 0) FROM processed_consumers WHERE markers > 0",
                      0, v, 4);
    if (rc == SQLITE_OK)
        rc = read_row(s, "SELECT count(*) FROM processed_claims WHERE owner <> ''", 0, v + 4, 1);
    *out = (ib_recorder_stats){.markers = (uint64_t)v[0],
                               .consumers = (uint64_t)v[1],
                               .oldest_ts_ms = v[2],
                               .newest_ts_ms = v[3],
                               .claims = (uint64_t)v[4]};
    return rc;
}

static uint64_t file_size(const char *path, const char *suffix)
{
    char p[IB__RECORDER_PATH_MAX + 8];
    struct stat sb;
    snprintf(p, sizeof(p), "%s%s", path, suffix);
    return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

ib_status ib__sq_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err)
{
    sq_recorder *s = (sq_recorder *)r;
    ib_status st = ib__sq_run_locked(s, TX_READ, body_stats, stats, err);
    if (st == IB_OK && !s->in_memory)
        stats->storage_bytes = file_size(s->path, "") + file_size(s->path, "-wal");
    if (st == IB_OK && s->in_memory) {
        int64_t pages = 0;
        pthread_mutex_lock(&s->mu);
        read_row(s, "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()", 0,
                 &pages, 1);
        pthread_mutex_unlock(&s->mu);
        stats->storage_bytes = (uint64_t)pages;
    }
    return st;
}

typedef struct attempt_ctx {
    ib_attempt_stats *out;
    uint32_t max_attempts;
} attempt_ctx;

/* A claim row with attempts is a key attempted and not done (marking
 * deletes it). */
static int body_attempt_stats(sq_recorder *s, void *vctx, ib_error *local)
{
    attempt_ctx *c = vctx;
    int64_t v[2] = {0};
    (void)local;
    int rc = read_row(s,
                      "SELECT count(*), coalesce(sum(attempts >= ?1), 0) FROM processed_claims c "
                      "WHERE attempts > 0 AND NOT EXISTS (SELECT 1 FROM processed_markers m "
                      "WHERE m.cid = c.cid AND m.event_id = c.event_id)",
                      c->max_attempts, v, 2);
    c->out->attempted = (uint64_t)v[0];
    c->out->exhausted = (uint64_t)v[1];
    return rc;
}

ib_status ib__sq_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                               ib_error *err)
{
    attempt_ctx c = {out, max_attempts};
    return ib__sq_run_locked((sq_recorder *)r, TX_READ, body_attempt_stats, &c, err);
}

/* --- summaries for ibus status ------------------------------------------------ */

/* Per consumer: its counts (kind 0), then each claim row of a key not
 * marked (kind 1): no scan of the markers. */
#define SQL_SUMMARY                                                                                \
    "SELECT 0, name, markers, coalesce(oldest_ms, 0), coalesce(newest_ms, 0), NULL "               \
    "FROM processed_consumers WHERE markers > 0 UNION ALL "                                        \
    "SELECT 1, k.name, c.expires_ms, c.attempts, 0, c.owner FROM processed_claims c "              \
    "JOIN processed_consumers k ON k.cid = c.cid WHERE (c.owner <> '' OR c.attempts > 0) "         \
    "AND NOT EXISTS (SELECT 1 FROM processed_markers m WHERE m.event_id = c.event_id "             \
    "AND m.cid = c.cid)"

typedef struct summary_ctx {
    ib__summary_list list;
    uint32_t max_attempts;
} summary_ctx;

/* Adds one row of SQL_SUMMARY to its consumer's entry. */
static int summary_row(summary_ctx *c, sqlite3_stmt *q, int64_t lease_now)
{
    const char *name = (const char *)sqlite3_column_text(q, 1);
    ib__consumer_summary *e =
        name != NULL ? ib__summary_entry(&c->list, name, (size_t)sqlite3_column_bytes(q, 1)) : NULL;
    int64_t a = sqlite3_column_int64(q, 2), b = sqlite3_column_int64(q, 3);
    const char *owner = (const char *)sqlite3_column_text(q, 5);
    if (e == NULL)
        return SQLITE_NOMEM;
    if (sqlite3_column_int(q, 0) == 0) {
        e->markers = a > 0 ? (uint64_t)a : 0;
        e->oldest_ms = b;
        e->newest_ms = sqlite3_column_int64(q, 4);
        return SQLITE_OK;
    }
    if (owner != NULL && owner[0] != '\0')
        ib__summary_claim(e, a - lease_now, owner);
    if (b > 0)
        ib__summary_attempts(e, b > UINT32_MAX ? UINT32_MAX : (uint32_t)b, c->max_attempts);
    return SQLITE_OK;
}

/* May run more than once (a retried transaction): starts from nothing. */
static int body_summary(sq_recorder *s, void *vctx, ib_error *local)
{
    summary_ctx *c = vctx;
    sqlite3_stmt *q = NULL;
    (void)local;
    ib__consumer_summaries_free(c->list.v, c->list.n);
    memset(&c->list, 0, sizeof(c->list));
    int rc = sqlite3_prepare_v2(s->db, SQL_SUMMARY, -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW)
        rc = summary_row(c, q, s->base.lease_now_ms());
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

ib_status ib__sqlite_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                               uint32_t max_attempts, ib_error *err)
{
    summary_ctx c = {.max_attempts = max_attempts};
    ib_status st = ib__sq_run_locked((sq_recorder *)r, TX_READ, body_summary, &c, err);
    if (st != IB_OK)
        ib__consumer_summaries_free(c.list.v, c.list.n);
    else
        ib__summary_take(&c.list, out, n);
    return st;
}
