/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics registry: counting, histogram buckets, rendering that parses
 * back to the values added, and lock-free updates from many threads. */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "ops.h"
#include "prom_text.h"

static int under_valgrind(void)
{
    return getenv("IB_UNDER_VALGRIND") != NULL;
}

/* Renders `m` and parses it strictly; fails the test on malformed text. */
static void render_parse(prom_text *p, const ib_metrics *m)
{
    char *text = NULL;
    size_t len = 0;
    ib_error err;
    assert_int_equal(ib_metrics_render(&text, &len, m, &err), IB_OK);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    char why[256];
    int rc = prom_text_parse(p, text, len, why, sizeof(why));
    if (rc != 0)
        print_error("exposition: %s\n", why);
    free(text);
    assert_int_equal(rc, 0);
}

static void counters_render_what_was_added(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_add(m, IB_METRIC_EVENTS_RECEIVED, 7);
    ib_metrics_add(m, IB_METRIC_EVENTS_RECEIVED, 3);
    ib_metrics_add(m, IB_METRIC_EVENTS_HANDLED, 5);
    ib_metrics_add(m, IB_METRIC_DUPLICATES_DROPPED, 2);
    ib_metrics_add(m, IB_METRIC_HANDLER_FAILURES, 4);
    ib_metrics_add(m, IB_METRIC_EVENTS_UNHANDLED, 1);
    ib_metrics_add(m, IB_METRIC_NAKS, 6);
    ib_metrics_add(m, IB_METRIC_ACKS, 9);
    ib_metrics_add(m, IB_METRIC_REDELIVERIES, 8);
    ib_metrics_add(m, IB_METRIC_COUNTER_COUNT, 100); /* ignored: not a counter */
    ib_metrics_add(NULL, IB_METRIC_ACKS, 1);         /* no-op */

    ib_metrics_snapshot s;
    ib_metrics_snapshot_get(m, &s);
    assert_int_equal(s.counters[IB_METRIC_EVENTS_RECEIVED], 10);
    assert_int_equal(s.counters[IB_METRIC_ACKS], 9);

    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_events_received_total", "") == 10);
    assert_true(prom_text_value(&p, "ibus_events_handled_total", "") == 5);
    assert_true(prom_text_value(&p, "ibus_duplicates_dropped_total", "") == 2);
    assert_true(prom_text_value(&p, "ibus_handler_failures_total", "") == 4);
    assert_true(prom_text_value(&p, "ibus_events_unhandled_total", "") == 1);
    assert_true(prom_text_value(&p, "ibus_naks_total", "") == 6);
    assert_true(prom_text_value(&p, "ibus_acks_total", "") == 9);
    assert_true(prom_text_value(&p, "ibus_redeliveries_total", "") == 8);
    prom_text_free(&p);
    ib_metrics_free(m);
}

static void dead_letter_reasons_are_bounded(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_dead_letter(m, IB_DLQ_DECODE);
    ib_metrics_dead_letter(m, IB_DLQ_INVALID_ID);
    ib_metrics_dead_letter(m, IB_DLQ_INVALID_ID);
    ib_metrics_dead_letter(m, IB_DLQ_MAX_DELIVER);
    ib_metrics_dead_letter(m, IB_DLQ_REJECTED);
    ib_metrics_dead_letter(m, IB_DLQ_REJECTED);
    ib_metrics_dead_letter(m, IB_DLQ_REJECTED);
    ib_metrics_dead_letter(m, IB_DLQ_CONFLICT);
    /* an out-of-range reason must not create a new series */
    ib_metrics_dead_letter(m, (ib_dead_letter_reason)42);
    ib_metrics_dead_letter(m, (ib_dead_letter_reason)-1);
    ib_metrics_dead_letter(m, IB_DLQ_REASON_COUNT);
    ib_metrics_dead_letter(m, IB_DLQ_OTHER);

    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"decode\"") == 1);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"invalid-id\"") == 2);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"max-deliver\"") == 1);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"rejected\"") == 3);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"conflict\"") == 1);
    assert_true(prom_text_value(&p, "ibus_dead_lettered_total", "reason=\"other\"") == 4);
    size_t series = 0;
    for (size_t i = 0; i < p.count; i++)
        series += strcmp(p.samples[i].name, "ibus_dead_lettered_total") == 0;
    assert_int_equal(series, 6);
    prom_text_free(&p);
    ib_metrics_free(m);
}

