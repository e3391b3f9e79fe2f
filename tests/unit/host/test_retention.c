/* SPDX-License-Identifier: Apache-2.0 */
/* The retention floor: how long a marker must outlive its event, from the
 * stream's MaxAge and the consumer's redelivery settings; the unbounded
 * cases; and the message that gives both figures. */
#include "ib_test.h"

#include <stdint.h>
#include <string.h>

#include "host.h"

#define S 1000LL
#define M (60 * S)
#define H (60 * M)

typedef struct floor_case {
    const char *name;
    ib_delivery_window w;
    int64_t horizon, floor;
} floor_case;

static void floor_table(void **state)
{
    (void)state;
    static const floor_case cases[] = {
        /* 4 redeliveries, each after AckWait and the longest nak delay */
        {"defaults",
         {.max_age_ms = H, .ack_wait_ms = 30 * S, .max_deliver = 5, .nak_max_ms = M},
         4 * 90 * S,
         H},
        {"horizon above MaxAge",
         {.max_age_ms = 10 * M, .ack_wait_ms = 30 * S, .max_deliver = 5, .nak_max_ms = M},
         6 * M,
         10 * M},
        /* MaxAge removes the message before the last redelivery could come */
        {"horizon cut by MaxAge",
         {.max_age_ms = 5 * M, .ack_wait_ms = 30 * S, .max_deliver = 5, .nak_max_ms = M},
         6 * M,
         5 * M},
        /* a BackOff step longer than the nak delay takes its place */
        {"backoff",
         {.max_age_ms = M,
          .ack_wait_ms = 30 * S,
          .max_deliver = 3,
          .backoff_max_ms = 10 * M,
          .nak_max_ms = M},
         2 * (30 * S + 10 * M),
         M},
        {"one delivery", {.max_age_ms = H, .ack_wait_ms = 30 * S, .max_deliver = 1}, 0, H},
        /* unbounded without MaxAge; without MaxDeliver MaxAge still bounds it */
        {"no MaxAge",
         {.ack_wait_ms = 30 * S, .max_deliver = 5, .nak_max_ms = M},
         4 * 90 * S,
         IB_HOST_UNBOUNDED},
        {"MaxDeliver -1",
         {.max_age_ms = H, .ack_wait_ms = 30 * S, .max_deliver = -1},
         IB_HOST_UNBOUNDED,
         H},
        {"MaxDeliver 0",
         {.max_age_ms = H, .ack_wait_ms = 30 * S, .max_deliver = 0},
         IB_HOST_UNBOUNDED,
         H},
        /* no consumer named: MaxAge alone */
        {"no consumer", {.max_age_ms = 2 * H, .max_deliver = -1, .no_consumer = true}, 0, 2 * H},
        /* saturates instead of overflowing */
        {"huge",
         {.max_age_ms = H, .ack_wait_ms = INT64_MAX / 2, .max_deliver = 10000, .nak_max_ms = M},
         IB_HOST_UNBOUNDED,
         H},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const floor_case *c = &cases[i];
        int64_t hz = ib_host_redelivery_horizon_ms(&c->w);
        int64_t fl = ib_host_retention_floor_ms(&c->w);
        if (hz != c->horizon || fl != c->floor)
            fail_msg("%s: horizon %lld (want %lld), floor %lld (want %lld)", c->name, (long long)hz,
                     (long long)c->horizon, (long long)fl, (long long)c->floor);
    }
}

static void durations_read_like_options(void **state)
{
    (void)state;
    static const struct {
        int64_t ms;
        const char *want;
    } d[] = {
        {0, "0s"},  {250, "250ms"},   {30 * S, "30s"},  {5 * M + 30 * S, "5m30s"},
        {H, "1h"},  {26 * H, "1d2h"}, {H + 1, "1h1ms"}, {IB_HOST_UNBOUNDED, "unbounded"},
        {-5, "0s"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
        assert_string_equal(ib_host_duration_str(buf, sizeof(buf), d[i].ms), d[i].want);
    /* a short buffer is cut, never overrun */
    char tiny[4];
    ib_host_duration_str(tiny, sizeof(tiny), 5 * M + 30 * S);
    assert_true(strlen(tiny) < sizeof(tiny));
}

static void explanation_gives_both_figures(void **state)
{
    (void)state;
    char buf[512];
    ib_delivery_window w = {
        .max_age_ms = H, .ack_wait_ms = 30 * S, .max_deliver = 4, .nak_max_ms = 80 * S};
    ib_host_retention_explain(buf, sizeof(buf), "--retention", 10 * M, &w, "ORDERS");
    assert_string_equal(buf, "--retention 10m is shorter than the 1h a message can still be "
                             "delivered (stream ORDERS MaxAge 1h; redelivery horizon 5m30s)");

    /* no MaxDeliver: MaxAge still bounds it */
    w.max_deliver = -1;
    ib_host_retention_explain(buf, sizeof(buf), "--retention", 30 * M, &w, "ORDERS");
    assert_string_equal(buf, "--retention 30m is shorter than the 1h a message can still be "
                             "delivered (stream ORDERS MaxAge 1h; redelivery horizon unbounded: "
                             "consumer has no MaxDeliver)");
    /* no MaxAge: nothing bounds it */
    w.max_age_ms = 0;
    ib_host_retention_explain(buf, sizeof(buf), "--retention", 2 * H, &w, "ORDERS");
    assert_non_null(strstr(buf, "--retention 2h is shorter than the time a message can still "
                                "be delivered, which has no bound"));
    assert_non_null(strstr(buf, "MaxAge none"));

    ib_delivery_window none = {.no_consumer = true};
    ib_host_retention_explain(buf, sizeof(buf), "--older-than", M, &none, "EVENTS");
    assert_non_null(strstr(buf, "stream EVENTS MaxAge none"));
    assert_non_null(strstr(buf, "not checked"));
}

/* Issue 45: the retention a run uses, which ibus status shows. auto
 * follows MaxAge (a week here), and means no pruning without one or with a
 * recorder that prunes by itself; a duration given is used as it is. */
static void effective_retention_is_what_the_run_uses(void **state)
{
    (void)state;
    const int64_t week = 7 * 24 * H;
    ib_delivery_window w = {.max_age_ms = week, .ack_wait_ms = 30 * S, .max_deliver = -1};
    ib_delivery_window no_age = {.ack_wait_ms = 30 * S, .max_deliver = 5};
    assert_int_equal(ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, &w, "sqlite"), week);
    assert_int_equal(ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, &w, NULL), week);
    assert_int_equal(ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, &no_age, "sqlite"), 0);
    assert_int_equal(ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, &w, "kv"), 0);
    assert_int_equal(ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, NULL, "sqlite"), 0);
    assert_int_equal(ib_host_retention_effective_ms(10 * M, &w, "sqlite"), 10 * M);
    assert_int_equal(ib_host_retention_effective_ms(0, &w, "sqlite"), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(floor_table),
    cmocka_unit_test(durations_read_like_options),
    cmocka_unit_test(explanation_gives_both_figures),
    cmocka_unit_test(effective_retention_is_what_the_run_uses),
};

IB_TEST_MAIN(tests)
