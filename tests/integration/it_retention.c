/* SPDX-License-Identifier: Apache-2.0 */
/* Retention against a real nats-server (issue 12, item 5): `ibus run
 * --retention` refuses a window shorter than the time the stream can still
 * deliver a message (and starts with --retention-unsafe), prunes old
 * markers in the background while fresh ones stay, and `ibus markers
 * prune` applies the same floor unless --force.
 *
 * The stream keeps messages for 1h (MaxAge); the consumer the tests make
 * has AckWait 30s and MaxDeliver 5, so with ibus's default 1m retry delay
 * its redelivery horizon is 4 x (30s + 1m) = 6m, and the floor is MaxAge, 1h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_markers.h"
#include "it_support.h"
#include <infinity_bus/recorder.h>

#define HOUR_MS (3600LL * 1000)
#define DURABLE "retention"
#define CONSUMER "retention/audit/audit"

/* The stream with MaxAge 1h and a consumer with bounded redelivery. */
static void make_stream_and_consumer(it_env *e)
{
    jsCtx *js = it_server_js(&e->server);
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {IT_SUBJECTS};
    assert_non_null(js);
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = IT_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.MaxAge = HOUR_MS * 1000000LL; /* nanoseconds */
    assert_int_equal(js_AddStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = DURABLE;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = 30LL * 1000 * 1000000LL;
    cc.MaxDeliver = 5;
    assert_int_equal(js_AddConsumer(&ci, js, IT_STREAM, &cc, NULL, &jerr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
}

/* Takes the stream's MaxAge away: messages then never age out. */
static void drop_max_age(it_env *e)
{
    jsCtx *js = it_server_js(&e->server);
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {IT_SUBJECTS};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = IT_STREAM;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    assert_int_equal(js_UpdateStream(&si, js, &sc, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
}

/* `ibus run` bound to DURABLE with the audit plugin and `extra` flags
 * (NULL-terminated). */
static void spawn_host(it_proc *p, it_env *e, const char *durable, int http_port, ...)
{
    char audit[PATH_MAX], cfg[PATH_MAX + 8];
    it_argv a;
    va_list ap;
    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    it_argv_run(&a, e, durable);
    it_argv_plugin(&a, "audit", cfg);
    if (http_port > 0)
        it_argv_addf(&a, "--http=127.0.0.1:%d", http_port);
    va_start(ap, http_port);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    assert_true(it_spawn(p, e, "host", &a));
    it_argv_free(&a);
}

/* Polls /metrics until `series` reads `want`; returns the last value. */
/* (a) --retention 10m under a 1h MaxAge: exit 2 with both figures; then the
 * same with --retention-unsafe starts, warns and stops cleanly. A consumer
 * ibus creates itself (MaxDeliver -1) is bounded by MaxAge all the same;
 * a stream without MaxAge has no bound at all. */
static void retention_below_floor_is_refused(void **state)
{
    it_env *e = *state;
    it_proc host;
    make_stream_and_consumer(e);

    spawn_host(&host, e, DURABLE, 0, "--retention", "10m", NULL);
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), 2);
    assert_true(it_file_contains(host.err_path, "--retention 10m is shorter than the 1h a message "
                                                "can still be delivered (stream EVENTS MaxAge 1h; "
                                                "redelivery horizon 6m)"));
    assert_true(it_file_contains(host.err_path, "pass --retention-unsafe"));

    int port = it_free_port();
    assert_true(port > 0);
    spawn_host(&host, e, DURABLE, port, "--retention", "10m", "--retention-unsafe", NULL);
    assert_true(it_wait_metric(e, port, "ibus_consumer_bound", 1, 30000) == 1);
    assert_true(it_file_contains(host.err_path, "retention below the floor (--retention-unsafe)"));
    assert_true(it_file_contains(host.err_path, "--retention 10m is shorter than the 1h"));
    assert_true(it_proc_signal(&host, SIGTERM));
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), 0);

    /* A consumer ibus creates itself has MaxDeliver -1: MaxAge still bounds
     * it, so 30d starts. */
    spawn_host(&host, e, "unbounded", port, "--retention", "30d", NULL);
    assert_true(it_wait_metric(e, port, "ibus_consumer_bound", 1, 30000) == 1);
    assert_true(it_file_contains(host.err_path, "retention checked"));
    assert_true(it_proc_signal(&host, SIGTERM));
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), 0);

    /* Without MaxAge nothing bounds it. */
    drop_max_age(e);
    spawn_host(&host, e, DURABLE, 0, "--retention", "30d", NULL);
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), 2);
    assert_true(it_file_contains(host.err_path, "which has no bound"));
    assert_true(it_file_contains(host.err_path, "MaxAge none"));
    assert_true(
        it_file_contains(host.err_path, "give the stream a MaxAge or pass --retention-unsafe"));
    it_done(e);
}

