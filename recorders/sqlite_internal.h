/* Internals of the sqlite: recorder shared by its files and its tests. */
#ifndef IB_SQLITE_INTERNAL_H
#define IB_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "recorder_internal.h"
#include "sqlite_filter.h"
#include "sqlite_tail.h"
#include "sqlite_turn.h"

/* PRAGMA user_version this build writes and understands.
 *   0: no schema yet, or the seed's layout: a rowid processed_log table,
 *      ts in seconds (possibly REAL); migrated in place.
 *   1: processed_log WITHOUT ROWID, ts INTEGER unix ms; processed_claims.
 *   2: processed_claims counts attempts, lease ends on the boot clock.
 *   3: processed_log.fp (payload fingerprints, NULL = none) and the
 *      processed_outbox table.
 *   4: the marker journal: processed_log becomes processed_markers plus
 *      processed_journal and processed_merge, and processed_log a view
 *      over them (sqlite_journal.c).
 *   5: processed_counts and the journal's marked/ts columns (marker counts
 *      without scans), processed_readers (journal rows are kept until every
 *      live reader has read them), and an INSTEAD OF INSERT trigger on
 *      processed_log, so the seed's own SQL marks through the journal. */
#define IB__SQLITE_SCHEMA_VERSION 5

/* Returned by ib__sqlite_schema_ensure when the file cannot be used and
 * retrying will not help; `err` says why (IB_ERR_SCHEMA). Not an SQLite
 * code. */
#define IB__SQLITE_REFUSED (-1)

/* Brings the schema of `db` to IB__SQLITE_SCHEMA_VERSION, creating or
 * migrating in place. Must run inside a write transaction (BEGIN IMMEDIATE)
 * the caller holds and commits. `name` ("sqlite:PATH") is for messages;
 * `now_ms` stands in for marker times the old layout lacks. `*migrated`:
 * an older file was migrated (its journal should be merged once). Returns
 * SQLITE_OK, an SQLite error code (the caller rolls back; BUSY may be
 * retried) or IB__SQLITE_REFUSED. */
int ib__sqlite_schema_ensure(sqlite3 *db, const char *name, int64_t now_ms, bool *migrated,
                             ib_error *err);

/* Runs `sql` (a PRAGMA or a SELECT) and reads column 0 of its first row:
 * as an integer into `*num` and as text into `text` (`text_size` bytes,
 * cut and NUL-terminated); either may be NULL. Returns SQLITE_OK, or the
 * SQLite error code; a statement that returns no row gives SQLITE_DONE and
 * leaves both untouched. */
int ib__sqlite_read_value(sqlite3 *db, const char *sql, long long *num, char *text,
                          size_t text_size);

/* Checks the marker file at `path` (not ":memory:") before SQLite opens it
 * (sqlite_file.c). Always refused: a symbolic link as the file, as its -wal
 * or -shm file or as a directory of `path`, and a file that is not a
 * regular one. Unless `allow_insecure`: an existing file, -wal or -shm file
 * owned by anyone but `self_uid` (root included, unless that is us) or
 * writable by group or others, and, when there is no file yet, a
 * `new_mode` that would make it so. `self_uid` is the running user
 * (geteuid()); tests pass another. `name` ("sqlite:PATH") is for messages:
 * "recorder <name>: <reason>; fix with chown/chmod or allow an insecure
 * marker file". Returns IB_OK, IB_ERR_CONFIG for a refusal or
 * IB_ERR_IO when a file cannot be inspected. */
ib_status ib__sqlite_check_file(const char *path, const char *name, unsigned new_mode,
                                bool allow_insecure, uid_t self_uid, ib_error *err);

/* ---- shared by sqlite.c, sqlite_exec.c and sqlite_txn.c ------------------ */

