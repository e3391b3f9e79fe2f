/* SPDX-License-Identifier: Apache-2.0 */
/* libinfinity-bus: the idempotent consumer as a library (installed).
 *
 * For a program with its own consumer loop (another bus, an HTTP webhook
 * receiver, a cron job) that wants each event handled once per consumer,
 * without `ibus run`:
 *
 *   ib_recorder *r;
 *   ib_recorder_open(&r, "sqlite:/var/lib/app/processed.db", NULL, &err);
 *   ...for each event:
 *   char id[IB_EVENT_ID_SIZE];
 *   if (ib_event_id_normalise(id, raw_id, raw_len, false, &err) != IB_OK)
 *       ...refuse the event: it cannot be deduplicated...
 *   ib_idempotent_result res;
 *   ib_idempotent_call(r, &res, "orders", id, handle, ctx, NULL, &err);
 *   ...act on res.outcome (see ib_idempotent_outcome)...
 *   ib_recorder_close(r);
 *
 * Build with `pkg-config --cflags --libs infinity-bus` or CMake's
 * find_package(InfinityBus) and the target InfinityBus::idempotency.
 * Every symbol of the library starts with ib_; this header and the two it
 * includes are the whole public API. */
#ifndef INFINITY_BUS_IDEMPOTENCY_H
#define INFINITY_BUS_IDEMPOTENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infinity_bus/recorder.h>
#include <infinity_bus/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for a normalised event id: 32 lowercase hex digits and the NUL. */
#define IB_EVENT_ID_SIZE 33

/* Checks an event id and writes its normalised form (what recorders take)
 * into `out`. Accepted: a UUID as 32 hex digits in any case, or in the
 * canonical 36-character dashed form; versions 4 (random) and 8 (what
 * ib_event_id_derive makes) unless `any_version` (any version, e.g. uuid7
 * ids), and always the RFC 4122 variant. `in` is `len` raw
 * bytes and need not be NUL-terminated (an embedded NUL is refused).
 * Errors: IB_ERR_INVALID_ID with the reason ("event id: UUID version not
 * accepted"; the id itself is not quoted); `out` is then "". */
ib_status ib_event_id_normalise(char out[IB_EVENT_ID_SIZE], const char *in, size_t len,
                                bool any_version, ib_error *err);

/* The namespace `ibus publish --key` derives ids in (a uuid4 chosen once
 * for infinity-bus; never changes). */
#define IB_EVENT_ID_NAMESPACE "0cbcfddbcfef40be81d1dd8a7cee166f"

/* Derives the event id of a key that is not a UUID (a webhook's "evt_..."
 * id, an order number), so every retry of the same key gets the same id
 * and is deduplicated. The id is a UUID version 8 (RFC 9562) made the way
 * its name-based example is: the first 16 bytes of
 *     SHA-256(namespace as 16 bytes || key bytes)
 * with the version nibble set to 8 and the variant bits to 10. It depends
 * on nothing else, so it is the same in every release and in any language
 * (Python: h = hashlib.sha256(uuid.UUID(ns).bytes + key).digest()[:16],
 * then h[6] = h[6] & 0x0f | 0x80 and h[8] = h[8] & 0x3f | 0x80).
 * `namespace_id` is a UUID in any form ib_event_id_normalise accepts, of
 * any version: pick one per producer or kind of key (or use
 * IB_EVENT_ID_NAMESPACE) so equal keys of different sources do not meet.
 * `key` is `len` bytes, any bytes, len may be 0. Writes 32 lowercase hex
 * into `out`. Consumers accept these ids by default (`ibus run`, and
 * ib_event_id_normalise without any_version).
 * Errors: IB_ERR_INVALID_ARG for a NULL `out` or a NULL `key` with len > 0,
 * IB_ERR_INVALID_ID for a namespace that is not a UUID; `out` is then "". */
ib_status ib_event_id_derive(char out[IB_EVENT_ID_SIZE], const char *namespace_id, const void *key,
                             size_t len, ib_error *err);

/* The handler ib_idempotent_call() runs: IB_OK when the event was handled
 * (its effects are done and should never be repeated), anything else when
 * it failed and may be retried. It may fill `err` (never NULL here) with
 * the reason; the caller of ib_idempotent_call() then gets that message.
 * `ctx` is the caller's, passed through. */
typedef ib_status (*ib_idempotent_fn)(void *ctx, ib_error *err);

