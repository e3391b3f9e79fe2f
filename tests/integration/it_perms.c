/* SPDX-License-Identifier: Apache-2.0 */
/* Least privilege (issue 32, item 6): the NATS permission blocks shipped in
 * deploy/nats/ are the ones the processes of this test log in with, filled
 * in as docs/security.md says. An administrator (the test's own user, which
 * may do anything) sets up the streams, the consumers and the kv: bucket
 * with one `ibus run --create` each; then a producer publishes, a worker
 * with a SQLite recorder and a worker with the kv: recorder each handle the
 * events and dead-letter one, an operator lists, replays and purges a dead
 * letter, another looks up, counts and forgets kv: markers, and two
 * processes of a partitioned consumer (issue 47) share its partitions,
 * rewind a durable and forward a misplaced event, each with exactly its
 * block. None of them may meet a permissions violation, and what a block
 * leaves out is refused: a worker cannot publish an event or purge the
 * stream, nor can the dead-letter operator. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_support.h"
#include "partition.h"

#define BUCKET "ibus-markers"
#define PASSWORD "perm-pass-41c2" /* every role's; the names tell them apart */
/* the partitioned consumer: its base subject, durable and N */
#define PART_BASE "events.p"
#define PART_DURABLE "wp"
#define PARTS 4
#define PARTS_S "4"

/* `text` with every `key` replaced by `value`; frees `text`. */
static char *replace_all(char *text, const char *key, const char *value)
{
    for (char *at; (at = strstr(text, key)) != NULL;) {
        size_t head = (size_t)(at - text), kl = strlen(key), vl = strlen(value);
        char *next = malloc(strlen(text) - kl + vl + 1);
        assert_non_null(next);
        memcpy(next, text, head);
        memcpy(next + head, value, vl);
        strcpy(next + head + vl, at + kl);
        free(text);
        text = next;
    }
    return text;
}

/* Each line holding @P@ once per partition, 0 .. PARTS-1, as the block's
 * comment tells an operator to fill it in; frees `text`. */
static char *expand_partitions(char *text)
{
    size_t cap = strlen(text) * PARTS + 1, n = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    for (char *line = text; *line != '\0';) {
        char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) + 1 : strlen(line);
        char *one = strndup(line, len);
        assert_non_null(one);
        for (int p = 0; p < (strstr(one, "@P@") != NULL ? PARTS : 1); p++) {
            char num[16];
            snprintf(num, sizeof(num), "%d", p);
            char *filled = replace_all(strdup(one), "@P@", num);
            memcpy(out + n, filled, strlen(filled));
            n += strlen(filled);
            free(filled);
        }
        free(one);
        line += len;
    }
    out[n] = '\0';
    free(text);
    return out;
}

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
        {"@BASE@", PART_BASE},
    };
    char *text = it_file_read(NULL, path);
    assert_non_null(text);
    text = expand_partitions(text);
    for (size_t i = 0; i < sizeof(fill) / sizeof(fill[0]); i++)
        text = replace_all(text, fill[i][0], fill[i][1]);
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
        {"producer", "producer.conf", "ws"},
        {"worker", "worker.conf", "ws"},
        {"worker-kv", "worker-kv.conf", "wk"},
        {"operator", "dlq-operator.conf", "ws"},
        {"markers", "markers-kv.conf", "wk"},
        {"worker-part", "worker-partitioned.conf", PART_DURABLE},
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

/* An `ibus run` of the partitioned consumer PART_DURABLE, logged in as
 * `user`, with the scripted plugin (every event leaves one dead letter). */
static void part_argv(it_argv *a, it_env *e, const char *user)
{
    ibus_argv(a, e, user, "run");
    it_argv_addl(a, "--stream", IT_STREAM, "--stream-subjects", IT_SUBJECTS, "--subject", PART_BASE,
                 "--durable", PART_DURABLE, "--partitions", PARTS_S, "--partition-lease", "3s",
                 "--log-format", "json", NULL);
    it_argv_plugin(a, "scripted", "second=reject");
}

