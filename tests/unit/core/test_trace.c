/* SPDX-License-Identifier: Apache-2.0 */
/* W3C Trace Context: table-driven traceparent and tracestate cases (valid,
 * each rule broken once), the host's spans and the thread's current
 * trace. */
#include "ib_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

/* A literal with its exact length, so cases may hold NUL bytes. */
#define LIT(s) s, sizeof(s) - 1

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define SID "00f067aa0ba902b7"
#define TP(flags) "00-" TID "-" SID "-" flags

typedef struct tp_case {
    const char *name;
    const char *in;
    size_t len;
    const char *want; /* the traceparent propagated, NULL = dropped */
} tp_case;

static const tp_case tp_cases[] = {
    {"sampled", LIT(TP("01")), TP("01")},
    {"not sampled", LIT(TP("00")), TP("00")},
    {"random flag kept", LIT(TP("03")), TP("03")},
    {"reserved flags zeroed", LIT(TP("ff")), TP("03")},
    {"reserved flag only", LIT(TP("08")), TP("00")},
    {"white space around", LIT(" \t" TP("01") " "), TP("01")},
    {"higher version, same length", LIT("01-" TID "-" SID "-01"), TP("01")},
    {"higher version, more fields", LIT("cc-" TID "-" SID "-01-what-comes-later"), TP("01")},
    /* each rule broken */
    {"empty", LIT(""), NULL},
    {"short", LIT("00-" TID "-" SID "-0"), NULL},
    {"version 00 too long", LIT(TP("01") "-x"), NULL},
    {"version 00 trailing byte", LIT(TP("01") "0"), NULL},
    {"version ff", LIT("ff-" TID "-" SID "-01"), NULL},
    {"higher version, no dash after flags", LIT("01-" TID "-" SID "-01x"), NULL},
    {"version upper case", LIT("0A-" TID "-" SID "-01"), NULL},
    {"version not hex", LIT("0g-" TID "-" SID "-01"), NULL},
    {"trace id upper case", LIT("00-4BF92F3577B34DA6A3CE929D0E0E4736-" SID "-01"), NULL},
    {"trace id all zero", LIT("00-00000000000000000000000000000000-" SID "-01"), NULL},
    {"span id all zero", LIT("00-" TID "-0000000000000000-01"), NULL},
    {"span id not hex", LIT("00-" TID "-00f067aa0ba902bz-01"), NULL},
    {"flags upper case", LIT(TP("0A")), NULL},
    {"flags not hex", LIT(TP("0x")), NULL},
    {"wrong separator", LIT("00_" TID "-" SID "-01"), NULL},
    {"trace id one short", LIT("00-4bf92f3577b34da6a3ce929d0e0e473-" SID "-01x"), NULL},
    {"NUL inside", LIT("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba9\0002b7-01"), NULL},
    {"two values joined", LIT(TP("01") "," TP("01")), NULL},
    {"inner white space", LIT("00- " TID "-" SID "-01"), NULL},
};

static void test_traceparent_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(tp_cases) / sizeof(tp_cases[0]); i++) {
        const tp_case *c = &tp_cases[i];
        ib_trace t;
        memset(&t, 0x5a, sizeof(t));
        bool ok = ib_trace_parse(&t, c->in, c->len);
        if (c->want == NULL) {
            if (ok)
                fail_msg("case '%s': accepted", c->name);
            assert_string_equal(t.traceparent, "");
            continue;
        }
        if (!ok)
            fail_msg("case '%s': refused", c->name);
        assert_string_equal(t.traceparent, c->want);
        assert_string_equal(t.trace_id, TID);
        assert_string_equal(t.span_id, SID);
        assert_string_equal(t.tracestate, "");
    }
}

/* The parser reads only `len` bytes: a valid value followed by anything in
 * memory parses, a prefix of it does not. */
static void test_traceparent_reads_len_only(void **state)
{
    (void)state;
    ib_trace t;
    const char *text = TP("01") "TRAILING";
    assert_true(ib_trace_parse(&t, text, IB_TRACEPARENT_LEN));
    assert_false(ib_trace_parse(&t, text, IB_TRACEPARENT_LEN - 1));
    assert_false(ib_trace_parse(&t, NULL, 0));
}

