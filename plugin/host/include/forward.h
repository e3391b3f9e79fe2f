/* SPDX-License-Identifier: Apache-2.0 */
/* `ibus forward`: moves the events of a stream that is not partitioned
 * to the partition subjects of a partitioned consumer
 * (docs/partitions.md, "Forwarding a stream"), for producers that cannot
 * change.
 *
 * It pulls the source stream through a durable pull consumer, decodes
 * each message as `ibus run` does (the event decoder, the id normalised
 * and checked against the accepted versions), and publishes it to
 * "<subject>.<p>.<key>" (core/partition.h), the key being the event's id
 * unless the producer named a business key in a token of the subject it
 * published on. Each forward carries the Nats-Msg-Id
 * "ibus-fwd-<stream>-<stream seq>" of its source message (jetstream.h,
 * ib_forward_publish), and the source message is acked only once the
 * target stream acknowledged the forward: a forward tried again after a
 * crash or a lost ack is stored once within the target's duplicate
 * window. What cannot be decoded, or has an invalid id or key, is
 * dead-lettered as `ibus run` would; a forward that fails is nak'ed and
 * tried again after the retry delay.
 *
 * Before it moves anything it refuses (exit 2) a target that no stream
 * captures whole, and a target stream that is the source stream unless
 * the durable's filter leaves the partition subjects out (it would read
 * its own forwards again); it warns when the target's duplicate window
 * is shorter than the time a message can come back. SIGTERM and SIGINT
 * stop the pulling; the batch in hand is finished, the rest handed back,
 * and a summary line goes to stderr. */
#ifndef IB_FORWARD_H
#define IB_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "jetstream.h"

typedef struct ib_forward_config {
    ib_nats_config nats;
    const char *stream;  /* the source stream */
    const char *durable; /* its durable pull consumer */
    const char *filter;  /* the durable's filter when creating it; NULL = the whole stream */
    bool create;         /* create the durable and the dead-letter stream when missing */
    const char *subject; /* base of the partition subjects */
    uint32_t partitions; /* N, 1..IB_PARTITIONS_MAX */
    /* 1-based token of the source subject that names the business key; 0 =
     * none: the key is the event's id (so too when the subject is shorter) */
    int64_t key_token;
    const char *dead_letter; /* NULL = "ibus.dlq.<durable>" */
    int64_t stream_replicas; /* of the dead-letter stream `create` makes */
    int64_t ack_wait_ms;     /* when creating the durable */
    int64_t max_ack_pending; /* when creating the durable */
    int64_t batch;
    int64_t pull_expires_ms;
    int64_t retry_delay_ms;     /* a failed forward comes back after this */
    int64_t publish_timeout_ms; /* wait for the target's ack */
    int64_t idle_exit_ms;       /* exit 0 after this long without messages; 0 = never */
    int64_t connect_timeout_ms; /* exit 1 when the first connect takes this long; 0 = never */
    unsigned uuid_versions;     /* event id versions accepted (IB_ID_VERSION bits); 0 = 4 and 8 */
    int64_t max_event_bytes;
} ib_forward_config;

/* What a run did, for its summary line. */
typedef struct ib_forward_totals {
    uint64_t received;      /* deliveries read */
    uint64_t forwarded;     /* acked after the target acknowledged the forward */
    uint64_t already;       /* of those, ones the target had stored before (a repeat) */
    uint64_t dead_lettered; /* undecodable, invalid id or key */
    uint64_t failed;        /* forwards or dead letters that failed: nak'ed to come back */
} ib_forward_totals;

/* Runs the forwarder until SIGTERM or SIGINT (exit 0), --idle-exit (0),
 * a configuration the server refuses or a target it must refuse (2, with
 * an error line saying why), or a runtime failure (1: no connection
 * within the connect timeout, the connection closed for good, a start-up
 * request that keeps failing). Installs the host's signal handler; call
 * from the main thread. Writes the summary line to stderr once it
 * started pulling. */
int ib_forward_run(const ib_forward_config *cfg);

#endif
