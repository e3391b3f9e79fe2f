/* SPDX-License-Identifier: Apache-2.0 */
/* Least privilege (issue 32, item 6): the NATS permission blocks shipped in
 * deploy/nats/ are the ones the processes of this test log in with, filled
 * in as docs/security.md says. An administrator (the test's own user, which
 * may do anything) sets up the streams, the consumers and the kv: bucket
 * with one `ibus run --create` each; then a producer publishes, a worker
 * with a SQLite recorder and a worker with the kv: recorder each handle the
 * events and dead-letter one, an operator lists, replays and purges a dead
 * letter, and another looks up, counts and forgets kv: markers, each with
 * exactly its block. None of them may meet a permissions violation, and
 * what a block leaves out is refused: a worker cannot publish an event or
 * purge the stream, nor can the dead-letter operator. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"

#define BUCKET "ibus-markers"
#define PASSWORD "perm-pass-41c2" /* every role's; the names tell them apart */

/* A block of deploy/nats/ with its placeholders filled in, from its
 * opening brace (the comments before it are for people). */
static char *render(const char *file, const char *durable)
{
    char path[PATH_MAX], dlq[64], dlq_stream[64];
    snprintf(path, sizeof(path), "%s/%s", IT_NATS_PERMS_DIR, file);
    snprintf(dlq, sizeof(dlq), "ibus.dlq.%s", durable);
    snprintf(dlq_stream, sizeof(dlq_stream), "DLQ_%s", durable);
    const char *fill[][2] = {
        {"@STREAM@", IT_STREAM}, {"@DURABLE@", durable},
        {"@DEAD_LETTER@", dlq},  {"@DEAD_LETTER_STREAM@", dlq_stream},
        {"@BUCKET@", BUCKET},    {"@EVENT_SUBJECTS@", IT_SUBJECTS},
    };
    char *text = it_file_read(NULL, path);
    assert_non_null(text);
    for (size_t i = 0; i < sizeof(fill) / sizeof(fill[0]); i++) {
        for (char *at; (at = strstr(text, fill[i][0])) != NULL;) {
            size_t head = (size_t)(at - text), kl = strlen(fill[i][0]), vl = strlen(fill[i][1]);
            char *next = malloc(strlen(text) - kl + vl + 1);
            assert_non_null(next);
            memcpy(next, text, head);
            memcpy(next + head, fill[i][1], vl);
            strcpy(next + head + vl, at + kl);
            free(text);
            text = next;
        }
    }
    /* the block alone: the comments above it say how to use it */
    char *open = text[0] == '{' ? text : strstr(text, "\n{");
    assert_non_null(open);
    open += open[0] == '\n';
    memmove(text, open, strlen(open) + 1);
    assert_null(strchr(text, '@'));
    return text;
}

/* The users list: each role with its block. */
static char *users(void)
{
    static const char *const roles[][3] = {
        {"producer", "producer.conf", "ws"},   {"worker", "worker.conf", "ws"},
        {"worker-kv", "worker-kv.conf", "wk"}, {"operator", "dlq-operator.conf", "ws"},
        {"markers", "markers-kv.conf", "wk"},
    };
    size_t cap = 65536, n = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        char *block = render(roles[i][1], roles[i][2]);
        n += (size_t)snprintf(out + n, cap - n,
                              "    {user: \"%s\", password: \"" PASSWORD "\", permissions: %s}\n",
                              roles[i][0], block);
        free(block);
        assert_true(n < cap);
    }
    return out;
}

/* `ibus ARGS...` (NULL-terminated) logged in as `user` (NULL: the test's
 * own, which may do anything); only started when `p` is to run on. */
static void ibus_argv(it_argv *a, it_env *e, const char *user, const char *cmd)
{
    it_argv_init(a);
    it_argv_addl(a, it_ibus(), cmd, "--nats-url", e->server.url, NULL);
    if (user != NULL)
        it_argv_addl(a, "--user", user, "--password", PASSWORD, NULL);
    else
        it_argv_addl(a, "--user", e->server.user, "--password", e->server.password, NULL);
}

static int run_as(it_proc *p, it_env *e, const char *user, const char *cmd, ...)
    __attribute__((sentinel));
static int run_as(it_proc *p, it_env *e, const char *user, const char *cmd, ...)
{
    it_argv a;
    va_list ap;
    ibus_argv(&a, e, user, cmd);
    va_start(ap, cmd);
    for (const char *s = va_arg(ap, const char *); s != NULL; s = va_arg(ap, const char *))
        it_argv_add(&a, s);
    va_end(ap);
    int st = it_proc_run(p, e->dir, user != NULL ? user : "admin", NULL, a.v, it_timeout(60000));
    it_argv_free(&a);
    return st;
}

/* An `ibus run` of durable `durable` with the scripted plugin (its second
 * handler rejects, so every event leaves one dead letter) on `recorder`. */
static void run_argv(it_argv *a, it_env *e, const char *user, const char *durable,
                     const char *recorder)
{
    char path[PATH_MAX];
    ibus_argv(a, e, user, "run");
    it_argv_addl(a, "--stream", IT_STREAM, "--stream-subjects", IT_SUBJECTS, "--durable", durable,
                 "--recorder", recorder, "--log-format", "json", NULL);
    it_argv_addf(a, "--summary-file=%s", it_path(path, e, "summary.jsonl"));
    it_argv_plugin(a, "scripted", "second=reject");
}

/* The administrator's one `ibus run --create` per durable. */
static void set_up(it_env *e, const char *durable, const char *recorder)
{
    it_argv a;
    it_proc p;
    run_argv(&a, e, NULL, durable, recorder);
    it_argv_addl(&a, "--create", "--idle-exit", "200ms", NULL);
    assert_int_equal(it_proc_run(&p, e->dir, "admin", NULL, a.v, it_timeout(60000)), 0);
    it_argv_free(&a);
}

