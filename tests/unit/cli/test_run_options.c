/* SPDX-License-Identifier: Apache-2.0 */
/* `ibus run`'s own options as they reach the host: --on-conflict,
 * --retention and --retention-unsafe (issue 12). The host is replaced by a
 * stub that keeps the configuration it was given, so no server is needed. */
#include "ib_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "host.h"

static ib_host_config seen;
static int calls;
/* the first plugin paths given, copied: `ibus run` frees its own */
static char seen_plugins[2][4096];

/* Stands in for the host: records what `ibus run` configured. */
int ib_host_run(const ib_host_config *config)
{
    seen = *config;
    for (size_t i = 0; i < 2; i++)
        snprintf(seen_plugins[i], sizeof(seen_plugins[i]), "%s",
                 config->plugins[0] != NULL && (i == 0 || config->plugins[1] != NULL)
                     ? config->plugins[i]
                     : "");
    calls++;
    return 0;
}

static int reset(void **state)
{
    (void)state;
    memset(&seen, 0, sizeof(seen));
    calls = 0;
    unsetenv("IB_ON_CONFLICT");
    unsetenv("IB_RETENTION");
    unsetenv("IB_RETENTION_UNSAFE");
    return 0;
}

/* Runs `ibus run --plugin ./x.so ARGS...` (NULL-terminated). */
static int run(const char *first, ...)
{
    char *argv[32] = {"run", "--plugin", "./x.so", "--log-level", "error"};
    int argc = 5;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return ib_cmd_run(argc, argv);
}

static void defaults(void **state)
{
    (void)state;
    assert_int_equal(run(NULL), 0);
    assert_int_equal(calls, 1);
    assert_int_equal(seen.on_conflict, IB_CONFLICT_DEAD_LETTER);
    assert_false(seen.retention_unsafe);
    /* Issue 33: retention that works out of the box. --create gives the
     * event stream 7 days and the dead-letter stream 30 days and 1 GiB;
     * markers follow the stream's MaxAge; ids of versions 4 and 8 pass. */
    assert_int_equal(seen.retention_ms, IB_HOST_RETENTION_AUTO);
    assert_int_equal(seen.stream_max_age_ms, 7LL * 86400 * 1000);
    assert_int_equal(seen.stream_max_bytes, 0);
    assert_int_equal(seen.dead_letter_max_age_ms, 30LL * 86400 * 1000);
    assert_int_equal(seen.dead_letter_max_bytes, 1024LL * 1024 * 1024);
    assert_int_equal(seen.uuid_versions, (1u << 4) | (1u << 8));
}

static void each_conflict_policy(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        ib_conflict_policy want;
    } c[] = {
        {"dead-letter", IB_CONFLICT_DEAD_LETTER},
        {"drop", IB_CONFLICT_DROP},
        {"log", IB_CONFLICT_LOG},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        assert_int_equal(run("--on-conflict", c[i].value, NULL), 0);
        assert_int_equal(seen.on_conflict, c[i].want);
    }
    setenv("IB_ON_CONFLICT", "drop", 1);
    assert_int_equal(run(NULL), 0);
    assert_int_equal(seen.on_conflict, IB_CONFLICT_DROP);
    assert_int_equal(run("--on-conflict=log", NULL), 0); /* flags win */
    assert_int_equal(seen.on_conflict, IB_CONFLICT_LOG);
}

static void retention_flags(void **state)
{
    (void)state;
    assert_int_equal(run("--retention", "2h", "--retention-unsafe", NULL), 0);
    assert_int_equal(seen.retention_ms, 2 * 3600 * 1000);
    assert_true(seen.retention_unsafe);
    setenv("IB_RETENTION", "30d", 1);
    assert_int_equal(run(NULL), 0);
    assert_int_equal(seen.retention_ms, 30LL * 86400 * 1000);
    assert_false(seen.retention_unsafe);
    assert_int_equal(run("--retention", "0", NULL), 0); /* never */
    assert_int_equal(seen.retention_ms, 0);
    assert_int_equal(run("--retention", "auto", NULL), 0);
    assert_int_equal(seen.retention_ms, IB_HOST_RETENTION_AUTO);
}

