/* SPDX-License-Identifier: Apache-2.0 */
/* The worker pool of the dispatch core (dispatch_pool.h): every index runs
 * once, and a held loop starts no call until the hold ends, its workers
 * asleep instead of polling (the dispatch core holds it while a commit
 * fails). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "dispatch_pool.h"
#include "ib_test.h"

#define CALLS 16
#define WORKERS 4
#define GROWN 40 /* the loop grown by extend_while_running */

typedef struct loop {
    ib__pool *pool;
    atomic_int started, finished;
    atomic_int ran[GROWN];
    atomic_bool release_first; /* the calls in flight at the hold may end */
    int ticks;
    int started_at_hold, started_while_held;
    bool hold_done;
} loop;

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A call: counts itself; the first WORKERS calls wait for release_first,
 * so the hold lands while they are under way. */
static void call(void *ctx, size_t i)
{
    loop *l = ctx;
    int n = atomic_fetch_add(&l->started, 1);
    atomic_fetch_add(&l->ran[i], 1);
    while (n < WORKERS && !atomic_load(&l->release_first))
        sleep_ms(1);
    atomic_fetch_add(&l->finished, 1);
}

/* On the caller's thread: once every worker is in a call, holds the loop,
 * lets those calls end, looks at how many calls started while held (none
 * may: the workers sleep), and ends the hold. */
static void tick(void *ctx)
{
    loop *l = ctx;
    l->ticks++;
    if (l->hold_done || atomic_load(&l->started) < WORKERS)
        return;
    ib__pool_hold(l->pool, true);
    l->started_at_hold = atomic_load(&l->started);
    atomic_store(&l->release_first, true);
    while (atomic_load(&l->finished) < l->started_at_hold)
        sleep_ms(1);
    sleep_ms(100); /* room for a call that should not start */
    l->started_while_held = atomic_load(&l->started) - l->started_at_hold;
    ib__pool_hold(l->pool, false);
    l->hold_done = true;
}

static void every_index_runs_once(void **state)
{
    (void)state;
    ib_error e;
    loop l = {0};
    atomic_store(&l.release_first, true);
    assert_int_equal(ib__pool_create(&l.pool, WORKERS, &e), IB_OK);
    ib__pool_run(l.pool, call, &l, CALLS);
    for (int i = 0; i < CALLS; i++)
        assert_int_equal(atomic_load(&l.ran[i]), 1);
    ib__pool_free(l.pool);
}

static void held_loop_starts_nothing_until_released(void **state)
{
    (void)state;
    ib_error e;
    loop l = {0};
    assert_int_equal(ib__pool_create(&l.pool, WORKERS, &e), IB_OK);
    /* the caller's thread looks at the loop while it runs, as the
     * dispatch core's run thread does between two completions */
    ib__pool_start(l.pool, call, &l, CALLS);
    while (!l.hold_done) {
        tick(&l);
        sleep_ms(1);
    }
    ib__pool_finish(l.pool);
    assert_true(l.hold_done);
    assert_int_equal(l.started_at_hold, WORKERS);
    assert_int_equal(l.started_while_held, 0);
    assert_int_equal(atomic_load(&l.finished), CALLS); /* the rest ran once released */
    for (int i = 0; i < CALLS; i++)
        assert_int_equal(atomic_load(&l.ran[i]), 1);
    /* a hold ended leaves the next loop free */
    loop again = {0};
    atomic_store(&again.release_first, true);
    again.pool = l.pool;
    ib__pool_run(l.pool, call, &again, CALLS);
    assert_int_equal(atomic_load(&again.finished), CALLS);
    ib__pool_free(l.pool);
}

/* The loop grows while it runs, after every worker has run out of work
 * and sleeps: each added index runs once, none of the first is run again
 * or skipped (an index taken past the old end would be), and finish
 * returns once the last added call has. */
static void extend_while_running(void **state)
{
    (void)state;
    ib_error e;
    loop l = {0};
    atomic_store(&l.release_first, true);
    assert_int_equal(ib__pool_create(&l.pool, WORKERS, &e), IB_OK);
    ib__pool_start(l.pool, call, &l, CALLS);
    while (atomic_load(&l.finished) < CALLS)
        sleep_ms(1);
    sleep_ms(20); /* the workers look for more and find none */
    ib__pool_extend(l.pool, CALLS + 4);
    ib__pool_extend(l.pool, CALLS + 2); /* smaller: no change */
    while (atomic_load(&l.finished) < CALLS + 4)
        sleep_ms(1);
    ib__pool_extend(l.pool, GROWN);
    ib__pool_finish(l.pool);
    assert_int_equal(atomic_load(&l.finished), GROWN);
    for (int i = 0; i < GROWN; i++)
        assert_int_equal(atomic_load(&l.ran[i]), 1);
    ib__pool_extend(l.pool, GROWN + 1); /* no loop: no change */
    assert_int_equal(atomic_load(&l.started), GROWN);
    ib__pool_free(l.pool);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(extend_while_running),
    cmocka_unit_test(every_index_runs_once),
    cmocka_unit_test(held_loop_starts_nothing_until_released),
};

IB_TEST_MAIN(tests)
