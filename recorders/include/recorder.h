/* SPDX-License-Identifier: Apache-2.0 */
/* The recorders' in-tree header: the public API (<infinity_bus/recorder.h>)
 * plus what only the kinds and the rest of infinity-bus see: the vtable
 * every kind fills, the base struct every kind embeds, and ib__ helpers.
 *
 * The two calls of the seed protocol (is_processed, mark_processed) are
 * required in the vtable; batches, claims with a lease and the admin calls
 * are optional, and the ib_recorder_* wrappers fall back to the required
 * calls when a kind does not offer them, so a recorder with only the two
 * calls still works. The wrappers check every key, so the kinds' ops may
 * rely on valid keys (see core/uuid.h for the id form). */
#ifndef IB_RECORDER_H
#define IB_RECORDER_H

#include <infinity_bus/recorder.h>

#include "error.h"

/* What the in-tree claim asks beyond ib_claim_request (below). */
typedef struct ib__acquire_opts ib__acquire_opts;

/* ---- payload fingerprints ------------------------------------------------
 *
 * A marker may store a fingerprint of the event it stands for
 * (ib_fingerprint() in core/fingerprint.h: type and payload). 0 means "none"
 * and matches anything: markers written before fingerprints existed, and
 * callers that pass none. */

/* ib_recorder_acquire_batch() with fingerprints: a done key whose marker
 * holds a fingerprint other than fingerprints[i] (both non-zero) answers
 * IB_CLAIM_CONFLICT instead of DONE. `fingerprints` may be NULL (no check).
 * The comparison rides on the read the claim makes anyway: a new id costs
 * nothing more. Kinds that store no fingerprints never answer CONFLICT;
 * memory compares 16 bits of them (a conflict may pass as DONE, never the
 * other way round). */
ib_status ib__recorder_acquire_fp(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                  const uint64_t *fingerprints, size_t n,
                                  const ib_claim_request *req, ib_error *err);

/* ib_recorder_mark_owned_batch() storing fingerprints[i] with each new
 * marker (`fingerprints` NULL, or an entry 0: none). An existing marker
 * keeps its fingerprint. */
ib_status ib__recorder_mark_owned_fp(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                     const uint64_t *fingerprints, size_t n, const char *owner,
                                     ib_error *err);

/* ib__recorder_acquire_fp and ib__recorder_mark_owned_fp for keys the
 * caller has already checked as ib__recorder_check_key would: `keys`
 * non-NULL, every consumer non-empty and at most IB_CONSUMER_MAX bytes,
 * every id normalised. The dispatcher checks ids as a batch arrives and
 * consumers when a handler registers; checking them again in the claim
 * and again in the mark cost a fifth of the memory recorder's hot path.
 * Everything else (recorder, outputs, owner, lease) is still checked. A
 * key that breaks the rule is the caller's bug: the kinds rely on it. */
ib_status ib__recorder_acquire_checked(ib_recorder *r, ib_claim_info *out,
                                       const ib_marker_key *keys, const uint64_t *fingerprints,
                                       size_t n, const ib_claim_request *req,
                                       const ib__acquire_opts *opts, ib_error *err);
ib_status ib__recorder_mark_owned_checked(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                          const uint64_t *fingerprints, size_t n, const char *owner,
                                          ib_error *err);

/* ---- attempts counted as handlers start ----------------------------------
 *
 * ib_recorder_acquire_batch() counts an attempt for every key it acquires:
 * right for a caller that starts the call at once (ib_idempotent_call). A
 * batch does not start its calls at once, and a process that dies in one
 * of them must not have spent an attempt of the others. So `ibus run`
 * claims with `defer_attempts` and counts each attempt itself
 * (ib__recorder_count_attempts): before the call starts when the call may
 * not return (its key was taken over from a holder that never released
 * it), after it returned otherwise. docs/design.md ("What a claim
 * promises") states the rule. */

struct ib__acquire_opts {
    /* count no attempt: an ACQUIRED key's info.attempts is the count so
     * far, the caller counts this one (ib__recorder_count_attempts) */
    bool defer_attempts;
    /* ... except for keys[0]: its attempt is counted if it is ACQUIRED (the
     * caller starts its call first, at once) */
    bool count_key0;
    /* NULL, or per key: true when the key was ACQUIRED (or answered
     * EXHAUSTED) from another holder that had not released it (its lease
     * ended, or it is gone): that holder may have started the handler and
     * died in it, so the call may not return here either */
    bool *taken_over;
};

