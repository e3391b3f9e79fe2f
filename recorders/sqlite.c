/* sqlite: markers in a SQLite file shared by the processes of one host.
 *
 * Concurrency:
 *  - Between processes: WAL mode, a busy handler, and every write inside
 *    BEGIN IMMEDIATE, so a writer takes the write lock before it reads and
 *    never has to upgrade a read transaction (the case where SQLite returns
 *    SQLITE_BUSY without calling the busy handler). Whatever BUSY/LOCKED
 *    still comes back (busy timeout spent, WAL recovery, ...) is retried
 *    (sqlite_exec.c) with jittered back-off, the whole transaction over,
 *    until a generous deadline: max(60 s, 6 x busy timeout). SQLite's own
 *    busy timeout sleeps 1, 2, 5, 10 ms... between tries, far longer than
 *    the write transactions it waits for (a fraction of a millisecond),
 *    so processes sharing a file spent most of their time asleep; the
 *    recorder's handler (sqlite_exec.c) polls from 50 us up. Every
 *    transaction body is idempotent, so replaying it is safe; transactional
 *    work (sqlite_txn.c) is not, and is never replayed once it ran.
 *  - Between threads: one connection per recorder, opened NOMUTEX, and one
 *    recorder mutex around every call: the cached statements and the
 *    multi-statement transactions need the serialisation anyway, so
 *    SQLite's own connection mutex would only be paid twice.
 *
 * Write cost: markers are keyed by random ids, so writing them straight
 * into a B-tree dirtied a page per key wherever it lay. They go to an
 * append-only journal instead and reach the B-tree in sorted merges
 * (sqlite_journal.c). Three settings, measured on that layout:
 *  - new files use 4 KiB pages: journal rows fill whole pages and a merge
 *    writes runs of sorted keys, so larger pages cost fewer page writes
 *    (bench/recorder_bench, acquire/mark batches of 256: 1 KiB pages,
 *    chosen when every commit wrote random pages, gave 181 000-188 000
 *    ids/s over 200 000 ids and 80 000 over a million; 4 KiB pages
 *    219 000-221 000 and 95 000);
 *  - the WAL is checkpointed past 16 MiB instead of every 1000 pages: a
 *    page rewritten by many commits is copied back once, and the fsyncs
 *    of a checkpoint are paid far less often (ib__sq_wal_bound says how it
 *    stays bounded with several writers);
 *  - a page cache of up to 8 MiB per connection keeps the tree's upper
 *    pages between transactions (SQLite keeps its cache while no other
 *    connection writes); a larger one only raised peak memory.
 *
 * A new file is created with open(O_CREAT|O_EXCL) and fchmod to the
 * configured mode (0600 by default, whatever the umask) before SQLite opens
 * it; SQLite gives the -wal and -shm files it creates the mode of the
 * database file. An existing file keeps its mode. The descriptor closed
 * after creating is never one SQLite uses: O_EXCL guarantees no connection
 * in this process had the file open, so no POSIX lock is lost. */
#include "recorder_internal.h"
#include "sqlite_internal.h"
#include "uuid.h"
#include "clock.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NAME_MAX_SHOWN IB__SQ_NAME_SHOWN
#define DEFAULT_PRUNE_ROWS 2000
#define RETRY_FLOOR_MS 60000
#define NEW_FILE_PAGE_SIZE 4096
#define WAL_KEEP_BYTES (64 * 1024 * 1024)
/* Page cache per connection. 8 MiB keeps a host with a million markers
 * near 20 MiB peak RSS (64 MiB let it reach 85 MiB) and measured no slower:
 * with random ids, commits touch scattered pages either way. */
#define CACHE_KIB 8192

