/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: pruning markers older than a cutoff (the tables: the top of
 * sqlite.c). There is no index on ts, so prune walks the markers' primary
 * key in ranges of prune_rows keys, one write transaction per range, each
 * examining and deleting a bounded number of rows however few are old: no
 * transaction holds the write lock for long, and other processes (and
 * other threads of this one: the mutex is given back between ranges) get
 * their turn in between. Claims whose lease ended before the cutoff go
 * next, in batches as well, then the seed's spellings whose marker is gone,
 * walked like the markers.
 *
 * Other tools may write any value into these tables (a BLOB id, an id of
 * any length, a consumer that is no integer, a ts that is no number). The
 * cursor keeps the key's own values (sqlite3_value_dup), so it orders as
 * SQLite orders them and each range starts strictly after the last: a walk
 * visits every row once and ends after rows / prune_rows ranges. The rule:
 * a marker row goes when its ts is a number before the cutoff, whatever its
 * id and consumer hold; a ts of another type has no age, and the row stays.
 * A caller's stop function is asked before every transaction. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"

/* A table walked by its two-column primary key: `cond` picks the rows to
 * delete in a range (?5 is the cutoff). */
typedef struct walk_table {
    const char *table;
    const char *key; /* "k1, k2" */
    const char *cond;
    bool tally; /* count the deleted rows off their consumer's markers */
} walk_table;

static const walk_table markers_walk = {"processed_markers", "event_id, cid", "ts < ?5", true};
static const walk_table spellings_walk = {
    "processed_spellings", "spelling, cid",
    "NOT EXISTS (SELECT 1 FROM processed_markers m WHERE m.event_id = "
    "processed_spellings.event_id AND m.cid = processed_spellings.cid)",
    false};

/* One range: the keys after the cursor (none = from the first) up to the
 * end key (inclusive; none = to the last). The cursor only moves once the
 * transaction committed. */
typedef struct prune_ctx {
    const walk_table *walk;
    sqlite3_value *cur[2]; /* exclusive lower bound: k1, k2; NULL = none */
    sqlite3_value *end[2]; /* inclusive upper bound; NULL = none */
    int64_t older_than_ms;
    int64_t lease_cutoff;
    int64_t deleted;
} prune_ctx;

static void values_free(sqlite3_value *v[2])
{
    sqlite3_value_free(v[0]);
    sqlite3_value_free(v[1]);
    v[0] = v[1] = NULL;
}

/* Prepares `sql` and binds the cursor to ?2, ?1 and, when `upper`, the
 * range's end to ?4, ?3 (each only when there is one). */
static int prepare_walk(sq_recorder *s, sqlite3_stmt **st, const char *sql, const prune_ctx *c,
                        bool upper)
{
    int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    if (rc == SQLITE_OK && c->cur[0] != NULL)
        rc = sqlite3_bind_value(*st, 2, c->cur[0]);
    if (rc == SQLITE_OK && c->cur[0] != NULL)
        rc = sqlite3_bind_value(*st, 1, c->cur[1]);
    if (rc == SQLITE_OK && upper && c->end[0] != NULL)
        rc = sqlite3_bind_value(*st, 4, c->end[0]);
    if (rc == SQLITE_OK && upper && c->end[0] != NULL)
        rc = sqlite3_bind_value(*st, 3, c->end[1]);
    return rc;
}

/* The bounds of the range in SQL: "1" where there is none. */
static void bounds_sql(char lower[64], char upper[64], const prune_ctx *c)
{
    snprintf(lower, 64, "1");
    snprintf(upper, 64, "1");
    if (c->cur[0] != NULL)
        snprintf(lower, 64, "(%s) > (?2, ?1)", c->walk->key);
    if (c->end[0] != NULL)
        snprintf(upper, 64, "(%s) <= (?4, ?3)", c->walk->key);
}

/* Finds the range's end: the prune_rows-th key after the cursor. */
static int find_end(sq_recorder *s, prune_ctx *c)
{
    sqlite3_stmt *st = NULL;
    char lower[64], upper[64], sql[256];
    values_free(c->end);
    bounds_sql(lower, upper, c);
    snprintf(sql, sizeof(sql), "SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT 1 OFFSET ?6",
             c->walk->key, c->walk->table, lower, c->walk->key);
    int rc = prepare_walk(s, &st, sql, c, false);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 6, (sqlite3_int64)s->prune_rows - 1);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        c->end[0] = sqlite3_value_dup(sqlite3_column_value(st, 0));
        c->end[1] = sqlite3_value_dup(sqlite3_column_value(st, 1));
        rc = c->end[0] != NULL && c->end[1] != NULL ? SQLITE_DONE : SQLITE_NOMEM;
    }
    int frc = sqlite3_finalize(st);
    return rc == SQLITE_DONE ? frc : rc;
}

