/* SPDX-License-Identifier: Apache-2.0 */
/* How two subject filters relate (plugin/nats/subject_match.c),
 * table-driven: what `ibus forward` asks of a stream's subjects (does
 * one capture every partition subject?) and of a durable's filter (does
 * it share a subject with the partition subjects?). */
#include <string.h>

#include "ib_test.h"
#include "jetstream.h"

static void covers(void **state)
{
    (void)state;
    static const struct {
        const char *outer, *inner;
        bool want;
    } cases[] = {
        {"orders.>", "orders.3.*", true},
        {"orders.*.*", "orders.3.*", true},
        {"orders.3.*", "orders.3.*", true},
        {">", "orders.3.*", true},
        {"orders.*", "orders.3.*", false},   /* one token short */
        {"orders.3.*", "orders.*.*", false}, /* narrower than the inner filter */
        {"orders.3", "orders.3.*", false},
        {"orders.*.*", "orders.>", false}, /* '>' takes any number of tokens */
        {"orders.>", "orders", false},     /* '>' needs one token at least */
        {"orders.>", "orders.>", true},
        {"orders.4.*", "orders.3.*", false},
        {"ord.3.*", "orders.3.*", false},
        {"orders.3.x", "orders.3.*", false},
        {"orders.3.*.x", "orders.3.*", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (ib_nats_subject_covers(cases[i].outer, cases[i].inner) != cases[i].want)
            fail_msg("covers %zu: '%s' over '%s', want %d", i, cases[i].outer, cases[i].inner,
                     cases[i].want);
}

static void overlaps(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        bool want;
    } cases[] = {
        {"orders.in.*", "orders.*.*", true}, /* orders.in.x is both */
        {"orders.in", "orders.*.*", false},
        {"orders.>", "orders.p.*.*", true},
        {"orders.in.>", "orders.p.*.*", false},
        {"orders.*", "orders.p.*.*", false},
        {"*.p.3.*", "orders.p.*.*", true},
        {">", "a", true},
        {"a.>", "a", false},
        {"a.b", "a.b", true},
        {"a.b", "a.c", false},
        {"a.*.c", "a.b.*", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (ib_nats_subjects_overlap(cases[i].a, cases[i].b) != cases[i].want ||
            ib_nats_subjects_overlap(cases[i].b, cases[i].a) != cases[i].want)
            fail_msg("overlap %zu: '%s' and '%s', want %d", i, cases[i].a, cases[i].b,
                     cases[i].want);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(covers),
    cmocka_unit_test(overlaps),
};

IB_TEST_MAIN(tests)