static const char *const query_sql[Q_COUNT] = {
    [Q_BEGIN_READ] = "BEGIN",
    [Q_BEGIN_WRITE] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    /* Every transaction checks that the file still speaks our schema:
     * data_version moves when another connection committed, and only then
     * is user_version read again (sqlite_exec.c). */
    [Q_DATA_VERSION] = "PRAGMA data_version",
    [Q_USER_VERSION] = "PRAGMA user_version",
    /* One row always: a key's state in the B-trees. The marker's ts is
     * NULL when it is not marked; fingerprints are stored as signed 64-bit
     * INTEGERs (all bits kept), NULL = none. */
    [Q_STATE_GET] = "SELECT c.owner, c.expires_ms, m.ts, coalesce(m.fp, 0), "
                    "coalesce(c.attempts, 0) FROM (SELECT 1) "
                    "LEFT JOIN processed_markers m ON m.consumer = ?1 AND m.event_id = ?2 "
                    "LEFT JOIN processed_claims c ON c.consumer = ?1 AND c.event_id = ?2",
    [Q_MARKER_GET] = "SELECT ts, coalesce(fp, 0) FROM processed_markers "
                     "WHERE consumer = ?1 AND event_id = ?2",
    [Q_MARKER_COUNT] = "SELECT coalesce(sum(markers), 0) FROM processed_counts",
    [Q_MARKER_KEYS] = "SELECT consumer, event_id FROM processed_markers",
    [Q_CLAIMS_ANY] = "SELECT EXISTS (SELECT 1 FROM processed_claims)",
    [Q_JOURNAL_PUT] = "INSERT INTO processed_journal (seq, consumer, states, marked, ts) "
                      "VALUES (?1, ?2, ?3, ?4, ?5)",
    /* The states are parsed by sqlite_states.c. */
    [Q_JOURNAL_READ] = "SELECT seq, consumer, states FROM processed_journal WHERE seq > ?1 "
                       "ORDER BY seq",
    [Q_JOURNAL_TRIM] = "DELETE FROM processed_journal WHERE seq <= ?1",
    /* counted_seq: the merge processed_counts last followed. Only merges of
     * version 5 or later raise it; an older process's merge leaves it
     * behind, and the next merge of ours counts the B-tree again. */
    [Q_MERGE_STATE] = "SELECT merged_seq, trimmed_seq, counted_seq FROM processed_merge",
    [Q_MERGE_SET] = "UPDATE processed_merge SET merged_seq = ?1, trimmed_seq = ?2, "
                    "counted_seq = ?1",
    /* A merge inserts, and counts what it inserted (sqlite_counts.c); a
     * key that has a row already was forgotten and marked again. */
    [Q_MARKER_PUT] = "INSERT OR IGNORE INTO processed_markers (consumer, event_id, ts, fp) "
                     "VALUES (?1, ?2, ?3, ?4)",
    [Q_MARKER_FIX] = "UPDATE processed_markers SET ts = ?3, fp = ?4 "
                     "WHERE consumer = ?1 AND event_id = ?2 AND (ts IS NOT ?3 OR fp IS NOT ?4)",
    [Q_MARKER_DEL] = "DELETE FROM processed_markers WHERE consumer = ?1 AND event_id = ?2",
    [Q_COUNTS_ADD] = "INSERT INTO processed_counts (consumer, markers, oldest_ms, newest_ms) "
                     "VALUES (?1, max(?2, 0), max(?3, ?5), ?4) ON CONFLICT (consumer) DO UPDATE "
                     "SET markers = max(markers + ?2, 0), oldest_ms = max(min(oldest_ms, ?3), ?5), "
                     "newest_ms = max(newest_ms, ?4)",
    [Q_READER_BEAT] = "INSERT OR REPLACE INTO processed_readers (reader, seen_row, beat_ms, "
                      "schema, pid, slot) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [Q_READER_LIST] = "SELECT reader, seen_row, beat_ms, slot FROM processed_readers",
    [Q_READER_DROP] = "DELETE FROM processed_readers WHERE reader = ?1",
    /* The filter is built from the B-tree in short read transactions of
     * ?3 keys each, in key order from a cursor (sqlite_readers.c). */
    [Q_FILTER_SCAN] = "SELECT consumer, event_id FROM processed_markers "
                      "WHERE (consumer, event_id) > (?1, ?2) ORDER BY consumer, event_id LIMIT ?3",
    [Q_CLAIM_SET] = "INSERT OR REPLACE INTO processed_claims (consumer, event_id, owner, "
                    "expires_ms, attempts) VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_CLAIM_DEL] = "DELETE FROM processed_claims WHERE consumer = ?1 AND event_id = ?2",
    /* Prune runs after a full merge, on the B-tree. It walks the primary
     * key in ranges of at most N rows, so a transaction examines and
     * deletes a bounded number of rows however few of them are old (there
     * is deliberately no index on ts). */
    [Q_PRUNE_END] = "SELECT consumer, event_id FROM processed_markers "
                    "WHERE (consumer, event_id) > (?1, ?2) "
                    "ORDER BY consumer, event_id LIMIT 1 OFFSET ?3",
    [Q_PRUNE_RANGE] = "DELETE FROM processed_markers WHERE (consumer, event_id) > (?1, ?2) "
                      "AND (consumer, event_id) <= (?3, ?4) AND ts < ?5 RETURNING consumer",
    [Q_PRUNE_REST] = "DELETE FROM processed_markers WHERE (consumer, event_id) > (?1, ?2) "
                     "AND ts < ?5 RETURNING consumer",
    [Q_PRUNE_CLAIMS] = "DELETE FROM processed_claims WHERE (consumer, event_id) IN "
                       "(SELECT consumer, event_id FROM processed_claims "
                       "WHERE expires_ms <= ?1 LIMIT ?2)",
    [Q_LIST_ALL] = "SELECT consumer, event_id, ts FROM processed_log ORDER BY ts DESC LIMIT ?1",
    [Q_LIST_ONE] = "SELECT consumer, event_id, ts FROM processed_log WHERE consumer = ?2 "
                   "ORDER BY ts DESC LIMIT ?1",
    /* The counts plus the unmerged journal rows: a few rows, whatever the
     * file holds (sqlite_counts.c). */
    [Q_STATS] =
        "WITH j AS (SELECT consumer, marked, ts FROM processed_journal "
        "WHERE seq > (SELECT merged_seq FROM processed_merge)), "
        "per AS (SELECT consumer, sum(n) AS n FROM (SELECT consumer, markers AS n "
        "FROM processed_counts UNION ALL SELECT consumer, marked FROM j) "
        "GROUP BY consumer), "
        "times AS (SELECT oldest_ms AS lo, newest_ms AS hi FROM processed_counts "
        "WHERE markers > 0 UNION ALL SELECT ts, ts FROM j WHERE marked > 0) "
        "SELECT (SELECT coalesce(sum(n), 0) FROM per), "
        "(SELECT count(*) FROM per WHERE n > 0), "
        "(SELECT coalesce(min(lo), 0) FROM times), (SELECT coalesce(max(hi), 0) FROM times)",
    /* Live claims: the B-tree's that the journal does not override, and
     * the journal's newest states. */
    [Q_STATS_CLAIMS] =
        "SELECT (SELECT count(*) FROM processed_claims WHERE owner <> '' AND "
        "(consumer, event_id) NOT IN (SELECT consumer, event_id FROM processed_states)) + "
        "(SELECT count(*) FROM (SELECT done, owner, max(pos) FROM processed_states "
        "GROUP BY consumer, event_id) WHERE done = 0 AND owner <> '')",
    [Q_STATS_PAGES] = "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
    [Q_SAVEPOINT] = "SAVEPOINT " IB__SQ_SAVEPOINT,
    [Q_SAVEPOINT_RELEASE] = "RELEASE " IB__SQ_SAVEPOINT,
    [Q_SAVEPOINT_UNDO] = "ROLLBACK TO " IB__SQ_SAVEPOINT,
    [Q_OUTBOX_PUT] = "INSERT INTO processed_outbox (subject, msg_id, data, staged_ms) "
                     "VALUES (?1, ?2, ?3, ?4)",
    [Q_OUTBOX_PEEK] = "SELECT seq, subject, msg_id, data, staged_ms FROM processed_outbox "
                      "ORDER BY seq LIMIT ?1",
    [Q_OUTBOX_DEL] = "DELETE FROM processed_outbox WHERE seq = ?1",
    /* The outbox is drained as it fills, so counting its rows stays cheap. */
    [Q_OUTBOX_COUNT] = "SELECT count(*) FROM processed_outbox",
};

static const ib_recorder_ops sq_ops;

static inline sq_recorder *sq(ib_recorder *r)
{
    return (sq_recorder *)r;
}

/* Runs a write body, then merges if the journal is due. */
static ib_status run_write(sq_recorder *s, tx_body body, void *ctx, ib_error *err)
{
    pthread_mutex_lock(&s->mu);
    ib_status st = ib__sq_run(s, TX_WRITE, body, ctx, err);
    if (st == IB_OK)
        ib__sq_maybe_merge(s);
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* --- transaction bodies ------------------------------------------------- */

/* The wrappers checked the owner's length (recorder.c). */
static void set_owner(sq_state *st, const char *owner)
{
    memcpy(st->owner, owner, strnlen(owner, IB_OWNER_MAX) + 1);
    st->owner[IB_OWNER_MAX] = '\0';
}

typedef struct batch_ctx {
    const ib_marker_key *keys;
    size_t n;
    bool *processed;
    ib_claim_state *states;
    const char *owner;
    int64_t lease_ms;
} batch_ctx;

static int body_check(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++) {
        rc = ib__sq_state_get(s, &st, &c->keys[i]);
        c->processed[i] = rc == SQLITE_OK && st.done;
    }
    return rc;
}

