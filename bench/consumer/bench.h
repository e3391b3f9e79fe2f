/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of the consumer benchmark driver
 * (consumer_bench): child processes, the nats-server it starts, the event
 * streams it publishes, and the measurements it takes from the outside.
 * Not installed, not part of any contract. */
#ifndef IB_BENCH_H
#define IB_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <nats/nats.h>

#include "error.h"

#define IB__BENCH_EVENT_TYPE "bench.event"
#define IB__BENCH_PAYLOAD_BYTES 128

/* ---- time (bench_proc.c) ---------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds and milliseconds. */
int64_t ib__bench_now_ns(void);
int64_t ib__bench_now_ms(void);
void ib__bench_sleep_ms(int64_t ms);

/* ---- child processes (bench_proc.c) ----------------------------------- */

/* Starts argv (argv[0] a path, NULL-terminated) with stdout and stderr
 * appended to `log_path`, stdin from /dev/null, and a parent-death signal
 * so nothing outlives the driver. Returns the pid, or -1 (message on
 * stderr). */
pid_t ib__bench_spawn(const char *log_path, char *const argv[]);

/* Waits up to timeout_ms for `pid`; returns its exit code, 128 + signal when
 * a signal ended it, or -1 when it is still running at the deadline. */
int ib__bench_wait(pid_t pid, int64_t timeout_ms);

/* SIGTERM, wait up to grace_ms, then SIGKILL; returns as ib__bench_wait
 * (never -1). */
int ib__bench_stop(pid_t pid, int64_t grace_ms);

/* Reads a "Vm...:" line (e.g. "VmHWM", "VmRSS") of /proc/<pid>/status in
 * KiB; -1 when unreadable. */
long ib__bench_proc_kib(pid_t pid, const char *field);

/* Runs argv to completion (ib__bench_spawn + wait, killed after
 * timeout_ms). Returns the exit code or -1 on a timeout. */
int ib__bench_run(const char *log_path, char *const argv[], int64_t timeout_ms);

/* ---- the nats-server (bench_server.c) ----------------------------------- */

typedef struct ib__bench_server {
    pid_t pid;
    char url[64];
    char dir[512]; /* store and ports directory */
} ib__bench_server;

/* Starts `exe` on 127.0.0.1 with a free port and JetStream storage under
 * `dir`, and waits until it accepts connections. */
ib_status ib__bench_server_start(ib__bench_server *s, const char *exe, const char *dir,
                                 ib_error *err);
/* Stops it by its pid. */
void ib__bench_server_stop(ib__bench_server *s);

/* The endpoint of the http plugin's row: libmicrohttpd on 127.0.0.1 with
 * a port the kernel picks, two threads, answering every POST 204 with
 * keep-alive. */
typedef struct ib__bench_http {
    void *daemon; /* struct MHD_Daemon */
    char url[64];
} ib__bench_http;

/* Starts it; `h->url` is where it listens. Errors: IB_ERR_IO. */
ib_status ib__bench_http_start(ib__bench_http *h, ib_error *err);
/* Stops it. No-op when not started. */
void ib__bench_http_stop(ib__bench_http *h);

/* A 3-node cluster on loopback for the markers of the 3-replica kv: row:
 * nodes "n0".."n2", each with a free client and cluster port, its own
 * store under `dir`/n<i>, and routes to all three. */
#define IB__BENCH_CLUSTER_NODES 3
typedef struct ib__bench_cluster {
    pid_t pids[IB__BENCH_CLUSTER_NODES];
    char urls[256]; /* every node's client URL, comma-separated */
} ib__bench_cluster;

/* Starts the cluster and waits until it can create a 3-replica stream
 * (a meta leader exists and every peer is current). On failure the nodes
 * already started are stopped. */
ib_status ib__bench_cluster_start(ib__bench_cluster *c, const char *exe, const char *dir,
                                  ib_error *err);
/* Stops every node by its pid; a cluster never started is a no-op. */
void ib__bench_cluster_stop(ib__bench_cluster *c);
/* Creates the 3-replica bucket `bucket` on the cluster at `url`, with the
 * settings ibus run would give it, before the processes of a row start. */
ib_status ib__bench_cluster_bucket(const char *url, const char *bucket, ib_error *err);

/* Connects with settings fit for measuring (large buffers, no reconnect
 * noise). `*nc` and `*js` are freed by the caller. */
ib_status ib__bench_connect(natsConnection **nc, jsCtx **js, const char *url, ib_error *err);

/* ---- event streams (bench_publish.c) ------------------------------------ */

/* How a stream's messages are generated. The same (seed, duplicates) gives
 * the same ids and payloads in every run and every stream. */
typedef struct ib__bench_stream_spec {
    const char *name;    /* stream name */
    const char *subject; /* its only subject */
    size_t messages;     /* total, duplicates included */
    double duplicates;   /* fraction of messages that repeat an earlier id */
    uint64_t seed;
} ib__bench_stream_spec;

