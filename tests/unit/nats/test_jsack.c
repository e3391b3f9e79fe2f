/* SPDX-License-Identifier: Apache-2.0 */
/* Table-driven tests of the ack-subject parser. */
#include "ib_test.h"

#include <string.h>

#include "jetstream.h"

typedef struct jsack_case {
    const char *subject;
    ib_status want;
    const char *stream, *consumer;
    uint64_t delivered, sseq, cseq, pending;
    int64_t ts;
} jsack_case;

static const jsack_case cases[] = {
    {"$JS.ACK.EVENTS.ibus.1.42.40.1700000000000000000.3", IB_OK, "EVENTS", "ibus", 1, 42, 40, 3,
     1700000000000000000},
    {"$JS.ACK._.HASH.EVENTS.ibus.2.7.5.17.0.tok", IB_OK, "EVENTS", "ibus", 2, 7, 5, 0, 17},
    {"$JS.ACK.dom.HASH.S.C.3.1.1.1.9", IB_OK, "S", "C", 3, 1, 1, 9, 1},
    {"$JS.ACK.S.C.1.2.3.4", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},     /* 6 tokens */
    {"$JS.ACK.S.C.1.2.3.4.5.6", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0}, /* 8 tokens */
    {"$JS.ACK.S..1.2.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},    /* empty token */
    {"$JS.ACK.S.C.x.2.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},   /* not a number */
    {"$JS.ACK.S.C.-1.2.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},  /* sign */
    {"$JS.ACK.S.C.1.2.3.99999999999999999999.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.S.C.1.2.3.18446744073709551615.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.NAK.S.C.1.2.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"_INBOX.abc", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.S.C.1.2.3.4.5.", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0}, /* trailing dot */
    /* Numbers at the edges of the fast path: 19 digits never overflow, a
     * 20th is checked, a 21st refused; leading zeros are digits. */
    {"$JS.ACK.S.C.1.9999999999999999999.3.4.18446744073709551615", IB_OK, "S", "C", 1,
     9999999999999999999u, 3, UINT64_MAX, 4},
    {"$JS.ACK.S.C.1.2.3.4.18446744073709551616", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.S.C.1.2.3.4.1844674407370955161x", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.S.C.1.2.3.4.184467440737095516150", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.S.C.007.2.3.9223372036854775807.0", IB_OK, "S", "C", 7, 2, 3, 0, INT64_MAX},
    {"$JS.ACK.S.C.1.2.3.9223372036854775808.0", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.S.C.1./.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0}, /* '0' - 1 */
    {"$JS.ACK.S.C.1.:.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0}, /* '9' + 1 */
    {".$JS.ACK.S.C.1.2.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK..S.C.1.2.3.4.5", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0}, /* empty first */
    /* Sixteen tokens is the most; the 17th is refused before it is read. */
    {"$JS.ACK.d.h.S.C.1.2.3.4.5.a.b.c.d.e.f.g", IB_OK, "S", "C", 1, 2, 3, 5, 4},
    {"$JS.ACK.d.h.S.C.1.2.3.4.5.a.b.c.d.e.f.g.h", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
    {"$JS.ACK.d.h.S.C.1.2.3.4.5.a.b.c.d.e.f.g.", IB_ERR_DECODE, NULL, NULL, 0, 0, 0, 0, 0},
};

static void jsack_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const jsack_case *c = &cases[i];
        ib_jsack_meta m;
        ib_error e;
        ib_status st = ib_jsack_parse(&m, c->subject, strlen(c->subject), &e);
        if (st != c->want)
            fail_msg("case %zu (%s): got %d want %d", i, c->subject, st, c->want);
        if (st != IB_OK) {
            assert_true(strlen(e.msg) > 0);
            continue;
        }
        assert_int_equal(m.stream_len, strlen(c->stream));
        assert_memory_equal(m.stream, c->stream, m.stream_len);
        assert_int_equal(m.consumer_len, strlen(c->consumer));
        assert_memory_equal(m.consumer, c->consumer, m.consumer_len);
        assert_int_equal(m.delivered, c->delivered);
        assert_int_equal(m.stream_seq, c->sseq);
        assert_int_equal(m.consumer_seq, c->cseq);
        assert_int_equal(m.pending, c->pending);
        assert_int_equal(m.timestamp_ns, c->ts);
    }
}

/* The parser must honour the length it is given, not a NUL. */
static void jsack_uses_length(void **state)
{
    (void)state;
    const char *s = "$JS.ACK.S.C.1.2.3.4.5XYZ";
    ib_jsack_meta m;
    assert_int_equal(ib_jsack_parse(&m, s, strlen(s) - 3, NULL), IB_OK);
    assert_int_equal(m.pending, 5);
    assert_int_equal(ib_jsack_parse(&m, s, strlen(s), NULL), IB_ERR_DECODE);
    /* A NUL inside the given length is a byte like any other. */
    const char nul[] = "$JS.ACK.S.C.1.2.3.4.5\0";
    assert_int_equal(ib_jsack_parse(&m, nul, sizeof(nul) - 1, NULL), IB_ERR_DECODE);
    assert_int_equal(ib_jsack_parse(&m, "$JS.ACK.S.C.1.2.3.4.5", 7, NULL), IB_ERR_DECODE);
    assert_int_equal(ib_jsack_parse(&m, NULL, 0, NULL), IB_ERR_DECODE);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(jsack_table),
    cmocka_unit_test(jsack_uses_length),
};
IB_TEST_MAIN(tests)
