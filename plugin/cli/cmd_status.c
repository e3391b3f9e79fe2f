/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: a durable at a glance, without the nats CLI.
 *
 *   ibus status --stream ORDERS --durable billing
 *   ibus status --stream ORDERS --all --json
 *
 * Reads the stream, the consumer and the dead-letter stream from the
 * server and the durable's markers from the recorder, and says what needs
 * attention (status_check.c). It takes ibus run's own options for what it
 * compares (--stream, --durable, --recorder, --dead-letter, --ack-wait,
 * --max-deliver, --retention, --retry-max-delay, --consumer-name), with
 * ibus run's defaults and IB_* variables: run where ibus run runs, it needs
 * no flags. With --partitions N (and --subject, --partition-lease) it shows
 * a partitioned consumer: each partition's owner, lease and lag, and the
 * live members, in place of one consumer and its recorder. Exit 0
 * healthy, 1 attention needed (or the state could not be read), 2 bad
 * options (no such stream or durable). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "clock.h"
#include "commands.h"
#include "host.h"
#include "nats_options.h"
#include "options.h"
#include "status.h"

/* Everything `ibus status` parses. */
typedef struct status_args {
    ib_nats_config nats;
    const char *stream, *durable, *recorder, *dead_letter;
    const char *retention; /* as ibus run takes it: auto or a duration */
    ib_strlist consumer_names;
    ib_recorder_options ro;
    ib_status_expect expect;
    int64_t dlq_scan;
    int64_t partitions;         /* a partitioned consumer's N; 0 = not partitioned */
    int64_t partition_lease_ms; /* its processes' lease: members live within it */
    const char *subject;        /* with --partitions: the base of the partition subjects */
    bool all, json;
} status_args;

/* The entry of ibus run's option `name`, pointed at `target`: the same
 * kind, default, bounds and IB_* variable, so that status reads what run
 * reads; `help` says what status does with it. False when run has none. */
static bool from_run(ib_opt *out, const char *name, void *target, const char *help)
{
    ib_opt run[IB_CMD_MAX_OPTIONS];
    void *block = calloc(1, ib_cmd_run_desc.targets_size);
    if (block == NULL)
        return false;
    size_t n = ib_cmd_run_desc.options(run, block);
    free(block); /* the entries keep only their static text */
    for (size_t i = 0; i < n; i++) {
        if (strcmp(run[i].name, name) != 0)
            continue;
        *out = run[i];
        out->target = target;
        out->help = help;
        return true;
    }
    return false;
}

