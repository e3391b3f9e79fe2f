/* SPDX-License-Identifier: Apache-2.0 */
/* The recorder: where "processed" markers live (installed with
 * libinfinity-bus).
 *
 * A recorder keeps, per (consumer, event id), whether the event was
 * processed, and offers claims with a lease so that several processes
 * handling the same event run the handler once. Open one by URI
 * (ib_recorder_open), use it from any thread, close it with
 * ib_recorder_close. <infinity_bus/idempotency.h> builds the handler
 * wrapper on top of it.
 *
 * Keys are (consumer, event_id). `consumer` is any non-empty string of at
 * most IB_CONSUMER_MAX bytes; `event_id` must be normalised (32 lowercase
 * hex; ib_event_id_normalise() in <infinity_bus/idempotency.h> makes one
 * from the accepted input forms): recorders refuse anything else with
 * IB_ERR_INVALID_ARG. Every call checks every key (a batch with one bad key
 * is refused whole, before anything is written). "Not found" is an answer
 * (false / IB_CLAIM_ACQUIRED), never an error. Every string argument is
 * BORROWED for the duration of the call.
 *
 * Kinds may lack the optional calls: batches fall back to loops over the
 * single calls and single calls to batches of one, claims to "DONE if
 * processed, else ACQUIRED" (no mutual exclusion), the admin calls answer IB_ERR_UNSUPPORTED.
 * memory: and sqlite: offer everything; kv: everything but prune (the bucket's TTL prunes).
 *
 * Errors: IB_ERR_INVALID_ARG for a bad argument, IB_ERR_RECORDER when the
 * storage fails (message "recorder sqlite:PATH: <reason>"), IB_ERR_NOMEM,
 * IB_ERR_UNSUPPORTED for an admin call a kind lacks.
 *
 * Thread safety: every kind may be called from several threads at once. */
#ifndef INFINITY_BUS_RECORDER_H
#define INFINITY_BUS_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infinity_bus/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IB_CONSUMER_MAX 255
#define IB_OWNER_MAX 128

typedef struct ib_recorder ib_recorder;

/* Answer of a claim. */
typedef enum ib_claim_state {
    IB_CLAIM_ACQUIRED = 0,  /* the caller holds the lease now: run the handler */
    IB_CLAIM_DONE = 1,      /* already processed: drop */
    IB_CLAIM_BUSY = 2,      /* another owner holds an unexpired lease: try again later */
    IB_CLAIM_EXHAUSTED = 3, /* not done, free, but max_attempts handler attempts were made
                               already: not claimed, not counted (the poison rule) */
    IB_CLAIM_CONFLICT = 4,  /* done, but the marker's payload fingerprint differs from the
                               caller's: the id was reused for other content. Only answered
                               to a claim that passes fingerprints (in-tree for now) */
} ib_claim_state;

/* Answer of ib_recorder_acquire_batch() for one key. */
typedef struct ib_claim_info {
    ib_claim_state state;
    uint32_t attempts;    /* handler attempts counted for the key, this one included when
                             ACQUIRED; 0 when the kind does not count attempts */
    int64_t remaining_ms; /* BUSY: how long the holder's lease still runs (>= 1); else 0.
                             0 with BUSY means the kind cannot tell */
} ib_claim_info;

/* What ib_recorder_acquire_batch() asks for. Strings are BORROWED. */
typedef struct ib_claim_request {
    const char *owner;     /* the caller's owner token, non-empty */
    int64_t lease_ms;      /* > 0 */
    uint32_t max_attempts; /* a free key with this many attempts already is EXHAUSTED;
                              0 = no limit */
    bool probe_holders;    /* ask the system whether a foreign holder still runs:
                              a holder proven gone is taken over at once, a holder
                              proven alive keeps an expired lease for one more
                              lease (its marks may be held up by a recorder outage) */
} ib_claim_request;

typedef struct ib_marker_key {
    const char *consumer;
    const char *event_id;
} ib_marker_key;

/* One marker as the admin calls report it. Strings are BORROWED for the
 * duration of the visit callback. */
typedef struct ib_marker_info {
    const char *consumer;
    const char *event_id;
    int64_t ts_ms; /* unix ms when marked */
} ib_marker_info;

