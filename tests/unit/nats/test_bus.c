/* SPDX-License-Identifier: Apache-2.0 */
/* The one publish path of the bus proxy and `ibus publish`: how an event's
 * id, subject, encoding and Nats-Msg-Id are settled, and the transactional
 * proxy that stages the same bytes instead of sending them (no server
 * needed). */
#include "nats_test.h"

#include <stdio.h>
#include <string.h>

#include "jetstream.h"
#include "partition.h"

#define GIVEN "0F4E3D2C-1B0A-4987-8654-3210FEDCBA98"

static ib_event *decode(natsMsg *m)
{
    ib_event *ev = NULL;
    ib_event_limits lim = {.id_flags = IB_ID_ANY_VERSION};
    assert_int_equal(ib_event_decode(&ev, NULL, natsMsg_GetData(m),
                                     (size_t)natsMsg_GetDataLength(m), &lim, NULL),
                     IB_OK);
    return ev;
}

static void a_given_id_is_normalised_and_becomes_the_msg_id(void **state)
{
    (void)state;
    ib_event_header h = {.key = "k", .value = "v"};
    ib_bus_event in = {.type = "order.created",
                       .id = GIVEN,
                       .prefix = "events",
                       .source = "test",
                       .payload = "{}",
                       .payload_len = 2,
                       .headers = &h,
                       .header_count = 1,
                       .set_msg_id = true};
    char id[IB_ID_BUF_SIZE];
    natsMsg *m = NULL;
    const char *msg_id = NULL;
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, NULL), IB_OK);
    assert_string_equal(id, "0f4e3d2c1b0a498786543210fedcba98");
    assert_string_equal(natsMsg_GetSubject(m), "events.order.created");
    assert_int_equal(natsMsgHeader_Get(m, "Nats-Msg-Id", &msg_id), NATS_OK);
    assert_string_equal(msg_id, id);
    ib_event *ev = decode(m);
    assert_string_equal(ev->id, id);
    assert_string_equal(ev->type, "order.created");
    assert_string_equal(ev->source, "test");
    assert_int_equal(ev->payload_len, 2);
    assert_int_equal(ev->header_count, 1);
    assert_string_equal(ev->headers[0].value, "v");
    assert_true(ev->created_at_ms > 0);
    ib_event_free(ev);
    natsMsg_Destroy(m);
}

/* With partitions, the subject is <subject or prefix>.<p>.<key>: the key
 * is the settled (normalised) id unless one is named; a key that is not
 * one token is refused and no message is made. */
static void a_partitioned_event_goes_to_its_partition(void **state)
{
    (void)state;
    char id[IB_ID_BUF_SIZE], want[128];
    natsMsg *m = NULL;
    ib_error e;
    ib_bus_event in = {.type = "order.created", .id = GIVEN, .prefix = "orders", .partitions = 16};
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, NULL), IB_OK);
    snprintf(want, sizeof(want), "orders.%u.%s", ib_partition_of(ib_partition_hash(id, 32), 16),
             id);
    assert_string_equal(natsMsg_GetSubject(m), want);
    natsMsg_Destroy(m);
    in.subject = "orders.p";
    in.partition_key = "account-17";
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, NULL), IB_OK);
    snprintf(want, sizeof(want), "orders.p.%u.account-17",
             ib_partition_of(ib_partition_hash("account-17", 10), 16));
    assert_string_equal(natsMsg_GetSubject(m), want);
    natsMsg_Destroy(m);
    in.partition_key = "account.17";
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, &e), IB_ERR_INVALID_ARG);
    assert_null(m);
    assert_non_null(strstr(e.msg, "one subject token"));
}

