/* Dead-lettering: moving a message that can never succeed to the
 * dead-letter subject without losing it.
 *
 * The message is published to the dead-letter subject with its original
 * bytes untouched, the original's own headers (except Nats-Msg-Id,
 * Nats-Expected-*, Nats-Rollup and Nats-TTL, which JetStream would act on
 * when the dead letter is published, and any Ibus-* ones), and headers
 * that give the reason and where it came from:
 *   Ibus-Reason          decode | invalid-id | max-deliver | rejected
 *   Ibus-Error           a one-line description (never payload bytes)
 *   Ibus-Subject         the subject it was published on
 *   Ibus-Stream          the stream it was read from
 *   Ibus-Consumer        the durable consumer that read it
 *   Ibus-Stream-Seq      its stream sequence
 *   Ibus-Delivery-Count  the delivery on which it was dead-lettered
 *   Ibus-Event-Id, Ibus-Event-Type   when the event could be decoded
 * Only once JetStream acknowledges that publish is the original terminated
 * (+TERM). If the publish fails (no stream captures the subject, timeout,
 * disconnection) the original is nak'ed with a delay and comes back later:
 * nothing is lost. The publish carries Nats-Msg-Id
 * "<stream>:<durable>:<seq>", so a repeat after a lost +TERM is dropped by
 * the dead-letter stream's duplicate window, while two durables that
 * dead-letter the same message into one stream both keep theirs. */
#ifndef IB_DEADLETTER_H
#define IB_DEADLETTER_H

#include <stdint.h>

#include <nats/nats.h>

#include "error.h"

typedef struct ib_dead_letter_info {
    const char *reason; /* required */
    const char *detail; /* may be NULL */
    const char *stream; /* required */
    const char *consumer;
    uint64_t stream_seq;
    uint64_t delivery_count;
    const char *event_id;   /* may be NULL */
    const char *event_type; /* may be NULL */
} ib_dead_letter_info;

/* Publishes `msg`'s bytes to `subject` and, once acknowledged, terminates
 * `msg`; on failure naks it with `retry_delay_ms` and returns the error
 * (IB_ERR_NATS). `msg` stays owned by the caller. */
ib_status ib_dead_letter(natsConnection *nc, jsCtx *js, const char *subject, natsMsg *msg,
                         const ib_dead_letter_info *info, int64_t retry_delay_ms,
                         int64_t publish_timeout_ms, ib_error *err);

#endif
