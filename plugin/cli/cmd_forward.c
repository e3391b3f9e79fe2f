/* SPDX-License-Identifier: Apache-2.0 */
/* ibus forward: option table and translation into the forwarder's
 * configuration (forward.h). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "forward.h"
#include "input_check.h"
#include "log.h"
#include "nats_options.h"
#include "options.h"
#include "partition.h"
#include "uuid.h"

typedef struct forward_args {
    ib_forward_config c;
    int64_t partitions;
    const char *log_format, *log_level;
    const char *uuid_versions;
    bool help;
    ib_log_format lf;
    ib_log_sev ls;
} forward_args;

/* The source: connection, stream, durable, dead letters. */
static size_t forward_options_source(ib_opt *opts, forward_args *a)
{
    ib_forward_config *c = &a->c;
    const ib_opt table[] = {
        IB_NATS_OPTIONS(&c->nats),
        {"stream", IB_OPT_STRING, &c->stream, "NAME", NULL,
         "the stream to forward, whose events are not partitioned (required)", 0, 0},
        {"durable", IB_OPT_STRING, &c->durable, "NAME", "ibus_forward",
         "durable pull consumer of the stream that the forwarder reads through", 0, 0},
        {"filter", IB_OPT_STRING, &c->filter, "SUBJECT", NULL,
         "filter subject of the durable (when creating it); needed when the partition subjects "
         "are in the same stream",
         0, 0},
        {"create", IB_OPT_FLAG, &c->create, NULL, NULL,
         "create the durable and the dead-letter stream if missing (never the streams forwarded "
         "from and to)",
         0, 0},
        {"dead-letter", IB_OPT_STRING, &c->dead_letter, "SUBJECT", NULL,
         "dead-letter subject of what cannot be forwarded (default ibus.dlq.<durable>)", 0, 0},
        {"stream-replicas", IB_OPT_INT, &c->stream_replicas, "N", "1",
         "replicas of the dead-letter stream --create makes", 1, 5},
        {"ack-wait", IB_OPT_DURATION, &c->ack_wait_ms, "DURATION", "30s",
         "AckWait when creating the durable", 100, 86400000},
        {"max-ack-pending", IB_OPT_INT, &c->max_ack_pending, "N", "1000",
         "MaxAckPending when creating the durable", 1, 1000000},
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS / 2, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* The target, the flow and the log. */
static size_t forward_options_target(ib_opt *opts, forward_args *a)
{
    ib_forward_config *c = &a->c;
    const ib_opt table[] = {
        {"subject", IB_OPT_STRING, &c->subject, "BASE", NULL,
         "base of the partition subjects <BASE>.<partition>.<key>, which one stream must "
         "capture (required)",
         0, 0},
        {"partitions", IB_OPT_INT, &a->partitions, "N", "0",
         "the number of partitions, as ibus run --partitions and the producers use it "
         "(required)",
         0, 4096},
        {"key-token", IB_OPT_INT, &c->key_token, "N", "0",
         "the partition key is token N (1 = the first) of the subject an event was published "
         "on, a business key the producer named there; an event whose subject is shorter, or "
         "0, is keyed by its id",
         0, 255},
        {"batch", IB_OPT_INT, &c->batch, "N", "64", "messages per pull", 1, 4096},
        {"pull-expires", IB_OPT_DURATION, &c->pull_expires_ms, "DURATION", "1s",
         "lifetime of one pull request", 10, 60000},
        {"retry-delay", IB_OPT_DURATION, &c->retry_delay_ms, "DURATION", "1s",
         "a forward or dead letter that failed, and the rest of its batch, come back after this", 1,
         3600000},
        {"publish-timeout", IB_OPT_DURATION, &c->publish_timeout_ms, "DURATION", "5s",
         "longest wait for the target stream to acknowledge a forward", 100, 600000},
        {"idle-exit", IB_OPT_DURATION, &c->idle_exit_ms, "DURATION", "0",
         "exit 0 after this long without messages (0 = never)", 0, 86400000},
        {"connect-timeout", IB_OPT_DURATION, &c->connect_timeout_ms, "DURATION", "0",
         "exit 1 when the first connect to NATS takes this long (0 = retry for ever)", 0, 86400000},
        {"uuid-versions", IB_OPT_STRING, &a->uuid_versions, "LIST", "4,8",
         "UUID versions of the event ids accepted, as ibus run takes them; others are "
         "dead-lettered as invalid-id",
         0, 0},
        {"max-event-bytes", IB_OPT_INT, &c->max_event_bytes, "BYTES", "1048576",
         "largest accepted message", 64, 67108864},
        {"log-format", IB_OPT_STRING, &a->log_format, "json|text", "auto",
         "log format (auto: json unless stderr is a terminal)", 0, 0},
        {"log-level", IB_OPT_STRING, &a->log_level, "LEVEL", "info", "debug, info, warn or error",
         0, 0},
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS / 2, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

static size_t forward_options(ib_opt *opts, void *targets)
{
    forward_args *a = targets;
    size_t n = forward_options_source(opts, a);
    return n + forward_options_target(opts + n, a);
}

/* Names and subjects (input_check.h), and what must be given. -1 after
 * saying why. */
static int check_names(const forward_args *a)
{
    const ib_forward_config *c = &a->c;
    if (ib_cli_given(c->stream) == NULL || ib_cli_given(c->subject) == NULL || a->partitions == 0) {
        fprintf(stderr, "ibus forward: give --stream (the stream to forward), --subject (the base "
                        "of the partition subjects) and --partitions N\n");
        return -1;
    }
    if (ib_cli_check_name("forward", "--stream", c->stream) != 0 ||
        ib_cli_check_name("forward", "--durable", c->durable) != 0 ||
        ib_cli_check_subject("forward", "--filter", ib_cli_given(c->filter),
                             IB_SUBJECT_WILDCARDS) != 0 ||
        ib_cli_check_subject("forward", "--subject", c->subject, IB_SUBJECT_NOT_SYSTEM) != 0 ||
        ib_cli_check_subject("forward", "--dead-letter", ib_cli_given(c->dead_letter),
                             IB_SUBJECT_NOT_SYSTEM) != 0)
        return -1;
    return 0;
}

/* What the table cannot check. -1 after saying why. */
static int check_args(forward_args *a)
{
    char why[640];
    unsigned versions = 0;
    if (ib_cli_nats_check(&a->c.nats, why, sizeof(why)) != 0) {
        fprintf(stderr, "ibus forward: %s\n", why);
        return -1;
    }
    if (check_names(a) != 0)
        return -1;
    if (ib_id_versions_parse(&versions, a->uuid_versions) != 0) {
        fprintf(stderr,
                "ibus forward: --uuid-versions: expected UUID versions 1-8 separated by commas "
                "(4,8) or any, got '%s'\n",
                a->uuid_versions);
        return -1;
    }
    a->c.uuid_versions = versions;
    if (ib_log_format_parse(&a->lf, a->log_format) != 0) {
        fprintf(stderr, "ibus forward: --log-format: expected json, text or auto, got '%s'\n",
                a->log_format);
        return -1;
    }
    if (ib_log_sev_parse(&a->ls, a->log_level) != 0) {
        fprintf(stderr,
                "ibus forward: --log-level: expected debug, info, warn or error, got '%s'\n",
                a->log_level);
        return -1;
    }
    a->c.partitions = (uint32_t)a->partitions;
    return 0;
}

/* ibus forward: parse, check, configure logging, then run the forwarder.
 * Returns its exit code, 0 for --help, 2 for bad options. */
int ib_cmd_forward(int argc, char **argv)
{
    forward_args a;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    ib_error e;
    int code = 2;

    memset(&a, 0, sizeof(a));
    const size_t n = forward_options(opts, &a);
    if (ib_opts_parse(opts, n, argc, argv, NULL, &a.help, &e) != IB_OK) {
        fprintf(stderr, "ibus forward: %s\n", e.msg);
        goto out;
    }
    if (a.help) {
        ib_cmd_usage(stdout, &ib_cmd_forward_desc, opts, n);
        code = 0;
        goto out;
    }
    if (check_args(&a) != 0)
        goto out;
    ib_log_configure(a.lf, a.ls, NULL);
    code = ib_forward_run(&a.c);
out:
    ib_opts_release(opts, n);
    return code;
}

const ib_cmd_desc ib_cmd_forward_desc = {
    .name = "forward",
    .synopsis = "[options]",
    .summary = "move the events of a stream that is not partitioned to partition subjects, once",
    .description =
        "Read a stream whose producers cannot publish partitioned events through a durable pull "
        "consumer, and publish each event to <--subject>.<partition>.<key> for ibus run "
        "--partitions: the key is the event's id, or a business key in token --key-token of its "
        "subject. Each forward carries the message id ibus-fwd-<stream>-<sequence>, and the "
        "source message is acked only once the target stream acknowledged it, so a forward "
        "repeated after a crash is stored once within the target's duplicate window. What does "
        "not decode, or has an invalid id or key, is dead-lettered; a failed forward is retried. "
        "Refused (exit 2): a target that no stream captures whole, and a target in the stream "
        "forwarded unless the durable's filter leaves it out. Exit 0 after SIGTERM, SIGINT or "
        "--idle-exit, 1 on a runtime failure; the totals are logged at the end.",
    .options = forward_options,
    .targets_size = sizeof(forward_args),
    .main = ib_cmd_forward,
};