/* The seed's mark: no owner, so any claim ends with it. */
static int body_mark(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    int64_t now = s->base.now_ms();
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++)
        rc = ib__sq_write_marker(s, &c->keys[i], "", INT64_MAX, now, 0);
    return rc;
}

static int claim_one(sq_recorder *s, ib_claim_state *state, const ib_marker_key *key,
                     const char *owner, int64_t now, int64_t expires)
{
    sq_state st;
    int rc = ib__sq_state_get(s, &st, key);
    if (rc != SQLITE_OK)
        return rc;
    if (st.done)
        *state = IB_CLAIM_DONE;
    else if (ib__sq_foreign_claim(&st, owner, now))
        *state = IB_CLAIM_BUSY;
    else
        *state = IB_CLAIM_ACQUIRED;
    if (*state != IB_CLAIM_ACQUIRED)
        return SQLITE_OK;
    set_owner(&st, owner);
    st.expires = expires;
    return ib__sq_state_put(s, key, &st, false);
}

static int body_claim(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    int64_t now = s->base.lease_now_ms();
    int64_t expires = ib__lease_end(now, c->lease_ms);
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++)
        rc = claim_one(s, &c->states[i], &c->keys[i], c->owner, now, expires);
    return rc;
}

/* A released claim keeps its attempt count; its expiry becomes the
 * release time, which prune reads as its age. */
static int body_release(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    sq_state st;
    (void)local;
    int64_t now = s->base.lease_now_ms();
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++) {
        rc = ib__sq_state_get(s, &st, &c->keys[i]);
        if (rc != SQLITE_OK || strcmp(st.owner, c->owner) != 0)
            continue;
        st.owner[0] = '\0';
        st.expires = now;
        rc = ib__sq_state_put(s, &c->keys[i], &st, st.done);
    }
    return rc;
}

/* --- attempts, fenced leases and marks ------------------------------------ */

typedef struct acquire_ctx {
    const ib_marker_key *keys;
    const uint64_t *fps; /* NULL = no conflict check */
    size_t n;
    ib_claim_info *out;
    const ib_claim_request *req;
} acquire_ctx;

/* Decides one key of an acquire; `*take` when it is ours to claim. */
static void acquire_decide(ib_claim_info *out, bool *take, const sq_state *st, uint64_t fp,
                           const ib_claim_request *req, int64_t now)
{
    *out = (ib_claim_info){.state = IB_CLAIM_DONE, .attempts = st->attempts};
    *take = false;
    if (st->done) {
        if (fp != 0 && st->fp != 0 && fp != st->fp)
            out->state = IB_CLAIM_CONFLICT;
        return;
    }
    int64_t hold = ib__claim_hold_ms(st->owner, req->owner, st->expires, now, req->lease_ms,
                                     req->probe_holders, true);
    if (hold > 0) {
        out->state = IB_CLAIM_BUSY;
        out->remaining_ms = hold;
    } else if (req->max_attempts > 0 && st->attempts >= req->max_attempts) {
        out->state = IB_CLAIM_EXHAUSTED;
    } else {
        out->state = IB_CLAIM_ACQUIRED;
        out->attempts = st->attempts == UINT32_MAX ? UINT32_MAX : st->attempts + 1;
        *take = true;
    }
}

static int body_acquire(sq_recorder *s, void *vctx, ib_error *local)
{
    acquire_ctx *c = vctx;
    const ib_claim_request *req = c->req;
    int64_t now = s->base.lease_now_ms();
    int64_t expires = ib__lease_end(now, req->lease_ms);
    sq_state st;
    bool take;
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++) {
        rc = ib__sq_state_get(s, &st, &c->keys[i]);
        if (rc != SQLITE_OK)
            break;
        acquire_decide(&c->out[i], &take, &st, c->fps != NULL ? c->fps[i] : 0, req, now);
        if (!take)
            continue;
        set_owner(&st, req->owner);
        st.expires = expires;
        st.attempts = c->out[i].attempts;
        rc = ib__sq_state_put(s, &c->keys[i], &st, st.done);
    }
    return rc;
}

typedef struct owned_ctx {
    const ib_marker_key *keys;
    const uint64_t *fps; /* mark: stored with the markers; NULL = none */
    size_t n;
    bool *flags; /* held / marked */
    const char *owner;
    int64_t lease_ms;
} owned_ctx;

static int body_renew(sq_recorder *s, void *vctx, ib_error *local)
{
    owned_ctx *c = vctx;
    int64_t now = s->base.lease_now_ms();
    int64_t expires = ib__lease_end(now, c->lease_ms);
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++) {
        rc = ib__sq_state_get(s, &st, &c->keys[i]);
        c->flags[i] = rc == SQLITE_OK && strcmp(st.owner, c->owner) == 0;
        if (!c->flags[i])
            continue;
        st.expires = expires;
        rc = ib__sq_state_put(s, &c->keys[i], &st, st.done);
    }
    return rc;
}

/* Marks the keys whose claim is ours, released or lapsed. Another owner's
 * live claim means it took the work over, and its result decides. */
static int body_mark_owned(sq_recorder *s, void *vctx, ib_error *local)
{
    owned_ctx *c = vctx;
    int64_t lease_now = s->base.lease_now_ms();
    int64_t ts = s->base.now_ms();
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++) {
        rc = ib__sq_state_get(s, &st, &c->keys[i]);
        c->flags[i] = rc == SQLITE_OK && !ib__sq_foreign_claim(&st, c->owner, lease_now);
        if (c->flags[i])
            rc = ib__sq_write_marker(s, &c->keys[i], c->owner, lease_now, ts,
                                     c->fps != NULL ? c->fps[i] : 0);
    }
    return rc;
}

static ib_status sq_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                  const uint64_t *fingerprints, size_t n,
                                  const ib_claim_request *req, ib_error *err)
{
    acquire_ctx c = {.keys = keys, .fps = fingerprints, .n = n, .out = out, .req = req};
    return run_write(sq(r), body_acquire, &c, err);
}

static ib_status sq_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                                const char *owner, int64_t lease_ms, ib_error *err)
{
    owned_ctx c = {.keys = keys, .n = n, .flags = held, .owner = owner, .lease_ms = lease_ms};
    return run_write(sq(r), body_renew, &c, err);
}

