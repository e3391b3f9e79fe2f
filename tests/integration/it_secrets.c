/* SPDX-License-Identifier: Apache-2.0 */
/* No secret reaches a log line, /readyz, /metrics or an error message
 * (issue 32, item 2). Every secret of this test rides where users put
 * them: the NATS password in --nats-url's userinfo and in a kv: recorder's
 * url=, an HTTP password and an api_key in the http plugin's url=. The
 * test runs ibus the ways that show those URLs (a running host, a host
 * that cannot reach its server, refused options, a refused login, a failing
 * endpoint), checks that the URLs were shown (redacted), then reads every
 * byte every process wrote, and the HTTP bodies, for each secret. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

#define NATS_PASS "pw-3f9a1c27"
#define WRONG_PASS "pw-wrong-81d0"
#define HTTP_PASS "hp-5d21aa90"
#define API_KEY "k-77e0b2c4"

static const char *const secrets[] = {NATS_PASS, WRONG_PASS, HTTP_PASS, API_KEY};

/* Every file the test's processes wrote (their .out and .err logs) and
 * the saved HTTP bodies: none may hold a secret. Returns the bytes read,
 * so the test knows it read something. */
static size_t grep_everything(it_env *e)
{
    char cmd[PATH_MAX + 128];
    /* the server's own configuration holds the password: not a log */
    snprintf(cmd, sizeof(cmd),
             "find '%s' -maxdepth 1 -type f \\( -name '*.out' -o -name '*.err' -o -name "
             "'*.txt' \\)",
             e->dir);
    FILE *list = popen(cmd, "r");
    assert_non_null(list);
    char path[PATH_MAX];
    size_t total = 0;
    while (fgets(path, sizeof(path), list) != NULL) {
        path[strcspn(path, "\n")] = '\0';
        size_t len = 0;
        char *text = it_file_read(&len, path);
        if (text == NULL)
            continue;
        total += len;
        for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
            if (memmem(text, len, secrets[i], strlen(secrets[i])) != NULL)
                fail_msg("%s holds the secret %s", path, secrets[i]);
        free(text);
    }
    pclose(list);
    return total;
}

/* Saves an HTTP body beside the logs, so the final grep reads it too. */
static void save_body(it_env *e, const char *name, const char *body)
{
    char path[PATH_MAX];
    assert_true(it_file_write(it_path(path, e, name), body, strlen(body)));
}

/* `ibus ARGS...` (NULL-terminated) to completion; returns its status. */
static int run_ibus(it_proc *p, it_env *e, const char *name, ...) __attribute__((sentinel));
static int run_ibus(it_proc *p, it_env *e, const char *name, ...)
{
    it_argv a;
    va_list ap;
    it_argv_init(&a);
    it_argv_add(&a, it_ibus());
    va_start(ap, name);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    int st = it_proc_run(p, e->dir, name, NULL, a.v, it_timeout(60000));
    it_argv_free(&a);
    return st;
}

/* A host whose URLs all carry secrets: it runs, serves /readyz and
 * /metrics, and its http handler fails against a port nobody listens on,
 * which logs the endpoint's url=. */
static void running_host(it_env *e, const char *nats_url, int dead_port)
{
    char db[PATH_MAX], cfg[512], recorder[512];
    int http_port = it_free_port();
    it_argv a;
    it_proc host;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--nats-url", nats_url, "--create", "--stream", IT_STREAM,
                 "--stream-subjects", IT_SUBJECTS, "--durable", "sec", "--log-format", "json",
                 "--max-deliver", "2", "--retry-delay", "100ms", "--retry-max-delay", "200ms",
                 NULL);
    snprintf(recorder, sizeof(recorder), "kv:sec?url=%s&create=1", nats_url);
    it_argv_addl(&a, "--recorder", recorder, NULL);
    it_argv_addf(&a, "--http=127.0.0.1:%d", http_port);
    it_argv_addf(&a, "--summary-file=%s", it_path(db, e, "summary.jsonl"));
    snprintf(cfg, sizeof(cfg), "url=http://web:" HTTP_PASS "@127.0.0.1:%d/hook?api_key=" API_KEY,
             dead_port);
    it_argv_plugin(&a, "http", cfg);
    assert_true(it_spawn(&host, e, "host", &a));
    it_argv_free(&a);
    assert_true(it_wait_consumer(&e->server, IT_STREAM, "sec", it_timeout(60000)));
    assert_int_equal(it_publish(NULL, e, NULL, "--type", "order.paid", "x", NULL), 0);
    assert_int_equal(it_wait_stream_count(&e->server, "DLQ_sec", 1, it_timeout(60000)), 1);
    char *body = NULL;
    assert_int_equal(it_http_get(&body, e, http_port, "/readyz"), 200);
    save_body(e, "readyz-running.txt", body);
    free(body);
    assert_int_equal(it_http_get(&body, e, http_port, "/metrics"), 200);
    save_body(e, "metrics.txt", body);
    free(body);
    assert_int_equal(it_proc_stop(&host, SIGTERM, it_timeout(30000)), 0);
    /* the URLs were shown, without what they hid */
    assert_true(it_file_contains(host.err_path, "kv:sec?url=REDACTED&create=REDACTED"));
    char shown[128];
    snprintf(shown, sizeof(shown), "POST http://127.0.0.1:%d/hook?api_key=REDACTED", dead_port);
    assert_true(it_file_contains(host.err_path, shown));
}