static void gauges_set_and_add(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_gauge_add(m, IB_METRIC_HANDLERS_IN_FLIGHT, 3);
    ib_metrics_gauge_add(m, IB_METRIC_HANDLERS_IN_FLIGHT, -1);
    ib_metrics_gauge_set(m, IB_METRIC_CONSUMER_PENDING, 12345);
    ib_metrics_gauge_set(m, IB_METRIC_CONNECTED, 1);
    ib_metrics_gauge_set(m, IB_METRIC_CONSUMER_BOUND, 1);
    ib_metrics_gauge_set(m, IB_METRIC_CONSUMER_BOUND, 0);
    ib_metrics_gauge_set(m, IB_METRIC_GAUGE_COUNT, 5); /* ignored */

    ib_metrics_snapshot s;
    ib_metrics_snapshot_get(m, &s);
    assert_int_equal(s.gauges[IB_METRIC_HANDLERS_IN_FLIGHT], 2);

    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_handlers_in_flight", "") == 2);
    assert_true(prom_text_value(&p, "ibus_consumer_pending", "") == 12345);
    assert_true(prom_text_value(&p, "ibus_connected", "") == 1);
    assert_true(prom_text_value(&p, "ibus_consumer_bound", "") == 0);
    prom_text_free(&p);
    ib_metrics_free(m);
}

/* Issue 12: conflicts, pruning and the recorder's own gauges, each one
 * unlabelled series with its HELP and TYPE. */
static void retention_and_conflict_series_render(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_add(m, IB_METRIC_CONFLICTS, 2);
    ib_metrics_add(m, IB_METRIC_MARKERS_PRUNED, 40);
    ib_metrics_add(m, IB_METRIC_MARKERS_PRUNED, 2);
    ib_metrics_gauge_set(m, IB_METRIC_MARKERS, 1000);
    ib_metrics_gauge_set(m, IB_METRIC_MARKERS, 958);
    ib_metrics_gauge_set(m, IB_METRIC_RECORDER_WAL_BYTES, 4120032);
    ib_metrics_gauge_set(m, IB_METRIC_OUTBOX_PENDING, 3);

    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_conflicts_total", "") == 2);
    assert_true(prom_text_value(&p, "ibus_markers_pruned_total", "") == 42);
    assert_true(prom_text_value(&p, "ibus_markers", "") == 958);
    assert_true(prom_text_value(&p, "ibus_recorder_wal_bytes", "") == 4120032);
    assert_true(prom_text_value(&p, "ibus_outbox_pending", "") == 3);
    prom_text_free(&p);

    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ib_metrics_render(&text, &len, m, NULL), IB_OK);
    assert_non_null(strstr(text, "# TYPE ibus_conflicts_total counter\n"));
    assert_non_null(strstr(text, "# TYPE ibus_markers_pruned_total counter\n"));
    assert_non_null(strstr(text, "# TYPE ibus_markers gauge\n"));
    /* the gauge is counted in the background: its help says how old it
     * may be (issue 25) */
    assert_non_null(strstr(text, "# HELP ibus_markers Markers in the recorder, as last counted: "
                                 "every 5 s, every 30 s when idle, so up to 30 s old"));
    assert_non_null(strstr(text, "# TYPE ibus_recorder_wal_bytes gauge\n"));
    assert_non_null(strstr(text, "# TYPE ibus_outbox_pending gauge\n"));
    free(text);
    ib_metrics_free(m);
}