static ib_status sq_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                     const uint64_t *fingerprints, size_t n, const char *owner,
                                     ib_error *err)
{
    owned_ctx c = {.keys = keys, .fps = fingerprints, .n = n, .flags = marked, .owner = owner};
    return run_write(sq(r), body_mark_owned, &c, err);
}

/* --- vtable: the seed calls, batches, claims ------------------------------ */

static ib_status sq_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                 const char *event_id, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    batch_ctx c = {.keys = &key, .n = 1, .processed = processed};
    return ib__sq_run_locked(sq(r), TX_READ, body_check, &c, err);
}

static ib_status sq_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys,
                                size_t n, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .processed = processed};
    return ib__sq_run_locked(sq(r), TX_READ, body_check, &c, err);
}

static ib_status sq_mark(ib_recorder *r, const char *consumer, const char *event_id, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    batch_ctx c = {.keys = &key, .n = 1};
    return run_write(sq(r), body_mark, &c, err);
}

static ib_status sq_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n};
    return run_write(sq(r), body_mark, &c, err);
}

static ib_status sq_claim(ib_recorder *r, ib_claim_state *state, const char *consumer,
                          const char *event_id, const char *owner, int64_t lease_ms, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    batch_ctx c = {.keys = &key, .n = 1, .states = state, .owner = owner, .lease_ms = lease_ms};
    return run_write(sq(r), body_claim, &c, err);
}

static ib_status sq_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                                size_t n, const char *owner, int64_t lease_ms, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .states = states, .owner = owner, .lease_ms = lease_ms};
    return run_write(sq(r), body_claim, &c, err);
}

static ib_status sq_release(ib_recorder *r, const char *consumer, const char *event_id,
                            const char *owner, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    batch_ctx c = {.keys = &key, .n = 1, .owner = owner};
    return run_write(sq(r), body_release, &c, err);
}

static ib_status sq_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                  const char *owner, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .owner = owner};
    return run_write(sq(r), body_release, &c, err);
}

/* --- vtable: admin calls ------------------------------------------------ */

typedef struct lookup_ctx {
    const char *consumer;
    const char *event_id;
    bool found;
    int64_t ts_ms;
} lookup_ctx;

static int body_lookup(sq_recorder *s, void *vctx, ib_error *local)
{
    lookup_ctx *c = vctx;
    ib_marker_key key = {c->consumer, c->event_id};
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    if (rc == SQLITE_OK)
        rc = ib__sq_state_get(s, &st, &key);
    c->found = rc == SQLITE_OK && st.done;
    c->ts_ms = c->found ? st.ts : 0;
    return rc;
}

static ib_status sq_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                           const char *event_id, ib_error *err)
{
    lookup_ctx c = {.consumer = consumer, .event_id = event_id};
    ib_status st = ib__sq_run_locked(sq(r), TX_READ, body_lookup, &c, err);
    *found = c.found;
    *ts_ms = c.ts_ms;
    return st;
}

/* Forgetting is a new state like any other: not marked, no attempts,
 * claim kept. */
static int body_forget(sq_recorder *s, void *vctx, ib_error *local)
{
    lookup_ctx *c = vctx;
    ib_marker_key key = {c->consumer, c->event_id};
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    if (rc == SQLITE_OK)
        rc = ib__sq_state_get(s, &st, &key);
    c->found = rc == SQLITE_OK && st.done;
    if (rc != SQLITE_OK || (!c->found && st.attempts == 0))
        return rc;
    st.done = false;
    st.ts = 0;
    st.fp = 0;
    st.attempts = 0;
    return ib__sq_state_put(s, &key, &st, c->found);
}

static ib_status sq_forget(ib_recorder *r, bool *existed, const char *consumer,
                           const char *event_id, ib_error *err)
{
    lookup_ctx c = {.consumer = consumer, .event_id = event_id};
    ib_status st = run_write(sq(r), body_forget, &c, err);
    *existed = c.found;
    return st;
}

/* One prune transaction: the range of at most prune_rows keys after the
 * cursor. The cursor only moves once the transaction committed. */
typedef struct prune_ctx {
    char *cur_consumer, *cur_event; /* exclusive lower bound */
    char *end_consumer, *end_event; /* inclusive upper bound; NULL = the rest */
    int64_t older_than_ms;
    int64_t now_ms;
    int64_t deleted;
} prune_ctx;

static void prune_drop_end(prune_ctx *c)
{
    free(c->end_consumer);
    free(c->end_event);
    c->end_consumer = c->end_event = NULL;
}

/* Steps a prune DELETE ... RETURNING consumer, counting what it deleted
 * per consumer into processed_counts (whose oldest times rise to the
 * cutoff: nothing older is left). */
static int prune_delete(sq_recorder *s, prune_ctx *c, sqlite3_stmt *del)
{
    sq_tally tally = {0};
    int rc;
    while ((rc = sqlite3_step(del)) == SQLITE_ROW) {
        const char *consumer = (const char *)sqlite3_column_text(del, 0);
        if (consumer == NULL || !ib__sq_tally_add(&tally, consumer, -1, 0)) {
            rc = SQLITE_NOMEM;
            break;
        }
        c->deleted++;
    }
    int rrc = sqlite3_reset(del);
    if (rc == SQLITE_DONE)
        rc = rrc;
    if (rc == SQLITE_OK)
        rc = ib__sq_tally_write(s, &tally, c->older_than_ms);
    ib__sq_tally_free(&tally);
    return rc;
}

