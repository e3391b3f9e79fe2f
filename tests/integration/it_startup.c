/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up that ends (issue 45, items 4 and 5), against real processes:
 * what no waiting can fix ends the run at once, non-zero, with JetStream's
 * words and a fix; a server that cannot be reached ends a run bounded by
 * --idle-exit or --connect-timeout; a run stopped before it consumed is
 * not a clean stop; and a plugin configuration that names no loaded
 * plugin is a configuration error naming the plugin it likely meant. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

/* `ibus run` with the audit plugin (configured), text logs and a
 * memory: recorder, talking to `url`; the test adds its own flags. */
static void argv_audit(it_argv *a, it_env *e, const char *url)
{
    char path[PATH_MAX];
    it_argv_init(a);
    it_argv_addl(a, it_ibus(), "run", "--nats-url", url, "--log-format", "text", "--recorder",
                 "memory:", NULL);
    it_argv_plugin(a, "audit", NULL);
    it_argv_addf(a, "--plugin-config=audit=file=%s", it_path(path, e, "audit.log"));
}

/* A URL on a loopback port nobody listens on. */
static void unreachable_url(char *url, size_t cap)
{
    snprintf(url, cap, "nats://127.0.0.1:%d", it_free_port());
}

/* Item 4: --create with subjects another stream captures (JetStream error
 * 10065) ends the run within 5 s, exit 1, in JetStream's words with the
 * fix; it used to be retried for 30 s "while the servers settle". */
static void overlapping_subjects_end_the_run(void **state)
{
    it_env *e = *state;
    char *err;
    it_argv a;
    argv_audit(&a, e, e->server.url);
    it_argv_addl(&a, "--create", "--stream", "FIRST", "--durable", "first", "--stream-subjects",
                 "events.>", "--idle-exit", "1s", NULL);
    assert_int_equal(it_run_capture(&err, NULL, e, "first", &a), 0);
    free(err);
    it_argv_free(&a);

    argv_audit(&a, e, e->server.url);
    it_argv_addl(&a, "--create", "--stream", "SECOND", "--durable", "second", "--stream-subjects",
                 "events.>", NULL);
    int64_t started = it_now_ms();
    assert_int_equal(it_run_capture(&err, NULL, e, "second", &a), 1);
    int64_t took = it_now_ms() - started;
    it_assert_contains(err, "ERROR create stream SECOND (events.>): Error: subjects overlap with "
                            "an existing stream (jetstream error 10065); another stream captures "
                            "some of these subjects: name it with --stream, or give other "
                            "--stream-subjects status=refused");
    assert_null(strstr(err, "retrying while the servers settle"));
    assert_true(took <= it_timeout(5000));
    free(err);
    it_argv_free(&a);
    it_done(e);
}

/* Item 4: a server nobody answers on ends a run with --idle-exit 1s (it
 * used to retry for ever), and one with --connect-timeout 2s, exit 1
 * within 30 s, saying why. */
static void unreachable_server_ends_a_bounded_run(void **state)
{
    it_env *e = *state;
    char url[64], *err;
    const char *bounds[][3] = {
        {"--idle-exit", "1s", "cannot connect to NATS within the idle exit time; exiting 1"},
        {"--connect-timeout", "2s", "cannot connect to NATS within the connect timeout; exiting 1"},
    };
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        it_argv a;
        unreachable_url(url, sizeof(url));
        argv_audit(&a, e, url);
        it_argv_addl(&a, bounds[i][0], bounds[i][1], NULL);
        int64_t started = it_now_ms();
        assert_int_equal(it_run_capture(&err, NULL, e, bounds[i][0] + 2, &a), 1);
        assert_true(it_now_ms() - started <= it_timeout(30000));
        it_assert_contains(err, bounds[i][2]);
        free(err);
        it_argv_free(&a);
    }
    it_done(e);
}

/* Item 4: SIGTERM while the first connect is still failing is no clean
 * stop: the run did none of its work, and exits 1 saying so (it used to
 * exit 0, which a supervisor takes for success). */
static void stopped_before_consuming_exits_1(void **state)
{
    it_env *e = *state;
    char url[64];
    it_argv a;
    it_proc p;
    unreachable_url(url, sizeof(url));
    argv_audit(&a, e, url);
    assert_true(it_spawn(&p, e, "stopped", &a));
    int64_t deadline = it_now_ms() + it_timeout(10000);
    while (!it_file_contains(p.err_path, "cannot connect to NATS; retrying") &&
           it_now_ms() < deadline)
        it_sleep_ms(50);
    assert_int_equal(it_proc_stop(&p, SIGTERM, it_timeout(10000)), 1);
    assert_true(
        it_file_contains(p.err_path, "stopped by a signal before consuming anything; exiting 1"));
    it_argv_free(&a);
    it_done(e);
}

