/* SPDX-License-Identifier: Apache-2.0 */
/* The claims table and the acquire/mark flow that plain, compact,
 * compact-blob and generations share (store_layouts.h). A claim row is
 * (key, owner, expires_ms, attempts), as the recorder's processed_claims:
 * acquire writes it with attempts + 1, mark deletes it once the marker is
 * in. Only the probe "is it marked?" and the marker insert are the
 * layout's. */
#include <stdio.h>
#include <string.h>

#include "store_layouts.h"

static const char *first_column(ib__sl_key_kind kind)
{
    return kind == IB__SL_KEY_TEXT ? "consumer" : "cid";
}

void ib__sl_bind_key(sqlite3_stmt *st, const ib__sl_key *k, const ib__sl_id *id)
{
    if (k->kind == IB__SL_KEY_TEXT)
        sqlite3_bind_text(st, 1, k->consumer, -1, SQLITE_STATIC);
    else
        sqlite3_bind_int64(st, 1, k->cid);
    if (k->kind == IB__SL_KEY_CID_BLOB)
        sqlite3_bind_blob(st, 2, id->raw, 16, SQLITE_STATIC);
    else
        sqlite3_bind_text(st, 2, id->hex, 32, SQLITE_STATIC);
}

void ib__sl_claims_create(sqlite3 *db, ib__sl_key_kind kind)
{
    static const char *const key_types[] = {
        [IB__SL_KEY_TEXT] = "consumer TEXT NOT NULL, event_id TEXT NOT NULL",
        [IB__SL_KEY_CID_HEX] = "cid INTEGER NOT NULL, event_id TEXT NOT NULL",
        [IB__SL_KEY_CID_BLOB] = "cid INTEGER NOT NULL, event_id BLOB NOT NULL",
    };
    char sql[512];
    snprintf(sql, sizeof(sql),
             "CREATE TABLE processed_claims (%s, owner TEXT NOT NULL, expires_ms INTEGER NOT "
             "NULL, attempts INTEGER NOT NULL, PRIMARY KEY (%s, event_id)) WITHOUT ROWID",
             key_types[kind], first_column(kind));
    ib__sl_exec(db, sql);
}

void ib__sl_flow_prepare(ib__sl_flow *f, sqlite3 *db)
{
    const char *k1 = first_column(f->key.kind);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT owner, expires_ms, attempts FROM processed_claims "
             "WHERE %s = ?1 AND event_id = ?2",
             k1);
    f->claim_get = ib__sl_prepare(db, sql);
    snprintf(sql, sizeof(sql),
             "INSERT OR REPLACE INTO processed_claims (%s, event_id, owner, expires_ms, attempts) "
             "VALUES (?1, ?2, ?3, ?4, ?5)",
             k1);
    f->claim_put = ib__sl_prepare(db, sql);
    snprintf(sql, sizeof(sql), "DELETE FROM processed_claims WHERE %s = ?1 AND event_id = ?2", k1);
    f->claim_del = ib__sl_prepare(db, sql);
}

void ib__sl_flow_finalize(ib__sl_flow *f)
{
    sqlite3_finalize(f->claim_get);
    sqlite3_finalize(f->claim_put);
    sqlite3_finalize(f->claim_del);
    sqlite3_finalize(f->marker_put);
}

void ib__sl_claim_read(ib__sl_claim *c, sqlite3_stmt *get, const char *owner)
{
    memset(c, 0, sizeof(*c));
    if (!ib__sl_row(get))
        return;
    const char *holder = (const char *)sqlite3_column_text(get, 0);
    c->found = true;
    c->ours = holder != NULL && strcmp(holder, owner) == 0;
    c->expires_ms = sqlite3_column_int64(get, 1);
    c->attempts = sqlite3_column_int64(get, 2);
    sqlite3_reset(get);
}

bool ib__sl_claim_free(const ib__sl_claim *c, int64_t now_ms)
{
    return !c->found || c->ours || c->expires_ms <= now_ms;
}

void ib__sl_flow_acquire(ib__sl_store *s, ib__sl_flow *f, ib__sl_batch *b)
{
    ib__sl_claim c;
    for (size_t i = 0; i < b->n; i++) {
        const ib__sl_id *id = &b->ids[i];
        if (f->is_marked(s, id)) {
            b->verdict[i] = IB__SL_MARKED;
            continue;
        }
        ib__sl_bind_key(f->claim_get, &f->key, id);
        ib__sl_claim_read(&c, f->claim_get, s->owner);
        if (!ib__sl_claim_free(&c, b->now_ms)) {
            b->verdict[i] = IB__SL_BUSY;
            continue;
        }
        ib__sl_bind_key(f->claim_put, &f->key, id);
        sqlite3_bind_text(f->claim_put, 3, s->owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(f->claim_put, 4, b->now_ms + IB__SL_LEASE_MS);
        sqlite3_bind_int64(f->claim_put, 5, c.attempts + 1);
        ib__sl_done(f->claim_put);
        b->verdict[i] = IB__SL_NEW;
    }
}

void ib__sl_flow_mark(ib__sl_store *s, ib__sl_flow *f, ib__sl_batch *b)
{
    ib__sl_claim c;
    for (size_t i = 0; i < b->n; i++) {
        const ib__sl_id *id = &b->ids[i];
        if (b->verdict[i] != IB__SL_NEW)
            continue;
        ib__sl_bind_key(f->claim_get, &f->key, id);
        ib__sl_claim_read(&c, f->claim_get, s->owner);
        if (c.found && !ib__sl_claim_free(&c, b->now_ms)) {
            b->lost++; /* another owner took it over: its result decides */
            continue;
        }
        ib__sl_bind_key(f->marker_put, &f->key, id);
        sqlite3_bind_int64(f->marker_put, 3, b->now_ms);
        sqlite3_bind_int64(f->marker_put, 4, (int64_t)b->fps[i]);
        ib__sl_done(f->marker_put);
        ib__sl_bind_key(f->claim_del, &f->key, id);
        ib__sl_done(f->claim_del);
    }
}

void ib__sl_consumers_create(sqlite3 *db)
{
    ib__sl_exec(db, "CREATE TABLE processed_consumers (cid INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL UNIQUE)");
}

int64_t ib__sl_consumer_cid(sqlite3 *db, sqlite3_stmt *get, sqlite3_stmt *put, const char *name)
{
    sqlite3_bind_text(get, 1, name, -1, SQLITE_STATIC);
    if (ib__sl_row(get)) {
        int64_t cid = sqlite3_column_int64(get, 0);
        sqlite3_reset(get);
        return cid;
    }
    sqlite3_bind_text(put, 1, name, -1, SQLITE_STATIC);
    ib__sl_done(put);
    return sqlite3_last_insert_rowid(db);
}
