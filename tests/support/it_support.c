/* SPDX-License-Identifier: Apache-2.0 */
/* The test environment, paths of this build, and ibus command lines. */
#include "it_support.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

int it_setup_no_server(void **state)
{
    it_env *e = calloc(1, sizeof(*e));
    if (e == NULL || !it_tmpdir_create(e->dir, sizeof(e->dir))) {
        free(e);
        return -1;
    }
    *state = e;
    return 0;
}

int it_setup(void **state)
{
    if (it_setup_no_server(state) != 0)
        return -1;
    it_env *e = *state;
    if (!it_server_start(&e->server, e->dir, NULL)) {
        it_dump_logs(e->dir, 40);
        it_proc_kill_all();
        it_tmpdir_remove(e->dir);
        free(e);
        *state = NULL;
        return -1;
    }
    return 0;
}

int it_teardown(void **state)
{
    it_env *e = *state;
    if (e == NULL)
        return 0;
    /* The test's own connection first, while the server still answers. */
    jsCtx_Destroy(e->server.js);
    e->server.js = NULL;
    if (e->server.nc != NULL) {
        natsConnection_Close(e->server.nc);
        natsConnection_Destroy(e->server.nc);
        e->server.nc = NULL;
    }
    it_proc_kill_all();
    e->server.proc.pid = 0;
    const char *keep = getenv("IB_IT_KEEP");
    if (!e->finished) {
        fprintf(stderr, "==== logs of the failed test in %s\n", e->dir);
        it_dump_logs(e->dir, 40);
    }
    if (keep != NULL && strcmp(keep, "1") == 0)
        fprintf(stderr, "IB_IT_KEEP=1: kept %s\n", e->dir);
    else
        it_tmpdir_remove(e->dir);
    free(e);
    *state = NULL;
    return 0;
}

void it_done(it_env *e)
{
    e->finished = true;
}

char *it_path(char *out, const it_env *e, const char *name)
{
    if (!it_join(out, PATH_MAX, e->dir, name))
        fail_msg("path too long: %s/%s", e->dir, name);
    return out;
}

const char *it_ibus(void)
{
    return IT_IBUS;
}

const char *it_plugin(const char *name)
{
    if (strcmp(name, "scripted") == 0)
        return IT_PLUGIN_SCRIPTED;
    if (strcmp(name, "audit") == 0)
        return IT_PLUGIN_AUDIT;
    if (strcmp(name, "flaky") == 0)
        return IT_PLUGIN_FLAKY;
    if (strcmp(name, "ledger") == 0)
        return IT_PLUGIN_LEDGER;
    if (strcmp(name, "http") == 0)
        return IT_PLUGIN_HTTP;
    fail_msg("it_plugin: no plugin named %s in this build", name);
    return NULL;
}

bool it_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

long it_scaled(long n, long min)
{
    long div = 1;
    const char *env = getenv("IB_IT_SCALE_DIV");
    if (env != NULL && atol(env) > 0)
        div = atol(env);
    long v = n / div;
    return v < min ? min : v;
}

int64_t it_timeout(int64_t ms)
{
    return it_sanitized() ? ms * 3 : ms;
}

void it_argv_init(it_argv *a)
{
    memset(a, 0, sizeof(*a));
}

void it_argv_add(it_argv *a, const char *arg)
{
    if (a->n == IT_ARGV_MAX)
        fail_msg("it_argv: more than %d arguments", IT_ARGV_MAX);
    a->v[a->n] = strdup(arg);
    assert_non_null(a->v[a->n]);
    a->n++;
    a->v[a->n] = NULL;
}

