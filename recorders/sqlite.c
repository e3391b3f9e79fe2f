/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: markers in a SQLite file shared by the processes of one host.
 *
 * This comment is the one description of the marker file: its tables, who
 * writes and deletes what, the invariants, and why it is built this way.
 * The other sqlite_*.c files point here.
 *
 * THE FILE (schema version 7, PRAGMA user_version = 7)
 *
 *   processed_consumers (cid INTEGER PRIMARY KEY AUTOINCREMENT,
 *                        name TEXT NOT NULL UNIQUE,
 *                        markers INTEGER, oldest_ms INTEGER, newest_ms INTEGER)
 *       One row per consumer identity ("<durable>/<plugin>/<handler>") that
 *       was ever claimed or marked. Added by the first claim or mark of a
 *       name (ours, or the seed's through processed_log); never deleted or
 *       renamed by the recorder. markers, oldest_ms and newest_ms count its
 *       markers (invariant 7).
 *
 *   processed_markers (cid, event_id TEXT, ts INTEGER, fp INTEGER,
 *                      PRIMARY KEY (event_id, cid)) WITHOUT ROWID
 *       One row per done (consumer, id): the marker. event_id is the
 *       normalised id (32 lowercase hex), ts unix ms when marked, fp the
 *       top 32 bits of the event's payload fingerprint as a signed number
 *       (NULL = none; ib__sq_fp_stored). The id leads the key: comparisons
 *       are decided by its first bytes, and the handlers of one event mark
 *       the same leaf. Written by a mark, a fenced mark, transactional work
 *       and the seed's INSERT into processed_log; deleted by forget, prune
 *       and a DELETE from processed_log. Another tool may write any value
 *       here; prune's rule covers every row (invariant 9).
 *
 *   processed_claims (cid, event_id TEXT, owner TEXT, expires_ms INTEGER,
 *                     attempts INTEGER, PRIMARY KEY (event_id, cid)) WITHOUT ROWID
 *       A key in progress, or attempted and not done. owner is the holder's
 *       token ('' once released), expires_ms the lease end on the lease
 *       clock (CLOCK_BOOTTIME: shared by the processes of one kernel, never
 *       stepped), attempts the handler attempts since the last dead letter
 *       or forget. Written by claims, renewals, releases; deleted when the
 *       key is marked, when its attempts end without a holder, and by prune
 *       once its lease ended before the retention cutoff.
 *
 *   processed_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, subject,
 *                     msg_id, data BLOB, staged_ms)
 *       Messages staged by transactional work in the transaction of their
 *       marker; deleted once published (sqlite_txn.c).
 *
 *   processed_spellings (spelling TEXT, cid, event_id TEXT,
 *                        PRIMARY KEY (spelling, cid)) WITHOUT ROWID
 *       An id the seed wrote in a spelling other than the normalised one
 *       (upper or mixed case, dashes), with the normalised id it stands
 *       for. Written by the seed's INSERT into processed_log and by the
 *       migration of an older file; deleted by a DELETE from processed_log
 *       by that spelling, and by prune once its marker is gone. A spelling
 *       says only how the seed wrote an id: it never makes a key done.
 *
 *   processed_log (consumer, event_id, ts): a VIEW joining the markers to
 *       their consumer's name, each marker under its id and again under
 *       every spelling of processed_spellings: the spec's table, for other
 *       tools. INSTEAD OF triggers let the seed's own SQL write it: an
 *       INSERT checks the row (text, no NUL byte, a consumer of 1-255
 *       bytes, an id of 32 hex digits once dashes are dropped), normalises
 *       the id, reads a ts below 1e11 as seconds, adds the consumer, marks,
 *       ends the key's claim and keeps a spelling that was not normalised;
 *       a DELETE (by any spelling it shows) deletes the marker of the
 *       normalised id and that spelling. The seed's CREATE TABLE IF NOT
 *       EXISTS is a no-op on the view, and its SELECT 1 ... WHERE consumer
 *       = ? AND event_id = ? finds the id by the spelling its INSERT wrote,
 *       through primary keys in both halves of the view. A marker of ours
 *       shows under its normalised id only.
 *
 * INVARIANTS
 *  1. A key is done exactly when processed_markers has its row. Every
 *     answer (processed, DONE, ACQUIRED, BUSY...) is read from the file in
 *     the transaction that acts on it: nothing in memory can say "never
 *     marked", so a failed, rolled back or concurrent write can never turn
 *     a marked id into a new one.
 *  2. Every decision to write is made under the write lock: write calls
 *     run in BEGIN IMMEDIATE, so what they read cannot change before they
 *     commit, and two processes claiming one key are serialised.
 *  3. A key has at most one claim row. Marking a key deletes its claim in
 *     the same transaction; a marker decides over any claim row left.
 *  4. A claim keeps another owner out while its lease runs (on the lease
 *     clock), with ib__claim_hold_ms's probe rules for a holder proven gone
 *     or alive; a fenced mark never writes over another owner's live claim.
 *  5. Marks are durable when the call returns (synchronous FULL by default;
 *     NORMAL is an opt-in whose window the README states). Claims, renewals
 *     and attempt counts commit without an fsync of their own when marks use
 *     FULL or EXTRA: the next mark's fsync of the WAL makes them durable
 *     with it. A power cut loses at most claims taken since the last mark,
 *     each at worst one more attempt of an event that was not marked.
 *  6. A cid names one consumer for good (AUTOINCREMENT: never reused). A
 *     process could keep name -> cid in memory, but resolves it once per
 *     transaction instead, so a tool that edits processed_consumers can
 *     confuse nobody beyond one transaction.
 *  7. processed_consumers.markers counts the consumer's markers: every
 *     write of ours adds what it inserted or deleted before it commits (a
 *     tally per transaction, sqlite_keys.c), and processed_log's triggers
 *     do the same for other tools. A tool that writes processed_markers
 *     itself is not counted (triggers on the table cost a marker more than
 *     its insert). oldest_ms is a lower bound once markers were deleted (a
 *     prune that ran to its end raises it to its cutoff), newest_ms an upper
 *     bound.
 *  8. Every transaction checks that the file still speaks version 7 (a
 *     newer build may migrate it while this one runs: then nothing is
 *     written and the call fails with IB_ERR_SCHEMA).
 *  9. Prune ends, whatever other tools wrote: it walks each table's
 *     primary key with a cursor that keeps the key's own values, so every
 *     range starts after the last and a pass takes rows / prune_rows
 *     transactions. A marker row goes when its ts is a number before the
 *     cutoff, whatever its id and cid hold (a BLOB, text of any length, a
 *     number); a ts of another type has no age and the row stays. A caller
 *     may stop a prune between two transactions (ib__recorder_prune_until).
 *
 * THE CLAIM PATH, as steps. A key is (event_id, cid). For a batch of keys
 * (acquire_batch), in one transaction:
 *  1. Take the write turn (sqlite_turn.c), then BEGIN IMMEDIATE: SQLite's
 *     write lock before anything is read (invariant 2). Every wait of the
 *     call ends at the busy timeout (sqlite_run.c).
 *  2. Check the file still speaks this schema (invariant 8).
 *  3. For each key: try the one-statement claim of a new key (no marker, no
 *     claim row: insert the claim with the lease end and 0 attempts, or 1
 *     when the caller counts the attempt in the claim). If it inserted,
 *     the key is ACQUIRED; go to the next key.
 *  4. Else read the key's marker and claim row:
 *     a. a marker: DONE, or CONFLICT when both fingerprints are known and
 *        differ (invariant 1);
 *     b. a claim of another owner whose lease runs on the boot clock, or
 *        whose holder is proven alive and ended less than a lease ago
 *        (ib__claim_hold_ms): BUSY, with the time left;
 *     c. attempts at max_attempts: EXHAUSTED (the poison rule), not taken;
 *     d. else ACQUIRED: the claim row takes this owner and a new lease end,
 *        its attempts unchanged (or one more when counted in the claim);
 *        the caller is told whether it took the claim over from another
 *        holder that never released it.
 *  5. COMMIT unsynced when marks use FULL (invariant 5), give the turn
 *     back, and bound the WAL.
 * An attempt is counted when its handler call starts or returns, not by
 * the claim (include/recorder.h, "attempts counted as handlers start"):
 * count_attempts adds one to the keys the owner still holds, renewing or
 * releasing them. A mark (mark_owned_batch) ends the owner's claim, or any
 * claim whose lease ended, and inserts the marker; it skips a key another
 * owner holds live (invariant 4) and commits at the configured level.
 *
 * CONCURRENCY
 *  - Between processes: WAL mode; every write in BEGIN IMMEDIATE, so a
 *    writer takes the lock before it reads and never upgrades a read
 *    transaction (the case where SQLite returns BUSY at once). Before it,
 *    a writer takes the write turn (sqlite_turn.c): a robust, priority-
 *    inheriting mutex shared through "<file>-turn", which the kernel hands
 *    to the longest waiter when it is given back, so writers of this
 *    recorder queue in order (none starves), sleep until their turn, and
 *    leave SQLite's lock no idle gap; a holder killed in its turn is
 *    replaced at once (EOWNERDEAD). The wait ends at the call's deadline.
 *    A writer that still finds SQLite's lock taken (a tool that knows no
 *    turn: the sqlite3 shell, the seed's SQL) polls (the busy handler, 50
 *    us doubling to 2 ms, jittered) until the busy timeout has passed since
 *    its call began; BUSY that comes back another way is retried, the
 *    transaction over, until the same deadline. Write transactions are short (a batch
 *    of keys, no scan), so no writer can hold the others off for long, and
 *    a process that joins a busy file has nothing to catch up on: it reads
 *    the same tables as everyone.
 *  - Between threads: one connection per recorder, opened NOMUTEX, and one
 *    mutex around every call.
 *  - The library installs no signal handler, creates no thread and no file
 *    but the database, SQLite's -wal and -shm, and the -turn file (one
 *    page; the file's mode and trust checks apply to it as to -wal).
 *  - The WAL: SQLite's automatic checkpoint is off. After a write commits,
 *    while its writer still holds the write turn, a WAL past 16 MiB gets a
 *    RESTART checkpoint: it copies the WAL into the file and lets the next
 *    writer start the WAL over. It waits at most 20 ms for readers (and
 *    for a writer that knows no turn); when it could not end (a reader on
 *    an old snapshot: an sqlite3 shell in BEGIN, a paged `ibus markers
 *    list`), the next is tried once the WAL has grown by 16 MiB more. A commit never waits longer
 *    than that for one. Under the turn no writer of this recorder can keep
 *    it from ending; checkpoints taken after the turn was given back never
 *    let the WAL start over while other processes kept writing, so every
 *    commit past the bound paid for one and the file ran at about half
 *    the speed of one process (bench/README.md).
 *    A write that finds the disk full (SQLITE_FULL, or an I/O error with
 *    ENOSPC or EDQUOT) leads to a TRUNCATE checkpoint, which copies the WAL
 *    into the file and cuts the WAL to nothing: tried at once, then before
 *    each later write at most once a second, each waiting 20 ms at most,
 *    until one ends. It needs no space when the WAL's pages are in the
 *    file already, and otherwise only what the file grows by, so the WAL
 *    gives its space back once the disk has room, instead of waiting for a
 *    commit that cannot come. Unless a reader keeps an old snapshot, the
 *    bound above holds the WAL near 16 MiB (plus one commit's pages);
 *    docs/operations.md says how much free space to keep.
 *
 * WHY PLAIN TABLES (measured side by side with the marker journal of
 * version 5 and with time-sliced generations; the figures are in
 * bench/README.md, "Marker file layouts"). Random ids land on a random leaf
 * page of any B-tree whatever its layout, so every layout writes about one
 * page per new marker once the tree has more leaves than a batch has keys;
 * what differs is the machinery around it. Generations were the fastest on
 * a large file, because new markers go into a smaller table, but none of
 * the layouts kept most of its empty-file rate, and emptying a generation
 * held the write lock for a long time in one piece (these tables prune in
 * small steps), besides a ring to rotate and a filter per sealed table that
 * every lookup consults. Plain tables need none of that: no cache to keep
 * honest, no merge, no reader registry, no catch-up, so a joiner's first
 * transaction costs what anyone's does and start-up reads nothing but the
 * schema. The consumer as a small integer and the fingerprint's 32 bits
 * keep a marker small (bench/README.md has the bytes per marker), and the
 * id stays text so an outside tool's lookup through processed_log still
 * uses the key (as a 16-byte blob it would save a little per marker and
 * make that lookup a scan).
 *
 * FAIRNESS. Writers of this recorder queue on the write turn, which the
 * kernel hands to the longest waiter, so no process starves while others
 * keep writing; a writer waits at most its busy timeout, and one that
 * reaches it fails its call (IB_ERR_BUSY) instead of waiting on. A tool
 * that knows no turn (the sqlite3 shell, the seed's SQL) is not queued: it
 * polls through SQLite's busy handler like any SQLite client, and may wait
 * longer than the recorder's writers while they keep the lock busy.
 *
 * A new file is created with open(O_CREAT|O_EXCL) and fchmod to the
 * configured mode (0600 by default, whatever the umask) before SQLite opens
 * it (sqlite_open.c); SQLite gives its -wal and -shm files that mode too. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static inline sq_recorder *sq(ib_recorder *r)
{
    return (sq_recorder *)r;
}

/* --- the calls: each key's state read, then decided on -------------------- */

typedef struct batch_ctx batch_ctx;

/* Decides key i of a batch from its state `st` (its consumer's `cid`, 0 if
 * the file has none): an SQLite code. */
typedef int (*key_fn)(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid);

struct batch_ctx {
    const ib_marker_key *keys;
    size_t n;
    key_fn each;
    bool *flags; /* processed / held / marked, per key */
    ib_claim_state *states;
    ib_claim_info *infos;
    const ib_claim_request *req;  /* acquire */
    const ib__acquire_opts *opts; /* acquire: NULL = the public claim */
    bool release;                 /* count_attempts: free the claims too */
    const bool *count;            /* count_attempts: which keys count; NULL = all */
    const char *owner;
    int64_t lease_ms;
    const uint64_t *fps; /* NULL = none */
    int64_t now;         /* lease clock at the start of the transaction */
};

static int body_each(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    sq_state st;
    int64_t cid;
    (void)local;
    c->now = s->base.lease_now_ms();
    for (size_t i = 0; i < c->n; i++) {
        int rc = ib__sq_state_get(s, &st, &cid, &c->keys[i]);
        if (rc == SQLITE_OK)
            rc = c->each(s, c, i, &st, cid);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

static ib_status run_each(ib_recorder *r, tx_kind kind, key_fn each, batch_ctx *c, ib_error *err)
{
    c->each = each;
    return ib__sq_run_locked((sq_recorder *)r, kind, body_each, c, err);
}

static int check_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    (void)s;
    (void)cid;
    c->flags[i] = st->done;
    return SQLITE_OK;
}

/* Writes `owner`'s claim of key i with the lease end and attempts of `st`
 * (`cid` 0: the consumer is added first). */
static int take_claim(sq_recorder *s, const ib_marker_key *key, int64_t cid, sq_state *st,
                      const char *owner, int64_t lease_ms)
{
    int rc = cid == 0 ? ib__sq_cid(s, &cid, key->consumer, true) : SQLITE_OK;
    size_t len = strnlen(owner, IB_OWNER_MAX);
    memcpy(st->owner, owner, len);
    st->owner[len] = '\0';
    st->expires = ib__lease_end(s->base.lease_now_ms(), lease_ms);
    return rc == SQLITE_OK ? ib__sq_claim_save(s, cid, key->event_id, st) : rc;
}

static int claim_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    c->states[i] = st->done                                     ? IB_CLAIM_DONE
                   : ib__sq_foreign_claim(st, c->owner, c->now) ? IB_CLAIM_BUSY
                                                                : IB_CLAIM_ACQUIRED;
    return c->states[i] == IB_CLAIM_ACQUIRED
               ? take_claim(s, &c->keys[i], cid, st, c->owner, c->lease_ms)
               : SQLITE_OK;
}

/* A released claim keeps its attempts, and its expiry becomes the release
 * time, from which prune reckons its age. */
static int release_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    if (!st->claimed || strcmp(st->owner, c->owner) != 0)
        return SQLITE_OK;
    st->owner[0] = '\0';
    st->expires = c->now;
    return ib__sq_claim_save(s, cid, c->keys[i].event_id, st);
}

static int renew_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    c->flags[i] = st->claimed && strcmp(st->owner, c->owner) == 0;
    st->expires = ib__lease_end(c->now, c->lease_ms);
    return c->flags[i] ? ib__sq_claim_save(s, cid, c->keys[i].event_id, st) : SQLITE_OK;
}

