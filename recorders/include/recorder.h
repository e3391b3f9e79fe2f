/* The recorders' in-tree header: the public API (<infinity_bus/recorder.h>)
 * plus what only the kinds and the rest of infinity-bus see: the vtable
 * every kind fills, the base struct every kind embeds, and ib__ helpers.
 *
 * The two calls of the seed protocol (is_processed, mark_processed) are
 * required in the vtable; batches, claims with a lease and the admin calls
 * are optional, and the ib_recorder_* wrappers fall back to the required
 * calls when a kind does not offer them, so a recorder with only the two
 * calls still works. The wrappers check every key, so the kinds' ops may
 * rely on valid keys (see core/uuid.h for the id form). */
#ifndef IB_RECORDER_H
#define IB_RECORDER_H

#include <infinity_bus/recorder.h>

#include "error.h"

/* Features a kind declares in ib_recorder_ops.features. */
#define IB_RECORDER_DURABLE_ATTEMPTS 0x1u /* attempt counts survive a crash of the caller */
#define IB_RECORDER_HOST_LOCAL 0x2u       /* only ever shared by processes of one host */

typedef struct ib_recorder_ops {
    size_t size;      /* sizeof(ib_recorder_ops) as the kind was built */
    const char *kind; /* "memory", "sqlite", "kv" */

    /* Required. */
    ib_status (*is_processed)(ib_recorder *r, bool *processed, const char *consumer,
                              const char *event_id, ib_error *err);
    ib_status (*mark_processed)(ib_recorder *r, const char *consumer, const char *event_id,
                                ib_error *err);
    void (*close)(ib_recorder *r);

    /* Optional: NULL (or past `size`) when not offered. Batches are atomic
     * where the kind can make them so: sqlite runs each in one transaction;
     * memory runs it under one lock, and a mark batch cut short by an
     * allocation failure keeps the marks made before it (marking is
     * idempotent, so the caller simply retries). */
    ib_status (*check_batch)(ib_recorder *r, bool *processed, const ib_marker_key *keys, size_t n,
                             ib_error *err);
    ib_status (*mark_batch)(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err);
    ib_status (*claim)(ib_recorder *r, ib_claim_state *state, const char *consumer,
                       const char *event_id, const char *owner, int64_t lease_ms, ib_error *err);
    ib_status (*claim_batch)(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                             size_t n, const char *owner, int64_t lease_ms, ib_error *err);
    ib_status (*release)(ib_recorder *r, const char *consumer, const char *event_id,
                         const char *owner, ib_error *err);
    ib_status (*release_batch)(ib_recorder *r, const ib_marker_key *keys, size_t n,
                               const char *owner, ib_error *err);

    /* Optional admin calls (ibus markers). */
    ib_status (*lookup)(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                        const char *event_id, ib_error *err);
    ib_status (*forget)(ib_recorder *r, bool *existed, const char *consumer, const char *event_id,
                        ib_error *err);
    ib_status (*prune)(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err);
    ib_status (*list)(ib_recorder *r, const char *consumer, size_t limit, ib_marker_visit_fn visit,
                      void *ctx, ib_error *err);
    ib_status (*stats)(ib_recorder *r, ib_recorder_stats *stats, ib_error *err);

    /* Optional, appended: attempts, fenced leases and fenced marks (see the
     * ib_recorder_* wrappers of the same names). */
    unsigned features; /* IB_RECORDER_* bits */
    ib_status (*acquire_batch)(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                               size_t n, const ib_claim_request *req, ib_error *err);
    ib_status (*renew_batch)(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                             const char *owner, int64_t lease_ms, ib_error *err);
    ib_status (*mark_owned_batch)(ib_recorder *r, bool *marked, const ib_marker_key *keys, size_t n,
                                  const char *owner, ib_error *err);
} ib_recorder_ops;

/* Every kind embeds this as its first member. */
struct ib_recorder {
    const ib_recorder_ops *ops;
    int64_t (*now_ms)(
        void); /* wall clock in unix ms (ib_clock_realtime_ms); replaceable for tests */
    /* Clock of leases, in ms: CLOCK_BOOTTIME by default (never steps, shared
     * by every process of one kernel); the injected now_ms when a test
     * replaced that. */
    int64_t (*lease_now_ms)(void);
};

/* True when opening `uri` needs the caller's NATS connection
 * (ib_recorder_options.nats_connection): a kv: URI without its own url=.
 * A URI that does not parse gives false, so its error comes from
 * ib_recorder_open(). For a host that connects after opening local
 * things. */
bool ib__recorder_uri_needs_connection(const char *uri);

/* Validates a key the way every kind must: non-empty consumer up to
 * IB_CONSUMER_MAX bytes, normalised id. IB_ERR_INVALID_ARG with a message
 * saying which part is wrong (the id itself is not quoted). Internal. */
ib_status ib__recorder_check_key(const char *consumer, const char *event_id, ib_error *err);

#endif
