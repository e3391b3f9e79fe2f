/* SPDX-License-Identifier: Apache-2.0 */
#include "it_cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "it_files.h"
#include "it_server.h"
#include "it_support.h"

#define CLUSTER_NAME "ibus-it"
/* How long a node may take to open its monitoring port, and to stop. */
#define NODE_START_MS 20000
#define NODE_STOP_MS 10000
/* Free ports are only free until someone else binds them; a start that
 * loses such a race is tried again with fresh ports. */
#define START_ATTEMPTS 3
#define PORTS_PER_NODE 3
#define READY_MS 30000

/* The fixtures' state: the env first, so it_teardown's free(e) frees the
 * whole block. */
typedef struct cluster_env {
    it_env env;
    it_cluster cluster;
} cluster_env;

/* Binds `n` sockets to 127.0.0.1:0 at once, so the ports are distinct,
 * and releases them. */
static bool pick_ports(int *out, int n)
{
    int fds[IT_CLUSTER_NODES * PORTS_PER_NODE];
    bool ok = n <= (int)(sizeof(fds) / sizeof(fds[0]));
    int opened = 0;
    for (; ok && opened < n; opened++) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t len = sizeof(sa);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[opened] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[opened] < 0)
            break;
        ok = bind(fds[opened], (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
             getsockname(fds[opened], (struct sockaddr *)&sa, &len) == 0;
        out[opened] = ntohs(sa.sin_port);
    }
    for (int i = 0; i < opened; i++)
        close(fds[i]);
    return ok && opened == n;
}

static bool write_node_config(const it_cluster *c, const it_cluster_node *nd)
{
    char text[4096], store[PATH_MAX];
    it_join(store, sizeof(store), nd->dir, "js");
    int n = snprintf(text, sizeof(text),
                     "server_name: \"%s\"\n"
                     "listen: \"127.0.0.1:%d\"\n"
                     "http: \"127.0.0.1:%d\"\n"
                     "jetstream {\n  store_dir: \"%s\"\n}\n"
                     "cluster {\n  name: \"%s\"\n  listen: \"127.0.0.1:%d\"\n"
                     "  routes: [\n",
                     nd->name, nd->port, nd->http_port, store, CLUSTER_NAME, nd->cluster_port);
    for (int i = 0; i < IT_CLUSTER_NODES && n > 0 && (size_t)n < sizeof(text); i++)
        n += snprintf(text + n, sizeof(text) - (size_t)n, "    \"nats-route://127.0.0.1:%d\"\n",
                      c->node[i].cluster_port);
    if (n > 0 && (size_t)n < sizeof(text))
        n += snprintf(text + n, sizeof(text) - (size_t)n, "  ]\n}\n");
    if (n <= 0 || (size_t)n >= sizeof(text))
        return false;
    return it_file_write(nd->conf, text, (size_t)n);
}

/* Sets up names, ports, directories and config files of all nodes. */
static bool prepare(it_cluster *c)
{
    int ports[IT_CLUSTER_NODES * PORTS_PER_NODE];
    if (!pick_ports(ports, IT_CLUSTER_NODES * PORTS_PER_NODE))
        return false;
    size_t u = 0;
    c->urls[0] = '\0';
    for (int i = 0; i < IT_CLUSTER_NODES; i++) {
        it_cluster_node *nd = &c->node[i];
        snprintf(nd->name, sizeof(nd->name), "n%d", i);
        it_join(nd->dir, sizeof(nd->dir), c->dir, nd->name);
        it_join(nd->conf, sizeof(nd->conf), nd->dir, "nats.conf");
        /* A retried start must not find the failed attempt's stores. */
        it_tmpdir_remove(nd->dir);
        if (mkdir(nd->dir, 0700) != 0)
            return false;
        nd->port = ports[i * PORTS_PER_NODE];
        nd->http_port = ports[i * PORTS_PER_NODE + 1];
        nd->cluster_port = ports[i * PORTS_PER_NODE + 2];
        snprintf(nd->url, sizeof(nd->url), "nats://127.0.0.1:%d", nd->port);
        u += (size_t)snprintf(c->urls + u, sizeof(c->urls) - u, "%s%s", i > 0 ? "," : "", nd->url);
    }
    for (int i = 0; i < IT_CLUSTER_NODES; i++)
        if (!write_node_config(c, &c->node[i]))
            return false;
    return u < sizeof(c->urls);
}

