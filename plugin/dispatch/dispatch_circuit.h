/* SPDX-License-Identifier: Apache-2.0 */
/* The circuits of the dispatch part (private to it): one per handler, each
 * a failure-rate window and the CLOSED / OPEN / HALF_OPEN states that
 * dispatch.h ("Circuits") documents.
 *
 * A leaf: it knows calls, events (as hashes of their ids) and time, nothing
 * of recorders, deliveries or batches. The batch flow (dispatch_run.c) asks
 * it, on the run thread, whether a handler may run, tells it what each
 * call did as soon as it sees the call finished, then asks it to judge;
 * any thread may read a circuit's state and the hold time. */
#ifndef IB_DISPATCH_CIRCUIT_H
#define IB_DISPATCH_CIRCUIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"

typedef struct ib__circuits ib__circuits;

/* A change of one circuit, for the on_circuit callback; `changed` false
 * when the call changed nothing. */
typedef struct ib__circuit_change {
    bool changed;
    ib_circuit_state from, to;
    char detail[IB_VERDICT_REASON_MAX + 160];
} ib__circuit_change;

/* The circuit options with every default filled in (o->enabled kept). */
ib_circuit_options ib__circuit_options_complete(const ib_circuit_options *o);

/* Circuits for `n` handlers, every one closed with an empty window; `o`
 * must be complete and is copied. NULL when out of memory. Freed with
 * ib__circuits_free() (NULL is a no-op). */
ib__circuits *ib__circuits_create(size_t n, const ib_circuit_options *o);
void ib__circuits_free(ib__circuits *cs);

/* Run thread: whether handler `h` may not run now (open or probing). */
bool ib__circuit_blocks(const ib__circuits *cs, size_t h);

/* Run thread: whether handler `h` is open and its probe is due at `now`
 * (monotonic ms). */
bool ib__circuit_probe_due(const ib__circuits *cs, size_t h, int64_t now);

/* Run thread: whether the event hashed `event` was one of the last few
 * probes of `h` (a probe prefers another event, so one poison event cannot
 * keep every probe failing). */
bool ib__circuit_probed_lately(const ib__circuits *cs, size_t h, uint64_t event);

/* Run thread: the probe of `h` starts on event `event` (OPEN -> HALF_OPEN). */
void ib__circuit_probe_start(ib__circuits *cs, size_t h, uint64_t event, ib__circuit_change *ch);

/* Run thread: a call of `h` on event `event` finished, `failed` or not,
 * and is told at `now`, as soon as it is seen finished: a success as well
 * as a failure, whatever became of its mark. `reason` (may be NULL or "")
 * is what a failure said; the circuit copies it. Only a failure's `event`
 * is ever compared: a success may pass 0. Closed: the call joins the
 * window and nothing is decided until ib__circuit_judge(), so the calls
 * seen finished together all count. Probing: the probe's outcome closes
 * the circuit or opens it again with a longer interval. Open: nothing (a
 * call of the batch that opened it). */
void ib__circuit_record(ib__circuits *cs, size_t h, uint64_t event, bool failed, const char *reason,
                        int64_t now, ib__circuit_change *ch);

/* Run thread: once every call of `h` seen finished so far was recorded, a
 * closed circuit opens at `now` when its window says outage (dispatch.h,
 * "Circuits"); `ch` says why, with the window's counts and the last
 * failure's reason. Costs nothing when, since the last judgement, no
 * failure joined the window and it did not grow to
 * IB_CIRCUIT_RATE_MIN_CALLS calls. */
void ib__circuit_judge(ib__circuits *cs, size_t h, int64_t now, ib__circuit_change *ch);

/* Run thread: the probe of `h` did not run the handler (the event was done
 * already, or held elsewhere): open again, the next batch probes. */
void ib__circuit_probe_missed(ib__circuits *cs, size_t h, int64_t now, ib__circuit_change *ch);

/* Run thread: how long a delivery waiting for `h` should stay away: until
 * its next probe is due (at least 1 ms); 0 when `h` is closed. */
int64_t ib__circuit_wait_ms(const ib__circuits *cs, size_t h, int64_t now);

/* Any thread: the state of `h`; CLOSED past the last handler. */
ib_circuit_state ib__circuit_state(const ib__circuits *cs, size_t h);

/* Any thread: when every circuit is open, the time from `now` until the
 * first probe is due (at least 1); otherwise 0. */
int64_t ib__circuits_hold_ms(const ib__circuits *cs, int64_t now);

#endif
