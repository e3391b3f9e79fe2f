/* SPDX-License-Identifier: Apache-2.0 */
/* --http: /healthz, /readyz and /metrics scraped with curl during and after
 * a run; the counters must equal what was published, dropped as duplicates
 * and dead-lettered (issue 6). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

static double metric(const char *body, const char *series)
{
    double v = -1;
    if (!it_prom_value(&v, body, series))
        fail_msg("series %s missing from /metrics", series);
    return v;
}

static void expect_metric(const char *body, const char *series, long want)
{
    double v = metric(body, series);
    if ((long)v != want)
        fail_msg("%s is %.0f, expected %ld", series, v, want);
}

static void metrics_scrape(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], cfg[PATH_MAX + 8], addr[64], count[24];
    char *body = NULL;
    it_proc host;
    it_argv a;
    it_published orders;
    const long n = it_scaled(2000, 500);
    int port = it_free_port();
    assert_true(port > 0);

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    it_argv_run(&a, e, "metrics");
    it_argv_plugin(&a, "audit", cfg);
    it_argv_plugin(&a, "scripted", NULL);
    it_argv_addl(&a, "--http", addr, NULL);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "metrics", it_timeout(30000)));

    /* alive, and ready once bound */
    int64_t deadline = it_now_ms() + it_timeout(30000);
    int ready = 0;
    while ((ready = it_http_get(NULL, e, port, "/readyz")) != 200 && it_now_ms() < deadline)
        it_sleep_ms(100);
    assert_int_equal(ready, 200);
    assert_int_equal(it_http_get(NULL, e, port, "/healthz"), 200);
    assert_int_equal(it_http_get(NULL, e, port, "/no-such-page"), 404);

    snprintf(count, sizeof(count), "%ld", n);
    assert_int_equal(it_publish(&orders, e, NULL, "--type", "order.created", "--count", count,
                                "--duplicates", "0.2", NULL),
                     0);
    /* scrape during the run */
    assert_true(it_wait_lines(audit, (size_t)n / 10, it_timeout(60000)) >= (size_t)n / 10);
    assert_int_equal(it_http_get(&body, e, port, "/metrics"), 200);
    assert_non_null(body);
    double during = metric(body, "ibus_events_received_total");
    assert_true(during >= 1 && during <= (double)orders.published);
    assert_true(metric(body, "ibus_events_handled_total") <= (double)orders.unique);
    free(body);

    /* what goes wrong, counted by reason */
    assert_int_equal(
        it_publish(NULL, e, NULL, "--type", "test.scripted", "reject", "reject", "reject", NULL),
        0);
    assert_int_equal(
        it_publish(NULL, e, NULL, "--raw", "--subject", "events.raw", "junk-1", "junk-2", NULL), 0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.scripted", "--unchecked-id", "--id",
                                "0000", "ok", NULL),
                     0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "nobody.listens", "--count", "4", NULL),
                     0);
    assert_int_equal(it_wait_stream_count(&e->server, "DLQ_metrics", 6, it_timeout(60000)), 6);
    it_consumer_state cs;
    assert_true(it_wait_consumer_idle(&cs, &e->server, IT_STREAM, "metrics", it_timeout(120000)));

    /* scrape after the run, while the process still serves */
    assert_int_equal(it_http_get(&body, e, port, "/metrics"), 200);
    assert_non_null(body);
    const long received = orders.published + 3 + 2 + 1 + 4;
    printf("published %ld orders (%ld unique) + 10 others\n", orders.published, orders.unique);
    expect_metric(body, "ibus_events_received_total", received);
    /* the second handler of test.scripted succeeds on the rejected events */
    expect_metric(body, "ibus_events_handled_total", orders.unique + 3);
    expect_metric(body, "ibus_duplicates_dropped_total", orders.published - orders.unique);
    expect_metric(body, "ibus_handler_failures_total", 3);
    expect_metric(body, "ibus_events_unhandled_total", 4);
    expect_metric(body, "ibus_dead_lettered_total{reason=\"rejected\"}", 3);
    expect_metric(body, "ibus_dead_lettered_total{reason=\"decode\"}", 2);
    expect_metric(body, "ibus_dead_lettered_total{reason=\"invalid-id\"}", 1);
    expect_metric(body, "ibus_dead_lettered_total{reason=\"max-deliver\"}", 0);
    expect_metric(body, "ibus_acks_total", orders.published + 4);
    expect_metric(body, "ibus_connected", 1);
    expect_metric(body, "ibus_consumer_bound", 1);
    assert_true(metric(body, "ibus_handle_seconds_count") >= (double)orders.unique);
    /* no unbounded labels: an event id never becomes one */
    assert_null(strstr(body, "event_id"));
    free(body);
    assert_int_equal(it_http_get(NULL, e, port, "/readyz"), 200);

    it_finish_hosts(e, "metrics", &host, 1, it_timeout(60000));
    it_summary sum;
    assert_true(it_summary_read(&sum, it_path(audit, e, "summary.jsonl")));
    assert_int_equal(sum.received, received);
    assert_int_equal(sum.dead_lettered, 6);
    it_done(e);
}