static int body_prune(sq_recorder *s, void *vctx, ib_error *local)
{
    prune_ctx *c = vctx;
    sqlite3_stmt *end = s->q[Q_PRUNE_END];
    (void)local;
    prune_drop_end(c);
    c->deleted = 0;
    int rc = sqlite3_bind_text(end, 1, c->cur_consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(end, 2, c->cur_event, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(end, 3, (sqlite3_int64)s->prune_rows - 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(end);
    if (rc == SQLITE_ROW) {
        const char *ec = (const char *)sqlite3_column_text(end, 0);
        const char *ee = (const char *)sqlite3_column_text(end, 1);
        c->end_consumer = ec != NULL ? strdup(ec) : NULL;
        c->end_event = ee != NULL ? strdup(ee) : NULL;
        rc = c->end_consumer != NULL && c->end_event != NULL ? SQLITE_DONE : SQLITE_NOMEM;
    }
    int rrc = sqlite3_reset(end);
    if (rc != SQLITE_DONE)
        return rc;
    if (rrc != SQLITE_OK)
        return rrc;

    sqlite3_stmt *del = s->q[c->end_consumer != NULL ? Q_PRUNE_RANGE : Q_PRUNE_REST];
    rc = sqlite3_bind_text(del, 1, c->cur_consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(del, 2, c->cur_event, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && c->end_consumer != NULL)
        rc = sqlite3_bind_text(del, 3, c->end_consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && c->end_consumer != NULL)
        rc = sqlite3_bind_text(del, 4, c->end_event, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(del, 5, c->older_than_ms);
    return rc == SQLITE_OK ? prune_delete(s, c, del) : (sqlite3_reset(del), rc);
}

static int body_prune_claims(sq_recorder *s, void *vctx, ib_error *local)
{
    prune_ctx *c = vctx;
    sqlite3_stmt *st = s->q[Q_PRUNE_CLAIMS];
    (void)local;
    int rc = sqlite3_bind_int64(st, 1, c->now_ms);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 2, s->prune_rows);
    if (rc == SQLITE_OK)
        rc = ib__sq_step_done(st);
    else
        sqlite3_reset(st);
    c->deleted = rc == SQLITE_OK ? sqlite3_changes64(s->db) : 0;
    return rc;
}

/* The journal is merged first, so that every marker and claim is in the
 * B-trees prune walks. Each batch is its own transaction, and the lock is
 * dropped between them so other threads of this process get their turn
 * too. */
static ib_status sq_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err)
{
    sq_recorder *s = sq(r);
    prune_ctx c = {.older_than_ms = older_than_ms, .now_ms = r->now_ms()};
    uint64_t transactions = 0;
    *removed = 0;
    ib_status st = ib__sqlite_merge(r, NULL, err);
    if (st != IB_OK)
        return st;
    /* Consumers are never empty, so ("", "") is below every key. */
    c.cur_consumer = strdup("");
    c.cur_event = strdup("");
    if (c.cur_consumer == NULL || c.cur_event == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "recorder %s: out of memory", s->name);
        goto out;
    }
    for (;;) {
        st = ib__sq_run_locked(s, TX_WRITE, body_prune, &c, err);
        if (st != IB_OK)
            goto out;
        transactions++;
        *removed += (uint64_t)c.deleted;
        if (c.end_consumer == NULL)
            break;
        free(c.cur_consumer);
        free(c.cur_event);
        c.cur_consumer = c.end_consumer;
        c.cur_event = c.end_event;
        c.end_consumer = c.end_event = NULL;
    }
    do {
        st = ib__sq_run_locked(s, TX_WRITE, body_prune_claims, &c, err);
        transactions++;
    } while (st == IB_OK && c.deleted >= (int64_t)s->prune_rows);
out:
    pthread_mutex_lock(&s->mu);
    s->prune_transactions = transactions;
    pthread_mutex_unlock(&s->mu);
    prune_drop_end(&c);
    free(c.cur_consumer);
    free(c.cur_event);
    return st;
}

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
    sqlite3_stmt *st = s->q[c->consumer != NULL ? Q_LIST_ONE : Q_LIST_ALL];
    int rc = sqlite3_bind_int64(st, 1, c->limit == 0 ? -1 : (sqlite3_int64)c->limit);
    if (rc == SQLITE_OK && c->consumer != NULL)
        rc = sqlite3_bind_text(st, 2, c->consumer, -1, SQLITE_STATIC);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        ib_marker_info info = {
            .consumer = (const char *)sqlite3_column_text(st, 0),
            .event_id = (const char *)sqlite3_column_text(st, 1),
            .ts_ms = sqlite3_column_int64(st, 2),
        };
        if (info.consumer == NULL || info.event_id == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        c->visited = true;
        rc = c->visit(c->ctx, &info) != 0 ? SQLITE_DONE : SQLITE_OK;
    }
    int rrc = sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    if (rrc != SQLITE_OK && c->visited) {
        ib_error_set(local, IB_ERR_RECORDER, "recorder %s: %s (listing cut short)", s->name,
                     sqlite3_errmsg(s->db));
        return IB__SQLITE_REFUSED;
    }
    return rrc;
}

static ib_status sq_list(ib_recorder *r, const char *consumer, size_t limit,
                         ib_marker_visit_fn visit, void *ctx, ib_error *err)
{
    list_ctx c = {.consumer = consumer, .limit = limit, .visit = visit, .ctx = ctx};
    return ib__sq_run_locked(sq(r), TX_READ, body_list, &c, err);
}

/* --- the end of attempts ------------------------------------------------- */

/* A dead letter's new state for each key: no attempts, claim kept; a key
 * marked or without attempts is not written. */
static int body_end_attempts(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    for (size_t i = 0; i < c->n && rc == SQLITE_OK; i++) {
        rc = ib__sq_state_get(s, &st, &c->keys[i]);
        if (rc != SQLITE_OK || st.done || st.attempts == 0)
            continue;
        st.attempts = 0;
        rc = ib__sq_state_put(s, &c->keys[i], &st, false);
    }
    return rc;
}

static ib_status sq_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n};
    return run_write(sq(r), body_end_attempts, &c, err);
}

typedef struct inspect_ctx {
    ib_marker_key key;
    ib_marker_state *out;
} inspect_ctx;

static int body_inspect(sq_recorder *s, void *vctx, ib_error *local)
{
    inspect_ctx *c = vctx;
    sq_state st;
    (void)local;
    int rc = ib__sq_catch_up(s);
    if (rc == SQLITE_OK)
        rc = ib__sq_state_get(s, &st, &c->key);
    memset(c->out, 0, sizeof(*c->out));
    if (rc != SQLITE_OK)
        return rc;
    int64_t left = st.owner[0] != '\0' ? st.expires - s->base.lease_now_ms() : 0;
    c->out->marked = st.done;
    c->out->ts_ms = st.done ? st.ts : 0;
    c->out->attempts = st.attempts;
    memcpy(c->out->owner, st.owner, sizeof(c->out->owner));
    c->out->owner[IB_OWNER_MAX] = '\0';
    c->out->lease_left_ms = left > 0 ? left : 0;
    return SQLITE_OK;
}

static ib_status sq_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                            const char *event_id, ib_error *err)
{
    inspect_ctx c = {.key = {consumer, event_id}, .out = out};
    return ib__sq_run_locked(sq(r), TX_READ, body_inspect, &c, err);
}

typedef struct attempt_stats_ctx {
    ib_attempt_stats *out;
    uint32_t max_attempts;
} attempt_stats_ctx;

