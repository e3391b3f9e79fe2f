/* SPDX-License-Identifier: Apache-2.0 */
/* The 3-node cluster harness (tests/support/it_cluster.h) against itself:
 * a 3-replica stream and a 3-replica KV bucket survive a kill -9 of their
 * leader with every acknowledged write, a new leader is elected in time,
 * and the killed node rejoins with all three peers current. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_test.h"
#include "it_cluster.h"
#include "it_support.h"
#include "jetstream.h"

#define STREAM "CLUSTER"
#define BUCKET "clusterkv"
#define MESSAGES 200
/* Leader loss stopped writes for 5-8 s in measurements on 2 cores. */
#define ELECTION_MS 20000
#define REJOIN_MS 30000

static void check_urls(const it_cluster *c)
{
    const char *urls = it_cluster_urls(c);
    char want[256];
    snprintf(want, sizeof(want), "nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d",
             c->node[0].port, c->node[1].port, c->node[2].port);
    assert_string_equal(urls, want);
    for (int i = 0; i < IT_CLUSTER_NODES; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", i);
        assert_int_equal(it_cluster_node_index(c, name), i);
    }
    assert_int_equal(it_cluster_node_index(c, "nobody"), -1);
}

/* Kills the leader of `stream` and returns it, after a new leader was
 * elected on another node within ELECTION_MS. */
static int kill_leader(it_cluster *c, const char *stream)
{
    int leader = it_cluster_wait_leader(c, stream, -1, it_timeout(ELECTION_MS));
    assert_true(leader >= 0);
    int64_t t0 = it_now_ms();
    assert_true(it_cluster_kill(c, leader));
    int next = it_cluster_wait_leader(c, stream, leader, it_timeout(ELECTION_MS));
    fprintf(stderr, "%s: killed leader %s, new leader %s after %lld ms\n", stream,
            c->node[leader].name, next >= 0 ? c->node[next].name : "(none)",
            (long long)(it_now_ms() - t0));
    assert_true(next >= 0);
    assert_int_not_equal(next, leader);
    return leader;
}

/* Restarts the killed node and waits until all three peers are current,
 * the restarted one among them. */
static void rejoin(it_cluster *c, const char *stream, int killed)
{
    int64_t t0 = it_now_ms();
    assert_true(it_cluster_restart(c, killed));
    assert_true(it_cluster_wait_current(c, stream, it_timeout(REJOIN_MS)));
    fprintf(stderr, "%s: %s rejoined after %lld ms\n", stream, c->node[killed].name,
            (long long)(it_now_ms() - t0));
    jsStreamInfo *si = NULL;
    assert_int_equal(js_GetStreamInfo(&si, it_cluster_js(c), stream, NULL, NULL), NATS_OK);
    assert_non_null(si->Cluster);
    bool seen = strcmp(si->Cluster->Leader, c->node[killed].name) == 0;
    for (int r = 0; r < si->Cluster->ReplicasLen; r++)
        if (strcmp(si->Cluster->Replicas[r]->Name, c->node[killed].name) == 0)
            seen = si->Cluster->Replicas[r]->Current;
    jsStreamInfo_Destroy(si);
    assert_true(seen);
}

/* Publishes once the new leader takes writes (they may stall for a few
 * seconds after the election); returns the acknowledged sequence. A
 * message id makes a retry after a lost ack store nothing twice. */
static uint64_t publish_after_failover(jsCtx *js, const char *subject, const char *data)
{
    jsPubOptions o;
    jsPubOptions_Init(&o);
    o.MaxWait = 2000;
    o.MsgId = data;
    int64_t deadline = it_now_ms() + it_timeout(ELECTION_MS);
    do {
        jsPubAck *pa = NULL;
        if (js_Publish(&pa, js, subject, data, (int)strlen(data), &o, NULL) == NATS_OK) {
            uint64_t seq = pa->Sequence;
            jsPubAck_Destroy(pa);
            return seq;
        }
        it_sleep_ms(100);
    } while (it_now_ms() < deadline);
    return 0;
}

/* Retries a read for a moment: the new leader may still be settling. */
static natsMsg *get_msg(jsCtx *js, const char *stream, uint64_t seq, const char *subject)
{
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = 2000;
    int64_t deadline = it_now_ms() + it_timeout(ELECTION_MS);
    natsMsg *m = NULL;
    do {
        natsStatus st = subject != NULL ? js_GetLastMsg(&m, js, stream, subject, &o, NULL)
                                        : js_GetMsg(&m, js, stream, seq, &o, NULL);
        if (st == NATS_OK)
            return m;
        it_sleep_ms(100);
    } while (it_now_ms() < deadline);
    return NULL;
}

