/* --http: /healthz, /readyz and /metrics scraped with curl during and after
 * a run; the counters must equal what was published, dropped as duplicates
 * and dead-lettered (issue 6). */
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

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(metrics_scrape, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
