/* SPDX-License-Identifier: Apache-2.0 */
/* The health/metrics HTTP server, exercised over real loopback sockets. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "http_client.h"
#include "ib_test.h"
#include "prom_text.h"

/* Ready when *ctx is non-zero; otherwise says why, as the host does. */
static int ready_fn(void *ctx, char *why, size_t cap)
{
    if (atomic_load((atomic_int *)ctx))
        return 1;
    snprintf(why, cap, "not connected to NATS at nats://127.0.0.1:1");
    return 0;
}

static int under_valgrind(void)
{
    return getenv("IB_UNDER_VALGRIND") != NULL;
}

static void get(http_reply *r, uint16_t port, const char *method, const char *path)
{
    int rc = http_request(r, port, method, path, NULL);
    assert_int_equal(rc, 0);
}

static void parse_metrics(prom_text *p, const http_reply *r)
{
    char why[256];
    int rc = prom_text_parse(p, r->body, r->body_len, why, sizeof(why));
    if (rc != 0)
        print_error("exposition: %s\n", why);
    assert_int_equal(rc, 0);
}

static void probes_and_metrics_answer(void **state)
{
    (void)state;
    atomic_int ready = 0;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_set_version(m, "9.9.9");
    ib_http *h = NULL;
    ib_error err;
    assert_int_equal(ib_http_start(&h, "127.0.0.1:0", m, ready_fn, &ready, &err), IB_OK);
    assert_non_null(h);
    uint16_t port = ib_http_port(h);
    assert_true(port != 0);

    http_reply r;
    char v[128];
    get(&r, port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    http_reply_free(&r);

    /* readiness follows the callback: 503 with its reason, then 200, then
     * 503 again */
    get(&r, port, "GET", "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: not connected to NATS at nats://127.0.0.1:1\n");
    http_reply_free(&r);
    atomic_store(&ready, 1);
    get(&r, port, "GET", "/readyz");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    atomic_store(&ready, 0);
    get(&r, port, "GET", "/readyz");
    assert_int_equal(r.status, 503);
    http_reply_free(&r);

    ib_metrics_add(m, IB_METRIC_EVENTS_RECEIVED, 42);
    ib_metrics_add(m, IB_METRIC_DUPLICATES_DROPPED, 5);
    ib_metrics_dead_letter(m, IB_DLQ_DECODE);
    ib_metrics_dead_letter(m, IB_DLQ_REJECTED);
    ib_metrics_dead_letter(m, IB_DLQ_REJECTED);
    ib_metrics_gauge_set(m, IB_METRIC_CONSUMER_PENDING, 77);
    ib_metrics_observe(m, IB_METRIC_RECORDER_SECONDS, 0.003);

    get(&r, port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_non_null(http_header(&r, "Content-Type", v, sizeof(v)));
    assert_string_equal(v, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(http_header(&r, "Cache-Control", v, sizeof(v)));
    assert_string_equal(v, "no-store");
    prom_text p;
    parse_metrics(&p, &r);
    assert_true(prom_text_value(&p, "ibus_events_received_total", "") == 42);
    assert_true(prom_text_value(&p, "ibus_duplicates_dropped_total", "") == 5);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"decode\"") == 1);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"rejected\"") == 2);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"max-deliver\"") == 0);
    assert_true(prom_text_value(&p, "ibus_consumer_pending", "") == 77);
    assert_true(prom_text_value(&p, "ibus_recorder_seconds_bucket", "le=\"0.0025\"") == 0);
    assert_true(prom_text_value(&p, "ibus_recorder_seconds_bucket", "le=\"0.005\"") == 1);
    assert_true(prom_text_value(&p, "ibus_build_info", "version=\"9.9.9\"") == 1);
    prom_text_free(&p);
    http_reply_free(&r);

    /* HEAD: same status and headers, no body */
    get(&r, port, "HEAD", "/metrics");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    http_reply_free(&r);

    ib_http_stop(h);
    ib_metrics_free(m);
}