/* A dead letter ends the attempts of a key not marked; a claim's holder and
 * lease stay. */
static int end_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    if (st->done || st->attempts == 0)
        return SQLITE_OK;
    st->attempts = 0;
    return ib__sq_claim_save(s, cid, c->keys[i].event_id, st);
}

/* Counts an attempt of a key `owner` holds, and restarts its lease or
 * frees it (ib__recorder_count_attempts). */
static int count_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    c->flags[i] = !st->done && st->claimed && strcmp(st->owner, c->owner) == 0;
    if (!c->flags[i])
        return SQLITE_OK;
    if ((c->count == NULL || c->count[i]) && st->attempts < UINT32_MAX)
        st->attempts++;
    if (c->release)
        st->owner[0] = '\0';
    st->expires = c->release ? c->now : ib__lease_end(c->now, c->lease_ms);
    return ib__sq_claim_save(s, cid, c->keys[i].event_id, st);
}

/* The claim with attempts (ib_recorder_acquire_batch's rules; with
 * opts->defer_attempts none counted); `*take` when key i is ours to claim. */
static void acquire_decide(ib_claim_info *out, bool *take, const sq_state *st, uint64_t fp,
                           const ib_claim_request *req, const ib__acquire_opts *opts, bool key0,
                           int64_t now)
{
    *out = (ib_claim_info){.state = IB_CLAIM_DONE, .attempts = st->attempts};
    *take = false;
    if (st->done) {
        int64_t want = ib__sq_fp_stored(fp);
        if (want != 0 && st->fp != 0 && want != st->fp)
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
        bool count = opts == NULL || !opts->defer_attempts || (opts->count_key0 && key0);
        out->state = IB_CLAIM_ACQUIRED;
        out->attempts = st->attempts == UINT32_MAX || !count ? st->attempts : st->attempts + 1;
        *take = true;
    }
}

