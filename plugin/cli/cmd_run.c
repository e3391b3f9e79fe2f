/* ibus run: option table and translation into the host's configuration. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "host.h"
#include "log.h"
#include "nats_options.h"
#include "options.h"

#define MAX_BACKOFF 32

int ib_cmd_run(int argc, char **argv)
{
    ib_host_config c;
    ib_strlist plugins, plugin_configs, consumer_names, backoff;
    const char *log_format = NULL, *log_level = NULL;
    int64_t backoff_ms[MAX_BACKOFF];
    bool help = false;
    ib_error e;

    memset(&c, 0, sizeof(c));
    memset(&plugins, 0, sizeof(plugins));
    memset(&plugin_configs, 0, sizeof(plugin_configs));
    memset(&consumer_names, 0, sizeof(consumer_names));
    memset(&backoff, 0, sizeof(backoff));
    const ib_opt opts[] = {
        IB_NATS_OPTIONS(&c.nats),
        {"stream", IB_OPT_STRING, &c.stream, "NAME", "EVENTS", "JetStream stream", 0, 0},
        {"subject", IB_OPT_STRING, &c.subject, "SUBJECT", NULL,
         "filter subject of the consumer (when creating it)", 0, 0},
        {"durable", IB_OPT_STRING, &c.durable, "NAME", "ibus", "durable pull consumer name", 0, 0},
        {"plugin", IB_OPT_LIST, &plugins, "PATH", NULL, "handler plugin (.so) to load", 0, 0},
        {"plugin-config", IB_OPT_LIST, &plugin_configs, "NAME=STRING", NULL,
         "configuration string for plugin NAME (else IB_PLUGIN_CONFIG_<NAME>)", 0, 0},
        {"consumer-name", IB_OPT_LIST, &consumer_names, "PLUGIN/HANDLER=ID", NULL,
         "consumer identity of a handler (default <durable>/<plugin>/<handler>)", 0, 0},
        {"allow-insecure-plugins", IB_OPT_FLAG, &c.allow_insecure_plugins, NULL, NULL,
         "load plugin files writable by others (development only)", 0, 0},
        {"recorder", IB_OPT_STRING, &c.recorder, "URI", "sqlite:processed.db",
         "marker store: memory:, sqlite:PATH", 0, 0},
        {"allow-insecure-db", IB_OPT_FLAG, &c.allow_insecure_db, NULL, NULL,
         "open a marker file of another user or writable by others (never a symlink)", 0, 0},
        {"dead-letter", IB_OPT_STRING, &c.dead_letter, "SUBJECT", NULL,
         "dead-letter subject (default ibus.dlq.<durable>)", 0, 0},
        {"max-deliver", IB_OPT_INT, &c.max_deliver, "N", "5",
         "the delivery on which an event is dead-lettered instead of handled", 2, 10000},
        {"ack-wait", IB_OPT_DURATION, &c.ack_wait_ms, "DURATION", "30s",
         "AckWait when creating the consumer", 100, 86400000},
        {"backoff", IB_OPT_LIST, &backoff, "DURATION", NULL,
         "consumer BackOff step when creating it", 0, 0},
        {"max-ack-pending", IB_OPT_INT, &c.max_ack_pending, "N", "1000",
         "MaxAckPending when creating the consumer", 1, 1000000},
        {"create", IB_OPT_FLAG, &c.create, NULL, NULL,
         "create the stream, dead-letter stream and consumer if missing", 0, 0},
        {"stream-subjects", IB_OPT_STRING, &c.stream_subjects, "SUBJECTS", "events.>",
         "subjects of a stream created by --create (comma-separated)", 0, 0},
        {"batch", IB_OPT_INT, &c.batch, "N", "64", "messages per pull (and per group commit)", 1,
         4096},
        {"flush-interval", IB_OPT_DURATION, &c.flush_ms, "DURATION", "5ms",
         "longest wait for more messages of a batch once one arrived", 1, 10000},
        {"commit-interval", IB_OPT_DURATION, &c.commit_interval_ms, "DURATION", "2ms",
         "longest a finished handler's mark waits to share a commit (0 = commit each); a kill -9 "
         "repeats at most the handlers running plus those finished within this window",
         0, 10000},
        {"pull-expires", IB_OPT_DURATION, &c.pull_expires_ms, "DURATION", "1s",
         "lifetime of one pull request", 10, 60000},
        {"concurrency", IB_OPT_INT, &c.concurrency, "N", "1", "handler threads", 1, 1024},
        {"retry-delay", IB_OPT_DURATION, &c.retry_base_ms, "DURATION", "1s",
         "first delay after RETRY; doubles per delivery", 1, 3600000},
        {"retry-max-delay", IB_OPT_DURATION, &c.retry_max_ms, "DURATION", "1m",
         "longest delay after RETRY", 1, 86400000},
        {"drain-timeout", IB_OPT_DURATION, &c.drain_timeout_ms, "DURATION", "25s",
         "deadline for finishing in-flight handlers after SIGTERM", 0, 3600000},
        {"idle-exit", IB_OPT_DURATION, &c.idle_exit_ms, "DURATION", "0",
         "exit 0 after this long without messages (0 = never)", 0, 86400000},
        {"http", IB_OPT_STRING, &c.http, "ADDR", NULL,
         "serve /healthz, /readyz, /metrics on ADDR (host:port)", 0, 0},
        {"log-format", IB_OPT_STRING, &log_format, "json|text", "auto",
         "log format (auto: json unless stderr is a terminal)", 0, 0},
        {"log-level", IB_OPT_STRING, &log_level, "LEVEL", "info", "debug, info, warn or error", 0,
         0},
        {"any-uuid-version", IB_OPT_FLAG, &c.any_uuid_version, NULL, NULL,
         "accept event ids of any UUID version (e.g. uuid7), not only uuid4", 0, 0},
        {"max-event-bytes", IB_OPT_INT, &c.max_event_bytes, "BYTES", "1048576",
         "largest accepted message", 64, 67108864},
        {"publish-prefix", IB_OPT_STRING, &c.publish_prefix, "PREFIX", "events",
         "subject prefix for events handlers publish (<prefix>.<type>)", 0, 0},
        {"summary-file", IB_OPT_STRING, &c.summary_file, "FILE", NULL,
         "append a JSON line of totals at exit", 0, 0},
    };
    const size_t n = sizeof(opts) / sizeof(opts[0]);
    int code = 2;

    if (ib_opts_parse(opts, n, argc, argv, NULL, &help, &e) != IB_OK) {
        fprintf(stderr, "ibus run: %s\n", e.msg);
        goto out;
    }
    if (help) {
        ib_opts_usage(stdout, "run",
                      "Consume events from a JetStream durable pull consumer and run each "
                      "subscribed handler once.",
                      opts, n);
        code = 0;
        goto out;
    }
    ib_log_format lf;
    ib_log_sev ls;
    if (ib_log_format_parse(&lf, log_format) != 0) {
        fprintf(stderr, "ibus run: --log-format: expected json, text or auto, got '%s'\n",
                log_format);
        goto out;
    }
    if (ib_log_sev_parse(&ls, log_level) != 0) {
        fprintf(stderr, "ibus run: --log-level: expected debug, info, warn or error, got '%s'\n",
                log_level);
        goto out;
    }
    if (plugins.count == 0) {
        fprintf(stderr, "ibus run: --plugin: at least one plugin is needed\n");
        goto out;
    }
    if (c.retry_max_ms < c.retry_base_ms) {
        fprintf(stderr, "ibus run: --retry-max-delay: must not be below --retry-delay\n");
        goto out;
    }
    for (size_t i = 0; i < backoff.count; i++) {
        if (i == MAX_BACKOFF || ib_parse_duration_ms(&backoff_ms[i], backoff.items[i]) != 0) {
            fprintf(stderr, "ibus run: --backoff: '%s' is not a duration (at most %d steps)\n",
                    backoff.items[i], MAX_BACKOFF);
            goto out;
        }
    }
    if (backoff.count > (size_t)c.max_deliver) {
        fprintf(stderr, "ibus run: --backoff: more steps than --max-deliver\n");
        goto out;
    }
    ib_log_configure(lf, ls, NULL);
    c.plugins = plugins.items;
    c.plugin_configs = plugin_configs.items;
    c.consumer_names = consumer_names.items;
    c.backoff_ms = backoff_ms;
    c.backoff_len = backoff.count;
    c.nats.name = c.durable;
    code = ib_host_run(&c);
out:
    ib_opts_release(opts, n);
    return code;
}