static void unknown_paths_and_methods_are_refused(void **state)
{
    (void)state;
    ib_http *h = NULL;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    assert_int_equal(ib_http_start(&h, "localhost:0", m, NULL, NULL, NULL), IB_OK);
    uint16_t port = ib_http_port(h);
    static const char *const missing[] = {"/", "/nope", "/metrics/", "/healthz/x", "/METRICS"};
    http_reply r;
    char v[64];
    for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
        get(&r, port, "GET", missing[i]);
        assert_int_equal(r.status, 404);
        http_reply_free(&r);
    }
    /* a query string does not change the route */
    get(&r, port, "GET", "/healthz?verbose=1");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);

    static const char *const methods[] = {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        assert_int_equal(http_request(&r, port, methods[i], "/metrics", "x=1"), 0);
        assert_int_equal(r.status, 405);
        assert_non_null(http_header(&r, "Allow", v, sizeof(v)));
        assert_string_equal(v, "GET, HEAD");
        http_reply_free(&r);
    }
    /* no ready callback: always ready */
    get(&r, port, "GET", "/readyz");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    ib_http_stop(h);
    ib_metrics_free(m);
}

/* Scrapes /metrics and returns ibus_ready. */
static double scrape_ready(uint16_t port)
{
    http_reply r;
    prom_text p;
    get(&r, port, "GET", "/metrics");
    assert_int_equal(r.status, 200);
    parse_metrics(&p, &r);
    double v = prom_text_value(&p, "ibus_ready", "");
    prom_text_free(&p);
    http_reply_free(&r);
    return v;
}

/* ibus_ready comes from the callback /readyz asks, at each scrape: it
 * flips with readiness and is 1 without a callback, as /readyz is 200. */
static void ready_gauge_follows_readyz(void **state)
{
    (void)state;
    atomic_int ready = 0;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_http *h = NULL;
    ib_error err;
    assert_int_equal(ib_http_start(&h, "127.0.0.1:0", m, ready_fn, &ready, &err), IB_OK);
    uint16_t port = ib_http_port(h);
    assert_true(scrape_ready(port) == 0);
    atomic_store(&ready, 1);
    assert_true(scrape_ready(port) == 1);
    atomic_store(&ready, 0);
    assert_true(scrape_ready(port) == 0);
    ib_http_stop(h);

    assert_int_equal(ib_http_start(&h, "127.0.0.1:0", m, NULL, NULL, &err), IB_OK);
    assert_true(scrape_ready(ib_http_port(h)) == 1);
    ib_http_stop(h);
    ib_metrics_free(m);
}

static void without_metrics_the_endpoint_says_so(void **state)
{
    (void)state;
    ib_http *h = NULL;
    assert_int_equal(ib_http_start(&h, "127.0.0.1:0", NULL, NULL, NULL, NULL), IB_OK);
    http_reply r;
    get(&r, ib_http_port(h), "GET", "/metrics");
    assert_int_equal(r.status, 503);
    http_reply_free(&r);
    get(&r, ib_http_port(h), "GET", "/healthz");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    ib_http_stop(h);
}

static void ipv6_loopback_is_served(void **state)
{
    (void)state;
    ib_http *h = NULL;
    ib_error err;
    assert_int_equal(ib_http_start(&h, "[::1]:0", NULL, NULL, NULL, &err), IB_OK);
    http_reply r;
    assert_int_equal(http_request_at(&r, "::1", ib_http_port(h), "GET", "/healthz", NULL), 0);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    ib_http_stop(h);
}

