/* SPDX-License-Identifier: Apache-2.0 */
/* The puller against a real nats-server, with chained requests on (the
 * delivery callback sends the next pull request the moment a batch has
 * arrived): every message is handed out once, in stream order, while the
 * caller is slow; and a stop after chaining collects every message a
 * request brought, so none is left delivered but neither acked nor
 * handed back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "jetstream.h"

#define DURABLE "pull"

static void make_stream_and_consumer(jsCtx *js)
{
    const char *subjects[] = {IT_SUBJECTS};
    jsStreamConfig sc;
    jsConsumerConfig cc;
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;

    jsStreamConfig_Init(&sc);
    sc.Name = IT_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    jsConsumerConfig_Init(&cc);
    cc.Durable = DURABLE;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = 30LL * 1000 * 1000 * 1000;
    assert_int_equal(js_AddConsumer(&ci, js, IT_STREAM, &cc, NULL, &jerr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
}

/* Messages whose bodies are their numbers, from `first`. */
static void publish(jsCtx *js, int first, int count)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 30000;
    for (int i = first; i < first + count; i++) {
        char body[16];
        int len = snprintf(body, sizeof(body), "%d", i);
        assert_int_equal(js_PublishAsync(js, "events.test.pull", body, len, NULL), NATS_OK);
    }
    assert_int_equal(js_PublishAsyncComplete(js, &po), NATS_OK);
}

/* The host's own connection code, reconnecting forever. */
static ib_nats *connect_host(const it_env *e)
{
    ib_nats_config c = {.url = e->server.url, .reconnect_wait_ms = 50};
    ib_nats *n = NULL;
    ib_error err;
    if (ib_nats_connect(&n, &c, &err) != IB_OK)
        fail_msg("connect: %s", err.msg);
    return n;
}

static ib_puller *make_puller(ib_nats *conn, size_t batch, int64_t expires_ms)
{
    ib_puller_options o = {
        .stream = IT_STREAM, .durable = DURABLE, .batch = batch, .expires_ms = expires_ms};
    ib_puller *p = NULL;
    ib_error e;
    if (ib_puller_create(&p, conn, &o, &e) != IB_OK)
        fail_msg("puller: %s", e.msg);
    return p;
}

/* Acks the messages, checking each is the next number expected. */
static void ack_in_order(natsConnection *nc, natsMsg **msgs, size_t n, int *next)
{
    for (size_t i = 0; i < n; i++) {
        char body[16];
        snprintf(body, sizeof(body), "%.*s", natsMsg_GetDataLength(msgs[i]),
                 natsMsg_GetData(msgs[i]));
        if (atoi(body) != *next)
            fail_msg("message %s where %d was due", body, *next);
        (*next)++;
        assert_int_equal(ib_ack(nc, msgs[i], NULL), IB_OK);
        natsMsg_Destroy(msgs[i]);
    }
}

static uint64_t delivered(jsCtx *js)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetConsumerInfo(&ci, js, IT_STREAM, DURABLE, NULL, &jerr), NATS_OK);
    uint64_t d = ci->Delivered.Consumer;
    jsConsumerInfo_Destroy(ci);
    return d;
}

static void chained_pulls_hand_out_each_message_once(void **state)
{
    enum { TOTAL = 2000, BATCH = 16 };
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[BATCH];
    int next = 0;
    ib_error err;

    assert_non_null(js);
    make_stream_and_consumer(js);
    publish(js, 0, TOTAL);
    ib_nats *conn = connect_host(e);
    natsConnection *nc = ib_nats_connection(conn);
    ib_puller *p = make_puller(conn, BATCH, 0);
    int64_t deadline = it_now_ms() + it_timeout(60000);
    while (next < TOTAL && it_now_ms() < deadline) {
        size_t n = 0;
        assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 1000, &err), IB_OK);
        ib_puller_chain(p, true);
        assert_int_equal(ib_puller_prefetch(p, &err), IB_OK);
        if (next % (BATCH * 8) == 0)
            it_sleep_ms(5); /* a slow batch now and then: the callback asks meanwhile */
        ack_in_order(nc, msgs, n, &next);
    }
    assert_int_equal(next, TOTAL);
    ib_puller_stats s;
    ib_puller_stats_get(p, &s);
    printf("requests=%llu messages=%llu leftovers=%llu\n", (unsigned long long)s.requests,
           (unsigned long long)s.messages, (unsigned long long)s.leftovers);
    assert_int_equal(s.messages, TOTAL);
    assert_true(s.requests >= TOTAL / BATCH);
    assert_true(s.requests <= TOTAL / BATCH + 16);
    /* nothing more was delivered than handed out */
    assert_int_equal(delivered(js), TOTAL);
    ib_puller_free(p);
    ib_nats_close(conn, 1000);
    it_done(e);
}