/* After a full merge the B-trees hold every key's newest state: a claim
 * row with attempts and no marker is a key attempted and not ended. An
 * admin call, so its statement is prepared for the one use. */
static int body_attempt_stats(sq_recorder *s, void *vctx, ib_error *local)
{
    const char *sql = "SELECT count(*), coalesce(sum(c.attempts >= ?1), 0) FROM processed_claims c "
                      "WHERE c.attempts > 0 AND NOT EXISTS (SELECT 1 FROM processed_markers m "
                      "WHERE m.consumer = c.consumer AND m.event_id = c.event_id)";
    const attempt_stats_ctx *c = vctx;
    ib_attempt_stats *out = c->out;
    sqlite3_stmt *q = NULL;
    (void)local;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 1, c->max_attempts);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        out->attempted = (uint64_t)sqlite3_column_int64(q, 0);
        out->exhausted = (uint64_t)sqlite3_column_int64(q, 1);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(q);
    return rc;
}

static ib_status sq_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                                  ib_error *err)
{
    attempt_stats_ctx c = {out, max_attempts};
    ib_status st = ib__sqlite_merge(r, NULL, err);
    if (st == IB_OK)
        st = ib__sq_run_locked(sq(r), TX_READ, body_attempt_stats, &c, err);
    return st;
}

static uint64_t file_size(const char *path, const char *suffix)
{
    char p[IB__RECORDER_PATH_MAX + 8];
    struct stat sb;
    snprintf(p, sizeof(p), "%s%s", path, suffix);
    return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static ib_status sq_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err)
{
    sq_recorder *s = sq(r);
    ib_status st = ib__sq_run_locked(s, TX_READ, ib__sq_body_stats, stats, err);
    if (st == IB_OK && !s->in_memory)
        stats->storage_bytes = file_size(s->path, "") + file_size(s->path, "-wal");
    return st;
}

/* --- the upkeep (sqlite_readers.c says what for) ----------------------------- */

static int body_build(sq_recorder *s, void *vctx, ib_error *local)
{
    (void)vctx;
    (void)local;
    int rc = ib__sq_catch_up(s);
    return rc == SQLITE_OK ? ib__sq_filter_advance(s, IB__SQ_FILTER_CHUNK) : rc;
}

static int body_beat(sq_recorder *s, void *vctx, ib_error *local)
{
    (void)vctx;
    (void)local;
    int rc = ib__sq_catch_up(s);
    return rc == SQLITE_OK ? ib__sq_reader_beat(s, true) : rc;
}

static bool upkeep(sq_recorder *s, ib_error *err)
{
    int64_t start = ib_clock_monotonic_ms();
    ib_status st = IB_OK;
    pthread_mutex_lock(&s->mu);
    s->upkeep_at = start;
    if (!s->in_memory && s->base.lease_now_ms() - s->beat_at >= IB__SQ_BEAT_MS)
        st = ib__sq_run(s, TX_WRITE, body_beat, NULL, err);
    pthread_mutex_unlock(&s->mu);
    while (st == IB_OK) {
        pthread_mutex_lock(&s->mu);
        bool more = ib__sq_filter_build_due(s);
        int64_t t0 = ib_clock_monotonic_ns();
        if (more)
            st = ib__sq_run(s, TX_READ, body_build, NULL, err);
        int64_t held = ib_clock_monotonic_ns() - t0;
        if (held > s->upkeep_hold_max_ns)
            s->upkeep_hold_max_ns = held;
        more = more && ib__sq_filter_build_due(s);
        pthread_mutex_unlock(&s->mu);
        if (!more || ib_clock_monotonic_ms() - start >= IB__SQ_UPKEEP_BUILD_MS)
            return more;
        sched_yield();
    }
    return false;
}

static bool sq_upkeep(ib_recorder *r)
{
    return upkeep(sq(r), NULL);
}

static int64_t sq_lock_wait_max_ns(ib_recorder *r)
{
    sq_recorder *s = sq(r);
    pthread_mutex_lock(&s->mu);
    int64_t ns = s->turn.max_wait_ns;
    pthread_mutex_unlock(&s->mu);
    return ns;
}

static uint64_t sq_wal_bytes(ib_recorder *r)
{
    sq_recorder *s = sq(r);
    return s->in_memory ? 0 : file_size(s->path, "-wal");
}

/* --- open and close -------------------------------------------------------- */

static void sq_close(ib_recorder *r)
{
    sq_recorder *s = sq(r);
    /* best effort: a row left behind goes once its slot is seen unlocked */
    if (!s->in_memory)
        ib__sq_run(s, TX_WRITE, ib__sq_reader_leave, NULL, NULL);
    free(s->scan_consumer);
    free(s->scan_event);
    ib__sq_filter_free(&s->next);
    ib__sq_tail_free(&s->tail);
    ib__sq_pending_free(s);
    ib__sq_filter_free(&s->filter);
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(s->q[i]);
    /* close_v2 never fails for lack of finalising; nothing is left here. */
    sqlite3_close_v2(s->db);
    ib__sq_turn_close(&s->turn);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int body_prepare(sq_recorder *s, void *vctx, ib_error *local)
{
    const int *range = vctx;
    (void)local;
    for (int i = range[0]; i < range[1]; i++) {
        if (s->q[i] != NULL)
            continue;
        int rc =
            sqlite3_prepare_v3(s->db, query_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->q[i], NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* Prepares outside ib__sq_run(): BEGIN itself is one of these. */
static ib_status prepare_tx(sq_recorder *s, ib_error *err)
{
    int range[2] = {0, Q_FIRST_SCHEMA};
    int rc = body_prepare(s, range, NULL);
    if (rc != SQLITE_OK)
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name,
                            sqlite3_errmsg(s->db));
    return IB_OK;
}

static int body_wal(sq_recorder *s, void *vctx, ib_error *local)
{
    char mode[16] = "";
    (void)vctx;
    int rc = ib__sqlite_read_value(s->db, "PRAGMA journal_mode = WAL", NULL, mode, sizeof(mode));
    if (rc != SQLITE_OK)
        return rc;
    /* An in-memory database has no WAL; it reports "memory". */
    if (strcmp(mode, s->in_memory ? "memory" : "wal") != 0) {
        ib_error_set(local, IB_ERR_RECORDER, "recorder %s: cannot use WAL (journal_mode is '%s')",
                     s->name, mode);
        return IB__SQLITE_REFUSED;
    }
    return SQLITE_OK;
}

static int body_synchronous(sq_recorder *s, void *vctx, ib_error *local)
{
    int want = *(const int *)vctx;
    char sql[48];
    snprintf(sql, sizeof(sql), "PRAGMA synchronous = %d", want);
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    long long got = -1;
    rc = ib__sqlite_read_value(s->db, "PRAGMA synchronous", &got, NULL, 0);
    if (rc != SQLITE_OK)
        return rc;
    if (got != want) {
        ib_error_set(local, IB_ERR_RECORDER, "recorder %s: synchronous reads back %lld, not %d",
                     s->name, got, want);
        return IB__SQLITE_REFUSED;
    }
    return SQLITE_OK;
}

static int body_schema(sq_recorder *s, void *vctx, ib_error *local)
{
    return ib__sqlite_schema_ensure(s->db, s->name, s->base.now_ms(), vctx, local);
}

/* The first write after the open: the catch-up, and this recorder's row
 * among the readers. */
static int body_join(sq_recorder *s, void *vctx, ib_error *local)
{
    (void)vctx;
    (void)local;
    int rc = ib__sq_catch_up(s);
    return rc == SQLITE_OK ? ib__sq_reader_beat(s, true) : rc;
}

/* The WAL hook: called after every commit of this connection with the
 * WAL's size in frames. Replaces SQLite's autocheckpoint (ib__sq_wal_bound
 * does its job). */
static int on_wal(void *ctx, sqlite3 *db, const char *schema, int frames)
{
    (void)db;
    (void)schema;
    ((sq_recorder *)ctx)->wal_frames = frames;
    return SQLITE_OK;
}

static ib_status create_file(const sq_recorder *s, bool *created, unsigned mode, ib_error *err)
{
    *created = false;
    int fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return IB_OK; /* an existing file keeps its mode */
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot create the file: %s", s->name,
                            strerror(errno));
    }
    /* The umask may have taken bits away; the configured mode is what we
     * promised. */
    if (fchmod(fd, (mode_t)mode) != 0) {
        int e = errno;
        close(fd);
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot set mode %04o: %s", s->name, mode,
                            strerror(e));
    }
    close(fd);
    *created = true;
    return IB_OK;
}