static void bad_addresses_are_config_errors(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "9090",
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:70000",
        "127.0.0.1:90x",
        "127.0.0.1:123456",
        "example.com:80",
        "::1:9090",
        "[::1]",
        "[::1]9090",
        "[zz]:80",
        "1.2.3.4.5:80",
        "127.0.0.1:-1",
        "[]:80",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ib_http *h = (ib_http *)&h; /* must be reset to NULL */
        ib_error err;
        ib_error_clear(&err);
        assert_int_equal(ib_http_start(&h, bad[i], NULL, NULL, NULL, &err), IB_ERR_CONFIG);
        assert_null(h);
        assert_int_equal(err.status, IB_ERR_CONFIG);
        /* the library names the address in its own words, not a flag */
        assert_non_null(strstr(err.msg, "HTTP address '"));
        assert_null(strstr(err.msg, "--"));
    }
    ib_http *h = NULL;
    ib_error err;
    assert_int_equal(ib_http_start(&h, NULL, NULL, NULL, NULL, &err), IB_ERR_CONFIG);
    assert_null(h);
    assert_int_equal(ib_http_start(NULL, "127.0.0.1:0", NULL, NULL, NULL, &err),
                     IB_ERR_INVALID_ARG);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void port_in_use_is_an_io_error_and_nothing_leaks(void **state)
{
    (void)state;
    int before = count_fds();
    ib_http *a = NULL, *b = NULL;
    ib_error err;
    assert_int_equal(ib_http_start(&a, "127.0.0.1:0", NULL, NULL, NULL, &err), IB_OK);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)ib_http_port(a));
    assert_int_equal(ib_http_start(&b, addr, NULL, NULL, NULL, &err), IB_ERR_IO);
    assert_null(b);
    assert_non_null(strstr(err.msg, addr));
    assert_non_null(strstr(err.msg, "in use"));
    ib_http_stop(a);
    /* the listening socket and the server's internal fds are all closed */
    assert_int_equal(count_fds(), before);
    /* and the port can be taken again at once */
    assert_int_equal(ib_http_start(&b, addr, NULL, NULL, NULL, &err), IB_OK);
    ib_http_stop(b);
    ib_http_stop(NULL);
    assert_int_equal(ib_http_port(NULL), 0);
}

typedef struct race {
    ib_metrics *m;
    uint16_t port;
    atomic_int *stop;
    _Atomic long adds; /* incrementer: how many it made */
    int scrapes;
    int failures;
} race;

/* Counts until told to stop, so every scrape overlaps with updates. */
static void *incrementer(void *p)
{
    race *r = p;
    while (!atomic_load(r->stop)) {
        ib_metrics_add(r->m, IB_METRIC_EVENTS_RECEIVED, 1);
        ib_metrics_add(r->m, IB_METRIC_ACKS, 1);
        ib_metrics_observe(r->m, IB_METRIC_HANDLE_SECONDS, 0.01);
        atomic_fetch_add(&r->adds, 1);
    }
    return NULL;
}

static void *scraper(void *p)
{
    race *r = p;
    double last = 0;
    for (int i = 0; i < r->scrapes; i++) {
        http_reply rep;
        prom_text pt = {0};
        char why[256];
        /* cmocka asserts are not thread-safe: count failures, assert after join */
        if (http_request(&rep, r->port, "GET", "/metrics", NULL) != 0 || rep.status != 200 ||
            prom_text_parse(&pt, rep.body, rep.body_len, why, sizeof(why)) != 0) {
            r->failures++;
        } else {
            double v = prom_text_value(&pt, "ibus_events_received_total", "");
            double c = prom_text_value(&pt, "ibus_handle_seconds_count", "");
            if (v < last || c < 0)
                r->failures++;
            last = v;
        }
        prom_text_free(&pt);
        http_reply_free(&rep);
    }
    return NULL;
}

