/* SPDX-License-Identifier: Apache-2.0 */
/* Server replies to pull requests (issue 9, cause 6): a consumer whose
 * limits would refuse every pull request is refused at bind with exit 2
 * naming the option; refusals at run time are logged with the server's
 * text and backed off instead of resent at once; a deleted consumer makes
 * /readyz false and ends the process with exit 1 after a grace period; a
 * kv: bucket deleted under an idle host makes /readyz false, and its
 * return makes it true again (the watcher's recorder probe). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

/* The stream, and a pull consumer `durable` on it with the given request
 * limits (0 = the server's default), made by the test itself. */
static void make_consumer(it_env *e, const char *durable, int64_t max_batch, int64_t max_expires_ms,
                          int64_t max_waiting)
{
    jsCtx *js = it_server_js(&e->server);
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    assert_non_null(js);
    if (js_GetStreamInfo(&si, js, IT_STREAM, NULL, &jerr) != NATS_OK) {
        const char *subjects[] = {IT_SUBJECTS};
        jsStreamConfig sc;
        jsStreamConfig_Init(&sc);
        sc.Name = IT_STREAM;
        sc.Subjects = subjects;
        sc.SubjectsLen = 1;
        assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    }
    jsStreamInfo_Destroy(si);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable;
    cc.AckPolicy = js_AckExplicit;
    cc.MaxDeliver = -1;
    cc.MaxRequestBatch = max_batch;
    cc.MaxRequestExpires = max_expires_ms * 1000000LL;
    cc.MaxWaiting = max_waiting;
    assert_int_equal(js_AddConsumer(&ci, js, IT_STREAM, &cc, NULL, &jerr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
}

/* How many lines of the file at `path` contain `needle`. */
static size_t lines_with(const char *path, const char *needle)
{
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, path), found = 0;
    for (size_t i = 0; i < n; i++)
        if (strstr(lines[i], needle) != NULL)
            found++;
    it_lines_free(lines, n);
    return found;
}

static void host_argv(it_argv *a, it_env *e, const char *durable, const char *log)
{
    char cfg[PATH_MAX + 8];
    it_argv_run(a, e, durable);
    snprintf(cfg, sizeof(cfg), "file=%s", log);
    it_argv_plugin(a, "scripted", cfg);
}

/* Each limit, exceeded by the host's options, fails the bind with exit 2
 * and a message naming the setting and both values. On the old code the
 * host ran, every pull request refused at once. */
static void request_limits_refused_at_bind(void **state)
{
    static const struct {
        const char *durable;
        int64_t max_batch, max_expires_ms, max_waiting;
        const char *options[5];
        const char *expect;
    } cases[] = {
        {"rb",
         8,
         0,
         0,
         {"--batch", "64", NULL},
         "pull batch size 64 exceeds the consumer's MaxRequestBatch 8"},
        {"re",
         0,
         500,
         0,
         {"--pull-expires", "2s", NULL},
         "pull request lifetime 2000ms exceeds the consumer's MaxRequestExpires 500ms"},
        {"rw", 0, 0, 3, {NULL}, "MaxWaiting 3 is too small"},
    };
    it_env *e = *state;
    char log[PATH_MAX];
    it_path(log, e, "calls.log");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        it_argv a;
        it_proc host;
        make_consumer(e, cases[i].durable, cases[i].max_batch, cases[i].max_expires_ms,
                      cases[i].max_waiting);
        host_argv(&a, e, cases[i].durable, log);
        for (const char *const *o = cases[i].options; *o != NULL; o++)
            it_argv_add(&a, *o);
        int status = it_proc_run(&host, e->dir, "host", NULL, a.v, it_timeout(20000));
        it_argv_free(&a);
        printf("%s: exit %d\n", cases[i].durable, status);
        assert_int_equal(status, 2);
        if (!it_file_contains(host.err_path, cases[i].expect))
            fail_msg("%s: no '%s' in %s", cases[i].durable, cases[i].expect, host.err_path);
    }
    it_done(e);
}

/* Occupies every waiting slot of a consumer with pull requests of the
 * test's own that last a minute, so the host's requests are refused with
 * 409 "Exceeded MaxWaiting". */
