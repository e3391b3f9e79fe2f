/* SPDX-License-Identifier: Apache-2.0 */
/* Pieces of the rolling-restart chaos case (chaos.c, fleet_roll): a
 * publisher that keeps a steady rate through a cluster's restarts, a
 * watcher that records every stretch of time in which the handlers'
 * effect file did not grow, and one step of a rolling restart that
 * measures the cluster's own leader election. */
#ifndef IB_CHAOS_ROLL_H
#define IB_CHAOS_ROLL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "it_cluster.h"

/* Publishes ids[0..cap) in order, one every interval_us, each as an event
 * of `type` with `payload` and Nats-Msg-Id = its id, sent again until
 * JetStream acknowledges it (the stream's duplicate window drops a copy
 * whose ack was lost). After one event in ten it also publishes an earlier
 * id again under another Nats-Msg-Id: a duplicate the consumer must drop.
 * After a stall it goes on at the same rate, without a burst. */
typedef struct chaos_pub {
    jsCtx *js;        /* borrowed; thread-safe, shared with the test */
    char *const *ids; /* borrowed for the thread's life */
    size_t cap;
    const char *type;    /* borrowed */
    const char *payload; /* borrowed */
    long interval_us;
    uint64_t rng;
    atomic_bool stop;
    atomic_size_t acked;       /* ids[0..acked) are acknowledged */
    atomic_size_t duplicates;  /* duplicates acknowledged */
    atomic_size_t retries;     /* publishes sent again after no ack */
    atomic_llong longest_wait; /* ms, longest time one event took to be acked */
    pthread_t thread;
    bool started;
} chaos_pub;

/* Starts the thread; the fields above the atomics must be set. False when
 * the thread cannot be made. */
bool chaos_pub_start(chaos_pub *p);

/* Stops the thread after the event in flight is acknowledged; returns how
 * many ids (a prefix of ids) were. */
size_t chaos_pub_stop(chaos_pub *p);

/* A stretch of at least CHAOS_GAP_MIN_MS in which nothing was handled
 * while an acknowledged event waited to be: from the later of the last
 * handled event and the first acknowledgement not handled yet, to the
 * next handled event (it_now_ms). */
#define CHAOS_GAP_MIN_MS 250
#define CHAOS_MAX_GAPS 256
typedef struct chaos_gap {
    int64_t start, end;
} chaos_gap;

/* Counts the lines of the effect file `path` every few ms from start to
 * stop, against `offered` (the publisher's acknowledged events, one line
 * each when handled): stretches without a new line count as gaps only
 * while fewer lines than events were seen, so a stall of the publisher
 * itself (its node gone, its ack lost) is not charged to the consumers.
 * `raw_longest` is the longest stretch without a new line at all, from
 * the first line on, whatever the cause. One still open at stop is
 * closed there. */
typedef struct chaos_gaps {
    char path[4096];
    const atomic_size_t *offered; /* borrowed */
    atomic_bool stop;
    chaos_gap gaps[CHAOS_MAX_GAPS];
    size_t n;            /* read after chaos_gaps_stop */
    int64_t raw_longest; /* ms */
    pthread_t thread;
    bool started;
} chaos_gaps;

bool chaos_gaps_start(chaos_gaps *g, const char *path, const atomic_size_t *offered);
void chaos_gaps_stop(chaos_gaps *g);

/* One step of a rolling restart. The Raft groups whose election counts
 * are the first `elect` streams given and one durable consumer of the
 * first stream (in that order in group_ms); every stream given is waited
 * for until its replicas are current. */
#define CHAOS_ROLL_GROUPS 4
typedef struct chaos_roll_step {
    int node;
    int sig;                          /* SIGTERM or SIGKILL */
    int stop_status;                  /* the node's exit status */
    int64_t stopped_at;               /* it_now_ms when the signal was sent */
    long down_ms;                     /* from the signal to the restart */
    long election_ms;                 /* from the signal until every group the node led had
                                         a leader on a running node; 0 when it led none; -1
                                         when no leader came within the step's deadline */
    long group_ms[CHAOS_ROLL_GROUPS]; /* the same per group; 0: not led */
    int led;                          /* how many of the groups the node led */
    bool current;                     /* every stream had all replicas current afterwards */
} chaos_roll_step;

/* Stops node `s->node` with `s->sig`, restarts it `s->down_ms` after the
 * signal whether or not the election has ended (a StatefulSet does not
 * wait for one), measures the election meanwhile (polling each group's
 * INFO, which answers or times out within 1 s), and then waits until
 * every stream has all three replicas current again, as a rolling update
 * waits for a pod to be ready. Fills in the rest of `s`. At most
 * CHAOS_ROLL_GROUPS - 1 streams count for the election. */
void chaos_roll_node(chaos_roll_step *s, it_cluster *c, const char *const *streams, int nstreams,
                     int elect, const char *durable);

#endif
