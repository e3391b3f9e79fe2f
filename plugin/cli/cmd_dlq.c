/* SPDX-License-Identifier: Apache-2.0 */
/* ibus dlq: find, show, replay and purge dead letters, in the style of the
 * nats CLI.
 *
 *   ibus dlq --durable orders list --reason max-deliver
 *   ibus dlq --durable orders show 17
 *   ibus dlq --durable orders replay --since 1h --purge
 *   ibus dlq --stream DLQ_orders purge --reason decode --yes
 *
 * The dead-letter stream is --stream, else DLQ_<--durable> (the stream
 * `ibus run --create` makes). Every action takes the filters; replay and
 * purge act on what list shows with the same filters. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "input_check.h"
#include "dlq.h"
#include "nats_options.h"
#include "options.h"
#include "clock.h"

/* Everything `ibus dlq` parses. */
typedef struct dlq_args {
    ib_nats_config nats;
    const char *durable, *stream;
    const char *reason, *consumer, *type, *id, *since, *until;
    bool json, dry_run, purge, force, yes;
    double rate;
    int64_t timeout_ms;
} dlq_args;

static size_t dlq_options(ib_opt *opts, void *targets)
{
    dlq_args *a = targets;
    const ib_opt table[] = {
        {"durable", IB_OPT_STRING, &a->durable, "NAME", NULL,
         "the --durable of the ibus run processes: their dead-letter stream is DLQ_<NAME>", 0, 0},
        {"stream", IB_OPT_STRING, &a->stream, "NAME", NULL,
         "the dead-letter stream itself (instead of --durable)", 0, 0},
        {"reason", IB_OPT_STRING, &a->reason, "REASON", NULL,
         "only dead letters of this reason: decode, invalid-id, max-deliver, rejected, "
         "conflict, other",
         0, 0},
        {"consumer", IB_OPT_STRING, &a->consumer, "DURABLE", NULL,
         "only dead letters of this consumer (Ibus-Consumer)", 0, 0},
        {"type", IB_OPT_STRING, &a->type, "TYPE", NULL, "only events of this type", 0, 0},
        {"id", IB_OPT_STRING, &a->id, "UUID", NULL, "only the event with this id", 0, 0},
        {"since", IB_OPT_STRING, &a->since, "TIME", NULL,
         "only dead letters stored at or after TIME (2026-12-01T21:30:00Z, or a duration ago: "
         "1h)",
         0, 0},
        {"until", IB_OPT_STRING, &a->until, "TIME", NULL,
         "only dead letters stored before TIME (as --since)", 0, 0},
        {"json", IB_OPT_FLAG, &a->json, NULL, NULL, "list, replay: one JSON object per line", 0, 0},
        {"dry-run", IB_OPT_FLAG, &a->dry_run, NULL, NULL,
         "replay: print each dead letter's target subject and what a replay would do (or why it "
         "would skip it), publish nothing",
         0, 0},
        {"rate", IB_OPT_DOUBLE, &a->rate, "N", "0",
         "replay: at most N replays a second (0 = no limit)", 0, 0},
        {"purge", IB_OPT_FLAG, &a->purge, NULL, NULL,
         "replay: delete each dead letter once JetStream acked its replay", 0, 0},
        {"force", IB_OPT_FLAG, &a->force, NULL, NULL,
         "replay: replay conflict dead letters too (they conflict again unless their id's "
         "markers were forgotten first); never a target outside its stream, $ or _INBOX",
         0, 0},
        {"yes", IB_OPT_FLAG, &a->yes, NULL, NULL, "purge: really delete", 0, 0},
        {"timeout", IB_OPT_DURATION, &a->timeout_ms, "DURATION", "5s",
         "replay: how long to wait for each JetStream ack", 1, 3600000},
        IB_NATS_OPTIONS(&a->nats),
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* The stream name from --stream or --durable (stream names may not hold
 * '.', '*', '>' or spaces: ibus run replaces them as here). 0 or 2. */
static int stream_name(char *out, size_t cap, const dlq_args *a)
{
    if (a->stream != NULL && a->stream[0] != '\0') {
        snprintf(out, cap, "%s", a->stream);
        return 0;
    }
    if (a->durable == NULL || a->durable[0] == '\0') {
        fprintf(stderr, "ibus dlq: name the dead-letter stream with --stream, or give the "
                        "--durable of the ibus run processes (stream DLQ_<durable>)\n");
        return 2;
    }
    snprintf(out, cap, "DLQ_%s", a->durable);
    for (char *c = out; *c != '\0'; c++)
        if (*c == '.' || *c == '*' || *c == '>' || *c == ' ')
            *c = '_';
    return 0;
}

/* The filters from the flags. 0 or 2. */
static int make_filter(ib_dlq_filter *f, const dlq_args *a)
{
    int64_t now = ib_clock_realtime_ms();
    memset(f, 0, sizeof(*f));
    f->reason = a->reason;
    f->consumer = a->consumer;
    f->type = a->type;
    if (ib_dlq_filter_check(f, a->id) != 0)
        return 2;
    if (a->since != NULL && a->since[0] != '\0' && ib_dlq_parse_time(&f->since_ms, a->since, now)) {
        fprintf(stderr,
                "ibus dlq: --since: expected a time (2026-12-01T21:30:00Z) or a duration "
                "(1h), got '%s'\n",
                a->since);
        return 2;
    }
    if (a->until != NULL && a->until[0] != '\0' && ib_dlq_parse_time(&f->until_ms, a->until, now)) {
        fprintf(stderr,
                "ibus dlq: --until: expected a time (2026-12-01T21:30:00Z) or a duration "
                "(1h), got '%s'\n",
                a->until);
        return 2;
    }
    return 0;
}

typedef struct list_run {
    bool json;
    bool failed;
    bool header; /* the table's header is out */
} list_run;

static int list_visit(void *ctx, ib_dlq_entry *e)
{
    list_run *l = ctx;
    if (!l->json && !l->header)
        ib_dlq_print_header(stdout);
    l->header = true;
    if (l->json)
        l->failed |= ib_dlq_print_json(stdout, e) != 0;
    else
        ib_dlq_print_row(stdout, e);
    return 0;
}

/* The header goes out with the first row, or after a walk that found the
 * stream empty: never before an error such as a stream that does not
 * exist. */
static int do_list(jsCtx *js, const char *stream, const ib_dlq_filter *f, bool json)
{
    list_run l = {.json = json};
    uint64_t n = 0;
    int code = ib_dlq_walk(js, stream, f, list_visit, &l, &n);
    if (code == 0 && !json && !l.header)
        ib_dlq_print_header(stdout);
    return code != 0 ? code : l.failed ? 1 : 0;
}

static int do_show(jsCtx *js, const char *stream, const ib_strlist *args)
{
    char *end = NULL;
    const char *text = args->count == 2 ? args->items[1] : "";
    uint64_t seq = strtoull(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || seq == 0) {
        fprintf(stderr,
                "ibus dlq show: expected one sequence number (SEQ of ibus dlq list), "
                "got '%s'\n",
                text);
        return 2;
    }
    ib_dlq_entry e;
    int code = ib_dlq_read_one(&e, js, stream, seq);
    if (code != 0)
        return code == 3 ? 1 : code;
    ib_dlq_print_show(stdout, &e);
    ib_dlq_entry_clear(&e);
    return 0;
}

/* Runs `action` against the server. */
static int run_action(const char *action, const dlq_args *a, const char *stream,
                      const ib_dlq_filter *f, const ib_strlist *args)
{
    ib_nats *n = NULL;
    ib_error e;
    char why[640];
    if (ib_cli_nats_check(&a->nats, why, sizeof(why)) != 0) {
        fprintf(stderr, "ibus dlq: %s\n", why);
        return 2;
    }
    if (ib_nats_connect(&n, &a->nats, &e) != IB_OK) {
        fprintf(stderr, "ibus dlq: %s\n", e.msg);
        return e.status == IB_ERR_CONFIG ? 2 : 1;
    }
    jsCtx *js = ib_nats_jetstream(n);
    int code = 2;
    if (strcmp(action, "list") == 0) {
        code = do_list(js, stream, f, a->json);
    } else if (strcmp(action, "show") == 0) {
        code = do_show(js, stream, args);
    } else if (strcmp(action, "replay") == 0) {
        ib_dlq_replay_opts o = {.nc = ib_nats_connection(n),
                                .api_prefix = ib_nats_api_prefix(n),
                                .stream = stream,
                                .dry_run = a->dry_run,
                                .purge = a->purge,
                                .force = a->force,
                                .json = a->json,
                                .rate = a->rate,
                                .timeout_ms = a->timeout_ms};
        code = ib_dlq_replay(js, f, &o);
    } else if (strcmp(action, "purge") == 0) {
        code = ib_dlq_purge(js, stream, f);
    }
    ib_nats_close(n, 2000);
    return code;
}

/* Checks what only some actions take. 0 or 2. */
static int check_usage(const char *action, const dlq_args *a, const ib_strlist *args)
{
    if (strcmp(action, "show") != 0 && args->count > 1) {
        fprintf(stderr,
                "ibus dlq %s: unexpected argument '%s' (filters are flags: --id, "
                "--reason, ...)\n",
                action, args->items[1]);
        return 2;
    }
    if (strcmp(action, "purge") == 0 && !a->yes) {
        fprintf(stderr, "ibus dlq purge: deletes dead letters for good; pass --yes (see what it "
                        "would delete with ibus dlq list and the same filters)\n");
        return 2;
    }
    if (strcmp(action, "replay") == 0 && a->rate < 0) {
        fprintf(stderr, "ibus dlq replay: --rate: expected 0 or more replays a second\n");
        return 2;
    }
    return 0;
}

int ib_cmd_dlq(int argc, char **argv)
{
    dlq_args a;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    ib_strlist args;
    bool help = false;
    ib_error e;
    ib_dlq_filter f;
    char stream[IB_DLQ_STREAM_MAX + 8];
    int code = 2;

    memset(&args, 0, sizeof(args));
    memset(&a, 0, sizeof(a));
    const size_t n = dlq_options(opts, &a);
    if (ib_opts_parse(opts, n, argc, argv, &args, &help, &e) != IB_OK) {
        fprintf(stderr, "ibus dlq: %s\n", e.msg);
        goto out;
    }
    if (help || args.count == 0) {
        ib_cmd_usage(help ? stdout : stderr, &ib_cmd_dlq_desc, opts, n);
        code = help ? 0 : 2;
        goto out;
    }
    if (ib_cmd_action_find(&ib_cmd_dlq_desc, args.items[0]) == NULL) {
        char known[128];
        fprintf(stderr, "ibus dlq: unknown action '%s' (%s)\n", args.items[0],
                ib_cmd_actions_list(known, sizeof(known), &ib_cmd_dlq_desc));
        goto out;
    }
    if (ib_cli_check_name("dlq", "--stream", ib_cli_given(a.stream)) != 0 ||
        ib_cli_check_name("dlq", "--durable", ib_cli_given(a.durable)) != 0 ||
        check_usage(args.items[0], &a, &args) != 0 ||
        stream_name(stream, sizeof(stream), &a) != 0 || make_filter(&f, &a) != 0)
        goto out;
    a.nats.name = "ibus dlq";
    code = run_action(args.items[0], &a, stream, &f, &args);
out:
    ib_opts_release(opts, n);
    return code;
}

static const ib_cmd_action dlq_actions[] = {
    {"list", NULL,
     "the dead letters: sequence, time, reason, consumer, event id, type, deliveries, error"},
    {"show", "SEQ", "every header of dead letter SEQ and its decoded event"},
    {"replay", NULL,
     "republish the original bytes and headers to the original subject, waiting for the ack"},
    {"purge", NULL, "delete the dead letters that pass the filters (needs --yes)"},
};

const ib_cmd_desc ib_cmd_dlq_desc = {
    .name = "dlq",
    .synopsis = "[options] ACTION [SEQ]",
    .summary = "list, show, replay and purge dead letters",
    .description =
        "List, show, replay and purge the dead letters of the stream --stream, or DLQ_<durable> "
        "for --durable. The filters --reason, --consumer, --type, --id, --since and --until "
        "select what every action sees. replay republishes each dead letter's original bytes "
        "and headers to its original subject (Ibus-Subject) with Nats-Msg-Id "
        "ibus-replay:<stream>:<seq>, and waits for JetStream's ack. The event id is unchanged: "
        "handlers that had marked it do not run again, and those that had failed start with "
        "a fresh attempt budget (a dead letter ends the attempts). "
        "A dead letter's headers are input, not orders: it is replayed only to a subject of "
        "the stream it names (Ibus-Stream), as JetStream answers which stream captures the "
        "subject, and never to a $ subject (the server's API) or an _INBOX one; any other is "
        "skipped with the reason, --force or not. "
        "A conflict dead letter is skipped unless --force is "
        "given (forget its markers first, or it conflicts again). --purge deletes each dead "
        "letter only after its replay is acked. Exit status: 0 done, 1 a runtime failure "
        "(a publish or delete failed), 2 bad usage (an unknown reason, no such stream).",
    .actions = dlq_actions,
    .nactions = sizeof(dlq_actions) / sizeof(dlq_actions[0]),
    .options = dlq_options,
    .targets_size = sizeof(dlq_args),
    .main = ib_cmd_dlq,
};