/* Counts one handler attempt for every key `owner` holds (for key i only
 * if count[i], when `count` is not NULL), in one write (a transaction for
 * sqlite), and restarts its lease for lease_ms; with `release` frees the
 * claim instead (the end of a batch: a call that returned RETRY is counted
 * as it is freed, one that was counted before it started is not), keeping
 * the count. held[i] is false for a key whose claim another owner took
 * over, that is done, or that has no claim: nothing is written for it.
 * Where attempts are durable (sqlite, kv) the count survives a kill -9 of
 * the caller from the moment this function returns. Without the op in the
 * kind: renew (or release) only, no count. Errors: the recorder's;
 * nothing counted then. lease_ms is ignored with `release`. */
ib_status ib__recorder_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                      const bool *count, size_t n, const char *owner,
                                      int64_t lease_ms, bool release, ib_error *err);

/* ---- transactional work (sqlite) -------------------------------------------
 *
 * Work whose effects live in the marker file itself commits in the same
 * transaction as its marker, so a crash leaves both or neither. */

/* A write transaction of ib__recorder_transact() in progress, as its work
 * callback sees it. BORROWED: valid during the callback only. */
typedef struct ib__txn ib__txn;

/* The work of keys[i]: runs inside a savepoint of the transaction that
 * will also write the key's marker. Returns true to keep its writes (the
 * savepoint is released and the marker written), false to roll them back
 * to the savepoint (nothing it wrote survives, no marker). Runs on the
 * thread that called ib__recorder_transact, with the recorder locked: it
 * must use the recorder only through `txn`. */
typedef bool (*ib__txn_work_fn)(void *ctx, size_t i, ib__txn *txn);

/* What became of one key of ib__recorder_transact(). */
typedef enum ib__txn_result {
    IB__TXN_NOT_RUN = 0, /* not started: the transaction ended before it */
    IB__TXN_COMMITTED,   /* work kept, marker written, committed: durable */
    IB__TXN_ROLLED_BACK, /* work ran and nothing of it survives: it said no, or the
                            transaction failed after it ran */
    IB__TXN_LOST,        /* another owner holds a live claim on the key: not run */
    IB__TXN_DONE,        /* the key was marked already (by another owner): not run */
} ib__txn_result;

typedef struct ib__txn_request {
    const char *owner;            /* the claims' owner: keys are fenced as by
                                     ib_recorder_mark_owned_batch */
    const uint64_t *fingerprints; /* stored with the markers; NULL = none */
    int64_t hold_ms;              /* start no further work once the transaction has been
                                     open this long, and commit; <= 0 = one key each */
} ib__txn_request;

/* Runs `work` for keys[0..n) in order inside one write transaction (BEGIN
 * IMMEDIATE). Per key: fences it (another owner's live claim: LOST; already
 * marked: DONE; neither runs), opens a savepoint, calls work, and on true
 * releases the savepoint and writes the marker (ending the claim, storing
 * the fingerprint), on false rolls back to the savepoint. Commits once
 * hold_ms has passed or every key is consumed; `*consumed` says how many
 * keys this call decided (out[0..*consumed)); call again with the rest.
 *
 * While work runs, an authorizer refuses statements that would end the
 * transaction or a savepoint of the recorder's, write the recorder's own
 * tables, create a trigger, attach a file or change a pragma (they fail
 * with SQLITE_AUTH and the transaction goes on). Work that ends the
 * transaction anyway (an I/O error, ...) fails the call as below.
 *
 * A failure before any work ran (BUSY past the retry budget, ...) consumes
 * nothing and returns the error. Once work has run nothing is replayed: a
 * failed statement or commit rolls the whole transaction back, every key
 * that ran becomes ROLLED_BACK, and the error (IB_ERR_RECORDER) is
 * returned with *consumed covering them. IB_ERR_UNSUPPORTED for kinds
 * without transactions (see ib__recorder_has_transactions). */
