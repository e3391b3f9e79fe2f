/* sqlite: the marker journal and its merges (schema version 4).
 *
 * Why: markers are keyed by random ids, so writing them straight into a
 * B-tree dirties a page per key wherever it lies, and every commit writes
 * all of those pages to the WAL; a claim and its release or mark wrote two
 * more. Appending to a rowid-ordered journal instead fills a page or two
 * per batch, whatever the keys.
 *
 * How:
 *  - Every change to a key is appended to processed_journal as the key's
 *    whole new state (marker and claim), so the newest state of a key is
 *    its state, whatever came before. A transaction writes its states as
 *    one row per consumer (sqlite_batch.c); a state's place is its row's
 *    seq and its index in the row.
 *  - Each process reads the rows it has not seen at the start of every
 *    transaction (the catch-up) into its tail (sqlite_tail.c). Inside
 *    BEGIN IMMEDIATE nobody else can append, so after the catch-up the
 *    tail plus the B-trees are the whole truth: a mark another process
 *    made is seen before any handler runs.
 *  - A key's state is the tail's entry; else, while processed_claims is
 *    empty and the Bloom filter (sqlite_filter.c) says the key was never
 *    marked, nothing, with no probe at all (the common case: a new id);
 *    else the B-trees' rows (processed_markers, processed_claims).
 *  - A merge, once the tail holds merge_keys keys, writes each key's
 *    newest state into the B-trees in key order and raises
 *    processed_merge.merged_seq, all in one transaction: a crash anywhere
 *    leaves either the journal or the B-trees holding every state. Claims
 *    in flight (live, not marked yet) are carried into a new journal row
 *    instead: their marks follow within a batch, and the claims table
 *    then stays empty. Every process drops the tail entries at or below
 *    merged_seq at its next catch-up.
 *  - The filter must know every key a merge may put in processed_markers.
 *    Each process adds the marks it writes and the marks it reads in the
 *    catch-up; a merge deletes only rows of the merge before it that
 *    every live reader has read (trimmed_seq; sqlite_readers.c), so a
 *    process behind still reads the keys it has not seen, and one passed
 *    over (stopped) builds its filter again in the background.
 *  - Seqs rise for good, across merges that empty the journal: the writer
 *    sets its row's seq to one above the newest it knows, which, after the
 *    catch-up under the write lock, is the newest there is (or the merged
 *    seq). A rowid chosen by SQLite would start again after a merge, and
 *    AUTOINCREMENT costs a write to sqlite_sequence per statement.
 *  - processed_log is a view over both (sqlite_schema.c).
 *
 * The tail is only ever ahead of the file by this process's own rows of
 * the transaction in progress; when that transaction rolls back, the tail
 * is cleared and read again from the journal (ib__sq_tail_rollback). */
#include "sqlite_internal.h"
#include "sqlite_states.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "uuid.h"

/* --- the catch-up --------------------------------------------------------- */

/* A journal row being read by the catch-up. */
typedef struct row_ctx {
    sq_recorder *s;
    uint64_t row;
    const char *consumer;
} row_ctx;

/* Applies one state of a row: to the filter if it is a mark the filter
 * has not seen, to the tail unless a merge has moved it already. */
static int apply_state(void *vctx, size_t index, const sq_state *st)
{
    row_ctx *c = vctx;
    sq_recorder *s = c->s;
    if (index >= IB__SQ_ROW_STATES)
        return SQLITE_CORRUPT;
    uint64_t seq = c->row << IB__SQ_SEQ_SHIFT | index;
    /* Only a mark can reach processed_markers. */
    if (c->row > s->filter_row && st->done)
        ib__sq_filter_note(s, c->consumer, st->id);
    if (seq <= s->tail.merged)
        return SQLITE_OK; /* in the B-trees already: the filter needed it */
    return ib__sq_tail_put(&s->tail, seq, c->consumer, st->id, st) ? SQLITE_OK : SQLITE_NOMEM;
}