static void a_fresh_id_an_explicit_subject_and_no_msg_id(void **state)
{
    (void)state;
    ib_bus_event in = {.type = "t", .subject = "exact.subject", .prefix = "unused"};
    char id[IB_ID_BUF_SIZE];
    natsMsg *m = NULL;
    const char *msg_id = NULL;
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, NULL), IB_OK);
    assert_int_equal(strlen(id), 32);
    assert_int_equal(id[12], '4'); /* a uuid4 */
    assert_string_equal(natsMsg_GetSubject(m), "exact.subject");
    assert_int_equal(natsMsgHeader_Get(m, "Nats-Msg-Id", &msg_id), NATS_NOT_FOUND);
    ib_event *ev = decode(m);
    assert_string_equal(ev->id, id);
    ib_event_free(ev);
    natsMsg_Destroy(m);
}

static void a_bad_id_is_refused_unless_sent_as_given(void **state)
{
    (void)state;
    ib_bus_event in = {.type = "t", .id = "not-a-uuid", .prefix = "p", .set_msg_id = true};
    char id[IB_ID_BUF_SIZE + 64] = "x";
    natsMsg *m = (natsMsg *)&m;
    ib_error e;
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, &e), IB_ERR_INVALID_ID);
    assert_null(m);
    assert_string_equal(id, "");
    assert_non_null(strstr(e.msg, "event id "));

    /* test tools send it anyway; the consumer will dead-letter it */
    in.id_as_given = true;
    const char *msg_id = NULL;
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &in, &e), IB_OK);
    assert_string_equal(id, "not-a-uuid");
    assert_int_equal(natsMsgHeader_Get(m, "Nats-Msg-Id", &msg_id), NATS_OK);
    assert_string_equal(msg_id, "not-a-uuid");
    natsMsg_Destroy(m);
}

/* What a stage callback received: the last call's copies. */
typedef struct capture {
    int calls;
    ib_status answer; /* what stage() returns */
    char subject[128];
    char msg_id[IB_ID_BUF_SIZE];
    uint8_t data[512];
    size_t len;
} capture;

static ib_status capture_stage(void *ctx, const char *subject, const char *msg_id,
                               const uint8_t *data, size_t len, ib_error *err)
{
    capture *c = ctx;
    c->calls++;
    snprintf(c->subject, sizeof(c->subject), "%s", subject);
    snprintf(c->msg_id, sizeof(c->msg_id), "%s", msg_id);
    assert_true(len <= sizeof(c->data));
    memcpy(c->data, data, len);
    c->len = len;
    if (c->answer != IB_OK)
        return ib_error_set(err, c->answer, "outbox: full");
    return IB_OK;
}

static void a_staging_proxy_stages_what_it_would_send(void **state)
{
    (void)state;
    capture c = {.answer = IB_OK};
    ib_bus_proxy bus = {.subject_prefix = "events",
                        .source = "ledger-test",
                        .stage = capture_stage,
                        .stage_ctx = &c};
    ib_header h = {.key = "from", .value = "test"};
    ib_publish_request req = {.size = sizeof(req),
                              .type = "ledger.posted",
                              .payload = "acct 5 12",
                              .payload_len = 9,
                              .id = GIVEN,
                              .headers = &h,
                              .header_count = 1};
    char id[IB_ID_BUF_SIZE] = "x";
    ib_event *ev = NULL;
    ib_event_limits lim = {.id_flags = IB_ID_ANY_VERSION};

    /* no JetStream context at all: nothing may be sent */
    assert_int_equal(ib_bus_publish(&bus, &req, id, NULL), IB_OK);
    assert_string_equal(id, "0f4e3d2c1b0a498786543210fedcba98");
    assert_int_equal(c.calls, 1);
    assert_string_equal(c.subject, "events.ledger.posted");
    assert_string_equal(c.msg_id, id);
    assert_int_equal(ib_event_decode(&ev, NULL, c.data, c.len, &lim, NULL), IB_OK);
    assert_string_equal(ev->id, id);
    assert_string_equal(ev->type, "ledger.posted");
    assert_string_equal(ev->source, "ledger-test");
    assert_int_equal(ev->payload_len, 9);
    assert_memory_equal(ev->payload, "acct 5 12", 9);
    assert_int_equal(ev->header_count, 1);
    assert_string_equal(ev->headers[0].key, "from");
    assert_string_equal(ev->headers[0].value, "test");
    assert_true(ev->created_at_ms > 0);
    ib_event_free(ev);

    /* an explicit subject and a fresh id are settled as on the direct path */
    req.subject = "ledger.out";
    req.id = NULL;
    assert_int_equal(ib_bus_publish(&bus, &req, id, NULL), IB_OK);
    assert_int_equal(c.calls, 2);
    assert_string_equal(c.subject, "ledger.out");
    assert_int_equal(strlen(id), 32);
    assert_string_equal(c.msg_id, id);
}

