/* SPDX-License-Identifier: Apache-2.0 */
/* The state of a batch run, shared by the files of the batch flow and by
 * nothing else: dispatch_run.c (the essay, who owns what, the steps),
 * dispatch_scratch.c (the buffers reused between batches),
 * dispatch_run_circuits.c (what the handlers' circuits hear and decide)
 * and dispatch_outcome.c (what a delivery's items add up to). Every field
 * is the run thread's unless its comment says otherwise; the essay at the
 * top of dispatch_run.c says which threads read what. */
#ifndef IB_DISPATCH_RUN_STATE_H
#define IB_DISPATCH_RUN_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "dispatch_circuit.h"
#include "dispatch_done.h"
#include "dispatch_note.h"
#include "dispatch_pool.h"
#include "dispatch_run.h"

/* What became of one (delivery, handler) pair. */
enum item_result {
    R_CLAIM = 0,    /* to be claimed */
    R_FOLLOW,       /* same (consumer, id) as an earlier item: follows its result */
    R_POISON_CHECK, /* last delivery without durable attempts: claimed, never run */
    R_POISON_DONE,  /* poison rule: already marked */
    R_POISON_OPEN,  /* poison rule: attempts used up, not marked: dead-letter */
    R_DONE,         /* claim: already processed */
    R_BUSY,         /* claim: held by another owner */
    R_CLAIM_FAILED, /* claim: the call failed */
    R_RUN,          /* claim: acquired, handler to run */
    R_OK,           /* handler said OK, mark pending */
    R_RETRY,
    R_REJECT,
    R_MARKED,     /* OK and marked */
    R_LOST,       /* OK, but another owner took the claim over: not marked */
    R_CONFLICT,   /* marked (or met earlier in the batch) with another fingerprint */
    R_SKIPPED,    /* acquired, not run: its delivery conflicts; released */
    R_TXN_FAILED, /* acquired, not run: its transaction could not start; released */
    R_WAIT,       /* not claimed, not run: its handler's circuit is open */
    R_HELD_BACK,  /* acquired, not run: its circuit opened during the batch;
                     released, attempts ended, waits like R_WAIT */
    R_UNRUN,      /* acquired, not run: the claim was lost before the call could
                     start (taken over, or its lease ran out by our clock) */
    R_ORDER_HELD, /* acquired, not run: an earlier delivery of its order key in
                     the batch did not succeed; released, comes back after it */
    R_COUNT
};

/* A call does not start on a claim whose lease ends within this share of
 * a lease (lease_ms / LEASE_MARGIN_DIVISOR): another owner may take it
 * over at its end, and kv: holders judge leases by their own clocks. The
 * host renews leases every half lease, so a running batch never comes
 * this close unless the process was paused. */
#define LEASE_MARGIN_DIVISOR 8

typedef struct run_item {
    const ib__dhandler *h;
    size_t delivery;
    size_t leader;     /* the item whose result an R_FOLLOW item takes */
    size_t work;       /* its index in s->work when its handler runs */
    double seconds;    /* handler run time */
    int64_t busy_ms;   /* R_BUSY: the holder's remaining lease */
    uint32_t attempts; /* attempts counted, this one included (durable kinds) */
    unsigned char result;
    bool finished;             /* its call is over (or will not be made): the run
                                  thread took its completion */
    bool probe;                /* its handler's circuit is probing with this call */
    bool held;                 /* R_RETRY while its circuit is open: waits, attempts ended */
    bool recorded;             /* its call was told to its circuit */
    bool taken_over;           /* claimed from a holder that never released it: that holder
                                  may have died in the call, so this call may not return
                                  either: it runs alone, its attempt counted first */
    bool counted;              /* its attempt is counted in the recorder already */
    atomic_bool lost;          /* a renewal found its claim taken over (renew_leases);
                                  written by the run thread, read by the worker */
    _Atomic int64_t lease_end; /* boot-clock ms its lease ends by our reckoning;
                                  written by the run thread, read by the worker */
    ib__dnote note;            /* what the handler added to its verdict (ABI 1.3) */
} run_item;