static size_t status_options(ib_opt *opts, void *targets)
{
    status_args *a = targets;
    const struct {
        const char *name;
        void *target;
        const char *help;
    } shared[] = {
        {"stream", &a->stream, "the stream of the durable"},
        {"durable", &a->durable, "the durable consumer to look at"},
        {"recorder", &a->recorder,
         "the marker store of the ibus run processes (opened as ibus markers opens it, never "
         "created)"},
        {"allow-insecure-db", &a->ro.sqlite_allow_insecure,
         "read a marker file (or one in a directory) of another user or writable by others "
         "(never a symlink)"},
        {"dead-letter", &a->dead_letter,
         "the dead-letter subject of the ibus run processes (default ibus.dlq.<durable>)"},
        {"consumer-name", &a->consumer_names,
         "a consumer identity override of the ibus run processes, whose markers are the "
         "durable's too"},
        {"ack-wait", &a->expect.ack_wait_ms,
         "the --ack-wait of the ibus run processes, compared with the consumer's AckWait"},
        {"max-deliver", &a->expect.max_deliver,
         "the --max-deliver of the ibus run processes: events with that many attempts are "
         "exhausted; compared with the consumer's MaxDeliver"},
        {"retention", &a->retention,
         "the --retention of the ibus run processes, compared with the stream's MaxAge; auto "
         "(the default) is shown as what it follows"},
        {"retry-max-delay", &a->expect.retry_max_ms,
         "the --retry-max-delay of the ibus run processes"},
        {"partitions", &a->partitions,
         "the --partitions of a partitioned consumer: show each partition's owner, lease and "
         "lag (pending + ack pending of <durable>_p<P>) and the live members, in place of one "
         "consumer and its recorder (0 = not partitioned)"},
        {"partition-lease", &a->partition_lease_ms,
         "the --partition-lease of the ibus run --partitions processes: a member is live while "
         "its last announcement is younger"},
        {"subject", &a->subject,
         "with --partitions: the base of the partition subjects, checked against each "
         "partition's durable filter (<base>.<P>.*)"},
    };
    size_t n = 0;
    const ib_opt nats[] = {IB_NATS_OPTIONS(&a->nats)};
    memcpy(opts, nats, sizeof(nats));
    n += sizeof(nats) / sizeof(nats[0]);
    for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++)
        n += from_run(&opts[n], shared[i].name, shared[i].target, shared[i].help);
    const ib_opt own[] = {
        {"all", IB_OPT_FLAG, &a->all, NULL, NULL, "every durable consumer of --stream", 0, 0},
        {"json", IB_OPT_FLAG, &a->json, NULL, NULL, "one JSON object instead of text", 0, 0},
        {"dlq-scan", IB_OPT_INT, &a->dlq_scan, "N", "10000",
         "count at most N dead letters of the durable (their count is then a lower bound)", 1,
         100000000},
    };
    _Static_assert(sizeof(own) / sizeof(own[0]) + sizeof(shared) / sizeof(shared[0]) +
                           sizeof(nats) / sizeof(nats[0]) <=
                       IB_CMD_MAX_OPTIONS,
                   "too many options");
    memcpy(opts + n, own, sizeof(own));
    return n + sizeof(own) / sizeof(own[0]);
}

/* The recorder as shown: its URI up to the parameters, which may hold a
 * server URL with credentials. */
static void shown_uri(char *out, size_t cap, const char *uri)
{
    snprintf(out, cap, "%.*s", (int)strcspn(uri, "?"), uri);
}

/* Reads the markers of every identity into `all`, or says why not in
 * m->error. memory: is not readable from another process. */
static void read_markers(ib_status_markers *m, ib__consumer_summary **all, size_t *n,
                         status_args *a, ib_nats *nc, uint32_t max_attempts)
{
    ib_recorder *r = NULL;
    ib_error e;
    shown_uri(m->recorder, sizeof(m->recorder), a->recorder);
    if (strncasecmp(a->recorder, "memory:", 7) == 0) {
        m->kind = "memory";
        return;
    }
    a->ro.size = sizeof(a->ro);
    a->ro.sqlite_must_exist = true;
    a->ro.nats_connection = ib_nats_connection(nc);
    a->ro.kv_js_api_prefix = ib_nats_api_prefix(nc);
    if (ib_recorder_open(&r, a->recorder, &a->ro, &e) != IB_OK ||
        ib__recorder_summarize(r, all, n, max_attempts, &e) != IB_OK) {
        ib_host_flag_hint(m->error, sizeof(m->error), e.msg);
        ib_recorder_close(r);
        return;
    }
    m->kind = ib_recorder_kind(r);
    m->visible = true;
    m->host_local = ib_recorder_is_host_local(r);
    ib_recorder_close(r);
}

/* The bucket stream of a kv: recorder, for its replicas. */
static void read_bucket(ib_status_markers *m, jsCtx *js)
{
    char name[IB_STATUS_NAME_MAX], why[256];
    ib_status_stream s;
    if (m->kind == NULL || strcmp(m->kind, "kv") != 0)
        return;
    snprintf(name, sizeof(name), "KV_%s", m->recorder + 3);
    if (ib_status_read_stream(&s, js, name, why, sizeof(why)) == 0)
        m->bucket = s.replicas;
}

