/* SPDX-License-Identifier: Apache-2.0 */
/* Layout "generations": a ring of 8 tables, one day of markers each.
 *
 * processed_gen0..7(cid, event_id TEXT, ts, fp) are compact's rows
 * (consumer as a small integer, id as hex), WITHOUT ROWID. processed_ring
 * names the current generation; new markers go there only. The others are
 * sealed: nothing writes them again, so each gets an immutable Bloom filter
 * (bloom.c), built once when it is sealed and stored in processed_filters
 * as a blob, which every process loads at start-up and again whenever the
 * ring's epoch moves. A filter's "no" is right for good, since its table
 * cannot change; a "maybe" is checked against the table. A new id thus
 * costs a probe of the current generation's B-tree, plus, about 1 % of the
 * time per sealed generation, one of a sealed table. A sealed generation
 * without a filter yet is always probed.
 *
 * Prune is a rotation: one transaction empties the oldest table whole
 * (DELETE without WHERE: SQLite frees its pages without visiting rows one
 * by one) and makes it the current one; the generation that was current
 * is then sealed: its filter is built from a read transaction and stored
 * by a short write. The view processed_log is a UNION ALL of the 8 tables,
 * each branch searchable by its primary key. Claims are compact's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_layouts.h"

#define GENS 8

typedef struct generations {
    ib__sl_flow flow;
    sqlite3_stmt *probe[GENS], *put[GENS];
    sqlite3_stmt *ring_get, *filters_get, *cid_get, *cid_put;
    int current;
    int64_t epoch; /* of the ring as last read; 0 = not read */
    ib__sl_bloom filter[GENS];
    bool sealed[GENS]; /* its filter is loaded */
} generations;

static void create_view(sqlite3 *db)
{
    char sql[2048];
    size_t len = (size_t)snprintf(sql, sizeof(sql),
                                  "CREATE VIEW processed_log (consumer, event_id, ts) AS ");
    for (int g = 0; g < GENS; g++)
        len += (size_t)snprintf(sql + len, sizeof(sql) - len,
                                "%sSELECT c.name, m.event_id, m.ts FROM processed_gen%d m "
                                "JOIN processed_consumers c ON c.cid = m.cid",
                                g > 0 ? " UNION ALL " : "", g);
    ib__sl_exec(db, sql);
}

static void gen_create(ib__sl_store *s)
{
    char sql[256];
    ib__sl_consumers_create(s->db);
    for (int g = 0; g < GENS; g++) {
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE processed_gen%d (cid INTEGER NOT NULL, event_id TEXT NOT NULL, "
                 "ts INTEGER NOT NULL, fp INTEGER, PRIMARY KEY (cid, event_id)) WITHOUT ROWID",
                 g);
        ib__sl_exec(s->db, sql);
    }
    ib__sl_claims_create(s->db, IB__SL_KEY_CID_HEX);
    ib__sl_exec(s->db, "CREATE TABLE processed_ring (k INTEGER PRIMARY KEY CHECK (k = 0), "
                       "current INTEGER NOT NULL, epoch INTEGER NOT NULL)");
    ib__sl_exec(s->db, "CREATE TABLE processed_filters (gen INTEGER PRIMARY KEY, "
                       "keys INTEGER NOT NULL, bits BLOB NOT NULL)");
    create_view(s->db);
}

static void store_filter(sqlite3 *db, int gen, const ib__sl_bloom *b)
{
    sqlite3_stmt *put = ib__sl_prepare(db, "INSERT OR REPLACE INTO processed_filters "
                                           "VALUES (?1, ?2, ?3)");
    sqlite3_bind_int(put, 1, gen);
    sqlite3_bind_int64(put, 2, (int64_t)b->keys);
    if (b->nbits > 0)
        sqlite3_bind_blob(put, 3, b->words, (int)(b->nbits / 8), SQLITE_STATIC);
    else
        sqlite3_bind_zeroblob(put, 3, 0);
    ib__sl_done(put);
    sqlite3_finalize(put);
}

/* Generation g (0 = oldest) gets the preloaded markers of day g, and its
 * filter; the last table is current, and starts empty. */
static void preload_day(ib__sl_store *s, const ib__sl_preload *p, int g, sqlite3_stmt *put)
{
    ib__sl_key key = {.kind = IB__SL_KEY_CID_HEX, .cid = 1};
    ib__sl_bloom b;
    ib__sl_id id;
    size_t keys = 0;
    for (size_t i = 0; i < p->n; i++)
        keys += ib__sl_preload_day(p, p->raw[i]) == g;
    ib__sl_bloom_init(&b, keys);
    for (size_t i = 0; i < p->n; i++) {
        const uint8_t *raw = ib__sl_preload_raw(p, i);
        if (ib__sl_preload_day(p, raw) != g)
            continue;
        ib__sl_id_make(&id, raw);
        ib__sl_bind_key(put, &key, &id);
        sqlite3_bind_int64(put, 3, ib__sl_preload_ts(p, raw));
        sqlite3_bind_int64(put, 4, (int64_t)ib__sl_preload_fp(raw));
        ib__sl_done(put);
        ib__sl_bloom_add(&b, 1, id.raw);
    }
    store_filter(s->db, g, &b);
    ib__sl_bloom_free(&b);
}