/* ---- issue 14: per consumer, the crash window, readiness, pending ---- */

#define C_SCRIPTED "consumers/scripted/scripted"
#define C_SECOND "consumers/scripted/second"
#define C_OTHER "consumers/scripted/other"

static const char *const run_results[] = {"handled",  "duplicate",  "retry",          "rejected",
                                          "conflict", "claim-lost", "recorder-failed"};

/* ibus_consumer_runs_total of one consumer and result. */
static double runs(const char *body, const char *consumer, const char *result)
{
    char series[256];
    snprintf(series, sizeof(series), "ibus_consumer_runs_total{consumer=\"%s\",result=\"%s\"}",
             consumer, result);
    return metric(body, series);
}

/* Every result of one consumer equals `want` (same order as run_results). */
static void expect_runs(const char *body, const char *consumer, const long want[7])
{
    for (size_t r = 0; r < 7; r++) {
        double v = runs(body, consumer, run_results[r]);
        if ((long)v != want[r])
            fail_msg("%s %s is %.0f, expected %ld", consumer, run_results[r], v, want[r]);
    }
}

static double hist_count(const char *body, const char *consumer)
{
    char series[256];
    snprintf(series, sizeof(series), "ibus_consumer_handle_seconds_count{consumer=\"%s\"}",
             consumer);
    return metric(body, series);
}

static char *scrape(it_env *e, int port)
{
    char *body = NULL;
    assert_int_equal(it_http_get(&body, e, port, "/metrics"), 200);
    assert_non_null(body);
    return body;
}

/* Polls until /readyz answers `status` and a scrape right after shows
 * ibus_ready as `want`: both come from one function, so they agree. Until
 * the process listens (a sanitizer build starts slowly) there is nothing
 * to scrape: wait. */
static void wait_ready(it_env *e, int port, int status, long want)
{
    int64_t deadline = it_now_ms() + it_timeout(30000);
    for (;;) {
        int got = it_http_get(NULL, e, port, "/readyz");
        double v = -1;
        if (got > 0) {
            char *body = scrape(e, port);
            v = metric(body, "ibus_ready");
            free(body);
        }
        if (got == status && (long)v == want)
            return;
        if (it_now_ms() > deadline)
            fail_msg("/readyz %d with ibus_ready %.0f, expected %d with %ld", got, v, status, want);
        it_sleep_ms(200);
    }
}

/* A known workload, then exact counts per consumer identity:
 *   A  "ok", published twice with one id: the copy is a duplicate for both
 *      handlers of test.scripted (delivery count 1: not the crash window);
 *   B  "reject": scripted rejects (dead letter), second handles;
 *   C  "retry:1": scripted retries once, second handles; on the redelivery
 *      second is skipped as marked, but scripted runs: not the crash
 *      window, no redelivered duplicate;
 *   D  test.other "ok": other handles. */
