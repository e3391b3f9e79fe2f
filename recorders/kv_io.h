/* SPDX-License-Identifier: Apache-2.0 */
/* The kv: recorder's state and its bucket's layout, shared by its files,
 * and the calls of kv_io.c (subjects and claim values, each with its one
 * builder and parser; single reads; pipelined conditional writes), on
 * which the others stand: kv_read.c (pipelined reads through the stream
 * leader, the epoch search: kv_read.h), kv_held.c (the claims this process
 * holds: kv_held.h), kv_bucket.c (connection, bucket binding, admin walks:
 * kv_bucket.h) and kv.c (the recorder calls).
 *
 * Layout of the bucket, per (consumer, event id); <c> is the consumer in
 * lowercase hex, so that no consumer name can break a key:
 *   d.<c>.<id>        done marker; value: unix ms when marked, then, when
 *                     the mark had one, " <fingerprint>" in decimal. Readers
 *                     parse the number first and stop at the space, so
 *                     values of either form read in builds of either age
 *   c.<c>.<id>.<n>    claim epoch n = 1, 2, ...; value: "<attempts> <lease
 *                     end, unix ms> <owner>" (owner "" = released)
 *   c.<c>.<id>.1      is also the key's anchor. A new claim creates it (so
 *                     a new event costs one Create and no read); the writer
 *                     of every later epoch n, and every mark, then rewrite
 *                     it (a plain put) as "@<n> <attempts> <end> <owner>":
 *                     a copy of epoch n that names it. The bucket's TTL
 *                     removes every message TTL after it was written, so
 *                     low epochs of a long claim vanish while its newest
 *                     lives; the anchor, rewritten with every epoch, lives
 *                     as long as the newest epoch, so the claim's state is
 *                     found from it and never depends on older epochs
 *                     surviving. It also outlives the done marker: a
 *                     mark's rewrite is sent behind the marker on the same
 *                     connection, so the stream stores it after the
 *                     marker, and is put again when the marker may have
 *                     landed later (kv_io.c). An anchor gone while its
 *                     marker lives would let a redelivery's Create of
 *                     epoch 1 win a claim on a key that is done.
 * Every decision comes from a Create (expect no message, or expect the
 * tombstone's sequence after a forget), the one conditional write that is
 * safe on a replicated bucket of nats-server 2.9; the anchor's rewrites
 * decide nothing (a Create of epoch 1 only needs the key to exist, and the
 * search only a lower bound). Claim keys are never deleted. */
#ifndef IB_KV_IO_H
#define IB_KV_IO_H

#include <pthread.h>

#include <nats/nats.h>

#include "recorder_internal.h"

/* "$KV.<bucket>.c.<hex consumer>.<id>.<n>" fits (without a write's
 * put_prefix). */
#define KV_SUBJECT_MAX 1024
/* "<attempts> <end> <owner>" fits. */
#define KV_VALUE_MAX (IB_OWNER_MAX + 48)
/* How many times a conditional write is tried again after a lost race
 * re-read. */
#define KV_RETRIES 4

typedef struct kv_recorder {
    ib_recorder base;
    natsConnection *nc;
    bool own_nc; /* made from url=; closed with the recorder */
    jsCtx *js;   /* reads and admin calls; thread-safe */
    kvStore *kv;
    int64_t wait_ms;       /* reads and admin calls */
    int64_t write_wait_ms; /* one write round (kv_io.c) */
    char bucket[IB__KV_BUCKET_MAX + 1];
    char stream[IB__KV_BUCKET_MAX + 4]; /* KV_<bucket> */
    /* The JetStream API prefix of the bucket's domain (js_api.h), for the
     * reads sent by hand, and what goes before a write's "$KV..." subject:
     * "" for the default prefix, else "<api_prefix>.", which the server
     * maps back to "$KV..." in the bucket's domain. */
    char api_prefix[IB_JS_API_PREFIX_MAX];
    char put_prefix[IB_JS_API_PREFIX_MAX + 1];
    pthread_mutex_t acks_mu; /* one write round at a time (kv_io.c) */
    natsSubscription *acks;  /* the write rounds' ack inbox, or NULL */
    char acks_inbox[64];
    uint64_t acks_round;
    /* Called after every write round that left writes unanswered, with
     * the round's number (from 1); NULL in the product. Tests use it to
     * act between a round that timed out and the next one. */
    void (*unanswered_round)(void *ctx, int round);
    void *unanswered_round_ctx;
    /* Called by read_heads after the epochs are known, before it reads
     * the markers of claimed keys again; NULL in the product. Tests use
     * it to mark a key between the two reads (kv_read.c). */
    void (*heads_read)(void *ctx);
    void *heads_read_ctx;
    pthread_mutex_t held_mu; /* guards held, held_n (kv_held.c) */
    struct kv_held **held;
    size_t held_n;
} kv_recorder;

/* Outcome of one conditional write. */
typedef enum kv_result {
    KV_PENDING = 0,
    KV_WRITTEN, /* stored */
    KV_EXISTS,  /* jsErrCode 10071: the key already had a newer message */
    KV_FAILED,  /* refused for another reason (status in `st`) */
} kv_result;

