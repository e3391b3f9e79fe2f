/* SPDX-License-Identifier: Apache-2.0 */
/* The exit summary line (--summary-file): written with jansson, so any
 * durable name parses back exactly (quotes, backslashes, control bytes) or
 * with U+FFFD for invalid UTF-8, the keys keep the order readers know, and
 * the counters stay JSON integers. */
#include "ib_test.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"

/* Parses `line`, which must be one object and end in its only newline. */
static json_t *parse_line(const char *line)
{
    assert_non_null(line);
    size_t len = strlen(line);
    assert_true(len > 2);
    assert_int_equal(line[len - 1], '\n');
    assert_ptr_equal(strchr(line, '\n'), line + len - 1);
    json_error_t jerr;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
    if (o == NULL)
        print_error("not JSON (%s): %s", jerr.text, line);
    assert_true(json_is_object(o));
    return o;
}

static void durable_with_quote_and_backslash_parses_back(void **state)
{
    (void)state;
    const char *durable = "we\"ird\\name\n\x01";
    const ib_log_field counters[] = {
        IB_LOG_U64("received", 7),
        IB_LOG_U64("acked", 5),
        IB_LOG_U64("leftovers", 0),
    };
    char *line = ib_host_summary_line(4242, durable, 1, counters, 3);
    json_t *o = parse_line(line);
    assert_string_equal(json_string_value(json_object_get(o, "durable")), durable);
    assert_int_equal(json_integer_value(json_object_get(o, "pid")), 4242);
    assert_int_equal(json_integer_value(json_object_get(o, "exit")), 1);
    assert_true(json_is_integer(json_object_get(o, "received")));
    assert_int_equal(json_integer_value(json_object_get(o, "received")), 7);
    assert_int_equal(json_integer_value(json_object_get(o, "acked")), 5);
    assert_int_equal(json_integer_value(json_object_get(o, "leftovers")), 0);
    assert_int_equal(json_object_size(o), 6);
    /* keys in order, compact: scripts look for "acked":N */
    const char *want[] = {"pid", "durable", "exit", "received", "acked", "leftovers"};
    size_t i = 0;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        (void)v;
        assert_string_equal(key, want[i++]);
    }
    assert_non_null(strstr(line, ",\"acked\":5,"));
    json_decref(o);
    free(line);
}

static void invalid_utf8_in_a_name_is_replaced(void **state)
{
    (void)state;
    const ib_log_field counters[] = {IB_LOG_U64("acked", 1)};
    char *line = ib_host_summary_line(1, "bad\xff\xc3(name", 0, counters, 1);
    json_t *o = parse_line(line);
    assert_string_equal(json_string_value(json_object_get(o, "durable")),
                        "bad\xef\xbf\xbd\xef\xbf\xbd(name");
    json_decref(o);
    free(line);

    line = ib_host_summary_line(1, NULL, 0, counters, 1);
    o = parse_line(line);
    assert_true(json_is_null(json_object_get(o, "durable")));
    json_decref(o);
    free(line);
}

/* Every kind a log field can hold has a JSON form in the summary too. */
static void every_field_kind_keeps_its_type(void **state)
{
    (void)state;
    const ib_log_field fields[] = {
        IB_LOG_I64("neg", -3),    IB_LOG_U64("max", UINT64_MAX), IB_LOG_F64("f", 0.5),
        IB_LOG_F64("nan", NAN),   IB_LOG_BOOL("yes", true),      IB_LOG_STR("s", "a\"b"),
        IB_LOG_STR("none", NULL),
    };
    char *line = ib_host_summary_line(1, "d", 0, fields, sizeof(fields) / sizeof(fields[0]));
    json_t *o = parse_line(line);
    assert_int_equal(json_integer_value(json_object_get(o, "neg")), -3);
    assert_true(json_is_real(json_object_get(o, "max")));
    assert_true(json_real_value(json_object_get(o, "f")) == 0.5);
    assert_true(json_is_null(json_object_get(o, "nan")));
    assert_true(json_is_true(json_object_get(o, "yes")));
    assert_string_equal(json_string_value(json_object_get(o, "s")), "a\"b");
    assert_true(json_is_null(json_object_get(o, "none")));
    json_decref(o);
    free(line);

    /* a field with no key has nowhere to go: no line rather than a wrong one */
    const ib_log_field nameless[] = {IB_LOG_U64(NULL, 1)};
    assert_null(ib_host_summary_line(1, "d", 0, nameless, 1));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(durable_with_quote_and_backslash_parses_back),
    cmocka_unit_test(invalid_utf8_in_a_name_is_replaced),
    cmocka_unit_test(every_field_kind_keeps_its_type),
};

IB_TEST_MAIN(tests)
