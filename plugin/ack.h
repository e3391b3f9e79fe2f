/* Acknowledging JetStream messages over core NATS.
 *
 * The puller receives messages on a plain subscription, so nats.c's
 * natsMsg_Ack family (which needs a JetStream subscription) does not apply;
 * these publish the JetStream ack protocol to the message's reply subject.
 * Acks are fire-and-forget like nats.c's natsMsg_Ack: a lost ack means a
 * redelivery, which the recorder turns into a dropped duplicate. Flush the
 * connection before exit so the last acks are not left in a buffer.
 * Thread-safe (nats.c publishes are). */
#ifndef IB_ACK_H
#define IB_ACK_H

#include <stdint.h>

#include <nats/nats.h>

#include "error.h"

/* "+ACK": done. */
ib_status ib_ack(natsConnection *nc, natsMsg *msg, ib_error *err);

/* "-NAK": redeliver after `delay_ms` (0 = at once). A plain nak ignores the
 * consumer's BackOff, hence the explicit delay. */
ib_status ib_nak(natsConnection *nc, natsMsg *msg, int64_t delay_ms, ib_error *err);

/* "+TERM": never redeliver (after a successful dead-letter publish). */
ib_status ib_term(natsConnection *nc, natsMsg *msg, ib_error *err);

/* "+WPI": still working; restarts the AckWait timer. */
ib_status ib_in_progress(natsConnection *nc, natsMsg *msg, ib_error *err);

#endif