void it_argv_addf(it_argv *a, const char *fmt, ...)
{
    char buf[PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    it_argv_add(a, buf);
}

static void add_list(it_argv *a, va_list ap)
{
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        it_argv_add(a, s);
}

void it_argv_addl(it_argv *a, ...)
{
    va_list ap;
    va_start(ap, a);
    add_list(a, ap);
    va_end(ap);
}

void it_argv_free(it_argv *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    it_argv_init(a);
}

void it_argv_connect(it_argv *a, const it_server *s)
{
    it_argv_addl(a, "--nats-url", s->url, NULL);
    if (s->token[0] != '\0')
        it_argv_addl(a, "--token", s->token, NULL);
    if (s->user[0] != '\0')
        it_argv_addl(a, "--user", s->user, "--password", s->password, NULL);
    if (s->tls)
        it_argv_addl(a, "--tls-ca", s->ca, "--tls-cert", s->client_cert, "--tls-key", s->client_key,
                     NULL);
}

void it_argv_run(it_argv *a, it_env *e, const char *durable)
{
    char path[PATH_MAX];
    it_argv_init(a);
    it_argv_addl(a, it_ibus(), "run", NULL);
    it_argv_connect(a, &e->server);
    it_argv_addl(a, "--create", "--stream", IT_STREAM, "--stream-subjects", IT_SUBJECTS,
                 "--durable", durable, "--log-format", "json", NULL);
    it_argv_addf(a, "--recorder=sqlite:%s", it_path(path, e, "markers.db"));
    it_argv_addf(a, "--summary-file=%s", it_path(path, e, "summary.jsonl"));
}

/* The loader refuses plugin files a group or others could replace; a
 * build tree made under a permissive umask is such a place. */
static bool writable_by_others(const char *path)
{
    struct stat st;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    if (stat(path, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return true;
    return stat(dir, &st) == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

void it_argv_plugin(it_argv *a, const char *name, const char *config)
{
    const char *path = it_plugin(name);
    it_argv_addl(a, "--plugin", path, NULL);
    if (writable_by_others(path)) {
        bool have = false;
        for (size_t i = 0; i < a->n; i++)
            have = have || strcmp(a->v[i], "--allow-insecure-plugins") == 0;
        if (!have)
            it_argv_add(a, "--allow-insecure-plugins");
    }
    if (config != NULL)
        it_argv_addf(a, "--plugin-config=%s=%s", name, config);
}

bool it_spawn(it_proc *p, it_env *e, const char *name, it_argv *a)
{
    return it_proc_spawn(p, e->dir, name, NULL, a->v);
}

static void publish_argv(it_argv *a, it_env *e, va_list ap)
{
    it_argv_init(a);
    it_argv_addl(a, it_ibus(), "publish", NULL);
    it_argv_connect(a, &e->server);
    add_list(a, ap);
}

bool it_published_read(it_published *out, const it_proc *p)
{
    memset(out, 0, sizeof(*out));
    char *text = it_file_read(NULL, p->out_path);
    const char *line = text != NULL ? strstr(text, "published=") : NULL;
    bool ok =
        line != NULL && sscanf(line, "published=%ld unique=%ld duplicates=%ld failed=%ld",
                               &out->published, &out->unique, &out->duplicates, &out->failed) == 4;
    free(text);
    return ok;
}

/* Runs ibus publish with the arguments of `ap` to its end. */
static int run_publish(it_proc *p, it_env *e, const char *stdin_path, va_list ap)
{
    it_argv a;
    publish_argv(&a, e, ap);
    int st = it_proc_run(p, e->dir, "publish", stdin_path, a.v, it_timeout(120000));
    it_argv_free(&a);
    return st;
}

int it_publish(it_published *out, it_env *e, const char *stdin_path, ...)
{
    it_proc p;
    va_list ap;
    va_start(ap, stdin_path);
    int st = run_publish(&p, e, stdin_path, ap);
    va_end(ap);
    if (out != NULL && !it_published_read(out, &p))
        memset(out, 0, sizeof(*out));
    return st;
}

int it_publish_capture(it_published *out, char **err, it_env *e, const char *stdin_path, ...)
{
    it_proc p;
    va_list ap;
    va_start(ap, stdin_path);
    int st = run_publish(&p, e, stdin_path, ap);
    va_end(ap);
    if (out != NULL)
        assert_true(it_published_read(out, &p));
    *err = it_file_read(NULL, p.err_path);
    if (*err == NULL)
        *err = strdup("");
    return st;
}

bool it_publish_start(it_proc *p, it_env *e, const char *name, const char *stdin_path, ...)
{
    it_argv a;
    va_list ap;
    va_start(ap, stdin_path);
    publish_argv(&a, e, ap);
    va_end(ap);
    bool ok = it_proc_spawn(p, e->dir, name, stdin_path, a.v);
    it_argv_free(&a);
    return ok;
}

int it_marker_lookup(it_env *e, const char *consumer, const char *id)
{
    char db[PATH_MAX];
    it_argv a;
    it_argv_init(&a);
    it_argv_addl(&a, it_ibus(), "markers", NULL);
    it_argv_addf(&a, "--recorder=sqlite:%s", it_path(db, e, "markers.db"));
    it_argv_addl(&a, "--consumer", consumer, "lookup", id, NULL);
    int st = it_proc_run(NULL, e->dir, "markers", NULL, a.v, it_timeout(30000));
    it_argv_free(&a);
    return st;
}

void it_finish_hosts(it_env *e, const char *durable, it_proc *hosts, size_t n, int64_t timeout_ms)
{
    it_consumer_state st;
    if (!it_wait_consumer_idle(&st, &e->server, IT_STREAM, durable, timeout_ms))
        fail_msg("consumer %s not idle after %lld ms: pending=%llu ack_pending=%llu", durable,
                 (long long)timeout_ms, (unsigned long long)st.pending,
                 (unsigned long long)st.ack_pending);
    for (size_t i = 0; i < n; i++)
        it_proc_signal(&hosts[i], SIGTERM);
    for (size_t i = 0; i < n; i++) {
        int status = it_proc_wait(&hosts[i], it_timeout(60000));
        if (status != 0)
            fail_msg("host %s (%s) ended with status %d after SIGTERM", hosts[i].name,
                     hosts[i].err_path, status);
    }
}

int it_run_capture(char **err, char **out, it_env *e, const char *name, it_argv *a)
{
    it_proc p;
    int st = it_proc_run(&p, e->dir, name, NULL, a->v, it_timeout(60000));
    *err = it_file_read(NULL, p.err_path);
    if (*err == NULL)
        *err = strdup("");
    if (out != NULL) {
        *out = it_file_read(NULL, p.out_path);
        if (*out == NULL)
            *out = strdup("");
    }
    return st;
}

void it_assert_contains(const char *text, const char *needle)
{
    if (text == NULL || strstr(text, needle) == NULL)
        fail_msg("expected \"%s\" in:\n%s", needle, text != NULL ? text : "(nothing)");
}

double it_wait_metric(it_env *e, int port, const char *series, double want, int64_t ms)
{
    int64_t deadline = it_now_ms() + it_timeout(ms);
    double v = -1;
    do {
        char *body = NULL;
        if (it_http_get(&body, e, port, "/metrics") == 200 && body != NULL &&
            it_prom_value(&v, body, series) && v == want) {
            free(body);
            return v;
        }
        free(body);
        it_sleep_ms(200);
    } while (it_now_ms() < deadline);
    return v;
}