/* Refused before the host runs: exit 2. */
static void bad_values_exit_2(void **state)
{
    (void)state;
    assert_int_equal(run("--on-conflict", "ignore", NULL), 2);
    assert_int_equal(run("--on-conflict", "", NULL), 2);
    assert_int_equal(run("--on-conflict", "dead", NULL), 2);
    assert_int_equal(run("--retention", "soon", NULL), 2);
    /* a kv: bucket prunes by its TTL */
    assert_int_equal(run("--retention", "1h", "--recorder", "kv:markers", NULL), 2);
    assert_int_equal(calls, 0);
    assert_int_equal(run("--uuid-versions", "4,9", NULL), 2);
    assert_int_equal(run("--uuid-versions", "4", "--any-uuid-version", NULL), 2);
    assert_int_equal(calls, 0);
    /* without retention, or with the automatic one (the TTL), a kv:
     * recorder is fine */
    assert_int_equal(run("--recorder", "kv:markers", NULL), 0);
    assert_int_equal(run("--recorder", "kv:markers", "--retention", "0", NULL), 0);
    assert_int_equal(calls, 2);
}

/* Issue 25: --check and the stream limits of --create reach the host; a
 * --nats-url whose port is not a number is exit 2 before any connect. */
static void check_and_stream_limits(void **state)
{
    (void)state;
    assert_int_equal(
        run("--check", "--stream-max-age", "30d", "--stream-max-bytes", "1000000", NULL), 0);
    assert_true(seen.check_only);
    assert_int_equal(seen.stream_max_age_ms, 30LL * 86400 * 1000);
    assert_int_equal(seen.stream_max_bytes, 1000000);
    assert_int_equal(run("--stream-max-age", "0", "--dead-letter-max-age", "1h",
                         "--dead-letter-max-bytes", "0", NULL),
                     0);
    assert_false(seen.check_only);
    assert_int_equal(seen.stream_max_age_ms, 0);
    assert_int_equal(seen.dead_letter_max_age_ms, 3600 * 1000);
    assert_int_equal(seen.dead_letter_max_bytes, 0);
    assert_int_equal(run("--uuid-versions", "any", NULL), 0);
    assert_int_equal(seen.uuid_versions, 0xffffu);
    assert_int_equal(run("--any-uuid-version", NULL), 0);
    assert_int_equal(seen.uuid_versions, 0xffffu);
    calls = 0;
    assert_int_equal(run("--nats-url", "127.0.0.1:notaport", NULL), 2);
    assert_int_equal(run("--nats-url", "nats://a:1,nats://b:99999", NULL), 2);
    assert_int_equal(run("--nats-url", "nats://:4222", NULL), 2);
    assert_int_equal(run("--stream-max-age", "forever", NULL), 2);
    assert_int_equal(calls, 0);
    assert_int_equal(run("--nats-url", "nats://u:p@127.0.0.1:4222, tls://[::1]:4443", NULL), 0);
    assert_int_equal(run("--nats-url", "127.0.0.1", NULL), 0);
    assert_int_equal(calls, 2);
}

/* Runs `ibus run --plugin x.so OPTION VALUE` with stderr captured into
 * `err` (cap bytes); returns the exit code. */
static int run_capture(char *err, size_t cap, const char *option, const char *value)
{
    char path[] = "/tmp/ibus-cli-err-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    int code = run(option, value, NULL);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t n = pread(fd, err, cap - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    return code;
}

/* Issue 32: names and subjects JetStream would misread, and control bytes
 * in anything that becomes a subject, a header or a consumer identity, are
 * refused before the host runs (exit 2), by a message naming the option. */
