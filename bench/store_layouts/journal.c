/* SPDX-License-Identifier: Apache-2.0 */
/* Layout "journal": today's recorder without its filter, reader slots and
 * upkeep.
 *
 * processed_markers (plain's row: consumer TEXT, event_id TEXT, ts, fp) is
 * the B-tree; processed_claims is plain's. Every write transaction appends
 * the new states it decided as one row of processed_journal(seq, consumer,
 * owner, expires_ms, states BLOB of 53-byte records: id, kind, attempts,
 * fp, ts), so a commit writes a page or two at the end of the file
 * whatever the ids. Each process keeps the unmerged states in a map
 * (journal_map.c): at the start of every transaction it reads the rows
 * appended since it last looked (inside BEGIN IMMEDIATE nobody else can
 * append, so map + B-tree are then the whole truth). The map answers
 * first; a key it does not hold costs one probe of processed_markers and
 * one of the (nearly empty) claims table. After a mark transaction leaves
 * 8192 keys or more in the map, a merge writes them into the B-trees in
 * key order, deletes the journal rows and raises processed_merge's
 * merged_seq, in one transaction; every process that sees merged_seq move
 * drops its map and reads what is left of the journal. Prune merges, then
 * walks processed_markers as plain does. There is no view: outside tools
 * would have to read the states out of the blobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"

#define MERGE_KEYS 8192
#define STATE_BYTES 53 /* hex 32, kind 1, attempts 4, fp 8, ts 8 */
#define PRELOAD_UNMERGED 4096
#define ROW_STATES 64

enum {
    Q_MERGED_GET,
    Q_ROWS_GET,
    Q_ROW_PUT,
    Q_PROBE,
    Q_CLAIM_GET,
    Q_MARKER_PUT,
    Q_CLAIM_PUT,
    Q_CLAIM_DEL,
    Q_TRIM,
    Q_MERGED_SET,
    Q_COUNT
};

static const char *const query_sql[Q_COUNT] = {
    [Q_MERGED_GET] = "SELECT merged_seq FROM processed_merge",
    [Q_ROWS_GET] = "SELECT seq, consumer, owner, expires_ms, states FROM processed_journal "
                   "WHERE seq > ?1 ORDER BY seq",
    [Q_ROW_PUT] = "INSERT INTO processed_journal VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_PROBE] = "SELECT 1 FROM processed_markers WHERE consumer = ?1 AND event_id = ?2",
    [Q_CLAIM_GET] = "SELECT owner, expires_ms, attempts FROM processed_claims "
                    "WHERE consumer = ?1 AND event_id = ?2",
    [Q_MARKER_PUT] = "INSERT OR IGNORE INTO processed_markers VALUES (?1, ?2, ?3, ?4)",
    [Q_CLAIM_PUT] = "INSERT OR REPLACE INTO processed_claims VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_CLAIM_DEL] = "DELETE FROM processed_claims WHERE consumer = ?1 AND event_id = ?2",
    [Q_TRIM] = "DELETE FROM processed_journal WHERE seq <= ?1",
    [Q_MERGED_SET] = "UPDATE processed_merge SET merged_seq = ?1",
};

typedef struct journal {
    ib__sl_jmap map;
    sqlite3_stmt *q[Q_COUNT];
    uint64_t seen;   /* the journal is read up to this seq */
    uint64_t merged; /* merged_seq as last read; UINT64_MAX = never read */
    uint16_t consumer, owner;
    /* this transaction's row, applied to the map once committed */
    unsigned char *row;
    size_t row_states, row_cap;
    int64_t row_expires;
} journal;