static int acquire_key(sq_recorder *s, batch_ctx *c, size_t i, sq_state *st, int64_t cid)
{
    bool take;
    acquire_decide(&c->infos[i], &take, st, c->fps != NULL ? c->fps[i] : 0, c->req, c->opts, i == 0,
                   c->now);
    if (c->opts != NULL && c->opts->taken_over != NULL && c->infos[i].state != IB_CLAIM_DONE &&
        c->infos[i].state != IB_CLAIM_BUSY && c->infos[i].state != IB_CLAIM_CONFLICT)
        c->opts->taken_over[i] = st->owner[0] != '\0' && strcmp(st->owner, c->req->owner) != 0;
    st->attempts = c->infos[i].attempts;
    return take ? take_claim(s, &c->keys[i], cid, st, c->req->owner, c->req->lease_ms) : SQLITE_OK;
}

/* A key the file holds nothing of is claimed in one statement (the common
 * case of a new event); any other is read and decided on. */
static int body_acquire(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    sq_state st;
    int64_t cid;
    bool taken;
    (void)local;
    bool defer = c->opts != NULL && c->opts->defer_attempts;
    c->now = s->base.lease_now_ms();
    for (size_t i = 0; i < c->n; i++) {
        uint32_t first = !defer || (i == 0 && c->opts->count_key0) ? 1 : 0;
        int rc = ib__sq_claim_new(s, &taken, &c->keys[i], c->req->owner,
                                  ib__lease_end(c->now, c->req->lease_ms), first);
        if (rc == SQLITE_OK && taken)
            c->infos[i] = (ib_claim_info){.state = IB_CLAIM_ACQUIRED, .attempts = first};
        else if (rc == SQLITE_OK && (rc = ib__sq_state_get(s, &st, &cid, &c->keys[i])) == SQLITE_OK)
            rc = acquire_key(s, c, i, &st, cid);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* Marks every key whose claim is not another owner's live one (`owner`
 * NULL: the seed's mark, which ends any claim): no state read first. */
static int body_mark(sq_recorder *s, void *vctx, ib_error *local)
{
    batch_ctx *c = vctx;
    int64_t lease_now = s->base.lease_now_ms(), ts = s->base.now_ms();
    bool marked;
    (void)local;
    for (size_t i = 0; i < c->n; i++) {
        int rc = ib__sq_mark(s, &marked, &c->keys[i], c->owner, lease_now, ts,
                             c->fps != NULL ? c->fps[i] : 0);
        if (rc != SQLITE_OK)
            return rc;
        if (c->flags != NULL)
            c->flags[i] = marked;
    }
    return SQLITE_OK;
}

static ib_status sq_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys,
                                size_t n, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .flags = processed};
    return run_each(r, TX_READ, check_key, &c, err);
}