static natsSubscription *occupy_waiting(it_env *e, const char *durable, int slots)
{
    natsConnection *nc = it_server_client(&e->server);
    natsSubscription *sub = NULL;
    char subject[128];
    const char *body = "{\"batch\":1,\"expires\":60000000000}";
    assert_non_null(nc);
    assert_int_equal(natsConnection_SubscribeSync(&sub, nc, "it.occupy"), NATS_OK);
    snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.MSG.NEXT.%s.%s", IT_STREAM, durable);
    for (int i = 0; i < slots; i++)
        assert_int_equal(
            natsConnection_PublishRequest(nc, subject, "it.occupy", body, (int)strlen(body)),
            NATS_OK);
    assert_int_equal(natsConnection_FlushTimeout(nc, 5000), NATS_OK);
    return sub;
}

/* Refused pull requests are logged with the server's text and backed off:
 * a few dozen requests in 4 s, not tens of thousands, and one log line per
 * 10 s for the same refusal. */
static void refused_pulls_backed_off(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], summary[PATH_MAX];
    it_argv a;
    it_proc host;
    it_summary sum;

    make_consumer(e, "mw", 0, 0, 4);
    natsSubscription *occupied = occupy_waiting(e, "mw", 4);
    host_argv(&a, e, "mw", it_path(log, e, "calls.log"));
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    it_sleep_ms(4000);
    assert_true(it_proc_running(&host));
    assert_int_equal(it_proc_stop(&host, SIGTERM, it_timeout(30000)), 0);
    natsSubscription_Destroy(occupied);

    assert_true(it_summary_read(&sum, it_path(summary, e, "summary.jsonl")));
    printf("pull requests in 4 s: %ld\n", sum.pull_requests);
    assert_true(sum.pull_requests >= 2);
    assert_true(sum.pull_requests < 100);
    assert_true(it_file_contains(host.err_path, "pull request refused by the server"));
    assert_true(it_file_contains(host.err_path, "Exceeded MaxWaiting"));
    /* rate-limited: the same refusal is logged once in 10 s */
    assert_int_equal(lines_with(host.err_path, "pull request refused"), 1);
    it_done(e);
}

/* Polls /readyz until it answers `want` or `timeout_ms` passes; returns the
 * last answer and prints how long it took. */
static int wait_readyz(it_env *e, int port, int want, int64_t timeout_ms, const char *what)
{
    int64_t start = it_now_ms(), deadline = start + timeout_ms;
    int got;
    while ((got = it_http_get(NULL, e, port, "/readyz")) != want && it_now_ms() < deadline)
        it_sleep_ms(100);
    printf("/readyz %d %lld ms after %s\n", got, (long long)(it_now_ms() - start), what);
    return got;
}

/* Starts a host on `durable` with --http on a free port (and `recorder`
 * unless NULL), waits until it is bound and /readyz answers 200, and
 * returns the port. */