static void concurrent_scrapes_see_consistent_totals(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_http *h = NULL;
    assert_int_equal(ib_http_start(&h, "127.0.0.1:0", m, NULL, NULL, NULL), IB_OK);
    atomic_int stop = 0;
    int scrapes = under_valgrind() ? 10 : 100;
    race inc[2] = {{m, 0, &stop, 0, 0, 0}, {m, 0, &stop, 0, 0, 0}};
    race scr[2] = {{m, ib_http_port(h), &stop, 0, scrapes, 0},
                   {m, ib_http_port(h), &stop, 0, scrapes, 0}};
    pthread_t t[4];
    assert_int_equal(pthread_create(&t[0], NULL, incrementer, &inc[0]), 0);
    assert_int_equal(pthread_create(&t[2], NULL, incrementer, &inc[1]), 0);
    /* scrape only once both incrementers run, however loaded the machine */
    while (atomic_load(&inc[0].adds) == 0 || atomic_load(&inc[1].adds) == 0)
        sched_yield();
    assert_int_equal(pthread_create(&t[1], NULL, scraper, &scr[0]), 0);
    assert_int_equal(pthread_create(&t[3], NULL, scraper, &scr[1]), 0);
    pthread_join(t[1], NULL);
    pthread_join(t[3], NULL);
    atomic_store(&stop, 1);
    pthread_join(t[0], NULL);
    pthread_join(t[2], NULL);
    long adds0 = atomic_load(&inc[0].adds), adds1 = atomic_load(&inc[1].adds);
    assert_true(adds0 > 0 && adds1 > 0);
    assert_int_equal(scr[0].failures, 0);
    assert_int_equal(scr[1].failures, 0);

    http_reply r;
    get(&r, ib_http_port(h), "GET", "/metrics");
    assert_int_equal(r.status, 200);
    prom_text p;
    parse_metrics(&p, &r);
    double total = (double)(adds0 + adds1);
    assert_true(prom_text_value(&p, "ibus_events_received_total", "") == total);
    assert_true(prom_text_value(&p, "ibus_acks_total", "") == total);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_count", "") == total);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"0.01\"") == total);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"0.005\"") == 0);
    prom_text_free(&p);
    http_reply_free(&r);
    ib_http_stop(h);
    ib_metrics_free(m);
}

/* /healthz follows the liveness callback once one is set (issue 31: a
 * handler call past --handler-timeout): 503 with its reason, then 200
 * again; /readyz is not affected. */
static int live_fn(void *ctx, char *why, size_t cap)
{
    if (atomic_load((atomic_int *)ctx))
        return 1;
    snprintf(why, cap, "handler a/b/c has run 61s on event 0f (--handler-timeout 1m)");
    return 0;
}

static void healthz_follows_liveness(void **state)
{
    (void)state;
    atomic_int live = 0;
    ib_http *h = NULL;
    ib_error err;
    assert_int_equal(ib_http_start(&h, "127.0.0.1:0", NULL, NULL, NULL, &err), IB_OK);
    uint16_t port = ib_http_port(h);
    http_reply r;
    get(&r, port, "GET", "/healthz");
    assert_int_equal(r.status, 200); /* no callback yet */
    http_reply_free(&r);
    ib_http_set_live(h, live_fn, &live);
    ib_http_set_live(NULL, live_fn, &live); /* no-op */
    get(&r, port, "GET", "/healthz");
    assert_int_equal(r.status, 503);
    assert_string_equal(
        r.body, "not healthy: handler a/b/c has run 61s on event 0f (--handler-timeout 1m)\n");
    http_reply_free(&r);
    get(&r, port, "GET", "/readyz");
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    atomic_store(&live, 1);
    get(&r, port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    http_reply_free(&r);
    ib_http_stop(h);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(healthz_follows_liveness),
    cmocka_unit_test(probes_and_metrics_answer),
    cmocka_unit_test(ready_gauge_follows_readyz),
    cmocka_unit_test(unknown_paths_and_methods_are_refused),
    cmocka_unit_test(without_metrics_the_endpoint_says_so),
    cmocka_unit_test(ipv6_loopback_is_served),
    cmocka_unit_test(bad_addresses_are_config_errors),
    cmocka_unit_test(port_in_use_is_an_io_error_and_nothing_leaks),
    cmocka_unit_test(concurrent_scrapes_see_consistent_totals),
};

IB_TEST_MAIN(tests)
