/* SPDX-License-Identifier: Apache-2.0 */
#include "clock.h"

static int64_t read_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ib_clock_realtime_ms(void)
{
    return read_ms(CLOCK_REALTIME);
}

int64_t ib_clock_monotonic_ms(void)
{
    return read_ms(CLOCK_MONOTONIC);
}

int64_t ib_clock_boottime_ms(void)
{
    return read_ms(CLOCK_BOOTTIME);
}

int64_t ib_clock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec ib_clock_monotonic_deadline(int64_t ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}