/* Stop right after a slow batch, with the next request(s) sent by the
 * callback: what they brought comes back from ib_puller_stop. */
static void stop_collects_what_chained_requests_brought(void **state)
{
    enum { BATCH = 8, CAP = 64 };
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[CAP];
    size_t n = 0, taken = 0, handed_back = 0;
    int next = 0;
    ib_error err;

    assert_non_null(js);
    make_stream_and_consumer(js);
    publish(js, 0, 100);
    ib_nats *conn = connect_host(e);
    natsConnection *nc = ib_nats_connection(conn);
    ib_puller *p = make_puller(conn, BATCH, 0);
    assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 5000, &err), IB_OK);
    assert_true(n > 0);
    ib_puller_chain(p, true);
    assert_int_equal(ib_puller_prefetch(p, &err), IB_OK);
    taken = n;
    ack_in_order(nc, msgs, n, &next);
    it_sleep_ms(300); /* the prefetched batch arrives; the callback chains the next */
    do {
        assert_int_equal(ib_puller_stop(p, msgs, &n, CAP, it_timeout(3000)), IB_OK);
        handed_back += n;
        ack_in_order(nc, msgs, n, &next);
    } while (n == CAP);
    printf("taken=%zu handed_back=%zu\n", taken, handed_back);
    /* the chained request was sent: more than the prefetched batch came */
    assert_true(handed_back > BATCH);
    assert_true(handed_back <= 2 * BATCH);
    assert_int_equal(delivered(js), taken + handed_back);
    ib_puller_free(p);
    ib_nats_close(conn, 1000);
    it_done(e);
}

/* The pull request waiting on the server when it goes away (kill -9: the
 * server forgets it; SIGTERM: it answers 409 "Server Shutdown", and the
 * request sent after that goes to the dying server) is never answered.
 * With a 30 s expiry, a message published once the puller has reconnected
 * must still come well before that expiry: the reconnect ended the
 * request, and the next was sent at once. */
static void lost_request_replaced(it_env *e, int sig)
{
    enum { ROUNDS = 3 };
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[1];
    size_t n = 0;
    ib_error err;
    int64_t worst = 0;

    assert_non_null(js);
    make_stream_and_consumer(js);
    ib_nats *conn = connect_host(e);
    ib_puller *p = make_puller(conn, 1, 30000);
    for (int round = 0; round < ROUNDS; round++) {
        /* idle, with a request waiting on the server */
        assert_int_equal(ib_puller_next(p, msgs, &n, 1, 300, &err), IB_OK);
        assert_int_equal(n, 0);
        uint64_t before = ib_nats_reconnects(conn);
        assert_true(sig == SIGKILL ? it_server_kill(&e->server) : it_server_stop(&e->server));
        assert_true(it_server_restart(&e->server));
        int64_t deadline = it_now_ms() + it_timeout(20000);
        while (ib_nats_reconnects(conn) == before) {
            assert_int_equal(ib_puller_next(p, msgs, &n, 1, 100, &err), IB_OK);
            assert_int_equal(n, 0);
            assert_true(it_now_ms() < deadline);
        }
        publish(js, round, 1);
        int64_t published = it_now_ms();
        while (n == 0 && it_now_ms() - published < 10000)
            assert_int_equal(ib_puller_next(p, msgs, &n, 1, 250, &err), IB_OK);
        int64_t took = it_now_ms() - published;
        worst = took > worst ? took : worst;
        if (n != 1)
            fail_msg("round %d: nothing pulled %lld ms after the reconnect", round,
                     (long long)took);
        int next = round;
        ack_in_order(ib_nats_connection(conn), msgs, n, &next);
    }
    ib_puller_stats s;
    ib_puller_stats_get(p, &s);
    printf("signal %d: worst %lld ms from publish to pull; abandoned %llu times\n", sig,
           (long long)worst, (unsigned long long)s.abandoned);
    assert_true(s.abandoned >= ROUNDS);
    ib_puller_free(p);
    ib_nats_close(conn, 1000);
    it_done(e);
}

static void request_lost_to_kill_is_replaced(void **state)
{
    lost_request_replaced(*state, SIGKILL);
}

static void request_lost_to_shutdown_is_replaced(void **state)
{
    lost_request_replaced(*state, SIGTERM);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(chained_pulls_hand_out_each_message_once, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(stop_collects_what_chained_requests_brought, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(request_lost_to_kill_is_replaced, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(request_lost_to_shutdown_is_replaced, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