ib_status ib__recorder_transact(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                                const ib_marker_key *keys, size_t n, const ib__txn_request *req,
                                ib__txn_work_fn work, void *ctx, ib_error *err);

/* True when the kind runs ib__recorder_transact (sqlite). */
bool ib__recorder_has_transactions(const ib_recorder *r);

struct sqlite3;

/* The transaction's connection, inside the current work's savepoint.
 * BORROWED: for the work callback's own statements, during the callback. */
struct sqlite3 *ib__txn_db(ib__txn *txn);

/* Stages one message in the outbox table, inside the current work's
 * savepoint: it commits with the work's marker or vanishes with it.
 * `subject`, `msg_id` (the new event's id, sent as Nats-Msg-Id) and the
 * encoded message `data` are copied. Errors: IB_ERR_INVALID_ARG (empty
 * subject or id), IB_ERR_RECORDER (the work should then answer false). */
ib_status ib__txn_outbox_put(ib__txn *txn, const char *subject, const char *msg_id,
                             const void *data, size_t len, ib_error *err);

/* ---- the outbox ---------------------------------------------------------- */

/* One staged message, as ib__recorder_outbox_peek copies it out. */
typedef struct ib__outbox_entry {
    int64_t seq; /* staging order; the key for ib__recorder_outbox_delete */
    char *subject;
    char *msg_id;
    uint8_t *data;
    size_t len;
    int64_t staged_ms; /* unix ms */
} ib__outbox_entry;

/* Copies the `limit` (> 0) oldest staged messages into a new array `*out`
 * of `*n` entries (0 when the outbox is empty; `*out` then NULL). The
 * caller owns it: ib__outbox_entries_free. Reads only; several processes
 * may peek the same entries (each publishes them with the same
 * Nats-Msg-Id, so JetStream keeps one). Kinds without an outbox give
 * 0 entries. */
ib_status ib__recorder_outbox_peek(ib_recorder *r, ib__outbox_entry **out, size_t *n, size_t limit,
                                   ib_error *err);

/* Frees what ib__recorder_outbox_peek returned. NULL is a no-op. */
void ib__outbox_entries_free(ib__outbox_entry *entries, size_t n);

/* Deletes published entries by seq, in one transaction; seqs already gone
 * are fine. */
ib_status ib__recorder_outbox_delete(ib_recorder *r, const int64_t *seqs, size_t n, ib_error *err);

/* How many messages wait in the outbox (0 for kinds without one). */
ib_status ib__recorder_outbox_count(ib_recorder *r, uint64_t *count, ib_error *err);

/* Asked between the steps of a long call: true when it should end now.
 * `ctx` is the caller's. */
typedef bool (*ib__stop_fn)(void *ctx);

/* ib_recorder_prune that asks `stop` (NULL = never) before each of its
 * bounded transactions, and once it says true returns IB_OK with what it
 * removed so far: a caller that shuts down waits for one transaction at
 * most. A kind without steps prunes in one call. */
ib_status ib__recorder_prune_until(ib_recorder *r, uint64_t *removed, int64_t older_than_ms,
                                   ib__stop_fn stop, void *ctx, ib_error *err);

/* Bytes in the write-ahead log now (sqlite: the -wal file); 0 for other
 * kinds, or when there is none. */
uint64_t ib__recorder_wal_bytes(ib_recorder *r);

/* The longest this recorder has waited for its turn at a shared write
 * lock, in ns (0 for kinds without one). */
int64_t ib__recorder_lock_wait_max_ns(ib_recorder *r);

/* ---- per-consumer summaries (ibus status) --------------------------------
 *
 * What an operator asks of a durable's markers: how many each consumer
 * identity has and how old they are, which claims are held and for how
 * much longer, and which events have used their attempts. */

/* One consumer identity, as ib__recorder_summarize() reports it. A key
 * counts in at most one of markers and claims; keys with neither a marker
 * nor a holder still count in attempted when they have attempts. */