static void histogram_buckets_are_le_and_cumulative(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    /* exactly on a bound counts in that bucket (le = less or equal) */
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, 0.0005);
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, 0.0003);
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, 0.002);
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, 1.0);
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, 30.0); /* +Inf only */
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, -4.0); /* counts as 0 */
    ib_metrics_observe(m, IB_METRIC_HANDLE_SECONDS, NAN);  /* counts as 0 */
    ib_metrics_observe(m, IB_METRIC_RECORDER_SECONDS, 0.25);
    ib_metrics_observe(m, IB_METRIC_HISTOGRAM_COUNT, 1.0); /* ignored */

    ib_metrics_snapshot s;
    ib_metrics_snapshot_get(m, &s);
    assert_int_equal(s.histograms[IB_METRIC_HANDLE_SECONDS].count, 7);
    assert_int_equal(s.histograms[IB_METRIC_HANDLE_SECONDS].buckets[0], 4);
    assert_int_equal(s.histograms[IB_METRIC_HANDLE_SECONDS].buckets[IB_METRICS_BUCKETS], 1);
    assert_true(fabs(s.histograms[IB_METRIC_HANDLE_SECONDS].sum_seconds - 31.0028) < 1e-9);
    assert_true(ib_metrics_bucket_bound(0) == 0.0005);
    assert_true(ib_metrics_bucket_bound(IB_METRICS_BUCKETS - 1) == 10);
    assert_true(isinf(ib_metrics_bucket_bound(IB_METRICS_BUCKETS)));

    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"0.0005\"") == 4);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"0.001\"") == 4);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"0.0025\"") == 5);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"1\"") == 6);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"10\"") == 6);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_bucket", "le=\"+Inf\"") == 7);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_count", "") == 7);
    assert_true(fabs(prom_text_value(&p, "ibus_handle_seconds_sum", "") - 31.0028) < 1e-9);
    assert_true(prom_text_value(&p, "ibus_recorder_seconds_bucket", "le=\"0.1\"") == 0);
    assert_true(prom_text_value(&p, "ibus_recorder_seconds_bucket", "le=\"0.25\"") == 1);
    assert_true(prom_text_value(&p, "ibus_recorder_seconds_count", "") == 1);
    prom_text_free(&p);
    ib_metrics_free(m);
}

static void render_has_help_type_and_build_info(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_set_version(m, "1.2.3 \"q\"\\");
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ib_metrics_render(&text, &len, m, NULL), IB_OK);
    assert_non_null(strstr(text, "# TYPE ibus_events_received_total counter\n"));
    assert_non_null(strstr(text, "# HELP ibus_handle_seconds "));
    /* one sample per batch, not per recorder call */
    assert_non_null(strstr(text, "# HELP ibus_recorder_seconds Time spent in the recorder for one "
                                 "batch"));
    assert_non_null(strstr(text, "# TYPE ibus_handle_seconds histogram\n"));
    assert_non_null(strstr(text, "# TYPE ibus_consumer_pending gauge\n"));
    assert_non_null(strstr(text, "ibus_build_info{version=\"1.2.3 \\\"q\\\"\\\\\"} 1\n"));
    char why[256];
    prom_text p;
    int rc = prom_text_parse(&p, text, len, why, sizeof(why));
    prom_text_free(&p);
    free(text);
    assert_int_equal(rc, 0);

    ib_error err;
    assert_int_equal(ib_metrics_render(&text, &len, NULL, &err), IB_ERR_INVALID_ARG);
    ib_metrics_free(m);
    ib_metrics_free(NULL);
}

/* The test's own parser must reject what Prometheus would reject, or the
 * assertions above prove nothing. */
static const char *const results[IB_METRIC_RESULT_COUNT] = {
    "handled", "duplicate", "retry", "rejected", "conflict", "claim-lost", "recorder-failed"};

/* Every result of every registered consumer renders from the start, at 0,
 * so rate() has a series before the first event; counts land on their own
 * consumer and result only. */