static void per_consumer_workload(it_env *e, int port)
{
    static const char id_a[] = "0f8fad5bd9cb469fa16570867728950e";
    for (int i = 0; i < 2; i++)
        assert_int_equal(
            it_publish(NULL, e, NULL, "--type", "test.scripted", "--id", id_a, "ok", NULL), 0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.scripted", "reject", NULL), 0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.scripted", "retry:1", NULL), 0);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.other", "ok", NULL), 0);
    assert_int_equal(it_wait_stream_count(&e->server, "DLQ_consumers", 1, it_timeout(60000)), 1);
    it_consumer_state cs;
    assert_true(it_wait_consumer_idle(&cs, &e->server, IT_STREAM, "consumers", it_timeout(120000)));

    char *body = scrape(e, port);
    /*                          handled dup retry rej conflict lost recorder */
    const long scripted[7] = {2, 1, 1, 1, 0, 0, 0};
    const long second[7] = {3, 2, 0, 0, 0, 0, 0};
    const long other[7] = {1, 0, 0, 0, 0, 0, 0};
    expect_runs(body, C_SCRIPTED, scripted);
    expect_runs(body, C_SECOND, second);
    expect_runs(body, C_OTHER, other);
    expect_metric(body, "ibus_redelivered_duplicates_total", 0);
    expect_metric(body, "ibus_duplicates_dropped_total", 3);
    expect_metric(body, "ibus_redeliveries_total", 1);
    /* one histogram sample per call that ran */
    assert_true(hist_count(body, C_SCRIPTED) == 4);
    assert_true(hist_count(body, C_SECOND) == 3);
    assert_true(hist_count(body, C_OTHER) == 1);
    free(body);
}

/* While the only handler sleeps, nothing is decoded, yet the pending
 * gauges follow the server: the watcher reads the consumer's info. */
static void pending_while_blocked(it_env *e, int port)
{
    it_consumer_state cs;
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.other", "sleep:15000", NULL), 0);
    int64_t deadline = it_now_ms() + it_timeout(20000);
    while (!(it_consumer_get(&cs, &e->server, IT_STREAM, "consumers") && cs.ack_pending == 1 &&
             cs.pending == 0)) {
        assert_true(it_now_ms() < deadline);
        it_sleep_ms(50);
    }
    /* the handler runs now; it was delivered with nothing behind it */
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.other", "--count", "6", NULL), 0);
    deadline = it_now_ms() + 11000; /* two watcher periods, well inside the sleep */
    for (;;) {
        assert_true(it_consumer_get(&cs, &e->server, IT_STREAM, "consumers"));
        char *body = scrape(e, port);
        double pending = metric(body, "ibus_consumer_pending");
        double ack_pending = metric(body, "ibus_consumer_ack_pending");
        free(body);
        if (pending >= 1 && (uint64_t)pending == cs.pending &&
            (uint64_t)ack_pending == cs.ack_pending && pending + ack_pending == 7)
            break;
        if (it_now_ms() > deadline)
            fail_msg("gauges pending %.0f ack_pending %.0f, server %" PRIu64 " and %" PRIu64,
                     pending, ack_pending, cs.pending, cs.ack_pending);
        it_sleep_ms(250);
    }
}

/* `ibus run` of the consumer_series test: the scripted plugin writing to
 * `cfg`, metrics on `addr`, one message per pull (so a blocked handler
 * leaves the rest pending), a short AckWait (so a lost ack's message comes
 * back soon). Returns once /readyz says ready. */
static void spawn_consumers(it_env *e, it_proc *host, const char *cfg, const char *addr, int port)
{
    it_argv a;
    it_argv_run(&a, e, "consumers");
    it_argv_plugin(&a, "scripted", cfg);
    it_argv_addl(&a, "--http", addr, "--batch", "1", "--retry-delay", "200ms", "--ack-wait", "3s",
                 NULL);
    assert_true(it_spawn(host, e, "host", &a));
    it_argv_free(&a);
    wait_ready(e, port, 200, 1);
}

/* The three counters of the crash window, read in one scrape; false while
 * a series is missing. */
static bool crash_counts(double *crash, double *dups, double *handled, it_env *e, int port)
{
    char *body = scrape(e, port);
    bool have = it_prom_value(crash, body, "ibus_redelivered_duplicates_total") &&
                it_prom_value(dups, body, "ibus_duplicates_dropped_total") &&
                it_prom_value(handled, body, "ibus_events_handled_total");
    free(body);
    return have;
}