typedef struct ib__consumer_summary {
    char *consumer;            /* OWNED by the array (ib__consumer_summaries_free) */
    uint64_t markers;          /* done markers */
    int64_t oldest_ms;         /* unix ms of the oldest marker; 0 without markers */
    int64_t newest_ms;         /* unix ms of the newest marker; 0 without markers */
    uint64_t claims;           /* keys not marked whose claim has a holder, whether or not
                                  its lease still runs: work in flight, or left by a holder
                                  that stopped */
    uint64_t claims_ended;     /* among them, those whose lease has ended */
    int64_t lease_left_min_ms; /* among them, the shortest time a lease still runs:
                                  negative when the earliest one ended that long
                                  ago; 0 without claims */
    char lease_left_min_owner[IB_OWNER_MAX + 1]; /* that claim's holder; "" without */
    uint64_t attempted;                          /* keys not marked with handler attempts counted */
    uint64_t exhausted; /* among them, those with at least max_attempts: their next
                           delivery is dead-lettered without running */
} ib__consumer_summary;

/* Summarises every consumer identity the recorder holds anything of:
 * `*out` becomes a new array of `*n` entries sorted by consumer (NULL and
 * 0 when the recorder is empty), owned by the caller
 * (ib__consumer_summaries_free). Leases are compared with the recorder's
 * lease clock (sqlite: this host's boot clock, so ask on the host that
 * writes the file; kv: the wall clock). Reads only. Costs: memory and
 * sqlite read every marker once (a diagnostic, not for a hot path; sqlite
 * in one read transaction), kv walks every key of the bucket and reads
 * each marker and each id's newest claim. Errors: IB_ERR_INVALID_ARG
 * (max_attempts 0, NULL outputs), IB_ERR_UNSUPPORTED for a kind without
 * it, the recorder's own. */
ib_status ib__recorder_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                                 uint32_t max_attempts, ib_error *err);

/* Frees what ib__recorder_summarize returned. NULL is a no-op. */
void ib__consumer_summaries_free(ib__consumer_summary *v, size_t n);

/* Features a kind declares in ib_recorder_ops.features. */
#define IB_RECORDER_DURABLE_ATTEMPTS 0x1u /* attempt counts survive a crash of the caller */
#define IB_RECORDER_HOST_LOCAL 0x2u       /* only ever shared by processes of one host */

