/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the sqlite: recorder shared by its files and its tests.
 *
 * The file format, its invariants and why it is built this way are in one
 * place: the comment at the top of sqlite.c. This header only declares what
 * the recorder's files share. */
#ifndef IB_SQLITE_INTERNAL_H
#define IB_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "recorder_internal.h"

/* PRAGMA user_version this build writes and understands (sqlite.c, "The
 * file"). Versions 0 to 5 are migrated in place (sqlite_schema.c). */
#define IB__SQLITE_SCHEMA_VERSION 7

/* Returned by a transaction body, or the schema check, when the file
 * cannot be used and retrying will not help; `local` says why. Not an
 * SQLite code. */
#define IB__SQLITE_REFUSED (-1)

/* Bytes of a path shown in messages. */
#define IB__SQ_NAME_SHOWN 150

/* The savepoint around each work of a transaction (sqlite_txn.c). */
#define IB__SQ_SAVEPOINT "ib_recorder_work"

/* The prepared statements of a recorder, by job (SQL in sqlite_open.c). */
enum ib__sq_query {
    Q_BEGIN_READ,
    Q_BEGIN_WRITE,
    Q_COMMIT,
    Q_ROLLBACK,
    Q_DATA_VERSION,
    Q_USER_VERSION,
    Q_CID_GET, /* statements from here on need the schema */
    Q_CID_PUT,
    Q_STATE_GET,
    Q_MARKER_PUT,
    Q_MARKER_DEL,
    Q_CLAIM_PUT,
    Q_CLAIM_DEL,
    Q_CLAIM_END,
    Q_CLAIM_HELD,
    Q_CLAIM_NEW,
    Q_COUNT_ADD,
    Q_SAVEPOINT,
    Q_SAVEPOINT_RELEASE,
    Q_SAVEPOINT_UNDO,
    Q_OUTBOX_PUT,
    Q_OUTBOX_PEEK,
    Q_OUTBOX_DEL,
    Q_OUTBOX_COUNT,
    Q_COUNT,
    Q_FIRST_SCHEMA = Q_CID_GET,
};

/* Consumers resolved to their cid in the open transaction: a batch names
 * one or a few, so each is looked up once per transaction. Never kept
 * across transactions (sqlite.c, invariant 6 says why it could be, and
 * why it is not). */
#define IB__SQ_CIDS 8
typedef struct sq_cids {
    size_t n;
    const char *name[IB__SQ_CIDS]; /* BORROWED from the call's keys */
    int64_t cid[IB__SQ_CIDS];      /* 0: the file has no such consumer */
} sq_cids;

/* Markers the open transaction added (or deleted) per consumer, written to
 * processed_consumers before it commits (sqlite_keys.c; invariant 7). */
#define IB__SQ_TALLY 16
typedef struct sq_tally {
    size_t n;
    int64_t cid[IB__SQ_TALLY];
    int64_t delta[IB__SQ_TALLY];
    int64_t oldest[IB__SQ_TALLY], newest[IB__SQ_TALLY]; /* ts of those added; 0 = none */
} sq_tally;

/* The WAL's checkpoints (sqlite_run.c). */
typedef struct sq_wal {
    int frames;                /* WAL frames after the last commit (the WAL hook) */
    int page_size;             /* the file's */
    int failed_at_frames;      /* the WAL's frames when a RESTART last failed; 0 = none */
    uint64_t restarts_failed;  /* RESTART checkpoints a reader or writer kept from ending */
    bool full;                 /* a write found the disk full; no TRUNCATE checkpoint ended since */
    int64_t truncate_after_ms; /* monotonic: no TRUNCATE attempt before this */
} sq_wal;

typedef struct sq_recorder {
    ib_recorder base;
    pthread_mutex_t mu; /* one call at a time; guards everything below */
    sqlite3 *db;
    sqlite3_stmt *q[Q_COUNT];
    char name[IB__SQ_NAME_SHOWN + 16]; /* "sqlite:PATH" for messages */
    char path[IB__RECORDER_PATH_MAX];
    bool in_memory;
    bool claims_unsynced; /* claims commit at NORMAL, marks at the configured level */
    int sync_configured;  /* PRAGMA synchronous as configured */
    int sync_now;         /* the level the connection runs at now; -1 unknown */
    int64_t busy_timeout_ms;
    int64_t deadline_ns;      /* monotonic: the current call's waits end here */
    int64_t lock_wait_max_ns; /* the longest BEGIN IMMEDIATE took */
    uint64_t jitter;
    bool check_schema; /* set once the open brought the schema up to date */
    long long data_version;
    bool version_known;
    sq_cids cids;
    sq_tally tally;
    sq_wal wal;
    unsigned prune_rows;
    uint64_t prune_transactions;
    int64_t prune_hold_max_ns; /* the longest prune transaction of the last prune */
    void *turn;                /* the mapped write turn (sqlite_turn.c); NULL = none */
    bool turn_held;            /* this connection holds the turn now */
} sq_recorder;

