/* SPDX-License-Identifier: Apache-2.0 */
/* `ibus run` end to end, one host: the happy path, duplicates with exact
 * counts, RETRY with back-off, two handlers of which one fails, a type
 * nobody handles, and configuration errors (exit 2). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

#define TYPE_SCRIPTED "test.scripted"

static void start_host(it_proc *host, it_env *e, const char *durable, const char *plugin,
                       const char *config, const char *const *extra)
{
    it_argv a;
    it_argv_run(&a, e, durable);
    it_argv_plugin(&a, plugin, config);
    for (; extra != NULL && *extra != NULL; extra++)
        it_argv_add(&a, *extra);
    assert_true(it_spawn(host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, durable, it_timeout(30000)));
}

/* ibus run started while its server is down waits and connects once the
 * server is up (a refused login, by contrast, exits at once: it_auth). */
static void starts_before_its_server(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 8];
    it_proc host;
    it_published pub;
    it_tally t;

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    assert_true(it_server_stop(&e->server));
    it_argv a;
    it_argv_run(&a, e, "late");
    it_argv_plugin(&a, "audit", cfg);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    it_sleep_ms(1000);
    assert_true(it_proc_running(&host)); /* still waiting, not given up */
    assert_true(it_server_restart(&e->server));
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "late", it_timeout(30000)));
    assert_int_equal(it_publish(&pub, e, NULL, "--type", "order.created", "--count", "50",
                                "--ids-file", it_path(ids, e, "ids.txt"), NULL),
                     0);
    assert_int_equal(it_wait_lines(audit, 50, it_timeout(60000)), 50);
    it_finish_hosts(e, "late", &host, 1, it_timeout(60000));
    assert_true(it_tally_file(&t, audit, ids, "late/audit/audit", NULL, 0));
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    it_done(e);
}

static void happy_path(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 8];
    it_proc host;
    it_published pub;
    it_tally t;
    it_summary sum;
    const long n = 200;

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    start_host(&host, e, "happy", "audit", cfg, NULL);
    assert_int_equal(it_publish(&pub, e, NULL, "--type", "order.created", "--count", "200",
                                "--ids-file", it_path(ids, e, "ids.txt"), NULL),
                     0);
    assert_int_equal(pub.published, n);
    assert_int_equal(pub.unique, n);
    assert_int_equal(it_wait_lines(audit, (size_t)n, it_timeout(60000)), n);
    it_finish_hosts(e, "happy", &host, 1, it_timeout(60000));

    assert_true(it_tally_file(&t, audit, ids, "happy/audit/audit", NULL, 10));
    assert_int_equal(t.expected, n);
    assert_int_equal(t.lines, n);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.unexpected, 0);
    assert_int_equal(t.repeated, 0);

    assert_true(it_summary_read(&sum, it_path(audit, e, "summary.jsonl")));
    assert_int_equal(sum.lines, 1);
    assert_int_equal(sum.worst_exit, 0);
    assert_int_equal(sum.received, n);
    assert_int_equal(sum.handled, n);
    assert_int_equal(sum.acked, n);
    assert_int_equal(sum.duplicates, 0);
    assert_int_equal(sum.dead_lettered, 0);

    char **lines = NULL;
    size_t nl = it_file_read_lines(&lines, ids);
    assert_true(nl > 0);
    assert_int_equal(it_marker_lookup(e, "happy/audit/audit", lines[0]), 0);
    /* an identity the file has no markers of is an error (exit 2, issue
     * 25), not a quiet "not processed" */
    assert_int_equal(it_marker_lookup(e, "other/audit/audit", lines[0]), 2);
    it_lines_free(lines, nl);
    it_done(e);
}

