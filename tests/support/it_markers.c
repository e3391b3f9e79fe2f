/* SPDX-License-Identifier: Apache-2.0 */
/* Markers made by the test itself (it_markers.h). */
#include "it_markers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include <infinity_bus/recorder.h>

static int64_t seed_clock_ms;

static int64_t seed_clock(void)
{
    return seed_clock_ms;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void it_seed_id(char out[33], unsigned group, unsigned i)
{
    snprintf(out, 33, "%08x000040008000%012x", group, i);
}

void it_seed_markers(it_env *e, const char *consumer, unsigned group, unsigned n, int64_t age_ms)
{
    char db[PATH_MAX], uri[PATH_MAX + 8], id[33];
    ib_recorder *r = NULL;
    ib_error err;
    ib_recorder_options ro = {.size = sizeof(ro), .now_ms = seed_clock};
    snprintf(uri, sizeof(uri), "sqlite:%s", it_path(db, e, "markers.db"));
    seed_clock_ms = wall_ms() - age_ms;
    assert_int_equal(ib_recorder_open(&r, uri, &ro, &err), IB_OK);
    for (unsigned i = 0; i < n; i++) {
        it_seed_id(id, group, i);
        assert_int_equal(ib_recorder_mark(r, consumer, id, &err), IB_OK);
    }
    ib_recorder_close(r);
}
