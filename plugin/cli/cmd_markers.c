/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers: inspect, forget and prune markers in a recorder.
 *
 *   ibus markers --recorder sqlite:processed.db stats
 *   ibus markers --consumer ORDERS/audit/audit lookup ID
 *   ibus markers --consumer ORDERS/audit/audit lookup --key evt_1NbV3Q
 *   ibus markers --consumer ORDERS/audit/audit --limit 20 list
 *   ibus markers --consumer ORDERS/audit/audit forget ID   (force reprocessing)
 *   ibus markers --older-than 30d --stream ORDERS --durable orders prune
 *
 * prune refuses an age shorter than the time the stream can still deliver
 * a message (the floor `ibus run --retention` checks too), read from the
 * server: --stream for MaxAge, --durable for the redelivery horizon.
 * --force skips the check. A kv: recorder without url= in its URI is
 * reached through the connection options (--nats-url, --creds, TLS), like
 * `ibus run`'s.
 *
 * No action creates a marker file or opens an in-process recorder
 * (memory:, sqlite::memory:, which only an ibus run process can see).
 * lookup, forget and list refuse a --consumer the recorder has no markers
 * of, matched exactly (markers_known.h); stats and prune, which act on
 * every consumer, refuse one altogether. lookup and forget take the event
 * as its id, or as the business key `ibus publish --key` derived the id
 * from (--key, --key-namespace: the same ib_event_id_derive).
 *
 * A partitioned consumer (ibus run --partitions N) keeps its markers in
 * its partition log, not in a recorder: --partitions N --durable NAME
 * selects it, and lookup replays the event's partition read-only
 * (markers_partition.h); the other actions are refused. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "input_check.h"
#include "host.h"
#include "markers_known.h"
#include "markers_partition.h"
#include "nats_options.h"
#include "options.h"
#include "partition.h"
#include "recorder.h"
#include "redact.h"
#include "uuid.h"
#include "clock.h"
#include <infinity_bus/idempotency.h>

static void format_ts(char *buf, size_t cap, int64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t w = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + w, cap - w, ".%03dZ", (int)(ms % 1000));
}

static int print_marker(void *ctx, const ib_marker_info *m)
{
    char ts[40];
    (void)ctx;
    format_ts(ts, sizeof(ts), m->ts_ms);
    printf("%s %s %s\n", ts, m->consumer, m->event_id);
    return 0;
}

/* Where lookup and forget take their event from: an ID argument, or
 * --key (with --key-namespace) as ibus publish --key derives the id. */
typedef struct event_key {
    const char *key;           /* NULL = an ID argument */
    const char *key_namespace; /* the default is publish's */
} event_key;

/* The id of event `k` derived as ibus publish --key derives it. */
static int derive_id(char id[IB_ID_BUF_SIZE], const ib_strlist *args, const char *what,
                     const event_key *k)
{
    ib_error e = {0};
    if (args->count != 1) {
        fprintf(stderr, "ibus markers %s: give an event id or --key, not both\n", what);
        return -1;
    }
    if (ib_event_id_derive(id, k->key_namespace, k->key, strlen(k->key), &e) != IB_OK) {
        fprintf(stderr, "ibus markers %s: --key-namespace: '%s' is not a UUID: %s\n", what,
                k->key_namespace, e.msg);
        return -1;
    }
    return 0;
}

static int need_id(char id[IB_ID_BUF_SIZE], const ib_strlist *args, const char *what,
                   const event_key *k)
{
    if (k->key != NULL)
        return derive_id(id, args, what, k);
    if (args->count != 2) {
        fprintf(stderr, "ibus markers %s: expected one event id (or --key)\n", what);
        return -1;
    }
    ib_id_reason r = ib_id_normalise(id, args->items[1], strlen(args->items[1]), IB_ID_ANY_VERSION);
    if (r != IB_ID_VALID) {
        fprintf(stderr, "ibus markers %s: '%s' is not a UUID: %s\n", what, args->items[1],
                ib_id_reason_str(r));
        return -1;
    }
    return 0;
}

/* What prune needs beyond the recorder: the age, and where to read the
 * floor from. */
typedef struct prune_args {
    int64_t older_than_ms;
    bool force;
    const char *stream;
    const char *durable;  /* may be NULL: MaxAge alone */
    int64_t retry_max_ms; /* the --retry-max-delay of the ibus run processes */
    ib_nats_config nats;
} prune_args;

