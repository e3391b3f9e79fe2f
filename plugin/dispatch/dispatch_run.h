/* SPDX-License-Identifier: Apache-2.0 */
/* The batch flow of the dispatch part (private to it): the object that runs
 * batches of deliveries through the rules dispatch.h documents.
 *
 * dispatch.c holds one per table and forwards ib_dispatch_run() and the
 * lease calls to it. The run owns everything a batch needs between calls
 * (its reusable scratch, the worker pool, the claims in flight, the
 * recorder's health) and reads the handler table without changing it; it
 * knows nothing of the struct that holds it. */
#ifndef IB_DISPATCH_RUN_H
#define IB_DISPATCH_RUN_H

#include <stddef.h>

#include "dispatch.h"
#include "dispatch_table.h"

typedef struct ib__drun ib__drun;

/* Creates a run over `recorder` and `table` (both BORROWED; they must
 * outlive it). `opts` is copied; it must be complete (every default filled
 * in, a non-empty owner) and its strings are BORROWED for the run's life.
 * The worker threads (max(opts->concurrency, 1)) start here. `*out` is freed
 * with ib__drun_free(). Errors: IB_ERR_NOMEM, IB_ERR_IO (a mutex or a
 * thread could not be created). */
ib_status ib__drun_create(ib__drun **out, ib_recorder *recorder, const ib__dtable *table,
                          const ib_dispatch_options *opts, ib_error *err);

/* Joins the worker threads and frees the run. Must not race with
 * ib__drun_batch(). NULL is a no-op. */
void ib__drun_free(ib__drun *r);

/* ib_dispatch_run_more() once its table is known to exist and `more`
 * (NULL: none) is sound: checks the deliveries, then runs the batch; the
 * same contract and errors. Calls are serialised per run. */
ib_status ib__drun_batch(ib__drun *r, ib_delivery *deliveries, size_t n,
                         const ib_dispatch_more *more, size_t *ran, ib_bus_proxy *bus,
                         ib_error *err);

/* ib_dispatch_recorder_seconds() of this run. */
double ib__drun_recorder_seconds(const ib__drun *r);

/* ib_dispatch_extend_leases() of this run; safe from any thread: while a
 * batch runs, a request its run thread carries out (never a store write
 * on the caller's thread). */
ib_status ib__drun_extend_leases(ib__drun *r, size_t *extended, size_t *lost, ib_error *err);

/* ib_dispatch_flush_marks() of this run; safe from any thread, a request
 * like ib__drun_extend_leases(). */
ib_status ib__drun_flush_marks(ib__drun *r, size_t *marked, ib_error *err);

/* ib_dispatch_overdue(), ib_dispatch_circuit_state() and
 * ib_dispatch_hold_ms() of this run; safe from any thread. */
size_t ib__drun_overdue(ib__drun *r, int64_t age_ms,
                        void (*visit)(void *ctx, const ib_overdue_call *call), void *ctx);
ib_circuit_state ib__drun_circuit_state(const ib__drun *r, size_t handler);
int64_t ib__drun_hold_ms(const ib__drun *r);

#endif
