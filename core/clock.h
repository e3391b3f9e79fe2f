/* SPDX-License-Identifier: Apache-2.0 */
/* The project's clocks, in one place.
 *
 * Three clocks with three jobs, each named for what it measures:
 *   realtime   unix ms: what a user reads (marker times, event times, logs);
 *              it may step, so never use it for durations
 *   monotonic  ms since an arbitrary point: durations, timeouts, back-off
 *   boottime   ms since the kernel booted, suspend included: leases shared
 *              between processes of one host (it never steps and every
 *              process of one kernel reads the same value)
 * Every function is thread-safe and cannot fail on Linux. */
#ifndef IB_CLOCK_H
#define IB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Wall clock in unix milliseconds. */
int64_t ib_clock_realtime_ms(void);

/* Monotonic clock in milliseconds. */
int64_t ib_clock_monotonic_ms(void);

/* Monotonic clock in nanoseconds, for measuring short durations. */
int64_t ib_clock_monotonic_ns(void);

/* CLOCK_BOOTTIME in milliseconds. */
int64_t ib_clock_boottime_ms(void);

/* The CLOCK_MONOTONIC instant `ms` (>= 0) from now, for
 * pthread_cond_timedwait on a condition variable whose clock was set to
 * CLOCK_MONOTONIC. */
struct timespec ib_clock_monotonic_deadline(int64_t ms);

#endif