static void consumer_runs_render_every_result(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_consumer *a = ib_metrics_consumer_add(m, "orders/audit/audit");
    ib_metrics_consumer *b = ib_metrics_consumer_add(m, "orders/ledger/post");
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_equal(ib_metrics_consumer_add(m, "orders/audit/audit"), a); /* same slot */
    assert_null(ib_metrics_consumer_add(m, NULL));
    assert_null(ib_metrics_consumer_add(NULL, "x"));

    prom_text p;
    char labels[128];
    render_parse(&p, m);
    for (size_t r = 0; r < IB_METRIC_RESULT_COUNT; r++) {
        snprintf(labels, sizeof(labels), "consumer=\"orders/audit/audit\",result=\"%s\"",
                 results[r]);
        assert_true(prom_text_value(&p, "ibus_consumer_runs_total", labels) == 0);
        snprintf(labels, sizeof(labels), "consumer=\"orders/ledger/post\",result=\"%s\"",
                 results[r]);
        assert_true(prom_text_value(&p, "ibus_consumer_runs_total", labels) == 0);
    }
    assert_true(prom_text_value(&p, "ibus_consumer_handle_seconds_count",
                                "consumer=\"orders/audit/audit\"") == 0);
    prom_text_free(&p);

    ib_metrics_consumer_count(a, IB_METRIC_RESULT_HANDLED);
    ib_metrics_consumer_count(a, IB_METRIC_RESULT_HANDLED);
    ib_metrics_consumer_count(a, IB_METRIC_RESULT_DUPLICATE);
    ib_metrics_consumer_count(b, IB_METRIC_RESULT_RECORDER_FAILED);
    ib_metrics_consumer_count(b, IB_METRIC_RESULT_COUNT); /* ignored */
    ib_metrics_consumer_count(NULL, IB_METRIC_RESULT_HANDLED);
    ib_metrics_consumer_observe(NULL, 1);
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_consumer_runs_total",
                                "consumer=\"orders/audit/audit\",result=\"handled\"") == 2);
    assert_true(prom_text_value(&p, "ibus_consumer_runs_total",
                                "consumer=\"orders/audit/audit\",result=\"duplicate\"") == 1);
    assert_true(prom_text_value(&p, "ibus_consumer_runs_total",
                                "consumer=\"orders/ledger/post\",result=\"handled\"") == 0);
    assert_true(prom_text_value(&p, "ibus_consumer_runs_total",
                                "consumer=\"orders/ledger/post\",result=\"recorder-failed\"") == 1);
    prom_text_free(&p);
    ib_metrics_free(m);
}

/* HTTP requests a handler reported (ABI 1.3): counted by code, timed, and
 * rendered only for the consumers that made some. */
static void http_requests_render_by_code(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    ib_metrics_consumer *a = ib_metrics_consumer_add(m, "orders/http/http");
    ib_metrics_consumer *b = ib_metrics_consumer_add(m, "orders/audit/audit");
    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_http_request_seconds_count",
                                "consumer=\"orders/http/http\"") == -1);
    prom_text_free(&p);

    ib_metrics_consumer_http(a, 204, 0.002);
    ib_metrics_consumer_http(a, 204, 0.003);
    ib_metrics_consumer_http(a, 503, 0.5);
    ib_metrics_consumer_http(a, IB_METRICS_HTTP_TIMEOUT, 1.0);
    ib_metrics_consumer_http(a, IB_METRICS_HTTP_ERROR, 0);
    ib_metrics_consumer_http(a, 99999, 0); /* no such status: an error */
    ib_metrics_consumer_http(NULL, 200, 0);
    assert_int_equal(ib_metrics_consumer_http_count(a, 204), 2);
    assert_int_equal(ib_metrics_consumer_http_count(a, IB_METRICS_HTTP_ERROR), 2);
    render_parse(&p, m);
    const char *c = "consumer=\"orders/http/http\",code=";
    char labels[96];
    snprintf(labels, sizeof(labels), "%s\"204\"", c);
    assert_true(prom_text_value(&p, "ibus_http_requests_total", labels) == 2);
    snprintf(labels, sizeof(labels), "%s\"503\"", c);
    assert_true(prom_text_value(&p, "ibus_http_requests_total", labels) == 1);
    snprintf(labels, sizeof(labels), "%s\"timeout\"", c);
    assert_true(prom_text_value(&p, "ibus_http_requests_total", labels) == 1);
    snprintf(labels, sizeof(labels), "%s\"error\"", c);
    assert_true(prom_text_value(&p, "ibus_http_requests_total", labels) == 2);
    assert_true(prom_text_value(&p, "ibus_http_request_seconds_count",
                                "consumer=\"orders/http/http\"") == 6);
    /* a consumer without requests has no such series */
    assert_true(prom_text_value(&p, "ibus_http_request_seconds_count",
                                "consumer=\"orders/audit/audit\"") == -1);
    (void)b;
    prom_text_free(&p);
    ib_metrics_free(m);
}