/* Reads the stream's MaxAge and, with --durable, the consumer's settings
 * into `w`. Returns 0, or the exit code after saying why. */
static int read_window(ib_delivery_window *w, const prune_args *p)
{
    ib_nats *n = NULL;
    ib_error e;
    ib_consumer_facts f;
    int code = 0;
    memset(w, 0, sizeof(*w));
    w->no_consumer = p->durable == NULL || p->durable[0] == '\0';
    w->nak_max_ms = p->retry_max_ms;
    if (ib_nats_connect(&n, &p->nats, &e) != IB_OK ||
        ib_stream_max_age_get(&w->max_age_ms, ib_nats_jetstream(n), p->stream, &e) != IB_OK)
        goto fail;
    if (!w->no_consumer) {
        if (ib_consumer_facts_get(&f, ib_nats_jetstream(n), p->stream, p->durable, &e) != IB_OK)
            goto fail;
        if (!f.exists) {
            fprintf(stderr, "ibus markers prune: consumer %s on stream %s does not exist\n",
                    p->durable, p->stream);
            code = 2;
            goto out;
        }
        w->ack_wait_ms = f.ack_wait_ms;
        w->max_deliver = f.max_deliver;
        w->backoff_max_ms = f.backoff_max_ms;
    }
    goto out;
fail:
    fprintf(stderr, "ibus markers prune: %s\n", e.msg);
    code = e.status == IB_ERR_CONFIG ? 2 : 1;
out:
    ib_nats_close(n, 1000);
    return code;
}

/* The floor check of prune: 0 when pruning may go on, else the exit code
 * after saying why (2 for an age below the floor). */
static int check_floor(const prune_args *p)
{
    if (p->force)
        return 0;
    if (p->stream == NULL || p->stream[0] == '\0') {
        fprintf(stderr, "ibus markers prune: pass --stream (and --durable) so the age can be "
                        "checked against the time the stream can still deliver a message, or "
                        "--force to skip the check\n");
        return 2;
    }
    ib_delivery_window w;
    int code = read_window(&w, p);
    if (code != 0)
        return code;
    int64_t floor = ib_host_retention_floor_ms(&w);
    if (p->older_than_ms >= floor)
        return 0;
    char why[512];
    fprintf(stderr,
            "ibus markers prune: %s: markers could be pruned while their event can still "
            "arrive; %s or pass --force\n",
            ib_host_retention_explain(why, sizeof(why), "--older-than", p->older_than_ms, &w,
                                      p->stream),
            floor == IB_HOST_UNBOUNDED ? "give the stream a MaxAge" : "raise --older-than");
    return 2;
}

/* What every action needs before it acts: --consumer and an event id
 * where the action takes them (into `id`), an identity the recorder knows
 * exactly (a mistyped one is an error, not a quiet "not processed"), and
 * no --consumer where the action would ignore it. Returns 0, or the exit
 * code after saying why. */
static int check_target(char id[IB_ID_BUF_SIZE], ib_recorder *r, const char *uri,
                        const char *action, const ib_strlist *args, const char *consumer,
                        const event_key *k)
{
    bool by_id = strcmp(action, "lookup") == 0 || strcmp(action, "forget") == 0;
    bool named = consumer != NULL && consumer[0] != '\0';
    if (k->key != NULL && !by_id) {
        fprintf(stderr,
                "ibus markers %s: --key does not apply: it names the event of lookup and "
                "forget\n",
                action);
        return 2;
    }
    if (by_id && !named) {
        fprintf(stderr,
                "ibus markers %s: --consumer is required (e.g. --consumer "
                "<durable>/<plugin>/<handler>)\n",
                action);
        return 2;
    }
    if (named && !by_id && strcmp(action, "list") != 0) {
        fprintf(stderr,
                "ibus markers %s: --consumer does not apply: %s acts on every consumer of the "
                "recorder (leave --consumer out)\n",
                action, action);
        return 2;
    }
    if (by_id && need_id(id, args, action, k) != 0)
        return 2;
    if (named)
        return ib_cli_markers_identity_check(r, uri, action, consumer, by_id ? id : NULL);
    return 0;
}

/* lookup: the key's whole state. Exit 0 when marked, 3 when not (like
 * grep, a quiet "no" for scripts), with the claim and the attempts. */