static void names_subjects_and_identities_checked(void **state)
{
    (void)state;
    static const struct {
        const char *option, *value, *why;
    } bad[] = {
        {"--durable", "orders\r\nIbus-Reason: forged", "control byte"},
        {"--durable", "or.ders", "'.', '*' or '>'"},
        {"--durable", "or ders", "a space"},
        {"--durable", "", "empty"},
        {"--stream", "EV>", "'.', '*' or '>'"},
        {"--subject", "events.\r\nPUB $JS.API.STREAM.PURGE.EVENTS 0", "control byte"},
        {"--subject", "events..x", "empty token"},
        {"--subject", "events.>.x", "'>' ends"},
        {"--dead-letter", "$JS.API.STREAM.PURGE.EVENTS", "a $ subject"},
        {"--dead-letter", "_INBOX.x", "_INBOX"},
        {"--dead-letter", "dlq.*", "wildcard"},
        {"--stream-subjects", "events.>,bad subject", "a space"},
        {"--publish-prefix", "out\n", "control byte"},
        {"--consumer-name", "p/h=team\r\nX-Injected: 1", "control byte"},
        {"--consumer-name", "p/h=team\x7f", "control byte"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[1024];
        int code = run_capture(err, sizeof(err), bad[i].option, bad[i].value);
        if (code != 2 || strstr(err, bad[i].option) == NULL || strstr(err, bad[i].why) == NULL)
            fail_msg("%s '%s': exit %d, stderr '%s'; want 2 naming the option and '%s'",
                     bad[i].option, bad[i].value, code, err, bad[i].why);
        /* the message never carries the raw control bytes */
        for (const char *c = err; *c != '\0'; c++)
            if (*c != '\n' && ((unsigned char)*c < 0x20 || *c == 0x7f))
                fail_msg("%s: stderr holds byte 0x%02x: '%s'", bad[i].option, *c, err);
    }
    assert_int_equal(calls, 0);
    /* what is fine stays fine */
    assert_int_equal(run("--subject", "events.*.created", "--stream-subjects", "a.*,b.>",
                         "--dead-letter", "dlq.orders", "--consumer-name", "p/h=team a/x",
                         "--durable", "orders-2_v1", NULL),
                     0);
    assert_int_equal(calls, 1);
}

/* Issue 33: --plugin NAME is looked up in the plugin directory
 * (--plugin-dir, else the install's); a path is kept as it is; a name
 * that is not there is exit 2, naming the directory and the way out. */
static void plugin_names_resolved(void **state)
{
    (void)state;
    char dir[] = "/tmp/ib-cli-plugins.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char so[sizeof(dir) + 16];
    snprintf(so, sizeof(so), "%s/audit.so", dir);
    FILE *f = fopen(so, "w");
    assert_non_null(f);
    fclose(f);
    static const char *const names[] = {"audit", "audit.so"};
    for (size_t i = 0; i < 2; i++) {
        char *argv[] = {"run", "--plugin",    (char *)names[i], "--plugin-dir",
                        dir,   "--log-level", "error",          NULL};
        assert_int_equal(ib_cmd_run(7, argv), 0);
        assert_string_equal(seen_plugins[0], so);
        assert_string_equal(seen_plugins[1], "");
    }
    char *paths[] = {"run",         "--plugin",    "./x.so", "--plugin",
                     "/opt/p/y.so", "--log-level", "error",  NULL};
    assert_int_equal(ib_cmd_run(7, paths), 0);
    assert_string_equal(seen_plugins[0], "./x.so");
    assert_string_equal(seen_plugins[1], "/opt/p/y.so");
    calls = 0;
    char *missing[] = {"run", "--plugin", "nosuch", "--plugin-dir", dir, NULL};
    assert_int_equal(ib_cmd_run(5, missing), 2);
    char *empty[] = {"run", "--plugin", ".so", "--plugin-dir", dir, NULL};
    assert_int_equal(ib_cmd_run(5, empty), 2);
    /* without --plugin-dir: neither the install's nor the configured one */
    char *nodir[] = {"run", "--plugin", "audit", NULL};
    assert_int_equal(ib_cmd_run(3, nodir), 2);
    assert_int_equal(calls, 0);
    assert_int_equal(unlink(so), 0);
    assert_int_equal(rmdir(dir), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(names_subjects_and_identities_checked, reset),
    cmocka_unit_test_setup(check_and_stream_limits, reset),
    cmocka_unit_test_setup(defaults, reset),
    cmocka_unit_test_setup(each_conflict_policy, reset),
    cmocka_unit_test_setup(retention_flags, reset),
    cmocka_unit_test_setup(bad_values_exit_2, reset),
    cmocka_unit_test_setup(plugin_names_resolved, reset),
};

IB_TEST_MAIN(tests)
