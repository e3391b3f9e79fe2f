/* SPDX-License-Identifier: Apache-2.0 */
/* The operations part: the Prometheus metrics registry of one ibus
 * process and the health/metrics HTTP endpoint that serves it. Knows
 * nothing of NATS or plugins; the host feeds it. */
#ifndef IB_OPS_H
#define IB_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dead_letter.h"
#include "error.h"

/* Prometheus metrics of one ibus process.
 *
 * A fixed registry: every series is known at compile time, or (per
 * consumer identity) registered once before the handlers first run, and the
 * only labels are bounded sets (the dead-letter reason, the consumer
 * identities the configuration names, the run result, the build version),
 * so no event id or subject can ever become a label. Updates are lock-free
 * C11 atomics (relaxed), cheap enough to call per event from any thread;
 * only rendering walks the whole registry.
 *
 * Series (text format 0.0.4):
 *   ibus_events_received_total, ibus_events_handled_total,
 *   ibus_duplicates_dropped_total, ibus_handler_failures_total,
 *   ibus_events_unhandled_total, ibus_naks_total, ibus_acks_total,
 *   ibus_redeliveries_total, ibus_recorder_errors_total,
 *   ibus_claims_lost_total, ibus_conflicts_total,
 *   ibus_markers_pruned_total, ibus_redelivered_duplicates_total counters
 *   ibus_dead_lettered_total{reason="decode|invalid-id|max-deliver|rejected|conflict|other"}
 *   ibus_consumer_runs_total{consumer="ID",result="handled|duplicate|retry|rejected|
 *                            conflict|claim-lost|recorder-failed"}  counter, every
 *                            result of every registered consumer rendered from 0
 *   ibus_handlers_in_flight, ibus_consumer_pending, ibus_consumer_ack_pending,
 *   ibus_connected, ibus_consumer_bound, ibus_recorder_up, ibus_ready,
 *   ibus_markers, ibus_recorder_wal_bytes, ibus_outbox_pending gauges
 *   ibus_handle_seconds, ibus_recorder_seconds                 histograms
 *   ibus_consumer_handle_seconds{consumer="ID"}                histogram
 *   ibus_http_requests_total{consumer="ID",code="503|timeout|error"} counter and
 *   ibus_http_request_seconds{consumer="ID"} histogram, for consumers whose
 *                            handlers report HTTP requests (ABI 1.3)
 *   ibus_circuit_state{consumer="ID"}  gauge: 0 closed, 1 half-open, 2 open
 *   ibus_circuit_transitions_total{consumer="ID",to="closed|half-open|open"},
 *   ibus_circuit_waits_total{consumer="ID"},
 *   ibus_handler_timeouts_total{consumer="ID"}              counters
 *   ibus_handlers_overdue                                   gauge
 *   ibus_build_info{version="..."} 1                           gauge
 */
typedef struct ib_metrics ib_metrics;

/* Monotonic counters. Values are never renumbered; new ones go before
 * IB_METRIC_COUNTER_COUNT. */
typedef enum ib_metric_counter {
    IB_METRIC_EVENTS_RECEIVED = 0,         /* JetStream deliveries, decodable or not; messages
                                              without an ack subject are not counted */
    IB_METRIC_EVENTS_HANDLED = 1,          /* handler runs that returned OK */
    IB_METRIC_DUPLICATES_DROPPED = 2,      /* handler runs skipped: already marked */
    IB_METRIC_HANDLER_FAILURES = 3,        /* handler runs that returned RETRY or REJECT */
    IB_METRIC_EVENTS_UNHANDLED = 4,        /* events no handler subscribes to (acked) */
    IB_METRIC_NAKS = 5,                    /* messages nak'ed */
    IB_METRIC_ACKS = 6,                    /* messages acked */
    IB_METRIC_REDELIVERIES = 7,            /* messages received with delivery count > 1 */
    IB_METRIC_RECORDER_ERRORS = 8,         /* recorder calls that failed */
    IB_METRIC_CLAIMS_LOST = 9,             /* handlers whose claim another owner took over */
    IB_METRIC_CONFLICTS = 10,              /* handlers not run: id marked with another payload */
    IB_METRIC_MARKERS_PRUNED = 11,         /* markers removed by background pruning */
    IB_METRIC_REDELIVERED_DUPLICATES = 12, /* duplicates on a delivery count > 1 whose
                                              handlers were all marked: the crash window
                                              (marked, ack lost) at work */
    IB_METRIC_COUNTER_COUNT
} ib_metric_counter;

