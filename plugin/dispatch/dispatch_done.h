/* SPDX-License-Identifier: Apache-2.0 */
/* The completion queue of a batch (private to the dispatch part): how the
 * threads that are not the run thread tell it something, in the manner of
 * libuv's threadpool ("workers run work, the loop runs done") and
 * uv_async_send.
 *
 * Who owns what:
 *  - The run thread (dispatch_run.c) owns the queue's life: it opens it
 *    for a batch, sized for the batch's calls, takes what was posted
 *    (ib__doneq_wait), and closes it when the batch ends. It alone writes
 *    run items; what it reads here are copies.
 *  - A worker posts, for each call it runs, that the call started and what
 *    it returned (ib__doneq_post). The queue holds two messages per call,
 *    so a post never allocates and never waits for room.
 *  - Any other thread (the host's control thread) posts requests: renew
 *    the batch's leases, make its finished marks durable
 *    (ib__doneq_request). Requests are flags, so several ask once. The
 *    run thread leaves what it did for them here (ib__doneq_answer_*),
 *    and the requester takes it at its next call (ib__doneq_take_*).
 * One mutex guards everything, held for a few copies; nobody holds it
 * across a store write or a handler call. */
#ifndef IB_DISPATCH_DONE_H
#define IB_DISPATCH_DONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch_note.h"
#include "error.h"

typedef struct ib__doneq ib__doneq;

/* What a message says. */
enum ib__done_kind {
    IB__DONE_START = 1, /* the call of work entry `work` started at `at_ms` */
    IB__DONE_CALL = 2,  /* the call of work entry `work` is over: `result`... */
};

/* One message from a worker. Copied in and out. */
typedef struct ib__done {
    unsigned char kind;   /* enum ib__done_kind */
    unsigned char result; /* CALL: the item's new result (dispatch_run.c's enum) */
    size_t work;          /* the batch's work entry */
    int64_t at_ms;        /* START: monotonic ms the call started (never 0) */
    int64_t lease_end_ms; /* CALL: boot-clock end of the lease the worker renewed
                             before the call; 0: it renewed none */
    double seconds;       /* CALL: the handler's run time */
    ib__dnote note;       /* CALL: what the handler added to its verdict */
} ib__done;

/* Requests (bits). */
#define IB__DONE_RENEW 1u /* renew the leases of the batch's live claims */
#define IB__DONE_FLUSH 2u /* commit the pending marks now */

/* A closed, empty queue. Errors: IB_ERR_NOMEM, IB_ERR_IO (a mutex or a
 * condition could not be made). Freed with ib__doneq_free (NULL: no-op). */
ib_status ib__doneq_create(ib__doneq **out, ib_error *err);
void ib__doneq_free(ib__doneq *q);

/* Run thread, while the queue is closed: makes room for a batch of
 * `calls` calls (two messages each). False when out of memory. */
bool ib__doneq_reserve(ib__doneq *q, size_t calls);

/* Run thread: opens the queue for the batch it reserved room for;
 * requests are taken from now on. */
void ib__doneq_open(ib__doneq *q);

/* Run thread: closes the queue; messages and requests not taken are
 * dropped (the batch is over), answers are kept for their takers. */
void ib__doneq_close(ib__doneq *q);

/* A worker: posts `m` (copied) and wakes the run thread. */
void ib__doneq_post(ib__doneq *q, const ib__done *m);

/* Any thread: asks the run thread for `what` (IB__DONE_* bits) and
 * returns at once; false when the queue is closed (no batch to ask). */
bool ib__doneq_request(ib__doneq *q, unsigned what);

/* Whoever serves the batch's requests (the run thread, or the stand-in
 * while the run thread is inside a handler call): takes (and clears) the
 * requests made so far; 0: none. Takes no lock. */
unsigned ib__doneq_take_requests(ib__doneq *q);

/* What the stand-in calls to serve the requests (dispatch_run.c's
 * stand_in): it takes them (ib__doneq_take_requests) only when it may,
 * and returns at once otherwise. */
typedef void (*ib__doneq_serve_fn)(void *ctx);

/* Starts the stand-in: a thread, its signals blocked, that sleeps until a
 * request is made while the run thread is aside (inside a handler call of
 * its own, between ib__doneq_step_aside and ib__doneq_come_back), then
 * calls serve(ctx). So a renewal or a flush asked for during a long call
 * is done while it runs, and the asker never waits for the store.
 * Stopped and joined by ib__doneq_free. Errors: IB_ERR_IO. */
ib_status ib__doneq_start_stand_in(ib__doneq *q, ib__doneq_serve_fn serve, void *ctx,
                                   ib_error *err);

/* Run thread: it is going into a handler call of its own; requests made
 * from now on (and any not taken yet) wake the stand-in. */
void ib__doneq_step_aside(ib__doneq *q);

/* Run thread: back from that call; requests wake it again. Neither this
 * nor ib__doneq_step_aside takes the queue's lock unless a request waits:
 * they run around every call the run thread makes. */
void ib__doneq_come_back(ib__doneq *q);

/* Run thread: waits until a message is posted, a request is made, or the
 * monotonic clock reaches `deadline_ms` (INT64_MAX: no deadline). Takes
 * the requests made so far into *requests (0: none) and returns true with
 * the oldest message in *out, or false when there was none. */
bool ib__doneq_wait(ib__doneq *q, ib__done *out, unsigned *requests, int64_t deadline_ms);

/* Run thread: adds what a renewal did (leases renewed, claims found lost)
 * or, with st != IB_OK, keeps its error (`e`) for the requester. */
void ib__doneq_answer_renew(ib__doneq *q, size_t extended, size_t lost, ib_status st,
                            const ib_error *e);
/* Run thread: adds the marks a flush wrote, or keeps its error. */
void ib__doneq_answer_flush(ib__doneq *q, size_t marked, ib_status st, const ib_error *e);

/* Requester: takes (and clears) what the renewals did since the last
 * take; returns the error of one that failed meanwhile, in `err`. */
ib_status ib__doneq_take_renew(ib__doneq *q, size_t *extended, size_t *lost, ib_error *err);
/* Requester: the same for flushes. */
ib_status ib__doneq_take_flush(ib__doneq *q, size_t *marked, ib_error *err);

#endif
