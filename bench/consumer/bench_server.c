/* SPDX-License-Identifier: Apache-2.0 */
/* The one nats-server of a benchmark run: loopback only, a free port chosen
 * by the server itself (-p -1, read back from its ports file), JetStream
 * storage in the run's temporary directory, stopped by its pid. */
#include "bench.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Finds "nats://127.0.0.1:PORT" in the ports file the server writes. */
static bool read_ports_file(char *url, size_t len, const char *dir, pid_t pid)
{
    char path[700], text[512];
    snprintf(path, sizeof(path), "%s/ports/nats-server_%ld.ports", dir, (long)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *start = strstr(text, "nats://");
    if (start == NULL)
        return false;
    const char *end = strchr(start, '"');
    if (end == NULL || (size_t)(end - start) >= len)
        return false;
    memcpy(url, start, (size_t)(end - start));
    url[end - start] = '\0';
    return true;
}

ib_status ib__bench_server_start(ib__bench_server *s, const char *exe, const char *dir,
                                 ib_error *err)
{
    char store[600], ports[600], log[600];
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    snprintf(store, sizeof(store), "%s/jetstream", dir);
    snprintf(ports, sizeof(ports), "%s/ports", dir);
    snprintf(log, sizeof(log), "%s/nats-server.log", dir);
    if ((mkdir(store, 0700) != 0 && errno != EEXIST) ||
        (mkdir(ports, 0700) != 0 && errno != EEXIST))
        return ib_error_set(err, IB_ERR_IO, "nats-server: cannot create %s: %s", store,
                            strerror(errno));

    char *argv[] = {(char *)exe, "-a",  "127.0.0.1",        "-p",  "-1", "-js",
                    "-sd",       store, "--ports_file_dir", ports, NULL};
    s->pid = ib__bench_spawn(log, argv);
    if (s->pid < 0)
        return ib_error_set(err, IB_ERR_IO, "nats-server: cannot start %s", exe);
    int64_t deadline = ib__bench_now_ms() + 15000;
    while (!read_ports_file(s->url, sizeof(s->url), dir, s->pid)) {
        if (ib__bench_wait(s->pid, 0) >= 0) {
            s->pid = 0;
            return ib_error_set(err, IB_ERR_IO, "nats-server exited at start (see %s)", log);
        }
        if (ib__bench_now_ms() > deadline) {
            ib__bench_server_stop(s);
            return ib_error_set(err, IB_ERR_TIMEOUT, "nats-server: no port after 15 s (see %s)",
                                log);
        }
        ib__bench_sleep_ms(20);
    }
    /* The ports file comes before JetStream is ready: wait for a reply. */
    while (ib__bench_now_ms() < deadline) {
        natsConnection *nc = NULL;
        jsCtx *js = NULL;
        jsAccountInfo *ai = NULL;
        if (ib__bench_connect(&nc, &js, s->url, NULL) == IB_OK &&
            js_GetAccountInfo(&ai, js, NULL, NULL) == NATS_OK) {
            jsAccountInfo_Destroy(ai);
            jsCtx_Destroy(js);
            natsConnection_Destroy(nc);
            return IB_OK;
        }
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
        ib__bench_sleep_ms(50);
    }
    ib__bench_server_stop(s);
    return ib_error_set(err, IB_ERR_TIMEOUT, "nats-server: JetStream not ready after 15 s");
}

void ib__bench_server_stop(ib__bench_server *s)
{
    if (s->pid > 0)
        ib__bench_stop(s->pid, 10000);
    s->pid = 0;
}

ib_status ib__bench_connect(natsConnection **nc, jsCtx **js, const char *url, ib_error *err)
{
    natsOptions *o = NULL;
    natsStatus st;
    *nc = NULL;
    *js = NULL;
    if ((st = natsOptions_Create(&o)) != NATS_OK)
        return ib_error_set(err, IB_ERR_NOMEM, "nats options: %s", natsStatus_GetText(st));
    natsOptions_SetURL(o, url);
    natsOptions_SetName(o, "consumer_bench");
    natsOptions_SetTimeout(o, 5000);
    natsOptions_SetMaxReconnect(o, 0);
    st = natsConnection_Connect(nc, o);
    natsOptions_Destroy(o);
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "connect %s: %s", url, natsStatus_GetText(st));
    if ((st = natsConnection_JetStream(js, *nc, NULL)) != NATS_OK) {
        natsConnection_Destroy(*nc);
        *nc = NULL;
        return ib_error_set(err, IB_ERR_NATS, "jetstream context: %s", natsStatus_GetText(st));
    }
    return IB_OK;
}

/* A port free on 127.0.0.1 right now (the kernel's pick for port 0); 0 on
 * failure. A cluster's routes must be known before any node starts, so the
 * ports cannot be left to the servers as for the single server. */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Writes node i's configuration to `conf`. */