/* Item 4, the other side: a stop that comes once the consumer is bound is
 * a clean stop (exit 0), however soon after. Stopped the moment the
 * consumer exists on the server, several times, so a stop that lands
 * between binding and the first pull is among them (it used to exit 1). */
static void stopped_once_bound_exits_0(void **state)
{
    it_env *e = *state;
    for (int round = 0; round < 5; round++) {
        char durable[32];
        it_argv a;
        it_proc p;
        snprintf(durable, sizeof(durable), "bound-%d", round);
        it_argv_run(&a, e, durable);
        it_argv_plugin(&a, "audit", NULL);
        it_argv_addf(&a, "--plugin-config=audit=file=%s/audit-%d.log", e->dir, round);
        assert_true(it_spawn(&p, e, durable, &a));
        it_argv_free(&a);
        assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
        assert_int_equal(it_proc_stop(&p, SIGTERM, it_timeout(30000)), 0);
        assert_false(it_file_contains(p.err_path, "before consuming anything"));
    }
    it_done(e);
}

/* Item 5: --plugin-config for a plugin that is not loaded exits 2 naming
 * it, the loaded ones and the likely one, before the plugin it meant
 * complains of its missing configuration; under --check too. */
static void misspelt_plugin_config_exits_2(void **state)
{
    it_env *e = *state;
    char *err;
    for (int check = 0; check < 2; check++) {
        it_argv a;
        it_argv_init(&a);
        it_argv_addl(&a, it_ibus(), "run", "--nats-url", "nats://127.0.0.1:1", "--log-format",
                     "text", "--recorder", "memory:", "--plugin-config", "adit=file=x", NULL);
        it_argv_plugin(&a, "audit", NULL);
        if (check)
            it_argv_add(&a, "--check");
        assert_int_equal(it_run_capture(&err, NULL, e, check ? "check" : "run", &a), 2);
        it_assert_contains(err, "ERROR --plugin-config adit=...: no plugin named 'adit' is loaded "
                                "(loaded: audit); did you mean audit? use the name the plugin "
                                "declares");
        assert_null(strstr(err, "plugin audit:")); /* audit's own init error */
        free(err);
        it_argv_free(&a);
    }
    it_done(e);
}

/* Item 5: the same for an IB_PLUGIN_CONFIG_<NAME> variable. */
static void misspelt_plugin_config_variable_exits_2(void **state)
{
    it_env *e = *state;
    char *err;
    it_argv a;
    argv_audit(&a, e, "nats://127.0.0.1:1");
    it_argv_add(&a, "--check");
    assert_int_equal(setenv("IB_PLUGIN_CONFIG_ADIT", "file=x", 1), 0);
    int code = it_run_capture(&err, NULL, e, "variable", &a);
    unsetenv("IB_PLUGIN_CONFIG_ADIT");
    assert_int_equal(code, 2);
    it_assert_contains(err, "ERROR environment variable IB_PLUGIN_CONFIG_ADIT: no plugin of that "
                            "name is loaded (loaded: audit); did you mean IB_PLUGIN_CONFIG_AUDIT? "
                            "unset it, or name the plugin as it declares itself");
    free(err);
    it_argv_free(&a);

    /* the variable of a loaded plugin is its configuration, as before */
    argv_audit(&a, e, "nats://127.0.0.1:1");
    it_argv_add(&a, "--check");
    assert_int_equal(setenv("IB_PLUGIN_CONFIG_AUDIT", "file=x", 1), 0);
    code = it_run_capture(&err, NULL, e, "loaded", &a);
    unsetenv("IB_PLUGIN_CONFIG_AUDIT");
    assert_int_equal(code, 0);
    free(err);
    it_argv_free(&a);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(overlapping_subjects_end_the_run, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(unreachable_server_ends_a_bounded_run, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(stopped_before_consuming_exits_1, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(stopped_once_bound_exits_0, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(misspelt_plugin_config_exits_2, it_setup_no_server,
                                    it_teardown),
    cmocka_unit_test_setup_teardown(misspelt_plugin_config_variable_exits_2, it_setup_no_server,
                                    it_teardown),
};

IB_TEST_MAIN(tests)
