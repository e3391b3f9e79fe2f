/* SPDX-License-Identifier: Apache-2.0 */
/* A 3-node nats-server cluster with JetStream for one integration test.
 *
 * Every node listens on 127.0.0.1 only, with its own client, HTTP
 * monitoring and cluster ports (picked free at start and kept for the
 * node's life, so a restart finds its peers again), its own server_name
 * ("n0", "n1", "n2") and its own store directory. The harness writes one
 * config file per node under "<dir>/n<i>/", with
 * cluster { name, listen, routes: [all three] }, and starts the nodes with
 * fork/exec (it_proc), so the cmocka teardown's it_proc_kill_all() stops
 * them even when an assertion fails.
 *
 * The cluster is ready when every node's /jsz (fetched over a plain
 * loopback socket) names the same meta leader and that leader sees both
 * other nodes as current. Replicated streams and KV buckets (stream
 * "KV_<bucket>") can then be made through it_cluster_js(). Node indexes
 * are 0..IT_CLUSTER_NODES-1; -1 means "no node". */
#ifndef IB_IT_CLUSTER_H
#define IB_IT_CLUSTER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>

#include "it_proc.h"
#include "it_support.h"

#define IT_CLUSTER_NODES 3

typedef struct it_cluster_node {
    char name[16]; /* server_name: "n0", "n1", "n2" */
    char dir[PATH_MAX];
    char conf[PATH_MAX];
    int port;         /* client port */
    int http_port;    /* monitoring (/jsz, /varz) */
    int cluster_port; /* routes */
    char url[64];     /* nats://127.0.0.1:PORT */
    it_proc proc;     /* pid 0 while the node is down */
} it_cluster_node;

typedef struct it_cluster {
    char dir[PATH_MAX];
    it_cluster_node node[IT_CLUSTER_NODES];
    char urls[256];     /* every node's URL, comma-separated */
    natsConnection *nc; /* the test's own connection; see it_cluster_client */
    jsCtx *js;
} it_cluster;

/* Starts the three nodes under `dir` (which must exist) and waits up to
 * timeout_ms until the cluster is ready (see above). Returns false, with
 * the reason and the nodes' logs on stderr, when a node fails to start or
 * the cluster is not ready in time; the nodes already started stay
 * registered with it_proc, so the teardown (or it_cluster_free) ends them. */
bool it_cluster_start(it_cluster *c, const char *dir, int64_t timeout_ms);

/* "nats://127.0.0.1:A,nats://127.0.0.1:B,nats://127.0.0.1:C", borrowed
 * from `c`. Note that nats.c 3.4.1's natsOptions_SetURL does not split
 * such a list (every connect fails with "No server available"): nats.c
 * needs natsOptions_SetServers with c->node[i].url, or
 * natsConnection_ConnectTo, which splits it. `ibus --nats-url` goes
 * through SetURL today, so give ibus one node's URL, c->node[i].url; it
 * learns the other nodes from the server and fails over to them. */
const char *it_cluster_urls(const it_cluster *c);

/* The test's own connection to all three nodes (made on first use,
 * reconnecting forever, so it survives any one node's death) and its
 * JetStream context; NULL when it cannot connect. Borrowed: valid until
 * it_cluster_free. */
natsConnection *it_cluster_client(it_cluster *c);
jsCtx *it_cluster_js(it_cluster *c);

/* Index of the node whose server_name is `name`; -1 if none. */
int it_cluster_node_index(const it_cluster *c, const char *name);

/* Index of the node that leads `stream` right now, as the stream's own
 * info reply says (a KV bucket's stream is "KV_<bucket>"); -1 while the
 * stream has no leader, the request fails or the stream does not exist. */
int it_cluster_stream_leader(it_cluster *c, const char *stream);

/* Polls until `stream` has a leader other than node `not_node` (-1: any
 * leader) on a running node. Returns its index, or -1 after timeout_ms. */
int it_cluster_wait_leader(it_cluster *c, const char *stream, int not_node, int64_t timeout_ms);

/* Polls until `stream` has a leader and every other replica is current
 * and online (for a 3-replica stream: all three peers in step, e.g. after
 * a restarted node rejoined). False after timeout_ms. */
bool it_cluster_wait_current(it_cluster *c, const char *stream, int64_t timeout_ms);

/* Index of the node that leads the durable consumer `durable` of
 * `stream` (a replicated consumer has a Raft group of its own, elected
 * apart from its stream's); -1 as for it_cluster_stream_leader. */
int it_cluster_consumer_leader(it_cluster *c, const char *stream, const char *durable);

/* kill -9 of node i; reaps it. False if it was not running. */
bool it_cluster_kill(it_cluster *c, int i);

/* SIGTERM to node i, as Kubernetes stops a pod, and waits for it to exit
 * (SIGKILL after 10 s). Returns the node's exit status (0 for a clean
 * shutdown), or -1 if it was not running. */
int it_cluster_stop(it_cluster *c, int i);

/* Starts node i again with the same config, ports and store directory
 * (after it_cluster_kill or a crash) and waits until its monitoring port
 * answers. Does not wait for it to catch up: see it_cluster_wait_current. */
bool it_cluster_restart(it_cluster *c, int i);

/* Closes the test's connection and stops every node (SIGTERM, then
 * SIGKILL). The directory stays; the test's fixture removes it. */
void it_cluster_free(it_cluster *c);

/* cmocka fixtures: a temporary directory and a ready cluster. The state
 * is an it_env (for it_path, it_done, the logs of a failed test) whose
 * it_server is unused; it_cluster_of() gives its cluster. The cluster
 * node logs ("n0-1.err", ...) go to the env directory, so a failed test
 * prints them. it_cluster_teardown closes the cluster's connection, then
 * does what it_teardown does. */
int it_cluster_setup(void **state);
int it_cluster_teardown(void **state);
/* Only for an env made by it_cluster_setup. */
it_cluster *it_cluster_of(it_env *e);

/* GET http://127.0.0.1:PORT/PATH over a plain socket (HTTP/1.0, no curl);
 * returns the HTTP status (0 when the request failed) and the body in
 * *body (malloc'd, the caller frees it; NULL on failure). */
int it_loopback_get(char **body, int port, const char *path, int64_t timeout_ms);

#endif
