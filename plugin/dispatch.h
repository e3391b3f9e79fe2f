/* The idempotent core (spec section 3), independent of NATS.
 *
 * A dispatch table maps event types to handlers, each with its own consumer
 * identity. ib_dispatch_run() takes a batch of deliveries and, for each event
 * and each handler subscribed to its type: claims (consumer, id) in the
 * recorder (one batch call), drops it if already processed, otherwise runs
 * the handler, marks it on OK (one batch call, the group commit), releases
 * the claim on RETRY or REJECT; then decides the message's outcome:
 *
 *   every handler done or already marked     -> ACK
 *   any REJECT                               -> DEAD_LETTER "rejected"
 *   any RETRY, or a claim busy elsewhere     -> NAK with back-off delay
 *   no handler for the type                  -> ACK, counted unhandled
 *   last allowed delivery, some handler not
 *   yet done (the poison rule)               -> DEAD_LETTER "max-deliver",
 *                                               handlers not run
 *
 * Marks are made durable before ib_dispatch_run() returns, so the caller may
 * ack as soon as it has the outcomes. */
#ifndef IB_DISPATCH_H
#define IB_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "event.h"
#include "infinity_bus/plugin.h"
#include "recorder.h"

typedef struct ib_dispatch ib_dispatch;

typedef struct ib_dispatch_options {
    const char *owner;          /* claim owner token, unique per process; copied */
    int64_t lease_ms;           /* claim lease; should match the consumer's AckWait */
    uint64_t max_deliver;       /* the poison rule fires on this delivery; 0 = never */
    int64_t nak_base_delay_ms;  /* first retry delay; doubles per delivery */
    int64_t nak_max_delay_ms;   /* cap of the back-off */
    unsigned concurrency;       /* handler threads; 0 or 1 = run on the caller's thread */
} ib_dispatch_options;

/* One handler as registered. Strings are copied; `handle`/`state` are
 * BORROWED and must outlive the dispatch table. */
typedef struct ib_dispatch_handler {
    const char *consumer; /* consumer identity, e.g. "orders/audit/audit" */
    const char *name;     /* for logs: "plugin/handler" */
    const char *const *event_types; /* NULL-terminated */
    ib_handle_fn handle;
    void *state;
} ib_dispatch_handler;

typedef enum ib_outcome {
    IB_OUTCOME_ACK = 0,
    IB_OUTCOME_NAK = 1,
    IB_OUTCOME_DEAD_LETTER = 2,
} ib_outcome;

/* Per-delivery counters filled by ib_dispatch_run(). */
typedef struct ib_delivery_counts {
    unsigned handled;    /* handlers run with OK (and marked) */
    unsigned duplicates; /* handlers skipped: already marked */
    unsigned retried;    /* handlers that returned RETRY */
    unsigned rejected;   /* handlers that returned REJECT */
    unsigned busy;       /* handlers skipped: claim held by another process */
    unsigned mark_failed;/* handlers whose mark could not be written */
    bool unhandled;      /* no handler subscribes to the type */
} ib_delivery_counts;

/* One delivered message. The caller fills the inputs; ib_dispatch_run()
 * fills the outputs. */
typedef struct ib_delivery {
    /* inputs */
    const ib_event *event;   /* BORROWED; must be a decoded, valid event */
    const char *subject;     /* BORROWED; may be NULL */
    uint64_t stream_seq;
    uint64_t delivery_count; /* 1 on the first delivery */
    /* outputs */
    ib_outcome outcome;
    const char *dead_letter_reason; /* static string when outcome is DEAD_LETTER */
    int64_t nak_delay_ms;           /* when outcome is NAK */
    ib_delivery_counts counts;
    double handle_seconds;          /* wall time spent in this delivery's handlers */
} ib_delivery;

/* Creates an empty dispatch table over `recorder` (BORROWED; must outlive
 * it). `*out` is freed with ib_dispatch_free(). */
ib_status ib_dispatch_create(ib_dispatch **out, ib_recorder *recorder,
                             const ib_dispatch_options *options, ib_error *err);
void ib_dispatch_free(ib_dispatch *d);

/* Registers a handler. Two handlers with the same consumer identity are
 * refused (IB_ERR_CONFIG): they would share markers and one would never run. */
ib_status ib_dispatch_add(ib_dispatch *d, const ib_dispatch_handler *handler, ib_error *err);

/* Number of handlers subscribed to `type`. */
size_t ib_dispatch_count_for(const ib_dispatch *d, const char *type);

/* Runs a batch of deliveries through the idempotent flow. `bus` is handed to
 * handlers (may be NULL when nothing publishes). Returns IB_OK when every
 * delivery got an outcome (recorder trouble shows as NAK outcomes, never as
 * a lost event); an error only for misuse. */
ib_status ib_dispatch_run(ib_dispatch *d, ib_delivery *deliveries, size_t n, ib_bus_proxy *bus,
                          ib_error *err);

/* The back-off delay for a RETRY seen on delivery `delivery_count`. */
int64_t ib_dispatch_backoff_ms(const ib_dispatch_options *o, uint64_t delivery_count);

#endif
