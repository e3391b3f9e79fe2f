/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers lookup on a partitioned consumer: the partition it reads
 * is the one ibus publish put the event in, and the lines it prints. The
 * lookup against a real server is tests/integration/it_status_partitions.py. */
#include "ib_test.h"

#include <stdio.h>
#include <string.h>

#include "markers_partition.h"
#include "partition.h"

/* The partition ibus publish writes in the subject of an event with key
 * `key`: the token after the base. */
static uint32_t published_partition(const char *key, uint32_t n)
{
    char subject[300];
    ib_error e = {0};
    assert_int_equal(ib_partition_subject(subject, sizeof(subject), "orders.p", key, n, &e), IB_OK);
    unsigned long p = 0;
    assert_int_equal(sscanf(subject, "orders.p.%lu.", &p), 1);
    return (uint32_t)p;
}

static void test_partition_is_the_publishers(void **state)
{
    (void)state;
    static const char *const ids[] = {
        "0123456789abcdef4123456789abcdef", "ffffffffffffffff4fffbfffffffffff",
        "5f1c9a0e7b2d4c3e8a6b1d2e3f405162", "00000000000040008000000000000000"};
    static const uint32_t ns[] = {1, 2, 7, 16, 1000, 4096};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
            assert_int_equal(ib_cli_lookup_partition(ids[i], NULL, ns[k]),
                             published_partition(ids[i], ns[k]));
    /* a business key, not the id, places the event when it is given */
    const char *id = ids[0];
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
        assert_int_equal(ib_cli_lookup_partition(id, "account-17", ns[k]),
                         published_partition("account-17", ns[k]));
    /* pinned: FNV-1a of "account-17" is part of the wire contract */
    assert_int_equal(ib_cli_lookup_partition(id, "account-17", 16),
                     ib_partition_hash("account-17", 10) % 16);
}

static void test_lines_and_exit_codes(void **state)
{
    (void)state;
    static const struct {
        ib_pair_state s;
        const char *line;
        int code;
    } cases[] = {
        {{.known = true, .marked = true},
         "processed: orders/charge/charge 0123456789abcdef4123456789abcdef in partition 5",
         0},
        {{0},
         "not processed: orders/charge/charge 0123456789abcdef4123456789abcdef in partition 5 "
         "attempts=0",
         3},
        {{.known = true, .in_flight = true, .attempts = 2},
         "not processed: orders/charge/charge 0123456789abcdef4123456789abcdef in partition 5 "
         "in flight attempts=2",
         3},
        {{.known = true, .attempts = 1},
         "not processed: orders/charge/charge 0123456789abcdef4123456789abcdef in partition 5 "
         "attempts=1",
         3},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[300];
        int code = ib_cli_partition_lookup_line(buf, sizeof(buf), "orders/charge/charge",
                                                "0123456789abcdef4123456789abcdef", 5, &cases[i].s);
        assert_string_equal(buf, cases[i].line);
        assert_int_equal(code, cases[i].code);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_partition_is_the_publishers),
    cmocka_unit_test(test_lines_and_exit_codes),
};

IB_TEST_MAIN(tests)