typedef struct ts_case {
    const char *name;
    const char *in;
    const char *want; /* NULL = the whole header dropped */
} ts_case;

/* A key of 250 characters: with six more it is the longest allowed. */
#define K250                                                                                       \
    "k12345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"   \
    "012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"   \
    "0123456789012345678901234567890123456789012345678901234567890123456789"

static const ts_case ts_cases[] = {
    {"one member", "congo=t61rcWkgMzE", "congo=t61rcWkgMzE"},
    {"two members", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
     "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
    {"white space dropped", " rojo=1 ,\tcongo=2\t", "rojo=1,congo=2"},
    {"empty members skipped", ",,rojo=1,, ,congo=2,", "rojo=1,congo=2"},
    {"empty header", "", ""},
    {"space before a comma is white space", "k=a ,j=b", "k=a,j=b"},
    {"blank header", "  ", ""},
    {"multi-tenant key", "fw529a3039@dt=a", "fw529a3039@dt=a"},
    {"tenant starts with a digit", "1tenant@sys=a", "1tenant@sys=a"},
    {"key characters", "a0_-*/=x", "a0_-*/=x"},
    {"value with inner space", "k=a b", "k=a b"},
    {"value of punctuation", "k=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~",
     "k=!\"#$%&'()*+-./:;<>?@[\\]^_`{|}~"},
    {"longest simple key", K250 "abcdef=v", K250 "abcdef=v"},
    /* each rule broken: the whole header goes */
    {"no equals sign", "rojo", NULL},
    {"empty key", "=v", NULL},
    {"empty value", "k=", NULL},
    {"key upper case", "Rojo=1", NULL},
    {"key starts with a digit", "1rojo=1", NULL},
    {"key too long", K250 "abcdefg=v", NULL},
    {"key with a space", "ro jo=1", NULL},
    {"value with an equals sign", "k=a=b", NULL},
    {"value with a control byte", "k=a\tb", NULL},
    {"value with a byte above 0x7e", "k=a\xc3\xa9", NULL},
    {"tenant empty", "@sys=1", NULL},
    {"system empty", "tenant@=1", NULL},
    {"system too long", "t@abcdefghijklmno=1", NULL},
    {"system starts with a digit", "t@1sys=1", NULL},
    {"two at signs", "a@b@c=1", NULL},
    {"duplicate key", "rojo=1,congo=2,rojo=3", NULL},
    {"33 members",
     "a1=1,a2=1,a3=1,a4=1,a5=1,a6=1,a7=1,a8=1,a9=1,b1=1,b2=1,b3=1,b4=1,b5=1,b6=1,b7=1,b8=1,b9="
     "1,c1=1,c2=1,c3=1,c4=1,c5=1,c6=1,c7=1,c8=1,c9=1,d1=1,d2=1,d3=1,d4=1,d5=1,d6=1",
     NULL},
};

static void test_tracestate_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(ts_cases) / sizeof(ts_cases[0]); i++) {
        const ts_case *c = &ts_cases[i];
        ib_trace t;
        assert_true(ib_trace_parse(&t, LIT(TP("01"))));
        strcpy(t.tracestate, "stale=1");
        bool ok = ib_trace_state_parse(&t, c->in, strlen(c->in));
        if (c->want == NULL) {
            if (ok)
                fail_msg("case '%s': accepted as '%s'", c->name, t.tracestate);
            assert_string_equal(t.tracestate, "");
            continue;
        }
        if (!ok)
            fail_msg("case '%s': refused", c->name);
        if (strcmp(t.tracestate, c->want) != 0)
            fail_msg("case '%s': '%s', expected '%s'", c->name, t.tracestate, c->want);
    }
}

/* A list longer than 512 characters loses its members longer than 128
 * first, from the end, then members from the end. */
