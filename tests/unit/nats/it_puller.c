/* SPDX-License-Identifier: Apache-2.0 */
/* The puller against a real nats-server. With batches that take little
 * of AckWait it keeps two batches ahead of the caller: every message is
 * handed out once, in stream order, while the caller is slow; and a stop
 * collects every message a request brought, so none is left delivered but
 * neither acked nor handed back. Its keep-ahead rule follows the pace and
 * the hold the caller reports, and every pull request comes from one
 * thread that is not nats.c's callback: the test is linked with
 * --wrap=natsConnection_PublishRequest and --wrap=natsConnection_Subscribe
 * to watch each request go out. Durables added and removed at run time:
 * both deliver, and a removed one's messages are handed back, never handed
 * out, and nak'ed when they come late. */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "jetstream.h"

#define DURABLE "pull"
#define ACK_WAIT_MS 30000

/* ---- what the puller sends, seen through the linker's --wrap ---- */

/* Default visibility: the linker checks the wrappers against the
 * library's own references. */
#define WRAPPER __attribute__((visibility("default")))

natsStatus __real_natsConnection_PublishRequest(natsConnection *nc, const char *subj,
                                                const char *reply, const void *data, int len);
WRAPPER natsStatus __wrap_natsConnection_PublishRequest(natsConnection *nc, const char *subj,
                                                        const char *reply, const void *data,
                                                        int len);
natsStatus __real_natsConnection_Subscribe(natsSubscription **sub, natsConnection *nc,
                                           const char *subject, natsMsgHandler cb, void *closure);
WRAPPER natsStatus __wrap_natsConnection_Subscribe(natsSubscription **sub, natsConnection *nc,
                                                   const char *subject, natsMsgHandler cb,
                                                   void *closure);

static struct {
    pthread_mutex_t mu;
    uint64_t requests;      /* pull requests published */
    uint64_t asked;         /* messages they asked for */
    uint64_t from_callback; /* published from inside a subscription's callback */
    int senders;            /* distinct threads that published them: 0, 1, or 2 = more */
    pthread_t sender;
} spy = {.mu = PTHREAD_MUTEX_INITIALIZER};

static __thread bool in_callback;

natsStatus __wrap_natsConnection_PublishRequest(natsConnection *nc, const char *subj,
                                                const char *reply, const void *data, int len)
{
    if (strstr(subj, ".CONSUMER.MSG.NEXT.") != NULL) {
        char body[128];
        snprintf(body, sizeof(body), "%.*s", len, (const char *)data);
        const char *b = strstr(body, "\"batch\":");
        pthread_mutex_lock(&spy.mu);
        spy.requests++;
        spy.asked += b != NULL ? strtoull(b + 8, NULL, 10) : 0;
        spy.from_callback += in_callback;
        if (spy.senders == 0) {
            spy.sender = pthread_self();
            spy.senders = 1;
        } else if (!pthread_equal(spy.sender, pthread_self())) {
            spy.senders = 2;
        }
        pthread_mutex_unlock(&spy.mu);
    }
    return __real_natsConnection_PublishRequest(nc, subj, reply, data, len);
}

/* Each subscription's callback runs inside a frame that marks the thread
 * as in a callback. */
typedef struct wrapped {
    natsMsgHandler cb;
    void *closure;
} wrapped;
static wrapped wraps[32];
static size_t nwraps;

static void wrapped_cb(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    const wrapped *w = closure;
    in_callback = true;
    w->cb(nc, sub, m, w->closure);
    in_callback = false;
}

natsStatus __wrap_natsConnection_Subscribe(natsSubscription **sub, natsConnection *nc,
                                           const char *subject, natsMsgHandler cb, void *closure)
{
    pthread_mutex_lock(&spy.mu);
    wrapped *w = nwraps < sizeof(wraps) / sizeof(wraps[0]) ? &wraps[nwraps++] : NULL;
    pthread_mutex_unlock(&spy.mu);
    if (w == NULL)
        fail_msg("more subscriptions than the test expects");
    *w = (wrapped){cb, closure};
    return __real_natsConnection_Subscribe(sub, nc, subject, wrapped_cb, w);
}