/* (b) --retention 2h: markers marked 3h ago go in the background, fresh
 * ones stay, and the counter and the gauge say so. */
static void old_markers_are_pruned_in_the_background(void **state)
{
    it_env *e = *state;
    it_proc host;
    char id[33];
    const unsigned n_old = 250, n_fresh = 40;
    make_stream_and_consumer(e);
    it_seed_markers(e, CONSUMER, 1, n_old, 3 * HOUR_MS);
    it_seed_markers(e, CONSUMER, 2, n_fresh, 0);

    int port = it_free_port();
    assert_true(port > 0);
    spawn_host(&host, e, DURABLE, port, "--retention", "2h", NULL);
    assert_true(it_wait_metric(e, port, "ibus_markers_pruned_total", n_old, 30000) == n_old);
    assert_true(it_wait_metric(e, port, "ibus_markers", n_fresh, 30000) == n_fresh);
    assert_true(it_wait_metric(e, port, "ibus_outbox_pending", 0, 5000) == 0);
    assert_true(it_proc_signal(&host, SIGTERM));
    assert_int_equal(it_proc_wait(&host, it_timeout(30000)), 0);

    for (unsigned i = 0; i < n_old; i += 50) {
        it_seed_id(id, 1, i);
        assert_int_equal(it_marker_lookup(e, CONSUMER, id), 3);
    }
    for (unsigned i = 0; i < n_fresh; i += 10) {
        it_seed_id(id, 2, i);
        assert_int_equal(it_marker_lookup(e, CONSUMER, id), 0);
    }
    it_done(e);
}

/* Runs `ibus markers --recorder ... ARGS... prune` with the connection
 * flags; returns its exit status, `p` keeps its output. */
static int markers_prune(it_proc *p, it_env *e, ...)
{
    char db[PATH_MAX];
    it_argv a;
    va_list ap;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", NULL);
    it_argv_connect(&a, &e->server);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "markers.db"));
    va_start(ap, e);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    it_argv_add(&a, "prune");
    int st = it_proc_run(p, e->dir, "markers", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    return st;
}

/* (c) `ibus markers prune`: no --stream is refused, an age below the floor
 * is refused with both figures, one above it prunes, --force skips the
 * check. */
static void markers_prune_applies_the_floor(void **state)
{
    it_env *e = *state;
    it_proc p;
    make_stream_and_consumer(e);
    it_seed_markers(e, CONSUMER, 1, 30, 3 * HOUR_MS);
    it_seed_markers(e, CONSUMER, 2, 20, HOUR_MS / 2);

    assert_int_equal(markers_prune(&p, e, "--older-than", "10m", NULL), 2);
    assert_true(it_file_contains(p.err_path, "pass --stream"));
    assert_true(it_file_contains(p.err_path, "--force"));

    assert_int_equal(markers_prune(&p, e, "--older-than", "10m", "--stream", IT_STREAM, "--durable",
                                   DURABLE, NULL),
                     2);
    assert_true(it_file_contains(p.err_path, "--older-than 10m is shorter than the 1h a message "
                                             "can still be delivered (stream EVENTS MaxAge 1h; "
                                             "redelivery horizon 6m)"));

    assert_int_equal(markers_prune(&p, e, "--older-than", "10m", "--stream", "NOSUCH", NULL), 2);
    assert_true(it_file_contains(p.err_path, "stream NOSUCH does not exist"));

    assert_int_equal(markers_prune(&p, e, "--older-than", "2h", "--stream", IT_STREAM, "--durable",
                                   DURABLE, NULL),
                     0);
    assert_true(it_file_contains(p.out_path, "pruned=30"));

    assert_int_equal(markers_prune(&p, e, "--older-than", "10m", "--force", NULL), 0);
    assert_true(it_file_contains(p.out_path, "pruned=20"));
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(retention_below_floor_is_refused, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(old_markers_are_pruned_in_the_background, it_setup,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(markers_prune_applies_the_floor, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
