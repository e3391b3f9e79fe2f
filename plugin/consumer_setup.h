/* Binding to (and on request creating) the stream and durable consumer.
 *
 * A durable created by js_PullSubscribe belongs to that subscription and
 * is deleted when it unsubscribes or drains, for every process. We never
 * let nats.c own the durable: it is created explicitly with js_AddConsumer
 * (only with --create) and otherwise looked up by stream and name, so a
 * subscriber's shutdown never deletes a shared durable. */
#ifndef IB_CONSUMER_SETUP_H
#define IB_CONSUMER_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "error.h"

typedef struct ib_consumer_setup {
    const char *stream;
    const char *durable;
    const char *filter_subject;      /* may be NULL: the whole stream */
    bool create;                     /* create what is missing */
    const char *stream_subjects;     /* comma-separated subjects for a new stream */
    const char *dead_letter_subject; /* with create: also ensure a stream captures it */
    int64_t ack_wait_ms;
    int64_t max_deliver;       /* informational: a created consumer is unlimited */
    const int64_t *backoff_ms; /* may be NULL */
    size_t backoff_len;
    int64_t max_ack_pending;
    /* How the host will pull, checked against the consumer's limits, which
     * would otherwise refuse every pull request with a 409: */
    size_t batch;             /* messages per pull request (--batch); 0 = not checked */
    int64_t pull_expires_ms;  /* lifetime of a pull request (--pull-expires); 0 = not checked */
    int64_t waiting_requests; /* pull requests that may wait on the server at once */
} ib_consumer_setup;

/* What the host needs to know of the consumer as the server has it. */
typedef struct ib_consumer_facts {
    int64_t ack_wait_ms;
    int64_t max_deliver; /* -1 or 0 = unlimited */
    uint64_t num_pending;
    uint64_t num_ack_pending;
    bool created; /* this call created the consumer */
    bool exists;  /* ib_consumer_facts_get: false when the server says there is no such
                     consumer (or stream); the other fields are 0 then */
} ib_consumer_facts;

/* Looks the consumer up (creating stream, dead-letter stream and consumer
 * first when `s->create` and they are missing) and reports its facts.
 * Errors: IB_ERR_CONFIG when the consumer does not exist and creation was
 * not asked for, when it is a push consumer or does not use explicit acks,
 * or when its MaxRequestBatch, MaxRequestExpires or MaxWaiting would
 * refuse the pull requests described by `s->batch`, `s->pull_expires_ms`
 * and `s->waiting_requests` (the message names the ibus option and both
 * values); IB_ERR_NATS for server errors. */
ib_status ib_consumer_ensure(ib_consumer_facts *out, jsCtx *js, const ib_consumer_setup *s,
                             ib_error *err);

/* Reads the consumer's current facts (pending counts), for metrics, and
 * whether it still exists. A consumer or stream that is not found is an
 * answer: IB_OK with `out->exists` false. Errors: IB_ERR_NATS when the
 * server cannot be asked (disconnected, timeout): existence unknown. */
ib_status ib_consumer_facts_get(ib_consumer_facts *out, jsCtx *js, const char *stream,
                                const char *durable, ib_error *err);

#endif