static void gen_preload(ib__sl_store *s, const ib__sl_preload *p)
{
    char sql[128];
    ib__sl_exec(s->db,
                "INSERT INTO processed_consumers (cid, name) VALUES (1, '" IB__SL_CONSUMER "')");
    for (int g = 0; g < GENS - 1; g++) {
        snprintf(sql, sizeof(sql), "INSERT INTO processed_gen%d VALUES (?1, ?2, ?3, ?4)", g);
        sqlite3_stmt *put = ib__sl_prepare(s->db, sql);
        preload_day(s, p, g, put);
        sqlite3_finalize(put);
    }
    snprintf(sql, sizeof(sql), "INSERT INTO processed_ring VALUES (0, %d, 1)", GENS - 1);
    ib__sl_exec(s->db, sql);
}

/* Loads every stored filter; a generation without one is probed always. */
static void load_filters(generations *g)
{
    for (int i = 0; i < GENS; i++) {
        ib__sl_bloom_free(&g->filter[i]);
        g->sealed[i] = false;
    }
    while (ib__sl_row(g->filters_get)) {
        int gen = sqlite3_column_int(g->filters_get, 0);
        if (gen < 0 || gen >= GENS || gen == g->current)
            continue;
        const void *bits = sqlite3_column_blob(g->filters_get, 2);
        size_t bytes = (size_t)sqlite3_column_bytes(g->filters_get, 2);
        ib__sl_bloom_load(&g->filter[gen], bits, bytes,
                          (uint64_t)sqlite3_column_int64(g->filters_get, 1));
        g->sealed[gen] = true;
    }
}

/* The ring as the file says, filters reloaded when it moved (a rotation
 * or a seal by any process). */
static void read_ring(generations *g)
{
    if (!ib__sl_row(g->ring_get))
        ib__sl_die("generations: processed_ring has no row");
    int current = sqlite3_column_int(g->ring_get, 0);
    int64_t epoch = sqlite3_column_int64(g->ring_get, 1);
    sqlite3_reset(g->ring_get);
    if (current < 0 || current >= GENS)
        ib__sl_die("generations: current generation %d out of range", current);
    if (epoch == g->epoch && current == g->current)
        return;
    g->current = current;
    g->epoch = epoch;
    g->flow.marker_put = g->put[current];
    load_filters(g);
}

/* At the start of every write transaction. */
static void refresh(ib__sl_store *s, generations *g)
{
    read_ring(g);
    g->flow.key.cid = ib__sl_consumer_cid(s->db, g->cid_get, g->cid_put, IB__SL_CONSUMER);
}

static bool probe(sqlite3_stmt *st, const ib__sl_key *key, const ib__sl_id *id)
{
    ib__sl_bind_key(st, key, id);
    bool found = ib__sl_row(st);
    sqlite3_reset(st);
    return found;
}

static bool gen_is_marked(ib__sl_store *s, const ib__sl_id *id)
{
    generations *g = s->impl;
    const ib__sl_key *key = &g->flow.key;
    if (probe(g->probe[g->current], key, id))
        return true;
    for (int i = 0; i < GENS; i++) {
        if (i == g->current ||
            (g->sealed[i] && !ib__sl_bloom_maybe(&g->filter[i], key->cid, id->raw)))
            continue;
        if (probe(g->probe[i], key, id))
            return true;
    }
    return false;
}

static void prepare_all(ib__sl_store *s, generations *g)
{
    char sql[128];
    for (int i = 0; i < GENS; i++) {
        snprintf(sql, sizeof(sql), "SELECT 1 FROM processed_gen%d WHERE cid = ?1 AND event_id = ?2",
                 i);
        g->probe[i] = ib__sl_prepare(s->db, sql);
        snprintf(sql, sizeof(sql), "INSERT INTO processed_gen%d VALUES (?1, ?2, ?3, ?4)", i);
        g->put[i] = ib__sl_prepare(s->db, sql);
    }
    g->ring_get = ib__sl_prepare(s->db, "SELECT current, epoch FROM processed_ring");
    g->filters_get = ib__sl_prepare(s->db, "SELECT gen, keys, bits FROM processed_filters");
    g->cid_get = ib__sl_prepare(s->db, "SELECT cid FROM processed_consumers WHERE name = ?1");
    g->cid_put = ib__sl_prepare(s->db, "INSERT INTO processed_consumers (name) VALUES (?1)");
    ib__sl_flow_prepare(&g->flow, s->db);
}

/* Start-up: the statements, then the ring and every filter. */
static void gen_open(ib__sl_store *s)
{
    generations *g = calloc(1, sizeof(*g));
    if (g == NULL)
        ib__sl_die("out of memory");
    s->impl = g;
    g->flow.key = (ib__sl_key){.kind = IB__SL_KEY_CID_HEX};
    g->flow.is_marked = gen_is_marked;
    prepare_all(s, g);
    ib__sl_exec(s->db, "BEGIN");
    read_ring(g);
    ib__sl_exec(s->db, "COMMIT");
}