/* Judges and prints the report of one durable. Returns its finding count,
 * or -1 when the JSON could not be made. */
static int finish_report(ib_status_report *r, const status_args *a, json_t *all)
{
    ib_status_check(r);
    if (!a->json) {
        ib_status_print_text(stdout, r);
        return (int)r->nfindings;
    }
    json_t *o = ib_status_json(r);
    if (o == NULL)
        return -1;
    if (all != NULL) {
        json_array_append_new(all, o);
        return (int)r->nfindings;
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (text == NULL)
        return -1;
    printf("%s\n", text);
    free(text);
    return (int)r->nfindings;
}

/* What every durable's report shares: the stream, the markers of every
 * identity, the settings. */
typedef struct status_ctx {
    status_args *a;
    ib_nats *nc;
    ib_status_stream stream;
    ib_status_markers markers; /* v: every identity's summary */
    json_t *all;               /* --all --json: the array being built */
    int findings;              /* over every durable; -1 after a failure */
} status_ctx;

/* The dead-letter subject of `durable`, as ibus run names it. */
static void dead_letter_subject(char *out, size_t cap, const status_args *a, const char *durable)
{
    if (a->dead_letter != NULL && a->dead_letter[0] != '\0')
        snprintf(out, cap, "%s", a->dead_letter);
    else
        snprintf(out, cap, "ibus.dlq.%s", durable);
}

/* Builds, judges and prints the report of consumer `c`. */
static void report_one(status_ctx *x, const ib_status_consumer *c)
{
    ib_status_report *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        x->findings = -1;
        return;
    }
    r->now_ms = ib_clock_realtime_ms();
    r->stream = x->stream;
    r->consumer = *c;
    r->expect = x->a->expect;
    dead_letter_subject(r->dlq.subject, sizeof(r->dlq.subject), x->a, c->durable);
    ib_status_read_dlq(&r->dlq, ib_nats_connection(x->nc), ib_nats_api_prefix(x->nc),
                       ib_nats_jetstream(x->nc), c->durable, (uint64_t)x->a->dlq_scan);
    r->markers = x->markers;
    r->markers.v = NULL;
    r->markers.n = 0;
    int got = -1;
    if (ib_status_markers_pick(&r->markers, x->markers.v, x->markers.n, c->durable,
                               x->a->consumer_names.items) == 0)
        got = finish_report(r, x->a, x->all);
    ib__consumer_summaries_free(r->markers.v, r->markers.n);
    free(r);
    x->findings = got < 0 || x->findings < 0 ? -1 : x->findings + got;
}

/* --all: every consumer of the stream. Returns 0 or the exit code. */
static int report_all(status_ctx *x)
{
    jsConsumerInfoList *list = NULL;
    jsErrCode jerr = 0;
    char d[200];
    natsStatus s = js_Consumers(&list, ib_nats_jetstream(x->nc), x->stream.name, NULL, &jerr);
    if (s == NATS_NOT_FOUND) {
        fprintf(stderr, "ibus status: stream %s has no consumers\n", x->stream.name);
        return 1;
    }
    if (s != NATS_OK) {
        fprintf(stderr, "ibus status: consumers of %s: %s\n", x->stream.name,
                ib_nats_strerror(d, sizeof(d), s));
        return 1;
    }
    for (int i = 0; i < list->Count; i++) {
        ib_status_consumer c;
        ib_status_consumer_from(&c, list->List[i]);
        if (!x->a->json && i > 0)
            putchar('\n');
        report_one(x, &c);
    }
    jsConsumerInfoList_Destroy(list);
    return 0;
}