static void a_failed_stage_fails_the_publish(void **state)
{
    (void)state;
    capture c = {.answer = IB_ERR_RECORDER};
    ib_bus_proxy bus = {.subject_prefix = "events", .stage = capture_stage, .stage_ctx = &c};
    ib_publish_request req = {.size = sizeof(req), .type = "t", .id = GIVEN};
    char id[IB_ID_BUF_SIZE] = "x";
    ib_error e;

    assert_int_equal(ib_bus_publish(&bus, &req, id, &e), IB_ERR_RECORDER);
    assert_string_equal(e.msg, "outbox: full");
    assert_string_equal(id, "");

    /* a plugin sees -1 and an empty id, and so answers RETRY */
    const ib_host_api *api = ib_bus_host_api();
    strcpy(id, "x");
    assert_true(api->publish(&bus, &req, id) < 0);
    assert_string_equal(id, "");
    assert_int_equal(c.calls, 2);

    /* a bad id never reaches the outbox */
    c.answer = IB_OK;
    req.id = "not-a-uuid";
    assert_int_equal(ib_bus_publish(&bus, &req, id, &e), IB_ERR_INVALID_ID);
    assert_int_equal(c.calls, 2);
}

#define TP_IN "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* The value of header `key` of `ev` ("" when it has none). */
static const char *event_header(const ib_event *ev, const char *key)
{
    for (size_t i = 0; i < ev->header_count; i++)
        if (strcmp(ev->headers[i].key, key) == 0)
            return ev->headers[i].value;
    return "";
}

/* A publish from inside a traced handler call continues the trace: the
 * Event (staged or sent) and the NATS message carry the handler's
 * traceparent and tracestate beside the handler's own headers. A handler
 * that names its own traceparent keeps it; outside a trace nothing is
 * added. */
