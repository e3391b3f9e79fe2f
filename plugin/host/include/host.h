/* SPDX-License-Identifier: Apache-2.0 */
/* `ibus run`: the subscriber host.
 *
 * Connects to NATS, binds the durable pull consumer, loads the plugins,
 * then loops: pull a batch, decode and validate each message, run the batch
 * through the idempotent core (dispatch.h: claim, handle, group-commit the
 * marks), and ack each message once its marks are durable, nak it with
 * back-off, or dead-letter it.
 * SIGTERM/SIGINT stop the pulling, let the batch in flight finish (its marks
 * are durable before its acks), nak what arrived too late, flush and exit 0
 * within the drain deadline. */
#ifndef IB_HOST_H
#define IB_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"
#include "error.h"
#include "jetstream.h"
#include "loader.h"
#include "log.h"

/* How many plugins one host loads at most. */
#define IB_HOST_MAX_PLUGINS 64

typedef struct ib_host_config {
    ib_nats_config nats;
    const char *stream;
    const char *subject; /* consumer filter subject (when creating); may be NULL */
    const char *durable;
    const char *const *plugins;        /* NULL-terminated paths */
    const char *const *plugin_configs; /* NULL-terminated "NAME=STRING" */
    const char *const *consumer_names; /* NULL-terminated "plugin/handler=IDENTITY" */
    bool allow_insecure_plugins;
    const char *recorder;    /* URI */
    const char *dead_letter; /* NULL = "ibus.dlq.<durable>" */
    int64_t max_deliver;     /* used when creating, and when the consumer has none */
    int64_t ack_wait_ms;     /* used when creating */
    const int64_t *backoff_ms;
    size_t backoff_len;
    int64_t max_ack_pending;
    bool create;
    const char *stream_subjects;
    int64_t stream_replicas; /* replicas of the streams --create makes */
    int64_t batch;
    int64_t flush_ms;
    int64_t pull_expires_ms;
    int64_t concurrency;
    int64_t retry_base_ms;
    int64_t retry_max_ms;
    int64_t drain_timeout_ms;
    int64_t idle_exit_ms; /* 0 = never */
    /* How long the first connect may take before the run ends (exit 1);
     * 0 = idle_exit_ms when set, else wait for ever. */
    int64_t connect_timeout_ms;
    const char *http;       /* NULL = no HTTP server */
    unsigned uuid_versions; /* event id versions accepted (IB_ID_VERSION bits); 0 = 4 and 8 */
    int64_t max_event_bytes;
    const char *publish_prefix; /* subject prefix for events handlers publish */
    const char *summary_file;   /* append a JSON summary line at exit; may be NULL */
    /* sqlite recorder: accept a marker file of another owner or writable by
     * group or others (never a symbolic link) */
    bool allow_insecure_db;
    int64_t commit_interval_ms; /* group-commit window of finished handlers; 0 = each */
    /* what becomes of an event whose id is marked with another payload */
    ib_conflict_policy on_conflict;
    /* Prune markers older than this in the background; 0 = never. Refused
     * (exit 2) when shorter than the time the stream can still deliver a
     * message (ib_host_retention_floor_ms), unless retention_unsafe.
     * IB_HOST_RETENTION_AUTO: that floor itself, read at start-up (the
     * stream's MaxAge); nothing when the stream has no MaxAge or the
     * recorder prunes by itself (kv:, its bucket's TTL). */
    int64_t retention_ms;
    bool retention_unsafe; /* start anyway, with a warning */
    /* Check and exit (ibus run --check): load the plugins, open the
     * recorder if its file exists (never creating it), print every handler
     * with its types and consumer identity on stdout, and return 0 or 2
     * without connecting to NATS. */
    bool check_only;
    /* --create: MaxAge and MaxBytes of a stream it creates; 0 = none */
    int64_t stream_max_age_ms;
    int64_t stream_max_bytes;
    /* Start a W3C trace (a fresh traceparent) for a message that carries
     * none; without it such a message has no trace (trace.h). */
    bool trace_start;
    /* --create: MaxAge and MaxBytes of the dead-letter stream it creates;
     * 0 = none. At MaxBytes it refuses new dead letters (DiscardNew): the
     * original is then nak'ed and kept, never a dead letter dropped */
    int64_t dead_letter_max_age_ms;
    int64_t dead_letter_max_bytes;
    /* The circuit per handler (dispatch.h, "Circuits"); zeroed = off. */
    ib_circuit_options circuit;
    /* A handler call running longer than this is logged, counted and
     * fails /healthz (and stops systemd's watchdog pings) until it
     * returns; 0 = never. */
    int64_t handler_timeout_ms;
    /* A partitioned consumer (docs/partitions.md): `subject` is the base of
     * "<base>.<partition>.<key>", each partition is owned by one process at
     * a time by a lease of partition_lease_ms, and the markers live in the
     * partition log (the recorder URI is not used). 0 = not partitioned. */
    int64_t partitions;
    int64_t partition_lease_ms;
} ib_host_config;

