/* SPDX-License-Identifier: Apache-2.0 */
/* A fixed pool of worker threads that runs one parallel loop at a time
 * (private to the dispatch part).
 *
 * The dispatch core hands it the handler calls of one batch (with
 * concurrency 1, one call at a time), adds the calls of deliveries it
 * takes in while the batch runs, and waits until all have returned; there
 * is no queue across batches, so the pool never holds work the caller
 * does not wait for. */
#ifndef IB_DISPATCH_POOL_H
#define IB_DISPATCH_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct ib__pool ib__pool;

/* One unit of work: called once per index. */
typedef void (*ib__pool_fn)(void *ctx, size_t index);

/* Starts `threads` (>= 1) workers with every signal blocked. `*out` is freed
 * with ib__pool_free(). Errors: IB_ERR_NOMEM, IB_ERR_IO (thread creation). */
ib_status ib__pool_create(ib__pool **out, unsigned threads, ib_error *err);

/* Stops and joins the workers. Must not race with ib__pool_run(). NULL is a
 * no-op. */
void ib__pool_free(ib__pool *p);

/* Calls fn(ctx, i) for every i in [0, n) on the workers, in any order and
 * concurrently, and returns once every call has returned. Calls are
 * serialised by the caller (one loop at a time per pool). */
void ib__pool_run(ib__pool *p, ib__pool_fn fn, void *ctx, size_t n);

/* Starts the loop of ib__pool_run() and returns at once: the caller
 * learns of each call's end its own way (the dispatch core's completion
 * queue, dispatch_done.h) and ends the loop with ib__pool_finish() before
 * it starts another. A worker that finds every index handed out sleeps
 * until the loop grows (ib__pool_extend) or ends. n == 0 starts nothing. */
void ib__pool_start(ib__pool *p, ib__pool_fn fn, void *ctx, size_t n);

/* Grows the loop ib__pool_start() began to indices [0, n), from the
 * caller's thread: idle workers wake and take the new ones, with the same
 * fn and ctx. Whatever fn reads for them must be written before this
 * call. A smaller n, or no loop running, changes nothing. */
void ib__pool_extend(ib__pool *p, size_t n);

/* Closes the loop ib__pool_start() began (it grows no more) and waits
 * until every worker has left it (at once when none runs). The loop must
 * not be held (ib__pool_hold): a held worker would never leave it. */
void ib__pool_finish(ib__pool *p);

/* Holds the loop (`hold` true) or lets it go on (false); from the caller's
 * thread while the loop runs (between ib__pool_start and ib__pool_finish).
 * While held, a worker that finishes a call
 * starts no other: it sleeps until the hold ends (no polling). Calls under
 * way run on. The caller must end a hold it started before the loop can
 * return. The dispatch core holds the loop while a commit fails, so no
 * further handler starts while marks of finished ones are not durable. */
void ib__pool_hold(ib__pool *p, bool hold);

#endif