typedef enum ib_metric_gauge {
    IB_METRIC_HANDLERS_IN_FLIGHT = 0,   /* handler calls running now */
    IB_METRIC_CONSUMER_PENDING = 1,     /* messages the consumer has not delivered yet */
    IB_METRIC_CONNECTED = 2,            /* 1 while connected to NATS, else 0 */
    IB_METRIC_CONSUMER_BOUND = 3,       /* 1 while bound to the durable consumer, else 0 */
    IB_METRIC_RECORDER_UP = 4,          /* 1 while the recorder's last call worked, else 0 */
    IB_METRIC_MARKERS = 5,              /* markers in the recorder, as last counted */
    IB_METRIC_RECORDER_WAL_BYTES = 6,   /* bytes in the recorder's write-ahead log */
    IB_METRIC_OUTBOX_PENDING = 7,       /* messages waiting in the recorder's outbox */
    IB_METRIC_CONSUMER_ACK_PENDING = 8, /* delivered to some process, not acked yet */
    IB_METRIC_READY = 9,                /* 1 when /readyz answers 200; set per scrape */
    IB_METRIC_HANDLERS_OVERDUE = 10,    /* handler calls running past --handler-timeout now */
    IB_METRIC_PARTITIONS = 11,          /* partitions of a partitioned consumer; 0 = not one */
    IB_METRIC_PARTITIONS_OWNED = 12,    /* of them, those this process owns now */
    IB_METRIC_FLEET_MEMBERS = 13,       /* live processes of the partitioned consumer */
    IB_METRIC_GAUGE_COUNT
} ib_metric_gauge;

typedef enum ib_metric_histogram {
    IB_METRIC_HANDLE_SECONDS = 0,   /* one handler call, seconds */
    IB_METRIC_RECORDER_SECONDS = 1, /* recorder time of one batch (claims, marks, releases) */
    IB_METRIC_HISTOGRAM_COUNT
} ib_metric_histogram;

/* What became of one handler run, the result label of
 * ibus_consumer_runs_total. Never renumbered; new ones go before
 * IB_METRIC_RESULT_COUNT. */
typedef enum ib_metric_result {
    IB_METRIC_RESULT_HANDLED = 0,         /* ran, said OK, marked */
    IB_METRIC_RESULT_DUPLICATE = 1,       /* not run: already marked */
    IB_METRIC_RESULT_RETRY = 2,           /* ran, said RETRY */
    IB_METRIC_RESULT_REJECTED = 3,        /* ran, said REJECT */
    IB_METRIC_RESULT_CONFLICT = 4,        /* not run: id marked with another payload */
    IB_METRIC_RESULT_CLAIM_LOST = 5,      /* ran, said OK, another owner took its claim */
    IB_METRIC_RESULT_RECORDER_FAILED = 6, /* not run: the recorder call failed */
    IB_METRIC_RESULT_COUNT
} ib_metric_result;

/* The series of one consumer identity; owned by the registry. */
typedef struct ib_metrics_consumer ib_metrics_consumer;

/* Upper bounds (le) of the finite histogram buckets, in seconds:
 * 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10.
 * A last, implicit bucket is +Inf. */
#define IB_METRICS_BUCKETS 14

/* Returns the upper bound of finite bucket `i` (0 <= i < IB_METRICS_BUCKETS),
 * or +Inf for any other index. */
double ib_metrics_bucket_bound(size_t i);

/* A consistent-enough copy of every value, for tests and the host's final
 * summary. Bucket counts are per bucket (not cumulative); buckets[last] is
 * the +Inf overflow bucket and count is the sum of all buckets. */
typedef struct ib_metrics_snapshot {
    uint64_t counters[IB_METRIC_COUNTER_COUNT];
    uint64_t dead_lettered[IB_DLQ_REASON_COUNT];
    int64_t gauges[IB_METRIC_GAUGE_COUNT];
    struct {
        uint64_t buckets[IB_METRICS_BUCKETS + 1];
        uint64_t count;
        double sum_seconds;
    } histograms[IB_METRIC_HISTOGRAM_COUNT];
} ib_metrics_snapshot;

/* Creates a registry with every value at zero and version "unknown".
 * Returns NULL when out of memory. Free with ib_metrics_free(). */