static int do_lookup(ib_recorder *r, const char *consumer, const char *id, ib_error *e)
{
    ib_marker_state s;
    char t[40];
    if (ib_recorder_inspect(r, &s, consumer, id, e) != IB_OK)
        return -1;
    if (s.marked) {
        format_ts(t, sizeof(t), s.ts_ms);
        printf("processed: %s %s at %s\n", consumer, id, t);
        return 0;
    }
    printf("not processed: %s %s", consumer, id);
    if (s.owner[0] != '\0' && s.lease_left_ms > 0) {
        format_ts(t, sizeof(t), ib_clock_realtime_ms() + s.lease_left_ms);
        printf(" claimed by %s until %s", s.owner, t);
    } else if (s.owner[0] != '\0') {
        printf(" claim of %s ended", s.owner);
    }
    printf(" attempts=%" PRIu32 "\n", s.attempts);
    return 3;
}

/* forget: the marker and the attempts, so a redelivery runs it again. */
static int do_forget(ib_recorder *r, const char *consumer, const char *id, ib_error *e)
{
    ib_marker_state s;
    bool existed = false;
    if (ib_recorder_inspect(r, &s, consumer, id, e) != IB_OK ||
        ib_recorder_forget(r, &existed, consumer, id, e) != IB_OK)
        return -1;
    if (existed)
        printf("forgotten: %s %s\n", consumer, id);
    else if (s.attempts > 0)
        printf("was not marked; %" PRIu32 " attempts cleared: %s %s\n", s.attempts, consumer, id);
    else
        printf("was not marked: %s %s\n", consumer, id);
    return 0;
}

static int do_prune(ib_recorder *r, const prune_args *prune, ib_error *e)
{
    uint64_t removed = 0;
    if (prune->older_than_ms <= 0) {
        fprintf(stderr, "ibus markers prune: --older-than is required (e.g. 30d)\n");
        return 2;
    }
    /* a kv: bucket's TTL prunes: let prune itself say so */
    int code = strcmp(ib_recorder_kind(r), "kv") != 0 ? check_floor(prune) : 0;
    if (code != 0)
        return code;
    int64_t cutoff = ib_clock_realtime_ms() - prune->older_than_ms;
    if (ib_recorder_prune(r, &removed, cutoff, e) != IB_OK)
        return -1;
    printf("pruned=%" PRIu64 "\n", removed);
    return 0;
}

/* stats: the counts, and the events attempted and not ended: `exhausted`
 * ones have used --max-deliver attempts, and their next delivery is
 * dead-lettered without running. */
static int do_stats(ib_recorder *r, int64_t max_deliver, ib_error *e)
{
    ib_recorder_stats s;
    ib_attempt_stats a = {0};
    char o[40] = "-", nw[40] = "-";
    if (ib_recorder_stats_get(r, &s, e) != IB_OK)
        return -1;
    bool counted = ib_recorder_attempt_stats(r, &a, (uint32_t)max_deliver, e) == IB_OK;
    if (!counted && e->status != IB_ERR_UNSUPPORTED)
        return -1;
    if (s.oldest_ts_ms > 0)
        format_ts(o, sizeof(o), s.oldest_ts_ms);
    if (s.newest_ts_ms > 0)
        format_ts(nw, sizeof(nw), s.newest_ts_ms);
    printf("markers=%" PRIu64 " claims=%" PRIu64 " consumers=%" PRIu64
           " oldest=%s newest=%s bytes=%" PRIu64,
           s.markers, s.claims, s.consumers, o, nw, s.storage_bytes);
    if (counted)
        printf(" attempted=%" PRIu64 " exhausted=%" PRIu64, a.attempted, a.exhausted);
    printf("\n");
    return 0;
}

static int run_action(ib_recorder *r, const char *uri, const char *action, const ib_strlist *args,
                      const char *consumer, const event_key *k, int64_t limit, int64_t max_deliver,
                      const prune_args *prune)
{
    char id[IB_ID_BUF_SIZE];
    ib_error e = {0};
    int code = check_target(id, r, uri, action, args, consumer, k);
    if (code != 0)
        return code;
    code = 2; /* unreachable: ib_cmd_markers checked the action */
    if (strcmp(action, "lookup") == 0)
        code = do_lookup(r, consumer, id, &e);
    else if (strcmp(action, "forget") == 0)
        code = do_forget(r, consumer, id, &e);
    else if (strcmp(action, "list") == 0)
        code =
            ib_recorder_list(r, consumer, (size_t)limit, print_marker, NULL, &e) == IB_OK ? 0 : -1;
    else if (strcmp(action, "prune") == 0)
        code = do_prune(r, prune, &e);
    else if (strcmp(action, "stats") == 0)
        code = do_stats(r, max_deliver, &e);
    if (code >= 0)
        return code;
    char msg[sizeof(e.msg) + 64];
    fprintf(stderr, "ibus markers %s: %s\n", action, ib_host_flag_hint(msg, sizeof(msg), e.msg));
    return e.status == IB_ERR_UNSUPPORTED || e.status == IB_ERR_CONFIG ? 2 : 1;
}