/* Settings that are not part of the file's contract, only of its speed
 * (see the top of this file). page_size only takes on a file nothing was
 * written to yet; SQLite ignores it otherwise. */
static int body_tuning(sq_recorder *s, void *vctx, ib_error *local)
{
    bool fresh = *(const bool *)vctx;
    char sql[96];
    (void)local;
    if (fresh) {
        snprintf(sql, sizeof(sql), "PRAGMA page_size = %d", NEW_FILE_PAGE_SIZE);
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%d", CACHE_KIB);
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

/* After the schema exists, so the page size is the file's real one. The
 * recorder checkpoints by itself (ib__sq_wal_bound), and a WAL file that
 * grew is cut back to WAL_KEEP_BYTES when it starts over. */
static int body_checkpoint_window(sq_recorder *s, void *vctx, ib_error *local)
{
    long long page = 0;
    char sql[64];
    (void)vctx;
    (void)local;
    int rc = ib__sqlite_read_value(s->db, "PRAGMA page_size", &page, NULL, 0);
    if (rc != SQLITE_OK)
        return rc;
    s->page_size = page > 0 ? (int)page : 4096;
    snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %lld", (long long)WAL_KEEP_BYTES);
    rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        sqlite3_wal_hook(s->db, on_wal, s);
    return rc;
}

/* Allocates the recorder and its mutex; nothing is opened yet. */
static ib_status sq_new(sq_recorder **out, const ib__recorder_config *cfg, ib_error *err)
{
    sq_recorder *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder sqlite:%.*s: out of memory",
                            NAME_MAX_SHOWN, cfg->path);
    s->base.ops = &sq_ops;
    s->base.now_ms = cfg->now_ms;
    s->base.lease_now_ms = cfg->lease_now_ms;
    snprintf(s->name, sizeof(s->name), "sqlite:%.*s%s", NAME_MAX_SHOWN, cfg->path,
             strlen(cfg->path) > NAME_MAX_SHOWN ? "..." : "");
    memcpy(s->path, cfg->path, sizeof(s->path));
    s->in_memory = strcmp(cfg->path, ":memory:") == 0;
    s->prune_rows = DEFAULT_PRUNE_ROWS;
    s->merge_keys = IB__SQ_MERGE_KEYS;
    ib__sq_tail_init(&s->tail);
    ib__sq_turn_init(&s->turn);
    s->retry_budget_ms = (int64_t)cfg->busy_timeout_ms * 6;
    if (s->retry_budget_ms < RETRY_FLOOR_MS)
        s->retry_budget_ms = RETRY_FLOOR_MS;
    s->jitter =
        ((uint64_t)getpid() << 32) ^ (uint64_t)ib_clock_monotonic_ms() ^ (uint64_t)(uintptr_t)s;
    s->jitter |= 1;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        ib_status st =
            ib_error_set(err, IB_ERR_NOMEM, "recorder %s: cannot create a mutex", s->name);
        free(s);
        return st;
    }
    *out = s;
    return IB_OK;
}

/* Checks and creates the file, then opens the connection. `*fresh`: the
 * file is new (or in memory), so its page size may still be chosen. On
 * failure `s->db` may be set, and the caller closes it. */
static ib_status open_connection(sq_recorder *s, bool *fresh, const ib__recorder_config *cfg,
                                 ib_error *err)
{
    *fresh = s->in_memory;
    if (!s->in_memory) {
        ib_status st = ib__sqlite_check_file(s->path, s->name, cfg->file_mode, cfg->allow_insecure,
                                             geteuid(), err);
        if (st == IB_OK)
            st = create_file(s, fresh, cfg->file_mode, err);
        if (st == IB_OK)
            st = ib__sq_turn_open(&s->turn, s->path, s->name, cfg->file_mode, err);
        if (st != IB_OK)
            return st;
    }
    /* No SQLITE_OPEN_CREATE for a file: it exists now, and if it vanished
     * in between, SQLite must not recreate it with default permissions.
     * NOFOLLOW: a link put in place since the check is refused, not
     * followed. */
    int flags =
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOFOLLOW;
    if (s->in_memory)
        flags |= SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK)
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name,
                            s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    sqlite3_extended_result_codes(s->db, 1);
    s->busy_timeout_ms = cfg->busy_timeout_ms;
    rc = sqlite3_busy_handler(s->db, ib__sq_busy_wait, s);
    if (rc != SQLITE_OK)
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name,
                            sqlite3_errmsg(s->db));
    return IB_OK;
}