/* Opens the marker file of `cfg` as a recorder whose ops are `ops`
 * (sqlite.c's); frees one (sqlite_open.c). */
ib_status ib__sq_open(sq_recorder **out, const ib_recorder_ops *ops, const ib__recorder_config *cfg,
                      ib_error *err);
void ib__sq_free(sq_recorder *s);

/* ---- the write turn (sqlite_turn.c) --------------------------------------- */

/* Maps "<path>-turn" (created with `mode`, 0 = 0600) and sets s->turn; on
 * any failure s->turn stays NULL and writers poll as without a turn. */
void ib__sq_turn_open(sq_recorder *s, unsigned mode);
void ib__sq_turn_close(sq_recorder *s);
/* Waits for the turn until s->deadline_ns: SQLITE_OK (held, or no turn),
 * SQLITE_BUSY at the deadline. Before BEGIN IMMEDIATE. */
int ib__sq_turn_take(sq_recorder *s);
/* Gives the turn back if held; after COMMIT or ROLLBACK. */
void ib__sq_turn_end(sq_recorder *s);

/* ---- running transactions (sqlite_run.c) -------------------------------- */

typedef enum tx_kind {
    TX_NONE,  /* one statement in autocommit */
    TX_READ,  /* BEGIN: one snapshot */
    TX_CLAIM, /* BEGIN IMMEDIATE; commits without an fsync of its own when the
                 configured level is FULL or EXTRA (claims_unsynced) */
    TX_MARK,  /* BEGIN IMMEDIATE; commits at the configured level */
} tx_kind;

/* A transaction body: returns SQLITE_OK, an SQLite error code, or
 * IB__SQLITE_REFUSED after filling `local` (not retried). It may run more
 * than once, so it must only write to its context what it recomputes. */
typedef int (*tx_body)(sq_recorder *s, void *ctx, ib_error *local);

/* Runs `body` in a transaction of `kind`. BUSY and the like (the file is
 * locked, SQLite's recovery) are retried, the whole transaction over, until
 * the busy timeout has passed since the call began: every wait of a call
 * ends then. IB_ERR_RECORDER with SQLite's message ("recorder sqlite:PATH:
 * <reason>"), or the body's own error after IB__SQLITE_REFUSED. A write that
 * found the disk full leads to a TRUNCATE checkpoint, tried again before
 * later writes until one ends (sqlite.c, "The WAL"). The caller
 * holds the mutex and has started the call's clock (ib__sq_call_begin);
 * ib__sq_run_locked does both. */
ib_status ib__sq_run(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err);
ib_status ib__sq_run_locked(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err);

/* Resets the cids and the tally and BEGINs a transaction of `kind` (nothing for
 * TX_NONE) at its synchronous level, noting how long a write waited for the
 * lock. An SQLite code. */
int ib__sq_begin(sq_recorder *s, tx_kind kind);

/* In a transaction: the file must still speak the schema this recorder was
 * opened with (invariant 8). user_version is read again only when
 * data_version says another connection committed. SQLITE_OK, an SQLite
 * code, or IB__SQLITE_REFUSED with `local` set (IB_ERR_SCHEMA). */
int ib__sq_check_schema(sq_recorder *s, ib_error *local);

/* After a write committed, with the write turn still held: once the WAL is
 * past its bound, a RESTART checkpoint that waits 20 ms at most for
 * readers, so the next writer starts the WAL over; after one that readers
 * on old snapshots kept from ending, the next once the WAL has grown by
 * the bound again. */
void ib__sq_wal_bound(sq_recorder *s);

/* Starts the clock of a call: its waits end busy_timeout_ms from now. */
void ib__sq_call_begin(sq_recorder *s);

/* The connection's busy handler (sqlite3_busy_handler; `ctx` is the
 * recorder): sleeps 50 us, doubling up to 2 ms, with jitter, until the
 * call's deadline. Returns 1 to try again, 0 to give up (SQLITE_BUSY). */
int ib__sq_busy_wait(void *ctx, int count);

/* The WAL hook (sqlite3_wal_hook): counts the WAL's frames. */
int ib__sq_on_wal(void *ctx, sqlite3 *db, const char *schema, int frames);

