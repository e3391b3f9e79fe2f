/* SPDX-License-Identifier: Apache-2.0 */
/* ibus run: option table and translation into the host's configuration. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "host.h"
#include "input_check.h"
#include "log.h"
#include "nats_options.h"
#include "options.h"
#include "plugin_path.h"
#include "uuid.h"

#define MAX_BACKOFF 32

/* Everything `ibus run` parses: the host's configuration and the option
 * values that need checking or translating before they join it. */
typedef struct run_args {
    ib_host_config c;
    ib_strlist plugins, plugin_configs, consumer_names, backoff;
    const char *plugin_dir;
    char *plugin_paths; /* the resolved --plugin paths, PATH_MAX each; OWNED */
    const char *plugin_list[IB_HOST_MAX_PLUGINS + 1];
    const char *log_format, *log_level;
    const char *uuid_versions;
    bool any_uuid_version;
    const char *retention;
    int on_conflict; /* index into conflict_policies */
    int circuit;     /* index into CIRCUIT_CHOICES: 0 on, 1 off */
    int64_t failure_pct, min_events;
    int64_t backoff_ms[MAX_BACKOFF];
    bool help;
    ib_log_format lf;
    ib_log_sev ls;
} run_args;

/* --on-conflict values, in the order of the option's choices. */
static const ib_conflict_policy conflict_policies[] = {IB_CONFLICT_DEAD_LETTER, IB_CONFLICT_DROP,
                                                       IB_CONFLICT_LOG};
#define CONFLICT_CHOICES "dead-letter|drop|log"

/* The first part of `ibus run`'s table: connection, consumer, plugins,
 * recorder and what --create sets up. Writes into `opts`, returns the
 * count. */
