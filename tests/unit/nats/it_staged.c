/* SPDX-License-Identifier: Apache-2.0 */
/* ib_bus_publish_staged against a real nats-server: what the host's outbox
 * flush relies on. A staged message sent twice (a flush cut short by a
 * crash, then replayed) is stored once within the stream's duplicate
 * window, and what is stored is the Event the handler published. */
#include <stdio.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "jetstream.h"

#define GIVEN "5d6c7b8a-9f0e-4d1c-8b2a-3e4f5a6b7c8d"

/* The stream, with a duplicate window of one minute. */
static void make_stream(jsCtx *js)
{
    const char *subjects[] = {IT_SUBJECTS};
    jsStreamConfig sc;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;

    jsStreamConfig_Init(&sc);
    sc.Name = IT_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.Duplicates = 60LL * 1000 * 1000 * 1000;
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
}

/* What a transactional handler's publish stages: the outbox row. */
typedef struct staged {
    char subject[128];
    char msg_id[IB_ID_BUF_SIZE];
    uint8_t data[512];
    size_t len;
} staged;

static ib_status keep(void *ctx, const char *subject, const char *msg_id, const uint8_t *data,
                      size_t len, ib_error *err)
{
    staged *s = ctx;
    (void)err;
    snprintf(s->subject, sizeof(s->subject), "%s", subject);
    snprintf(s->msg_id, sizeof(s->msg_id), "%s", msg_id);
    assert_true(len <= sizeof(s->data));
    memcpy(s->data, data, len);
    s->len = len;
    return IB_OK;
}

static void staged_message_sent_twice_is_stored_once(void **state)
{
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    staged row = {.len = 0};
    ib_bus_proxy txn = {
        .subject_prefix = "events", .source = "it", .stage = keep, .stage_ctx = &row};
    ib_bus_proxy bus = {.js = js, .subject_prefix = "events", .source = "it", .timeout_ms = 5000};
    ib_publish_request req = {.size = sizeof(req),
                              .type = "ledger.posted",
                              .payload = "a 1 1",
                              .payload_len = 5,
                              .id = GIVEN};
    char id[IB_ID_BUF_SIZE];
    ib_error err;
    it_msg m;
    ib_event *ev = NULL;
    ib_event_limits lim = {.id_flags = IB_ID_ANY_VERSION};

    assert_non_null(js);
    make_stream(js);
    assert_int_equal(ib_bus_publish(&txn, &req, id, &err), IB_OK);
    for (int i = 0; i < 2; i++)
        if (ib_bus_publish_staged(&bus, row.subject, row.msg_id, row.data, row.len, &err) != IB_OK)
            fail_msg("publish staged #%d: %s", i + 1, err.msg);
    assert_int_equal(it_stream_count(&e->server, IT_STREAM), 1);

    assert_true(it_stream_get(&m, &e->server, IT_STREAM, 1));
    assert_string_equal(m.subject, "events.ledger.posted");
    assert_non_null(it_msg_header(&m, "Nats-Msg-Id"));
    assert_string_equal(it_msg_header(&m, "Nats-Msg-Id"), id);
    assert_int_equal(ib_event_decode(&ev, NULL, m.data, m.len, &lim, NULL), IB_OK);
    assert_string_equal(ev->id, id);
    assert_string_equal(ev->type, "ledger.posted");
    assert_memory_equal(ev->payload, "a 1 1", 5);
    ib_event_free(ev);
    it_msg_clear(&m);

    /* another id is another message */
    req.id = NULL;
    assert_int_equal(ib_bus_publish(&txn, &req, id, &err), IB_OK);
    assert_int_equal(ib_bus_publish_staged(&bus, row.subject, row.msg_id, row.data, row.len, &err),
                     IB_OK);
    assert_int_equal(it_stream_count(&e->server, IT_STREAM), 2);
    it_done(e);
}

/* Without a server answering, the entry must stay: an error, not a hang. */
static void publish_staged_without_a_stream_fails(void **state)
{
    it_env *e = *state;
    ib_bus_proxy bus = {.js = it_server_js(&e->server), .timeout_ms = 1000};
    ib_error err;

    assert_non_null(bus.js);
    assert_int_equal(ib_bus_publish_staged(&bus, "nowhere.x", GIVEN, "x", 1, &err), IB_ERR_NATS);
    assert_non_null(strstr(err.msg, "publish to nowhere.x: "));
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(staged_message_sent_twice_is_stored_once, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(publish_staged_without_a_stream_fails, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