static void journal_create(ib__sl_store *s)
{
    ib__sl_exec(s->db, "CREATE TABLE processed_markers (consumer TEXT NOT NULL, "
                       "event_id TEXT NOT NULL, ts INTEGER NOT NULL, fp INTEGER, "
                       "PRIMARY KEY (consumer, event_id)) WITHOUT ROWID");
    ib__sl_claims_create(s->db, IB__SL_KEY_TEXT);
    ib__sl_exec(s->db, "CREATE TABLE processed_journal (seq INTEGER PRIMARY KEY, "
                       "consumer TEXT NOT NULL, owner TEXT NOT NULL, "
                       "expires_ms INTEGER NOT NULL, states BLOB NOT NULL)");
    ib__sl_exec(s->db, "CREATE TABLE processed_merge (k INTEGER PRIMARY KEY CHECK (k = 0), "
                       "merged_seq INTEGER NOT NULL)");
    ib__sl_exec(s->db, "INSERT INTO processed_merge VALUES (0, 0)");
}

/* ---- records ------------------------------------------------------------ */

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void encode(unsigned char *p, const ib__sl_jstate *st)
{
    memcpy(p, st->hex, 32);
    p[32] = st->kind;
    for (int i = 0; i < 4; i++)
        p[33 + i] = (unsigned char)(st->attempts >> (8 * i));
    put64(p + 37, st->fp);
    put64(p + 45, (uint64_t)st->ts);
}

/* Applies a row's states to the map (consumer, owner, expires: the row's). */
static void apply_states(ib__sl_jmap *m, ib__sl_jstate proto, const unsigned char *p, size_t len)
{
    if (len % STATE_BYTES != 0)
        ib__sl_die("journal: a row of %zu bytes is not whole states", len);
    for (; len > 0; p += STATE_BYTES, len -= STATE_BYTES) {
        memcpy(proto.hex, p, 32);
        proto.kind = p[32];
        proto.attempts =
            (uint32_t)p[33] | (uint32_t)p[34] << 8 | (uint32_t)p[35] << 16 | (uint32_t)p[36] << 24;
        proto.fp = get64(p + 37);
        proto.ts = (int64_t)get64(p + 45);
        if (proto.kind != IB__SL_JCLAIM && proto.kind != IB__SL_JDONE)
            ib__sl_die("journal: a state of kind %d", proto.kind);
        ib__sl_jmap_put(m, &proto);
    }
}

/* ---- reading the journal ------------------------------------------------ */

/* At the start of every transaction: the rows appended since we looked;
 * after another process's merge, all of what is left. */
static void catch_up(journal *j)
{
    if (!ib__sl_row(j->q[Q_MERGED_GET]))
        ib__sl_die("journal: processed_merge has no row");
    uint64_t merged = (uint64_t)sqlite3_column_int64(j->q[Q_MERGED_GET], 0);
    sqlite3_reset(j->q[Q_MERGED_GET]);
    if (merged != j->merged) {
        ib__sl_jmap_clear(&j->map);
        j->merged = merged;
        j->seen = merged;
    }
    sqlite3_bind_int64(j->q[Q_ROWS_GET], 1, (int64_t)j->seen);
    while (ib__sl_row(j->q[Q_ROWS_GET])) {
        sqlite3_stmt *r = j->q[Q_ROWS_GET];
        ib__sl_jstate proto = {
            .consumer = ib__sl_jmap_name(&j->map, (const char *)sqlite3_column_text(r, 1)),
            .owner = ib__sl_jmap_name(&j->map, (const char *)sqlite3_column_text(r, 2)),
            .expires_ms = sqlite3_column_int64(r, 3)};
        apply_states(&j->map, proto, sqlite3_column_blob(r, 4), (size_t)sqlite3_column_bytes(r, 4));
        j->seen = (uint64_t)sqlite3_column_int64(r, 0);
    }
}

/* ---- this transaction's row ---------------------------------------------- */

/* The start of every flow transaction: the catch-up, then an empty row
 * whose claims will hold until `expires_ms`. */
static void row_begin(journal *j, int64_t expires_ms)
{
    catch_up(j);
    j->row_states = 0;
    j->row_expires = expires_ms;
}