/* Settings, schema and statements, each step needing the ones before. */
static ib_status configure(sq_recorder *s, bool fresh, const ib__recorder_config *cfg,
                           ib_error *err)
{
    int sync = (int)cfg->synchronous;
    int schema_range[2] = {Q_FIRST_SCHEMA, Q_COUNT};
    bool migrated = false;
    ib_status st = prepare_tx(s, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_NONE, body_tuning, &fresh, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_NONE, body_wal, NULL, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_NONE, body_synchronous, &sync, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_WRITE, body_schema, &migrated, err);
    if (st == IB_OK && !s->in_memory)
        st = ib__sq_run(s, TX_NONE, body_checkpoint_window, NULL, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_NONE, body_prepare, schema_range, err);
    s->check_schema = true;
    if (st == IB_OK && !s->in_memory)
        st = ib__sq_reader_init(s, err);
    /* Both writes below may wait: a recorder that cannot write now (a full
     * disk) still opens, like one whose schema was current, and says how
     * far it has read at its next write; until then a merge may pass it
     * over, and it rebuilds its filter. The journal rows an older version
     * wrote carry no counts: merged now, they are counted by what the
     * merge inserts, or by the next merge. */
    ib__sq_merge_ctx mc = {.force = true};
    if (st == IB_OK)
        (void)ib__sq_run(s, TX_WRITE, body_join, NULL, NULL);
    if (st == IB_OK && migrated)
        (void)ib__sq_run(s, TX_WRITE, ib__sq_body_merge, &mc, NULL);
    return st;
}

ib_status ib__sqlite_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err)
{
    sq_recorder *s = NULL;
    bool fresh = false;
    ib_status st = sq_new(&s, cfg, err);
    if (st != IB_OK)
        return st;
    st = open_connection(s, &fresh, cfg, err);
    if (st != IB_OK)
        goto close_db;
    st = configure(s, fresh, cfg, err);
    if (st != IB_OK)
        goto finalize_stmts;
    *out = &s->base;
    return IB_OK;

    /* Each label undoes what its name says, then everything below it. */
finalize_stmts:
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(s->q[i]);
    free(s->scan_consumer);
    free(s->scan_event);
    ib__sq_filter_free(&s->next);
    ib__sq_tail_free(&s->tail);
    ib__sq_pending_free(s);
    ib__sq_filter_free(&s->filter);
close_db:
    sqlite3_close_v2(s->db); /* a no-op while no connection was opened */
    ib__sq_turn_close(&s->turn);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return st;
}

static const ib_recorder_ops sq_ops = {
    .size = sizeof(ib_recorder_ops),
    .kind = "sqlite",
    .is_processed = sq_is_processed,
    .mark_processed = sq_mark,
    .close = sq_close,
    .check_batch = sq_check_batch,
    .mark_batch = sq_mark_batch,
    .claim = sq_claim,
    .claim_batch = sq_claim_batch,
    .release = sq_release,
    .release_batch = sq_release_batch,
    .lookup = sq_lookup,
    .forget = sq_forget,
    .prune = sq_prune,
    .list = sq_list,
    .stats = sq_stats,
    .features = IB_RECORDER_DURABLE_ATTEMPTS | IB_RECORDER_HOST_LOCAL,
    .acquire_batch = sq_acquire_batch,
    .renew_batch = sq_renew_batch,
    .mark_owned_batch = sq_mark_owned_batch,
    .transact = ib__sq_transact,
    .outbox_peek = ib__sq_outbox_peek,
    .outbox_delete = ib__sq_outbox_delete,
    .outbox_count = ib__sq_outbox_count,
    .wal_bytes = sq_wal_bytes,
    .upkeep = sq_upkeep,
    .lock_wait_max_ns = sq_lock_wait_max_ns,
    .end_attempts = sq_end_attempts,
    .inspect = sq_inspect,
    .attempt_stats = sq_attempt_stats,
};

/* --- hooks ------------------------------------------------------------------ */

static uint64_t read_counter(ib_recorder *r, size_t offset);

sqlite3 *ib__sqlite_db(ib_recorder *r)
{
    return r != NULL && r->ops == &sq_ops ? sq(r)->db : NULL;
}

void ib__sqlite_set_prune_batch(ib_recorder *r, unsigned rows)
{
    if (r != NULL && r->ops == &sq_ops && rows > 0) {
        pthread_mutex_lock(&sq(r)->mu);
        sq(r)->prune_rows = rows;
        pthread_mutex_unlock(&sq(r)->mu);
    }
}

uint64_t ib__sqlite_prune_transactions(ib_recorder *r)
{
    return read_counter(r, offsetof(sq_recorder, prune_transactions));
}

void ib__sqlite_set_merge_keys(ib_recorder *r, uint64_t rows)
{
    if (r != NULL && r->ops == &sq_ops && rows > 0) {
        pthread_mutex_lock(&sq(r)->mu);
        sq(r)->merge_keys = rows;
        pthread_mutex_unlock(&sq(r)->mu);
    }
}

void ib__sqlite_set_merge_hook(ib_recorder *r, void (*hook)(void *ctx, size_t keys), void *ctx)
{
    if (r != NULL && r->ops == &sq_ops) {
        pthread_mutex_lock(&sq(r)->mu);
        sq(r)->merge_hook = hook;
        sq(r)->merge_hook_ctx = ctx;
        pthread_mutex_unlock(&sq(r)->mu);
    }
}

ib_status ib__sqlite_merge(ib_recorder *r, size_t *moved, ib_error *err)
{
    if (r == NULL || r->ops != &sq_ops)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: not an sqlite recorder");
    sq_recorder *s = sq(r);
    ib__sq_merge_ctx c = {.force = true};
    pthread_mutex_lock(&s->mu);
    ib_status st = ib__sq_run(s, TX_WRITE, ib__sq_body_merge, &c, err);
    s->merges += st == IB_OK && c.moved > 0;
    pthread_mutex_unlock(&s->mu);
    if (moved != NULL)
        *moved = st == IB_OK ? c.moved : 0;
    return st;
}

static uint64_t read_counter(ib_recorder *r, size_t offset)
{
    uint64_t n = 0;
    if (r != NULL && r->ops == &sq_ops) {
        pthread_mutex_lock(&sq(r)->mu);
        memcpy(&n, (const char *)sq(r) + offset, sizeof(n));
        pthread_mutex_unlock(&sq(r)->mu);
    }
    return n;
}

uint64_t ib__sqlite_merges(ib_recorder *r)
{
    return read_counter(r, offsetof(sq_recorder, merges));
}

uint64_t ib__sqlite_merge_failures(ib_recorder *r)
{
    return read_counter(r, offsetof(sq_recorder, merge_failures));
}
