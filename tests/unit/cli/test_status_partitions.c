/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status --partitions: the durable names it reads back, the owner it
 * shows, what needs attention and the text and JSON, from made-up
 * reports. Against a real server: tests/integration/it_status_partitions.py. */
#include "ib_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

#define NOW 1800000000000LL

static void durable_names(void **state)
{
    (void)state;
    static const struct {
        const char *name, *durable;
        uint32_t n;
        int64_t want;
    } cases[] = {
        {"orders_p0", "orders", 16, 0},
        {"orders_p15", "orders", 16, 15},
        {"orders_p16", "orders", 16, -1}, /* not below N */
        {"orders_p01", "orders", 16, -1}, /* a leading zero is not ibus run's */
        {"orders_p", "orders", 16, -1},
        {"orders_px", "orders", 16, -1},
        {"orders_p1x", "orders", 16, -1},
        {"orders", "orders", 16, -1},
        {"orders2_p1", "orders", 16, -1},
        {"orders_p_p1", "orders_p", 16, 1},
        {"orders_p4095", "orders", 4096, 4095},
        {"orders_p4096", "orders", 4096, -1},
        {"orders_p99999999999999999999999", "orders", 4096, -1},
        {"billing_p1", "orders", 16, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(
            ib_status_partition_of_durable(cases[i].name, cases[i].durable, cases[i].n),
            cases[i].want);
}

static ib_status_partition held_by(const char *owner, bool live, int64_t end_ms)
{
    ib_status_partition x;
    memset(&x, 0, sizeof(x));
    x.epoch = 3;
    snprintf(x.owner, sizeof(x.owner), "%s", owner);
    x.end_ms = end_ms;
    x.owner_live = live;
    x.durable_exists = true;
    return x;
}

static void owner_shown(void **state)
{
    (void)state;
    ib_status_partition never = {0};
    assert_null(ib_status_partition_owner(&never, NOW));
    ib_status_partition held = held_by("tok-a", true, NOW + 5000);
    assert_string_equal(ib_status_partition_owner(&held, NOW), "tok-a");
    ib_status_partition given = held_by("tok-a", true, 0);
    assert_null(ib_status_partition_owner(&given, NOW));
    ib_status_partition ended = held_by("tok-a", false, NOW);
    assert_null(ib_status_partition_owner(&ended, NOW)); /* ends at NOW: over */
    ib_status_partition bad = held_by("tok-a", true, NOW + 5000);
    bad.lease_bad = true;
    assert_null(ib_status_partition_owner(&bad, NOW));
    held.pending = 4;
    held.ack_pending = 3;
    assert_int_equal(ib_status_partition_lag(&held), 7);
}

/* Four partitions of "orders" on base "orders.p", two live members. */
static void made_up(ib_status_report *r, ib_status_partitions *ps, ib_status_partition *v)
{
    static char members[2][129] = {"tok-a", "tok-b"};
    memset(r, 0, sizeof(*r));
    memset(ps, 0, sizeof(*ps));
    r->now_ms = NOW;
    snprintf(r->stream.name, sizeof(r->stream.name), "ORDERS");
    r->stream.exists = true;
    snprintf(ps->durable, sizeof(ps->durable), "orders");
    snprintf(ps->subject, sizeof(ps->subject), "orders.p");
    snprintf(ps->bucket, sizeof(ps->bucket), "ibus_fleet_orders");
    snprintf(ps->log_stream, sizeof(ps->log_stream), "IBUS_MARKERS_orders");
    ps->n = 4;
    ps->lease_ms = 15000;
    ps->bucket_exists = true;
    ps->members = members;
    ps->nmembers = 2;
    for (uint32_t p = 0; p < 4; p++) {
        v[p] = held_by(p % 2 == 0 ? "tok-a" : "tok-b", true, NOW + 9000);
        snprintf(v[p].filter, sizeof(v[p].filter), "orders.p.%u.*", p);
    }
    ps->v = v;
    r->parts = ps;
}

static void a_fleet_that_owns_everything_is_healthy(void **state)
{
    (void)state;
    ib_status_report r;
    ib_status_partitions ps;
    ib_status_partition v[4];
    made_up(&r, &ps, v);
    v[0].pending = 10; /* lag with a live owner is work, not trouble */
    v[1] = (ib_status_partition){.durable_exists = true}; /* no owner, no lag */
    snprintf(v[1].filter, sizeof(v[1].filter), "orders.p.1.*");
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 0);
}

static void partitions_without_owner(void **state)
{
    (void)state;
    ib_status_report r;
    ib_status_partitions ps;
    ib_status_partition v[4];
    made_up(&r, &ps, v);
    v[1].end_ms = NOW - 3000; /* ended */
    v[1].pending = 3;
    v[2].owner_live = false; /* held, but its holder announces no more */
    v[2].ack_pending = 2;
    v[3].lease_bad = true; /* not a lease: no owner, and said */
    v[3].pending = 1;
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 2);
    assert_string_equal(r.findings[0].code, "partition-without-owner");
    assert_non_null(strstr(r.findings[0].message, "partitions 1, 2, 3 of orders"));
    assert_non_null(strstr(r.findings[0].message, "6 messages wait"));
    assert_string_equal(r.findings[1].code, "lease-unreadable");
    assert_non_null(strstr(r.findings[1].message, "partitions 3 in bucket ibus_fleet_orders"));
}

