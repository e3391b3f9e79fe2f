/* SPDX-License-Identifier: Apache-2.0 */
/* Layouts "compact" and "compact-blob": plain's one B-tree, with smaller
 * keys.
 *
 * The consumer becomes a small integer: processed_consumers(cid INTEGER
 * PRIMARY KEY, name TEXT UNIQUE), resolved once per transaction, so a row
 * of processed_marks(cid, event_id, ts, fp) no longer repeats the 21-byte
 * name. "compact" keeps the id as its 32 hex digits; "compact-blob" stores
 * its 16 bytes. Claims are keyed the same way. The view processed_log
 * (consumer, event_id, ts) joins the two for outside tools; with the hex
 * id it stays searchable by the primary key (checked with EXPLAIN QUERY
 * PLAN, lookup.c), with the blob it must read every marker of the consumer
 * (lower(hex(id)) cannot use the index). Prune walks the primary key in
 * ranges (prune.c). */
#include <stdio.h>
#include <stdlib.h>

#include "store_layouts.h"

typedef struct compact {
    ib__sl_flow flow;
    sqlite3_stmt *probe, *cid_get, *cid_put;
} compact;

static void create_tables(ib__sl_store *s, bool blob)
{
    char sql[512];
    ib__sl_consumers_create(s->db);
    snprintf(sql, sizeof(sql),
             "CREATE TABLE processed_marks (cid INTEGER NOT NULL, event_id %s NOT NULL, "
             "ts INTEGER NOT NULL, fp INTEGER, PRIMARY KEY (cid, event_id)) WITHOUT ROWID",
             blob ? "BLOB" : "TEXT");
    ib__sl_exec(s->db, sql);
    ib__sl_claims_create(s->db, blob ? IB__SL_KEY_CID_BLOB : IB__SL_KEY_CID_HEX);
    snprintf(sql, sizeof(sql),
             "CREATE VIEW processed_log (consumer, event_id, ts) AS "
             "SELECT c.name, %s, m.ts FROM processed_marks m "
             "JOIN processed_consumers c ON c.cid = m.cid",
             blob ? "lower(hex(m.event_id))" : "m.event_id");
    ib__sl_exec(s->db, sql);
}

static void compact_create(ib__sl_store *s)
{
    create_tables(s, false);
}

static void blob_create(ib__sl_store *s)
{
    create_tables(s, true);
}

static void compact_preload(ib__sl_store *s, const ib__sl_preload *p, ib__sl_key_kind kind)
{
    sqlite3_stmt *put =
        ib__sl_prepare(s->db, "INSERT INTO processed_marks VALUES (?1, ?2, ?3, ?4)");
    ib__sl_exec(s->db,
                "INSERT INTO processed_consumers (cid, name) VALUES (1, '" IB__SL_CONSUMER "')");
    ib__sl_key key = {.kind = kind, .cid = 1};
    ib__sl_id id;
    for (size_t i = 0; i < p->n; i++) {
        ib__sl_id_make(&id, ib__sl_preload_raw(p, i));
        ib__sl_bind_key(put, &key, &id);
        sqlite3_bind_int64(put, 3, ib__sl_preload_ts(p, id.raw));
        sqlite3_bind_int64(put, 4, (int64_t)ib__sl_preload_fp(id.raw));
        ib__sl_done(put);
    }
    sqlite3_finalize(put);
}

static void hex_preload(ib__sl_store *s, const ib__sl_preload *p)
{
    compact_preload(s, p, IB__SL_KEY_CID_HEX);
}

static void blob_preload(ib__sl_store *s, const ib__sl_preload *p)
{
    compact_preload(s, p, IB__SL_KEY_CID_BLOB);
}

static bool compact_is_marked(ib__sl_store *s, const ib__sl_id *id)
{
    compact *c = s->impl;
    ib__sl_bind_key(c->probe, &c->flow.key, id);
    bool found = ib__sl_row(c->probe);
    sqlite3_reset(c->probe);
    return found;
}

static void open_kind(ib__sl_store *s, ib__sl_key_kind kind)
{
    compact *c = calloc(1, sizeof(*c));
    if (c == NULL)
        ib__sl_die("out of memory");
    s->impl = c;
    c->flow.key = (ib__sl_key){.kind = kind};
    c->flow.is_marked = compact_is_marked;
    c->flow.marker_put =
        ib__sl_prepare(s->db, "INSERT INTO processed_marks VALUES (?1, ?2, ?3, ?4)");
    c->probe = ib__sl_prepare(s->db, "SELECT 1 FROM processed_marks "
                                     "WHERE cid = ?1 AND event_id = ?2");
    c->cid_get = ib__sl_prepare(s->db, "SELECT cid FROM processed_consumers WHERE name = ?1");
    c->cid_put = ib__sl_prepare(s->db, "INSERT INTO processed_consumers (name) VALUES (?1)");
    ib__sl_flow_prepare(&c->flow, s->db);
}

static void hex_open(ib__sl_store *s)
{
    open_kind(s, IB__SL_KEY_CID_HEX);
}

static void blob_open(ib__sl_store *s)
{
    open_kind(s, IB__SL_KEY_CID_BLOB);
}

/* Once per transaction: another process may have added the consumer. */
static void resolve_cid(ib__sl_store *s, compact *c)
{
    c->flow.key.cid = ib__sl_consumer_cid(s->db, c->cid_get, c->cid_put, IB__SL_CONSUMER);
}

static void compact_acquire(ib__sl_store *s, void *batch)
{
    compact *c = s->impl;
    resolve_cid(s, c);
    ib__sl_flow_acquire(s, &c->flow, batch);
}

static void compact_mark(ib__sl_store *s, void *batch)
{
    compact *c = s->impl;
    resolve_cid(s, c);
    ib__sl_flow_mark(s, &c->flow, batch);
}

static void hex_prune(ib__sl_store *s, int64_t cutoff_ms, size_t rows, ib__sl_prune *out)
{
    ib__sl_prune_ranges(s, "processed_marks", IB__SL_KEY_CID_HEX, cutoff_ms, rows, out);
}

static void blob_prune(ib__sl_store *s, int64_t cutoff_ms, size_t rows, ib__sl_prune *out)
{
    ib__sl_prune_ranges(s, "processed_marks", IB__SL_KEY_CID_BLOB, cutoff_ms, rows, out);
}

static uint64_t compact_count(ib__sl_store *s)
{
    return (uint64_t)ib__sl_int(s->db, "SELECT count(*) FROM processed_marks");
}

static void compact_close(ib__sl_store *s)
{
    compact *c = s->impl;
    ib__sl_flow_finalize(&c->flow);
    sqlite3_finalize(c->probe);
    sqlite3_finalize(c->cid_get);
    sqlite3_finalize(c->cid_put);
    free(c);
    s->impl = NULL;
}

const ib__sl_layout ib__sl_compact = {
    .name = "compact",
    .create = compact_create,
    .preload = hex_preload,
    .open = hex_open,
    .acquire = compact_acquire,
    .mark = compact_mark,
    .prune = hex_prune,
    .count = compact_count,
    .view = 1,
    .close = compact_close,
};

const ib__sl_layout ib__sl_compact_blob = {
    .name = "compact-blob",
    .create = blob_create,
    .preload = blob_preload,
    .open = blob_open,
    .acquire = compact_acquire,
    .mark = compact_mark,
    .prune = blob_prune,
    .count = compact_count,
    .view = 2,
    .close = compact_close,
};