/* Deterministic event generator: message i of a spec. */
typedef struct ib__bench_gen {
    uint64_t state;
    double duplicates;
    char (*recent)[33]; /* ring of recent unique ids, duplicates pick from it */
    size_t recent_cap, recent_len, recent_next;
    size_t made, unique;
} ib__bench_gen;

ib_status ib__bench_gen_init(ib__bench_gen *g, double duplicates, uint64_t seed, ib_error *err);
void ib__bench_gen_free(ib__bench_gen *g);
/* Encodes the next event (created_at_ms = now) into `*buf` (malloc'd; the
 * caller frees it) and its length into `*len`. */
ib_status ib__bench_gen_next(uint8_t **buf, size_t *len, ib__bench_gen *g, ib_error *err);

/* Creates the stream (file storage, replaced if it exists) and publishes
 * every message of `spec`; returns when the stream holds all of them. */
ib_status ib__bench_stream_fill(natsConnection *nc, jsCtx *js, const ib__bench_stream_spec *spec,
                                ib_error *err);

/* Creates the stream empty (replacing one of that name). */
ib_status ib__bench_stream_create(jsCtx *js, const char *name, const char *subject, ib_error *err);

/* Creates a durable pull consumer with explicit acks over the whole stream
 * (deleting one of that name first), with the settings every row shares. */
ib_status ib__bench_consumer_create(jsCtx *js, const char *stream, const char *durable,
                                    ib_error *err);

/* ---- consumer processes of a row (bench_launch.c) ------------------------ */

#define IB__BENCH_MAX_PROCS 4

typedef enum ib__bench_kind {
    IB__BENCH_BARE,           /* bench_bare: ack only */
    IB__BENCH_BARE_DECODE,    /* bench_bare --decode */
    IB__BENCH_BARE_PIPELINED, /* bench_bare --pipeline 2 */
    IB__BENCH_IBUS,           /* ibus run with the no-op plugin */
    IB__BENCH_IBUS_HTTP,      /* ibus run with the http plugin, to env.http_url */
} ib__bench_kind;

typedef enum ib__bench_recorder {
    IB__BENCH_MEMORY,
    IB__BENCH_SQLITE_NORMAL,
    IB__BENCH_SQLITE_FULL,
    IB__BENCH_KV1,        /* kv: bucket, 1 replica, on the stream's server */
    IB__BENCH_KV3,        /* kv: bucket, 3 replicas, on the cluster (env.kv_cluster) */
    IB__BENCH_SQLITE_BIG, /* sqlite, default settings, on a copy of env.big_template */
} ib__bench_recorder;

/* One way of consuming a stream: a row of the table. */
typedef struct ib__bench_config {
    const char *label;
    ib__bench_kind kind;
    ib__bench_recorder recorder; /* ibus only */
    int processes;               /* 1..IB__BENCH_MAX_PROCS, sharing one durable (and file) */
    int concurrency;             /* ibus --concurrency; 0 = its default */
    int sleep_ms;                /* handler time per event; 0 = none */
    int batch;                   /* ibus --batch; 0 = the run's --batch */
    int join_ms; /* processes after the first start this much later, as a user scales out */
} ib__bench_config;

/* What every launch needs: programs, server, scratch directory. */
typedef struct ib__bench_env {
    const char *ibus, *plugin, *bare, *valgrind;
    const char *url;
    const char *kv_cluster;   /* the cluster's URLs for IB__BENCH_KV3; NULL = none */
    const char *big_template; /* a file full of markers for IB__BENCH_SQLITE_BIG */
    const char *http_plugin;  /* http.so, for IB__BENCH_IBUS_HTTP */
    const char *http_url;     /* the endpoint (ib__bench_http); NULL = none started */
    const char *dir;
    long batch;
} ib__bench_env;

/* The processes of one row on one stream. */
typedef struct ib__bench_launch {
    pid_t pids[IB__BENCH_MAX_PROCS];
    int n;
    ib__bench_kind kind;
    char summary[600]; /* ibus --summary-file, shared by the row's processes */
    char logs[IB__BENCH_MAX_PROCS][600];
    int64_t started_ns;               /* when the first process was started */
    bool joiner[IB__BENCH_MAX_PROCS]; /* started join_ms late, through sh */
} ib__bench_launch;

/* Fills `<dir>/big-template.db` (its path into `out`) with `markers`
 * markers of an identity no row uses, in the current schema. */
ib_status ib__bench_big_template(char *out, size_t len, const char *dir, size_t markers,
                                 ib_error *err);

/* Copies a file (a marker file for one cell). */
ib_status ib__bench_copy_file(const char *from, const char *to, ib_error *err);

/* Starts config `c` on `durable` of `stream`. With `callgrind_out` (one
 * process) the process runs under valgrind --tool=callgrind writing that
 * file. */
ib_status ib__bench_launch_start(ib__bench_launch *l, const ib__bench_env *env,
                                 const ib__bench_config *c, const char *stream, const char *durable,
                                 const char *callgrind_out, ib_error *err);

/* The smallest and largest share of a row's messages one of its
 * processes acked, over every repetition (seen: at least one was read). */
