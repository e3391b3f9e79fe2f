/* SPDX-License-Identifier: Apache-2.0 */
/* The nats.c Fetch hazard (nats.c 3.4.1 overflows a heap buffer in
 * natsSubscription_Fetch when messages left over from an expired pull
 * exceed half of the next batch). The host never calls Fetch: it sends
 * pull requests over core NATS and hands out whatever reaches its inbox.
 *
 * This test produces the dangerous situation on purpose, round after
 * round: the host pulls batches of 64 with requests that expire after
 * 10 ms; the test publishes an event whose handler sleeps 25 ms, waits
 * until the host has taken it alone, then publishes 63 more at once. They
 * reach the host's inbox while it sleeps, answering a request that has
 * ended locally by the time the handler returns: up to 63 leftovers, more
 * than half of the next batch. It runs in the sanitizer build too, and
 * checks that every event was handled once.
 *
 * The puller counts a delivery against its request until the request's
 * local deadline (its expiry plus a margin) or its status, so the late
 * answers of this scenario are counted against their requests rather than
 * as leftovers; the burst still reaches the inbox while the caller sleeps
 * in its handler, which is what Fetch could not survive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "event.h"
#include "ib_test.h"
#include "it_support.h"

#define ROUND 64
#define SUBJECT "events.test.scripted"

static void publish_event(jsCtx *js, FILE *ids, const char *payload)
{
    char id[IB_ID_BUF_SIZE];
    uint8_t *buf = NULL;
    size_t len = 0;
    ib_error err;
    assert_int_equal(ib_uuid4_generate(id), IB_OK);
    ib_event_fields f = {
        .id = id,
        .type = "test.scripted",
        .payload = payload,
        .payload_len = strlen(payload),
        .created_at_ms = (int64_t)time(NULL) * 1000,
        .source = "it_fetch",
    };
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_OK);
    assert_int_equal(js_PublishAsync(js, SUBJECT, buf, (int)len, NULL), NATS_OK);
    free(buf);
    fprintf(ids, "%s\n", id);
}

static void fetch_hazard_leftovers(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids_path[PATH_MAX], cfg[PATH_MAX + 8], sp[PATH_MAX];
    const int rounds = (int)it_scaled(50, 25);
    it_proc host;
    it_argv a;

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(log, e, "calls.log"));
    it_argv_run(&a, e, "fetch");
    it_argv_plugin(&a, "scripted", cfg);
    it_argv_addl(&a, "--batch", "64", "--pull-expires", "10ms", "--flush-interval", "1ms", NULL);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "fetch", it_timeout(30000)));

    jsCtx *js = it_server_js(&e->server);
    assert_non_null(js);
    FILE *ids = fopen(it_path(ids_path, e, "ids.txt"), "we");
    assert_non_null(ids);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 30000;
    for (int r = 0; r < rounds; r++) {
        /* two log lines per event: handlers scripted and second */
        size_t before = (size_t)r * ROUND * 2;
        publish_event(js, ids, "sleep:25");
        assert_int_equal(js_PublishAsyncComplete(js, &po), NATS_OK);
        /* the handler has started sleeping once the host took the event */
        int64_t deadline = it_now_ms() + it_timeout(30000);
        it_consumer_state cs;
        while (it_consumer_get(&cs, &e->server, IT_STREAM, "fetch") && cs.pending > 0 &&
               it_now_ms() < deadline)
            it_sleep_ms(1);
        /* past the host's 1 ms flush window: it handles that event alone */
        it_sleep_ms(3);
        for (int i = 1; i < ROUND; i++)
            publish_event(js, ids, "ok");
        assert_int_equal(js_PublishAsyncComplete(js, &po), NATS_OK);
        assert_true(it_wait_lines(log, before + 2 * ROUND, it_timeout(60000)) >=
                    before + 2 * ROUND);
    }
    assert_int_equal(fclose(ids), 0);
    const long total = (long)rounds * ROUND;
    it_finish_hosts(e, "fetch", &host, 1, it_timeout(120000));

    it_tally t;
    assert_true(it_tally_file(&t, log, ids_path, "fetch/scripted/scripted", "ok", 10));
    assert_int_equal(t.expected, total);
    assert_int_equal(t.lines, total);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    assert_int_equal(t.unexpected, 0);

    it_summary sum;
    assert_true(it_summary_read(&sum, it_path(sp, e, "summary.jsonl")));
    printf("events=%ld rounds=%d pull_requests=%ld leftovers=%ld received=%ld "
           "duplicates=%ld (%s build)\n",
           total, rounds, sum.pull_requests, sum.leftovers, sum.received, sum.duplicates,
           it_sanitized() ? "sanitizer" : "normal");
    assert_int_equal(sum.worst_exit, 0);
    assert_int_equal(sum.received, total);
    assert_int_equal(sum.handled, 2 * total);
    assert_int_equal(sum.acked, total);
    assert_true(sum.pull_requests > 0);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(fetch_hazard_leftovers, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
