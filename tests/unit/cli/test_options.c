/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI option layer: defaults, environment, flags (flags win), lists,
 * durations, bounds, and error messages that name the option. */
#include "ib_test.h"

#include <stdlib.h>
#include <string.h>

#include "options.h"

typedef struct cfg {
    const char *url;
    int64_t batch;
    int64_t wait_ms;
    bool create;
    double ratio;
    ib_strlist plugins;
} cfg;

#define OPTS(c)                                                                                    \
    const ib_opt opts[] = {                                                                        \
        {"nats-url", IB_OPT_STRING, &(c).url, "URL", "nats://127.0.0.1:4222", "url", 0, 0},        \
        {"batch", IB_OPT_INT, &(c).batch, "N", "64", "batch", 1, 4096},                            \
        {"ack-wait", IB_OPT_DURATION, &(c).wait_ms, "D", "30s", "wait", 100, 86400000},            \
        {"create", IB_OPT_FLAG, &(c).create, NULL, NULL, "create", 0, 0},                          \
        {"ratio", IB_OPT_DOUBLE, &(c).ratio, "R", "0.5", "ratio", 0, 0},                           \
        {"plugin", IB_OPT_LIST, &(c).plugins, "PATH", NULL, "plugin", 0, 0},                       \
    };                                                                                             \
    const size_t nopts = sizeof(opts) / sizeof(opts[0])

static int clear_env(void **state)
{
    (void)state;
    unsetenv("IB_NATS_URL");
    unsetenv("IB_BATCH");
    unsetenv("IB_ACK_WAIT");
    unsetenv("IB_CREATE");
    unsetenv("IB_PLUGIN");
    return 0;
}

static void defaults_apply(void **state)
{
    (void)state;
    cfg c;
    memset(&c, 0, sizeof(c));
    OPTS(c);
    char *argv[] = {"run", NULL};
    bool help;
    assert_int_equal(ib_opts_parse(opts, nopts, 1, argv, NULL, &help, NULL), IB_OK);
    assert_string_equal(c.url, "nats://127.0.0.1:4222");
    assert_int_equal(c.batch, 64);
    assert_int_equal(c.wait_ms, 30000);
    assert_false(c.create);
    assert_int_equal(c.plugins.count, 0);
    ib_opts_release(opts, nopts);
}

static void env_then_flags(void **state)
{
    (void)state;
    cfg c;
    memset(&c, 0, sizeof(c));
    OPTS(c);
    setenv("IB_NATS_URL", "nats://127.0.0.1:1", 1);
    setenv("IB_BATCH", "8", 1);
    setenv("IB_CREATE", "true", 1);
    setenv("IB_PLUGIN", "a.so,b.so", 1);
    char *argv[] = {"run", "--batch", "16", "--ack-wait=250ms", NULL};
    bool help;
    assert_int_equal(ib_opts_parse(opts, nopts, 4, argv, NULL, &help, NULL), IB_OK);
    assert_string_equal(c.url, "nats://127.0.0.1:1"); /* env over default */
    assert_int_equal(c.batch, 16);                    /* flag over env */
    assert_int_equal(c.wait_ms, 250);
    assert_true(c.create);
    assert_int_equal(c.plugins.count, 2);
    assert_string_equal(c.plugins.items[1], "b.so");
    ib_opts_release(opts, nopts);
    clear_env(NULL);
}

static void list_flags_replace_env(void **state)
{
    (void)state;
    cfg c;
    memset(&c, 0, sizeof(c));
    OPTS(c);
    setenv("IB_PLUGIN", "a.so,b.so", 1);
    char *argv[] = {"run", "--plugin", "x.so", "--plugin", "y.so", "--create", NULL};
    bool help;
    assert_int_equal(ib_opts_parse(opts, nopts, 6, argv, NULL, &help, NULL), IB_OK);
    assert_int_equal(c.plugins.count, 2);
    assert_string_equal(c.plugins.items[0], "x.so");
    assert_string_equal(c.plugins.items[1], "y.so");
    assert_null(c.plugins.items[2]);
    assert_true(c.create);
    ib_opts_release(opts, nopts);
    clear_env(NULL);
}