typedef struct kv_write {
    char subject[KV_SUBJECT_MAX];
    char value[KV_VALUE_MAX];
    uint64_t expect_seq; /* 0 = expect no message at all */
    bool put;            /* no expectation at all (the anchor's rewrites) */
    uint32_t epoch;      /* the claim epoch written, 0 = not an epoch */
    uint32_t attempts;   /* an epoch's attempt count and lease end */
    int64_t end;
    kv_result result;
    natsStatus st;
    unsigned tries; /* times sent */
} kv_write;

/* A message read through the leader: `found` false when the subject has
 * none; `deleted` when the last one is a tombstone (then `seq` is its
 * sequence, to write over it). */
typedef struct kv_read {
    bool found, deleted;
    uint64_t seq;
    char value[KV_VALUE_MAX];
} kv_read;

/* The state of one key: done, and the highest claim epoch. */
typedef struct kv_head {
    bool done;
    uint64_t fp;    /* the done marker's fingerprint; 0 = none */
    uint32_t epoch; /* 0 = never claimed */
    uint32_t attempts;
    int64_t end; /* lease end, unix ms */
    char owner[IB_OWNER_MAX + 1];
} kv_head;

/* A claim this process holds (kv_held.c). */
typedef struct kv_lease {
    uint32_t epoch, attempts;
    int64_t end, lease_ms; /* the lease written last, unix ms, and its length */
} kv_lease;

typedef struct kv_held kv_held;

static inline kv_recorder *kv_of(ib_recorder *r)
{
    return (kv_recorder *)r;
}

/* The consumer as keys carry it, in lowercase hex; `out` holds
 * 2 * IB_CONSUMER_MAX + 1 bytes. */
void ib__kv_consumer_hex(char *out, const char *consumer);

/* The one builder of subjects: "$KV.<bucket>." then "d.<hex>.<id>" for
 * type 'd' (n unused) or "c.<hex>.<id>.<n>" for type 'c', into `out`
 * (KV_SUBJECT_MAX bytes). `hex` is the consumer as ib__kv_consumer_hex
 * writes it, or as a key of the bucket holds it. */
void ib__kv_subject_hex(const kv_recorder *k, char *out, char type, const char *hex, const char *id,
                        uint32_t n);

/* ib__kv_subject_hex for a marker key. */
void ib__kv_subject(const kv_recorder *k, char *out, char type, const ib_marker_key *key,
                    uint32_t n);

/* The one parser of a claim key's value (see the layout above): an
 * epoch's "<attempts> <end> <owner>", or the anchor's rewrite, the same
 * after "@<n> ". Sets h's attempts, end and owner (0, 0 and "" for what
 * it cannot read) and returns the n a rewrite names, or 0 for a value
 * that names none (an epoch's own, or epoch 1 as Created). */
uint32_t ib__kv_parse_claim(kv_head *h, const char *v);

/* IB_ERR_RECORDER "recorder kv:<bucket>: <what>: <nats reason>". */
ib_status ib__kv_fail(const kv_recorder *k, ib_error *err, natsStatus st, const char *what);

/* Reads the last message of `subject` from the stream leader (never a
 * possibly stale follower). */
ib_status ib__kv_read_last(kv_recorder *k, kv_read *out, const char *subject, ib_error *err);

/* Publishes every write of `w` with its expectation, pipelined, and waits
 * for every answer. A write whose answer did not come within a round
 * (write_wait_ms, or until a reconnect, or at once when no stream leader
 * answered) is sent again, after a short pause when the round ended
 * early, for up to 20 s in all (kv_io.c); when a retry finds the key taken, its
 * value is read back and, if it is ours, counts as written (our earlier
 * attempt was stored). Errors only for the connection as a whole; each
 * write's own outcome is in its `result`. */
ib_status ib__kv_publish(kv_recorder *k, kv_write *w, size_t n, ib_error *err);

/* Fills `w` with a Create of claim epoch `epoch` (> 0). */
void ib__kv_prepare_epoch(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                          uint32_t attempts, int64_t end, const char *owner);

/* Fills `w` with the anchor's rewrite after epoch `epoch` was written
 * with (attempts, end, owner) (see the layout above). */
void ib__kv_prepare_anchor(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                           uint32_t attempts, int64_t end, const char *owner);

/* Rewrites the anchor of every written epoch above 1 among w[0..n) (w[j]
 * for keys[index[j]], or keys[j] when index is NULL), pipelined. Their
 * outcomes are not looked at (a rewrite decides nothing, and the next epoch's writer rewrites it
 * again). Errors as ib__kv_publish. */
ib_status ib__kv_refresh_anchors(kv_recorder *k, const kv_write *w, size_t n,
                                 const ib_marker_key *keys, const size_t *index, ib_error *err);

/* Writes done markers for keys[i] where want[i] (NULL = all), marked at
 * `ts` with fps[i] (NULL or 0: none) unless marked already (a marker over
 * a tombstone after a forget is written over the tombstone). */
ib_status ib__kv_mark_keys(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                           const uint64_t *fps, size_t n, int64_t ts, ib_error *err);

/* ib__kv_mark_keys that also sends extra[0..nextra) (anchor writes) in
 * the first round; their outcomes are not looked at. */
ib_status ib__kv_mark_keys_with(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                                const uint64_t *fps, size_t n, int64_t ts, const kv_write *extra,
                                size_t nextra, ib_error *err);

#endif