static void test_tracestate_cut_to_512(void **state)
{
    (void)state;
    char value[2048], long_value[200], want[1024];
    ib_trace t;
    memset(long_value, 'v', 149);
    long_value[149] = '\0';
    /* 8 short members of 43, then two of 152 */
    size_t w = 0;
    for (int i = 0; i < 8; i++)
        w += (size_t)snprintf(value + w, sizeof(value) - w, "%sshort%d=%036d", i ? "," : "", i, i);
    size_t shorts = w;
    w += (size_t)snprintf(value + w, sizeof(value) - w, ",la=%s,lb=%s", long_value, long_value);
    assert_true(ib_trace_state_parse(&t, value, w));
    /* 8 x 43 + 7 commas = 351, and one long one: 351 + 1 + 152 = 504 */
    snprintf(want, sizeof(want), "%.*s,la=%s", (int)shorts, value, long_value);
    assert_string_equal(t.tracestate, want);
    assert_true(strlen(t.tracestate) <= IB_TRACESTATE_MAX);

    /* 32 members of 20 characters: 671, so members go from the end */
    w = 0;
    for (int i = 0; i < 32; i++)
        w += (size_t)snprintf(value + w, sizeof(value) - w, "%sm%02d=%016d", i ? "," : "", i, i);
    assert_true(ib_trace_state_parse(&t, value, w));
    assert_true(strlen(t.tracestate) <= IB_TRACESTATE_MAX);
    assert_int_equal(strlen(t.tracestate), 24 * 20 + 23);
    assert_memory_equal(t.tracestate, value, strlen(t.tracestate));
}

/* A child keeps the trace id, flags and tracestate and gets a new span id;
 * spans differ from one another. */
static void test_child_new_span_same_trace(void **state)
{
    (void)state;
    ib_trace parent, child, again;
    assert_true(ib_trace_parse(&parent, LIT(TP("01"))));
    assert_true(ib_trace_state_parse(&parent, LIT("rojo=1")));
    ib_trace_child(&child, &parent);
    assert_string_equal(child.trace_id, TID);
    assert_string_not_equal(child.span_id, SID);
    assert_int_equal(child.flags, 1);
    assert_string_equal(child.tracestate, "rojo=1");
    char want[IB_TRACEPARENT_LEN + 1];
    snprintf(want, sizeof(want), "00-%s-%s-01", TID, child.span_id);
    assert_string_equal(child.traceparent, want);
    /* the child's own text parses back to itself */
    assert_true(ib_trace_parse(&again, child.traceparent, strlen(child.traceparent)));
    assert_string_equal(again.span_id, child.span_id);
    /* in place, and many spans never repeat */
    char seen[64][IB_SPAN_ID_HEX + 1];
    for (int i = 0; i < 64; i++) {
        ib_trace_child(&child, &child);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(seen[j], child.span_id);
        strcpy(seen[i], child.span_id);
    }
}

static void test_start_fresh_trace(void **state)
{
    (void)state;
    ib_trace a, b, check;
    ib_error e;
    assert_int_equal(ib_trace_start(&a, &e), IB_OK);
    assert_int_equal(ib_trace_start(&b, &e), IB_OK);
    assert_string_not_equal(a.trace_id, b.trace_id);
    assert_int_equal(a.flags, IB_TRACE_FLAG_SAMPLED | IB_TRACE_FLAG_RANDOM);
    assert_string_equal(a.tracestate, "");
    assert_true(ib_trace_parse(&check, a.traceparent, strlen(a.traceparent)));
    assert_string_equal(check.trace_id, a.trace_id);
    assert_string_equal(check.span_id, a.span_id);
}

static void *other_thread(void *arg)
{
    (void)arg;
    return (void *)ib_trace_current();
}

/* The current trace is the calling thread's alone. */
static void test_current_is_per_thread(void **state)
{
    (void)state;
    ib_trace t;
    pthread_t th;
    void *seen = (void *)1;
    assert_true(ib_trace_parse(&t, LIT(TP("01"))));
    assert_null(ib_trace_current());
    ib_trace_current_set(&t);
    assert_ptr_equal(ib_trace_current(), &t);
    assert_int_equal(pthread_create(&th, NULL, other_thread, NULL), 0);
    assert_int_equal(pthread_join(th, &seen), 0);
    assert_null(seen);
    ib_trace_current_set(NULL);
    assert_null(ib_trace_current());
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_traceparent_cases),
    cmocka_unit_test(test_traceparent_reads_len_only),
    cmocka_unit_test(test_tracestate_cases),
    cmocka_unit_test(test_tracestate_cut_to_512),
    cmocka_unit_test(test_child_new_span_same_trace),
    cmocka_unit_test(test_start_fresh_trace),
    cmocka_unit_test(test_current_is_per_thread),
};

IB_TEST_MAIN(tests)