/* Buffers reused from one batch to the next so the hot path does not
 * allocate; only touched by the run thread, under run_mu (lease_keys and
 * started are also read by ib__drun_overdue under lease_mu). */
typedef struct run_scratch {
    /* per delivery, capacity dcap */
    size_t *first;               /* index of the delivery's first item; n + 1 entries */
    ib__dhandler *const **lists; /* handlers subscribed to its type */
    bool *settled;
    uint64_t *fps; /* the event's fingerprint */
    size_t dcap;
    /* per item, capacity icap */
    run_item *items;
    ib_marker_key *keys;
    uint64_t *key_fps; /* the fingerprint of each key's event */
    size_t *key_items; /* the item each key belongs to */
    ib_claim_info *infos;
    bool *flags;               /* per key: marked */
    size_t *work;              /* items whose handler runs */
    ib_marker_key *lease_keys; /* claims held while handlers run (see lease_mu) */
    bool *lease_live;          /* lease_keys[w] still to be renewed */
    _Atomic int64_t *started;  /* per work entry: monotonic ms its call started; 0 = not
                                  running (read by ib__drun_overdue under lease_mu) */
    ib_marker_key *renew_keys; /* the live claims a renewal writes (renew_leases) */
    bool *renew_held;
    size_t *renew_work;
    ib_marker_key *pend_keys; /* finished OK handlers whose marks are not committed */
    uint64_t *pend_fps;
    size_t *pend_items;
    ib__txn_result *txn_out; /* per transactional item */
    size_t icap;
    /* open-addressing set of (handler, id) pairs seen in the batch */
    uint32_t *seen;
    size_t seen_cap;
} run_scratch;

struct ib__drun {
    ib_recorder *recorder;    /* BORROWED */
    const ib__dtable *table;  /* BORROWED; not changed while batches run */
    ib_dispatch_options opts; /* complete; opts.owner BORROWED */
    ib__pool *pool;           /* `concurrency` workers when it is > 1, else NULL: the
                                 run thread makes the calls itself (call_inline) */
    ib__doneq *done;          /* what workers and the control thread post to the
                                 run thread (dispatch_done.h) */

    /* Serialises the batches: the pool runs one loop at a time and the
     * scratch buffers are shared. */
    pthread_mutex_t run_mu;
    run_scratch scratch;

    /* Whoever holds serve_mu serves the batch's requests (renewals,
     * flushes): the run thread, which holds it for the whole batch except
     * while it is inside a handler call of its own (call_inline); then
     * `calling` is its run and an asker stands in for it (stand_in).
     * NULL between batches and whenever the run thread holds it. */
    pthread_mutex_t serve_mu;
    struct run_ctx *calling;
    double last_recorder_seconds; /* of the last batch (under run_mu) */

    /* The calls of the batch in flight, published so another thread can
     * look for calls that overran (ib__drun_overdue) without taking
     * run_mu, which the running batch holds. Read only, under lease_mu. */
    pthread_mutex_t lease_mu;
    const ib_marker_key *lease_keys;
    _Atomic int64_t *lease_started;
    run_item *lease_items;
    const size_t *lease_work;
    size_t lease_n;

    /* The handlers' circuits (dispatch_circuit.h), made at the first batch
     * once the handlers are known; NULL while circuits are off or before.
     * Published with release: other threads read states and hold times. */
    _Atomic(ib__circuits *) circuits;

    /* Per handler: how long its last call made alone ran, in ms (run
     * thread only; NULL until the first batch, or without memory). A
     * handler whose last call outlasted the commit interval gets the
     * pending marks committed before its next call, so a kill during a
     * slow call never repeats them. */
    int64_t *last_call_ms;
    size_t nhandlers;