/* A consumer identity comes from configuration (--consumer-name): quotes,
 * backslashes and newlines are escaped as in ibus_build_info. */
static void consumer_labels_are_escaped(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    assert_non_null(ib_metrics_consumer_add(m, "a\"b\\c\nd"));
    ib_metrics_set_version(m, "1.0\"x");
    char *text = NULL;
    size_t len = 0;
    ib_error err;
    assert_int_equal(ib_metrics_render(&text, &len, m, &err), IB_OK);
    assert_non_null(strstr(text, "ibus_consumer_runs_total{consumer=\"a\\\"b\\\\c\\nd\","
                                 "result=\"handled\"} 0\n"));
    assert_non_null(
        strstr(text, "ibus_consumer_handle_seconds_count{consumer=\"a\\\"b\\\\c\\nd\"} 0\n"));
    assert_non_null(strstr(text, "ibus_build_info{version=\"1.0\\\"x\"} 1\n"));
    prom_text p;
    render_parse(&p, m);
    prom_text_free(&p);
    free(text);
    ib_metrics_free(m);
}

/* Each consumer's histogram is its own: cumulative buckets, _count equal
 * to +Inf, _sum the seconds observed; the process-wide one is untouched. */
static void consumer_histograms_are_separate(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_consumer *a = ib_metrics_consumer_add(m, "d/p/a");
    ib_metrics_consumer *b = ib_metrics_consumer_add(m, "d/p/b");
    ib_metrics_consumer_observe(a, 0.002);
    ib_metrics_consumer_observe(a, 0.3);
    ib_metrics_consumer_observe(a, 100);
    ib_metrics_consumer_observe(b, 0.0001);
    prom_text p;
    render_parse(&p, m); /* checks the invariants of each labelled series */
    const char *name = "ibus_consumer_handle_seconds_bucket";
    assert_true(prom_text_value(&p, name, "consumer=\"d/p/a\",le=\"0.0025\"") == 1);
    assert_true(prom_text_value(&p, name, "consumer=\"d/p/a\",le=\"0.5\"") == 2);
    assert_true(prom_text_value(&p, name, "consumer=\"d/p/a\",le=\"10\"") == 2);
    assert_true(prom_text_value(&p, name, "consumer=\"d/p/a\",le=\"+Inf\"") == 3);
    assert_true(prom_text_value(&p, name, "consumer=\"d/p/b\",le=\"0.0005\"") == 1);
    assert_true(prom_text_value(&p, "ibus_consumer_handle_seconds_count", "consumer=\"d/p/a\"") ==
                3);
    assert_true(fabs(prom_text_value(&p, "ibus_consumer_handle_seconds_sum", "consumer=\"d/p/a\"") -
                     100.302) < 1e-6);
    assert_true(prom_text_value(&p, "ibus_handle_seconds_count", "") == 0);
    prom_text_free(&p);
    ib_metrics_free(m);
}

/* The series the alerts and the dashboard read render under their names. */
static void issue14_series_render(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    ib_metrics_add(m, IB_METRIC_REDELIVERED_DUPLICATES, 3);
    ib_metrics_gauge_set(m, IB_METRIC_CONSUMER_ACK_PENDING, 7);
    ib_metrics_gauge_set(m, IB_METRIC_READY, 1);
    prom_text p;
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_redelivered_duplicates_total", "") == 3);
    assert_true(prom_text_value(&p, "ibus_consumer_ack_pending", "") == 7);
    assert_true(prom_text_value(&p, "ibus_ready", "") == 1);
    assert_true(prom_text_value(&p, "ibus_consumer_pending", "") == 0);
    prom_text_free(&p);
    ib_metrics_free(m);
}