/* Options of ib_idempotent_call(); zero-initialise, then set what you need.
 * A NULL options pointer, or size 0, means all defaults. */
typedef struct ib_idempotent_options {
    size_t size;           /* sizeof(ib_idempotent_options) */
    const char *owner;     /* claim owner token, BORROWED, at most IB_OWNER_MAX bytes; NULL =
                              a fresh token per call, which is what keeps two threads of one
                              process apart as well as two processes. Calls that pass
                              the same token are one holder: they do not exclude each
                              other (a retry may take over its own claim at once) */
    int64_t lease_ms;      /* how long the claim keeps other callers out while the handler
                              runs; 0 = 30000. A handler that runs longer may be run again
                              by another caller, and its own mark is then refused
                              (IB_IDEMPOTENT_LEASE_LOST) */
    uint32_t max_attempts; /* handler attempts allowed per event, counted by the
                              recorder; 0 = no limit. Only a recorder with durable
                              attempts (sqlite:, see ib_recorder_has_durable_attempts)
                              keeps the count across a failed attempt: memory: forgets
                              it when the claim is released, so there the limit only
                              stops callers that crash mid-handler */
    bool probe_holders;    /* take over at once a claim whose holder is proven gone
                              (a crashed process on this host) instead of waiting
                              for its lease to end */
} ib_idempotent_options;

/* What ib_idempotent_call() did. The comment says what a consumer loop
 * usually does next with the message. */
typedef enum ib_idempotent_outcome {
    IB_IDEMPOTENT_HANDLED = 0,    /* the handler ran, succeeded, and the event is marked:
                                     acknowledge */
    IB_IDEMPOTENT_DUPLICATE = 1,  /* already processed: the handler was not called;
                                     acknowledge */
    IB_IDEMPOTENT_BUSY = 2,       /* another caller holds the claim now: the handler was
                                     not called; retry after remaining_ms */
    IB_IDEMPOTENT_EXHAUSTED = 3,  /* max_attempts attempts were made already: the handler
                                     was not called; give up (dead-letter) */
    IB_IDEMPOTENT_FAILED = 4,     /* the handler failed; the claim was released so any
                                     caller may retry at once: retry */
    IB_IDEMPOTENT_LEASE_LOST = 5, /* the handler succeeded, but its lease ended and another
                                     caller claimed the event before the mark: not marked,
                                     the other caller's run decides; retry later */
    IB_IDEMPOTENT_ERROR = 6,      /* a bad argument or the recorder failed: see the
                                     returned status; retry later */
} ib_idempotent_outcome;

typedef struct ib_idempotent_result {
    ib_idempotent_outcome outcome;
    bool handler_ran;     /* the handler was called (HANDLED, FAILED, LEASE_LOST, and
                             ERROR when the mark failed after a successful handler:
                             its effects happened, the event is not marked, and it will
                             be handled again once the lease ends) */
    uint32_t attempts;    /* attempts counted for the event, this one included when the
                             handler ran; 0 when the recorder does not count them */
    int64_t remaining_ms; /* BUSY: how long the holder's lease still runs (0 = unknown) */
} ib_idempotent_result;

/* Handles one event for one consumer: claims (consumer, event_id) in `r`
 * for the options' owner and lease, calls `fn(ctx, err)` only when the
 * claim was acquired, then marks the event processed if fn succeeded
 * (fenced by the owner: a mark over a caller that took the claim over is
 * refused) or releases the claim if it failed. Across every caller that
 * shares the recorder, fn runs again for an event only after a run that
 * failed, crashed, or outlived its lease. `event_id` must be normalised
 * (ib_event_id_normalise). `*res` is always filled, whatever the return
 * value (res NULL: IB_ERR_INVALID_ARG).
 *
 * Returns IB_OK when the call reached a verdict (HANDLED, DUPLICATE, BUSY,
 * EXHAUSTED, LEASE_LOST); for FAILED, fn's status and message (or
 * "handler failed: <status>" when fn left `err` empty); for ERROR,
 * IB_ERR_INVALID_ARG for a bad argument or option, or the recorder's
 * status and message. All strings are BORROWED for the duration of the
 * call. Thread-safe as the recorder is; fn runs on the calling thread. */
ib_status ib_idempotent_call(ib_recorder *r, ib_idempotent_result *res, const char *consumer,
                             const char *event_id, ib_idempotent_fn fn, void *ctx,
                             const ib_idempotent_options *options, ib_error *err);

#ifdef __cplusplus
}
#endif

#endif