/* One key's whole state, as ib_recorder_inspect() reports it. */
typedef struct ib_marker_state {
    bool marked;
    int64_t ts_ms;                /* unix ms when marked; 0 when not */
    uint32_t attempts;            /* handler attempts counted since the last dead letter (or
                                     forget); 0 when marked or the kind counts none */
    char owner[IB_OWNER_MAX + 1]; /* the claim's holder; "" = none (released or never) */
    int64_t lease_left_ms;        /* how long the holder's lease still runs; 0 when ended */
} ib_marker_state;

/* Keys that are not marked and have handler attempts counted, as
 * ib_recorder_attempt_stats() counts them. */
typedef struct ib_attempt_stats {
    uint64_t attempted; /* attempts > 0 */
    uint64_t exhausted; /* attempts >= the max_attempts asked about: the next delivery is
                           dead-lettered without running (IB_CLAIM_EXHAUSTED) */
} ib_attempt_stats;

/* Return non-zero to stop a listing early. Runs with the recorder locked
 * (and, for sqlite, a read snapshot open): it must not call the same
 * recorder, and should be quick. */
typedef int (*ib_marker_visit_fn)(void *ctx, const ib_marker_info *marker);

typedef struct ib_recorder_stats {
    uint64_t markers;       /* done markers */
    uint64_t claims;        /* claims currently held (any lease state) */
    uint64_t consumers;     /* distinct consumers with markers */
    int64_t oldest_ts_ms;   /* 0 when empty */
    int64_t newest_ts_ms;   /* 0 when empty */
    uint64_t storage_bytes; /* file size or memory in use; 0 if unknown */
} ib_recorder_stats;

/* Options for ib_recorder_open(); zero-initialise, then set what you need.
 * URI query parameters override these (see ib_recorder_open). */
typedef struct ib_recorder_options {
    size_t size;                    /* sizeof(ib_recorder_options) */
    size_t memory_capacity;         /* memory: max markers, oldest evicted; 0 = unbounded */
    int sqlite_busy_timeout_ms;     /* sqlite: 0 = 10000 */
    const char *sqlite_synchronous; /* sqlite: "off"|"normal"|"full"|"extra"; NULL = "full" */
    unsigned sqlite_file_mode;      /* sqlite: mode for a new file; 0 = 0600 */
    int64_t (*now_ms)(void);        /* NULL = realtime clock */
    void *nats_connection;          /* kv: a connected natsConnection* (BORROWED) */
    /* sqlite: accept a file (or -wal/-shm) owned by another user or writable
     * by group or others (--allow-insecure-db); a symbolic link is refused
     * whatever this says. */
    bool sqlite_allow_insecure;
    /* kv: create the bucket when it is missing (URI create= overrides);
     * otherwise a missing bucket is refused. */
    bool kv_create;
    /* kv: refuse a bucket whose TTL is shorter than this, in ms: the
     * caller's redelivery horizon (URI min_ttl= overrides); 0 = no floor. */
    int64_t kv_min_ttl_ms;
    /* sqlite: refuse a file that does not exist instead of creating it
     * (IB_ERR_CONFIG "no such file"): for tools that only read, or only
     * change markers that must already be there. */
    bool sqlite_must_exist;
    /* kv: the JetStream API prefix under which nats_connection reaches the
     * bucket's JetStream ("$JS.<domain>.API" for another JetStream domain,
     * such as a leaf node's seen from its hub, or the prefix an account
     * import gives). Used by a kv: URI without url=, domain= and
     * api_prefix=; NULL or "" = "$JS.API". Copied. */
    const char *kv_js_api_prefix;
} ib_recorder_options;