static void exposition_checker_rejects_malformed_text(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "x_total 1\n",                                /* no TYPE */
        "# HELP a h\n# TYPE a counter\na 1",          /* no final newline */
        "# HELP a h\n# TYPE a counter\na{l=\"v} 1\n", /* open quote */
        "# HELP a h\n# TYPE a counter\na 1\na 2\n",   /* duplicate series */
        "# HELP a h\n# TYPE a counter\na one\n",      /* bad value */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
        "h_sum 0\nh_count 1\n", /* not cumulative */
        "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 1\n",
        /* labelled series are checked one by one */
        "# HELP h h\n# TYPE h histogram\nh_bucket{c=\"a\",le=\"+Inf\"} 2\nh_sum{c=\"a\"} 0\n"
        "h_count{c=\"a\"} 2\nh_bucket{c=\"b\",le=\"+Inf\"} 1\nh_sum{c=\"b\"} 0\n"
        "h_count{c=\"b\"} 2\n",
        "# HELP h h\n# TYPE h histogram\nh_sum{c=\"a\"} 0\nh_count{c=\"a\"} 0\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        prom_text p;
        char why[256];
        assert_int_not_equal(prom_text_parse(&p, bad[i], strlen(bad[i]), why, sizeof(why)), 0);
        prom_text_free(&p);
    }
}

#define WRITERS 4

typedef struct writer_arg {
    ib_metrics *m;
    atomic_int *stop;
    _Atomic uint64_t done;
} writer_arg;

/* Updates until told to stop, so the renders below overlap with writes. */
static void *writer(void *arg)
{
    writer_arg *w = arg;
    while (!atomic_load(w->stop)) {
        ib_metrics_add(w->m, IB_METRIC_EVENTS_RECEIVED, 1);
        ib_metrics_dead_letter(w->m, IB_DLQ_REJECTED);
        ib_metrics_gauge_add(w->m, IB_METRIC_HANDLERS_IN_FLIGHT, 1);
        ib_metrics_observe(w->m, IB_METRIC_HANDLE_SECONDS, 0.001);
        ib_metrics_gauge_add(w->m, IB_METRIC_HANDLERS_IN_FLIGHT, -1);
        atomic_fetch_add(&w->done, 1);
    }
    return NULL;
}

static void concurrent_updates_lose_nothing(void **state)
{
    (void)state;
    ib_metrics *m = ib_metrics_create();
    assert_non_null(m);
    atomic_int stop = 0;
    writer_arg w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i].m = m;
        w[i].stop = &stop;
        atomic_init(&w[i].done, 0);
        assert_int_equal(pthread_create(&t[i], NULL, writer, &w[i]), 0);
    }
    /* on a loaded machine a writer may start late: wait until all write */
    for (int i = 0; i < WRITERS; i++)
        while (atomic_load(&w[i].done) == 0)
            sched_yield();
    /* render while the writers run: every scrape must stay well-formed and
     * counters must never go backwards */
    double last = 0;
    for (int i = 0; i < (under_valgrind() ? 5 : 50); i++) {
        prom_text p;
        render_parse(&p, m);
        double v = prom_text_value(&p, "ibus_events_received_total", "");
        assert_true(v >= last);
        last = v;
        prom_text_free(&p);
    }
    atomic_store(&stop, 1);
    uint64_t total = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        total += atomic_load(&w[i].done);
    }
    assert_true(total > 0);
    ib_metrics_snapshot s;
    ib_metrics_snapshot_get(m, &s);
    assert_int_equal(s.counters[IB_METRIC_EVENTS_RECEIVED], total);
    assert_int_equal(s.dead_lettered[IB_DLQ_REJECTED], total);
    assert_int_equal(s.gauges[IB_METRIC_HANDLERS_IN_FLIGHT], 0);
    assert_int_equal(s.histograms[IB_METRIC_HANDLE_SECONDS].count, total);
    assert_int_equal(s.histograms[IB_METRIC_HANDLE_SECONDS].buckets[1], total);
    /* 0.001 s is exactly 1,000,000 ns per observation: the sum is exact */
    assert_true(fabs(s.histograms[IB_METRIC_HANDLE_SECONDS].sum_seconds - (double)total * 0.001) <
                1e-6);
    ib_metrics_free(m);
}