static bool write_node_conf(const char *conf, const char *store, int i, const int client[],
                            const int route[])
{
    FILE *f = fopen(conf, "we");
    if (f == NULL)
        return false;
    fprintf(f, "server_name: n%d\nlisten: 127.0.0.1:%d\n", i, client[i]);
    fprintf(f, "jetstream { store_dir: \"%s\" }\n", store);
    fprintf(f, "cluster {\n  name: bench\n  listen: 127.0.0.1:%d\n  routes: [\n", route[i]);
    for (int n = 0; n < IB__BENCH_CLUSTER_NODES; n++)
        fprintf(f, "    nats-route://127.0.0.1:%d\n", route[n]);
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0;
}

/* Whether the cluster takes a 3-replica stream now (then deleted again):
 * the readiness the 3-replica bucket needs. */
static bool cluster_takes_r3(const char *url)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    const char *subjects[] = {"bench.cluster.ready"};
    bool ok = false;
    if (ib__bench_connect(&nc, &js, url, NULL) == IB_OK) {
        jsStreamConfig_Init(&cfg);
        cfg.Name = "BENCH_READY";
        cfg.Subjects = subjects;
        cfg.SubjectsLen = 1;
        cfg.Replicas = IB__BENCH_CLUSTER_NODES;
        cfg.Storage = js_MemoryStorage;
        ok = js_AddStream(&si, js, &cfg, NULL, NULL) == NATS_OK;
        jsStreamInfo_Destroy(si);
        if (ok)
            js_DeleteStream(js, "BENCH_READY", NULL, NULL);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return ok;
}

ib_status ib__bench_cluster_bucket(const char *url, const char *bucket, ib_error *err)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    kvStore *kv = NULL;
    kvConfig kc;
    char first[256];
    /* Any node will do: the cluster's URLs, comma-separated, start with one. */
    snprintf(first, sizeof(first), "%.*s", (int)strcspn(url, ","), url);
    ib_status st = ib__bench_connect(&nc, &js, first, err);
    if (st != IB_OK)
        return st;
    /* The settings `kv:NAME?create=1&replicas=3` creates and checks. */
    kvConfig_Init(&kc);
    kc.Bucket = bucket;
    kc.History = 1;
    kc.Replicas = IB__BENCH_CLUSTER_NODES;
    kc.StorageType = js_FileStorage;
    natsStatus s = js_CreateKeyValue(&kv, js, &kc);
    if (s != NATS_OK)
        st = ib_error_set(err, IB_ERR_NATS, "create bucket %s: %s", bucket, natsStatus_GetText(s));
    kvStore_Destroy(kv);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

ib_status ib__bench_cluster_start(ib__bench_cluster *c, const char *exe, const char *dir,
                                  ib_error *err)
{
    int client[IB__BENCH_CLUSTER_NODES], route[IB__BENCH_CLUSTER_NODES];
    char node[600], store[700], conf[700], log[700];
    size_t used = 0;
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < IB__BENCH_CLUSTER_NODES; i++) {
        client[i] = free_port();
        route[i] = free_port();
        if (client[i] == 0 || route[i] == 0)
            return ib_error_set(err, IB_ERR_IO, "cluster: no free port");
        used += (size_t)snprintf(c->urls + used, sizeof(c->urls) - used, "%snats://127.0.0.1:%d",
                                 i > 0 ? "," : "", client[i]);
    }
    for (int i = 0; i < IB__BENCH_CLUSTER_NODES; i++) {
        snprintf(node, sizeof(node), "%s/n%d", dir, i);
        snprintf(store, sizeof(store), "%s/jetstream", node);
        snprintf(conf, sizeof(conf), "%s/nats-server.conf", node);
        snprintf(log, sizeof(log), "%s/nats-server.log", node);
        if ((mkdir(node, 0700) != 0 && errno != EEXIST) ||
            !write_node_conf(conf, store, i, client, route)) {
            ib__bench_cluster_stop(c);
            return ib_error_set(err, IB_ERR_IO, "cluster: cannot write %s", conf);
        }
        char *argv[] = {(char *)exe, "-c", conf, NULL};
        if ((c->pids[i] = ib__bench_spawn(log, argv)) < 0) {
            c->pids[i] = 0;
            ib__bench_cluster_stop(c);
            return ib_error_set(err, IB_ERR_IO, "cluster: cannot start %s", exe);
        }
    }
    char first[64];
    snprintf(first, sizeof(first), "nats://127.0.0.1:%d", client[0]);
    for (int64_t deadline = ib__bench_now_ms() + 30000; ib__bench_now_ms() < deadline;) {
        if (cluster_takes_r3(first))
            return IB_OK;
        ib__bench_sleep_ms(200);
    }
    ib__bench_cluster_stop(c);
    return ib_error_set(err, IB_ERR_TIMEOUT, "cluster: no 3-replica stream after 30 s (see %s/n*)",
                        dir);
}

void ib__bench_cluster_stop(ib__bench_cluster *c)
{
    for (int i = 0; i < IB__BENCH_CLUSTER_NODES; i++)
        if (c->pids[i] > 0)
            ib__bench_stop(c->pids[i], 10000);
    memset(c->pids, 0, sizeof(c->pids));
}