/* A host that cannot reach its server: the retry lines and /readyz name
 * the URL. */
static void unreachable_host(it_env *e, int dead_port)
{
    char url[128], db[PATH_MAX];
    int http_port = it_free_port();
    it_argv a;
    it_proc host;
    snprintf(url, sizeof(url), "nats://ibus:" NATS_PASS "@127.0.0.1:%d", dead_port);
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "run", "--nats-url", url, "--durable", "down", "--log-format",
                 "json", NULL);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "down.db"));
    it_argv_addf(&a, "--http=127.0.0.1:%d", http_port);
    it_argv_plugin(&a, "scripted", NULL);
    assert_true(it_spawn(&host, e, "down", &a));
    it_argv_free(&a);
    char *body = NULL;
    int64_t deadline = it_now_ms() + it_timeout(30000);
    while (it_http_get(&body, e, http_port, "/readyz") != 503) {
        free(body);
        body = NULL;
        assert_true(it_now_ms() < deadline);
        it_sleep_ms(100);
    }
    char want[128];
    snprintf(want, sizeof(want), "not connected to NATS at nats://127.0.0.1:%d", dead_port);
    assert_non_null(strstr(body, want));
    save_body(e, "readyz-down.txt", body);
    free(body);
    while (!it_file_contains(host.err_path, "cannot connect to NATS; retrying")) {
        assert_true(it_now_ms() < deadline);
        it_sleep_ms(100);
    }
    it_proc_stop(&host, SIGTERM, it_timeout(30000));
}

/* Refusals: a URI, a --nats-url, an http url= and a refused login, each
 * said with the URL shown redacted. */
static void refusals(it_env *e)
{
    char url[160], uri[256];
    it_proc p;
    snprintf(uri, sizeof(uri), "kv:x?url=nats://ibus:" NATS_PASS "@127.0.0.1:1&bogus=1");
    assert_int_equal(run_ibus(&p, e, "bad-uri", "markers", "--recorder", uri, "stats", NULL), 2);
    assert_true(it_file_contains(p.err_path, "kv:x?url=REDACTED&bogus=REDACTED"));
    assert_int_equal(run_ibus(&p, e, "bad-url", "run", "--check", "--plugin", it_plugin("audit"),
                              "--nats-url", "nats://ibus:" NATS_PASS "@127.0.0.1:port?x=" API_KEY,
                              NULL),
                     2);
    assert_true(it_file_contains(p.err_path, "nats://127.0.0.1:port?x=REDACTED"));
    assert_int_equal(run_ibus(&p, e, "bad-http", "run", "--check", "--allow-insecure-plugins",
                              "--plugin", it_plugin("http"), "--plugin-config",
                              "http=url=ftp://web:" HTTP_PASS "@h/?api_key=" API_KEY, NULL),
                     2);
    assert_true(it_file_contains(p.err_path, "ftp://h/?api_key=REDACTED"));
    snprintf(url, sizeof(url), "nats://ibus:" WRONG_PASS "@127.0.0.1:%d", e->server.port);
    snprintf(uri, sizeof(uri), "kv:x?url=%s", url);
    assert_int_equal(run_ibus(&p, e, "refused", "markers", "--recorder", uri, "stats", NULL), 1);
    assert_true(it_file_contains(p.err_path, "url=nats://127.0.0.1:"));
    assert_int_equal(
        run_ibus(&p, e, "refused-run", "publish", "--nats-url", url, "--type", "t", "x", NULL), 1);
    assert_true(it_file_contains(p.err_path, "cannot connect to nats://127.0.0.1:"));
}

static void no_secret_is_shown(void **state)
{
    it_env *e = *state;
    it_server_opts o = {.user = "ibus", .password = NATS_PASS};
    assert_true(it_server_start(&e->server, e->dir, &o));
    char url[128];
    snprintf(url, sizeof(url), "nats://ibus:" NATS_PASS "@127.0.0.1:%d", e->server.port);
    running_host(e, url, it_free_port());
    unreachable_host(e, it_free_port());
    refusals(e);
    assert_true(grep_everything(e) > 1000);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(no_secret_is_shown, it_setup_no_server, it_teardown),
};

IB_TEST_MAIN(tests)
