/* SPDX-License-Identifier: Apache-2.0 */
/* Names and subjects before they reach the protocol (plugin/nats/names.c),
 * table-driven: what a stream or durable name, a publish subject and a
 * filter subject may be, and what each refusal says. */
#include <string.h>

#include "ib_test.h"
#include "jetstream.h"

#define W IB_SUBJECT_WILDCARDS
#define NS IB_SUBJECT_NOT_SYSTEM

static void names(void **state)
{
    (void)state;
    static const struct {
        const char *name, *why; /* why: a word of the refusal, NULL = fine */
    } cases[] = {
        {"ORDERS", NULL},
        {"orders-2_v1", NULL},
        {"DLQ_billing", NULL},
        {"", "empty"},
        {NULL, "empty"},
        {"or.ders", "'.'"},
        {"or*", "'*'"},
        {">", "'>'"},
        {"or ders", "space"},
        {"or\tders", "control byte"},
        {"orders\r\nPUB x", "control byte"},
        {"orders\x7f", "control byte"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *why = ib_nats_name_problem(cases[i].name);
        if ((why == NULL) != (cases[i].why == NULL) ||
            (why != NULL && strstr(why, cases[i].why) == NULL))
            fail_msg("name %zu: got '%s', want '%s'", i, why != NULL ? why : "(fine)",
                     cases[i].why != NULL ? cases[i].why : "(fine)");
    }
    char long_name[300];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_non_null(strstr(ib_nats_name_problem(long_name), "255"));
    long_name[255] = '\0';
    assert_null(ib_nats_name_problem(long_name));
}

static void subjects(void **state)
{
    (void)state;
    static const struct {
        const char *subject;
        unsigned flags;
        const char *why;
    } cases[] = {
        {"events.order.created", 0, NULL},
        {"events.order.created", NS, NULL},
        {"events.*.created", W, NULL},
        {"events.>", W, NULL},
        {"a*b.c>", 0, NULL}, /* a wildcard is a whole token only */
        {"$JS.API.STREAM.PURGE.ORDERS", 0, NULL},
        {"$JS.API.STREAM.PURGE.ORDERS", NS, "$ subject"},
        {"$KV.markers.x", NS, "$ subject"},
        {"_INBOX.abc", NS, "_INBOX"},
        {"_INBOXES", NS, "_INBOX"},
        {"inbox._INBOX", NS, NULL},
        {"events.>", 0, "wildcard"},
        {"events.*", NS, "wildcard"},
        {"events.>.x", W, "'>' that is not the last"},
        {"events..x", W, "empty token"},
        {".events", 0, "empty token"},
        {"events.", 0, "empty token"},
        {"", 0, "empty"},
        {NULL, 0, "empty"},
        {"events x", 0, "space"},
        {"events.\r\nPUB $JS.API.STREAM.PURGE.EVENTS 0", W, "control byte"},
        {"events.\x01", 0, "control byte"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *why = ib_nats_subject_problem(cases[i].subject, cases[i].flags);
        if ((why == NULL) != (cases[i].why == NULL) ||
            (why != NULL && strstr(why, cases[i].why) == NULL))
            fail_msg("subject %zu: got '%s', want '%s'", i, why != NULL ? why : "(fine)",
                     cases[i].why != NULL ? cases[i].why : "(fine)");
    }
    char long_subject[1100];
    memset(long_subject, 'a', sizeof(long_subject) - 1);
    long_subject[sizeof(long_subject) - 1] = '\0';
    assert_non_null(strstr(ib_nats_subject_problem(long_subject, 0), "1024"));
}

static void control_bytes(void **state)
{
    (void)state;
    assert_int_equal(ib_nats_control_at(NULL), -1);
    assert_int_equal(ib_nats_control_at(""), -1);
    assert_int_equal(ib_nats_control_at("team a/x ü"), -1);
    assert_int_equal(ib_nats_control_at("ab\r\n"), 2);
    assert_int_equal(ib_nats_control_at("\x7f"), 0);
    assert_int_equal(ib_nats_control_at("a\tb"), 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(names),
    cmocka_unit_test(subjects),
    cmocka_unit_test(control_bytes),
};

IB_TEST_MAIN(tests)