/* A test starts counting from nothing (a run of all tests shares them). */
static void spy_reset(void)
{
    pthread_mutex_lock(&spy.mu);
    spy.requests = spy.asked = spy.from_callback = 0;
    spy.senders = 0;
    pthread_mutex_unlock(&spy.mu);
}

static void spy_get(uint64_t *requests, uint64_t *asked)
{
    pthread_mutex_lock(&spy.mu);
    *requests = spy.requests;
    *asked = spy.asked;
    pthread_mutex_unlock(&spy.mu);
}

/* Every pull request so far came from one thread, not the caller's, and
 * none from inside nats.c's delivery callback. */
static void assert_one_sender(void)
{
    pthread_mutex_lock(&spy.mu);
    uint64_t from_callback = spy.from_callback;
    int senders = spy.senders;
    bool caller = senders > 0 && pthread_equal(spy.sender, pthread_self());
    pthread_mutex_unlock(&spy.mu);
    assert_int_equal(from_callback, 0);
    assert_int_equal(senders, 1);
    assert_false(caller);
}

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
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
}

/* A durable pull consumer of the stream, of `filter` only when not NULL. */
static void add_consumer(jsCtx *js, const char *durable, const char *filter)
{
    jsConsumerConfig cc;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;

    jsConsumerConfig_Init(&cc);
    cc.Durable = durable;
    cc.FilterSubject = filter;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = ACK_WAIT_MS * 1000LL * 1000;
    assert_int_equal(js_AddConsumer(&ci, js, IT_STREAM, &cc, NULL, &jerr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
}

static void make_stream_and_consumer(jsCtx *js)
{
    make_stream(js);
    add_consumer(js, DURABLE, NULL);
}

/* Messages on `subject` whose bodies are their numbers, from `first`. */
static void publish_to(jsCtx *js, const char *subject, int first, int count)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 30000;
    for (int i = first; i < first + count; i++) {
        char body[16];
        int len = snprintf(body, sizeof(body), "%d", i);
        assert_int_equal(js_PublishAsync(js, subject, body, len, NULL), NATS_OK);
    }
    assert_int_equal(js_PublishAsyncComplete(js, &po), NATS_OK);
}

static void publish(jsCtx *js, int first, int count)
{
    publish_to(js, "events.test.pull", first, count);
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
    ib_puller_options o = {.stream = IT_STREAM,
                           .durable = DURABLE,
                           .ack_wait_ms = ACK_WAIT_MS,
                           .batch = batch,
                           .expires_ms = expires_ms};
    ib_puller *p = NULL;
    ib_error e;
    if (ib_puller_create(&p, conn, &o, &e) != IB_OK)
        fail_msg("puller: %s", e.msg);
    return p;
}

/* The test durable with a backlog of `total` messages, and a puller of it
 * (`batch` a request) on a new connection, counted from nothing. */
static ib_puller *backlog_puller(it_env *e, jsCtx *js, int total, size_t batch, ib_nats **conn)
{
    assert_non_null(js);
    make_stream_and_consumer(js);
    publish(js, 0, total);
    spy_reset();
    *conn = connect_host(e);
    return make_puller(*conn, batch, 0);
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

    ib_nats *conn = NULL;
    ib_puller *p = backlog_puller(e, js, TOTAL, BATCH, &conn);
    natsConnection *nc = ib_nats_connection(conn);
    int64_t deadline = it_now_ms() + it_timeout(60000);
    while (next < TOTAL && it_now_ms() < deadline) {
        size_t n = 0;
        assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 1000, &err), IB_OK);
        int64_t started = it_now_ms();
        if (next % (BATCH * 8) == 0)
            it_sleep_ms(5); /* a slow batch now and then: the puller asks meanwhile */
        ack_in_order(nc, msgs, n, &next);
        /* batches take far less than AckWait/8: two batches are kept ahead */
        ib_puller_batch_took(p, it_now_ms() - started);
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
    assert_one_sender();
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
    ib_puller_batch_took(p, 0); /* quick batches: two batches are kept ahead */
    taken = n;
    ack_in_order(nc, msgs, n, &next);
    it_sleep_ms(300); /* the two batches ahead arrive while the caller works */
    do {
        assert_int_equal(ib_puller_stop(p, msgs, &n, CAP, it_timeout(3000)), IB_OK);
        handed_back += n;
        ack_in_order(nc, msgs, n, &next);
    } while (n == CAP);
    printf("taken=%zu handed_back=%zu\n", taken, handed_back);
    /* two requests were kept ahead: more than one batch came */
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

/* ---- the keep-ahead rule ---- */

/* Takes up to `max` messages (waiting up to `wait_ms`), acks them and adds
 * their count to `*taken`. */
static size_t take(ib_puller *p, natsConnection *nc, size_t max, int64_t wait_ms, uint64_t *taken)
{
    natsMsg *msgs[64];
    size_t n = 0;
    ib_error err;
    assert_true(max <= 64);
    assert_int_equal(ib_puller_next(p, msgs, &n, max, wait_ms, &err), IB_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ib_ack(nc, msgs[i], NULL), IB_OK);
        natsMsg_Destroy(msgs[i]);
    }
    *taken += n;
    return n;
}