static int start_ready_host(it_proc *host, it_env *e, const char *durable, const char *recorder)
{
    char log[PATH_MAX], addr[64];
    it_argv a;
    int port = it_free_port();
    assert_true(port > 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    host_argv(&a, e, durable, it_path(log, e, "calls.log"));
    it_argv_addl(&a, "--http", addr, NULL);
    if (recorder != NULL)
        it_argv_addl(&a, "--recorder", recorder, NULL);
    assert_true(it_spawn(host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
    assert_int_equal(wait_readyz(e, port, 200, it_timeout(30000), "start"), 200);
    return port;
}

/* The consumer is deleted under a running host: /readyz turns 503, an
 * error is logged, and the process exits 1 once the grace period (10 s)
 * has passed. On the old code it idled forever, ready. */
static void deleted_consumer_exits_1(void **state)
{
    it_env *e = *state;
    it_proc host;
    int port = start_ready_host(&host, e, "gone", NULL);

    jsErrCode jerr = 0;
    assert_int_equal(js_DeleteConsumer(it_server_js(&e->server), IT_STREAM, "gone", NULL, &jerr),
                     NATS_OK);
    int64_t deleted_at = it_now_ms();
    int ready = 200;
    int64_t deadline = deleted_at + it_timeout(8000);
    while ((ready = it_http_get(NULL, e, port, "/readyz")) == 200 && it_now_ms() < deadline)
        it_sleep_ms(100);
    printf("/readyz %d after %lld ms\n", ready, (long long)(it_now_ms() - deleted_at));
    assert_int_equal(ready, 503);

    int status = it_proc_wait(&host, it_timeout(30000));
    int64_t lived = it_now_ms() - deleted_at;
    printf("exit %d, %lld ms after the deletion\n", status, (long long)lived);
    assert_int_equal(status, 1);
    assert_true(lived >= 9000);
    assert_true(it_file_contains(host.err_path, "consumer deleted"));
    it_done(e);
}

/* The consumer is deleted while no pull request of the host waits on the
 * server, so no 409 "Consumer Deleted" comes, and nats-server 2.9 answers
 * the requests that follow with nothing at all. The host is stopped
 * (SIGSTOP) past its request's 1 s expiry, the consumer deleted, the host
 * resumed: the consumer info the watcher reads must still turn /readyz
 * 503 and end the process with exit 1. Before, it idled forever, ready
 * (seen once in a loaded sanitizer run of deleted_consumer_exits_1). */
static void consumer_deleted_between_requests_exits_1(void **state)
{
    it_env *e = *state;
    it_proc host;
    int port = start_ready_host(&host, e, "between", NULL);

    assert_true(it_proc_signal(&host, SIGSTOP));
    it_sleep_ms(2500); /* the request in flight expires on the server */
    jsErrCode jerr = 0;
    assert_int_equal(js_DeleteConsumer(it_server_js(&e->server), IT_STREAM, "between", NULL, &jerr),
                     NATS_OK);
    int64_t deleted_at = it_now_ms();
    assert_true(it_proc_signal(&host, SIGCONT));
    /* the watcher reads the consumer info every 5 s */
    assert_int_equal(wait_readyz(e, port, 503, it_timeout(15000), "deleting the consumer"), 503);
    printf("/readyz 503 %lld ms after the deletion\n", (long long)(it_now_ms() - deleted_at));
    int status = it_proc_wait(&host, it_timeout(30000));
    printf("exit %d, %lld ms after the deletion\n", status, (long long)(it_now_ms() - deleted_at));
    assert_int_equal(status, 1);
    assert_true(it_file_contains(host.err_path, "consumer deleted"));
    it_done(e);
}

static double recorder_up(it_env *e, int port)
{
    char *body = NULL;
    double v = -1;
    assert_int_equal(it_http_get(&body, e, port, "/metrics"), 200);
    assert_true(it_prom_value(&v, body, "ibus_recorder_up"));
    free(body);
    return v;
}

/* The kv: bucket is deleted under an idle host: no commit runs, yet the
 * recorder probe turns /readyz 503 and ibus_recorder_up 0 within a few
 * seconds, with one log line; once the bucket is back, both recover. On
 * the old code the host stayed ready until the next event came. */
static void deleted_bucket_not_ready(void **state)
{
    it_env *e = *state;
    it_proc host;
    int port = start_ready_host(&host, e, "probe", "kv:probe-markers?create=1");
    assert_true(recorder_up(e, port) == 1);

    jsCtx *js = it_server_js(&e->server);
    jsErrCode jerr = 0;
    assert_int_equal(js_DeleteStream(js, "KV_probe-markers", NULL, &jerr), NATS_OK);
    assert_int_equal(wait_readyz(e, port, 503, it_timeout(10000), "deleting the bucket"), 503);
    assert_true(recorder_up(e, port) == 0);
    assert_true(it_file_contains(host.err_path, "recorder failing"));
    assert_true(it_file_contains(host.err_path, "does not exist"));

    kvStore *kv = NULL;
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = "probe-markers";
    kc.History = 1;
    assert_int_equal(js_CreateKeyValue(&kv, js, &kc), NATS_OK);
    kvStore_Destroy(kv);
    assert_int_equal(wait_readyz(e, port, 200, it_timeout(10000), "recreating it"), 200);
    assert_true(recorder_up(e, port) == 1);
    assert_true(it_file_contains(host.err_path, "recorder works again"));

    /* one line per change of state, not one per probe */
    assert_int_equal(lines_with(host.err_path, "recorder failing"), 1);
    assert_int_equal(it_proc_stop(&host, SIGTERM, it_timeout(30000)), 0);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(request_limits_refused_at_bind, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(refused_pulls_backed_off, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(deleted_consumer_exits_1, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(consumer_deleted_between_requests_exits_1, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(deleted_bucket_not_ready, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