static void row_add(journal *j, const ib__sl_jstate *st)
{
    if (j->row_states == j->row_cap) {
        j->row_cap = j->row_cap != 0 ? 2 * j->row_cap : 256;
        j->row = realloc(j->row, j->row_cap * STATE_BYTES);
        if (j->row == NULL)
            ib__sl_die("out of memory");
    }
    encode(j->row + j->row_states++ * STATE_BYTES, st);
}

/* Appends the row at seq seen + 1: after the catch-up under the write lock,
 * the newest seq there is. */
static void row_write(journal *j, const char *owner)
{
    if (j->row_states == 0)
        return;
    sqlite3_bind_int64(j->q[Q_ROW_PUT], 1, (int64_t)j->seen + 1);
    sqlite3_bind_text(j->q[Q_ROW_PUT], 2, IB__SL_CONSUMER, -1, SQLITE_STATIC);
    sqlite3_bind_text(j->q[Q_ROW_PUT], 3, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(j->q[Q_ROW_PUT], 4, j->row_expires);
    sqlite3_bind_blob(j->q[Q_ROW_PUT], 5, j->row, (int)(j->row_states * STATE_BYTES),
                      SQLITE_STATIC);
    ib__sl_done(j->q[Q_ROW_PUT]);
}

/* ---- the flow ------------------------------------------------------------ */

static void bind_text_key(sqlite3_stmt *st, const char *consumer, const char *hex)
{
    sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, hex, 32, SQLITE_STATIC);
}

/* A key's state: the map's when it holds one, else the B-trees'. */
static bool key_state(ib__sl_claim *c, ib__sl_store *s, journal *j, const ib__sl_id *id)
{
    const ib__sl_jstate *e = ib__sl_jmap_get(&j->map, j->consumer, id->hex);
    memset(c, 0, sizeof(*c));
    if (e != NULL) {
        if (e->kind == IB__SL_JDONE)
            return true;
        *c = (ib__sl_claim){.found = true,
                            .ours = e->owner == j->owner,
                            .expires_ms = e->expires_ms,
                            .attempts = e->attempts};
        return false;
    }
    bind_text_key(j->q[Q_PROBE], IB__SL_CONSUMER, id->hex);
    bool marked = ib__sl_row(j->q[Q_PROBE]);
    sqlite3_reset(j->q[Q_PROBE]);
    if (!marked) {
        bind_text_key(j->q[Q_CLAIM_GET], IB__SL_CONSUMER, id->hex);
        ib__sl_claim_read(c, j->q[Q_CLAIM_GET], s->owner);
    }
    return marked;
}

static void journal_acquire(ib__sl_store *s, void *batch)
{
    journal *j = s->impl;
    ib__sl_batch *b = batch;
    ib__sl_claim c;
    row_begin(j, b->now_ms + IB__SL_LEASE_MS);
    for (size_t i = 0; i < b->n; i++) {
        if (key_state(&c, s, j, &b->ids[i])) {
            b->verdict[i] = IB__SL_MARKED;
            continue;
        }
        if (!ib__sl_claim_free(&c, b->now_ms)) {
            b->verdict[i] = IB__SL_BUSY;
            continue;
        }
        ib__sl_jstate st = {.kind = IB__SL_JCLAIM, .attempts = (uint32_t)c.attempts + 1};
        memcpy(st.hex, b->ids[i].hex, 32);
        row_add(j, &st);
        b->verdict[i] = IB__SL_NEW;
    }
    row_write(j, s->owner);
}

static void journal_mark(ib__sl_store *s, void *batch)
{
    journal *j = s->impl;
    ib__sl_batch *b = batch;
    ib__sl_claim c;
    row_begin(j, 0);
    for (size_t i = 0; i < b->n; i++) {
        if (b->verdict[i] != IB__SL_NEW)
            continue;
        (void)key_state(&c, s, j, &b->ids[i]);
        if (c.found && !ib__sl_claim_free(&c, b->now_ms)) {
            b->lost++;
            continue;
        }
        ib__sl_jstate st = {.kind = IB__SL_JDONE,
                            .attempts = (uint32_t)c.attempts,
                            .fp = b->fps[i],
                            .ts = b->now_ms};
        memcpy(st.hex, b->ids[i].hex, 32);
        row_add(j, &st);
    }
    row_write(j, s->owner);
}