static void duplicates_exact_counts(void **state)
{
    it_env *e = *state;
    char audit[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 8], count[24];
    it_proc host;
    it_published pub;
    it_tally t;
    it_summary sum;
    const long n = it_scaled(1000, 200);

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    snprintf(count, sizeof(count), "%ld", n);
    start_host(&host, e, "dups", "audit", cfg, NULL);
    assert_int_equal(it_publish(&pub, e, NULL, "--type", "order.created", "--count", count,
                                "--duplicates", "0.25", "--ids-file", it_path(ids, e, "ids.txt"),
                                NULL),
                     0);
    assert_int_equal(pub.unique, n);
    assert_int_equal(pub.published, pub.unique + pub.duplicates);
    assert_true(pub.duplicates > 0);
    assert_int_equal(it_wait_lines(audit, (size_t)n, it_timeout(60000)), n);
    it_finish_hosts(e, "dups", &host, 1, it_timeout(60000));

    /* each unique id exactly once in the audit file */
    assert_true(it_tally_file(&t, audit, ids, "dups/audit/audit", NULL, 10));
    assert_int_equal(t.expected, n);
    assert_int_equal(t.lines, n);
    assert_int_equal(t.missing, 0);
    assert_int_equal(t.repeated, 0);
    assert_int_equal(t.unexpected, 0);

    /* the totals add up: handled == unique, duplicates == published - unique */
    assert_true(it_summary_read(&sum, it_path(audit, e, "summary.jsonl")));
    printf("published=%ld unique=%ld duplicates=%ld; host received=%ld handled=%ld "
           "duplicates=%ld acked=%ld\n",
           pub.published, pub.unique, pub.duplicates, sum.received, sum.handled, sum.duplicates,
           sum.acked);
    assert_int_equal(sum.handled, pub.unique);
    assert_int_equal(sum.duplicates, pub.published - pub.unique);
    assert_int_equal(sum.received, pub.published);
    assert_int_equal(sum.acked, pub.published);
    assert_int_equal(sum.retried + sum.rejected + sum.dead_lettered + sum.naked, 0);
    it_done(e);
}

/* The delivery counts and verdicts the scripted plugin logged for one
 * handler, in file order: "<dc>:<verdict>" joined by spaces. */
static void history(char *out, size_t cap, const char *log, const char *consumer)
{
    char **lines = NULL;
    size_t n = it_file_read_lines(&lines, log);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char who[256], dc[24], verdict[24];
        if (!it_field(who, sizeof(who), lines[i], 0) || strcmp(who, consumer) != 0 ||
            !it_field(dc, sizeof(dc), lines[i], 3) ||
            !it_field(verdict, sizeof(verdict), lines[i], 4))
            continue;
        used +=
            (size_t)snprintf(out + used, cap - used, "%s%s:%s", used > 0 ? " " : "", dc, verdict);
        if (used >= cap)
            break;
    }
    it_lines_free(lines, n);
}

static void retry_backoff_then_marked(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 8], seen[512];
    it_proc host;
    it_summary sum;
    const char *extra[] = {"--retry-delay", "2s", "--retry-max-delay", "2s", NULL};

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(log, e, "calls.log"));
    start_host(&host, e, "retry", "scripted", cfg, extra);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--ids-file",
                                it_path(ids, e, "ids.txt"), "retry:1", NULL),
                     0);

    /* Watch the log: the first delivery's RETRY, then the redelivery. */
    int64_t deadline = it_now_ms() + it_timeout(60000), t_retry = 0, t_ok = 0;
    while (t_ok == 0 && it_now_ms() < deadline) {
        history(seen, sizeof(seen), log, "retry/scripted/scripted");
        if (t_retry == 0 && strstr(seen, "1:retry") != NULL)
            t_retry = it_now_ms();
        if (strstr(seen, "2:ok") != NULL)
            t_ok = it_now_ms();
        it_sleep_ms(10);
    }
    assert_true(t_retry > 0);
    assert_true(t_ok > 0);
    /* The nak carried a delay: 2s +-20% jitter. Allow for how late we saw
     * the first line; redelivery at once would take milliseconds. */
    printf("redelivered %lld ms after the RETRY was seen\n", (long long)(t_ok - t_retry));
    assert_true(t_ok - t_retry >= 1200);
    it_finish_hosts(e, "retry", &host, 1, it_timeout(60000));

    /* handled once: the failing handler ran twice, the other once */
    history(seen, sizeof(seen), log, "retry/scripted/scripted");
    assert_string_equal(seen, "1:retry 2:ok");
    history(seen, sizeof(seen), log, "retry/scripted/second");
    assert_string_equal(seen, "1:ok");

    char **lines = NULL;
    size_t nl = it_file_read_lines(&lines, ids);
    assert_int_equal(nl, 1);
    assert_int_equal(it_marker_lookup(e, "retry/scripted/scripted", lines[0]), 0);
    assert_int_equal(it_marker_lookup(e, "retry/scripted/second", lines[0]), 0);
    it_lines_free(lines, nl);

    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    assert_int_equal(sum.received, 2);
    assert_int_equal(sum.retried, 1);
    assert_int_equal(sum.naked, 1);
    assert_int_equal(sum.handled, 2);    /* scripted on delivery 2, second on delivery 1 */
    assert_int_equal(sum.duplicates, 1); /* second, skipped on delivery 2 */
    assert_int_equal(sum.acked, 1);
    it_done(e);
}

