/* SPDX-License-Identifier: Apache-2.0 */
/* A partitioned consumer's keys in order across batches (host_order.c):
 * a later event of a key waits while an earlier one is out for a retry,
 * other keys and partitions go on, a settled event frees the key, a
 * partition that changes owner is forgotten, and a key stops waiting for
 * an event that does not come back in time. */
#include "ib_test.h"

#include <time.h>

#include "host_internal.h"

static void later_events_wait_for_an_earlier_one(void **state)
{
    (void)state;
    ib_host_order *o = ib__host_order_new(60000);
    assert_non_null(o);
    assert_false(ib__host_order_must_wait(o, 3, "acct-1", 10)); /* nothing waits */
    ib__host_order_note(o, 3, "acct-1", 10, true);              /* event 10 nak'ed */
    assert_true(ib__host_order_must_wait(o, 3, "acct-1", 12));
    ib__host_order_note(o, 3, "acct-1", 12, true);              /* 12 nak'ed in turn */
    assert_false(ib__host_order_must_wait(o, 3, "acct-2", 13)); /* another key */
    assert_false(ib__host_order_must_wait(o, 4, "acct-1", 14)); /* another partition */
    assert_true(ib__host_order_must_wait(o, 3, "acct-1", 15));
    /* 12 back before 10: it still waits */
    assert_true(ib__host_order_must_wait(o, 3, "acct-1", 12));
    /* 10 back: in flight, then acked; 12 is next and then nothing waits */
    assert_false(ib__host_order_must_wait(o, 3, "acct-1", 10));
    ib__host_order_note(o, 3, "acct-1", 10, false);
    assert_true(ib__host_order_must_wait(o, 3, "acct-1", 15));
    assert_false(ib__host_order_must_wait(o, 3, "acct-1", 12));
    assert_false(ib__host_order_must_wait(o, 3, "acct-1", 15));
    ib__host_order_note(o, 3, "acct-1", 12, false); /* settled: nothing left */
    assert_false(ib__host_order_must_wait(o, 3, "acct-1", 16));

    /* a dead letter settles too; a partition handed over is forgotten */
    ib__host_order_note(o, 5, "acct-9", 30, true);
    ib__host_order_note(o, 6, "acct-9", 31, true);
    ib__host_order_forget(o, 5);
    assert_false(ib__host_order_must_wait(o, 5, "acct-9", 40));
    assert_true(ib__host_order_must_wait(o, 6, "acct-9", 40));
    ib__host_order_note(o, 6, "acct-9", 31, false);
    assert_false(ib__host_order_must_wait(o, 6, "acct-9", 40));
    ib__host_order_free(o);
    ib__host_order_free(NULL);
}

static void a_key_stops_waiting_after_the_limit(void **state)
{
    (void)state;
    ib_host_order *o = ib__host_order_new(20);
    ib__host_order_note(o, 0, "k", 5, true);
    assert_true(ib__host_order_must_wait(o, 0, "k", 6));
    struct timespec ts = {0, 40 * 1000000L};
    nanosleep(&ts, NULL);
    assert_false(ib__host_order_must_wait(o, 0, "k", 6)); /* 5 never came back */
    assert_false(ib__host_order_must_wait(o, 0, "k", 7));
    ib__host_order_free(o);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(later_events_wait_for_an_earlier_one),
    cmocka_unit_test(a_key_stops_waiting_after_the_limit),
};

IB_TEST_MAIN(tests)