/* Everything `ibus markers` parses. */
typedef struct markers_args {
    const char *uri, *consumer;
    event_key key;
    int64_t limit;
    int64_t max_deliver;
    int64_t partitions;        /* a partitioned consumer's: 0 = a recorder's */
    const char *partition_key; /* lookup --partitions: the key the event was published with */
    ib_recorder_options ro;
    prune_args prune;
} markers_args;

/* A partitioned consumer's markers (--partitions N, with --durable): only
 * lookup reads them, from the partition's log (markers_partition.h).
 * Returns the exit code. */
static int run_partitioned(markers_args *m, const ib_strlist *args)
{
    const char *action = args->items[0];
    char id[IB_ID_BUF_SIZE];
    ib_error e = {0};
    if (strcmp(action, "lookup") != 0) {
        fprintf(stderr,
                "ibus markers %s: not for a partitioned consumer (--partitions): its markers are "
                "records of its partition log, which only each partition's owner writes and "
                "which expire with the log's retention; lookup is the action that reads them\n",
                action);
        return 2;
    }
    if (m->prune.durable == NULL || m->prune.durable[0] == '\0') {
        fprintf(stderr, "ibus markers lookup: --partitions needs --durable, the durable of the "
                        "ibus run --partitions processes\n");
        return 2;
    }
    if (m->consumer == NULL || m->consumer[0] == '\0') {
        fprintf(stderr, "ibus markers lookup: --consumer is required (e.g. --consumer "
                        "<durable>/<plugin>/<handler>)\n");
        return 2;
    }
    if (m->partition_key != NULL && ib_partition_key_check(m->partition_key, &e) != IB_OK) {
        fprintf(stderr, "ibus markers lookup: --partition-key: %s\n", e.msg);
        return 2;
    }
    if (need_id(id, args, action, &m->key) != 0)
        return 2;
    ib_nats *n = NULL;
    m->prune.nats.name = "ibus markers";
    if (ib_nats_connect(&n, &m->prune.nats, &e) != IB_OK) {
        fprintf(stderr, "ibus markers lookup: %s\n", e.msg);
        return e.status == IB_ERR_CONFIG ? 2 : 1;
    }
    ib_cli_partition_lookup q = {.durable = m->prune.durable,
                                 .partitions = (uint32_t)m->partitions,
                                 .consumer = m->consumer,
                                 .id = id,
                                 .partition_key = m->partition_key};
    int code = ib_cli_markers_partition_lookup(ib_nats_connection(n), &q);
    ib_nats_close(n, 1000);
    return code;
}

/* Writes the option table of `ibus markers` into `opts` (room for
 * IB_CMD_MAX_OPTIONS), its targets inside `targets` (a markers_args), and
 * returns its length. */
