/* sqlite: the processes reading the journal, and the filter they build
 * from the B-tree without holding anything for long (schema version 5).
 *
 * Why: a process must read every journal row a merge moves into the
 * B-tree, or its Bloom filter misses keys. Merges used to delete the rows
 * of the merge before, so a process two merges behind (a slow handler, a
 * turn at the lock that came late) rescanned the whole B-tree, inside the
 * write lock, and on a busy file fell behind again before it finished.
 *
 * How:
 *  - Each open recorder has a row in processed_readers: a random token,
 *    the journal row it has read up to, and when it said so (the lease
 *    clock, shared by the processes of one host). It says so at most once
 *    a second, inside a write transaction it runs anyway, or in one of its
 *    own from the upkeep when it is idle.
 *  - It also holds a shared lock on a byte of the lock file (its slot)
 *    while it is open. A merge deletes journal rows only up to the lowest
 *    row a live reader still needs; a reader whose slot nobody holds died,
 *    and its row goes; one that has not said anything for READER_LIVE_MS
 *    (stopped, hung) is passed over, and finds on its return that it fell
 *    behind: it builds its filter again, once, and says so in the log.
 *  - The filter is built from the B-tree in short read transactions of
 *    IB__SQ_FILTER_CHUNK (2048) keys each, the recorder mutex released between them,
 *    from the upkeep (the host's keeper thread); until it is complete a new
 *    key costs a B-tree probe instead of none. Marks in the journal reach
 *    it through the catch-up, so it is complete once the scan ends.
 *  - A caller that never runs the upkeep (the library, the CLI) builds it
 *    a small chunk per write transaction. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "uuid.h"

#define READER_LIVE_MS 15000
#define INLINE_CHUNK 512
/* An upkeep older than this means nobody runs it: build inline. */
#define UPKEEP_STALE_MS 2000
#define SLOT_FIRST (1 << 16)
#define SLOT_SPAN (1 << 30)

ib_status ib__sq_reader_init(sq_recorder *s, ib_error *err)
{
    uint8_t rnd[16];
    uint32_t slot = 0;
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd) ||
        getrandom(&slot, sizeof(slot), 0) != (ssize_t)sizeof(slot))
        return ib_error_set(err, IB_ERR_IO, "recorder %s: no randomness for a reader token",
                            s->name);
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(s->reader + 2 * i, 3, "%02x", rnd[i]);
    s->slot = SLOT_FIRST + (int64_t)(slot % SLOT_SPAN);
    if (ib__sq_turn_hold_slot(&s->turn, s->slot) != 0)
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot lock its slot in the lock file",
                            s->name);
    return IB_OK;
}

uint64_t ib__sq_needed_row(const sq_recorder *s)
{
    uint64_t tail_row = s->tail.seen >> IB__SQ_SEQ_SHIFT;
    return s->filter_row < tail_row ? s->filter_row : tail_row;
}

int ib__sq_reader_beat(sq_recorder *s, bool force)
{
    int64_t now = s->base.lease_now_ms();
    if (s->in_memory || (!force && s->beat_at != 0 && now - s->beat_at < IB__SQ_BEAT_MS))
        return SQLITE_OK;
    sqlite3_stmt *st = s->q[Q_READER_BEAT];
    int rc = sqlite3_bind_text(st, 1, s->reader, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 2, (sqlite3_int64)ib__sq_needed_row(s));
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 3, now);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, IB__SQLITE_SCHEMA_VERSION);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 5, (sqlite3_int64)getpid());
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 6, s->slot);
    rc = rc == SQLITE_OK ? ib__sq_step_done(st) : (sqlite3_reset(st), rc);
    if (rc == SQLITE_OK)
        s->beat_pending = now;
    return rc;
}

/* Drops the row of a reader that died. */
static int drop_reader(sq_recorder *s, const char *reader)
{
    sqlite3_stmt *st = s->q[Q_READER_DROP];
    int rc = sqlite3_bind_text(st, 1, reader, -1, SQLITE_TRANSIENT);
    return rc == SQLITE_OK ? ib__sq_step_done(st) : (sqlite3_reset(st), rc);
}

int ib__sq_readers_need(sq_recorder *s, uint64_t *need)
{
    *need = UINT64_MAX;
    if (s->in_memory)
        return SQLITE_OK;
    int64_t now = s->base.lease_now_ms();
    char dead[8][IB__SQ_READER_LEN + 1];
    size_t ndead = 0;
    sqlite3_stmt *st = s->q[Q_READER_LIST];
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *reader = (const char *)sqlite3_column_text(st, 0);
        uint64_t seen = (uint64_t)sqlite3_column_int64(st, 1);
        int64_t beat = sqlite3_column_int64(st, 2);
        int64_t slot = sqlite3_column_int64(st, 3);
        if (reader == NULL || strcmp(reader, s->reader) == 0)
            continue;
        if (!ib__sq_turn_slot_held(&s->turn, slot)) {
            if (ndead < sizeof(dead) / sizeof(dead[0]))
                snprintf(dead[ndead++], sizeof(dead[0]), "%s", reader);
            continue;
        }
        if (now - beat <= READER_LIVE_MS && seen < *need)
            *need = seen;
    }
    int rrc = sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    for (size_t i = 0; i < ndead && rrc == SQLITE_OK; i++)
        rrc = drop_reader(s, dead[i]);
    return rrc;
}

int ib__sq_reader_leave(sq_recorder *s, void *vctx, ib_error *local)
{
    (void)vctx;
    (void)local;
    return drop_reader(s, s->reader);
}

