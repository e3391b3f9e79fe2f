/* Internals of the kv: recorder, shared by kv.c (the recorder calls),
 * kv_io.c (key names, single reads, pipelined conditional writes),
 * kv_read.c (pipelined reads through the stream leader, the epoch search)
 * and kv_bucket.c (connection, bucket binding, admin walks).
 *
 * Layout of the bucket, per (consumer, event id); <c> is the consumer in
 * lowercase hex, so that no consumer name can break a key:
 *   d.<c>.<id>        done marker; value: unix ms when marked, then, when
 *                     the mark had one, " <fingerprint>" in decimal. Readers
 *                     parse the number first and stop at the space, so
 *                     values of either form read in builds of either age
 *   c.<c>.<id>.<n>    claim epoch n = 1, 2, ...; value: "<attempts> <lease
 *                     end, unix ms> <owner>" (owner "" = released)
 * Every write is a Create (expect no message, or expect the tombstone's
 * sequence after a forget), the one conditional write that is safe on a
 * replicated bucket of nats-server 2.9; claim keys are never deleted. */
#ifndef IB_KV_INTERNAL_H
#define IB_KV_INTERNAL_H

#include <pthread.h>

#include <nats/nats.h>

#include "recorder_internal.h"

/* "$KV.<bucket>.c.<hex consumer>.<id>.<n>" fits. */
#define KV_SUBJECT_MAX 1024
/* "<attempts> <end> <owner>" fits. */
#define KV_VALUE_MAX (IB_OWNER_MAX + 48)
/* How many times a conditional write is tried again after an unknown
 * outcome (timeout) or a lost race re-read. */
#define KV_RETRIES 4

typedef struct kv_recorder {
    ib_recorder base;
    natsConnection *nc;
    bool own_nc; /* made from url=; closed with the recorder */
    jsCtx *js;   /* reads and admin calls; thread-safe */
    kvStore *kv;
    int64_t wait_ms;
    char bucket[IB__KV_BUCKET_MAX + 1];
    char stream[IB__KV_BUCKET_MAX + 4]; /* KV_<bucket> */
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
    kv_result result;
    natsStatus st;
    natsMsg *inflight; /* the message while its ack is awaited */
    unsigned tries;    /* times sent */
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

static inline kv_recorder *kv_of(ib_recorder *r)
{
    return (kv_recorder *)r;
}

/* "d.<hex>.<id>" or "c.<hex>.<id>.<n>" (n > 0) under "$KV.<bucket>.". */
void ib__kv_subject(const kv_recorder *k, char *out, char type, const ib_marker_key *key,
                    uint32_t n);

/* IB_ERR_RECORDER "recorder kv:<bucket>: <what>: <nats reason>". */
ib_status ib__kv_fail(const kv_recorder *k, ib_error *err, natsStatus st, const char *what);

/* Reads the last message of `subject` from the stream leader (never a
 * possibly stale follower). */
ib_status ib__kv_read_last(kv_recorder *k, kv_read *out, const char *subject, ib_error *err);

/* Publishes every write of `w` with its expectation, pipelined, and waits
 * for every answer. A write whose answer did not come in time is sent
 * again, up to KV_RETRIES times; when a retry finds the key taken, its
 * value is read back and, if it is ours, counts as written (our earlier
 * attempt was stored). Errors only for the connection as a whole; each
 * write's own outcome is in its `result`. */
ib_status ib__kv_publish(kv_recorder *k, kv_write *w, size_t n, ib_error *err);

/* Reads the last message of each of `n` subjects through the leader,
 * all requests in flight at once (kv_read.c). */
ib_status ib__kv_read_many(kv_recorder *k, kv_read *out, const char (*subjects)[KV_SUBJECT_MAX],
                           size_t n, ib_error *err);

/* Reads the done marker and the highest claim epoch of `key`; the batch
 * form reads every key's in the same few pipelined rounds. */
ib_status ib__kv_read_head(kv_recorder *k, kv_head *h, const ib_marker_key *key, ib_error *err);
ib_status ib__kv_read_heads(kv_recorder *k, kv_head *h, const ib_marker_key *keys, size_t n,
                            ib_error *err);

/* Fills `w` with a Create of claim epoch `h->epoch + 1`. */
void ib__kv_prepare_epoch(kv_recorder *k, kv_write *w, const ib_marker_key *key, const kv_head *h,
                          uint32_t attempts, int64_t end, const char *owner);

/* Writes done markers for keys[i] where want[i] (NULL = all), marked at
 * `ts` with fps[i] (NULL or 0: none) unless marked already (a marker over
 * a tombstone after a forget is written over the tombstone). */
ib_status ib__kv_mark_keys(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                           const uint64_t *fps, size_t n, int64_t ts, ib_error *err);

/* Connection and bucket: see kv_bucket.c. */
ib_status ib__kv_connect(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err);
ib_status ib__kv_bind(kv_recorder *k, const ib__recorder_config *cfg, ib_error *err);
void ib__kv_disconnect(kv_recorder *k);
ib_status ib__kv_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err);
/* ib_recorder_attempt_stats: a walk over every key, reading the highest
 * epoch of each id that is not done. */
ib_status ib__kv_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                               ib_error *err);
ib_status ib__kv_list(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err);

#endif