static ib_status sq_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                 const char *event_id, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return sq_check_batch(r, processed, &key, 1, err);
}

static ib_status sq_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                     const uint64_t *fingerprints, size_t n, const char *owner,
                                     ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .flags = marked, .owner = owner, .fps = fingerprints};
    return ib__sq_run_locked((sq_recorder *)r, TX_MARK, body_mark, &c, err);
}

static ib_status sq_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    return sq_mark_owned_batch(r, NULL, keys, NULL, n, NULL, err);
}

static ib_status sq_mark(ib_recorder *r, const char *consumer, const char *event_id, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return sq_mark_batch(r, &key, 1, err);
}

static ib_status sq_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                                size_t n, const char *owner, int64_t lease_ms, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .states = states, .owner = owner, .lease_ms = lease_ms};
    return run_each(r, TX_CLAIM, claim_key, &c, err);
}

static ib_status sq_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                  const char *owner, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .owner = owner};
    return run_each(r, TX_CLAIM, release_key, &c, err);
}

static ib_status sq_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                                const char *owner, int64_t lease_ms, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n, .flags = held, .owner = owner, .lease_ms = lease_ms};
    return run_each(r, TX_CLAIM, renew_key, &c, err);
}

static ib_status sq_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    batch_ctx c = {.keys = keys, .n = n};
    return run_each(r, TX_CLAIM, end_key, &c, err);
}