static void gen_acquire(ib__sl_store *s, void *batch)
{
    generations *g = s->impl;
    refresh(s, g);
    ib__sl_flow_acquire(s, &g->flow, batch);
}

static void gen_mark(ib__sl_store *s, void *batch)
{
    generations *g = s->impl;
    refresh(s, g);
    ib__sl_flow_mark(s, &g->flow, batch);
}

/* The rotation's write: empty the oldest table, make it current. */
static void rotate_body(ib__sl_store *s, void *vctx)
{
    generations *g = s->impl;
    uint64_t *rows = vctx;
    char sql[128];
    refresh(s, g);
    int next = (g->current + 1) % GENS;
    snprintf(sql, sizeof(sql), "DELETE FROM processed_gen%d", next);
    ib__sl_exec(s->db, sql);
    *rows = (uint64_t)sqlite3_changes(s->db);
    snprintf(sql, sizeof(sql), "DELETE FROM processed_filters WHERE gen = %d", next);
    ib__sl_exec(s->db, sql);
    snprintf(sql, sizeof(sql), "UPDATE processed_ring SET current = %d, epoch = epoch + 1", next);
    ib__sl_exec(s->db, sql);
}

typedef struct seal_ctx {
    int gen;
    ib__sl_bloom filter;
} seal_ctx;

/* Builds the filter of a generation nothing writes any more, from a read
 * transaction: no write lock is held meanwhile. */
static void build_filter(ib__sl_store *s, seal_ctx *c)
{
    char sql[128];
    ib__sl_exec(s->db, "BEGIN");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM processed_gen%d", c->gen);
    ib__sl_bloom_init(&c->filter, (uint64_t)ib__sl_int(s->db, sql));
    snprintf(sql, sizeof(sql), "SELECT cid, event_id FROM processed_gen%d", c->gen);
    sqlite3_stmt *scan = ib__sl_prepare(s->db, sql);
    uint8_t raw[16];
    while (ib__sl_row(scan)) {
        const char *hex = (const char *)sqlite3_column_text(scan, 1);
        if (!ib__sl_hex_raw(raw, hex, (size_t)sqlite3_column_bytes(scan, 1)))
            ib__sl_die("generations: processed_gen%d holds an id that is not 32 hex digits",
                       c->gen);
        ib__sl_bloom_add(&c->filter, sqlite3_column_int64(scan, 0), raw);
    }
    sqlite3_finalize(scan);
    ib__sl_exec(s->db, "COMMIT");
}

static void store_body(ib__sl_store *s, void *vctx)
{
    seal_ctx *c = vctx;
    store_filter(s->db, c->gen, &c->filter);
    ib__sl_exec(s->db, "UPDATE processed_ring SET epoch = epoch + 1");
}

/* The cutoff is the oldest generation's boundary by construction. */
static void gen_prune(ib__sl_store *s, int64_t cutoff_ms, size_t rows, ib__sl_prune *out)
{
    generations *g = s->impl;
    seal_ctx c = {.gen = g->current};
    uint64_t deleted = 0;
    (void)cutoff_ms;
    (void)rows;
    double t0 = ib__sl_now_ms();
    ib__sl_prune_note(out, ib__sl_txn(s, rotate_body, &deleted));
    build_filter(s, &c);
    ib__sl_prune_note(out, ib__sl_txn(s, store_body, &c));
    ib__sl_bloom_free(&c.filter);
    out->rows += deleted;
    out->total_s += (ib__sl_now_ms() - t0) / 1e3;
}

static uint64_t gen_count(ib__sl_store *s)
{
    char sql[128];
    uint64_t n = 0;
    for (int g = 0; g < GENS; g++) {
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM processed_gen%d", g);
        n += (uint64_t)ib__sl_int(s->db, sql);
    }
    return n;
}

static void gen_close(ib__sl_store *s)
{
    generations *g = s->impl;
    for (int i = 0; i < GENS; i++) {
        sqlite3_finalize(g->probe[i]);
        sqlite3_finalize(g->put[i]);
        ib__sl_bloom_free(&g->filter[i]);
    }
    g->flow.marker_put = NULL; /* one of put[] */
    ib__sl_flow_finalize(&g->flow);
    sqlite3_finalize(g->ring_get);
    sqlite3_finalize(g->filters_get);
    sqlite3_finalize(g->cid_get);
    sqlite3_finalize(g->cid_put);
    free(g);
    s->impl = NULL;
}

const ib__sl_layout ib__sl_generations = {
    .name = "generations",
    .create = gen_create,
    .preload = gen_preload,
    .open = gen_open,
    .acquire = gen_acquire,
    .mark = gen_mark,
    .prune = gen_prune,
    .count = gen_count,
    .view = 1,
    .close = gen_close,
};