/* The prepared statements of a recorder, by job (SQL in sqlite.c). */
enum ib__sq_query {
    Q_BEGIN_READ,
    Q_BEGIN_WRITE,
    Q_COMMIT,
    Q_ROLLBACK,
    Q_DATA_VERSION,
    Q_USER_VERSION,
    Q_STATE_GET,
    Q_MARKER_GET,
    Q_MARKER_COUNT,
    Q_MARKER_KEYS,
    Q_CLAIMS_ANY,
    Q_JOURNAL_PUT,
    Q_JOURNAL_READ,
    Q_JOURNAL_TRIM,
    Q_MERGE_STATE,
    Q_MERGE_SET,
    Q_MARKER_PUT,
    Q_MARKER_FIX,
    Q_MARKER_DEL,
    Q_COUNTS_ADD,
    Q_READER_BEAT,
    Q_READER_LIST,
    Q_READER_DROP,
    Q_FILTER_SCAN,
    Q_CLAIM_SET,
    Q_CLAIM_DEL,
    Q_PRUNE_END,
    Q_PRUNE_RANGE,
    Q_PRUNE_REST,
    Q_PRUNE_CLAIMS,
    Q_LIST_ALL,
    Q_LIST_ONE,
    Q_STATS,
    Q_STATS_CLAIMS,
    Q_STATS_PAGES,
    Q_SAVEPOINT,
    Q_SAVEPOINT_RELEASE,
    Q_SAVEPOINT_UNDO,
    Q_OUTBOX_PUT,
    Q_OUTBOX_PEEK,
    Q_OUTBOX_DEL,
    Q_OUTBOX_COUNT,
    Q_COUNT,
    Q_FIRST_SCHEMA = Q_STATE_GET, /* statements before this need no tables */
};

/* Keys in the tail that start a merge, by default: enough that a merge
 * writes many keys per B-tree page, few enough that the tail stays small. */
#define IB__SQ_MERGE_KEYS 8192

/* Characters of a reader token (processed_readers.reader). */
#define IB__SQ_READER_LEN 32

/* Bytes of a path shown in messages. */
#define IB__SQ_NAME_SHOWN 150

/* The savepoint around each work of a transaction; work may not end it. */
#define IB__SQ_SAVEPOINT "ib_recorder_work"

/* A state's place in the journal: its row's seq shifted left by this many
 * bits, plus its index in the row. Rows hold at most IB__SQ_ROW_STATES. */
#define IB__SQ_SEQ_SHIFT 16
#define IB__SQ_ROW_STATES 4096

/* The journal row the open transaction is building (sqlite_batch.c). */
typedef struct sq_pending {
    char *buf; /* JSON text so far, not NUL-terminated */
    size_t len, cap;
    uint32_t count; /* states in it; 0 = no row being built */
    int64_t marked; /* markers it adds (a forget subtracts one) */
    int64_t ts;     /* the newest time it marks, unix ms; 0 = none */
    uint64_t row;   /* its seq */
    char consumer[IB_CONSUMER_MAX + 1];
} sq_pending;

typedef struct sq_recorder {
    ib_recorder base;
    pthread_mutex_t mu; /* guards everything below */
    sqlite3 *db;
    sqlite3_stmt *q[Q_COUNT];
    char name[IB__SQ_NAME_SHOWN + 16]; /* "sqlite:PATH" for messages */
    char path[IB__RECORDER_PATH_MAX];
    bool in_memory;
    int64_t retry_budget_ms;
    int64_t busy_timeout_ms; /* how long ib__sq_busy_wait waits */
    int64_t busy_since_ns;   /* when the current wait began */
    uint64_t jitter;
    unsigned prune_rows;
    uint64_t prune_transactions;
    sq_tail tail;         /* the journal's unmerged states (sqlite_journal.c) */
    sq_pending pending;   /* the journal row of the open transaction */
    sq_filter filter;     /* keys that may be in processed_markers */
    uint64_t filter_row;  /* journal rows up to this one are in the filter */
    uint64_t written_row; /* the last row the open transaction inserted */
    bool tail_dirty;      /* the tail holds rows of the open transaction */
    /* processed_claims had no row when this process last saw merged_seq
     * move (only merges write it); unknown after a rollback */
    bool claims_known, claims_empty;
    uint64_t merge_keys; /* keys in the tail that start a merge */
    uint64_t merges, merge_failures;
    sq_turn turn; /* the fair turn at the write lock (sqlite_turn.h) */
    /* processed_readers (sqlite_readers.c) */
    char reader[IB__SQ_READER_LEN + 1]; /* this recorder's token */
    int64_t slot;                       /* its byte of the lock file */
    int64_t beat_at;                    /* lease clock of its last committed beat */
    int64_t beat_pending;               /* a beat in the open transaction */
    uint64_t trimmed_seen;              /* trimmed_seq at the last catch-up */
    bool counts_stale; /* an older version merged since processed_counts was kept */
    /* the filter's build (sqlite_readers.c) */
    bool filter_complete;             /* it knows every key processed_markers may hold */
    bool filter_building;             /* a scan of the B-tree is under way */
    bool filter_stale;                /* the build follows a fall behind the journal */
    bool filter_grow;                 /* the filter holds more keys than it was sized for */
    sq_filter next;                   /* the filter being built; replaces `filter` when done */
    char *scan_consumer, *scan_event; /* the scan's cursor (exclusive) */
    int64_t filter_started_ms;
    uint64_t stale_rebuilds;
    uint64_t catchup_rows;      /* journal rows the catch-ups read */
    uint64_t filter_chunks;     /* read transactions of filter builds */
    int64_t upkeep_hold_max_ns; /* the longest one upkeep transaction took */
    int64_t upkeep_at;          /* monotonic ms of the last upkeep; 0 = never */
    /* the schema check (sqlite_exec.c) and the WAL (sqlite.c) */
    long long data_version;
    bool version_known;
    bool check_schema; /* set once the open brought the schema up to date */
    int wal_frames;    /* WAL frames after the last commit (the WAL hook) */
    int page_size;
    void (*merge_hook)(void *ctx, size_t keys); /* tests: runs inside a merge */
    void *merge_hook_ctx;
} sq_recorder;