/* Whether an SQLite code is worth a retry of the whole transaction. */
bool ib__sq_retryable(int rc);

/* Sleeps a jittered `*delay_us` (no later than the call's deadline), then
 * doubles it (capped). */
void ib__sq_backoff(sq_recorder *s, unsigned *delay_us);

/* Runs `fmt` (a statement with one %lld, `value`) through sqlite3_exec,
 * which prepares it anew: a PRAGMA takes effect when it is prepared. An
 * SQLite code. */
int ib__sqlite_exec_fmt(sqlite3 *db, const char *fmt, long long value);

/* Runs the read-only `sql` and reads column 0 of its first row as an
 * integer into `*num` and as text into `text` (`text_size` bytes, cut and
 * NUL-terminated); either may be NULL. SQLITE_OK or the SQLite error; no
 * row gives SQLITE_DONE and leaves both untouched. */
int ib__sqlite_read_value(sqlite3 *db, const char *sql, long long *num, char *text,
                          size_t text_size);

/* ---- statements and keys (sqlite_keys.c) ---------------------------------- */

/* Steps a statement that returns no rows wanted, then resets it; the
 * SQLite code of the step or the reset. */
int ib__sq_step_done(sqlite3_stmt *st);

/* Steps a statement whose one row is one number into `*out` (left alone
 * when no row comes back), and resets it. An SQLite code. */
int ib__sq_read_count(uint64_t *out, sqlite3_stmt *st);

/* Counts `delta` markers added (ts > 0: marked at ts) or deleted of `cid`
 * in the open transaction; written by ib__sq_tally_flush, or at once when
 * the transaction names more consumers than the tally holds. */
int ib__sq_tally(sq_recorder *s, int64_t cid, int64_t delta, int64_t ts);

/* Writes the tally to processed_consumers; before every COMMIT of a write. */
int ib__sq_tally_flush(sq_recorder *s);

/* A key's whole state as the file holds it. */
typedef struct sq_state {
    bool done;                    /* a marker row exists */
    int64_t ts;                   /* done: unix ms when marked */
    int64_t fp;                   /* done: stored fingerprint (top 32 bits); 0 = none */
    bool claimed;                 /* a claim row exists */
    char owner[IB_OWNER_MAX + 1]; /* its holder; "" = none or released */
    int64_t expires;              /* its lease end on the lease clock */
    uint32_t attempts;            /* handler attempts it counts */
} sq_state;

/* The cid of `consumer` in the open transaction (0: the file has none; with
 * `create`, a write transaction adds it). An SQLite code. */
int ib__sq_cid(sq_recorder *s, int64_t *cid, const char *consumer, bool create);

/* Reads the state of `key` (all false / zero when the file has nothing of
 * it); `*cid` is its consumer's (0: none). An SQLite code. */
int ib__sq_state_get(sq_recorder *s, sq_state *out, int64_t *cid, const ib_marker_key *key);

/* Writes the claim row of a key (`cid` non-zero) from `st`: its owner,
 * lease end and attempts; a claim with neither a holder nor attempts is
 * deleted, since it holds nothing. An SQLite code. */
int ib__sq_claim_save(sq_recorder *s, int64_t cid, const char *event_id, const sq_state *st);

/* The claim of a key the file holds nothing of (no marker, no claim row):
 * taken for `owner` until `expires` with `attempts` counted (1, or 0 when
 * the caller counts them as its handlers start), in one statement, the
 * common case of a new event. `*taken` false: the key has a marker or a
 * claim row, and the caller decides from its state. An SQLite code. */
int ib__sq_claim_new(sq_recorder *s, bool *taken, const ib_marker_key *key, const char *owner,
                     int64_t expires, uint32_t attempts);

/* Whether `st` holds a live claim of another owner than `owner`. */
bool ib__sq_foreign_claim(const sq_state *st, const char *owner, int64_t lease_now);

/* Marks `key` at `ts` with fingerprint `fp` (0 = none; a marker that
 * exists stays as it is) and ends its claim, unless another owner than
 * `owner` holds a lease on it that runs past `lease_now` (`owner` NULL:
 * the seed's mark, which ends any claim). `*marked`: the key is marked now
 * (false: the other owner's run decides). Needs no state read first: one
 * conditional DELETE of the claim is the fence. An SQLite code. */
int ib__sq_mark(sq_recorder *s, bool *marked, const ib_marker_key *key, const char *owner,
                int64_t lease_now, int64_t ts, uint64_t fp);

/* The stored form of a fingerprint: its top 32 bits as a signed number
 * (four bytes in the record; ib_fingerprint's finaliser mixes every input
 * bit into them), 0 = none, so a top half of 0 is stored as 1. A
 * conflict may pass as done once in 2^32, never the other way round. */