    /* Recorder health as the run thread last saw it, and when a failed
     * commit may be tried again (run thread only). */
    bool recorder_down;
    int64_t commit_retry_at_ms;
    int64_t commit_backoff_ms;
};

/* One ib_dispatch_run() call. */
typedef struct run_ctx {
    ib__drun *r;
    run_scratch *s;
    ib_delivery *dl;
    size_t n;
    run_item *items;
    size_t total;
    size_t nwork;    /* s->work[0..nwork): plain handlers, for the pool */
    size_t ntxn;     /* s->work[nwork..nwork+ntxn): transactional handlers */
    size_t npend;    /* entries in s->pend_keys */
    size_t ndone;    /* calls whose completion the run thread took */
    size_t solo;     /* the work entry run_solo runs (a call made alone) */
    size_t want;     /* run_parallel: the count of completions it waits for */
    size_t seen_cap; /* entries of s->seen this run uses (a power of two) */
    /* Where the batch grows from while its last calls run (grow); NULL:
     * it does not (concurrency 1, a transactional handler, or the caller
     * gave none). */
    const ib_dispatch_more *more;
    bool parallel;    /* the batch's calls run on the pool, else on the run thread */
    bool durable;     /* the recorder counts attempts across crashes */
    ib__circuits *cs; /* NULL: circuits are off */
    int64_t now_ms;   /* monotonic ms at the start of the run (circuit decisions) */
    /* While a commit has failed: no further handler starts until the
     * pending marks are durable, so a recorder outage does not let a whole
     * batch of finished, unmarked handlers pile up for a kill to repeat.
     * The run thread holds the pool meanwhile (ib__pool_hold: its workers
     * sleep), or starts no call alone, and retries the commit when its
     * back-off ends. Run thread only. */
    bool commit_failing;
    /* What the commits written by the stand-in did (flush_marks), for
     * the run thread to tell and settle once back (come_back): the first
     * failure, kept even when a later commit works, so the health
     * callback hears both. */
    bool aside_failed, aside_worked;
    ib_status aside_st;
    ib_error aside_err;
    int64_t last_commit_ms;
    double recorder_seconds;
    ib_bus_proxy *bus;
    ib_error *err; /* first recorder error goes here */
} run_ctx;

/* Ids are 32 hex digits; uuid7 ids share their leading timestamp digits
 * within a batch, so every digit takes part. */
static inline uint64_t ib__run_pair_hash(const char *id, size_t handler)
{
    uint64_t w[4];
    memcpy(w, id, sizeof(w));
    uint64_t h = (uint64_t)handler * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++) {
        h ^= w[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static inline const char *ib__run_item_id(const run_ctx *c, const run_item *it)
{
    return c->dl[it->delivery].event->id;
}

/* Grows the scratch buffers to hold `n` deliveries and `total` items; on
 * false (out of memory) they are as they were. */
bool ib__run_scratch_reserve(run_scratch *s, size_t n, size_t total);

/* Frees the scratch buffers and zeroes `s`. */
void ib__run_scratch_free(run_scratch *s);

/* For every open handler whose probe is due, one of its waiting items
 * becomes the probe: claimed and run like any other. */
void ib__run_choose_probes(run_ctx *c);

/* One call seen finished on its own: told to its circuit, then judged
 * (one that opens holds the batch's later calls of that handler back). */
void ib__run_circuit_record(run_ctx *c, run_item *it);

/* At the end of the batch: tells each circuit the calls it has not heard
 * of, lets each judge, and holds every RETRY whose circuit is open, its
 * attempts ended in the recorder. Returns that call's status (its error
 * in `e`), for the caller to report. */
ib_status ib__run_circuits_update(run_ctx *c, ib_error *e);

/* Fills delivery i's outputs: its counters, its handlers' time, the
 * observer's reports and its outcome. */
void ib__run_decide(run_ctx *c, size_t i);

#endif
