/* SPDX-License-Identifier: Apache-2.0 */
/* The NATS part's refusals that need no server: argument checks of the
 * puller, the connection and the bus proxy, and the words they use. A library names the
 * setting and its value, never a command-line flag of ibus. */
#include "ib_test.h"

#include <string.h>

#include "jetstream.h"

static void assert_no_flag(const char *msg)
{
    if (strstr(msg, "--") != NULL)
        fail_msg("a library message names a flag: %s", msg);
}

static void puller_refuses_a_batch_out_of_range(void **state)
{
    (void)state;
    const size_t bad[] = {0, IB_PULLER_MAX_BATCH + 1};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ib_puller_options o = {.stream = "S", .durable = "d", .batch = bad[i]};
        ib_puller *p = (ib_puller *)&p; /* must be reset to NULL */
        ib_error e;
        /* the batch is checked before the connection is touched */
        assert_int_equal(ib_puller_create(&p, NULL, &o, &e), IB_ERR_INVALID_ARG);
        assert_null(p);
        assert_non_null(strstr(e.msg, "pull batch size"));
        assert_non_null(strstr(e.msg, "out of range 1..4096"));
        assert_no_flag(e.msg);
    }
}

static void connect_names_the_tls_settings(void **state)
{
    (void)state;
    ib_nats *n = (ib_nats *)&n;
    ib_error e;
    ib_nats_config half = {.url = "nats://127.0.0.1:1", .tls_cert = "client.pem"};
    assert_int_equal(ib_nats_connect(&n, &half, &e), IB_ERR_CONFIG);
    assert_null(n);
    assert_string_equal(e.msg, "TLS client certificate and key: give both or neither");

    ib_nats_config ca = {.url = "nats://127.0.0.1:1", .tls_ca = "no-such-ca-bundle.pem"};
    assert_int_equal(ib_nats_connect(&n, &ca, &e), IB_ERR_CONFIG);
    assert_null(n);
    assert_non_null(strstr(e.msg, "TLS CA bundle no-such-ca-bundle.pem: "));
    assert_no_flag(e.msg);
}

static void publish_refuses_a_request_smaller_than_abi_1_0(void **state)
{
    (void)state;
    ib_bus_proxy bus = {.subject_prefix = "events", .source = "test"};
    ib_publish_request req = {.size = sizeof(req), .type = "t", .payload = "x", .payload_len = 1};
    char id[IB_ID_BUF_SIZE] = "x";
    ib_error e;

    assert_true(IB_PUBLISH_REQUEST_SIZE_1_0 <= sizeof(req));
    /* the size is checked before anything else of the request or the bus */
    req.size = (uint32_t)IB_PUBLISH_REQUEST_SIZE_1_0 - 1;
    assert_int_equal(ib_bus_publish(&bus, &req, id, &e), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(e.msg, "request size"));
    assert_non_null(strstr(e.msg, "below"));
    assert_string_equal(id, "");
    req.size = sizeof(uint32_t);
    assert_int_equal(ib_bus_publish(NULL, &req, id, &e), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(e.msg, "request size 4 "));

    /* through the API table a plugin sees -1 and an empty id */
    const ib_host_api *api = ib_bus_host_api();
    strcpy(id, "x");
    assert_true(api->publish(&bus, &req, id) < 0);
    assert_string_equal(id, "");

    /* a full-size request passes the size check and meets the next one */
    req.size = (uint32_t)IB_PUBLISH_REQUEST_SIZE_1_0;
    assert_int_equal(ib_bus_publish(&bus, &req, id, &e), IB_ERR_INVALID_ARG);
    assert_string_equal(e.msg, "publish: no bus or no event type");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(publish_refuses_a_request_smaller_than_abi_1_0),
    cmocka_unit_test(puller_refuses_a_batch_out_of_range),
    cmocka_unit_test(connect_names_the_tls_settings),
};

IB_TEST_MAIN(tests)