/* Messages asked for and not taken yet, once the puller has settled while
 * the caller works (with a backlog every request is filled). */
static uint64_t ahead_after_work(uint64_t taken)
{
    uint64_t requests, asked;
    it_sleep_ms(it_timeout(300));
    spy_get(&requests, &asked);
    assert_true(asked >= taken);
    return asked - taken;
}

/* With a backlog, the messages asked for and not yet taken settle where
 * the rule puts them for the pace the caller reports: more than one batch
 * and at most two while batches take under AckWait/8, at most one under
 * AckWait/4, none beyond that or during a hold, while a caller that waits
 * always gets a batch. */
static void keep_ahead_follows_the_pace(void **state)
{
    enum { BATCH = 10, TOTAL = 600 };
    const int64_t quick = 0, medium = ACK_WAIT_MS / 8 + 1, slow = ACK_WAIT_MS / 4;
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    uint64_t taken = 0, requests, asked, before;

    ib_nats *conn = NULL;
    ib_puller *p = backlog_puller(e, js, TOTAL, BATCH, &conn);
    natsConnection *nc = ib_nats_connection(conn);

    /* quick batches: two batches ahead */
    assert_true(take(p, nc, BATCH, it_timeout(5000), &taken) > 0);
    ib_puller_batch_took(p, quick);
    uint64_t ahead = ahead_after_work(taken);
    printf("quick: ahead %llu\n", (unsigned long long)ahead);
    assert_true(ahead > BATCH && ahead <= 2 * BATCH);

    /* medium: taking what is ahead, one batch at most is asked for again */
    ib_puller_batch_took(p, medium);
    for (int i = 0; i < 4; i++) {
        take(p, nc, BATCH, it_timeout(5000), &taken);
        ib_puller_batch_took(p, medium);
        assert_true(ahead_after_work(taken) <= 2 * BATCH);
    }
    ahead = ahead_after_work(taken);
    printf("medium: ahead %llu\n", (unsigned long long)ahead);
    assert_true(ahead > 0 && ahead <= BATCH);

    /* slow: nothing ahead while the caller works... */
    ib_puller_batch_took(p, slow);
    for (int i = 0; i < 2; i++) {
        take(p, nc, BATCH, it_timeout(5000), &taken);
        ib_puller_batch_took(p, slow);
    }
    assert_int_equal(ahead_after_work(taken), 0);
    /* ...but one request, and a batch, for a caller that waits */
    spy_get(&before, &asked);
    assert_int_equal(take(p, nc, BATCH, it_timeout(5000), &taken), BATCH);
    ib_puller_batch_took(p, slow);
    assert_int_equal(ahead_after_work(taken), 0);
    spy_get(&requests, &asked);
    assert_int_equal(requests, before + 1);

    /* a hold: nothing ahead while the caller works, whatever the pace */
    ib_puller_batch_took(p, quick);
    assert_true(ahead_after_work(taken) > BATCH);
    ib_puller_hold(p);
    for (int i = 0; i < 3 && ahead_after_work(taken) > 0; i++)
        take(p, nc, BATCH, it_timeout(5000), &taken);
    assert_int_equal(ahead_after_work(taken), 0);
    /* the hold ends with the next batch's time */
    ib_puller_batch_took(p, quick);
    ahead = ahead_after_work(taken);
    assert_true(ahead > BATCH && ahead <= 2 * BATCH);

    ib_puller_stats st;
    ib_puller_stats_get(p, &st);
    spy_get(&requests, &asked);
    assert_int_equal(st.requests, requests);
    assert_int_equal(st.messages, taken);
    assert_one_sender();
    ib_puller_free(p);
    ib_nats_close(conn, 1000);
    it_done(e);
}