static size_t run_options_setup(ib_opt *opts, run_args *a)
{
    ib_host_config *c = &a->c;
    const ib_opt table[] = {
        IB_NATS_OPTIONS(&c->nats),
        {"stream", IB_OPT_STRING, &c->stream, "NAME", "EVENTS", "JetStream stream", 0, 0},
        {"subject", IB_OPT_STRING, &c->subject, "SUBJECT", NULL,
         "filter subject of the consumer (when creating it)", 0, 0},
        {"durable", IB_OPT_STRING, &c->durable, "NAME", "ibus", "durable pull consumer name", 0, 0},
        {"plugin", IB_OPT_LIST, &a->plugins, "PATH|NAME", NULL,
         "handler plugin to load: a path (./audit.so), or a name (audit) in the plugin "
         "directory",
         0, 0},
        {"plugin-dir", IB_OPT_STRING, &a->plugin_dir, "DIR", NULL,
         "where --plugin NAME looks (default: lib/infinity-bus/plugins of this install)", 0, 0},
        {"plugin-config", IB_OPT_LIST, &a->plugin_configs, "NAME=STRING", NULL,
         "configuration string for plugin NAME (else IB_PLUGIN_CONFIG_<NAME>)", 0, 0},
        {"consumer-name", IB_OPT_LIST, &a->consumer_names, "PLUGIN/HANDLER=ID", NULL,
         "consumer identity of a handler (default <durable>/<plugin>/<handler>)", 0, 0},
        {"check", IB_OPT_FLAG, &c->check_only, NULL, NULL,
         "check the options, load the plugins, open an existing recorder and print each "
         "handler, its types and consumer identity; exit 0 or 2 without connecting to NATS",
         0, 0},
        {"allow-insecure-plugins", IB_OPT_FLAG, &c->allow_insecure_plugins, NULL, NULL,
         "load plugin files writable by others (development only)", 0, 0},
        {"recorder", IB_OPT_STRING, &c->recorder, "URI", "sqlite:processed.db",
         "marker store: sqlite:PATH (one host), kv:BUCKET (a replicated JetStream key-value "
         "bucket, for a fleet) or memory: (this process only)",
         0, 0},
        {"allow-insecure-db", IB_OPT_FLAG, &c->allow_insecure_db, NULL, NULL,
         "open a marker file (or one in a directory) of another user or writable by others "
         "(never a symlink)",
         0, 0},
        {"dead-letter", IB_OPT_STRING, &c->dead_letter, "SUBJECT", NULL,
         "dead-letter subject (default ibus.dlq.<durable>)", 0, 0},
        {"max-deliver", IB_OPT_INT, &c->max_deliver, "N", "5",
         "handler attempts per event and handler: a RETRY on attempt N dead-letters the event", 2,
         10000},
        {"ack-wait", IB_OPT_DURATION, &c->ack_wait_ms, "DURATION", "30s",
         "AckWait when creating the consumer", 100, 86400000},
        {"backoff", IB_OPT_LIST, &a->backoff, "DURATION", NULL,
         "consumer BackOff step when creating it", 0, 0},
        {"max-ack-pending", IB_OPT_INT, &c->max_ack_pending, "N", "1000",
         "MaxAckPending when creating the consumer", 1, 1000000},
        {"create", IB_OPT_FLAG, &c->create, NULL, NULL,
         "create the stream, dead-letter stream and consumer if missing", 0, 0},
        {"stream-subjects", IB_OPT_STRING, &c->stream_subjects, "SUBJECTS", "events.>",
         "subjects of a stream created by --create (comma-separated)", 0, 0},
        {"stream-replicas", IB_OPT_INT, &c->stream_replicas, "N", "1",
         "replicas of the event and dead-letter streams --create makes (3 on a cluster, so the "
         "stream survives a node)",
         1, 5},
        {"stream-max-age", IB_OPT_DURATION, &c->stream_max_age_ms, "DURATION", "7d",
         "MaxAge of the event stream --create makes: messages older than this are removed, and "
         "markers follow (--retention auto); 0 = keep for ever, and then nothing is pruned",
         0, 0},
        {"stream-max-bytes", IB_OPT_INT, &c->stream_max_bytes, "BYTES", "0",
         "MaxBytes of the event stream --create makes, oldest removed first (0 = unlimited)", 0,
         INT64_MAX},
        {"dead-letter-max-age", IB_OPT_DURATION, &c->dead_letter_max_age_ms, "DURATION", "30d",
         "MaxAge of the dead-letter stream --create makes (0 = keep for ever)", 0, 0},
        {"dead-letter-max-bytes", IB_OPT_INT, &c->dead_letter_max_bytes, "BYTES", "1073741824",
         "MaxBytes of the dead-letter stream --create makes; when full it refuses new dead "
         "letters, whose originals are then nak'ed and kept (0 = unlimited)",
         0, INT64_MAX},
    };
    /* three eighths, three eighths and a quarter: the three parts fill at most the room */
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS * 3 / 8,
                   "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* The rest: batching, retries, timeouts, ops and retention. */
static size_t run_options_flow(ib_opt *opts, run_args *a)
{
    ib_host_config *c = &a->c;
    const ib_opt table[] = {
        {"batch", IB_OPT_INT, &c->batch, "N", "64", "messages per pull (and per group commit)", 1,
         4096},
        {"flush-interval", IB_OPT_DURATION, &c->flush_ms, "DURATION", "5ms",
         "longest wait for more messages of a batch once one arrived", 1, 10000},
        {"commit-interval", IB_OPT_DURATION, &c->commit_interval_ms, "DURATION", "2ms",
         "longest a finished handler's mark waits to share a commit (0 = commit each); a kill -9 "
         "repeats at most the handlers running plus those finished within this window",
         0, 10000},
        {"pull-expires", IB_OPT_DURATION, &c->pull_expires_ms, "DURATION", "1s",
         "lifetime of one pull request", 10, 60000},
        {"concurrency", IB_OPT_INT, &c->concurrency, "N", "1", "handler threads", 1, 1024},
        {"retry-delay", IB_OPT_DURATION, &c->retry_base_ms, "DURATION", "1s",
         "first delay after RETRY; doubles per delivery", 1, 3600000},
        {"retry-max-delay", IB_OPT_DURATION, &c->retry_max_ms, "DURATION", "1m",
         "longest delay after RETRY", 1, 86400000},
        {"drain-timeout", IB_OPT_DURATION, &c->drain_timeout_ms, "DURATION", "25s",
         "deadline for finishing in-flight handlers after SIGTERM", 0, 3600000},
        {"idle-exit", IB_OPT_DURATION, &c->idle_exit_ms, "DURATION", "0",
         "exit after this long without messages (0 = never), once the retries this process "
         "asked for came back (those due within the longer of this and 1m): 0, or 1 when it "
         "leaves events unmarked; exit 1 when the first connect to NATS takes this long",
         0, 86400000},
        {"connect-timeout", IB_OPT_DURATION, &c->connect_timeout_ms, "DURATION", "0",
         "exit 1 when the first connect to NATS takes this long (0 = retry for ever, or until "
         "--idle-exit)",
         0, 86400000},
        {"http", IB_OPT_STRING, &c->http, "ADDR", NULL,
         "serve /healthz, /readyz, /metrics on ADDR (host:port)", 0, 0},
        {"log-format", IB_OPT_STRING, &a->log_format, "json|text", "auto",
         "log format (auto: json unless stderr is a terminal)", 0, 0},
        {"log-level", IB_OPT_STRING, &a->log_level, "LEVEL", "info", "debug, info, warn or error",
         0, 0},
        {"uuid-versions", IB_OPT_STRING, &a->uuid_versions, "LIST", "4,8",
         "UUID versions of the event ids accepted, 1-8 separated by commas, or any: 4 are "
         "random ids, 8 the ids publish --key and ib_event_id_derive derive from a key; add 7 for "
         "uuid7 producers; others are dead-lettered as invalid-id",
         0, 0},
        {"any-uuid-version", IB_OPT_FLAG, &a->any_uuid_version, NULL, NULL,
         "accept event ids of any UUID version (the same as --uuid-versions any)", 0, 0},
        {"max-event-bytes", IB_OPT_INT, &c->max_event_bytes, "BYTES", "1048576",
         "largest accepted message", 64, 67108864},
        {"publish-prefix", IB_OPT_STRING, &c->publish_prefix, "PREFIX", "events",
         "subject prefix for events handlers publish (<prefix>.<type>)", 0, 0},
        {"summary-file", IB_OPT_STRING, &c->summary_file, "FILE", NULL,
         "append a JSON line of totals at exit", 0, 0},
        {"on-conflict", IB_OPT_CHOICE, &a->on_conflict, CONFLICT_CHOICES, "dead-letter",
         "an id reused for another payload: dead-letter, drop, or log and drop", 0, 0},
        {"retention", IB_OPT_STRING, &a->retention, "DURATION", "auto",
         "prune markers older than this in the background: auto follows the stream's MaxAge "
         "(never without one, or with kv:, whose bucket TTL prunes); 0 = never; a duration is "
         "refused below the time the stream can still deliver a message",
         0, 0},
        {"retention-unsafe", IB_OPT_FLAG, &c->retention_unsafe, NULL, NULL,
         "start with a --retention below that time (with a warning)", 0, 0},
        {"trace-start", IB_OPT_FLAG, &c->trace_start, NULL, NULL,
         "start a W3C trace (a fresh traceparent) for each message that carries none", 0, 0},
    };
    /* three eighths, three eighths and a quarter: the three parts fill at most the room */
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS * 3 / 8,
                   "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

#define CIRCUIT_CHOICES "on|off"

/* Outages downstream and stuck handlers (docs/outages.md). */
static size_t run_options_outage(ib_opt *opts, run_args *a)
{
    ib_host_config *c = &a->c;
    const ib_opt table[] = {
        {"circuit", IB_OPT_CHOICE, &a->circuit, CIRCUIT_CHOICES, "on",
         "a circuit per handler: when its calls fail together (its downstream is down) it stops "
         "running that handler, whose deliveries wait without spending attempts (never "
         "dead-lettered for the outage), and one probe at a growing interval closes it again",
         0, 0},
        {"circuit-window", IB_OPT_DURATION, &c->circuit.window_ms, "DURATION", "30s",
         "the calls a circuit judges: its handler's calls of the last DURATION (the last 100 at "
         "most)",
         1000, 3600000},
        {"circuit-failure-rate", IB_OPT_INT, &a->failure_pct, "PERCENT", "50",
         "a circuit opens when at least this share of the window's calls failed (RETRY, a "
         "timeout, no connection), counted once it holds 30 calls, or when its last 10 calls "
         "failed...",
         1, 100},
        {"circuit-min-events", IB_OPT_INT, &a->min_events, "N", "3",
         "...and those failures came from at least N distinct events, so one or two poison "
         "events never open it (they are dead-lettered after --max-deliver attempts)",
         1, 100},
        {"circuit-probe-max", IB_OPT_DURATION, &c->circuit.probe_max_ms, "DURATION", "5s",
         "longest interval between two probes of an open circuit (the first comes 1s after it "
         "opened, then doubling): a downstream's return is noticed within it",
         1000, 3600000},
        {"handler-timeout", IB_OPT_DURATION, &c->handler_timeout_ms, "DURATION", "1m",
         "a handler call running longer is logged, counted and fails /healthz (and stops "
         "systemd's watchdog pings) until it returns, so the supervisor restarts the process "
         "(0 = never)",
         0, 86400000},
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS / 8, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* A partitioned consumer (docs/partitions.md). */
static size_t run_options_partitions(ib_opt *opts, run_args *a)
{
    ib_host_config *c = &a->c;
    const ib_opt table[] = {
        {"partitions", IB_OPT_INT, &c->partitions, "N", "0",
         "consume the N partitions of the stream's events, published to "
         "<--subject>.<partition>.<key> (ibus publish --partitions N): each partition is owned "
         "by one live process at a time, its events are handled in stream order, and its "
         "markers are kept in the consumer's partition log, not in --recorder (0 = not "
         "partitioned)",
         0, 4096},
        {"partition-lease", IB_OPT_DURATION, &c->partition_lease_ms, "DURATION", "15s",
         "how long a partition's owner holds it without renewing (every third of it): a "
         "process that dies gives its partitions up after this; it starts no handler of a "
         "partition once a quarter of the lease (1s at least) is left unrenewed",
         3000, 600000},
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS / 8, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* Writes the option table of `ibus run` into `opts` (room for
 * IB_CMD_MAX_OPTIONS), its targets inside `targets` (a run_args), and
 * returns its length. */
static size_t run_options(ib_opt *opts, void *targets)
{
    run_args *a = targets;
    size_t n = run_options_setup(opts, a);
    n += run_options_flow(opts + n, a);
    n += run_options_outage(opts + n, a);
    n += run_options_partitions(opts + n, a);
    return n;
}

/* Names, subjects and identities that JetStream or a header would misread
 * (input_check.h). -1 after saying why, naming the option. */
static int check_names(const run_args *a)
{
    const ib_host_config *c = &a->c;
    /* empty means "none" (no filter) and "the default" (dead letters) */
    const char *subject = ib_cli_given(c->subject), *dlq = ib_cli_given(c->dead_letter);
    if (ib_cli_check_name("run", "--stream", c->stream) != 0 ||
        ib_cli_check_name("run", "--durable", c->durable) != 0 ||
        ib_cli_check_subject("run", "--subject", subject, IB_SUBJECT_WILDCARDS) != 0 ||
        ib_cli_check_subject("run", "--dead-letter", dlq, IB_SUBJECT_NOT_SYSTEM) != 0 ||
        ib_cli_check_subject("run", "--publish-prefix", c->publish_prefix, IB_SUBJECT_NOT_SYSTEM) !=
            0 ||
        ib_cli_check_subject_list("run", "--stream-subjects", c->stream_subjects) != 0)
        return -1;
    for (size_t i = 0; i < a->consumer_names.count; i++)
        if (ib_cli_check_text("run", "--consumer-name", a->consumer_names.items[i]) != 0)
            return -1;
    return 0;
}

/* --uuid-versions (and --any-uuid-version, its older spelling for "any")
 * into the host's version set. 0, or -1 after saying why. */
static int check_uuid_versions(run_args *a)
{
    unsigned set = 0;
    if (ib_id_versions_parse(&set, a->uuid_versions) != 0) {
        fprintf(stderr,
                "ibus run: --uuid-versions: expected UUID versions 1-8 separated by commas "
                "(4,8) or any, got '%s'\n",
                a->uuid_versions);
        return -1;
    }
    if (a->any_uuid_version && set != IB_ID_VERSIONS_DEFAULT_SET && set != IB_ID_ANY_VERSION) {
        fprintf(stderr, "ibus run: --any-uuid-version: accepts any version, which contradicts "
                        "--uuid-versions; give one of them\n");
        return -1;
    }
    a->c.uuid_versions = a->any_uuid_version ? IB_ID_ANY_VERSION : set;
    return 0;
}

/* --retention: auto, or a duration (0 = never). A kv: recorder cannot
 * prune: its bucket's TTL does. 0, or -1 after saying why. */
static int check_retention(run_args *a)
{
    int64_t ms = 0;
    if (strcmp(a->retention, "auto") == 0) {
        a->c.retention_ms = IB_HOST_RETENTION_AUTO;
        return 0;
    }
    if (ib_parse_duration_ms(&ms, a->retention) != 0) {
        fprintf(stderr,
                "ibus run: --retention: expected auto or a duration (30d; 0 = never), "
                "got '%s'\n",
                a->retention);
        return -1;
    }
    if (ms > 0 && a->c.recorder != NULL && strncmp(a->c.recorder, "kv:", 3) == 0) {
        fprintf(stderr, "ibus run: --retention: a kv: recorder cannot prune; its bucket's TTL "
                        "removes old markers (set it when creating the bucket)\n");
        return -1;
    }
    a->c.retention_ms = ms;
    return 0;
}

/* --partitions: the base subject is --subject, the markers the partition
 * log's. 0, or -1 after saying why. */
static int check_partitions(run_args *a)
{
    const ib_host_config *c = &a->c;
    if (c->partitions == 0)
        return 0;
    const char *base = ib_cli_given(c->subject);
    if (base == NULL || strchr(base, '*') != NULL || strchr(base, '>') != NULL) {
        fprintf(stderr, "ibus run: --partitions: give --subject, the base of the partition "
                        "subjects (<base>.<partition>.<key>), without wildcards\n");
        return -1;
    }
    if (c->recorder != NULL && strcmp(c->recorder, "sqlite:processed.db") != 0) {
        fprintf(stderr, "ibus run: --partitions: a partitioned consumer keeps its markers in "
                        "its partition log; drop --recorder\n");
        return -1;
    }
    return 0;
}

/* Resolves every --plugin into a path (a name is looked up in the plugin
 * directory) and points the host's list at them. 0, or -1 after saying
 * why. */
static int resolve_plugins(run_args *a)
{
    char dir[PATH_MAX], why[PATH_MAX + 400];
    if (a->plugin_dir == NULL || a->plugin_dir[0] == '\0')
        a->plugin_dir = ib_cli_plugin_dir(dir, sizeof(dir));
    a->plugin_paths = malloc(a->plugins.count * PATH_MAX);
    if (a->plugin_paths == NULL) {
        fprintf(stderr, "ibus run: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < a->plugins.count; i++) {
        char *out = a->plugin_paths + i * PATH_MAX;
        if (ib_cli_plugin_resolve(out, PATH_MAX, a->plugins.items[i], a->plugin_dir, why,
                                  sizeof(why)) != 0) {
            fprintf(stderr, "ibus run: %s\n", why);
            return -1;
        }
        a->plugin_list[i] = out;
    }
    a->plugin_list[a->plugins.count] = NULL;
    a->c.plugins = a->plugin_list;
    return 0;
}

/* Checks what the option table cannot: log settings, the plugin list and
 * the relations between options. Prints the reason and returns -1 on the
 * first problem, else 0 with the log settings and back-off steps
 * translated into `a`. */
static int check_args(run_args *a)
{
    char why[640];
    if (ib_cli_nats_check(&a->c.nats, why, sizeof(why)) != 0) {
        fprintf(stderr, "ibus run: %s\n", why);
        return -1;
    }
    if (check_names(a) != 0)
        return -1;
    if (ib_log_format_parse(&a->lf, a->log_format) != 0) {
        fprintf(stderr, "ibus run: --log-format: expected json, text or auto, got '%s'\n",
                a->log_format);
        return -1;
    }
    if (ib_log_sev_parse(&a->ls, a->log_level) != 0) {
        fprintf(stderr, "ibus run: --log-level: expected debug, info, warn or error, got '%s'\n",
                a->log_level);
        return -1;
    }
    if (a->plugins.count == 0 || a->plugins.count > IB_HOST_MAX_PLUGINS) {
        fprintf(stderr, "ibus run: --plugin: give 1 to %d plugins, got %zu\n", IB_HOST_MAX_PLUGINS,
                a->plugins.count);
        return -1;
    }
    if (check_uuid_versions(a) != 0 || check_retention(a) != 0 || resolve_plugins(a) != 0)
        return -1;
    if (check_partitions(a) != 0)
        return -1;
    if (a->c.retry_max_ms < a->c.retry_base_ms) {
        fprintf(stderr, "ibus run: --retry-max-delay: must not be below --retry-delay\n");
        return -1;
    }
    for (size_t i = 0; i < a->backoff.count; i++) {
        if (i == MAX_BACKOFF || ib_parse_duration_ms(&a->backoff_ms[i], a->backoff.items[i]) != 0) {
            fprintf(stderr, "ibus run: --backoff: '%s' is not a duration (at most %d steps)\n",
                    a->backoff.items[i], MAX_BACKOFF);
            return -1;
        }
    }
    if (a->backoff.count > (size_t)a->c.max_deliver) {
        fprintf(stderr, "ibus run: --backoff: more steps than --max-deliver\n");
        return -1;
    }
    return 0;
}

/* ibus run: parse, check, configure logging, then hand over to the host.
 * Returns the host's exit code, 0 for --help, 2 for bad options. */
int ib_cmd_run(int argc, char **argv)
{
    run_args a;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    ib_error e;
    int code = 2;

    memset(&a, 0, sizeof(a));
    const size_t n = run_options(opts, &a);
    if (ib_opts_parse(opts, n, argc, argv, NULL, &a.help, &e) != IB_OK) {
        fprintf(stderr, "ibus run: %s\n", e.msg);
        goto out;
    }
    if (a.help) {
        ib_cmd_usage(stdout, &ib_cmd_run_desc, opts, n);
        code = 0;
        goto out;
    }
    if (check_args(&a) != 0)
        goto out;
    ib_log_configure(a.lf, a.ls, NULL);
    a.c.plugin_configs = a.plugin_configs.items;
    a.c.consumer_names = a.consumer_names.items;
    a.c.backoff_ms = a.backoff_ms;
    a.c.backoff_len = a.backoff.count;
    a.c.nats.name = a.c.durable;
    a.c.on_conflict = conflict_policies[a.on_conflict];
    a.c.circuit.enabled = a.circuit == 0;
    a.c.circuit.failure_pct = (unsigned)a.failure_pct;
    a.c.circuit.min_events = (unsigned)a.min_events;
    a.c.circuit.probe_min_ms = IB_CIRCUIT_DEFAULT_PROBE_MIN_MS;
    code = ib_host_run(&a.c);
out:
    free(a.plugin_paths);
    ib_opts_release(opts, n);
    return code;
}

const ib_cmd_desc ib_cmd_run_desc = {
    .name = "run",
    .synopsis = "[options]",
    .summary = "consume a JetStream durable and run handler plugins once per event",
    .description =
        "Consume events from a JetStream durable pull consumer and run each subscribed handler "
        "once. An event whose marker says a handler already handled it is acked without running "
        "that handler again; a handler's RETRY is retried with a growing delay, and an event is "
        "dead-lettered after --max-deliver handler attempts, when a handler rejects it, or when "
        "it is not a valid Event. When a handler's calls fail together (its downstream is "
        "down), its circuit opens: the handler is not run, its events wait without spending "
        "attempts, and one probe at a growing interval (1s, doubling to --circuit-probe-max) "
        "lets them through again once the downstream is back.",
    .options = run_options,
    .targets_size = sizeof(run_args),
    .main = ib_cmd_run,
};