/* --- the filter ---------------------------------------------------------- */

void ib__sq_filter_note(sq_recorder *s, const char *consumer, const uint8_t id[16])
{
    if (s->filter_complete)
        ib__sq_filter_add(&s->filter, consumer, id);
    if (s->filter_building)
        ib__sq_filter_add(&s->next, consumer, id);
}

static void add_tail_mark(void *ctx, const sq_tail_entry *e)
{
    sq_recorder *s = ctx;
    if (e->done)
        ib__sq_filter_add(&s->next, e->consumer, e->id);
}

static void drop_cursor(sq_recorder *s)
{
    free(s->scan_consumer);
    free(s->scan_event);
    s->scan_consumer = s->scan_event = NULL;
}

/* Starts a build, after a catch-up in the open transaction: sized for
 * twice the markers plus a few merges; the tail's marks go in now, the
 * journal's later ones through the catch-up, the B-tree's by the scan.
 * A complete filter that only grew full keeps answering meanwhile. */
static int filter_start(sq_recorder *s)
{
    uint64_t n = 0;
    int rc = ib__sq_read_count(&n, s->q[Q_MARKER_COUNT]);
    if (rc != SQLITE_OK)
        return rc;
    uint64_t slack = s->merge_keys < (1u << 20) ? 4 * s->merge_keys : 4u << 20;
    drop_cursor(s);
    s->scan_consumer = strdup("");
    s->scan_event = strdup("");
    if (s->scan_consumer == NULL || s->scan_event == NULL ||
        !ib__sq_filter_reset(&s->next, 2 * n + slack)) {
        drop_cursor(s);
        return SQLITE_NOMEM;
    }
    ib__sq_tail_each(&s->tail, add_tail_mark, s);
    s->filter_row = s->tail.seen >> IB__SQ_SEQ_SHIFT;
    s->filter_building = true;
    s->filter_grow = false;
    s->filter_started_ms = ib_clock_monotonic_ms();
    return SQLITE_OK;
}

static void filter_finish(sq_recorder *s)
{
    drop_cursor(s);
    ib__sq_filter_free(&s->filter);
    s->filter = s->next;
    memset(&s->next, 0, sizeof(s->next));
    s->filter_building = false;
    s->filter_complete = true;
    int64_t ms = ib_clock_monotonic_ms() - s->filter_started_ms;
    if (s->filter_stale)
        ib_log(IB_SEV_INFO, "marker filter rebuilt", IB_LOG_STR("recorder", s->name),
               IB_LOG_U64("keys", s->filter.count), IB_LOG_I64("took_ms", ms));
    s->filter_stale = false;
}

/* Scans up to `chunk` keys of the B-tree after the cursor into the filter. */
static int filter_step(sq_recorder *s, unsigned chunk)
{
    s->filter_chunks++;
    sqlite3_stmt *st = s->q[Q_FILTER_SCAN];
    unsigned rows = 0;
    uint8_t id[16];
    int rc = sqlite3_bind_text(st, 1, s->scan_consumer, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, s->scan_event, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 3, (int)chunk);
    const char *consumer = NULL, *event_id = NULL;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        consumer = (const char *)sqlite3_column_text(st, 0);
        event_id = (const char *)sqlite3_column_text(st, 1);
        rows++;
        rc = SQLITE_OK;
        /* a key that is no normalised id can never be asked for */
        if (consumer != NULL && event_id != NULL && ib_id_pack(id, event_id))
            ib__sq_filter_add(&s->next, consumer, id);
        if (rows == chunk && consumer != NULL && event_id != NULL) {
            char *c = strdup(consumer), *e = strdup(event_id);
            if (c == NULL || e == NULL) {
                free(c);
                free(e);
                rc = SQLITE_NOMEM;
                break;
            }
            drop_cursor(s);
            s->scan_consumer = c;
            s->scan_event = e;
        }
    }
    int rrc = sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_OK)
        return rc;
    if (rrc != SQLITE_OK)
        return rrc;
    if (rows < chunk)
        filter_finish(s);
    return SQLITE_OK;
}

int ib__sq_filter_advance(sq_recorder *s, unsigned chunk)
{
    int rc = SQLITE_OK;
    if (s->filter_complete && !s->filter_grow && !s->filter_building)
        return rc;
    if (!s->filter_building)
        rc = filter_start(s);
    if (rc == SQLITE_OK && s->filter_building)
        rc = filter_step(s, chunk);
    return rc;
}

void ib__sq_filter_stale(sq_recorder *s, uint64_t trimmed)
{
    if (!s->filter_complete && !s->filter_building)
        return;
    ib__sq_filter_free(&s->next);
    drop_cursor(s);
    ib_log(IB_SEV_WARN,
           "marker filter fell behind the journal (this process read nothing for a while); "
           "building it again in the background",
           IB_LOG_STR("recorder", s->name), IB_LOG_U64("filter_row", s->filter_row),
           IB_LOG_U64("trimmed_row", trimmed));
    s->filter_complete = false;
    s->filter_building = false;
    s->filter_stale = true;
    s->stale_rebuilds++;
}

bool ib__sq_filter_build_due(const sq_recorder *s)
{
    return !s->filter_complete || s->filter_grow || s->filter_building;
}

bool ib__sq_filter_inline_due(const sq_recorder *s)
{
    return ib__sq_filter_build_due(s) &&
           (s->upkeep_at == 0 || ib_clock_monotonic_ms() - s->upkeep_at > UPKEEP_STALE_MS);
}

unsigned ib__sq_inline_chunk(void)
{
    return INLINE_CHUNK;
}