static ib_status sq_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                   const bool *count, size_t n, const char *owner, int64_t lease_ms,
                                   bool release, ib_error *err)
{
    batch_ctx c = {.keys = keys,
                   .n = n,
                   .count = count,
                   .flags = held,
                   .owner = owner,
                   .lease_ms = lease_ms,
                   .release = release};
    return run_each(r, TX_CLAIM, count_key, &c, err);
}

static ib_status sq_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                  const uint64_t *fingerprints, size_t n,
                                  const ib_claim_request *req, const ib__acquire_opts *opts,
                                  ib_error *err)
{
    batch_ctx c = {
        .keys = keys, .n = n, .infos = out, .req = req, .opts = opts, .fps = fingerprints};
    return ib__sq_run_locked((sq_recorder *)r, TX_CLAIM, body_acquire, &c, err);
}

/* --- figures for the host ---------------------------------------------------- */

static uint64_t sq_wal_bytes(ib_recorder *r)
{
    sq_recorder *s = sq(r);
    if (s->in_memory)
        return 0;
    char wal[IB__RECORDER_PATH_MAX + 8];
    struct stat sb;
    snprintf(wal, sizeof(wal), "%s-wal", s->path);
    return stat(wal, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int64_t sq_lock_wait_max_ns(ib_recorder *r)
{
    sq_recorder *s = sq(r);
    pthread_mutex_lock(&s->mu);
    int64_t ns = s->lock_wait_max_ns;
    pthread_mutex_unlock(&s->mu);
    return ns;
}

static void sq_close(ib_recorder *r)
{
    ib__sq_free(sq(r));
}

static const ib_recorder_ops sq_ops = {
    .size = sizeof(ib_recorder_ops),
    .kind = "sqlite",
    .is_processed = sq_is_processed,
    .mark_processed = sq_mark,
    .close = sq_close,
    .check_batch = sq_check_batch,
    .mark_batch = sq_mark_batch,
    .claim_batch = sq_claim_batch,
    .release_batch = sq_release_batch,
    .lookup = ib__sq_lookup,
    .forget = ib__sq_forget,
    .prune = ib__sq_prune,
    .list = ib__sq_list,
    .stats = ib__sq_stats,
    .features = IB_RECORDER_DURABLE_ATTEMPTS | IB_RECORDER_HOST_LOCAL,
    .acquire_batch = sq_acquire_batch,
    .renew_batch = sq_renew_batch,
    .mark_owned_batch = sq_mark_owned_batch,
    .transact = ib__sq_transact,
    .outbox_peek = ib__sq_outbox_peek,
    .outbox_delete = ib__sq_outbox_delete,
    .outbox_count = ib__sq_outbox_count,
    .wal_bytes = sq_wal_bytes,
    .lock_wait_max_ns = sq_lock_wait_max_ns,
    .end_attempts = sq_end_attempts,
    .inspect = ib__sq_inspect,
    .attempt_stats = ib__sq_attempt_stats,
    .summarize = ib__sqlite_summarize,
    .count_attempts = sq_count_attempts,
    .prune_until = ib__sq_prune_until,
};

ib_status ib__sqlite_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err)
{
    sq_recorder *s = NULL;
    ib_status st = ib__sq_open(&s, &sq_ops, cfg, err);
    *out = st == IB_OK ? &s->base : NULL;
    return st;
}

/* --- hooks ------------------------------------------------------------------ */

static sq_recorder *as_sqlite(ib_recorder *r)
{
    return r != NULL && r->ops == &sq_ops ? (sq_recorder *)r : NULL;
}

sqlite3 *ib__sqlite_db(ib_recorder *r)
{
    return as_sqlite(r) != NULL ? as_sqlite(r)->db : NULL;
}

void ib__sqlite_set_prune_batch(ib_recorder *r, unsigned rows)
{
    sq_recorder *s = as_sqlite(r);
    if (s != NULL && rows > 0) {
        pthread_mutex_lock(&s->mu);
        s->prune_rows = rows;
        pthread_mutex_unlock(&s->mu);
    }
}

/* Reads one figure under the mutex. */
#define READ_FIGURE(r, field)                                                                      \
    do {                                                                                           \
        sq_recorder *s_ = as_sqlite(r);                                                            \
        if (s_ == NULL)                                                                            \
            return 0;                                                                              \
        pthread_mutex_lock(&s_->mu);                                                               \
        __typeof__(s_->field) v_ = s_->field;                                                      \
        pthread_mutex_unlock(&s_->mu);                                                             \
        return v_;                                                                                 \
    } while (0)

uint64_t ib__sqlite_prune_transactions(ib_recorder *r)
{
    READ_FIGURE(r, prune_transactions);
}

int64_t ib__sqlite_prune_hold_max_ns(ib_recorder *r)
{
    READ_FIGURE(r, prune_hold_max_ns);
}

uint64_t ib__sqlite_restarts_failed(ib_recorder *r)
{
    READ_FIGURE(r, wal.restarts_failed);
}