typedef struct ib__bench_shares {
    bool seen;
    double lowest, highest;
} ib__bench_shares;

/* Sends SIGTERM to every process of `l` and leaves them to exit while the
 * next row runs (a host hands back its last pull request, which takes up to
 * its expiry); ib__bench_reap_all() later checks that they exited 0 having
 * acked `expected` messages between them, and clears `*ok` if not. With
 * several ibus processes and `shares` not NULL, it also widens `*shares`
 * by each process's part of what they acked (a process with no summary
 * line had none). */
void ib__bench_launch_retire(const ib__bench_launch *l, uint64_t expected, bool *ok,
                             ib__bench_shares *shares);

/* Stops `l` now and waits for it (callgrind must write its file). Returns
 * true when every process exited 0. */
bool ib__bench_launch_stop(const ib__bench_launch *l);

/* Waits for every retired process; returns how many failed a check. */
int ib__bench_reap_all(void);

/* ---- throughput from the outside (bench_measure.c) ---------------------- */

typedef struct ib__bench_rate {
    double msgs_per_s;    /* (total - acked_first) / (t_done - t_first) */
    uint64_t total;       /* messages the consumer had to ack */
    uint64_t acked_first; /* acks seen by the first poll that saw any */
    int64_t t_first_ns, t_done_ns;
    double startup_ms;   /* the launch to the first ack (measure_row) */
    long rss_first_kib;  /* VmRSS of the first consumer at the first poll with acks; -1 if none */
    long rss_done_kib;   /* VmRSS when done */
    long hwm_done_kib;   /* VmHWM when done */
    double consumer_cpu; /* CPU seconds per second of all consumers, first ack to done */
    double server_cpu;   /* the same for nats-server */
} ib__bench_rate;

/* The processes whose memory and CPU a measurement samples. */
typedef struct ib__bench_watch {
    const pid_t *pids; /* the consumers; pids[0] is sampled for memory */
    int n;
    pid_t server; /* 0 = none */
} ib__bench_watch;

/* CPU time (user + system) a process has used so far, in seconds; -1 when
 * unreadable. */
double ib__bench_proc_cpu_s(pid_t pid);

/* Polls consumer info every poll_ms until the consumer has acked all `total`
 * messages (nothing pending, nothing waiting for an ack), and derives the
 * rate between the first poll that saw an ack and the poll that saw the
 * last one. The processes of `w` (may be NULL) are sampled for memory and
 * CPU at those two polls. IB_ERR_TIMEOUT when no progress was seen for
 * `stall_ms`. */
ib_status ib__bench_measure(ib__bench_rate *out, jsCtx *js, const char *stream, const char *durable,
                            uint64_t total, int64_t poll_ms, int64_t stall_ms,
                            const ib__bench_watch *w, ib_error *err);

/* Waits until the consumer has a pull request waiting on the server (the
 * process is bound and pulling), up to timeout_ms. */
ib_status ib__bench_wait_pulling(jsCtx *js, const char *stream, const char *durable,
                                 int64_t timeout_ms, ib_error *err);

/* ---- latency (bench_latency.c) ------------------------------------------ */

typedef struct ib__bench_latency {
    double p50_ms, p99_ms, max_ms;
    double rate; /* achieved publish rate, msgs/s */
    size_t messages;
} ib__bench_latency;

/* Publishes `messages` events of `gen` to `subject` at `rate` per second
 * while a core subscription taps the consumer's acks
 * ($JS.ACK.<stream>.<durable>.>), and reports publish-to-ack latency
 * percentiles. The stream must be empty before (stream sequence n is
 * message n). */
ib_status ib__bench_latency_run(ib__bench_latency *out, natsConnection *nc, const char *stream,
                                const char *subject, const char *durable, ib__bench_gen *gen,
                                size_t messages, double rate, ib_error *err);

/* ---- instruction counts (bench_callgrind.c) ------------------------------ */

typedef struct ib__bench_instr {
    uint64_t total;    /* every thread of the process */
    uint64_t hot_path; /* inclusive cost of the host's batch function */
} ib__bench_instr;

/* Reads a callgrind output file: the total instruction count and the
 * inclusive count of `function` (via callgrind_annotate; NULL = only the
 * total, hot_path 0). */
ib_status ib__bench_callgrind_read(ib__bench_instr *out, const char *file, const char *function,
                                   ib_error *err);

/* ---- the recorders in process (bench_recorder.c) ------------------------- */

/* Claims and marks `markers` fresh ids in recorder `uri` in batches of
 * `batch` (the host's calls per batch, without NATS or handlers) and
 * reports markers per second. With `check_only` it checks instead of
 * claiming: what the flow would cost without claims. */
ib_status ib__bench_recorder_rate(double *msgs_per_s, const char *uri, size_t markers, size_t batch,
                                  bool check_only, ib_error *err);

/* Marks `markers` fresh ids in a memory: recorder, in batches like the
 * host's, and reports the recorder's own storage_bytes per marker. */
ib_status ib__bench_memrec_bytes(double *bytes_per_marker, size_t markers, ib_error *err);

#endif