static int connect_loopback(int port, int64_t timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until the peer closes (HTTP/1.0) into a malloc'd string. */
static char *read_all(int fd, size_t *len)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (cap - n < 4096) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL)
                break;
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r == 0) {
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0)
            n += (size_t)r;
    }
    free(buf);
    return NULL;
}

int it_loopback_get(char **body, int port, const char *path, int64_t timeout_ms)
{
    *body = NULL;
    int fd = connect_loopback(port, timeout_ms);
    if (fd < 0)
        return 0;
    char req[512];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n", path, port);
    size_t len = 0;
    char *resp = NULL;
    if (n > 0 && (size_t)n < sizeof(req) && write(fd, req, (size_t)n) == n)
        resp = read_all(fd, &len);
    close(fd);
    int status = 0;
    const char *sep = resp != NULL ? strstr(resp, "\r\n\r\n") : NULL;
    if (sep == NULL || sscanf(resp, "HTTP/%*d.%*d %d", &status) != 1) {
        free(resp);
        return 0;
    }
    *body = strdup(sep + 4);
    free(resp);
    return *body != NULL ? status : 0;
}

/* The meta leader node `i` sees, and (when it is the leader itself) how
 * many of its meta replicas are current. False if /jsz cannot be read. */
static bool meta_view(const it_cluster *c, int i, char *leader, size_t cap, int *current)
{
    char *body = NULL;
    int status = it_loopback_get(&body, c->node[i].http_port, "/jsz", 2000);
    json_t *root = status == 200 ? json_loads(body, 0, NULL) : NULL;
    free(body);
    json_t *meta = json_object_get(root, "meta_cluster");
    const char *name = json_string_value(json_object_get(meta, "leader"));
    bool ok = name != NULL && name[0] != '\0';
    if (ok)
        snprintf(leader, cap, "%s", name);
    *current = 0;
    json_t *replicas = json_object_get(meta, "replicas");
    for (size_t r = 0; r < json_array_size(replicas); r++) {
        json_t *peer = json_array_get(replicas, r);
        if (json_is_true(json_object_get(peer, "current")) &&
            !json_is_true(json_object_get(peer, "offline")))
            (*current)++;
    }
    json_decref(root);
    return ok;
}

/* Ready: all nodes agree on a meta leader, which sees the others current. */
static bool cluster_ready(const it_cluster *c)
{
    char first[64] = "";
    for (int i = 0; i < IT_CLUSTER_NODES; i++) {
        char leader[64];
        int current = 0;
        if (!meta_view(c, i, leader, sizeof(leader), &current))
            return false;
        if (i > 0 && strcmp(leader, first) != 0)
            return false;
        snprintf(first, sizeof(first), "%s", leader);
    }
    int lead = it_cluster_node_index(c, first), current = 0;
    char again[64];
    return lead >= 0 && meta_view(c, lead, again, sizeof(again), &current) &&
           current == IT_CLUSTER_NODES - 1;
}

/* Spawns node i and waits until its monitoring port answers. */
static bool launch(it_cluster *c, int i)
{
    it_cluster_node *nd = &c->node[i];
    const char *exe = it_nats_server_path();
    if (exe == NULL) {
        fprintf(stderr, "it_cluster: nats-server not found\n");
        return false;
    }
    char *argv[] = {(char *)exe, "-c", nd->conf, NULL};
    if (!it_proc_spawn(&nd->proc, c->dir, nd->name, NULL, argv))
        return false;
    int64_t deadline = it_now_ms() + NODE_START_MS;
    for (;;) {
        char *body = NULL;
        int status = it_loopback_get(&body, nd->http_port, "/varz", 1000);
        free(body);
        if (status == 200)
            return true;
        if (!it_proc_running(&nd->proc)) {
            fprintf(stderr, "it_cluster: %s exited with status %d\n", nd->name, nd->proc.status);
            return false;
        }
        if (it_now_ms() >= deadline) {
            fprintf(stderr, "it_cluster: %s: no monitoring port after %d ms\n", nd->name,
                    NODE_START_MS);
            it_proc_stop(&nd->proc, SIGKILL, 1000);
            return false;
        }
        it_sleep_ms(50);
    }
}