int64_t ib__sq_fp_stored(uint64_t fp);

/* ---- admin calls (sqlite_admin.c) ---------------------------------------- */

ib_status ib__sq_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                        const char *event_id, ib_error *err);
ib_status ib__sq_forget(ib_recorder *r, bool *existed, const char *consumer, const char *event_id,
                        ib_error *err);
ib_status ib__sq_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                         const char *event_id, ib_error *err);
ib_status ib__sq_list(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err);
ib_status ib__sq_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err);
ib_status ib__sq_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                               ib_error *err);

/* Per-consumer summaries for ibus status. */
ib_status ib__sqlite_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                               uint32_t max_attempts, ib_error *err);

/* Prune (sqlite_prune.c). */
ib_status ib__sq_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err);
ib_status ib__sq_prune_until(ib_recorder *r, uint64_t *removed, int64_t older_than_ms,
                             ib__stop_fn stop, void *ctx, ib_error *err);

/* ---- the schema (sqlite_schema.c) ---------------------------------------- */

/* Brings the schema of `db` to IB__SQLITE_SCHEMA_VERSION, creating it or
 * migrating an older one in place. Runs inside the write transaction the
 * caller holds and commits. `name` ("sqlite:PATH") is for messages;
 * `now_ms` stands in for marker times an old layout lacks. Returns
 * SQLITE_OK, an SQLite error code (the caller rolls back; BUSY may be
 * retried) or IB__SQLITE_REFUSED with `err` set (IB_ERR_SCHEMA). */
int ib__sqlite_schema_ensure(sqlite3 *db, const char *name, int64_t now_ms, ib_error *err);

/* Whether `table` names a table, view or trigger the schema owns (the one
 * list sqlite_schema.c creates from): transactional work may not write or
 * change them. Case does not matter. */
bool ib__sqlite_schema_owns(const char *table);

/* Checks the marker file at `path` (not ":memory:") before SQLite opens it
 * (sqlite_file.c). Always refused: a symbolic link as the file, as its -wal
 * or -shm file or as a directory of `path`, and a file that is not a
 * regular one. Unless `allow_insecure`: an existing file, -wal or -shm file
 * owned by anyone but `self_uid` (root included, unless that is us) or
 * writable by group or others; a directory of the resolved path, from the
 * file's own up to "/", owned by anyone but root or `self_uid`, or writable
 * by group or others without the sticky bit (the plugin loader's rule);
 * and, when there is no file yet, a `new_mode` that would make it writable
 * by group or others. `self_uid` is the running user
 * (geteuid()); tests pass another. `name` ("sqlite:PATH") is for messages:
 * "recorder <name>: <reason>; fix with chown/chmod or allow an insecure
 * marker file". Returns IB_OK, IB_ERR_CONFIG for a refusal, IB_ERR_IO
 * when a file or directory cannot be inspected, or IB_ERR_NOMEM. */
ib_status ib__sqlite_check_file(const char *path, const char *name, unsigned new_mode,
                                bool allow_insecure, uid_t self_uid, ib_error *err);

/* ---- transactional work and the outbox (sqlite_txn.c) -------------------- */

ib_status ib__sq_transact(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                          const ib_marker_key *keys, size_t n, const ib__txn_request *req,
                          ib__txn_work_fn work, void *ctx, ib_error *err);
ib_status ib__sq_outbox_peek(ib_recorder *r, ib__outbox_entry **out, size_t *n, size_t limit,
                             ib_error *err);
ib_status ib__sq_outbox_delete(ib_recorder *r, const int64_t *seqs, size_t n, ib_error *err);
ib_status ib__sq_outbox_count(ib_recorder *r, uint64_t *count, ib_error *err);

/* ---- test and diagnostics hooks; NULL / no-op for other kinds ------------- */

/* The recorder's connection (BORROWED; do not close, do not use while
 * another thread calls the recorder). */
sqlite3 *ib__sqlite_db(ib_recorder *r);

/* Rows examined per prune transaction (default 2000). */
void ib__sqlite_set_prune_batch(ib_recorder *r, unsigned rows);

/* Transactions the last prune committed, and the longest it held the
 * write lock, in ns. */
uint64_t ib__sqlite_prune_transactions(ib_recorder *r);
int64_t ib__sqlite_prune_hold_max_ns(ib_recorder *r);

/* RESTART checkpoints that could not end (a reader on an old snapshot). */
uint64_t ib__sqlite_restarts_failed(ib_recorder *r);

#endif