/* Opens a recorder from a URI:
 *   memory:                 in-process hash set
 *   memory:?capacity=N      ... keeping at most N markers, oldest evicted
 *   sqlite:PATH             SQLite file (created 0600 if missing)
 *   sqlite::memory:         private in-memory SQLite database (tests)
 *   sqlite:PATH?synchronous=full&busy_timeout_ms=5000&mode=0640
 *   kv:BUCKET               NATS JetStream key-value bucket, shared by
 *                           hosts; uses options->nats_connection
 *   kv:BUCKET?url=URL&creds=PATH&replicas=N&ttl=D&min_ttl=D&max_bytes=N&create=1
 *                           ... with its own connection (url, creds), and
 *                           the bucket's settings: checked when binding,
 *                           used when creating (only with create=1); D is
 *                           digits with ms, s (default), m, h or d
 *   kv:BUCKET?domain=NAME   ... in JetStream domain NAME (a leaf node's
 *                           bucket seen from its hub); or api_prefix=P,
 *                           under the API prefix P; not both. Without
 *                           them and without url=, the bucket is reached
 *                           as options->kv_js_api_prefix says
 * The scheme ignores case; the first '?' starts the parameters (so a path
 * cannot contain '?'); there is no percent-decoding; each parameter may be
 * given once. capacity is 1..2^30, busy_timeout_ms 1..86400000, mode is
 * octal, at most 0777, and must give the owner read and write. A new
 * SQLite file gets `mode` whatever the umask, and SQLite gives its -wal and
 * -shm files the same mode; an existing file keeps its own.
 * `options` may be NULL (size 0 is read as the current layout). On success
 * `*out` is owned by the caller and closed with ib_recorder_close(); on
 * failure it is NULL. A bad URI or option gives IB_ERR_CONFIG with a
 * message that names the URI and the reason; a SQLite file with a newer
 * schema than this build knows gives IB_ERR_SCHEMA; a file that cannot be
 * created IB_ERR_IO; a file SQLite cannot use IB_ERR_RECORDER. A sqlite:
 * file whose directory does not exist, or that does not exist while
 * sqlite_must_exist is set, gives IB_ERR_CONFIG: no retry can fix it. kv: gives
 * IB_ERR_CONFIG for a missing bucket (without create=1), a bucket whose
 * settings differ from the URI's, or whose TTL is below min_ttl, and
 * without any connection; IB_ERR_NATS when url= cannot be reached. */
ib_status ib_recorder_open(ib_recorder **out, const char *uri, const ib_recorder_options *options,
                           ib_error *err);

/* Closes and frees a recorder. NULL is a no-op. */
void ib_recorder_close(ib_recorder *r);

/* Kind name ("memory", "sqlite", "kv"). */
const char *ib_recorder_kind(const ib_recorder *r);

/* The seed protocol. */
ib_status ib_recorder_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                   const char *event_id, ib_error *err);
ib_status ib_recorder_mark(ib_recorder *r, const char *consumer, const char *event_id,
                           ib_error *err);

/* Batch forms: processed[i] answers keys[i]. n == 0 is a no-op (keys and
 * processed may then be NULL). Fall back to loops over the single calls. */
ib_status ib_recorder_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys,
                                  size_t n, ib_error *err);
ib_status ib_recorder_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                 ib_error *err);

/* Claims (consumer, event_id) for `owner` (non-empty, at most IB_OWNER_MAX
 * bytes) for `lease_ms` (> 0):
 *   done                           -> IB_CLAIM_DONE
 *   free, or lease expired, or
 *   already held by `owner`        -> IB_CLAIM_ACQUIRED (lease (re)started)
 *   held by another, unexpired     -> IB_CLAIM_BUSY
 * A lease taken at time t with lease_ms L has expired from t + L on (the
 * recorder's now_ms clock). Without claim support in the kind: DONE if
 * processed, else ACQUIRED (no mutual exclusion). Marking an id clears its
 * claim, whoever held it. */
ib_status ib_recorder_claim(ib_recorder *r, ib_claim_state *state, const char *consumer,
                            const char *event_id, const char *owner, int64_t lease_ms,
                            ib_error *err);
ib_status ib_recorder_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                                  size_t n, const char *owner, int64_t lease_ms, ib_error *err);

/* Frees a claim held by `owner` (after a failed handler) so any process may
 * take it at once. A claim held by someone else, or none, is left alone. */
ib_status ib_recorder_release(ib_recorder *r, const char *consumer, const char *event_id,
                              const char *owner, ib_error *err);
ib_status ib_recorder_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                    const char *owner, ib_error *err);