static int body_prune_range(sq_recorder *s, void *vctx, ib_error *local)
{
    prune_ctx *c = vctx;
    sqlite3_stmt *st = NULL;
    (void)local;
    c->deleted = 0;
    int rc = find_end(s, c);
    /* the range's end bounds the search; only an integer consumer is
     * counted (a row of another type was never ours) */
    char lower[64], upper[64], sql[512];
    bounds_sql(lower, upper, c);
    snprintf(sql, sizeof(sql),
             "DELETE FROM %s WHERE %s AND %s AND %s "
             "RETURNING CASE WHEN typeof(cid) = 'integer' THEN cid END",
             c->walk->table, lower, upper, c->walk->cond);
    if (rc == SQLITE_OK)
        rc = prepare_walk(s, &st, sql, c, true);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(st) >= 5)
        rc = sqlite3_bind_int64(st, 5, c->older_than_ms);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        c->deleted++;
        rc = c->walk->tally && sqlite3_column_type(st, 0) == SQLITE_INTEGER
                 ? ib__sq_tally(s, sqlite3_column_int64(st, 0), -1, 0)
                 : SQLITE_OK;
    }
    int frc = sqlite3_finalize(st);
    return rc == SQLITE_DONE ? frc : rc;
}

/* After a pass over the markers that reached the end: nothing older than
 * the cutoff is left, so each consumer's oldest bound rises to it; then
 * lapsed claims, prune_rows at a time. */
static int body_prune_claims(sq_recorder *s, void *vctx, ib_error *local)
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

/* What one prune call walks and counts. */
typedef struct prune_run {
    sq_recorder *s;
    prune_ctx c;
    uint64_t transactions;
    ib__stop_fn stop;
    void *stop_ctx;
    bool stopped;
} prune_run;

static bool should_stop(prune_run *p)
{
    if (!p->stopped && p->stop != NULL && p->stop(p->stop_ctx))
        p->stopped = true;
    return p->stopped;
}

/* Walks one table in ranges from its first key to its last, adding the
 * rows deleted to *removed (may be NULL), unless stopped first. */
static ib_status walk(prune_run *p, const walk_table *w, uint64_t *removed, ib_error *err)
{
    ib_status st = IB_OK;
    p->c.walk = w;
    values_free(p->c.cur);
    do {
        if (should_stop(p))
            break;
        st = prune_step(p->s, body_prune_range, &p->c, &p->transactions, err);
        if (st != IB_OK)
            break;
        if (removed != NULL)
            *removed += (uint64_t)p->c.deleted;
        values_free(p->c.cur);
        p->c.cur[0] = p->c.end[0];
        p->c.cur[1] = p->c.end[1];
        p->c.end[0] = p->c.end[1] = NULL;
    } while (p->c.cur[0] != NULL);
    values_free(p->c.cur);
    values_free(p->c.end);
    return st;
}

ib_status ib__sq_prune_until(ib_recorder *r, uint64_t *removed, int64_t older_than_ms,
                             ib__stop_fn stop, void *ctx, ib_error *err)
{
    sq_recorder *s = (sq_recorder *)r;
    int64_t window = r->now_ms() - older_than_ms;
    /* Claims count from the lease clock: those whose lease ended more than
     * the retention window ago (never a lease still running). */
    prune_run p = {.s = s,
                   .c = {.older_than_ms = older_than_ms,
                         .lease_cutoff = r->lease_now_ms() - (window > 0 ? window : 0)},
                   .stop = stop,
                   .stop_ctx = ctx};
    *removed = 0;
    pthread_mutex_lock(&s->mu);
    s->prune_hold_max_ns = 0;
    pthread_mutex_unlock(&s->mu);
    ib_status st = walk(&p, &markers_walk, removed, err);
    while (st == IB_OK && !should_stop(&p)) {
        st = prune_step(s, body_prune_claims, &p.c, &p.transactions, err);
        if (p.c.deleted < (int64_t)s->prune_rows)
            break;
    }
    if (st == IB_OK)
        st = walk(&p, &spellings_walk, NULL, err);
    return st;
}

ib_status ib__sq_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err)
{
    return ib__sq_prune_until(r, removed, older_than_ms, NULL, NULL, err);
}