typedef enum tx_kind {
    TX_NONE,  /* one statement in autocommit */
    TX_READ,  /* BEGIN: one snapshot */
    TX_WRITE, /* BEGIN IMMEDIATE: the write lock up front */
} tx_kind;

/* A transaction body: returns SQLITE_OK, an SQLite error code, or
 * IB__SQLITE_REFUSED after filling `local` (not retried). It may run more
 * than once, so it must only write to its context what it recomputes. */
typedef int (*tx_body)(sq_recorder *s, void *ctx, ib_error *local);

/* Runs `body` in a transaction of `kind`, retrying the whole transaction
 * with back-off on BUSY and the like until the retry budget is spent (the
 * top of sqlite.c says why). IB_ERR_RECORDER with SQLite's message, or
 * the body's own error after IB__SQLITE_REFUSED. The caller holds the
 * mutex; ib__sq_run_locked takes it around the call. */
ib_status ib__sq_run(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err);
ib_status ib__sq_run_locked(sq_recorder *s, tx_kind kind, tx_body body, void *ctx, ib_error *err);

/* ---- the row being written (sqlite_batch.c) ---------------------------- */

/* Adds `st` (the new state of `key`) to the open transaction's journal
 * row, first inserting the row so far if it is full or for another
 * consumer. `*seq`: the state's place (IB__SQ_SEQ_SHIFT). An SQLite code. */
int ib__sq_pending_add(sq_recorder *s, uint64_t *seq, const ib_marker_key *key, const sq_state *st);

/* Inserts the row being built, if any; before every COMMIT. An SQLite
 * code. */
int ib__sq_pending_flush(sq_recorder *s);

/* Forgets the row being built (after a rollback), and frees it (close). */
void ib__sq_pending_drop(sq_recorder *s);
void ib__sq_pending_free(sq_recorder *s);

/* After a COMMIT: the transaction's rows are in the tail and the filter
 * for good. */
void ib__sq_committed(sq_recorder *s);

/* After a rollback: clears the tail if it held rows of the transaction
 * (the next catch-up reads the journal again). */
void ib__sq_tail_rollback(sq_recorder *s);

/* The connection's busy handler (sqlite3_busy_handler; `ctx` is the
 * recorder): sleeps 50 us, doubling up to 2 ms, with jitter, until
 * busy_timeout_ms have passed since the first call of this wait
 * (`count` 0). Returns 1 to try again, 0 to give up (SQLITE_BUSY). */
int ib__sq_busy_wait(void *ctx, int count);

/* After a write commits, with the turn still held: checkpoints the WAL
 * when the WAL hook says it grew past its window (sqlite.c). */
void ib__sq_wal_bound(sq_recorder *s);

/* Whether an SQLite code is worth a retry of the whole transaction. */
bool ib__sq_retryable(int rc);

/* Sleeps a jittered `*delay_us`, then doubles it (capped). */
void ib__sq_backoff(sq_recorder *s, unsigned *delay_us);