/* ---- durables added and removed at run time ---- */

/* The durable a delivery's reply subject names, into `out`. */
static const char *durable_of(natsMsg *m, char *out, size_t len)
{
    ib_jsack_meta meta;
    const char *reply = natsMsg_GetReply(m);
    assert_non_null(reply);
    assert_int_equal(ib_jsack_parse(&meta, reply, strlen(reply), NULL), IB_OK);
    snprintf(out, len, "%.*s", (int)meta.consumer_len, meta.consumer);
    return out;
}

static uint64_t delivery_count(natsMsg *m)
{
    ib_jsack_meta meta;
    const char *reply = natsMsg_GetReply(m);
    assert_int_equal(ib_jsack_parse(&meta, reply, strlen(reply), NULL), IB_OK);
    return meta.delivered;
}

/* Per durable "a" and "b": the next number due, in stream order. */
typedef struct two_counts {
    int a, b;
} two_counts;

/* Acks the messages, each the next number due of its durable; "b" ones
 * only while `b_allowed`. */
static void ack_two(natsConnection *nc, natsMsg **msgs, size_t n, two_counts *due, bool b_allowed)
{
    for (size_t i = 0; i < n; i++) {
        char name[32], body[16];
        durable_of(msgs[i], name, sizeof(name));
        snprintf(body, sizeof(body), "%.*s", natsMsg_GetDataLength(msgs[i]),
                 natsMsg_GetData(msgs[i]));
        int *next = strcmp(name, "a") == 0 ? &due->a : &due->b;
        if (next == &due->b && !b_allowed)
            fail_msg("message %s of the removed durable b was handed out", body);
        if (atoi(body) != *next)
            fail_msg("message %s of %s where %d was due", body, name, *next);
        (*next)++;
        assert_int_equal(ib_ack(nc, msgs[i], NULL), IB_OK);
        natsMsg_Destroy(msgs[i]);
    }
}

/* Pulls `stream`'s durable "b" with a new puller until `want` messages came
 * (within `within_ms`, far below AckWait); returns how many came, and how
 * many of them had been delivered before. */