/* ---- the merge ------------------------------------------------------------ */

static int state_cmp(const void *a, const void *b, void *ctx)
{
    const ib__sl_jstate *x = a, *y = b;
    const ib__sl_jmap *m = ctx;
    int c = x->consumer == y->consumer ? 0 : strcmp(m->names[x->consumer], m->names[y->consumer]);
    return c != 0 ? c : memcmp(x->hex, y->hex, 32);
}

static void merge_state(journal *j, const ib__sl_jstate *st, bool claims)
{
    const char *consumer = j->map.names[st->consumer];
    sqlite3_stmt *put = st->kind == IB__SL_JDONE ? j->q[Q_MARKER_PUT] : j->q[Q_CLAIM_PUT];
    bind_text_key(put, consumer, st->hex);
    if (st->kind == IB__SL_JDONE) {
        sqlite3_bind_int64(put, 3, st->ts);
        sqlite3_bind_int64(put, 4, (int64_t)st->fp);
    } else {
        sqlite3_bind_text(put, 3, j->map.names[st->owner], -1, SQLITE_STATIC);
        sqlite3_bind_int64(put, 4, st->expires_ms);
        sqlite3_bind_int64(put, 5, st->attempts);
    }
    ib__sl_done(put);
    if (st->kind == IB__SL_JDONE && claims) {
        bind_text_key(j->q[Q_CLAIM_DEL], consumer, st->hex);
        ib__sl_done(j->q[Q_CLAIM_DEL]);
    }
}

/* Moves every state into the B-trees in key order. The sort leaves the
 * map's index stale: the caller clears the map once this commits. */
static void merge_body(ib__sl_store *s, void *vctx)
{
    journal *j = vctx;
    catch_up(j);
    qsort_r(j->map.states, j->map.used, sizeof(*j->map.states), state_cmp, &j->map);
    bool claims = ib__sl_int(s->db, "SELECT EXISTS (SELECT 1 FROM processed_claims)") != 0;
    for (size_t i = 0; i < j->map.used; i++)
        merge_state(j, &j->map.states[i], claims);
    sqlite3_bind_int64(j->q[Q_TRIM], 1, (int64_t)j->seen);
    ib__sl_done(j->q[Q_TRIM]);
    sqlite3_bind_int64(j->q[Q_MERGED_SET], 1, (int64_t)j->seen);
    ib__sl_done(j->q[Q_MERGED_SET]);
}

static double merge(ib__sl_store *s, journal *j)
{
    double hold = ib__sl_txn(s, merge_body, j);
    ib__sl_jmap_clear(&j->map);
    j->merged = j->seen;
    return hold;
}

/* The row this transaction wrote is in: the map takes its states. */
static void journal_committed(ib__sl_store *s, bool marked)
{
    journal *j = s->impl;
    if (j->row_states > 0) {
        ib__sl_jstate proto = {
            .consumer = j->consumer, .owner = j->owner, .expires_ms = j->row_expires};
        apply_states(&j->map, proto, j->row, j->row_states * STATE_BYTES);
        j->seen++;
        j->row_states = 0;
    }
    if (marked && j->map.used >= MERGE_KEYS)
        (void)merge(s, j);
}

static void journal_rolled_back(ib__sl_store *s)
{
    ((journal *)s->impl)->row_states = 0;
}

/* ---- the rest ------------------------------------------------------------ */