static void durables_filters_and_errors(void **state)
{
    (void)state;
    ib_status_report r;
    ib_status_partitions ps;
    ib_status_partition v[4];
    made_up(&r, &ps, v);
    v[0].durable_exists = false;
    snprintf(v[2].filter, sizeof(v[2].filter), "orders.x.2.*");
    snprintf(ps.error, sizeof(ps.error), "the members in bucket ibus_fleet_orders cannot be read");
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 3);
    assert_string_equal(r.findings[0].code, "partitions-unreadable");
    assert_string_equal(r.findings[1].code, "partition-not-started");
    assert_non_null(strstr(r.findings[1].message, "partitions 0 of orders have no durable"));
    assert_string_equal(r.findings[2].code, "partition-filter");
    assert_string_equal(r.findings[2].fix, "--subject");
    assert_non_null(strstr(r.findings[2].message, "partitions 2 of orders"));
}

static void a_long_list_is_cut(void **state)
{
    (void)state;
    ib_status_report r;
    ib_status_partitions ps;
    ib_status_partition v[20];
    made_up(&r, &ps, v);
    ps.n = 20;
    for (uint32_t p = 0; p < 20; p++) {
        v[p] = (ib_status_partition){.durable_exists = true, .pending = 1};
        snprintf(v[p].filter, sizeof(v[p].filter), "orders.p.%u.*", p);
    }
    ib_status_check(&r);
    assert_int_equal(r.nfindings, 1);
    assert_non_null(strstr(r.findings[0].message,
                           "partitions 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 8 more of orders "
                           "have no live owner and 20 messages wait"));
}

static void text_and_json(void **state)
{
    (void)state;
    ib_status_report r;
    ib_status_partitions ps;
    ib_status_partition v[4];
    made_up(&r, &ps, v);
    v[1].end_ms = NOW - 3000;
    v[1].pending = 3;
    v[2].end_ms = 0; /* given back */
    v[3].durable_exists = false;
    v[3].epoch = 0;
    v[3].owner[0] = '\0';
    v[0].pending = 4;
    v[0].ack_pending = 1;
    ib_status_check(&r);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ib_status_print_text(out, &r);
    fclose(out);
    assert_non_null(
        strstr(text, "partitioned consumer orders on stream ORDERS: attention needed\n"));
    assert_non_null(strstr(text, "fleet         2 live members (lease 15s)\n"
                                 "                tok-a\n"
                                 "                tok-b\n"));
    assert_non_null(
        strstr(text, "4 of orders.p, bucket ibus_fleet_orders, marker log IBUS_MARKERS_orders; "
                     "lag 8\n"));
    assert_non_null(strstr(text, "    0     ends in 9s                4            1  tok-a\n"));
    assert_non_null(strstr(text, "    1     ended 3s ago              3            0  none\n"));
    assert_non_null(strstr(text, "    2     given back                0            0  none\n"));
    assert_non_null(strstr(text, "    3     never leased              no durable yet  none\n"));
    assert_non_null(strstr(text, "partition-without-owner: partitions 1 of orders"));
    free(text);

    json_t *o = ib_status_json(&r);
    assert_non_null(o);
    assert_false(json_is_true(json_object_get(o, "healthy")));
    assert_null(json_object_get(o, "consumer")); /* no one consumer, no recorder */
    json_t *p = json_object_get(o, "partitioned");
    assert_int_equal(json_integer_value(json_object_get(p, "n")), 4);
    assert_int_equal(json_integer_value(json_object_get(p, "lag")), 8);
    assert_int_equal(json_array_size(json_object_get(p, "members")), 2);
    json_t *parts = json_object_get(p, "partitions");
    assert_int_equal(json_array_size(parts), 4);
    json_t *p0 = json_array_get(parts, 0), *p1 = json_array_get(parts, 1);
    assert_string_equal(json_string_value(json_object_get(p0, "owner")), "tok-a");
    assert_true(json_is_true(json_object_get(p0, "owner_live")));
    assert_string_equal(json_string_value(json_object_get(p0, "lease")), "held");
    assert_int_equal(json_integer_value(json_object_get(p0, "lease_left_ms")), 9000);
    assert_int_equal(json_integer_value(json_object_get(p0, "lag")), 5);
    assert_string_equal(json_string_value(json_object_get(p0, "durable")), "orders_p0");
    assert_true(json_is_null(json_object_get(p1, "owner")));
    assert_string_equal(json_string_value(json_object_get(p1, "lease_owner")), "tok-b");
    assert_string_equal(json_string_value(json_object_get(p1, "lease")), "ended");
    assert_string_equal(json_string_value(json_object_get(json_array_get(parts, 2), "lease")),
                        "given back");
    json_t *p3 = json_array_get(parts, 3);
    assert_string_equal(json_string_value(json_object_get(p3, "lease")), "never leased");
    assert_true(json_is_null(json_object_get(p3, "filter")));
    json_t *att = json_object_get(o, "attention");
    assert_int_equal(json_array_size(att), 2); /* without owner; not started */
    json_decref(o);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(durable_names),
    cmocka_unit_test(owner_shown),
    cmocka_unit_test(a_fleet_that_owns_everything_is_healthy),
    cmocka_unit_test(partitions_without_owner),
    cmocka_unit_test(durables_filters_and_errors),
    cmocka_unit_test(a_long_list_is_cut),
    cmocka_unit_test(text_and_json),
};

IB_TEST_MAIN(tests)