/* One durable, which must exist. Returns 0 or the exit code. */
static int report_named(status_ctx *x)
{
    ib_status_consumer c;
    char why[256];
    if (ib_status_read_consumer(&c, ib_nats_jetstream(x->nc), x->stream.name, x->a->durable, why,
                                sizeof(why)) != 0) {
        fprintf(stderr, "ibus status: %s\n", why);
        return 1;
    }
    if (!c.exists) {
        fprintf(stderr,
                "ibus status: consumer %s on stream %s does not exist (--durable; ibus status "
                "--all lists the stream's consumers)\n",
                x->a->durable, x->stream.name);
        return 2;
    }
    report_one(x, &c);
    return 0;
}

/* The retention the ibus run processes prune with, as ibus run works it
 * out at start-up: --retention auto follows the stream's MaxAge, and
 * leaves a recorder that prunes by itself alone. */
static void effective_retention(status_ctx *x)
{
    ib_status_expect *e = &x->a->expect;
    if (!e->retention_auto)
        return;
    ib_delivery_window w = {.max_age_ms = x->stream.max_age_ms, .no_consumer = true};
    const char *kind = x->markers.kind;
    if (kind == NULL && strncasecmp(x->a->recorder, "kv:", 3) == 0)
        kind = "kv"; /* not opened: its URI still says */
    e->retention_ms = ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, &w, kind);
}

/* --partitions: the partitions of --durable, their owners and lag, and
 * the live members (status_partitions_read.c). Returns 0 or the exit
 * code. */
static int report_partitioned(status_ctx *x)
{
    const status_args *a = x->a;
    ib_status_partitions ps;
    ib_status_report *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return 1;
    memset(&ps, 0, sizeof(ps));
    snprintf(ps.durable, sizeof(ps.durable), "%s", a->durable);
    snprintf(ps.subject, sizeof(ps.subject), "%s", a->subject != NULL ? a->subject : "");
    ps.n = (uint32_t)a->partitions;
    ps.lease_ms = a->partition_lease_ms;
    r->now_ms = ib_clock_realtime_ms();
    r->stream = x->stream;
    r->expect = a->expect;
    r->parts = &ps;
    int got = -1;
    if (ib_status_read_partitions(&ps, ib_nats_jetstream(x->nc), x->stream.name, r->now_ms) == 0)
        got = finish_report(r, a, NULL);
    ib_status_partitions_free(&ps);
    free(r);
    x->findings = got;
    return got < 0 ? 1 : 0;
}

/* Connected: the stream, the markers, then each durable. Returns the exit
 * code. */
