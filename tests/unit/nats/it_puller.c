/* The puller against a real nats-server, with chained requests on (the
 * delivery callback sends the next pull request the moment a batch has
 * arrived): every message is handed out once, in stream order, while the
 * caller is slow; and a stop after chaining collects every message a
 * request brought, so none is left delivered but neither acked nor
 * handed back. */
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

static ib_puller *make_puller(natsConnection *nc, size_t batch)
{
    ib_puller_options o = {.stream = IT_STREAM, .durable = DURABLE, .batch = batch};
    ib_puller *p = NULL;
    ib_error e;
    if (ib_puller_create(&p, nc, &o, &e) != IB_OK)
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
    natsConnection *nc = it_server_client(&e->server);
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[BATCH];
    int next = 0;
    ib_error err;

    assert_non_null(nc);
    make_stream_and_consumer(js);
    publish(js, 0, TOTAL);
    ib_puller *p = make_puller(nc, BATCH);
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
    it_done(e);
}

/* Stop right after a slow batch, with the next request(s) sent by the
 * callback: what they brought comes back from ib_puller_stop. */
static void stop_collects_what_chained_requests_brought(void **state)
{
    enum { BATCH = 8, CAP = 64 };
    it_env *e = *state;
    natsConnection *nc = it_server_client(&e->server);
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[CAP];
    size_t n = 0, taken = 0, handed_back = 0;
    int next = 0;
    ib_error err;

    assert_non_null(nc);
    make_stream_and_consumer(js);
    publish(js, 0, 100);
    ib_puller *p = make_puller(nc, BATCH);
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
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(chained_pulls_hand_out_each_message_once, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(stop_collects_what_chained_requests_brought, it_setup,
                                    it_teardown),
};

IB_TEST_MAIN(tests)