/* The crash window for real: the handler finishes while the server is
 * down, so its mark is durable and its ack waits in the client's reconnect
 * buffer; kill -9 loses it. The next process gets the message back with
 * delivery count 2 or more and every handler marked: it handles nothing,
 * and every duplicate it drops is a redelivered one. How many times the
 * server delivers it again is not ours to fix (a slow, sanitized process
 * can miss the 3 s AckWait once more): at least once. */
static void ack_lost(it_env *e, it_proc *host, const char *cfg, const char *addr, int port)
{
    it_consumer_state cs;
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.other", "sleep:3000", NULL), 0);
    int64_t deadline = it_now_ms() + it_timeout(20000);
    while (!(it_consumer_get(&cs, &e->server, IT_STREAM, "consumers") && cs.ack_pending == 1)) {
        assert_true(it_now_ms() < deadline);
        it_sleep_ms(50);
    }
    assert_true(it_server_stop(&e->server));
    it_sleep_ms(4000); /* the handler returns and is marked; its ack is held back */
    assert_true(it_proc_signal(host, SIGKILL));
    it_proc_wait(host, 10000);
    assert_true(it_server_restart(&e->server));
    spawn_consumers(e, host, cfg, addr, port);
    deadline = it_now_ms() + it_timeout(30000);
    double crash = -1, dups = -1, handled = -1;
    for (;;) {
        bool have = crash_counts(&crash, &dups, &handled, e, port);
        if (have && handled != 0)
            fail_msg("handled %.0f after the lost ack: the marked event ran again", handled);
        if (have && crash >= 1 && crash == dups)
            break;
        if (it_now_ms() > deadline)
            fail_msg("redelivered duplicates %.0f, duplicates %.0f, handled %.0f: expected at "
                     "least 1, as many, 0",
                     crash, dups, handled);
        it_sleep_ms(250);
    }
    /* settled: the message acked, nothing left to redeliver */
    assert_true(it_wait_consumer_idle(&cs, &e->server, IT_STREAM, "consumers", it_timeout(60000)));
    assert_true(crash_counts(&crash, &dups, &handled, e, port));
    printf("lost ack: redelivered duplicates %.0f, duplicates %.0f, handled %.0f\n", crash, dups,
           handled);
    if (!(crash >= 1 && crash == dups && handled == 0))
        fail_msg("settled: redelivered duplicates %.0f, duplicates %.0f, handled %.0f: expected at "
                 "least 1, as many, 0",
                 crash, dups, handled);
}

static void consumer_series(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], cfg[PATH_MAX + 8], addr[64];
    it_proc host;
    int port = it_free_port();
    assert_true(port > 0);

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    snprintf(cfg, sizeof(cfg), "file=%s", it_path(log, e, "scripted.log"));
    spawn_consumers(e, &host, cfg, addr, port);

    /* every consumer and result is there, at 0, before any event */
    char *body = scrape(e, port);
    const long zero[7] = {0};
    expect_runs(body, C_SCRIPTED, zero);
    expect_runs(body, C_SECOND, zero);
    expect_runs(body, C_OTHER, zero);
    assert_true(hist_count(body, C_OTHER) == 0);
    expect_metric(body, "ibus_redelivered_duplicates_total", 0);
    free(body);

    per_consumer_workload(e, port);
    pending_while_blocked(e, port);
    it_consumer_state cs;
    assert_true(it_wait_consumer_idle(&cs, &e->server, IT_STREAM, "consumers", it_timeout(120000)));

    ack_lost(e, &host, cfg, addr, port);

    /* readiness: the server goes away and comes back */
    assert_true(it_server_stop(&e->server));
    wait_ready(e, port, 503, 0);
    assert_true(it_server_restart(&e->server));
    wait_ready(e, port, 200, 1);

    it_finish_hosts(e, "consumers", &host, 1, it_timeout(60000));
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(metrics_scrape, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(consumer_series, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
