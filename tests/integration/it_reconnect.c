/* SPDX-License-Identifier: Apache-2.0 */
/* Issue 23, part 2: a pull request lost across a reconnect must not stall
 * the consumer. `ibus run` pulls with --pull-expires 30s and sits idle, a
 * request waiting on the server; the server is restarted on the same port
 * and store, 20 times, by SIGTERM (it answers 409 "Server Shutdown") and
 * by kill -9 (it forgets the request) in turn. After each restart, once
 * ibus has logged its reconnect, one event is published: it must be
 * handled well before the 30 s the lost request would have waited. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

#define RESTARTS 20

/* A bound far below the 30 s expiry, and far above the time one event
 * takes once a request is on the server (a few ms), even on a loaded
 * machine under a sanitizer. */
#define HANDLED_WITHIN_MS 5000

/* How often `needle` occurs in the file at `path` (0 when missing). */
static size_t occurrences(const char *path, const char *needle)
{
    size_t count = 0;
    char *text = it_file_read(NULL, path);
    for (const char *at = text; at != NULL && (at = strstr(at, needle)) != NULL; at++)
        count++;
    free(text);
    return count;
}

/* Waits until the host has logged `want` reconnects. */
static void wait_reconnects(const it_proc *host, size_t want)
{
    int64_t deadline = it_now_ms() + it_timeout(30000);
    size_t seen = 0;
    while ((seen = occurrences(host->err_path, "nats reconnected")) < want) {
        if (it_now_ms() > deadline)
            fail_msg("the host logged %zu reconnects, expected %zu", seen, want);
        it_sleep_ms(20);
    }
}

/* Publishes one order and returns how long until the audit file has
 * `lines` lines (waiting up to 40 s, so a failure says how long it took). */
static int64_t publish_and_time(it_env *e, const char *audit, size_t lines)
{
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.created", "--count", "1", NULL), 0);
    int64_t published = it_now_ms();
    size_t got = it_wait_lines(audit, lines, 40000);
    int64_t took = it_now_ms() - published;
    if (got < lines)
        fail_msg("event %zu not handled %lld ms after it was published", lines, (long long)took);
    return took;
}

static void idle_restarts_do_not_stall(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], cfg[PATH_MAX + 8];
    it_proc host;
    it_argv a;
    int64_t worst[2] = {0, 0}; /* SIGTERM, kill -9 */

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    it_argv_run(&a, e, "reconnect");
    it_argv_plugin(&a, "audit", cfg);
    it_argv_addl(&a, "--pull-expires", "30s", NULL);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "reconnect", it_timeout(30000)));
    publish_and_time(e, audit, 1);

    for (int i = 1; i <= RESTARTS; i++) {
        bool kill9 = i % 2 == 0;
        it_sleep_ms(300); /* idle: the host's next request waits on the server */
        assert_true(kill9 ? it_server_kill(&e->server) : it_server_stop(&e->server));
        assert_true(it_server_restart(&e->server));
        wait_reconnects(&host, (size_t)i);
        int64_t took = publish_and_time(e, audit, (size_t)i + 1);
        printf("restart %2d by %s: handled %lld ms after publishing\n", i,
               kill9 ? "kill -9" : "SIGTERM", (long long)took);
        if (took >= HANDLED_WITHIN_MS)
            fail_msg("restart %d by %s: the event took %lld ms (bound %d ms, expiry 30 s)", i,
                     kill9 ? "kill -9" : "SIGTERM", (long long)took, HANDLED_WITHIN_MS);
        if (took > worst[kill9])
            worst[kill9] = took;
    }
    printf("max publish-to-handled: %lld ms after SIGTERM, %lld ms after kill -9 (bound %d ms)\n",
           (long long)worst[0], (long long)worst[1], HANDLED_WITHIN_MS);

    it_finish_hosts(e, "reconnect", &host, 1, it_timeout(60000));
    /* each event once: nothing was handled twice across the restarts */
    assert_int_equal(it_file_lines(audit), RESTARTS + 1);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(idle_restarts_do_not_stall, it_setup, it_teardown),
};

IB_TEST_MAIN(tests)