/* A worker handles the two events with its own block: each dead-lettered
 * by the second handler, both marked by the first; it stops cleanly. */
static void work(it_env *e, const char *user, const char *durable, const char *recorder)
{
    char dlq[64];
    it_argv a;
    it_proc host;
    snprintf(dlq, sizeof(dlq), "DLQ_%s", durable);
    run_argv(&a, e, user, durable, recorder);
    assert_true(it_spawn(&host, e, user, &a));
    it_argv_free(&a);
    assert_int_equal(it_wait_stream_count(&e->server, dlq, 2, it_timeout(60000)), 2);
    assert_true(it_wait_consumer_idle(NULL, &e->server, IT_STREAM, durable, it_timeout(60000)));
    assert_int_equal(it_proc_stop(&host, SIGTERM, it_timeout(30000)), 0);
}

/* What the block leaves out is refused: purging the events stream and,
 * unless `publishes` (a replay publishes events), publishing an event.
 * Nothing was published, nothing purged. */
static void refused(it_env *e, const char *user, bool publishes)
{
    natsConnection *nc = NULL;
    natsMsg *reply = NULL;
    uint64_t before = it_stream_count(&e->server, IT_STREAM);
    assert_int_equal(it_server_connect_as(&nc, &e->server, user, PASSWORD, NULL), NATS_OK);
    if (!publishes)
        natsConnection_PublishString(nc, "events.forged", "x");
    assert_int_not_equal(
        natsConnection_RequestString(&reply, nc, "$JS.API.STREAM.PURGE." IT_STREAM, "", 1000),
        NATS_OK);
    natsConnection_FlushTimeout(nc, 5000);
    natsMsg_Destroy(reply);
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);
    assert_int_equal(it_stream_count(&e->server, IT_STREAM), before);
}

/* No process of the test met a permissions violation: the server logs
 * each one it refuses ("Publish Violation - User ...", "Subscription
 * Violation ..."), and the processes would log nats.c's "Not Permitted". */
static void no_violation(it_env *e)
{
    char *log = it_file_read(NULL, e->server.proc.err_path);
    assert_non_null(log);
    const char *v = strstr(log, "Violation");
    if (v != NULL)
        fail_msg("the server refused a role something its block must allow: %.200s", v);
    free(log);
    char cmd[4 * PATH_MAX + 128];
    snprintf(cmd, sizeof(cmd),
             "grep -il 'permi' '%s'/producer-*.err '%s'/worker*.err '%s'/operator-*.err "
             "'%s'/markers-*.err",
             e->dir, e->dir, e->dir, e->dir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[PATH_MAX];
    if (fgets(line, sizeof(line), f) != NULL)
        fail_msg("a permissions violation was logged in %s", line);
    pclose(f);
}

static void each_role_with_its_block(void **state)
{
    it_env *e = *state;
    char db[PATH_MAX + 16], ids[PATH_MAX], *id = NULL;
    char *list = users();
    it_server_opts o = {.user = "admin", .password = "admin-pass-9e07", .users = list};
    assert_true(it_server_start(&e->server, e->dir, &o));
    free(list);
    snprintf(db, sizeof(db), "sqlite:%s/ws.db", e->dir);
    set_up(e, "ws", db);
    set_up(e, "wk", "kv:" BUCKET "?create=1");

    it_proc p;
    assert_int_equal(run_as(&p, e, "producer", "publish", "--type", "test.scripted", "--count", "2",
                            "--ids-file", it_path(ids, e, "ids.txt"), NULL),
                     0);
    work(e, "worker", "ws", db);
    work(e, "worker-kv", "wk", "kv:" BUCKET);

    /* the dead-letter operator: list, replay one with --purge */
    assert_int_equal(run_as(&p, e, "operator", "dlq", "--durable", "ws", "list", NULL), 0);
    assert_int_equal(it_file_lines(p.out_path), 3);
    char **lines = NULL;
    assert_int_equal(it_file_read_lines(&lines, ids), 2);
    id = strdup(lines[0]);
    it_lines_free(lines, 2);
    assert_int_equal(
        run_as(&p, e, "operator", "dlq", "--durable", "ws", "replay", "--purge", "--id", id, NULL),
        0);
    assert_true(
        it_file_contains(p.out_path, "replayed=1 duplicates=0 skipped=0 failed=0 purged=1"));
    assert_int_equal(it_stream_count(&e->server, "DLQ_ws"), 1);

    /* the kv: markers operator: lookup, stats, forget */
    assert_int_equal(run_as(&p, e, "markers", "markers", "--recorder", "kv:" BUCKET, "--consumer",
                            "wk/scripted/scripted", "lookup", id, NULL),
                     0);
    assert_int_equal(run_as(&p, e, "markers", "markers", "--recorder", "kv:" BUCKET, "stats", NULL),
                     0);
    assert_true(it_file_contains(p.out_path, "markers=2"));
    assert_int_equal(run_as(&p, e, "markers", "markers", "--recorder", "kv:" BUCKET, "--consumer",
                            "wk/scripted/scripted", "forget", id, NULL),
                     0);
    assert_int_equal(run_as(&p, e, "markers", "markers", "--recorder", "kv:" BUCKET, "--consumer",
                            "wk/scripted/scripted", "lookup", id, NULL),
                     3);

    no_violation(e);
    refused(e, "worker", false);
    refused(e, "worker-kv", false);
    refused(e, "operator", true);
    free(id);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(each_role_with_its_block, it_setup_no_server, it_teardown),
};

IB_TEST_MAIN(tests)