typedef struct bad_case {
    const char *arg, *value, *want;
} bad_case;

static void errors_name_the_option(void **state)
{
    (void)state;
    static const bad_case bad[] = {
        {"--batch", "0", "--batch: expected an integer in 1..4096, got '0'"},
        {"--batch", "x", "--batch: expected an integer in 1..4096, got 'x'"},
        {"--ack-wait", "soon", "--ack-wait: expected a duration like 250ms, 30s, 5m, got 'soon'"},
        {"--ack-wait", "5ms", "--ack-wait: 5ms is out of range 100ms..86400000ms"},
        {"--ratio", "half", "--ratio: expected a number, got 'half'"},
        {"--nope", "1", "unknown option --nope (see --help)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cfg c;
        memset(&c, 0, sizeof(c));
        OPTS(c);
        char *argv[] = {"run", (char *)bad[i].arg, (char *)bad[i].value, NULL};
        bool help;
        ib_error e;
        assert_int_equal(ib_opts_parse(opts, nopts, 3, argv, NULL, &help, &e), IB_ERR_CONFIG);
        assert_string_equal(e.msg, bad[i].want);
        ib_opts_release(opts, nopts);
    }
    cfg c;
    memset(&c, 0, sizeof(c));
    OPTS(c);
    setenv("IB_BATCH", "-3", 1);
    char *argv[] = {"run", NULL};
    bool help;
    ib_error e;
    assert_int_equal(ib_opts_parse(opts, nopts, 1, argv, NULL, &help, &e), IB_ERR_CONFIG);
    assert_string_equal(e.msg, "IB_BATCH (environment): expected an integer in 1..4096, got '-3'");
    ib_opts_release(opts, nopts);
    clear_env(NULL);
}

static void missing_value_and_help(void **state)
{
    (void)state;
    cfg c;
    memset(&c, 0, sizeof(c));
    OPTS(c);
    char *argv[] = {"run", "--batch", NULL};
    bool help;
    ib_error e;
    assert_int_equal(ib_opts_parse(opts, nopts, 2, argv, NULL, &help, &e), IB_ERR_CONFIG);
    assert_string_equal(e.msg, "--batch: missing value");
    char *argv2[] = {"run", "--help", NULL};
    assert_int_equal(ib_opts_parse(opts, nopts, 2, argv2, NULL, &help, &e), IB_OK);
    assert_true(help);
    char *argv3[] = {"run", "stray", NULL};
    assert_int_equal(ib_opts_parse(opts, nopts, 2, argv3, NULL, &help, &e), IB_ERR_CONFIG);
    assert_string_equal(e.msg, "unexpected argument 'stray'");
    ib_opts_release(opts, nopts);
}

static void durations(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc;
        int64_t ms;
    } d[] = {
        {"250ms", 0, 250}, {"30s", 0, 30000},  {"30", 0, 30000},    {"1.5s", 0, 1500},
        {"2m", 0, 120000}, {"1h", 0, 3600000}, {"1d", 0, 86400000}, {"0", 0, 0},
        {"", -1, 0},       {"s", -1, 0},       {"-1s", -1, 0},      {"5x", -1, 0},
        {"5 s", -1, 0},    {"1e30d", -1, 0},
    };
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
        int64_t ms = -7;
        int rc = ib_parse_duration_ms(&ms, d[i].text);
        if (rc != d[i].rc || (rc == 0 && ms != d[i].ms))
            fail_msg("duration '%s': rc %d ms %lld", d[i].text, rc, (long long)ms);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(defaults_apply, clear_env),
    cmocka_unit_test_setup(env_then_flags, clear_env),
    cmocka_unit_test_setup(list_flags_replace_env, clear_env),
    cmocka_unit_test_setup(errors_name_the_option, clear_env),
    cmocka_unit_test_setup(missing_value_and_help, clear_env),
    cmocka_unit_test(durations),
};
IB_TEST_MAIN(tests)