ib_metrics *ib_metrics_create(void);

/* Frees the registry. No-op on NULL. Stop the HTTP server that renders it
 * first. */
void ib_metrics_free(ib_metrics *m);

/* Sets the version label of ibus_build_info (copied; cut at 63 bytes).
 * Call once, before the registry is shared with other threads. */
void ib_metrics_set_version(ib_metrics *m, const char *version);

/* Adds `n` to a counter. Lock-free; no-op on a NULL registry or an unknown
 * counter, so call sites need no checks when metrics are off. */
void ib_metrics_add(ib_metrics *m, ib_metric_counter which, uint64_t n);

/* Counts one dead-lettered message under the label of its reason
 * (ib_dead_letter_reason_str); out-of-range values count as "other". */
void ib_metrics_dead_letter(ib_metrics *m, ib_dead_letter_reason reason);

/* Sets a gauge, or adds a (possibly negative) delta to it. Lock-free. */
void ib_metrics_gauge_set(ib_metrics *m, ib_metric_gauge which, int64_t value);
void ib_metrics_gauge_add(ib_metrics *m, ib_metric_gauge which, int64_t delta);

/* Records one observation of `seconds` into a histogram. Negative and NaN
 * values count as 0; values above a million seconds are clamped. The sum is
 * kept in integer nanoseconds, so it is exact and needs no lock. */
void ib_metrics_observe(ib_metrics *m, ib_metric_histogram which, double seconds);

/* Registers consumer identity `consumer` (copied): its
 * ibus_consumer_runs_total series, one per result, and its
 * ibus_consumer_handle_seconds histogram, all at 0 until counted. Returns
 * the consumer's slot, BORROWED from the registry and valid until
 * ib_metrics_free(): keep it per handler, so counting needs no lookup.
 * Registering a name again returns its slot. Call from one thread at a
 * time (registration compares names; rendering may run meanwhile). Returns
 * NULL on a NULL argument or when out of memory; the count and observe
 * calls below accept NULL as a no-op, so metrics simply stay off. */
ib_metrics_consumer *ib_metrics_consumer_add(ib_metrics *m, const char *consumer);

/* Counts one handler run of the consumer under `result`. Lock-free; no-op
 * on NULL or an unknown result. */
void ib_metrics_consumer_count(ib_metrics_consumer *c, ib_metric_result result);

/* Records one call's time in the consumer's ibus_consumer_handle_seconds,
 * as ib_metrics_observe() does (same buckets, same clamping). */
void ib_metrics_consumer_observe(ib_metrics_consumer *c, double seconds);

/* Status values of ib_metrics_consumer_http() for a request without a
 * response (the same numbers as the ABI's IB_HTTP_TIMEOUT, IB_HTTP_ERROR). */
#define IB_METRICS_HTTP_TIMEOUT (-1)
#define IB_METRICS_HTTP_ERROR (-2)
/* Slots of the per-consumer status counters: timeout, error, 100..599. */
#define IB_METRICS_HTTP_CODES 502

/* Counts one HTTP request a consumer's handler made:
 * ibus_http_requests_total{consumer,code} (code: the status 100..599,
 * "timeout" for IB_METRICS_HTTP_TIMEOUT, "error" for any other value), and
 * its time in ibus_http_request_seconds{consumer}. Both families are
 * rendered only for consumers that reported a request. Lock-free; no-op on
 * NULL. */
void ib_metrics_consumer_http(ib_metrics_consumer *c, int status, double seconds);

/* The count ib_metrics_consumer_http() keeps for `status` (as it maps
 * statuses); 0 for NULL. For tests. */
uint64_t ib_metrics_consumer_http_count(const ib_metrics_consumer *c, int status);

/* Circuit states as ibus_circuit_state renders them (the dispatch part's
 * numbering; the host checks that the two agree). */
typedef enum ib_metrics_circuit {
    IB_METRICS_CIRCUIT_CLOSED = 0,
    IB_METRICS_CIRCUIT_HALF_OPEN = 1,
    IB_METRICS_CIRCUIT_OPEN = 2,
    IB_METRICS_CIRCUIT_COUNT
} ib_metrics_circuit;

/* The consumer's circuit changed to `to`: sets ibus_circuit_state and
 * counts one ibus_circuit_transitions_total{to}. Every consumer renders
 * both from start-up (state 0, counts 0). Lock-free; no-op on NULL or an
 * unknown state. */
