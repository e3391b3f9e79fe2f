/* The one publish path of the bus proxy and `ibus publish`: how an event's
 * id, subject, encoding and Nats-Msg-Id are settled (no server needed). */
#include "ib_test.h"

#include <string.h>

#include "jetstream.h"

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

/* Messages need the library open, as a connection would have it. */
static int open_nats(void **state)
{
    (void)state;
    return nats_Open(-1) == NATS_OK ? 0 : -1;
}

static int close_nats(void **state)
{
    (void)state;
    nats_Close();
    return 0;
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_given_id_is_normalised_and_becomes_the_msg_id),
    cmocka_unit_test(a_fresh_id_an_explicit_subject_and_no_msg_id),
    cmocka_unit_test(a_bad_id_is_refused_unless_sent_as_given),
};

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, open_nats, close_nats);
}
