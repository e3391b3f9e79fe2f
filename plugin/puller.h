/* Pulling messages from a JetStream durable pull consumer in batches.
 *
 * Debian's nats.c 3.4.1 overflows a heap buffer in natsSubscription_Fetch /
 * _FetchRequest when messages left over from an expired pull exceed half of
 * the next batch (fixed upstream in 3.9.0). We therefore do not use Fetch:
 * the puller subscribes to "<inbox>.*" with a plain core-NATS subscription
 * (asynchronous, queueing into the puller: natsSubscription_NextMsg would
 * destroy any empty message with a "Status: 503" header) and publishes pull requests
 * ({"batch":N,"expires":ns}) to $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>, request number k with
 * the reply subject "<inbox>.<k>". Every message that reaches the inbox is handed out, whichever
 * request it answers, so leftovers from an expired request are simply the next messages; nothing is
 * copied into a fixed-size array sized by the request. Status messages (404 no messages, 408
 * request expired, 409 conflicts, 100 heartbeats) are never handed out. A status is a message
 * WITHOUT a $JS.ACK reply subject: a delivery that looks like one (an empty body with a Status
 * header, published by anyone) is handed out like any other, so the host can dead-letter it.
 * Statuses arrive on their request's reply subject, so a late status of an earlier request is told
 * apart and does not end the request in flight. (Messages keep their
 * stream subject, so only statuses can be attributed this way.)
 *
 * A refused request (409 such as "Exceeded MaxRequestBatch of 8", or any
 * status other than 100, 404 and 408) is logged with the server's text,
 * at most once per 10 s for each distinct text, and the next request waits
 * 50 ms, doubling up to 5 s, until a message or a normal 404/408 arrives.
 * ib_puller_condition_get() tells the host whether the consumer may be
 * gone.
 *
 * A request ends locally when its batch has arrived, when its status
 * arrives, or at its expiry plus a margin (as long as the expiry, at most
 * 500 ms) in case the status was lost. Messages still queued, or arriving,
 * after that are leftovers: the situation that breaks Fetch, counted in the
 * stats and handed out like any other message.
 *
 * Acks go to each message's reply subject over core NATS (ack.h).
 * Not thread-safe: one thread pulls. */
#ifndef IB_PULLER_H
#define IB_PULLER_H

#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "error.h"

typedef struct ib_puller ib_puller;

/* Lifetime of a pull request when the options give none. */
#define IB_PULLER_DEFAULT_EXPIRES_MS 1000

/* The most pull requests of one puller that can wait on the server at
 * once: the one in flight, and one that ended locally at its deadline but
 * reached the server late (buffered across a reconnect). A consumer's
 * MaxWaiting must leave room for them. */
#define IB_PULLER_MAX_WAITING 2

typedef struct ib_puller_options {
    const char *stream;
    const char *durable;
    size_t batch;       /* messages per pull request, 1..4096 */
    int64_t expires_ms; /* lifetime of one pull request on the server; 0 = default */
    int64_t flush_ms;   /* once a message arrived, wait at most this for more; 0 = 5 */
} ib_puller_options;

/* Subscribes to a new inbox on `nc` (BORROWED; must outlive the puller).
 * `*out` is freed with ib_puller_free(). */
ib_status ib_puller_create(ib_puller **out, natsConnection *nc, const ib_puller_options *options,
                           ib_error *err);

/* Collects up to `max` (<= batch) messages into `msgs`, waiting up to
 * `wait_ms` for the first one and then at most flush_ms for each further
 * one; sends pull requests as needed. `*n` is the count (0 after a quiet
 * wait). The caller owns the messages and destroys them with
 * natsMsg_Destroy after acking. Errors: IB_ERR_NATS when publishing a
 * request fails (the caller waits and retries: the connection may be
 * reconnecting). */
ib_status ib_puller_next(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms,
                         ib_error *err);

/* Sends the next pull request now unless one is still in flight, so the
 * server delivers the next batch while the caller works on the one it
 * holds (ib_puller_next would otherwise send it only when called again).
 * Messages that arrive meanwhile wait in the subscription, where nobody
 * sends +WPI for them: only prefetch when the batch at hand will be done
 * well within AckWait. Errors as ib_puller_next; on error the next call to
 * ib_puller_next sends the request. */
ib_status ib_puller_prefetch(ib_puller *p, ib_error *err);

/* Sends no further request and collects, in `msgs` (up to `max`), the
 * messages still queued or still arriving for the request in flight,
 * until it ends (a status message or its expiry) or `wait_ms` passes.
 * When `*n` < `max` it has unsubscribed: nothing more will come. When
 * `*n` == `max` more may be waiting: call again (with the time left).
 * The caller naks what it gets back, so those messages are redelivered to
 * another process at once instead of after AckWait. */
ib_status ib_puller_stop(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms);

/* What the latest answers said about the consumer. */
typedef enum ib_puller_condition {
    IB_PULLER_OK = 0,        /* messages, or a request that ended normally (404/408) */
    IB_PULLER_REFUSED,       /* the last request was refused (409...); backing off */
    IB_PULLER_CONSUMER_GONE, /* 409 "Consumer Deleted", or 503 (nobody answers the request
                                subject): the consumer may be gone; backing off */
} ib_puller_condition;

/* The condition since the last message or status of a request in flight. */
ib_puller_condition ib_puller_condition_get(const ib_puller *p);

/* Counters for metrics and tests. */
typedef struct ib_puller_stats {
    uint64_t requests;  /* pull requests sent */
    uint64_t messages;  /* messages handed out */
    uint64_t statuses;  /* status messages seen */
    uint64_t leftovers; /* messages taken after the request in flight had ended locally */
    uint64_t refusals;  /* requests the server refused (409 and other errors) */
} ib_puller_stats;
void ib_puller_stats_get(const ib_puller *p, ib_puller_stats *out);

/* Unsubscribes and frees. NULL is a no-op. */
void ib_puller_free(ib_puller *p);

#endif