/* Applies every state of the row at the current step of Q_JOURNAL_READ. */
static int apply_row(sq_recorder *s, sqlite3_stmt *st, uint64_t *last_row)
{
    row_ctx c = {.s = s,
                 .row = (uint64_t)sqlite3_column_int64(st, 0),
                 .consumer = (const char *)sqlite3_column_text(st, 1)};
    const char *states = (const char *)sqlite3_column_text(st, 2);
    size_t len = (size_t)sqlite3_column_bytes(st, 2);
    if (c.consumer == NULL || states == NULL)
        return SQLITE_NOMEM;
    /* Only this recorder writes the journal; anything else is damage. */
    if (c.row >= UINT64_MAX >> IB__SQ_SEQ_SHIFT || c.consumer[0] == '\0' ||
        strlen(c.consumer) > IB_CONSUMER_MAX)
        return SQLITE_CORRUPT;
    int rc = ib__sq_states_parse(states, len, apply_state, &c);
    if (rc != 0)
        return rc < 0 ? SQLITE_CORRUPT : rc;
    *last_row = c.row;
    return SQLITE_OK;
}

/* Reads merged_seq and trimmed_seq. */
static int read_merge_state(sq_recorder *s, uint64_t *merged, uint64_t *trimmed)
{
    sqlite3_stmt *st = s->q[Q_MERGE_STATE];
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *merged = (uint64_t)sqlite3_column_int64(st, 0);
        *trimmed = (uint64_t)sqlite3_column_int64(st, 1);
        s->counts_stale = (uint64_t)sqlite3_column_int64(st, 2) != *merged;
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(st);
    return rc == SQLITE_DONE ? rrc : (rc == SQLITE_OK ? SQLITE_CORRUPT : rc);
}

int ib__sq_catch_up(sq_recorder *s)
{
    uint64_t merged_row = 0, trimmed = 0;
    int rc = read_merge_state(s, &merged_row, &trimmed);
    if (rc != SQLITE_OK)
        return rc;
    s->trimmed_seen = trimmed;
    /* Rows this process needed were deleted (it was passed over as a
     * reader), or the filter outgrew its size: their keys reach a filter
     * only through a scan of the B-tree, done in the background
     * (sqlite_readers.c); until then every key is probed. */
    if (s->filter_row < trimmed)
        ib__sq_filter_stale(s, trimmed);
    else if (s->filter_complete && !s->filter_building && ib__sq_filter_full(&s->filter))
        s->filter_grow = true; /* the upkeep builds a larger one beside it */
    if (!s->filter_complete && !s->filter_building)
        s->filter_row = s->tail.seen >> IB__SQ_SEQ_SHIFT;
    /* Every state of the merged rows, whatever its index. */
    uint64_t merged = merged_row << IB__SQ_SEQ_SHIFT | ((1u << IB__SQ_SEQ_SHIFT) - 1);
    /* Only merges write processed_claims, and each raises merged_seq. */
    if (merged > s->tail.merged || !s->claims_known) {
        ib__sq_tail_sweep(&s->tail, merged);
        uint64_t any = 1;
        rc = ib__sq_read_count(&any, s->q[Q_CLAIMS_ANY]);
        if (rc != SQLITE_OK)
            return rc;
        s->claims_empty = any == 0;
        s->claims_known = true;
    }
    uint64_t tail_row = s->tail.seen >> IB__SQ_SEQ_SHIFT;
    uint64_t from = tail_row < s->filter_row ? tail_row : s->filter_row, last = 0;
    sqlite3_stmt *st = s->q[Q_JOURNAL_READ];
    rc = sqlite3_bind_int64(st, 1, (sqlite3_int64)from);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = apply_row(s, st, &last);
        s->catchup_rows++;
    }
    int rrc = sqlite3_reset(st);
    if (last > s->filter_row)
        s->filter_row = last;
    return rc == SQLITE_DONE ? rrc : rc;
}

/* --- reading and writing a key's state ------------------------------------ */