/* The server objects of a partitioned consumer, all named after its
 * durable (docs/partitions.md); ibus run, ibus status and ibus markers
 * build them here, and nowhere else. */
typedef struct ib_host_partition_names {
    char bucket[300];     /* leases and members: "ibus_fleet_<durable>" */
    char log_stream[300]; /* the marker log: "IBUS_MARKERS_<durable>" */
    char log_base[300];   /* its subjects, "<log_base>.<P>": "ibus.markers.<durable>" */
} ib_host_partition_names;

/* Fills `out` with the names of `durable`'s objects (cut at their size). */
void ib_host_partition_names_make(ib_host_partition_names *out, const char *durable);

/* Writes the durable of partition `p` of `durable`, "<durable>_p<P>", into
 * `out` (cap bytes, cut when too small). */
void ib_host_partition_durable(char *out, size_t cap, const char *durable, uint32_t p);

/* ib_host_config.retention_ms: follow the floor (see there). */
#define IB_HOST_RETENTION_AUTO (-1)

/* Runs the host until a signal, an idle exit or a fatal error. Returns the
 * process exit status: 0 clean stop, 1 runtime failure, 2 bad
 * configuration (a message naming the option has been logged). */
int ib_host_run(const ib_host_config *config);

/* Builds the line `ibus run` appends to --summary-file at exit: one JSON
 * object, {"pid":..,"durable":"..","exit":..} followed by `fields` (the
 * `n` counters of the "stopped" record, BORROWED), in that order, and a
 * newline. Written with jansson: any durable name gives valid JSON (quotes
 * and backslashes escaped, invalid UTF-8 as U+FFFD; NULL is null), and
 * numbers stay JSON numbers (a u64 beyond INT64_MAX becomes a real).
 * Returns a malloc'd string the caller frees, or NULL when out of memory
 * or a field has no key. Pure. */
char *ib_host_summary_line(long pid, const char *durable, int exit_code, const ib_log_field *fields,
                           size_t n);

/* Rewrites a library error for the ibus command: the loader and the
 * recorder name their opt-outs as settings ("allow insecure plugin
 * files", "allow an insecure marker file"), which becomes the flag that
 * sets them ("pass --allow-insecure-plugins", "pass --allow-insecure-db").
 * Writes the result into `buf` (cap bytes, cut when too small) and returns
 * it; other messages are copied as they are. */
char *ib_host_flag_hint(char *buf, size_t cap, const char *msg);

/* Retention: how long a marker must outlive its event.
 *
 * A marker may only be pruned once its event can no longer be delivered.
 * Two things bound that time: the redelivery horizon of the consumer
 * (every delivery but the last may wait out AckWait and then the longest
 * of a BackOff step or ibus's own nak delay; unbounded without MaxDeliver,
 * which is how ibus creates its consumers), and the stream's MaxAge, which
 * bounds everything: a message it removed cannot be delivered again, and
 * every marker is younger than its message. Without MaxAge a message stays
 * deliverable for ever (a recreated consumer reads it again): no bound. */

/* A duration that has no bound. */
#define IB_HOST_UNBOUNDED INT64_MAX

/* The settings that bound redelivery, as the server has them. */
typedef struct ib_delivery_window {
    int64_t max_age_ms;     /* stream MaxAge; 0 = messages never age out */
    int64_t ack_wait_ms;    /* consumer AckWait */
    int64_t max_deliver;    /* consumer MaxDeliver; <= 0 = unlimited */
    int64_t backoff_max_ms; /* longest consumer BackOff step; 0 = none */
    int64_t nak_max_ms;     /* ibus's longest nak delay (the retry max delay) */
    bool no_consumer;       /* no consumer named: the horizon is left out (0) */
} ib_delivery_window;

/* The longest time after a delivery at which the consumer may deliver the
 * message again: (max_deliver - 1) * (ack_wait + max(backoff max, nak
 * max)); 0 for one delivery or no consumer; IB_HOST_UNBOUNDED without a
 * MaxDeliver. Saturates instead of overflowing. Pure. */
