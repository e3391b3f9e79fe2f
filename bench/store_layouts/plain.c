/* SPDX-License-Identifier: Apache-2.0 */
/* Layout "plain": the spec's table as it reads, and nothing else.
 *
 * processed_log(consumer TEXT, event_id TEXT, ts, fp) is a real WITHOUT
 * ROWID table keyed (consumer, event_id), beside processed_claims keyed the
 * same way. A new id costs a probe of processed_log and of the claims, a
 * claim row, then the marker and the claim's delete: every marker lands on
 * a random leaf of one B-tree that grows with the file. Outside tools read
 * and write processed_log directly. Prune walks the primary key in ranges
 * (prune.c). */
#include <stdlib.h>

#include "store_layouts.h"

typedef struct plain {
    ib__sl_flow flow;
    sqlite3_stmt *probe;
} plain;

static void plain_create(ib__sl_store *s)
{
    ib__sl_exec(s->db, "CREATE TABLE processed_log (consumer TEXT NOT NULL, "
                       "event_id TEXT NOT NULL, ts INTEGER NOT NULL, fp INTEGER, "
                       "PRIMARY KEY (consumer, event_id)) WITHOUT ROWID");
    ib__sl_claims_create(s->db, IB__SL_KEY_TEXT);
}

static void plain_preload(ib__sl_store *s, const ib__sl_preload *p)
{
    sqlite3_stmt *put = ib__sl_prepare(s->db, "INSERT INTO processed_log VALUES (?1, ?2, ?3, ?4)");
    ib__sl_id id;
    for (size_t i = 0; i < p->n; i++) {
        ib__sl_id_make(&id, ib__sl_preload_raw(p, i));
        sqlite3_bind_text(put, 1, IB__SL_CONSUMER, -1, SQLITE_STATIC);
        sqlite3_bind_text(put, 2, id.hex, 32, SQLITE_STATIC);
        sqlite3_bind_int64(put, 3, ib__sl_preload_ts(p, id.raw));
        sqlite3_bind_int64(put, 4, (int64_t)ib__sl_preload_fp(id.raw));
        ib__sl_done(put);
    }
    sqlite3_finalize(put);
}

static bool plain_is_marked(ib__sl_store *s, const ib__sl_id *id)
{
    plain *p = s->impl;
    ib__sl_bind_key(p->probe, &p->flow.key, id);
    bool found = ib__sl_row(p->probe);
    sqlite3_reset(p->probe);
    return found;
}

static void plain_open(ib__sl_store *s)
{
    plain *p = calloc(1, sizeof(*p));
    if (p == NULL)
        ib__sl_die("out of memory");
    s->impl = p;
    p->flow.key = (ib__sl_key){.kind = IB__SL_KEY_TEXT, .consumer = IB__SL_CONSUMER};
    p->flow.is_marked = plain_is_marked;
    p->flow.marker_put = ib__sl_prepare(s->db, "INSERT INTO processed_log VALUES (?1, ?2, ?3, ?4)");
    p->probe = ib__sl_prepare(s->db, "SELECT 1 FROM processed_log "
                                     "WHERE consumer = ?1 AND event_id = ?2");
    ib__sl_flow_prepare(&p->flow, s->db);
}

static void plain_acquire(ib__sl_store *s, void *batch)
{
    ib__sl_flow_acquire(s, &((plain *)s->impl)->flow, batch);
}

static void plain_mark(ib__sl_store *s, void *batch)
{
    ib__sl_flow_mark(s, &((plain *)s->impl)->flow, batch);
}

static void plain_prune(ib__sl_store *s, int64_t cutoff_ms, size_t rows, ib__sl_prune *out)
{
    ib__sl_prune_ranges(s, "processed_log", IB__SL_KEY_TEXT, cutoff_ms, rows, out);
}

static uint64_t plain_count(ib__sl_store *s)
{
    return (uint64_t)ib__sl_int(s->db, "SELECT count(*) FROM processed_log");
}

static void plain_close(ib__sl_store *s)
{
    plain *p = s->impl;
    ib__sl_flow_finalize(&p->flow);
    sqlite3_finalize(p->probe);
    free(p);
    s->impl = NULL;
}

const ib__sl_layout ib__sl_plain = {
    .name = "plain",
    .create = plain_create,
    .preload = plain_preload,
    .open = plain_open,
    .acquire = plain_acquire,
    .mark = plain_mark,
    .prune = plain_prune,
    .count = plain_count,
    .view = 1,
    .close = plain_close,
};