static size_t markers_options(ib_opt *opts, void *targets)
{
    markers_args *m = targets;
    const ib_opt table[] = {
        {"recorder", IB_OPT_STRING, &m->uri, "URI", "sqlite:processed.db",
         "marker store the ibus run processes use: sqlite:PATH or kv:BUCKET", 0, 0},
        {"allow-insecure-db", IB_OPT_FLAG, &m->ro.sqlite_allow_insecure, NULL, NULL,
         "open a marker file (or one in a directory) of another user or writable by others "
         "(never a symlink)",
         0, 0},
        {"consumer", IB_OPT_STRING, &m->consumer, "ID", NULL,
         "consumer identity (<durable>/<plugin>/<handler>)", 0, 0},
        {"key", IB_OPT_STRING, &m->key.key, "STRING", NULL,
         "lookup, forget: the event whose id ibus publish --key STRING derived, in place of ID", 0,
         0},
        {"key-namespace", IB_OPT_STRING, &m->key.key_namespace, "UUID", IB_EVENT_ID_NAMESPACE,
         "namespace of --key, as given to ibus publish --key-namespace", 0, 0},
        {"limit", IB_OPT_INT, &m->limit, "N", "100", "list at most N markers (0 = all)", 0,
         1000000000},
        {"max-deliver", IB_OPT_INT, &m->max_deliver, "N", "5",
         "stats: the --max-deliver of the ibus run processes; events with that many attempts "
         "count as exhausted",
         1, 1000},
        {"older-than", IB_OPT_DURATION, &m->prune.older_than_ms, "DURATION", NULL,
         "prune markers older than this", 0, 0},
        {"stream", IB_OPT_STRING, &m->prune.stream, "NAME", NULL,
         "prune: the stream whose MaxAge bounds --older-than", 0, 0},
        {"durable", IB_OPT_STRING, &m->prune.durable, "NAME", NULL,
         "prune: the consumer whose redelivery settings bound --older-than too; with "
         "--partitions: the durable of the partitioned consumer",
         0, 0},
        {"partitions", IB_OPT_INT, &m->partitions, "N", "0",
         "lookup: the markers of a partitioned consumer (ibus run --partitions N --durable "
         "NAME), read from its partition log, not from --recorder; 0 = a recorder's",
         0, 4096},
        {"partition-key", IB_OPT_STRING, &m->partition_key, "KEY", NULL,
         "lookup --partitions: the partition key the event was published with (ibus publish "
         "--partition-key); default: its id",
         0, 0},
        {"retry-max-delay", IB_OPT_DURATION, &m->prune.retry_max_ms, "DURATION", "1m",
         "prune: the --retry-max-delay of the ibus run processes", 1, 86400000},
        {"force", IB_OPT_FLAG, &m->prune.force, NULL, NULL,
         "prune: skip the check against the stream and consumer", 0, 0},
        IB_NATS_OPTIONS(&m->prune.nats),
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* Opens the recorder. A kv: URI without url= gets a connection made from
 * the connection options, as `ibus run` makes its own (--nats-url, --creds,
 * TLS, ...); it is returned in *n, to close after the recorder. Returns
 * 0, or the exit code after saying why. */
static int open_recorder(ib_recorder **r, ib_nats **n, markers_args *m)
{
    ib_error e;
    *n = NULL;
    m->prune.nats.name = "ibus markers";
    if (ib__recorder_uri_needs_connection(m->uri)) {
        if (ib_nats_connect(n, &m->prune.nats, &e) != IB_OK) {
            fprintf(stderr, "ibus markers: the recorder's NATS connection (--nats-url): %s\n",
                    e.msg);
            return e.status == IB_ERR_CONFIG ? 2 : 1;
        }
        m->ro.nats_connection = ib_nats_connection(*n);
        m->ro.kv_js_api_prefix = ib_nats_api_prefix(*n);
    }
    if (ib_recorder_open(r, m->uri, &m->ro, &e) != IB_OK) {
        char msg[sizeof(e.msg) + 64];
        fprintf(stderr, "ibus markers: %s\n", ib_host_flag_hint(msg, sizeof(msg), e.msg));
        ib_nats_close(*n, 1000);
        *n = NULL;
        return e.status == IB_ERR_CONFIG || e.status == IB_ERR_SCHEMA ? 2 : 1;
    }
    return 0;
}

/* An in-process recorder (memory:, sqlite::memory:) lives inside each
 * ibus run process: this one would be new and empty, and every answer a
 * guess. Returns 0 for a recorder other processes write, else 2 after
 * saying so. */
static int check_readable(ib_recorder *r, const char *uri)
{
    char path[4096];
    const char *kind = ib_recorder_kind(r);
    bool in_process =
        strcmp(kind, "memory") == 0 ||
        (strcmp(kind, "sqlite") == 0 && !ib__recorder_uri_sqlite_path(uri, path, sizeof(path)));
    if (!in_process)
        return 0;
    fprintf(stderr,
            "ibus markers: recorder %s keeps its markers inside each ibus run process; ibus "
            "markers would open an empty one of its own (name a sqlite: file or a kv: bucket)\n",
            uri);
    return 2;
}

int ib_cmd_markers(int argc, char **argv)
{
    markers_args m;
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    ib_strlist args;
    bool help = false;
    ib_error e;
    int code = 2;

    memset(&args, 0, sizeof(args));
    memset(&m, 0, sizeof(m));
    m.ro.size = sizeof(m.ro);
    const size_t n = markers_options(opts, &m);
    if (ib_opts_parse(opts, n, argc, argv, &args, &help, &e) != IB_OK) {
        fprintf(stderr, "ibus markers: %s\n", e.msg);
        goto out;
    }
    if (help || args.count == 0) {
        ib_cmd_usage(help ? stdout : stderr, &ib_cmd_markers_desc, opts, n);
        code = help ? 0 : 2;
        goto out;
    }
    if (ib_cmd_action_find(&ib_cmd_markers_desc, args.items[0]) == NULL) {
        char known[128];
        fprintf(stderr, "ibus markers: unknown action '%s' (%s)\n", args.items[0],
                ib_cmd_actions_list(known, sizeof(known), &ib_cmd_markers_desc));
        goto out;
    }
    if (ib_cli_check_text("markers", "--consumer", ib_cli_given(m.consumer)) != 0 ||
        ib_cli_check_name("markers", "--stream", ib_cli_given(m.prune.stream)) != 0 ||
        ib_cli_check_name("markers", "--durable", ib_cli_given(m.prune.durable)) != 0)
        goto out;
    char why[640];
    if (ib_cli_nats_check(&m.prune.nats, why, sizeof(why)) != 0) {
        fprintf(stderr, "ibus markers: %s\n", why);
        goto out;
    }
    if (m.partition_key != NULL && m.partitions == 0) {
        fprintf(stderr, "ibus markers: --partition-key needs --partitions\n");
        goto out;
    }
    if (m.partitions > 0) {
        code = run_partitioned(&m, &args);
        goto out;
    }
    ib_recorder *r = NULL;
    ib_nats *nc = NULL;
    /* no action creates a marker file: a typo in --recorder says so */
    m.ro.sqlite_must_exist = true;
    code = open_recorder(&r, &nc, &m);
    if (code != 0)
        goto out;
    char shown[IB_REDACT_MAX]; /* the URI as messages show it */
    ib_redact_url(shown, sizeof(shown), m.uri);
    code = check_readable(r, shown);
    if (code != 0) {
        ib_recorder_close(r);
        goto out;
    }
    code = run_action(r, shown, args.items[0], &args, m.consumer, &m.key, m.limit, m.max_deliver,
                      &m.prune);
    ib_recorder_close(r);
    ib_nats_close(nc, 1000);
out:
    ib_opts_release(opts, n);
    return code;
}

/* The actions, in the order --help and the manual page list them. */
static const ib_cmd_action markers_actions[] = {
    {"lookup", "ID",
     "whether --consumer has marked event ID (or the event of --key), and when; else its claim "
     "and attempts (exit 3; exit 2 for an identity the recorder has no markers of, matched "
     "exactly part by part); with --partitions, from the event's partition log, whether in "
     "flight, and its attempts"},
    {"list", NULL, "the newest markers, of --consumer or of all consumers (--limit)"},
    {"forget", "ID",
     "remove --consumer's marker and attempts of event ID (or the event of --key), so a "
     "redelivery runs it again"},
    {"prune", NULL,
     "remove the markers older than --older-than, checked against --stream and --durable"},
    {"stats", NULL,
     "counts of markers, claims, consumers, attempted and exhausted events (--max-deliver), "
     "oldest and newest, bytes"},
};

const ib_cmd_desc ib_cmd_markers_desc = {
    .name = "markers",
    .synopsis = "[options] ACTION [ID]",
    .summary = "inspect, forget and prune markers in a recorder",
    .description =
        "Inspect, forget and prune markers in a recorder. prune refuses an age shorter than the "
        "time the stream can still deliver a message (the floor ibus run --retention checks "
        "too), read from the server: --stream for MaxAge, --durable for the redelivery horizon; "
        "--force skips the check. --consumer names an identity exactly, part by part: one the "
        "recorder has no markers of is exit 2 with the identities it knows, never a quiet "
        "\"not processed\". lookup and forget take the event as its ID or as the business key "
        "ibus publish --key derived its id from (--key, and --key-namespace when publish was "
        "given one). A kv: recorder without url= in its URI is opened on a "
        "connection made from the connection options (--nats-url, --creds, --tls-*, "
        "--js-domain), as ibus run opens it. A partitioned consumer (ibus run --partitions) "
        "keeps its markers in its partition log: --partitions N --durable NAME lookup reads "
        "the event's partition (computed from its id, or from --partition-key) without "
        "writing anything, and prints the same lines (exit 0 marked, 3 not); list, forget, "
        "prune and stats are refused for it.",
    .actions = markers_actions,
    .nactions = sizeof(markers_actions) / sizeof(markers_actions[0]),
    .options = markers_options,
    .targets_size = sizeof(markers_args),
    .main = ib_cmd_markers,
};