/* The administrator pulls one message of each partition's durable and
 * never acks it, so that the partition's next owner finds it delivered
 * and not acked, and rewinds the durable (deletes it and makes it again).
 * Returns how many it holds. */
static int hold_one_each(it_env *e)
{
    int held = 0;
    for (int p = 0; p < PARTS; p++) {
        char next[128];
        natsMsg *m = NULL;
        snprintf(next, sizeof(next), "$JS.API.CONSUMER.MSG.NEXT." IT_STREAM ".%s_p%d", PART_DURABLE,
                 p);
        if (natsConnection_RequestString(&m, it_server_client(&e->server), next,
                                         "{\"batch\":1,\"no_wait\":true}", 5000) == NATS_OK)
            held += natsMsg_GetDataLength(m) > 0;
        natsMsg_Destroy(m);
    }
    return held;
}

/* Two partitioned workers with worker-partitioned.conf start together
 * (they race for the same leases, and one hands partitions to the other)
 * on events in every partition, two of whose durables were left with a
 * message not acked, and one event on another partition's subject: every
 * event is handled (and dead-lettered by the second handler), the
 * misplaced one after its forward, and the durables are rewound. */
static void work_partitioned(it_env *e)
{
    it_argv a;
    it_proc p, hosts[2];
    char dlq_stream[64], durable[64], misplaced[128];
    snprintf(dlq_stream, sizeof(dlq_stream), "DLQ_%s", PART_DURABLE);
    part_argv(&a, e, NULL);
    it_argv_addl(&a, "--create", "--idle-exit", "200ms", NULL);
    assert_int_equal(it_proc_run(&p, e->dir, "admin", NULL, a.v, it_timeout(60000)), 0);
    it_argv_free(&a);

    /* one event under each of two keys, then one on the wrong partition */
    const char *keys[] = {"acct-1", "acct-2"};
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(run_as(&p, e, NULL, "publish", "--subject", PART_BASE, "--partitions",
                                PARTS_S, "--partition-key", keys[i], "--type", "test.scripted",
                                "--quiet", "{}", NULL),
                         0);
    /* acct-1 and acct-2 fall in partitions 0 and 1 of 4 */
    assert_int_equal(hold_one_each(e), 2);
    uint32_t own = ib_partition_of(ib_partition_hash("acct-3", 6), PARTS);
    snprintf(misplaced, sizeof(misplaced), "%s.%u.acct-3", PART_BASE, (own + 1) % PARTS);
    assert_int_equal(run_as(&p, e, NULL, "publish", "--subject", misplaced, "--type",
                            "test.scripted", "--quiet", "{}", NULL),
                     0);

    for (size_t i = 0; i < 2; i++) {
        part_argv(&a, e, "worker-part");
        assert_true(it_spawn(&hosts[i], e, i == 0 ? "worker-pa" : "worker-pb", &a));
        it_argv_free(&a);
    }
    assert_int_equal(it_wait_stream_count(&e->server, dlq_stream, 3, it_timeout(60000)), 3);
    for (int q = 0; q < PARTS; q++) {
        snprintf(durable, sizeof(durable), "%s_p%d", PART_DURABLE, q);
        assert_true(it_wait_consumer_idle(NULL, &e->server, IT_STREAM, durable, it_timeout(60000)));
    }
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(it_proc_stop(&hosts[i], SIGTERM, it_timeout(30000)), 0);
    bool rewound = false, forwarded = false;
    for (size_t i = 0; i < 2; i++) {
        rewound |= it_file_contains(hosts[i].err_path, "rewound to its ack floor");
        forwarded |= it_file_contains(hosts[i].err_path, "was forwarded to its key's partition");
    }
    assert_true(rewound);
    assert_true(forwarded);
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

    work_partitioned(e);

    no_violation(e);
    refused(e, "worker", false);
    refused(e, "worker-kv", false);
    refused(e, "worker-part", false);
    refused(e, "operator", true);
    free(id);
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(each_role_with_its_block, it_setup_no_server, it_teardown),
};

IB_TEST_MAIN(tests)