/* The claim `ibus run` and ib_idempotent_call() use: like
 * ib_recorder_claim_batch(), and also
 *   - counts a handler attempt for every key it ACQUIRES, in the same
 *     transaction (so a handler that then crashes the process still
 *     counts), and answers EXHAUSTED instead for a free key that already
 *     had req->max_attempts attempts;
 *   - says for BUSY how long the holder's lease still runs;
 *   - with req->probe_holders, takes over at once a lease whose holder is
 *     proven gone, and lets a holder proven alive keep an ended lease for
 *     one more lease_ms.
 * out[i] answers keys[i]. Without the op in the kind: claim_batch, with
 * attempts 0 and remaining_ms 0 (never EXHAUSTED). Errors: the
 * recorder's; nothing is claimed or counted then. */
ib_status ib_recorder_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                    size_t n, const ib_claim_request *req, ib_error *err);

/* Restarts the lease of every key still held by `owner`; held[i] is false
 * for a key whose claim another owner took over, or that has none (the
 * lease was lost). Without the op: claim_batch by the same owner. */
ib_status ib_recorder_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                                  const char *owner, int64_t lease_ms, ib_error *err);

/* Marks every key unless another owner holds an unexpired claim on it:
 * then marked[i] is false and nothing is written for that key (the caller
 * lost its lease and must not mark over the new holder). A key already
 * done gives marked[i] = true. One transaction where the kind can make it
 * so. Without the op: mark_batch, all true. */
ib_status ib_recorder_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                       size_t n, const char *owner, ib_error *err);

/* True when the kind keeps attempt counts across a crash of the caller
 * (sqlite); false for memory and kinds without acquire_batch, where the
 * poison rule falls back to JetStream's delivery count. */
bool ib_recorder_has_durable_attempts(const ib_recorder *r);

/* True when the store is only shared by processes of one host, so owner
 * tokens of another kernel boot are gone. */
bool ib_recorder_is_host_local(const ib_recorder *r);

/* Ends the handler attempts of every key that is not marked: its attempt
 * count goes back to 0, so the next delivery of the id starts with a fresh
 * budget of max_attempts. `ibus run` calls it once an event's dead letter
 * is published: the dead letter is the decision the attempts led to, and a
 * republish or replay of the event must run its handlers again. A claim
 * on a key (its owner and lease) is left as it is; a marked key, or one
 * without attempts, is left alone. n == 0 is a no-op. Without the op in
 * the kind: nothing to end, IB_OK. Errors: the recorder's. */
ib_status ib_recorder_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                   ib_error *err);

/* Admin calls; IB_ERR_UNSUPPORTED when the kind does not offer them.
 * lookup: `*found` and the time it was marked (`ts_ms` may be NULL; 0 when
 * not found). forget: removes one marker and ends the key's attempts
 * (`existed` may be NULL: whether a marker was removed); a claim's owner
 * and lease are left alone. */
ib_status ib_recorder_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                             const char *event_id, ib_error *err);
ib_status ib_recorder_forget(ib_recorder *r, bool *existed, const char *consumer,
                             const char *event_id, ib_error *err);
/* Removes done markers marked before `older_than_ms` (unix ms) and claims
 * whose lease has ended; `*removed` (may be NULL) counts the markers, and
 * holds the count so far if an error stops the prune. SQLite deletes in
 * bounded batches, one transaction each, so the write lock is never held
 * for long; memory gives the freed memory back. */
ib_status ib_recorder_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms,
                            ib_error *err);
/* Visits markers of `consumer` (NULL = all), newest first, at most `limit`
 * (0 = no limit). memory orders by marking order, sqlite by ts. See
 * ib_marker_visit_fn for what the callback may do. */
ib_status ib_recorder_list(ib_recorder *r, const char *consumer, size_t limit,
                           ib_marker_visit_fn visit, void *ctx, ib_error *err);
ib_status ib_recorder_stats_get(ib_recorder *r, ib_recorder_stats *stats, ib_error *err);

/* The whole state of one key: marked and when, the claim's holder and how
 * long its lease still runs, the attempts counted. Not found is an answer
 * (all zero). Without the op in the kind: lookup's answer, no claim, no
 * attempts. */
ib_status ib_recorder_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                              const char *event_id, ib_error *err);

/* Counts the keys that are not marked and have attempts counted, and
 * among them those with at least `max_attempts` (> 0). sqlite merges its
 * journal first; kv walks the whole bucket (a diagnostic, costly on a
 * large one). IB_ERR_UNSUPPORTED when the kind does not offer it. */
ib_status ib_recorder_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                                    ib_error *err);

#ifdef __cplusplus
}
#endif

#endif