typedef struct ib_recorder_ops {
    size_t size;      /* sizeof(ib_recorder_ops) as the kind was built */
    const char *kind; /* "memory", "sqlite", "kv" */

    /* Required. */
    ib_status (*is_processed)(ib_recorder *r, bool *processed, const char *consumer,
                              const char *event_id, ib_error *err);
    ib_status (*mark_processed)(ib_recorder *r, const char *consumer, const char *event_id,
                                ib_error *err);
    void (*close)(ib_recorder *r);

    /* Optional: NULL (or past `size`) when not offered. Batches are atomic
     * where the kind can make them so: sqlite runs each in one transaction;
     * memory runs it under one lock, and a mark batch cut short by an
     * allocation failure keeps the marks made before it (marking is
     * idempotent, so the caller simply retries). */
    ib_status (*check_batch)(ib_recorder *r, bool *processed, const ib_marker_key *keys, size_t n,
                             ib_error *err);
    ib_status (*mark_batch)(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err);
    ib_status (*claim)(ib_recorder *r, ib_claim_state *state, const char *consumer,
                       const char *event_id, const char *owner, int64_t lease_ms, ib_error *err);
    ib_status (*claim_batch)(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                             size_t n, const char *owner, int64_t lease_ms, ib_error *err);
    ib_status (*release)(ib_recorder *r, const char *consumer, const char *event_id,
                         const char *owner, ib_error *err);
    ib_status (*release_batch)(ib_recorder *r, const ib_marker_key *keys, size_t n,
                               const char *owner, ib_error *err);

    /* Optional admin calls (ibus markers). */
    ib_status (*lookup)(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                        const char *event_id, ib_error *err);
    ib_status (*forget)(ib_recorder *r, bool *existed, const char *consumer, const char *event_id,
                        ib_error *err);
    ib_status (*prune)(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err);
    ib_status (*list)(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err);
    ib_status (*stats)(ib_recorder *r, ib_recorder_stats *stats, ib_error *err);

    /* Optional, appended: attempts, fenced leases and fenced marks (see the
     * ib_recorder_* wrappers of the same names). */
    unsigned features; /* IB_RECORDER_* bits */
    /* `fingerprints` (NULL = none) as for ib__recorder_acquire_fp and
     * ib__recorder_mark_owned_fp; a kind that stores none ignores them. */
    /* `opts` NULL: the public claim (attempts counted, nothing more). */
    ib_status (*acquire_batch)(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                               const uint64_t *fingerprints, size_t n, const ib_claim_request *req,
                               const ib__acquire_opts *opts, ib_error *err);
    ib_status (*renew_batch)(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                             const char *owner, int64_t lease_ms, ib_error *err);
    ib_status (*mark_owned_batch)(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                  const uint64_t *fingerprints, size_t n, const char *owner,
                                  ib_error *err);

    /* Optional, appended: transactional work and its outbox (see the
     * ib__recorder_* wrappers of the same names). */
    ib_status (*transact)(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                          const ib_marker_key *keys, size_t n, const struct ib__txn_request *req,
                          ib__txn_work_fn work, void *ctx, ib_error *err);
    ib_status (*outbox_peek)(ib_recorder *r, ib__outbox_entry **out, size_t *n, size_t limit,
                             ib_error *err);
    ib_status (*outbox_delete)(ib_recorder *r, const int64_t *seqs, size_t n, ib_error *err);
    ib_status (*outbox_count)(ib_recorder *r, uint64_t *count, ib_error *err);
    uint64_t (*wal_bytes)(ib_recorder *r);

    /* Optional, appended: lock figures (see the ib__recorder_* wrapper of
     * the same name). */
    int64_t (*lock_wait_max_ns)(ib_recorder *r);

    /* Optional, appended: the end of attempts at a dead letter and the
     * admin calls that show them (see the ib_recorder_* wrappers of the
     * same names). Keys are checked by the wrappers. */
    ib_status (*end_attempts)(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err);
    ib_status (*inspect)(ib_recorder *r, ib_marker_state *out, const char *consumer,
                         const char *event_id, ib_error *err);
    ib_status (*attempt_stats)(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                               ib_error *err);

    /* Optional, appended: per-consumer summaries (ib__recorder_summarize;
     * the wrapper checks the arguments and sorts what the kind returns). */
    ib_status (*summarize)(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                           uint32_t max_attempts, ib_error *err);

    /* Optional, appended: ib__recorder_count_attempts (keys checked). */
    ib_status (*count_attempts)(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                const bool *count, size_t n, const char *owner, int64_t lease_ms,
                                bool release, ib_error *err);

    /* Optional, appended: ib__recorder_prune_until. */
    ib_status (*prune_until)(ib_recorder *r, uint64_t *removed, int64_t older_than_ms,
                             ib__stop_fn stop, void *ctx, ib_error *err);
} ib_recorder_ops;

/* Every kind embeds this as its first member. */
struct ib_recorder {
    const ib_recorder_ops *ops;
    int64_t (*now_ms)(
        void); /* wall clock in unix ms (ib_clock_realtime_ms); replaceable for tests */
    /* Clock of leases, in ms: CLOCK_BOOTTIME by default (never steps, shared
     * by every process of one kernel); the injected now_ms when a test
     * replaced that. */
    int64_t (*lease_now_ms)(void);
};

/* True when opening `uri` needs the caller's NATS connection
 * (ib_recorder_options.nats_connection): a kv: URI without its own url=.
 * A URI that does not parse gives false, so its error comes from
 * ib_recorder_open(). For a host that connects after opening local
 * things. */
bool ib__recorder_uri_needs_connection(const char *uri);

/* True when `uri` names a SQLite file (not sqlite::memory:); its path is
 * copied into `path` (cap bytes). False for other kinds and for a URI
 * that does not parse. For a tool that must not create the file. */
bool ib__recorder_uri_sqlite_path(const char *uri, char *path, size_t cap);

/* Validates a key the way every kind must: non-empty consumer up to
 * IB_CONSUMER_MAX bytes, normalised id. IB_ERR_INVALID_ARG with a message
 * saying which part is wrong (the id itself is not quoted). Internal. */
ib_status ib__recorder_check_key(const char *consumer, const char *event_id, ib_error *err);

#endif