static void stream_survives_leader_kill(void **state)
{
    it_env *e = *state;
    it_cluster *c = it_cluster_of(e);
    check_urls(c);
    jsCtx *js = it_cluster_js(c);
    assert_non_null(js);

    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char *subjects[] = {"cluster.>"};
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    cfg.Storage = js_FileStorage;
    jsStreamInfo *si = NULL;
    assert_int_equal(js_AddStream(&si, js, &cfg, NULL, NULL), NATS_OK);
    jsStreamInfo_Destroy(si);

    uint64_t seqs[MESSAGES];
    for (int i = 0; i < MESSAGES; i++) {
        char data[32];
        int n = snprintf(data, sizeof(data), "message-%d", i);
        jsPubAck *pa = NULL;
        assert_int_equal(js_Publish(&pa, js, "cluster.x", data, n, NULL, NULL), NATS_OK);
        seqs[i] = pa->Sequence;
        jsPubAck_Destroy(pa);
    }

    int killed = kill_leader(c, STREAM);
    for (int i = 0; i < MESSAGES; i++) {
        char want[32];
        snprintf(want, sizeof(want), "message-%d", i);
        natsMsg *m = get_msg(js, STREAM, seqs[i], NULL);
        assert_non_null(m);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
    }
    assert_int_equal(publish_after_failover(js, "cluster.x", "after"), seqs[MESSAGES - 1] + 1);
    rejoin(c, STREAM, killed);
    jsStreamInfo *after = NULL;
    assert_int_equal(js_GetStreamInfo(&after, js, STREAM, NULL, NULL), NATS_OK);
    assert_int_equal(after->State.Msgs, MESSAGES + 1);
    jsStreamInfo_Destroy(after);
    it_done(e);
}

static void kv_survives_leader_kill(void **state)
{
    it_env *e = *state;
    it_cluster *c = it_cluster_of(e);
    jsCtx *js = it_cluster_js(c);
    assert_non_null(js);

    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = BUCKET;
    cfg.Replicas = 3;
    kvStore *kv = NULL;
    assert_int_equal(js_CreateKeyValue(&kv, js, &cfg), NATS_OK);
    for (int i = 0; i < MESSAGES; i++) {
        char key[32], value[32];
        snprintf(key, sizeof(key), "key-%d", i);
        snprintf(value, sizeof(value), "value-%d", i);
        uint64_t rev = 0;
        assert_int_equal(kvStore_PutString(&rev, kv, key, value), NATS_OK);
    }
    kvStore_Destroy(kv);

    int killed = kill_leader(c, "KV_" BUCKET);
    /* Read through the leader: a follower's direct get could be stale. */
    for (int i = 0; i < MESSAGES; i++) {
        char subject[64], want[32];
        snprintf(subject, sizeof(subject), "$KV." BUCKET ".key-%d", i);
        snprintf(want, sizeof(want), "value-%d", i);
        natsMsg *m = get_msg(js, "KV_" BUCKET, 0, subject);
        assert_non_null(m);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
    }
    rejoin(c, "KV_" BUCKET, killed);
    it_done(e);
}

static int discovered(natsConnection *nc)
{
    char **servers = NULL;
    int count = 0;
    if (natsConnection_GetDiscoveredServers(nc, &servers, &count) != NATS_OK)
        return 0;
    for (int i = 0; i < count; i++)
        free(servers[i]);
    free(servers);
    return count;
}

/* What `ibus --nats-url` relies on with one node's URL: the client learns
 * the other nodes from the server and moves to one when its node dies. */
static void one_url_fails_over(void **state)
{
    it_env *e = *state;
    it_cluster *c = it_cluster_of(e);
    natsOptions *o = NULL;
    natsConnection *nc = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, c->node[0].url), NATS_OK);
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 100);
    assert_int_equal(natsConnection_Connect(&nc, o), NATS_OK);
    natsOptions_Destroy(o);
    int64_t deadline = it_now_ms() + it_timeout(10000);
    while (discovered(nc) < IT_CLUSTER_NODES - 1 && it_now_ms() < deadline)
        it_sleep_ms(50);
    assert_int_equal(discovered(nc), IT_CLUSTER_NODES - 1);

    assert_true(it_cluster_kill(c, 0));
    char url[128] = "";
    deadline = it_now_ms() + it_timeout(10000);
    do {
        it_sleep_ms(50);
        if (natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED)
            natsConnection_GetConnectedUrl(nc, url, sizeof(url));
    } while ((url[0] == '\0' || strcmp(url, c->node[0].url) == 0) && it_now_ms() < deadline);
    assert_string_not_equal(url, c->node[0].url);
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);
    it_done(e);
}

