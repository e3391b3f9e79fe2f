/* SPDX-License-Identifier: Apache-2.0 */
/* ibus dlq's filters and times (dlq_read.c), table-driven: what --since
 * and --until accept, which reasons and ids --reason and --id take, and
 * which dead letters a filter lets through. The entries are made here;
 * the stream itself is tested against a server in it_dlq. */
#include "ib_test.h"

#include <string.h>

#include "dlq.h"
#include <infinity_bus/recorder.h>

#define NOW 1764624600000LL /* 2025-12-01T21:30:00Z */

static void times_parse(void **state)
{
    static const struct {
        const char *text;
        int rc;
        int64_t ms;
    } cases[] = {
        {"1h", 0, NOW - 3600000},
        {"90s", 0, NOW - 90000},
        {"15", 0, NOW - 15000}, /* a bare number is seconds, as for every duration */
        {"0s", 0, NOW},
        {"2025-12-01T21:30:00Z", 0, NOW},
        {"2025-12-01T21:30:00", 0, NOW},
        {"2025-12-01T21:30", 0, NOW},
        {"2025-12-01T21:30:00+01:00", -1, 0}, /* UTC only */
        {"2025-12-01", -1, 0},
        {"yesterday", -1, 0},
        {"", -1, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ms = 0;
        int rc = ib_dlq_parse_time(&ms, cases[i].text, NOW);
        if (rc != cases[i].rc || (rc == 0 && ms != cases[i].ms))
            fail_msg("'%s': rc %d ms %lld, want rc %d ms %lld", cases[i].text, rc, (long long)ms,
                     cases[i].rc, (long long)cases[i].ms);
    }
}

static void reasons_and_ids_checked(void **state)
{
    static const struct {
        const char *reason, *id;
        int rc;
        const char *normalised;
    } cases[] = {
        {NULL, NULL, 0, ""},
        {"max-deliver", NULL, 0, ""},
        {"decode", NULL, 0, ""},
        {"invalid-id", NULL, 0, ""},
        {"rejected", NULL, 0, ""},
        {"conflict", NULL, 0, ""},
        {"other", NULL, 0, ""},
        {"max_deliver", NULL, -1, ""},
        {"REJECTED", NULL, -1, ""},
        {NULL, "9BEC9991-6522-4BB8-8504-62E9870243D0", 0, "9bec999165224bb8850462e9870243d0"},
        {NULL, "not-a-uuid", -1, ""},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ib_dlq_filter f;
        memset(&f, 0, sizeof(f));
        f.reason = cases[i].reason;
        int rc = ib_dlq_filter_check(&f, cases[i].id);
        assert_int_equal(rc, cases[i].rc);
        if (rc == 0)
            assert_string_equal(f.id, cases[i].normalised);
    }
}

static void filters_select(void **state)
{
    ib_dlq_entry rejected = {.seq = 1,
                             .time_ms = NOW - 1000,
                             .reason = "rejected",
                             .consumer = "orders",
                             .event_id = "9bec999165224bb8850462e9870243d0",
                             .event_type = "order.created"};
    ib_dlq_entry decode = {.seq = 2, .time_ms = NOW, .reason = "decode", .consumer = "orders"};
    static const struct {
        const char *reason, *consumer, *type, *id;
        int64_t since, until;
        bool rejected, decode;
    } cases[] = {
        {NULL, NULL, NULL, NULL, 0, 0, true, true},
        {"rejected", NULL, NULL, NULL, 0, 0, true, false},
        {"decode", NULL, NULL, NULL, 0, 0, false, true},
        {NULL, "orders", NULL, NULL, 0, 0, true, true},
        {NULL, "billing", NULL, NULL, 0, 0, false, false},
        {NULL, NULL, "order.created", NULL, 0, 0, true, false}, /* no type: no match */
        {NULL, NULL, NULL, "9bec999165224bb8850462e9870243d0", 0, 0, true, false},
        {NULL, NULL, NULL, NULL, NOW, 0, false, true}, /* since: at or after */
        {NULL, NULL, NULL, NULL, 0, NOW, true, false}, /* until: before */
        {NULL, NULL, NULL, NULL, NOW - 1000, NOW + 1, true, true},
        {"rejected", "orders", "order.created", NULL, NOW - 5000, NOW, true, false},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ib_dlq_filter f;
        memset(&f, 0, sizeof(f));
        f.reason = cases[i].reason;
        f.consumer = cases[i].consumer;
        f.type = cases[i].type;
        assert_int_equal(ib_dlq_filter_check(&f, cases[i].id), 0);
        f.since_ms = cases[i].since;
        f.until_ms = cases[i].until;
        if (ib_dlq_filter_match(&f, &rejected) != cases[i].rejected ||
            ib_dlq_filter_match(&f, &decode) != cases[i].decode)
            fail_msg("case %zu: rejected %d decode %d", i, ib_dlq_filter_match(&f, &rejected),
                     ib_dlq_filter_match(&f, &decode));
    }
}

static void replay_ids_are_per_dead_letter(void **state)
{
    char a[300], b[300];
    (void)state;
    assert_string_equal(ib_dlq_replay_msg_id(a, sizeof(a), "DLQ_orders", 7),
                        "ibus-replay:DLQ_orders:7");
    assert_string_not_equal(ib_dlq_replay_msg_id(b, sizeof(b), "DLQ_orders", 8), a);
    assert_string_not_equal(ib_dlq_replay_msg_id(b, sizeof(b), "DLQ_billing", 7), a);
}

/* One length-delimited field of a hand-made Event. */
static size_t pb_field(uint8_t *out, int field, const char *value, size_t len)
{
    out[0] = (uint8_t)(field << 3 | 2);
    out[1] = (uint8_t)len;
    memcpy(out + 2, value, len);
    return len + 2;
}

/* Issue 31: a dead letter without Ibus-Event-Id/-Type (invalid-id) still
 * lists its id and type when its bytes are an Event; an invalid id is
 * shown escaped; headers win; bytes that are not an Event give nothing. */
static void ids_and_types_from_the_message(void **state)
{
    (void)state;
    uint8_t buf[256];
    ib_dlq_entry e;
    static const char dashed[] = "0F8FAD5B-D9CB-469F-A165-70867728950E";
    size_t n = pb_field(buf, 1, dashed, strlen(dashed));
    n += pb_field(buf + n, 2, "order.paid", 10);
    memset(&e, 0, sizeof(e));
    ib_dlq_entry_from_data(&e, buf, n);
    assert_string_equal(e.event_id, "0f8fad5bd9cb469fa16570867728950e");
    assert_string_equal(e.event_type, "order.paid");

    n = pb_field(buf, 2, "order.paid", 10);
    n += pb_field(buf + n, 1, "not an id\x01\\", 11);
    memset(&e, 0, sizeof(e));
    ib_dlq_entry_from_data(&e, buf, n);
    assert_string_equal(e.event_id, "not\\x20an\\x20id\\x01\\x5c");
    assert_string_equal(e.event_type, "order.paid");

    memset(&e, 0, sizeof(e));
    e.event_id = "from-the-header";
    ib_dlq_entry_from_data(&e, buf, n);
    assert_string_equal(e.event_id, "from-the-header");
    assert_string_equal(e.event_type, "order.paid");

    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    memset(&e, 0, sizeof(e));
    ib_dlq_entry_from_data(&e, junk, sizeof(junk));
    ib_dlq_entry_from_data(&e, NULL, 0);
    assert_null(e.event_id);
    assert_null(e.event_type);
}

/* Issue 45: Ibus-Handler is input like every header (anyone may publish
 * to the dead-letter subject): taken only as a consumer identity, at most
 * IB_CONSUMER_MAX bytes of printable ASCII without spaces; otherwise the
 * field stays NULL and `invalid` names it. */
static void handler_header_checked(void **state)
{
    (void)state;
    char longest[IB_CONSUMER_MAX + 1], too_long[IB_CONSUMER_MAX + 2];
    memset(longest, 'h', IB_CONSUMER_MAX);
    longest[IB_CONSUMER_MAX] = '\0';
    memset(too_long, 'h', IB_CONSUMER_MAX + 1);
    too_long[IB_CONSUMER_MAX + 1] = '\0';
    const struct {
        const char *value; /* NULL: no header */
        bool taken;
        const char *invalid;
    } cases[] = {
        {"billing/billing/charge", true, ""},
        {"renamed-charge", true, ""},
        {longest, true, ""},
        {NULL, false, ""}, /* an older dead letter, or one no handler decided */
        {too_long, false, "Ibus-Handler is too long"},
        {"two words", false, "Ibus-Handler is not printable ASCII"},
        {"caf\xc3\xa9/x/y", false, "Ibus-Handler is not printable ASCII"},
        {"esc\x1b[2J", false, "Ibus-Handler holds a control byte"},
        {"", false, "Ibus-Handler is empty"},
    };
    assert_int_equal(nats_Open(-1), NATS_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        natsMsg *m = NULL;
        ib_dlq_entry e;
        assert_int_equal(natsMsg_Create(&m, "ibus.dlq.t", NULL, "x", 1), NATS_OK);
        assert_int_equal(natsMsgHeader_Set(m, "Ibus-Consumer", "billing"), NATS_OK);
        if (cases[i].value != NULL)
            assert_int_equal(natsMsgHeader_Set(m, "Ibus-Handler", cases[i].value), NATS_OK);
        ib_dlq_entry_read(&e, m);
        if (cases[i].taken)
            assert_string_equal(e.handler, cases[i].value);
        else
            assert_null(e.handler);
        assert_string_equal(e.invalid, cases[i].invalid);
        assert_string_equal(e.consumer, "billing");
        ib_dlq_entry_clear(&e);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(times_parse),
    cmocka_unit_test(reasons_and_ids_checked),
    cmocka_unit_test(filters_select),
    cmocka_unit_test(replay_ids_are_per_dead_letter),
    cmocka_unit_test(ids_and_types_from_the_message),
    cmocka_unit_test(handler_header_checked),
};

IB_TEST_MAIN(tests)
