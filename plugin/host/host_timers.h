/* SPDX-License-Identifier: Apache-2.0 */
/* Timers on one loop (host_timers.c), in the shape of Redis's time events:
 * each timer has a deadline and a callback that returns its next delay;
 * the loop sleeps until the nearest deadline or until woken, runs every
 * due timer once, earliest deadline first, and re-arms it. The host's
 * control thread runs one (host_control.c). */
#ifndef IB_HOST_TIMERS_H
#define IB_HOST_TIMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ib_timers ib_timers;

/* A timer's callback: `ctx` is what was given to ib__timers_add, `now_ms`
 * the loop's clock when the pass began. Returns the delay to its next run
 * in ms (0 = at the next pass), counted from the clock when it returns,
 * or IB_TIMER_NOMORE to delete the timer. */
typedef int64_t (*ib_timer_fn)(void *ctx, int64_t now_ms);
#define IB_TIMER_NOMORE (-1)

/* A clock in ms that never goes back; NULL in ib__timers_new is
 * CLOCK_MONOTONIC. Tests pass their own. */
typedef int64_t (*ib_timers_clock_fn)(void *ctx);

/* How many timers one loop holds. */
#define IB_TIMERS_MAX 16

/* Creates a loop with no timers (its wake-up pipe included). Returns 0,
 * or -1 when a pipe or memory could not be had. Free stops nothing: the
 * thread running the loop must have returned; a no-op for NULL. */
int ib__timers_new(ib_timers **out, ib_timers_clock_fn clock, void *clock_ctx);
void ib__timers_free(ib_timers *t);

/* Adds a timer first due `delay_ms` from now. Returns its id (> 0), or -1
 * when IB_TIMERS_MAX are armed. Safe from any thread, also while the loop
 * runs (it is woken to see the new deadline). */
long long ib__timers_add(ib_timers *t, int64_t delay_ms, ib_timer_fn fn, void *ctx);

/* ms from `now_ms` to the nearest deadline: 0 when one is due, -1 when
 * no timer is armed. */
int64_t ib__timers_nearest_ms(ib_timers *t, int64_t now_ms);

/* Runs every timer due at the loop's clock once, earliest deadline first
 * (ties in the order they were added), re-arming each by what it returns.
 * A timer added by a callback waits for the next pass. May be called from
 * a callback (a long step that lets the others run between two of its
 * parts): the running timer is skipped. Returns how many ran. */
size_t ib__timers_run_due(ib_timers *t);

/* One turn of the loop: sleeps until the nearest deadline (for ever when
 * none) or a wake-up, calls `on_wake(ctx)` (may be NULL) when woken, then
 * runs the due timers. Returns how many ran. */
size_t ib__timers_step(ib_timers *t, void (*on_wake)(void *ctx), void *ctx);

/* Turns the loop until ib__timers_quit. */
void ib__timers_run(ib_timers *t, void (*on_wake)(void *ctx), void *ctx);

/* Wakes the loop now. Safe from any thread and from a signal handler (one
 * write() to the pipe whose end ib__timers_wake_fd gives). */
void ib__timers_wake(ib_timers *t);
int ib__timers_wake_fd(const ib_timers *t);

/* Asks ib__timers_run to return once the timer in progress, if any, has;
 * wakes it. Quitting says whether it was asked (a long callback polls it).
 * Safe from any thread. */
void ib__timers_quit(ib_timers *t);
bool ib__timers_quitting(ib_timers *t);

#endif