void ib_metrics_consumer_circuit(ib_metrics_consumer *c, ib_metrics_circuit to);

/* Counts `n` deliveries the consumer's open circuit sent back to wait
 * (ibus_circuit_waits_total), and one handler call that ran past the
 * handler timeout (ibus_handler_timeouts_total). Lock-free; no-op on NULL. */
void ib_metrics_consumer_waits(ib_metrics_consumer *c, uint64_t n);
void ib_metrics_consumer_timeout(ib_metrics_consumer *c);

/* Copies every value into `out`. Each value is read atomically; values are
 * not read at one instant, so a snapshot taken while other threads update
 * may mix slightly different moments (each counter is still monotonic). */
void ib_metrics_snapshot_get(const ib_metrics *m, ib_metrics_snapshot *out);

/* Renders every series in the Prometheus text exposition format 0.0.4.
 * On success *out is a NUL-terminated string the caller frees with free()
 * and *len its length. Within one histogram, _count always equals the +Inf
 * bucket. Errors: IB_ERR_INVALID_ARG (NULL argument), IB_ERR_NOMEM. */
ib_status ib_metrics_render(char **out, size_t *len, const ib_metrics *m, ib_error *err);

/* Health and metrics HTTP endpoint of a running host, on libmicrohttpd.
 *
 *   GET /healthz  200 "ok"            the process is alive and serving; 503
 *                 "not healthy: <reason>" when a liveness callback
 *                 (ib_http_set_live) says it is stuck
 *   GET /readyz   200 "ready" when ready(ctx) returns non-zero, else 503
 *                 "not ready: <reason>" with the reason the callback gave
 *   GET /metrics  200, Prometheus text format 0.0.4 of the registry
 *   other paths   404; methods other than GET and HEAD: 405
 *
 * One internal thread serves every request (a scrape is a short render);
 * connections are capped and idle ones time out, so a slow or hostile client
 * cannot tie up the process.
 */
typedef struct ib_http ib_http;

/* Readiness probe callback. Called on the server thread for each /readyz
 * request: must be thread-safe and must not block (read atomics). Returns
 * non-zero when ready; otherwise it may write why into `why` (cap bytes,
 * starts empty), which /readyz sends after "not ready: ". A liveness
 * callback (ib_http_set_live) has the same shape, for /healthz. */
typedef int (*ib_http_ready_fn)(void *ctx, char *why, size_t cap);

/* Starts serving on `addr`:
 *   "127.0.0.1:9090"  one IPv4 address
 *   "[::1]:9090"      one IPv6 address
 *   "localhost:9090"  same as 127.0.0.1
 *   ":9090"           every IPv4 interface (0.0.0.0); only for a pod or a
 *                     host whose firewall you control: /metrics is unauthenticated
 * Addresses are numeric (no DNS). Port 0 picks a free port: read it with
 * ib_http_port().
 * `m` (BORROWED; must outlive the server) may be NULL: /metrics then answers
 * 503. `ready` may be NULL: /readyz then always answers 200. Each scrape of
 * /metrics sets ibus_ready from the same `ready` first, so the gauge and
 * /readyz cannot disagree.
 * Errors: IB_ERR_CONFIG when `addr` is malformed ("HTTP address 'A': why"),
 * IB_ERR_IO when the socket cannot be bound (in use, not a local address),
 * IB_ERR_NOMEM. On error *out is NULL. Stop with ib_http_stop(). */
ib_status ib_http_start(ib_http **out, const char *addr, ib_metrics *m, ib_http_ready_fn ready,
                        void *ctx, ib_error *err);

/* The port the server listens on (the one picked when 0 was asked). */
uint16_t ib_http_port(const ib_http *h);

/* Makes /healthz ask `live(ctx, ...)` (same contract as a readiness
 * callback: thread-safe, non-blocking) and answer 503 "not healthy:
 * <why>" when it returns 0. Until it is set /healthz answers 200. Call it
 * once, from the thread that started the server, any time before
 * ib_http_stop(); `ctx` must outlive the server. No-op on NULL. */
void ib_http_set_live(ib_http *h, ib_http_ready_fn live, void *ctx);

/* Stops the server: waits for a request in progress to finish, closes the
 * socket and frees everything. No-op on NULL. After it returns, `ready` is
 * never called again. */
void ib_http_stop(ib_http *h);

#endif