int64_t ib_host_redelivery_horizon_ms(const ib_delivery_window *w);

/* The shortest safe retention: the stream's MaxAge, which also cuts short
 * any longer redelivery horizon; IB_HOST_UNBOUNDED without MaxAge. Pure. */
int64_t ib_host_retention_floor_ms(const ib_delivery_window *w);

/* The retention ibus run prunes with, given its setting `retention_ms`
 * (ib_host_config.retention_ms): a duration as it is, and for
 * IB_HOST_RETENTION_AUTO the floor of `w` (the stream's MaxAge), or 0 (no
 * pruning) when there is none, when `w` is NULL, or when the recorder of
 * kind `recorder_kind` ("kv"; NULL = not known) prunes by itself. 0 means
 * markers are kept for ever. Pure: `ibus status` shows what a run uses. */
int64_t ib_host_retention_effective_ms(int64_t retention_ms, const ib_delivery_window *w,
                                       const char *recorder_kind);

/* Writes a duration as an operator reads it ("1h", "5m30s", "250ms",
 * "0s"; "unbounded" for IB_HOST_UNBOUNDED) into `buf` and returns it. */
const char *ib_host_duration_str(char *buf, size_t cap, int64_t ms);

/* Writes why `retention_ms` is unsafe for `w` on `stream`, with both
 * figures: "<what> 10m is shorter than the 1h a message can still be
 * delivered (stream ORDERS MaxAge 1h; redelivery horizon 5m30s)". `what`
 * names the setting for the reader (an option, say). Returns `buf`. */
const char *ib_host_retention_explain(char *buf, size_t cap, const char *what, int64_t retention_ms,
                                      const ib_delivery_window *w, const char *stream);

/* Consumer identities. A handler's markers are kept under
 * "<durable>/<plugin>/<handler>" unless an override "plugin/handler=IDENTITY"
 * (the CLI's repeatable option) names it; overrides keep a handler's
 * markers when a plugin or durable is renamed. Deciding this is host
 * policy: the loader only hands the handlers out. */

/* Adds every handler of the initialised plugin `p` to `d` (each subscribed
 * to its event types) under its consumer identity, built from `durable`
 * and `overrides` (NULL-terminated; NULL for none; entries naming other
 * plugins are ignored). The dispatch table borrows the plugin's functions
 * and state: free `d` before closing `p`. Errors: IB_ERR_INVALID_ARG for a
 * NULL plugin or dispatch, a plugin not yet initialised or no durable;
 * IB_ERR_CONFIG for an identity longer than IB_CONSUMER_MAX or one that
 * another handler already uses (ib_dispatch_add). Handlers added before a
 * failure stay in `d`, so treat a failure as fatal for `d`. */
ib_status ib_host_plugin_register(ib_plugin *p, ib_dispatch *d, const char *durable,
                                  const char *const *overrides, ib_error *err);

/* Describes handler `i` of the loaded plugin `p` for a person, in one line
 * "plugin/handler types=T1,T2 consumer=IDENTITY", with the identity
 * ib_host_plugin_register would give it. Writes into `buf` (cap bytes,
 * cut when too small) and returns it; "" for an index out of range. */
char *ib_host_handler_describe(char *buf, size_t cap, const ib_plugin *p, size_t i,
                               const char *durable, const char *const *overrides);

/* Writes the consumer identity ib_host_plugin_register gives handler `i`
 * of the loaded plugin `p` into `consumer` (IB_CONSUMER_MAX + 2 bytes).
 * Returns its length: 0 for an index out of range, above IB_CONSUMER_MAX
 * when too long (registration refuses it). */
int ib_host_handler_identity(char *consumer, const ib_plugin *p, size_t i, const char *durable,
                             const char *const *overrides);

/* Checks consumer identity overrides before registration: each entry of
 * `overrides` (NULL-terminated; may be NULL) must read
 * "plugin/handler=IDENTITY" with a non-empty IDENTITY of at most
 * IB_CONSUMER_MAX bytes, name a handler of one of the `n` loaded `plugins`,
 * and appear once. Catches a mistyped override, which would otherwise
 * silently give a handler a fresh identity and re-run every event.
 * Errors: IB_ERR_CONFIG naming the entry and the reason. */
ib_status ib_host_overrides_check(const char *const *overrides, ib_plugin *const *plugins, size_t n,
                                  ib_error *err);

#endif