static void journal_open(ib__sl_store *s)
{
    journal *j = calloc(1, sizeof(*j));
    if (j == NULL)
        ib__sl_die("out of memory");
    s->impl = j;
    ib__sl_jmap_init(&j->map);
    j->merged = UINT64_MAX;
    j->consumer = ib__sl_jmap_name(&j->map, IB__SL_CONSUMER);
    j->owner = ib__sl_jmap_name(&j->map, s->owner);
    for (int i = 0; i < Q_COUNT; i++)
        j->q[i] = ib__sl_prepare(s->db, query_sql[i]);
    ib__sl_exec(s->db, "BEGIN");
    catch_up(j);
    ib__sl_exec(s->db, "COMMIT");
}

/* The B-tree gets every marker but about 4096, which stay in journal rows
 * of 64: the half-merge a process finds at start-up on average. */
static void journal_preload(ib__sl_store *s, const ib__sl_preload *p)
{
    size_t unmerged = p->n / 2 < PRELOAD_UNMERGED ? p->n / 2 : PRELOAD_UNMERGED;
    size_t stride = unmerged > 0 ? p->n / unmerged : 0;
    journal j = {.q[Q_ROW_PUT] = ib__sl_prepare(s->db, query_sql[Q_ROW_PUT])};
    sqlite3_stmt *put = ib__sl_prepare(s->db, query_sql[Q_MARKER_PUT]);
    for (size_t i = 0; i < p->n; i++) {
        ib__sl_jstate st = {.kind = IB__SL_JDONE};
        const uint8_t *raw = ib__sl_preload_raw(p, i);
        ib__sl_id id;
        ib__sl_id_make(&id, raw);
        memcpy(st.hex, id.hex, 32);
        st.ts = ib__sl_preload_ts(p, raw);
        st.fp = ib__sl_preload_fp(raw);
        if (stride == 0 || i % stride != stride - 1) {
            bind_text_key(put, IB__SL_CONSUMER, id.hex);
            sqlite3_bind_int64(put, 3, st.ts);
            sqlite3_bind_int64(put, 4, (int64_t)st.fp);
            ib__sl_done(put);
            continue;
        }
        row_add(&j, &st);
        if (j.row_states == ROW_STATES || i + stride >= p->n) {
            row_write(&j, "preload");
            j.seen++;
            j.row_states = 0;
        }
    }
    sqlite3_finalize(put);
    sqlite3_finalize(j.q[Q_ROW_PUT]);
    free(j.row);
}

static void journal_prune(ib__sl_store *s, int64_t cutoff_ms, size_t rows, ib__sl_prune *out)
{
    journal *j = s->impl;
    double t0 = ib__sl_now_ms();
    ib__sl_prune_note(out, merge(s, j));
    out->total_s += (ib__sl_now_ms() - t0) / 1e3;
    ib__sl_prune_ranges(s, "processed_markers", IB__SL_KEY_TEXT, cutoff_ms, rows, out);
}

static uint64_t journal_count(ib__sl_store *s)
{
    journal *j = s->impl;
    ib__sl_exec(s->db, "BEGIN");
    catch_up(j);
    uint64_t n = (uint64_t)ib__sl_int(s->db, "SELECT count(*) FROM processed_markers");
    for (size_t i = 0; i < j->map.used; i++)
        n += j->map.states[i].kind == IB__SL_JDONE;
    ib__sl_exec(s->db, "COMMIT");
    return n;
}

static void journal_close(ib__sl_store *s)
{
    journal *j = s->impl;
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(j->q[i]);
    ib__sl_jmap_free(&j->map);
    free(j->row);
    free(j);
    s->impl = NULL;
}

const ib__sl_layout ib__sl_journal = {
    .name = "journal",
    .create = journal_create,
    .preload = journal_preload,
    .open = journal_open,
    .acquire = journal_acquire,
    .mark = journal_mark,
    .committed = journal_committed,
    .rolled_back = journal_rolled_back,
    .prune = journal_prune,
    .count = journal_count,
    .view = 0,
    .close = journal_close,
};
