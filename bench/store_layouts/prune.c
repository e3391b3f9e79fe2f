/* SPDX-License-Identifier: Apache-2.0 */
/* Pruning a B-tree keyed by (consumer, event_id) the way the recorder
 * does: no index on ts (it would be one more B-tree written per marker),
 * so each transaction takes the next `rows` keys of the primary key and
 * deletes those older than the cutoff. A transaction's cost is then
 * bounded by `rows` whatever share of them is old (store_layouts.h). */
#include <stdio.h>

#include "store_layouts.h"

typedef struct range_ctx {
    sqlite3_stmt *end, *del_to, *del_rest;
    sqlite3_value *lo1, *lo2; /* the last key of the range before */
    int64_t cutoff;
    size_t rows;
    bool finished;
    uint64_t deleted;
} range_ctx;

static void bind_lo(sqlite3_stmt *st, const range_ctx *c)
{
    sqlite3_bind_value(st, 1, c->lo1);
    sqlite3_bind_value(st, 2, c->lo2);
}

/* One transaction: the next range, or the rest when fewer keys are left. */
static void range_body(ib__sl_store *s, void *vctx)
{
    range_ctx *c = vctx;
    bind_lo(c->end, c);
    sqlite3_bind_int64(c->end, 3, (int64_t)c->rows - 1);
    sqlite3_stmt *del = c->del_rest;
    sqlite3_value *hi1 = NULL, *hi2 = NULL;
    if (ib__sl_row(c->end)) {
        hi1 = sqlite3_value_dup(sqlite3_column_value(c->end, 0));
        hi2 = sqlite3_value_dup(sqlite3_column_value(c->end, 1));
        sqlite3_reset(c->end);
        if (hi1 == NULL || hi2 == NULL)
            ib__sl_die("out of memory");
        del = c->del_to;
        sqlite3_bind_value(del, 3, hi1);
        sqlite3_bind_value(del, 4, hi2);
    }
    bind_lo(del, c);
    sqlite3_bind_int64(del, 5, c->cutoff);
    ib__sl_done(del);
    c->deleted += (uint64_t)sqlite3_changes(s->db);
    sqlite3_value_free(c->lo1);
    sqlite3_value_free(c->lo2);
    c->lo1 = hi1;
    c->lo2 = hi2;
    c->finished = hi1 == NULL;
}

static void prepare_ranges(range_ctx *c, sqlite3 *db, const char *table, const char *k1)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT %s, event_id FROM %s WHERE (%s, event_id) > (?1, ?2) "
             "ORDER BY %s, event_id LIMIT 1 OFFSET ?3",
             k1, table, k1, k1);
    c->end = ib__sl_prepare(db, sql);
    snprintf(sql, sizeof(sql),
             "DELETE FROM %s WHERE (%s, event_id) > (?1, ?2) AND (%s, event_id) <= (?3, ?4) "
             "AND ts < ?5",
             table, k1, k1);
    c->del_to = ib__sl_prepare(db, sql);
    snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE (%s, event_id) > (?1, ?2) AND ts < ?5", table,
             k1);
    c->del_rest = ib__sl_prepare(db, sql);
}

/* A key below every key: no consumer is '' and no cid is negative. */
static void start_below_all(range_ctx *c, sqlite3 *db, bool text)
{
    sqlite3_stmt *st = ib__sl_prepare(db, text ? "SELECT '', ''" : "SELECT -1, ''");
    if (!ib__sl_row(st))
        ib__sl_die("no row from a constant SELECT");
    c->lo1 = sqlite3_value_dup(sqlite3_column_value(st, 0));
    c->lo2 = sqlite3_value_dup(sqlite3_column_value(st, 1));
    sqlite3_finalize(st);
    if (c->lo1 == NULL || c->lo2 == NULL)
        ib__sl_die("out of memory");
}

void ib__sl_prune_note(ib__sl_prune *out, double hold_ms)
{
    out->txns++;
    if (hold_ms > out->max_ms)
        out->max_ms = hold_ms;
}

void ib__sl_prune_ranges(ib__sl_store *s, const char *table, ib__sl_key_kind kind,
                         int64_t cutoff_ms, size_t rows, ib__sl_prune *out)
{
    bool text = kind == IB__SL_KEY_TEXT;
    range_ctx c = {.cutoff = cutoff_ms, .rows = rows > 0 ? rows : 1};
    prepare_ranges(&c, s->db, table, text ? "consumer" : "cid");
    start_below_all(&c, s->db, text);
    double t0 = ib__sl_now_ms();
    while (!c.finished)
        ib__sl_prune_note(out, ib__sl_txn(s, range_body, &c));
    out->total_s += (ib__sl_now_ms() - t0) / 1e3;
    out->rows += c.deleted;
    sqlite3_finalize(c.end);
    sqlite3_finalize(c.del_to);
    sqlite3_finalize(c.del_rest);
    sqlite3_value_free(c.lo1);
    sqlite3_value_free(c.lo2);
}