/* Issue 31: every consumer's circuit renders from start-up (closed, no
 * transitions, no waits, no timeouts); changes land on their consumer. */
static void circuit_series_render_per_consumer(void **state)
{
    (void)state;
    static const char *const to[] = {"closed", "half-open", "open"};
    ib_metrics *m = ib_metrics_create();
    ib_metrics_consumer *a = ib_metrics_consumer_add(m, "orders/http/http");
    ib_metrics_consumer *b = ib_metrics_consumer_add(m, "orders/audit/audit");
    assert_true(a != NULL && b != NULL);
    prom_text p;
    char labels[128];
    render_parse(&p, m);
    for (size_t k = 0; k < 3; k++) {
        snprintf(labels, sizeof(labels), "consumer=\"orders/audit/audit\",to=\"%s\"", to[k]);
        assert_true(prom_text_value(&p, "ibus_circuit_transitions_total", labels) == 0);
    }
    assert_true(prom_text_value(&p, "ibus_circuit_state", "consumer=\"orders/http/http\"") == 0);
    assert_true(prom_text_value(&p, "ibus_circuit_waits_total", "consumer=\"orders/http/http\"") ==
                0);
    assert_true(
        prom_text_value(&p, "ibus_handler_timeouts_total", "consumer=\"orders/http/http\"") == 0);
    assert_true(prom_text_value(&p, "ibus_handlers_overdue", "") == 0);
    prom_text_free(&p);

    ib_metrics_consumer_circuit(a, IB_METRICS_CIRCUIT_OPEN);
    ib_metrics_consumer_circuit(a, IB_METRICS_CIRCUIT_HALF_OPEN);
    ib_metrics_consumer_circuit(a, IB_METRICS_CIRCUIT_OPEN);
    ib_metrics_consumer_circuit(a, IB_METRICS_CIRCUIT_COUNT); /* ignored */
    ib_metrics_consumer_circuit(NULL, IB_METRICS_CIRCUIT_OPEN);
    ib_metrics_consumer_waits(a, 7);
    ib_metrics_consumer_timeout(b);
    ib_metrics_gauge_set(m, IB_METRIC_HANDLERS_OVERDUE, 1);
    render_parse(&p, m);
    assert_true(prom_text_value(&p, "ibus_circuit_state", "consumer=\"orders/http/http\"") == 2);
    assert_true(prom_text_value(&p, "ibus_circuit_state", "consumer=\"orders/audit/audit\"") == 0);
    assert_true(prom_text_value(&p, "ibus_circuit_transitions_total",
                                "consumer=\"orders/http/http\",to=\"open\"") == 2);
    assert_true(prom_text_value(&p, "ibus_circuit_transitions_total",
                                "consumer=\"orders/http/http\",to=\"half-open\"") == 1);
    assert_true(prom_text_value(&p, "ibus_circuit_waits_total", "consumer=\"orders/http/http\"") ==
                7);
    assert_true(
        prom_text_value(&p, "ibus_handler_timeouts_total", "consumer=\"orders/audit/audit\"") == 1);
    assert_true(prom_text_value(&p, "ibus_handlers_overdue", "") == 1);
    prom_text_free(&p);
    ib_metrics_free(m);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(counters_render_what_was_added),
    cmocka_unit_test(dead_letter_reasons_are_bounded),
    cmocka_unit_test(gauges_set_and_add),
    cmocka_unit_test(retention_and_conflict_series_render),
    cmocka_unit_test(histogram_buckets_are_le_and_cumulative),
    cmocka_unit_test(render_has_help_type_and_build_info),
    cmocka_unit_test(consumer_runs_render_every_result),
    cmocka_unit_test(consumer_labels_are_escaped),
    cmocka_unit_test(consumer_histograms_are_separate),
    cmocka_unit_test(http_requests_render_by_code),
    cmocka_unit_test(issue14_series_render),
    cmocka_unit_test(circuit_series_render_per_consumer),
    cmocka_unit_test(exposition_checker_rejects_malformed_text),
    cmocka_unit_test(concurrent_updates_lose_nothing),
};

IB_TEST_MAIN(tests)