static int pull_b_again(ib_nats *conn, int want, int64_t within_ms, int *redelivered)
{
    natsMsg *msgs[8];
    ib_puller_options o = {
        .stream = IT_STREAM, .durable = "b", .ack_wait_ms = ACK_WAIT_MS, .batch = 8};
    ib_puller *q = NULL;
    ib_error err;
    int got = 0;
    *redelivered = 0;
    assert_int_equal(ib_puller_create(&q, conn, &o, &err), IB_OK);
    int64_t deadline = it_now_ms() + within_ms;
    while (got < want && it_now_ms() < deadline) {
        size_t n = 0;
        assert_int_equal(ib_puller_next(q, msgs, &n, 8, 250, &err), IB_OK);
        for (size_t i = 0; i < n; i++) {
            *redelivered += delivery_count(msgs[i]) > 1;
            assert_int_equal(ib_ack(ib_nats_connection(conn), msgs[i], NULL), IB_OK);
            natsMsg_Destroy(msgs[i]);
        }
        got += (int)n;
    }
    ib_puller_free(q);
    return got;
}

/* Durables "a" (of events.test.a) and "b" (of events.test.b), `each`
 * messages published to each, and a puller made for "a" to which "b" is
 * added, on a new connection. */
static ib_puller *two_durables(it_env *e, jsCtx *js, int each, size_t batch, int64_t expires_ms,
                               ib_nats **conn)
{
    ib_puller_options o = {.stream = IT_STREAM,
                           .durable = "a",
                           .ack_wait_ms = ACK_WAIT_MS,
                           .batch = batch,
                           .expires_ms = expires_ms};
    ib_puller_durable b = {.stream = IT_STREAM, .durable = "b", .ack_wait_ms = ACK_WAIT_MS};
    ib_puller *p = NULL;
    ib_error err;
    assert_non_null(js);
    make_stream(js);
    add_consumer(js, "a", "events.test.a");
    add_consumer(js, "b", "events.test.b");
    if (each > 0) {
        publish_to(js, "events.test.a", 0, each);
        publish_to(js, "events.test.b", 0, each);
    }
    spy_reset();
    *conn = connect_host(e);
    assert_int_equal(ib_puller_create(&p, *conn, &o, &err), IB_OK);
    assert_int_equal(ib_puller_add(p, &b, &err), IB_OK);
    assert_int_equal(ib_puller_add(p, &b, &err), IB_ERR_INVALID_ARG); /* once */
    return p;
}

/* Durable "b" joins a puller of "a": both deliver, each in order. Removed
 * while messages of it wait ahead, it hands them back (the caller naks
 * them), and after that nothing of it is handed out while "a" goes on;
 * another puller then gets every "b" message not acked, redelivered
 * within a fraction of AckWait. */
static void durables_added_and_removed_at_run_time(void **state)
{
    enum { BATCH = 8, EACH = 60, CAP = 64 };
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[CAP];
    two_counts due = {0, 0};
    size_t n = 0, handed_back = 0;
    ib_error err;

    ib_nats *conn = NULL;
    ib_puller *p = two_durables(e, js, EACH, BATCH, 0, &conn);
    natsConnection *nc = ib_nats_connection(conn);

    int64_t deadline = it_now_ms() + it_timeout(30000);
    while ((due.a < EACH || due.b < EACH) && it_now_ms() < deadline) {
        assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 1000, &err), IB_OK);
        ack_two(nc, msgs, n, &due, true);
        ib_puller_batch_took(p, 0);
    }
    assert_int_equal(due.a, EACH);
    assert_int_equal(due.b, EACH);

    /* more of both; "b" is removed while its next batches wait ahead */
    publish_to(js, "events.test.a", EACH, EACH);
    publish_to(js, "events.test.b", EACH, EACH);
    it_sleep_ms(it_timeout(300));
    do {
        assert_int_equal(ib_puller_remove(p, IT_STREAM, "b", msgs, &n, CAP, it_timeout(3000)),
                         IB_OK);
        for (size_t i = 0; i < n; i++) {
            char name[32];
            assert_string_equal(durable_of(msgs[i], name, sizeof(name)), "b");
            assert_int_equal(ib_nak(nc, msgs[i], 0, NULL), IB_OK);
            natsMsg_Destroy(msgs[i]);
        }
        handed_back += n;
    } while (n == CAP);
    printf("handed back %zu of b\n", handed_back);
    assert_true(handed_back > 0 && handed_back <= 2 * BATCH);
    /* removed twice: the second finds nothing */
    assert_int_equal(ib_puller_remove(p, IT_STREAM, "b", msgs, &n, CAP, 0), IB_OK);
    assert_int_equal(n, 0);

    deadline = it_now_ms() + it_timeout(30000);
    int64_t quiet_until = it_now_ms() + 1000;
    while ((due.a < 2 * EACH || it_now_ms() < quiet_until) && it_now_ms() < deadline) {
        assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 200, &err), IB_OK);
        ack_two(nc, msgs, n, &due, false);
        ib_puller_batch_took(p, 0);
    }
    assert_int_equal(due.a, 2 * EACH);
    assert_one_sender();
    ib_puller_free(p);

    int redelivered = 0;
    int got = pull_b_again(conn, EACH, it_timeout(10000), &redelivered);
    printf("b again: %d, %d of them redelivered\n", got, redelivered);
    assert_int_equal(got, EACH);
    assert_true(redelivered >= (int)handed_back);
    ib_nats_close(conn, 1000);
    it_done(e);
}