/* ibus takes --nats-url as a comma-separated list: every node is tried
 * and the connection moves to another listed node when its own dies. An
 * empty entry is a configuration error that names the list. */
static void url_list_connects_and_fails_over(void **state)
{
    it_env *e = *state;
    it_cluster *c = it_cluster_of(e);
    char list[256];
    snprintf(list, sizeof(list), "nats://127.0.0.1:1, %s ,%s,%s", c->node[0].url, c->node[1].url,
             c->node[2].url);
    ib_nats_config cfg = {.url = list, .reconnect_wait_ms = 100};
    ib_nats *n = NULL;
    ib_error err = {0};
    assert_int_equal(ib_nats_connect(&n, &cfg, &err), IB_OK);
    assert_true(ib_nats_wait_connected(n, NULL, it_timeout(10000)));
    char url[128] = "";
    natsConnection_GetConnectedUrl(ib_nats_connection(n), url, sizeof(url));
    int i = -1;
    for (int k = 0; k < IT_CLUSTER_NODES; k++)
        if (strcmp(url, c->node[k].url) == 0)
            i = k;
    assert_true(i >= 0);
    assert_true(it_cluster_kill(c, i));
    int64_t deadline = it_now_ms() + it_timeout(10000);
    do {
        it_sleep_ms(50);
        url[0] = '\0';
        if (ib_nats_is_connected(n))
            natsConnection_GetConnectedUrl(ib_nats_connection(n), url, sizeof(url));
    } while ((url[0] == '\0' || strcmp(url, c->node[i].url) == 0) && it_now_ms() < deadline);
    assert_string_not_equal(url, "");
    assert_string_not_equal(url, c->node[i].url);
    ib_nats_close(n, 1000);

    cfg.url = "nats://127.0.0.1:4222,,nats://127.0.0.1:4223";
    assert_int_equal(ib_nats_connect(&n, &cfg, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "server URL nats://127.0.0.1:4222,,"));
    it_done(e);
}

/* ibus run --create --stream-replicas 3 on a cluster makes the event
 * stream and the dead-letter stream with 3 replicas; the default stays 1. */
static void create_with_stream_replicas(void **state)
{
    it_env *e = *state;
    it_cluster *c = it_cluster_of(e);
    char audit[PATH_MAX], cfg[PATH_MAX + 8], path[PATH_MAX];
    const char *replicas[] = {"3", NULL};
    const char *streams[] = {"R3EVENTS", "R1EVENTS"};
    snprintf(cfg, sizeof(cfg), "file=%s", it_path(audit, e, "audit.log"));
    for (int k = 0; k < 2; k++) {
        it_argv a;
        it_proc p;
        it_argv_init(&a);
        it_argv_addl(&a, it_ibus(), "run", "--nats-url", it_cluster_urls(c), "--create", "--stream",
                     streams[k], "--stream-subjects", k == 0 ? "r3.>" : "r1.>", "--durable",
                     k == 0 ? "r3" : "r1", "--idle-exit", "1s", "--log-format", "json", NULL);
        it_argv_addf(&a, "--recorder=sqlite:%s", it_path(path, e, k == 0 ? "r3.db" : "r1.db"));
        if (replicas[k] != NULL)
            it_argv_addl(&a, "--stream-replicas", replicas[k], NULL);
        it_argv_plugin(&a, "audit", cfg);
        int st = it_proc_run(&p, e->dir, "ibus", NULL, a.v, it_timeout(60000));
        it_argv_free(&a);
        assert_int_equal(st, 0);
        char dlq[32];
        snprintf(dlq, sizeof(dlq), "DLQ_%s", k == 0 ? "r3" : "r1");
        const char *names[] = {streams[k], dlq};
        for (int i = 0; i < 2; i++) {
            jsStreamInfo *si = NULL;
            assert_int_equal(js_GetStreamInfo(&si, it_cluster_js(c), names[i], NULL, NULL),
                             NATS_OK);
            assert_int_equal(si->Config->Replicas, k == 0 ? 3 : 1);
            jsStreamInfo_Destroy(si);
        }
    }
    it_done(e);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(one_url_fails_over, it_cluster_setup, it_cluster_teardown),
    cmocka_unit_test_setup_teardown(url_list_connects_and_fails_over, it_cluster_setup,
                                    it_cluster_teardown),
    cmocka_unit_test_setup_teardown(stream_survives_leader_kill, it_cluster_setup,
                                    it_cluster_teardown),
    cmocka_unit_test_setup_teardown(kv_survives_leader_kill, it_cluster_setup, it_cluster_teardown),
    cmocka_unit_test_setup_teardown(create_with_stream_replicas, it_cluster_setup,
                                    it_cluster_teardown),
};

IB_TEST_MAIN(tests)