static void stop_nodes(it_cluster *c)
{
    for (int i = 0; i < IT_CLUSTER_NODES; i++)
        if (c->node[i].proc.pid != 0)
            it_proc_stop(&c->node[i].proc, SIGTERM, NODE_STOP_MS);
}

static bool start_once(it_cluster *c)
{
    if (!prepare(c)) {
        fprintf(stderr, "it_cluster: cannot pick ports or write the node configs\n");
        return false;
    }
    for (int i = 0; i < IT_CLUSTER_NODES; i++)
        if (!launch(c, i)) {
            stop_nodes(c);
            return false;
        }
    return true;
}

bool it_cluster_start(it_cluster *c, const char *dir, int64_t timeout_ms)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    bool started = false;
    for (int attempt = 0; attempt < START_ATTEMPTS && !started; attempt++)
        started = start_once(c);
    if (!started) {
        it_dump_logs(c->dir, 30);
        return false;
    }
    int64_t deadline = it_now_ms() + timeout_ms;
    while (!cluster_ready(c)) {
        if (it_now_ms() >= deadline) {
            fprintf(stderr, "it_cluster: no meta leader on every node after %lld ms\n",
                    (long long)timeout_ms);
            it_dump_logs(c->dir, 30);
            return false;
        }
        it_sleep_ms(100);
    }
    return true;
}

const char *it_cluster_urls(const it_cluster *c)
{
    return c->urls;
}

natsConnection *it_cluster_client(it_cluster *c)
{
    if (c->nc != NULL)
        return c->nc;
    /* natsOptions_SetURL takes one URL only (a comma-separated list makes
     * every connect fail); a list goes through SetServers. */
    const char *servers[IT_CLUSTER_NODES];
    for (int i = 0; i < IT_CLUSTER_NODES; i++)
        servers[i] = c->node[i].url;
    natsOptions *o = NULL;
    natsStatus st = natsOptions_Create(&o);
    if (st == NATS_OK)
        st = natsOptions_SetServers(o, servers, IT_CLUSTER_NODES);
    if (st == NATS_OK)
        st = natsOptions_SetTimeout(o, 10000);
    if (st == NATS_OK)
        st = natsOptions_SetMaxReconnect(o, -1);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectWait(o, 100);
    if (st == NATS_OK)
        st = natsConnection_Connect(&c->nc, o);
    natsOptions_Destroy(o);
    if (st != NATS_OK) {
        fprintf(stderr, "it_cluster: cannot connect to %s: %s\n", c->urls, natsStatus_GetText(st));
        c->nc = NULL;
    }
    return c->nc;
}

jsCtx *it_cluster_js(it_cluster *c)
{
    if (c->js == NULL) {
        natsConnection *nc = it_cluster_client(c);
        if (nc == NULL || natsConnection_JetStream(&c->js, nc, NULL) != NATS_OK)
            c->js = NULL;
    }
    return c->js;
}

int it_cluster_node_index(const it_cluster *c, const char *name)
{
    for (int i = 0; name != NULL && i < IT_CLUSTER_NODES; i++)
        if (strcmp(c->node[i].name, name) == 0)
            return i;
    return -1;
}

/* The stream's info, asked with a short wait so that polls during an
 * election stay responsive; NULL when it cannot be had. */
static jsStreamInfo *stream_info(it_cluster *c, const char *stream)
{
    jsCtx *js = it_cluster_js(c);
    if (js == NULL)
        return NULL;
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = 1000;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (js_GetStreamInfo(&si, js, stream, &o, &jerr) != NATS_OK)
        return NULL;
    return si;
}

int it_cluster_stream_leader(it_cluster *c, const char *stream)
{
    jsStreamInfo *si = stream_info(c, stream);
    int i = si != NULL && si->Cluster != NULL ? it_cluster_node_index(c, si->Cluster->Leader) : -1;
    jsStreamInfo_Destroy(si);
    return i;
}