/* Steps a statement that returns no rows wanted, then resets it; the
 * SQLite code of the step or the reset. */
int ib__sq_step_done(sqlite3_stmt *st);

/* Binds a key as ?1 (consumer) and ?2 (id) of `st`. */
int ib__sq_bind_key(sqlite3_stmt *st, const char *consumer, const char *event_id);

/* Binds a key, steps the write statement `st` to completion and resets it. */
int ib__sq_exec_key(sqlite3_stmt *st, const char *consumer, const char *event_id);

/* Steps a statement whose one row is one number into `*out` (left alone
 * when no row comes back), and resets it. An SQLite code. */
int ib__sq_read_count(uint64_t *out, sqlite3_stmt *st);

/* ---- the journal (sqlite_journal.c) -------------------------------------- */

/* Reads the journal rows this process has not seen into its tail, and
 * drops the entries a merge has moved to the B-trees. Every transaction
 * body that reads or writes a key's state calls it first: inside a write
 * transaction, the tail and the B-trees are then the whole truth. */
int ib__sq_catch_up(sq_recorder *s);

/* The state of `key`: the tail's, else the B-trees'. After ib__sq_catch_up
 * in the same transaction. An SQLite code. */
int ib__sq_state_get(sq_recorder *s, sq_state *out, const ib_marker_key *key);

/* Appends `st` as the newest state of `key` and puts it in the tail. In a
 * write transaction, after ib__sq_catch_up; `st` was read for `key` by
 * ib__sq_state_get (its packed id is used), and `was_done` is whether that
 * state was marked (the journal row counts the markers it adds). An
 * SQLite code. */
int ib__sq_state_put(sq_recorder *s, const ib_marker_key *key, const sq_state *st, bool was_done);

/* Whether `st` holds a live claim of another owner than `owner`. */
bool ib__sq_foreign_claim(const sq_state *st, const char *owner, int64_t lease_now);

/* Ends the claim a marker may end (the owner's own, released, or lapsed
 * at `lease_now`), then marks `key` at `ts` with `fp` (0 = none); a marker
 * that exists stays as it is. An SQLite code. */
int ib__sq_write_marker(sq_recorder *s, const ib_marker_key *key, const char *owner,
                        int64_t lease_now, int64_t ts, uint64_t fp);

typedef struct ib__sq_merge_ctx {
    bool force;   /* merge whatever the journal holds */
    size_t moved; /* out: keys written to the B-trees */
} ib__sq_merge_ctx;

/* A transaction body (TX_WRITE): moves the journal into the B-trees when
 * the tail holds merge_keys keys, or anything with `force`. */
int ib__sq_body_merge(sq_recorder *s, void *ctx, ib_error *local);

/* Merges after a committed write when the journal is due; a failure is
 * counted and left for the next write. Caller holds the mutex
 * (sqlite_exec.c). */
void ib__sq_maybe_merge(sq_recorder *s);

/* ---- readers and the filter's build (sqlite_readers.c) ------------------ */

/* Picks this recorder's reader token and slot, and locks the slot (after
 * the lock file is open). IB_ERR_IO when it cannot. */
ib_status ib__sq_reader_init(sq_recorder *s, ib_error *err);

/* The lowest journal row this recorder still needs (its tail's and its
 * filter's). */
uint64_t ib__sq_needed_row(const sq_recorder *s);

/* In a write transaction: records how far this recorder has read, unless
 * it did less than a second ago (`force`: now). An SQLite code. */
int ib__sq_reader_beat(sq_recorder *s, bool force);

/* In a write transaction: the lowest row a live reader other than this one
 * still needs (UINT64_MAX: none), dropping the rows of dead readers. */
int ib__sq_readers_need(sq_recorder *s, uint64_t *need);

/* A transaction body (TX_WRITE): removes this recorder's row (at close). */
int ib__sq_reader_leave(sq_recorder *s, void *vctx, ib_error *local);

/* Builds the filter further by up to `chunk` B-tree keys, starting a build
 * when there is none; after a catch-up, in a read or write transaction. */
int ib__sq_filter_advance(sq_recorder *s, unsigned chunk);

/* Adds a mark to the filter in use, and to the one being built. */
void ib__sq_filter_note(sq_recorder *s, const char *consumer, const uint8_t id[16]);

