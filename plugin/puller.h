/* Pulling messages from a JetStream durable pull consumer in batches.
 *
 * Debian's nats.c 3.4.1 overflows a heap buffer in natsSubscription_Fetch /
 * _FetchRequest when messages left over from an expired pull exceed half of
 * the next batch (fixed upstream in 3.9.0). We therefore do not use Fetch:
 * the puller subscribes to "<inbox>.*" with a plain core-NATS subscription
 * and publishes pull requests ({"batch":N,"expires":ns}) to
 * $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>, request number k with the
 * reply subject "<inbox>.<k>". Every message that reaches the inbox is
 * handed out, whichever request it answers, so leftovers from an expired
 * request are simply the next messages; nothing is copied into a
 * fixed-size array sized by the request.
 * Status messages (404 no messages, 408 request expired, 409 conflicts, 100
 * heartbeats) are never handed out. They arrive on their request's reply
 * subject, so a late status of an earlier request is told apart and does
 * not end the request in flight. (Messages keep their stream subject, so
 * only statuses can be attributed this way.)
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

typedef struct ib_puller_options {
    const char *stream;
    const char *durable;
    size_t batch;       /* messages per pull request, 1..4096 */
    int64_t expires_ms; /* lifetime of one pull request on the server; 0 = 1000 */
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
 * messages that still arrive for the request in flight, until it ends (a
 * status message or its expiry) or `wait_ms` passes; then unsubscribes.
 * The caller naks what it gets back, so those messages are redelivered to
 * another process at once instead of after AckWait. */
ib_status ib_puller_stop(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms);

/* Counters for metrics and tests. */
typedef struct ib_puller_stats {
    uint64_t requests;  /* pull requests sent */
    uint64_t messages;  /* messages handed out */
    uint64_t statuses;  /* status messages seen */
    uint64_t leftovers; /* messages taken after the request in flight had ended locally */
} ib_puller_stats;
void ib_puller_stats_get(const ib_puller *p, ib_puller_stats *out);

/* Unsubscribes and frees. NULL is a no-op. */
void ib_puller_free(ib_puller *p);

#endif