static void two_handlers_one_failing(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], ids[PATH_MAX], cfg[PATH_MAX + 32], seen[512];
    it_proc host;
    it_summary sum;
    const char *extra[] = {"--retry-delay", "200ms", NULL};

    snprintf(cfg, sizeof(cfg), "file=%s,second=retry:1", it_path(log, e, "calls.log"));
    start_host(&host, e, "two", "scripted", cfg, extra);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", TYPE_SCRIPTED, "--ids-file",
                                it_path(ids, e, "ids.txt"), "ok", NULL),
                     0);
    assert_int_equal(it_wait_lines(log, 3, it_timeout(60000)), 3);
    it_finish_hosts(e, "two", &host, 1, it_timeout(60000));

    /* only the failing handler ran again */
    history(seen, sizeof(seen), log, "two/scripted/scripted");
    assert_string_equal(seen, "1:ok");
    history(seen, sizeof(seen), log, "two/scripted/second");
    assert_string_equal(seen, "1:retry 2:ok");

    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    assert_int_equal(sum.handled, 2);
    assert_int_equal(sum.retried, 1);
    assert_int_equal(sum.duplicates, 1);
    assert_int_equal(sum.acked, 1);
    it_done(e);
}

static void unhandled_type_acked(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], cfg[PATH_MAX + 8];
    it_proc host;
    it_summary sum;
    it_consumer_state cs;

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(log, e, "calls.log"));
    start_host(&host, e, "nobody", "scripted", cfg, NULL);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "nobody.listens", "--count", "10", NULL),
                     0);
    assert_true(it_wait_consumer_idle(&cs, &e->server, IT_STREAM, "nobody", it_timeout(60000)));
    assert_int_equal(cs.pending, 0);
    assert_int_equal(cs.ack_pending, 0);
    assert_int_equal(cs.redelivered, 0);
    it_finish_hosts(e, "nobody", &host, 1, it_timeout(60000));

    char sp[PATH_MAX];
    assert_true(it_summary_read(&sum, it_path(sp, e, "summary.jsonl")));
    assert_int_equal(sum.received, 10);
    assert_int_equal(sum.unhandled, 10);
    assert_int_equal(sum.acked, 10);
    assert_int_equal(sum.handled, 0);
    assert_int_equal(sum.dead_lettered, 0);
    assert_int_equal(it_file_lines(log), 0);                        /* no handler ran */
    assert_int_equal(it_stream_count(&e->server, "DLQ_nobody"), 0); /* nothing dead-lettered */
    it_done(e);
}