static int report(status_ctx *x)
{
    char why[256];
    status_args *a = x->a;
    if (ib_status_read_stream(&x->stream, ib_nats_jetstream(x->nc), a->stream, why, sizeof(why)) !=
        0) {
        fprintf(stderr, "ibus status: %s\n", why);
        return 1;
    }
    if (!x->stream.exists) {
        fprintf(stderr, "ibus status: stream %s does not exist (--stream)\n", a->stream);
        return 2;
    }
    if (a->partitions > 0) {
        int code = report_partitioned(x);
        return code != 0 ? code : x->findings == 0 ? 0 : 1;
    }
    read_markers(&x->markers, &x->markers.v, &x->markers.n, a, x->nc,
                 (uint32_t)a->expect.max_deliver);
    read_bucket(&x->markers, ib_nats_jetstream(x->nc));
    effective_retention(x);
    int code = a->all ? report_all(x) : report_named(x);
    if (code != 0)
        return code;
    if (x->all != NULL) {
        char *text = json_dumps(x->all, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (text == NULL)
            return 1;
        printf("%s\n", text);
        free(text);
    }
    return x->findings == 0 ? 0 : 1;
}

static int run_status(status_args *a)
{
    ib_error e;
    status_ctx x = {.a = a};
    char why[640];
    if (ib_cli_nats_check(&a->nats, why, sizeof(why)) != 0) {
        fprintf(stderr, "ibus status: %s\n", why);
        return 2;
    }
    if (!a->all && (a->durable == NULL || a->durable[0] == '\0')) {
        fprintf(stderr, "ibus status: --durable is empty: name one, or pass --all\n");
        return 2;
    }
    if (a->all && a->partitions > 0) {
        fprintf(stderr, "ibus status: --all does not apply with --partitions: name the "
                        "partitioned consumer with --durable\n");
        return 2;
    }
    /* auto follows the stream's MaxAge: what that gives is known once the
     * stream and the recorder are read (effective_retention) */
    a->expect.retention_auto = a->retention == NULL || strcmp(a->retention, "auto") == 0;
    if (!a->expect.retention_auto &&
        ib_parse_duration_ms(&a->expect.retention_ms, a->retention) != 0) {
        fprintf(stderr,
                "ibus status: --retention: expected auto or a duration (30d; 0 = never), got "
                "'%s'\n",
                a->retention);
        return 2;
    }
    a->nats.name = "ibus status";
    if (ib_nats_connect(&x.nc, &a->nats, &e) != IB_OK) {
        fprintf(stderr, "ibus status: %s\n", e.msg);
        return e.status == IB_ERR_CONFIG ? 2 : 1;
    }
    if (a->all && a->json && (x.all = json_array()) == NULL) {
        ib_nats_close(x.nc, 1000);
        return 1;
    }
    int code = report(&x);
    json_decref(x.all);
    ib__consumer_summaries_free(x.markers.v, x.markers.n);
    ib_nats_close(x.nc, 1000);
    return code;
}

int ib_cmd_status(int argc, char **argv)
{
    status_args a;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    bool help = false;
    ib_error e;
    int code = 2;

    memset(&a, 0, sizeof(a));
    const size_t n = status_options(opts, &a);
    if (ib_opts_parse(opts, n, argc, argv, NULL, &help, &e) != IB_OK) {
        fprintf(stderr, "ibus status: %s\n", e.msg);
        goto out;
    }
    if (help) {
        ib_cmd_usage(stdout, &ib_cmd_status_desc, opts, n);
        code = 0;
        goto out;
    }
    code = run_status(&a);
out:
    ib_opts_release(opts, n);
    return code;
}

const ib_cmd_desc ib_cmd_status_desc = {
    .name = "status",
    .synopsis = "[options]",
    .summary = "a durable at a glance: backlog, claims, dead letters, settings that disagree",
    .description =
        "Show a durable consumer from the outside, in one screen (or --json): the stream "
        "(messages, sequences, max age, replicas), the consumer (pending, ack pending, "
        "redelivered, pull requests waiting, last delivery and ack floor with their age, its "
        "settings), the markers of each of its consumer identities in the recorder (count, "
        "oldest and newest, claims held and the shortest lease left, attempted and exhausted "
        "events), and its dead letters (count, by reason, oldest). Then what needs attention: "
        "messages waiting with nobody pulling, claims stuck past their lease, exhausted "
        "events, dead letters, no stream for the dead-letter subject, replicas behind, and "
        "settings that disagree with what ibus run is given (AckWait and --ack-wait, MaxDeliver "
        "and --max-deliver, MaxAge and --retention), each with the option that fixes it. It "
        "takes ibus run's options and IB_* variables, so where ibus run runs it needs no "
        "flags. With --partitions N (ibus run --partitions: IB_PARTITIONS, --subject, "
        "--partition-lease) it shows a partitioned consumer: for each partition its owner "
        "(none when never leased, given back or past its lease), when its lease ends and its "
        "lag (pending + ack pending of <durable>_p<P>), and the live members; attention when "
        "a partition with lag has no live owner or its lease is not a lease. "
        "It changes nothing on the server, and opens the marker file as ibus markers does "
        "(never creating one). Exit 0 healthy, 1 attention needed (the list says what) "
        "or the state could not be read, 2 bad options (no such stream or durable).",
    .options = status_options,
    .targets_size = sizeof(status_args),
    .main = ib_cmd_status,
};
