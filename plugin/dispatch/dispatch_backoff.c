/* SPDX-License-Identifier: Apache-2.0 */
/* NAK back-off with jitter for the dispatch core. */
#include "dispatch.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* One splitmix64 sequence for the whole process: a single atomic add per
 * draw, so it is thread-safe without a lock, and the seed differs per process
 * so hosts that failed together spread their retries apart. Not for anything
 * that needs unpredictability. */
static _Atomic uint64_t jitter_state;

#define SPLITMIX_GAMMA 0x9e3779b97f4a7c15ull

static uint64_t jitter_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    s ^= (uint64_t)getpid() << 32;
    s ^= (uint64_t)(uintptr_t)&ts; /* stack address: ASLR adds a few bits */
    return s | 1u;                 /* never 0, which means "unseeded" */
}

static uint64_t jitter_next(void)
{
    uint64_t s = atomic_load_explicit(&jitter_state, memory_order_relaxed);
    if (s == 0) {
        /* Losing the race is fine: the winner's seed is used. */
        atomic_compare_exchange_strong(&jitter_state, &s, jitter_seed());
    }
    uint64_t z = atomic_fetch_add_explicit(&jitter_state, SPLITMIX_GAMMA, memory_order_relaxed) +
                 SPLITMIX_GAMMA;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The back-off's maximum as the options give it, defaults filled in. */
static int64_t max_delay_ms(const ib_dispatch_options *o, int64_t *base_out)
{
    int64_t base = o != NULL ? o->nak_base_delay_ms : 0;
    int64_t max = o != NULL ? o->nak_max_delay_ms : 0;
    if (base <= 0)
        base = IB_DISPATCH_DEFAULT_NAK_BASE_MS;
    if (max <= 0)
        max = IB_DISPATCH_DEFAULT_NAK_MAX_MS;
    if (max < base)
        max = base;
    *base_out = base;
    return max;
}

int64_t ib_dispatch_retry_after_ms(const ib_dispatch_options *o, int64_t asked_ms)
{
    int64_t base;
    int64_t max = max_delay_ms(o, &base);
    return asked_ms < 1 ? 1 : asked_ms > max ? max : asked_ms;
}

int64_t ib_dispatch_backoff_ms(const ib_dispatch_options *o, uint64_t delivery_count)
{
    int64_t base;
    int64_t max = max_delay_ms(o, &base);
    if (delivery_count == 0)
        delivery_count = 1;

    /* Double without overflow: stop as soon as the cap is reached. */
    int64_t raw = base;
    for (uint64_t k = 1; k < delivery_count && raw < max; k++)
        raw = raw > max / 2 ? max : raw * 2;
    if (raw > max)
        raw = max;

    double u = (double)(jitter_next() >> 11) * 0x1.0p-53; /* [0, 1) */
    int64_t delay = (int64_t)((double)raw * (0.8 + 0.4 * u) + 0.5);
    if (delay > max)
        delay = max;
    if (delay < 1)
        delay = 1;
    return delay;
}

int64_t ib_dispatch_busy_delay_ms(const ib_dispatch_options *o, int64_t remaining_ms)
{
    int64_t floor =
        o != NULL && o->busy_delay_ms > 0 ? o->busy_delay_ms : IB_DISPATCH_DEFAULT_BUSY_MS;
    int64_t base = remaining_ms > floor ? remaining_ms : floor;
    /* up to +20%, and at least a few ms, so copies that waited for the same
     * lease do not all come back in the same instant */
    int64_t spread = base / 5 > 10 ? base / 5 : 10;
    return base + (int64_t)(jitter_next() % (uint64_t)(spread + 1));
}
