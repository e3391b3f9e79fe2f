/* Internals shared by the files of the dispatch core (dispatch.c owns the
 * table, dispatch_run.c the batch flow). Not part of the contract. */
#ifndef IB_DISPATCH_INTERNAL_H
#define IB_DISPATCH_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"
#include "dispatch_pool.h"

/* A registered handler; owned by the table. */
typedef struct ib__dhandler {
    char *consumer;
    char *name;
    ib_handle_fn handle;
    void *state;
    size_t index; /* registration order; with the event id it identifies a
                     (consumer, id) pair, since consumers are unique */
} ib__dhandler;

/* Handlers subscribed to one type, in registration order. */
typedef struct ib__dtype {
    char *type; /* NULL: free slot */
    uint64_t hash;
    ib__dhandler **handlers;
    size_t count;
} ib__dtype;

/* One (delivery, handler) pair of a batch; defined in dispatch_run.c. */
typedef struct ib__ditem ib__ditem;

/* Buffers reused from one batch to the next so the hot path does not
 * allocate; only touched under run_mu (lease_keys/lease_live also under
 * lease_mu). */
typedef struct ib__dscratch {
    /* per delivery, capacity dcap */
    size_t *first;               /* index of the delivery's first item; n + 1 entries */
    ib__dhandler *const **lists; /* handlers subscribed to its type */
    size_t dcap;
    /* per item, capacity icap */
    ib__ditem *items;
    ib_marker_key *keys;
    size_t *key_items; /* the item each key belongs to */
    ib_claim_info *infos;
    bool *flags;               /* per key: marked */
    size_t *work;              /* items whose handler runs */
    ib_marker_key *lease_keys; /* claims held while handlers run (see lease_mu) */
    bool *lease_live;          /* lease_keys[w] still to be renewed */
    ib_marker_key *pend_keys;  /* finished OK handlers whose marks are not committed */
    size_t *pend_items;
    size_t icap;
    bool *settled; /* per delivery (capacity dcap) */
    /* open-addressing set of (handler, id) pairs seen in the batch */
    uint32_t *seen;
    size_t seen_cap;
} ib__dscratch;

struct ib_dispatch {
    ib_recorder *recorder; /* BORROWED */
    ib_dispatch_options opts;
    char *owner;

    ib__dhandler **handlers;
    size_t handler_count, handler_cap;

    ib__dtype *types; /* power-of-two open-addressing table, at most half full */
    size_t type_cap, type_count;

    ib__pool *pool; /* NULL when concurrency <= 1 */

    /* Serialises ib_dispatch_run(): the pool runs one loop at a time and the
     * scratch buffers are shared. */
    pthread_mutex_t run_mu;
    ib__dscratch scratch;
    double last_recorder_seconds; /* of the last run (under run_mu) */

    /* The claims held by the batch in flight while its handlers run, so
     * another thread can extend their leases (ib_dispatch_extend_leases)
     * without taking run_mu, which the running batch holds. */
    pthread_mutex_t lease_mu;
    const ib_marker_key *lease_keys;
    const bool *lease_live;
    size_t lease_n;

    /* Recorder health as the run thread last saw it, and when a failed
     * commit may be tried again (run thread only). */
    bool recorder_down;
    int64_t commit_retry_at_ms;
    int64_t commit_backoff_ms;
};

/* Handlers subscribed to `type` (NULL-terminated string); sets *count. */
ib__dhandler *const *ib__dispatch_lookup(const ib_dispatch *d, const char *type, size_t *count);

/* Frees the scratch buffers (from ib_dispatch_free). */
void ib__dispatch_scratch_free(ib__dscratch *s);

#endif