int it_cluster_wait_leader(it_cluster *c, const char *stream, int not_node, int64_t timeout_ms)
{
    int64_t deadline = it_now_ms() + timeout_ms;
    do {
        int i = it_cluster_stream_leader(c, stream);
        if (i >= 0 && i != not_node && it_proc_running(&c->node[i].proc))
            return i;
        it_sleep_ms(100);
    } while (it_now_ms() < deadline);
    return -1;
}

int it_cluster_consumer_leader(it_cluster *c, const char *stream, const char *durable)
{
    jsCtx *js = it_cluster_js(c);
    if (js == NULL)
        return -1;
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = 1000;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    if (js_GetConsumerInfo(&ci, js, stream, durable, &o, &jerr) != NATS_OK)
        return -1;
    int i = ci->Cluster != NULL ? it_cluster_node_index(c, ci->Cluster->Leader) : -1;
    jsConsumerInfo_Destroy(ci);
    return i;
}

/* True when the info shows a leader and every replica current, online. */
static bool all_current(const jsStreamInfo *si)
{
    if (si == NULL || si->Cluster == NULL || si->Cluster->Leader == NULL)
        return false;
    for (int r = 0; r < si->Cluster->ReplicasLen; r++) {
        const jsPeerInfo *p = si->Cluster->Replicas[r];
        if (!p->Current || p->Offline)
            return false;
    }
    return si->Cluster->ReplicasLen == (int)si->Config->Replicas - 1;
}

bool it_cluster_wait_current(it_cluster *c, const char *stream, int64_t timeout_ms)
{
    int64_t deadline = it_now_ms() + timeout_ms;
    do {
        jsStreamInfo *si = stream_info(c, stream);
        bool ok = all_current(si);
        jsStreamInfo_Destroy(si);
        if (ok)
            return true;
        it_sleep_ms(100);
    } while (it_now_ms() < deadline);
    return false;
}

bool it_cluster_kill(it_cluster *c, int i)
{
    if (i < 0 || i >= IT_CLUSTER_NODES || !it_proc_signal(&c->node[i].proc, SIGKILL))
        return false;
    it_proc_wait(&c->node[i].proc, NODE_STOP_MS);
    return true;
}

int it_cluster_stop(it_cluster *c, int i)
{
    if (i < 0 || i >= IT_CLUSTER_NODES || c->node[i].proc.pid == 0)
        return -1;
    return it_proc_stop(&c->node[i].proc, SIGTERM, NODE_STOP_MS);
}

bool it_cluster_restart(it_cluster *c, int i)
{
    if (i < 0 || i >= IT_CLUSTER_NODES)
        return false;
    if (c->node[i].proc.pid != 0)
        it_proc_stop(&c->node[i].proc, SIGTERM, NODE_STOP_MS);
    /* The ports were this node's a moment ago; retry briefly in case the
     * kernel still holds one. */
    for (int attempt = 0; attempt < 10; attempt++) {
        if (launch(c, i))
            return true;
        it_sleep_ms(250);
    }
    return false;
}

static void close_client(it_cluster *c)
{
    jsCtx_Destroy(c->js);
    c->js = NULL;
    if (c->nc != NULL) {
        natsConnection_Close(c->nc);
        natsConnection_Destroy(c->nc);
        c->nc = NULL;
    }
}

void it_cluster_free(it_cluster *c)
{
    close_client(c);
    stop_nodes(c);
}

int it_cluster_setup(void **state)
{
    cluster_env *ce = calloc(1, sizeof(*ce));
    if (ce == NULL || !it_tmpdir_create(ce->env.dir, sizeof(ce->env.dir))) {
        free(ce);
        return -1;
    }
    if (!it_cluster_start(&ce->cluster, ce->env.dir, it_timeout(READY_MS))) {
        it_proc_kill_all();
        it_tmpdir_remove(ce->env.dir);
        free(ce);
        *state = NULL;
        return -1;
    }
    *state = &ce->env;
    return 0;
}

it_cluster *it_cluster_of(it_env *e)
{
    return &((cluster_env *)e)->cluster;
}

int it_cluster_teardown(void **state)
{
    it_env *e = *state;
    if (e == NULL)
        return 0;
    /* The connection first, while the nodes still answer. */
    close_client(it_cluster_of(e));
    return it_teardown(state);
}
