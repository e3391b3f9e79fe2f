/* SPDX-License-Identifier: Apache-2.0 */
/* The trace context of a delivered message: which header wins, and what
 * becomes of malformed, doubled or misspelt ones (no server needed: the
 * messages are built locally). */
#include "nats_test.h"

#include <string.h>

#include "jetstream.h"

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP_NATS "00-" TID "-00f067aa0ba902b7-01"
#define TP_EVENT "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"

static natsMsg *msg_with(const char *const *kv)
{
    natsMsg *m = NULL;
    assert_int_equal(natsMsg_Create(&m, "events.x", NULL, "", 0), NATS_OK);
    for (size_t i = 0; kv != NULL && kv[i] != NULL; i += 2)
        assert_int_equal(natsMsgHeader_Add(m, kv[i], kv[i + 1]), NATS_OK);
    return m;
}

typedef struct case_ {
    const char *name;
    const char *nats[9];  /* key, value, ..., NULL */
    const char *event[9]; /* Event headers, key, value, ..., NULL */
    const char *want;     /* traceparent read, NULL = none */
    const char *state;    /* tracestate read */
} case_;

static const case_ cases[] = {
    {"NATS header", {"traceparent", TP_NATS, NULL}, {NULL}, TP_NATS, ""},
    {"Go's canonical spelling",
     {"Traceparent", TP_NATS, "Tracestate", "a=1", NULL},
     {NULL},
     TP_NATS,
     "a=1"},
    {"NATS wins over the Event",
     {"traceparent", TP_NATS, NULL},
     {"traceparent", TP_EVENT, NULL},
     TP_NATS,
     ""},
    {"Event header alone",
     {"Nats-Msg-Id", "x", NULL},
     {"traceparent", TP_EVENT, "tracestate", "congo=t61rcWkgMzE", NULL},
     TP_EVENT,
     "congo=t61rcWkgMzE"},
    {"Event header in any case", {NULL}, {"TraceParent", TP_EVENT, NULL}, TP_EVENT, ""},
    {"tracestate lines joined",
     {"traceparent", TP_NATS, "tracestate", "a=1", "tracestate", "b=2", NULL},
     {NULL},
     TP_NATS,
     "a=1,b=2"},
    {"malformed tracestate dropped, traceparent kept",
     {"traceparent", TP_NATS, "tracestate", "a=1,a=2", NULL},
     {NULL},
     TP_NATS,
     ""},
    {"the tracestate of the other carrier is not mixed in",
     {"traceparent", TP_NATS, NULL},
     {"tracestate", "a=1", NULL},
     TP_NATS,
     ""},
    {"malformed NATS header: the Event's",
     {"traceparent", "00-bad", NULL},
     {"traceparent", TP_EVENT, NULL},
     TP_EVENT,
     ""},
    {"NATS header twice: the Event's",
     {"traceparent", TP_NATS, "traceparent", TP_NATS, NULL},
     {"traceparent", TP_EVENT, NULL},
     TP_EVENT,
     ""},
    {"both spellings in NATS: the Event's",
     {"traceparent", TP_NATS, "Traceparent", TP_NATS, NULL},
     {"traceparent", TP_EVENT, NULL},
     TP_EVENT,
     ""},
    {"Event header twice in two cases",
     {NULL},
     {"traceparent", TP_EVENT, "TRACEPARENT", TP_EVENT, NULL},
     NULL,
     ""},
    {"upper-case value",
     {"traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", NULL},
     {NULL},
     NULL,
     ""},
    {"a tracestate alone is nothing", {"tracestate", "a=1", NULL}, {NULL}, NULL, ""},
    {"no headers at all", {NULL}, {NULL}, NULL, ""},
};

static void headers_read_by_the_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const case_ *c = &cases[i];
        natsMsg *m = msg_with(c->nats);
        ib_event_header eh[4];
        ib_event ev = {.type = "x"};
        for (size_t j = 0; c->event[2 * j] != NULL; j++)
            eh[ev.header_count++] = (ib_event_header){c->event[2 * j], c->event[2 * j + 1]};
        ev.headers = ev.header_count > 0 ? eh : NULL;
        ib_trace t;
        bool got = ib_msg_trace_read(&t, m, &ev);
        if (got != (c->want != NULL))
            fail_msg("case '%s': %s", c->name, got ? "read a trace" : "read none");
        assert_string_equal(t.traceparent, c->want != NULL ? c->want : "");
        if (strcmp(t.tracestate, c->state) != 0)
            fail_msg("case '%s': tracestate '%s', expected '%s'", c->name, t.tracestate, c->state);
        natsMsg_Destroy(m);
    }
}

/* A message that failed to decode has only its NATS headers; neither
 * argument is required. */
static void no_event_or_no_message(void **state)
{
    (void)state;
    const char *kv[] = {"traceparent", TP_NATS, NULL};
    natsMsg *m = msg_with(kv);
    ib_trace t;
    assert_true(ib_msg_trace_read(&t, m, NULL));
    assert_string_equal(t.trace_id, TID);
    assert_false(ib_msg_trace_read(&t, NULL, NULL));
    natsMsg_Destroy(m);
}

/* What ib_msg_trace_set writes, ib_msg_trace_read reads back. */
static void set_then_read(void **state)
{
    (void)state;
    natsMsg *m = msg_with(NULL);
    ib_trace t, back;
    assert_true(ib_trace_parse(&t, TP_NATS, strlen(TP_NATS)));
    assert_true(ib_trace_state_parse(&t, "a=1,b=2", 7));
    assert_int_equal(ib_msg_trace_set(m, &t), NATS_OK);
    assert_true(ib_msg_trace_read(&back, m, NULL));
    assert_string_equal(back.traceparent, t.traceparent);
    assert_string_equal(back.tracestate, "a=1,b=2");
    natsMsg_Destroy(m);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(headers_read_by_the_rules),
    cmocka_unit_test(no_event_or_no_message),
    cmocka_unit_test(set_then_read),
};

IB_NATS_TEST_MAIN(tests)
