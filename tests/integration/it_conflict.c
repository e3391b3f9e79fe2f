/* SPDX-License-Identifier: Apache-2.0 */
/* Payload fingerprints (issue 12): an event whose id is already marked
 * with other content is a producer reusing an id, not a redelivery. Its
 * handlers do not run; `--on-conflict` decides the rest: dead-letter (the
 * default, reason "conflict"), drop or log (both ack it). Every policy
 * counts it in ibus_conflicts_total and logs the consumer and the id, never
 * the payload. The same content sent again stays a plain duplicate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

#define TYPE "order.created"
/* What the producer sent first and what it sent later under the same id;
 * the second must never reach a log line. */
#define FIRST_PAYLOAD "first-content"
#define OTHER_PAYLOAD "other-content-kept-out-of-logs"

typedef struct conflict_run {
    it_env *e;
    const char *durable;
    char audit[PATH_MAX];
    char id[40];
    int port;
    it_proc host;
} conflict_run;

/* Starts one host with the audit plugin, /metrics on a free loopback port
 * and the policy given (NULL: the default), and waits until it is ready. */
static void start_host(conflict_run *c, const char *policy)
{
    char cfg[PATH_MAX + 8], addr[64];
    it_argv a;
    c->port = it_free_port();
    assert_true(c->port > 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", c->port);
    snprintf(cfg, sizeof(cfg), "file=%s", it_path(c->audit, c->e, "audit.log"));
    it_argv_run(&a, c->e, c->durable);
    it_argv_plugin(&a, "audit", cfg);
    it_argv_addl(&a, "--http", addr, NULL);
    if (policy != NULL)
        it_argv_addl(&a, "--on-conflict", policy, NULL);
    assert_true(it_spawn(&c->host, c->e, "host", &a));
    it_argv_free(&a);
    int64_t deadline = it_now_ms() + it_timeout(30000);
    int ready = 0;
    while ((ready = it_http_get(NULL, c->e, c->port, "/readyz")) != 200 && it_now_ms() < deadline)
        it_sleep_ms(100);
    assert_int_equal(ready, 200);
}

/* Publishes one event with the test's id and `payload`, and waits until
 * the consumer has settled it. */
static void publish_one(conflict_run *c, const char *name, const char *payload)
{
    char path[PATH_MAX], file[64];
    char *ids[1] = {c->id};
    char *payloads[1] = {(char *)payload};
    it_published out;
    snprintf(file, sizeof(file), "%s.jsonl", name);
    assert_true(it_write_jsonl_each(it_path(path, c->e, file), ids, payloads, 1, TYPE));
    assert_int_equal(it_publish(&out, c->e, path, NULL), 0);
    assert_int_equal(out.published, 1);
    assert_true(
        it_wait_consumer_idle(NULL, &c->e->server, IT_STREAM, c->durable, it_timeout(30000)));
}

static double scrape(conflict_run *c, const char *series)
{
    char *body = NULL;
    double v = -1;
    assert_int_equal(it_http_get(&body, c->e, c->port, "/metrics"), 200);
    assert_non_null(body);
    if (!it_prom_value(&v, body, series))
        fail_msg("series %s missing from /metrics", series);
    free(body);
    return v;
}

/* The whole story under one policy: the first content is handled once,
 * the same content again is a duplicate, other content is a conflict. */
static void run_conflict(it_env *e, const char *durable, const char *policy, bool dead_letter)
{
    conflict_run c = {.e = e, .durable = durable};
    char dlq[64], needle[96];
    char **ids = NULL, path[PATH_MAX];
    assert_true(it_make_ids(&ids, 1, it_path(path, e, "ids.txt")));
    snprintf(c.id, sizeof(c.id), "%s", ids[0]);
    it_lines_free(ids, 1);
    snprintf(dlq, sizeof(dlq), "DLQ_%s", durable);

    start_host(&c, policy);
    publish_one(&c, "first", FIRST_PAYLOAD);
    assert_int_equal(it_wait_lines(c.audit, 1, it_timeout(30000)), 1);
    publish_one(&c, "again", FIRST_PAYLOAD);
    assert_int_equal(scrape(&c, "ibus_duplicates_dropped_total"), 1);
    assert_int_equal(scrape(&c, "ibus_conflicts_total"), 0);

    publish_one(&c, "other", OTHER_PAYLOAD);
    assert_int_equal(scrape(&c, "ibus_conflicts_total"), 1);
    if (dead_letter) {
        it_msg *dl = NULL;
        assert_int_equal(it_wait_stream_count(&e->server, dlq, 1, it_timeout(30000)), 1);
        assert_int_equal(it_stream_read_all(&dl, &e->server, dlq), 1);
        assert_string_equal(it_msg_header(&dl[0], "Ibus-Reason"), "conflict");
        assert_string_equal(it_msg_header(&dl[0], "Ibus-Event-Id"), c.id);
        /* the original bytes: the event with the other content */
        assert_non_null(memmem(dl[0].data, dl[0].len, OTHER_PAYLOAD, strlen(OTHER_PAYLOAD)));
        it_msgs_free(dl, 1);
        assert_int_equal(scrape(&c, "ibus_dead_lettered_total{reason=\"conflict\"}"), 1);
    } else {
        assert_int_equal(it_stream_count(&e->server, dlq), 0);
    }
    /* the handler ran once: for the first content only */
    assert_int_equal(it_file_lines(c.audit), 1);
    it_finish_hosts(e, durable, &c.host, 1, it_timeout(60000));

    /* one log line names the consumer and the id; no line holds the
     * conflicting payload */
    snprintf(needle, sizeof(needle), "\"event_id\":\"%s\"", c.id);
    assert_true(it_file_contains(c.host.err_path, needle));
    snprintf(needle, sizeof(needle), "%s/audit/audit", durable);
    assert_true(it_file_contains(c.host.err_path, needle));
    assert_false(it_file_contains(c.host.err_path, OTHER_PAYLOAD));
    assert_false(it_file_contains(c.host.out_path, OTHER_PAYLOAD));
    it_done(e);
}

static void conflict_dead_lettered(void **state)
{
    run_conflict(*state, "confdl", NULL, true);
}

static void conflict_dropped(void **state)
{
    run_conflict(*state, "confdrop", "drop", false);
}

static void conflict_logged(void **state)
{
    run_conflict(*state, "conflog", "log", false);
}

/* One test per line: CMake registers them by reading these lines. */
// clang-format off
static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(conflict_dead_lettered, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(conflict_dropped, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(conflict_logged, it_setup, it_teardown),
};
// clang-format on

IB_TEST_MAIN(tests)