/* Runs `ibus <args>` and asserts exit status 2 and that stderr names `what`. */
static void expect_config_error(it_env *e, const char *what, const char *const *args)
{
    it_argv a;
    it_proc p;
    it_argv_init(&a);
    it_argv_add(&a, it_ibus());
    for (; *args != NULL; args++)
        it_argv_add(&a, *args);
    int st = it_proc_run(&p, e->dir, "ibus", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    char *err = it_file_read(NULL, p.err_path);
    if (st != 2 || err == NULL || strstr(err, what) == NULL)
        fail_msg("expected exit 2 naming '%s', got %d: %s", what, st, err != NULL ? err : "");
    free(err);
}

static void config_errors_exit_2(void **state)
{
    it_env *e = *state;
    char missing[PATH_MAX], scripted[PATH_MAX];
    snprintf(scripted, sizeof(scripted), "%s", it_plugin("scripted"));
    it_path(missing, e, "missing.so");

    /* memory: recorder, so nothing is written in the working directory */
    const char *batch0[] = {"run", "--recorder", "memory:", "--batch",
                            "0",   "--plugin",   scripted,  "--allow-insecure-plugins",
                            NULL};
    expect_config_error(e, "--batch", batch0);
    const char *unknown[] = {"run", "--bogus-option", "1", NULL};
    expect_config_error(e, "--bogus-option", unknown);
    const char *no_file[] = {"run", "--recorder", "memory:", "--plugin", missing, NULL};
    expect_config_error(e, "missing.so", no_file);
    const char *no_plugin[] = {"run", "--recorder", "memory:", NULL};
    expect_config_error(e, "--plugin", no_plugin);
    const char *max_deliver[] = {"run", "--recorder", "memory:", "--max-deliver",
                                 "0",   "--plugin",   scripted,  NULL};
    expect_config_error(e, "--max-deliver", max_deliver);
    const char *duration[] = {"run",  "--recorder", "memory:", "--ack-wait",
                              "soon", "--plugin",   scripted,  NULL};
    expect_config_error(e, "--ack-wait", duration);
    /* a plugin whose init refuses its configuration (audit needs file=) */
    char audit[PATH_MAX];
    snprintf(audit, sizeof(audit), "%s", it_plugin("audit"));
    const char *bad_config[] = {"run",
                                "--recorder",
                                "memory:",
                                "--plugin",
                                audit,
                                "--allow-insecure-plugins",
                                "--plugin-config",
                                "audit=nothing",
                                NULL};
    expect_config_error(e, "audit", bad_config);
    const char *publish[] = {"publish", "--type", "x.y", "--duplicates", "2", "p", NULL};
    expect_config_error(e, "--duplicates", publish);
    const char *command[] = {"frobnicate", NULL};
    expect_config_error(e, "frobnicate", command);
    it_done(e);
}

/* A handler that runs three times longer than AckWait, with a second host
 * idle and pulling: the first host's +WPI keeps JetStream from redelivering
 * the message to the second, and its extended claim would keep the second
 * from running it anyway. The handler runs once and the message is received
 * once. */
static void slow_handler_kept_in_progress(void **state)
{
    it_env *e = *state;
    char log[PATH_MAX], cfg[PATH_MAX + 8];
    it_proc hosts[2];
    it_summary sum;
    const char *extra[] = {"--ack-wait", "1s", "--batch", "1", NULL};

    snprintf(cfg, sizeof(cfg), "file=%s", it_path(log, e, "calls.log"));
    start_host(&hosts[0], e, "slow", "scripted", cfg, extra);
    start_host(&hosts[1], e, "slow", "scripted", cfg, extra);
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "test.scripted", "sleep:3000", NULL), 0);
    /* two handlers (scripted sleeps 3 s, second is quick) */
    assert_int_equal(it_wait_lines(log, 2, it_timeout(60000)), 2);
    it_finish_hosts(e, "slow", hosts, 2, it_timeout(60000));
    assert_int_equal(it_file_lines(log), 2);
    assert_true(it_summary_read(&sum, it_path(log, e, "summary.jsonl")));
    assert_int_equal(sum.received, 1);
    assert_int_equal(sum.handled, 2);
    assert_int_equal(sum.duplicates, 0);
    assert_int_equal(sum.busy, 0);
    assert_int_equal(sum.acked, 1);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(slow_handler_kept_in_progress, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(happy_path, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(starts_before_its_server, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(duplicates_exact_counts, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(retry_backoff_then_marked, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(two_handlers_one_failing, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(unhandled_type_acked, it_setup, it_teardown),
    cmocka_unit_test_setup_teardown(config_errors_exit_2, it_setup_no_server, it_teardown),
};

IB_TEST_MAIN(tests)