static void a_publish_continues_the_current_trace(void **state)
{
    (void)state;
    capture c = {.answer = IB_OK};
    ib_bus_proxy bus = {.subject_prefix = "events", .stage = capture_stage, .stage_ctx = &c};
    ib_header own[] = {{.key = "from", .value = "test"}, {.key = "Traceparent", .value = "mine"}};
    ib_publish_request req = {
        .size = sizeof(req), .type = "order.relayed", .headers = own, .header_count = 1};
    ib_event_limits lim = {.id_flags = IB_ID_ANY_VERSION};
    ib_trace t;
    char id[IB_ID_BUF_SIZE];
    ib_event *ev = NULL;
    assert_true(ib_trace_parse(&t, TP_IN, strlen(TP_IN)));
    assert_true(ib_trace_state_parse(&t, "rojo=1", 6));
    ib_trace_child(&t, &t);

    ib_trace_current_set(&t);
    assert_int_equal(ib_bus_publish(&bus, &req, id, NULL), IB_OK);
    assert_int_equal(ib_event_decode(&ev, NULL, c.data, c.len, &lim, NULL), IB_OK);
    assert_int_equal(ev->header_count, 3);
    assert_string_equal(event_header(ev, "from"), "test");
    assert_string_equal(event_header(ev, "traceparent"), t.traceparent);
    assert_string_equal(event_header(ev, "tracestate"), "rojo=1");
    ib_event_free(ev);

    /* the direct path: the NATS message carries them too */
    ib_bus_event direct = {.type = "t", .prefix = "events", .trace = &t};
    natsMsg *m = NULL;
    const char *v = NULL;
    assert_int_equal(ib_bus_event_msg(&m, id, sizeof(id), &direct, NULL), IB_OK);
    assert_int_equal(natsMsgHeader_Get(m, "traceparent", &v), NATS_OK);
    assert_string_equal(v, t.traceparent);
    assert_int_equal(natsMsgHeader_Get(m, "tracestate", &v), NATS_OK);
    assert_string_equal(v, "rojo=1");
    ev = decode(m);
    assert_string_equal(event_header(ev, "traceparent"), t.traceparent);
    ib_event_free(ev);
    natsMsg_Destroy(m);

    /* the handler's own traceparent wins */
    req.header_count = 2;
    assert_int_equal(ib_bus_publish(&bus, &req, id, NULL), IB_OK);
    assert_int_equal(ib_event_decode(&ev, NULL, c.data, c.len, &lim, NULL), IB_OK);
    assert_int_equal(ev->header_count, 2);
    assert_string_equal(event_header(ev, "Traceparent"), "mine");
    assert_string_equal(event_header(ev, "tracestate"), "");
    ib_event_free(ev);

    /* no trace, nothing added */
    ib_trace_current_set(NULL);
    req.header_count = 1;
    assert_int_equal(ib_bus_publish(&bus, &req, id, NULL), IB_OK);
    assert_int_equal(ib_event_decode(&ev, NULL, c.data, c.len, &lim, NULL), IB_OK);
    assert_int_equal(ev->header_count, 1);
    ib_event_free(ev);
}

/* transaction_db answers the proxy's connection, and NULL without one. */
static void transaction_db_answers_the_proxys_connection(void **state)
{
    (void)state;
    const ib_host_api *api = ib_bus_host_api();
    struct sqlite3 *fake = (struct sqlite3 *)(void *)&fake;
    ib_bus_proxy plain = {.subject_prefix = "events"};
    ib_bus_proxy txn = {.subject_prefix = "events", .db = fake};

    assert_true(IB_HOST_API_HAS(api, transaction_db));
    assert_true(api->abi_minor >= 2);
    assert_ptr_equal(api->transaction_db(&txn), fake);
    assert_null(api->transaction_db(&plain));
    assert_null(api->transaction_db(NULL));
}

static void publish_staged_refuses_what_it_cannot_send(void **state)
{
    (void)state;
    ib_bus_proxy bus = {.subject_prefix = "events"};
    ib_error e;

    assert_int_equal(ib_bus_publish_staged(&bus, "s", GIVEN, "x", 1, &e), IB_ERR_INVALID_ARG);
    assert_string_equal(e.msg, "publish staged: no bus, subject or message id");
    assert_int_equal(ib_bus_publish_staged(NULL, "s", GIVEN, "x", 1, &e), IB_ERR_INVALID_ARG);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_given_id_is_normalised_and_becomes_the_msg_id),
    cmocka_unit_test(a_fresh_id_an_explicit_subject_and_no_msg_id),
    cmocka_unit_test(a_partitioned_event_goes_to_its_partition),
    cmocka_unit_test(a_bad_id_is_refused_unless_sent_as_given),
    cmocka_unit_test(a_staging_proxy_stages_what_it_would_send),
    cmocka_unit_test(a_failed_stage_fails_the_publish),
    cmocka_unit_test(a_publish_continues_the_current_trace),
    cmocka_unit_test(transaction_db_answers_the_proxys_connection),
    cmocka_unit_test(publish_staged_refuses_what_it_cannot_send),
};

IB_NATS_TEST_MAIN(tests)