/* A durable removed while its requests still wait on the server: what
 * they bring afterwards is never handed out; the puller naks it, so
 * another puller gets it within a fraction of AckWait. */
static void late_answers_of_a_removed_durable_are_nak_ed(void **state)
{
    enum { BATCH = 8, CAP = 16, LATE = 5 };
    it_env *e = *state;
    jsCtx *js = it_server_js(&e->server);
    natsMsg *msgs[CAP];
    two_counts due = {0, 0};
    size_t n = 0;
    ib_error err;

    ib_nats *conn = NULL;
    ib_puller *p = two_durables(e, js, 0, BATCH, 2000, &conn);
    natsConnection *nc = ib_nats_connection(conn);
    /* idle: requests of both wait on the server */
    assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 300, &err), IB_OK);
    assert_int_equal(n, 0);
    /* give up on "b" at once, its requests still waiting */
    assert_int_equal(ib_puller_remove(p, IT_STREAM, "b", msgs, &n, CAP, 0), IB_OK);
    assert_int_equal(n, 0);
    publish_to(js, "events.test.b", 0, LATE);
    publish_to(js, "events.test.a", 0, 1);
    int64_t deadline = it_now_ms() + it_timeout(10000);
    while (due.a < 1 && it_now_ms() < deadline) {
        assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 200, &err), IB_OK);
        ack_two(nc, msgs, n, &due, false);
    }
    assert_int_equal(due.a, 1);
    ib_puller_stats st;
    deadline = it_now_ms() + it_timeout(5000);
    do {
        assert_int_equal(ib_puller_next(p, msgs, &n, BATCH, 100, &err), IB_OK);
        ack_two(nc, msgs, n, &due, false);
        ib_puller_stats_get(p, &st);
    } while (st.nak_late < LATE && it_now_ms() < deadline);
    printf("nak'ed late: %llu\n", (unsigned long long)st.nak_late);
    assert_true(st.nak_late >= LATE);
    ib_puller_free(p);

    int redelivered = 0;
    assert_int_equal(pull_b_again(conn, LATE, it_timeout(10000), &redelivered), LATE);
    assert_int_equal(redelivered, LATE);
    ib_nats_close(conn, 1000);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(chained_pulls_hand_out_each_message_once, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(stop_collects_what_chained_requests_brought, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(request_lost_to_kill_is_replaced, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(request_lost_to_shutdown_is_replaced, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(keep_ahead_follows_the_pace, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(durables_added_and_removed_at_run_time, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(late_answers_of_a_removed_durable_are_nak_ed, it_setup,
                                    it_teardown),
};

IB_TEST_MAIN(tests)