/* The catch-up found rows this recorder needed deleted: the filter is
 * built again (logged). */
void ib__sq_filter_stale(sq_recorder *s, uint64_t trimmed);

/* Whether write transactions should build the filter themselves (nobody
 * runs the upkeep), and by how many keys each. */
bool ib__sq_filter_inline_due(const sq_recorder *s);
unsigned ib__sq_inline_chunk(void);

/* Whether the filter needs building: none, none complete, or full. */
bool ib__sq_filter_build_due(const sq_recorder *s);

/* A reader says how far it has read at most this often; the upkeep (the
 * host's keeper, a few times a second) builds the filter IB__SQ_FILTER_CHUNK
 * keys per read transaction, for at most IB__SQ_UPKEEP_BUILD_MS per call. */
#define IB__SQ_BEAT_MS 1000
#define IB__SQ_FILTER_CHUNK 2048
#define IB__SQ_UPKEEP_BUILD_MS 40

/* ---- marker counts (sqlite_counts.c) -------------------------------------- */

/* Markers a merge or a prune added (or deleted) per consumer, and the times
 * of those it added, for processed_counts. */
typedef struct sq_tally_entry {
    char *consumer; /* owned */
    int64_t delta;
    int64_t oldest, newest; /* of the markers added; INT64_MAX / INT64_MIN = none */
} sq_tally_entry;

typedef struct sq_tally {
    sq_tally_entry *v;
    size_t n, cap;
} sq_tally;

/* Adds `delta` markers of `consumer`, marked at `ts` when delta > 0. False
 * when out of memory (the tally is unchanged). */
bool ib__sq_tally_add(sq_tally *t, const char *consumer, int64_t delta, int64_t ts);

/* Adds the tally to processed_counts, in the open write transaction; no
 * consumer's oldest time stays below `floor_ms` (a prune's cutoff, else
 * INT64_MIN). An SQLite code. */
int ib__sq_tally_write(sq_recorder *s, const sq_tally *t, int64_t floor_ms);

void ib__sq_tally_free(sq_tally *t);

/* A transaction body (TX_READ) filling an ib_recorder_stats from the
 * counts, the unmerged journal and the claims: no scan of the markers. */
int ib__sq_body_stats(sq_recorder *s, void *vctx, ib_error *local);

/* The transaction and outbox ops (sqlite_txn.c). */
ib_status ib__sq_transact(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                          const ib_marker_key *keys, size_t n, const ib__txn_request *req,
                          ib__txn_work_fn work, void *ctx, ib_error *err);
ib_status ib__sq_outbox_peek(ib_recorder *r, ib__outbox_entry **out, size_t *n, size_t limit,
                             ib_error *err);
ib_status ib__sq_outbox_delete(ib_recorder *r, const int64_t *seqs, size_t n, ib_error *err);
ib_status ib__sq_outbox_count(ib_recorder *r, uint64_t *count, ib_error *err);

/* Test and diagnostics hooks; NULL / no-op for other kinds. */

/* The recorder's connection (BORROWED; do not close, do not use while
 * another thread calls the recorder). */
sqlite3 *ib__sqlite_db(ib_recorder *r);

/* Rows examined per prune transaction (default 2000). */
void ib__sqlite_set_prune_batch(ib_recorder *r, unsigned rows);

/* Transactions the last prune committed. */
uint64_t ib__sqlite_prune_transactions(ib_recorder *r);

/* Keys in the tail that start a merge (default IB__SQ_MERGE_KEYS). */
void ib__sqlite_set_merge_keys(ib_recorder *r, uint64_t keys);

/* Calls `hook` inside every merge transaction, after the journal was read
 * and before the B-trees are written, with the number of keys it moves
 * (tests pause there to kill the process mid-merge). NULL removes it. */
void ib__sqlite_set_merge_hook(ib_recorder *r, void (*hook)(void *ctx, size_t keys), void *ctx);

/* Merges the whole journal now. `*moved` (may be NULL): keys written.
 * IB_ERR_RECORDER when the transaction failed (nothing was merged). */
ib_status ib__sqlite_merge(ib_recorder *r, size_t *moved, ib_error *err);

/* Merges that moved keys, and merges that failed, since the open. */
uint64_t ib__sqlite_merges(ib_recorder *r);
uint64_t ib__sqlite_merge_failures(ib_recorder *r);

#endif