/* A key's marker, when it has no claim row. */
static int read_marker(sq_recorder *s, sq_state *out, const ib_marker_key *key)
{
    sqlite3_stmt *get = s->q[Q_MARKER_GET];
    int rc = ib__sq_bind_key(get, key->consumer, key->event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(get);
    out->owner[0] = '\0';
    out->expires = 0;
    out->attempts = 0;
    out->done = rc == SQLITE_ROW;
    out->ts = out->done ? sqlite3_column_int64(get, 0) : 0;
    out->fp = out->done ? (uint64_t)sqlite3_column_int64(get, 1) : 0;
    int rrc = sqlite3_reset(get);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? rrc : rc;
}

/* The state of a key the journal does not hold: its B-tree rows. While
 * processed_claims is empty (the common case: merged keys are marked), one
 * probe of processed_markers is all it takes. */
static int read_tables(sq_recorder *s, sq_state *out, const ib_marker_key *key)
{
    if (s->claims_empty)
        return read_marker(s, out, key);
    sqlite3_stmt *get = s->q[Q_STATE_GET];
    int rc = ib__sq_bind_key(get, key->consumer, key->event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(get);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(get);
        return rc == SQLITE_OK || rc == SQLITE_DONE ? SQLITE_INTERNAL : rc;
    }
    const char *holder = (const char *)sqlite3_column_text(get, 0);
    snprintf(out->owner, sizeof(out->owner), "%s", holder != NULL ? holder : "");
    out->expires = sqlite3_column_int64(get, 1);
    out->done = sqlite3_column_type(get, 2) != SQLITE_NULL;
    out->ts = sqlite3_column_int64(get, 2);
    out->fp = (uint64_t)sqlite3_column_int64(get, 3);
    int64_t attempts = sqlite3_column_int64(get, 4);
    out->attempts = attempts < 0 ? 0 : attempts > UINT32_MAX ? UINT32_MAX : (uint32_t)attempts;
    return sqlite3_reset(get);
}

int ib__sq_state_get(sq_recorder *s, sq_state *out, const ib_marker_key *key)
{
    ib_id_pack(out->id, key->event_id);
    const sq_tail_entry *e = ib__sq_tail_find(&s->tail, key->consumer, out->id);
    if (e == NULL && s->claims_empty && s->filter_complete &&
        !ib__sq_filter_maybe(&s->filter, key->consumer, out->id)) {
        /* never marked, never claimed: the common case, with no probe */
        out->done = false;
        out->ts = 0;
        out->fp = 0;
        out->attempts = 0;
        out->expires = 0;
        out->owner[0] = '\0';
        return SQLITE_OK;
    }
    if (e == NULL)
        return read_tables(s, out, key);
    ib__sq_tail_state(e, out);
    return SQLITE_OK;
}

int ib__sq_state_put(sq_recorder *s, const ib_marker_key *key, const sq_state *st, bool was_done)
{
    uint64_t seq = 0;
    int rc = ib__sq_pending_add(s, &seq, key, st);
    if (rc != SQLITE_OK)
        return rc;
    /* the row's count of markers gained (or lost, by a forget) */
    if (st->done != was_done)
        s->pending.marked += st->done ? 1 : -1;
    if (st->done && !was_done && st->ts > s->pending.ts)
        s->pending.ts = st->ts;
    s->tail_dirty = true;
    /* A merge, ours or another's, may move a mark to the B-tree. */
    if (st->done)
        ib__sq_filter_note(s, key->consumer, st->id);
    return ib__sq_tail_put(&s->tail, seq, key->consumer, st->id, st) ? SQLITE_OK : SQLITE_NOMEM;
}

bool ib__sq_foreign_claim(const sq_state *st, const char *owner, int64_t lease_now)
{
    return st->owner[0] != '\0' && strcmp(st->owner, owner) != 0 && st->expires > lease_now;
}

int ib__sq_write_marker(sq_recorder *s, const ib_marker_key *key, const char *owner,
                        int64_t lease_now, int64_t ts, uint64_t fp)
{
    sq_state st;
    int rc = ib__sq_state_get(s, &st, key);
    if (rc != SQLITE_OK)
        return rc;
    bool changed = false, was_done = st.done;
    /* The claim a marker may end: the owner's own, released, or lapsed. */
    if (ib__sq_state_has_claim(&st) && !ib__sq_foreign_claim(&st, owner, lease_now)) {
        st.owner[0] = '\0';
        st.expires = 0;
        st.attempts = 0;
        changed = true;
    }
    /* A marker that exists stays as it is. */
    if (!st.done) {
        st.done = true;
        st.ts = ts;
        st.fp = fp;
        changed = true;
    }
    return changed ? ib__sq_state_put(s, key, &st, was_done) : SQLITE_OK;
}

/* --- merges ----------------------------------------------------------------- */

/* An entry and its sort key: the id's first 8 bytes as a big-endian
 * number, so that most comparisons are one integer compare. */
typedef struct merge_item {
    uint64_t prefix;
    const sq_tail_entry *e;
} merge_item;

typedef struct merge_list {
    merge_item *items;
    size_t n;
} merge_list;

static void collect(void *ctx, const sq_tail_entry *e)
{
    merge_list *l = ctx;
    uint64_t p = 0;
    for (int i = 0; i < 8; i++)
        p = p << 8 | e->id[i];
    l->items[l->n++] = (merge_item){.prefix = p, .e = e};
}

/* B-tree order: consumer, then id (packed ids sort as their hex text).
 * Consumers are interned, so equal names are equal pointers. */
static int by_key(const void *a, const void *b)
{
    const merge_item *x = a, *y = b;
    if (x->e->consumer != y->e->consumer)
        return strcmp(x->e->consumer, y->e->consumer);
    if (x->prefix != y->prefix)
        return x->prefix < y->prefix ? -1 : 1;
    return memcmp(x->e->id + 8, y->e->id + 8, 8);
}

/* Writes a marker: inserted (and counted), or, when the key has a row
 * already (forgotten and marked again), given the new time and
 * fingerprint. */
static int merge_mark(sq_recorder *s, const sq_tail_entry *e, const char *event_id, sq_tally *tally)
{
    for (int q = Q_MARKER_PUT;; q = Q_MARKER_FIX) {
        sqlite3_stmt *put = s->q[q];
        int rc = sqlite3_bind_int64(put, 3, e->ts);
        if (rc == SQLITE_OK)
            rc = e->fp != 0 ? sqlite3_bind_int64(put, 4, (sqlite3_int64)e->fp)
                            : sqlite3_bind_null(put, 4);
        rc = rc == SQLITE_OK ? ib__sq_exec_key(put, e->consumer, event_id) : rc;
        if (rc != SQLITE_OK || q == Q_MARKER_FIX)
            return rc;
        if (sqlite3_changes(s->db) > 0)
            return ib__sq_tally_add(tally, e->consumer, 1, e->ts) ? SQLITE_OK : SQLITE_NOMEM;
    }
}

/* Writes one entry's state into the B-trees. */
static int merge_entry(sq_recorder *s, const sq_tail_entry *e, sq_tally *tally)
{
    char event_id[IB_ID_BUF_SIZE];
    ib_id_unpack(event_id, e->id);
    int rc;
    if (e->done) {
        rc = merge_mark(s, e, event_id, tally);
    } else {
        rc = ib__sq_exec_key(s->q[Q_MARKER_DEL], e->consumer, event_id);
        if (rc == SQLITE_OK && sqlite3_changes(s->db) > 0 &&
            !ib__sq_tally_add(tally, e->consumer, -1, 0))
            rc = SQLITE_NOMEM;
    }
    if (rc != SQLITE_OK)
        return rc;
    if (e->owner[0] == '\0' && e->attempts == 0)
        return s->claims_empty ? SQLITE_OK
                               : ib__sq_exec_key(s->q[Q_CLAIM_DEL], e->consumer, event_id);
    sqlite3_stmt *claim = s->q[Q_CLAIM_SET];
    rc = sqlite3_bind_text(claim, 3, e->owner, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(claim, 4, e->expires);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(claim, 5, e->attempts);
    return rc == SQLITE_OK ? ib__sq_exec_key(claim, e->consumer, event_id) : rc;
}

/* A live claim on an unmarked key: its holder is at work and will mark
 * or release it soon, so writing it to processed_claims now would only
 * cost a write and, later, a delete. */
static bool in_flight(const sq_tail_entry *e, int64_t lease_now)
{
    return !e->done && e->owner[0] != '\0' && e->expires > lease_now;
}

/* Appends an entry's state again, to the row this transaction writes:
 * it stays in the journal (and the tail) with a place above the merge. */
static int carry(sq_recorder *s, const sq_tail_entry *e)
{
    char event_id[IB_ID_BUF_SIZE];
    sq_state st;
    ib_id_unpack(event_id, e->id);
    ib__sq_tail_state(e, &st);
    ib_marker_key key = {e->consumer, event_id};
    return ib__sq_state_put(s, &key, &st, st.done);
}

/* The rows of the merge before go, unless a live reader has not read
 * them yet (sqlite_readers.c); this merge's stay until the next, so that a
 * process a little behind still reads their keys. The carried states go
 * into a row above `upto`, inserted before the COMMIT (ib__sq_run). */
static int trim(sq_recorder *s, uint64_t previous, uint64_t upto)
{
    uint64_t need = UINT64_MAX, cut = previous;
    int rc = ib__sq_readers_need(s, &need);
    if (rc != SQLITE_OK)
        return rc;
    if (need < cut)
        cut = need;
    if (cut < s->trimmed_seen)
        cut = s->trimmed_seen;
    rc = sqlite3_bind_int64(s->q[Q_JOURNAL_TRIM], 1, (sqlite3_int64)cut);
    if (rc == SQLITE_OK)
        rc = ib__sq_step_done(s->q[Q_JOURNAL_TRIM]);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(s->q[Q_MERGE_SET], 1, (sqlite3_int64)upto);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(s->q[Q_MERGE_SET], 2, (sqlite3_int64)cut);
    if (rc == SQLITE_OK)
        rc = ib__sq_step_done(s->q[Q_MERGE_SET]);
    return rc;
}

/* An older version merged since the counts were last kept (it does not
 * keep them): count the B-tree again, once, and say so. */
static int recount(sq_recorder *s)
{
    ib_log(IB_SEV_WARN,
           "an older infinity-bus merged this marker file; counting its markers again (one scan)",
           IB_LOG_STR("recorder", s->name));
    int rc = sqlite3_exec(s->db, "DELETE FROM processed_counts", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db,
                          "INSERT INTO processed_counts (consumer, markers, oldest_ms, newest_ms) "
                          "SELECT consumer, count(*), min(ts), max(ts) FROM processed_markers "
                          "GROUP BY consumer",
                          NULL, NULL, NULL);
    return rc;
}

int ib__sq_body_merge(sq_recorder *s, void *vctx, ib_error *local)
{
    ib__sq_merge_ctx *c = vctx;
    (void)local;
    c->moved = 0;
    int rc = ib__sq_catch_up(s);
    if (rc == SQLITE_OK && s->counts_stale)
        rc = recount(s);
    if (rc != SQLITE_OK)
        return rc;
    uint64_t upto = s->tail.seen >> IB__SQ_SEQ_SHIFT;
    uint64_t previous = s->tail.merged >> IB__SQ_SEQ_SHIFT;
    if (s->tail.used == 0 || (!c->force && s->tail.used < s->merge_keys))
        return SQLITE_OK;
    merge_list l = {.items = malloc((s->tail.used + 1) * sizeof(*l.items))};
    if (l.items == NULL)
        return SQLITE_NOMEM;
    ib__sq_tail_each(&s->tail, collect, &l);
    qsort(l.items, l.n, sizeof(*l.items), by_key);
    if (s->merge_hook != NULL)
        s->merge_hook(s->merge_hook_ctx, l.n);
    int64_t lease_now = s->base.lease_now_ms();
    size_t carried = 0;
    sq_tally tally = {0};
    for (size_t i = 0; i < l.n && rc == SQLITE_OK; i++) {
        if (in_flight(l.items[i].e, lease_now)) {
            rc = carry(s, l.items[i].e);
            carried++;
        } else {
            rc = merge_entry(s, l.items[i].e, &tally);
        }
    }
    free(l.items);
    if (rc == SQLITE_OK)
        rc = ib__sq_tally_write(s, &tally, INT64_MIN);
    ib__sq_tally_free(&tally);
    if (rc == SQLITE_OK)
        rc = trim(s, previous, upto);
    if (rc == SQLITE_OK)
        c->moved = l.n - carried;
    return rc;
}
