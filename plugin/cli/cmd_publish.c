/* SPDX-License-Identifier: Apache-2.0 */
/* ibus publish: events from arguments, generated, or JSON lines on stdin,
 * published to JetStream asynchronously with acknowledgement.
 *
 *   ibus publish --type order.created '{"n":1}' '{"n":2}'
 *   ibus publish --type order.created --count 10000 --duplicates 0.1
 *   ibus publish < events.jsonl     one {"type":..,"payload":..,"id":..?} per line
 *
 * --duplicates R republishes a fraction R of the events, with the same id,
 * as new messages (no Nats-Msg-Id, so JetStream keeps them): what a
 * producer retry or a replay looks like to a consumer.
 *
 * The summary counts messages (published), distinct event ids among them
 * (unique: an id sent again in the same run, by any means, is one of the
 * duplicates), messages JetStream did not acknowledge (failed: an error,
 * or no answer within --ack-timeout) and those it did (stored), so that
 * published = stored + failed. Every error names the subject. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "jetstream.h"
#include "commands.h"
#include "input_check.h"
#include "nats_options.h"
#include "options.h"
#include "partition.h"
#include "seen_ids.h"
#include "uuid.h"
#include "clock.h"
#include <infinity_bus/idempotency.h>

typedef struct publish_cfg {
    ib_nats_config nats;
    const char *subject;
    const char *prefix;
    const char *type;
    const char *source;
    const char *id;
    const char *key;           /* --key: the arguments' id is derived from it */
    const char *key_namespace; /* --key-namespace */
    char key_id[IB_ID_BUF_SIZE];
    const char *ids_file;
    int64_t count;
    int64_t payload_size;
    int64_t max_pending;
    int64_t seed;
    int64_t ack_timeout_ms;
    double duplicates;
    bool raw;
    bool unchecked_id;
    bool msg_id;
    bool quiet;
    int64_t partitions;        /* --partitions: 0 = none */
    const char *partition_key; /* --partition-key: the arguments' key */
    const char *traceparent;   /* --traceparent: a W3C traceparent, or "new" */
    const char *tracestate;    /* --tracestate */
    ib_trace trace;            /* what every event carries, when `traced` */
    bool traced;
} publish_cfg;

typedef struct publisher {
    const publish_cfg *cfg;
    jsCtx *js;
    FILE *ids;
    uint64_t state; /* xorshift state for --duplicates and payloads */
    uint64_t published, unique, duplicates;
    atomic_ullong failed;
    ib_seen_ids seen; /* the ids given (--id, --key, JSON lines) sent so far */
    bool progress;
    bool version_warned; /* said once that an id's version needs --uuid-versions */
    int64_t last_progress;
    int64_t total_hint;
} publisher;

static uint64_t next_rand(publisher *p)
{
    uint64_t x = p->state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return p->state = x;
}

/* Why a publish to `subject` failed, for a person: a "no responders"
 * answer means no stream captures the subject. */
static void say_failed(const char *subject, natsStatus s, const char *text)
{
    if (s == NATS_NO_RESPONDERS)
        fprintf(stderr,
                "ibus publish: %s: no stream captures this subject (%s): create one whose "
                "subjects match it, e.g. ibus run --create --stream-subjects, or publish under "
                "another --prefix or --subject\n",
                subject, natsStatus_GetText(s));
    else
        fprintf(stderr, "ibus publish: %s: not acknowledged: %s\n", subject,
                text != NULL ? text : natsStatus_GetText(s));
}

static void on_async_error(jsCtx *js, jsPubAckErr *pae, void *closure)
{
    (void)js;
    publisher *p = closure;
    /* the first five are said; the count says the rest */
    if (atomic_fetch_add(&p->failed, 1) < 5)
        say_failed(pae->Msg != NULL ? natsMsg_GetSubject(pae->Msg) : "?", pae->Err, pae->ErrText);
}

static void show_progress(publisher *p, bool final)
{
    if (!p->progress)
        return;
    int64_t now = ib_clock_monotonic_ms();
    if (!final && now - p->last_progress < 250)
        return;
    p->last_progress = now;
    if (p->total_hint > 0)
        fprintf(stderr, "\rpublished %" PRIu64 " messages (%" PRIu64 "/%" PRId64 " events)%s",
                p->published, p->unique, p->total_hint, final ? "\n" : "");
    else
        fprintf(stderr, "\rpublished %" PRIu64 " messages%s", p->published, final ? "\n" : "");
}

/* Publishes `*m` asynchronously; the JetStream context takes it on
 * success, and it is destroyed otherwise. */
static int send_msg(publisher *p, natsMsg **m)
{
    p->published++;
    natsStatus s = js_PublishMsgAsync(p->js, m, NULL);
    if (s != NATS_OK) {
        atomic_fetch_add(&p->failed, 1);
        say_failed(natsMsg_GetSubject(*m), s, NULL);
        natsMsg_Destroy(*m);
        *m = NULL;
        return -1;
    }
    show_progress(p, false);
    return 0;
}

static int send_bytes(publisher *p, const char *subject, const void *data, size_t len)
{
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, subject, NULL, data, (int)len);
    if (s == NATS_OK && p->cfg->traced)
        s = ib_msg_trace_set(m, &p->cfg->trace);
    if (s != NATS_OK) {
        fprintf(stderr, "ibus publish: %s: %s\n", subject, natsStatus_GetText(s));
        return -1;
    }
    return send_msg(p, &m);
}

/* Whether the next event is also published again, with probability
 * --duplicates. */
static bool draw_duplicate(publisher *p)
{
    double r = p->cfg->duplicates;
    return r > 0 && (double)(next_rand(p) >> 11) / 9007199254740992.0 < r;
}

/* Says once per run that a given id's UUID version is one a default
 * `ibus run` refuses (it accepts 4 and 8), so the events would be
 * dead-lettered as invalid-id unless the consumers widen the set. */
static void warn_version(publisher *p, const char *given_id)
{
    if (given_id == NULL || p->cfg->unchecked_id || p->version_warned)
        return;
    int v = ib_id_version(given_id, strlen(given_id));
    if (v < 0 || (IB_ID_VERSIONS_DEFAULT_SET & IB_ID_VERSION(v)) != 0)
        return;
    p->version_warned = true;
    char widen[16] = "any";
    if (v >= 1 && v <= 8)
        snprintf(widen, sizeof(widen), "4,%d,8", v);
    fprintf(stderr,
            "ibus publish: id %s is a UUID version %d: a default ibus run accepts versions 4 and "
            "8 and dead-letters it as invalid-id (start the consumers with --uuid-versions %s)\n",
            given_id, v, widen);
}

/* Publishes one event, and a duplicate of it with probability --duplicates:
 * the same bytes as a new message without Nats-Msg-Id. */
static int publish_event(publisher *p, const char *type, const void *payload, size_t len,
                         const char *given_id, const char *subject_override,
                         const char *partition_key)
{
    char id[IB_ID_BUF_SIZE + 64];
    const publish_cfg *c = p->cfg;
    natsMsg *m = NULL;
    ib_error e;

    if (type == NULL || type[0] == '\0') {
        fprintf(stderr, "ibus publish: an event needs a type (--type or \"type\")\n");
        return -1;
    }
    ib_bus_event ev = {
        .type = type,
        .id = given_id,
        .id_as_given = c->unchecked_id,
        .subject = subject_override != NULL ? subject_override : c->subject,
        .prefix = c->prefix,
        .source = c->source,
        .payload = payload,
        .payload_len = len,
        .set_msg_id = c->msg_id,
        .trace = c->traced ? &c->trace : NULL,
        .partitions = (uint32_t)c->partitions,
        .partition_key = partition_key,
    };
    warn_version(p, given_id);
    ib_status st = ib_bus_event_msg(&m, id, sizeof(id), &ev, &e);
    if (st != IB_OK) {
        if (st == IB_ERR_INVALID_ID)
            fprintf(stderr,
                    "ibus publish: id '%s' is not a UUID (use --unchecked-id to send it "
                    "anyway)\n",
                    given_id);
        else
            fprintf(stderr, "ibus publish: %s\n", e.msg);
        return -1;
    }
    /* Copied before the publish takes `m`; drawn first, which changes no
     * sequence: a failed publish ends the whole run. */
    natsMsg *again = NULL;
    if (draw_duplicate(p) && natsMsg_Create(&again, natsMsg_GetSubject(m), NULL, natsMsg_GetData(m),
                                            natsMsg_GetDataLength(m)) != NATS_OK) {
        fprintf(stderr, "ibus publish: out of memory for a duplicate\n");
        natsMsg_Destroy(m);
        return -1;
    }
    int rc = send_msg(p, &m);
    /* a fresh id is new; a given one may repeat one sent before */
    int fresh = rc != 0 ? 0 : given_id == NULL ? 1 : ib_seen_ids_add(&p->seen, id);
    if (fresh < 0) {
        fprintf(stderr, "ibus publish: out of memory for the ids sent\n");
        rc = -1;
    } else if (rc == 0 && fresh == 0) {
        p->duplicates++;
    } else if (rc == 0) {
        p->unique++;
        if (p->ids != NULL)
            fprintf(p->ids, "%s\n", id);
    }
    if (rc == 0 && again != NULL && (rc = send_msg(p, &again)) == 0)
        p->duplicates++;
    natsMsg_Destroy(again);
    return rc;
}

static int publish_json_line(publisher *p, const char *line, size_t lineno)
{
    json_error_t jerr;
    json_t *root = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (root == NULL || !json_is_object(root)) {
        fprintf(stderr, "ibus publish: stdin line %zu: not a JSON object: %s\n", lineno,
                root == NULL ? jerr.text : "expected {...}");
        goto out;
    }
    json_t *type = json_object_get(root, "type");
    json_t *payload = json_object_get(root, "payload");
    json_t *id = json_object_get(root, "id");
    json_t *subject = json_object_get(root, "subject");
    const char *t = json_is_string(type) ? json_string_value(type) : p->cfg->type;
    const char *data = "";
    size_t len = 0;
    char *dumped = NULL;
    if (json_is_string(payload)) {
        data = json_string_value(payload);
        len = json_string_length(payload);
    } else if (payload != NULL && !json_is_null(payload)) {
        dumped = json_dumps(payload, JSON_COMPACT);
        data = dumped != NULL ? dumped : "";
        len = strlen(data);
    }
    json_t *key = json_object_get(root, "key");
    json_t *pkey = json_object_get(root, "partition_key");
    char derived[IB_ID_BUF_SIZE];
    ib_error e;
    if (pkey != NULL && (!json_is_string(pkey) || p->cfg->partitions == 0)) {
        fprintf(stderr,
                "ibus publish: stdin line %zu: \"partition_key\" must be a string, and needs "
                "--partitions\n",
                lineno);
    } else if (pkey != NULL && ib_partition_key_check(json_string_value(pkey), &e) != IB_OK) {
        fprintf(stderr, "ibus publish: stdin line %zu: \"partition_key\": %s\n", lineno, e.msg);
    } else if (id != NULL && !json_is_string(id)) {
        fprintf(stderr, "ibus publish: stdin line %zu: \"id\" must be a string\n", lineno);
    } else if (key != NULL && (!json_is_string(key) || id != NULL)) {
        fprintf(stderr, "ibus publish: stdin line %zu: \"key\" must be a string, without \"id\"\n",
                lineno);
    } else {
        const char *given = id != NULL ? json_string_value(id) : NULL;
        if (key != NULL &&
            ib_event_id_derive(derived, p->cfg->key_namespace, json_string_value(key),
                               json_string_length(key), NULL) == IB_OK)
            given = derived;
        rc = publish_event(p, t, data, len, given,
                           json_is_string(subject) ? json_string_value(subject) : NULL,
                           pkey != NULL ? json_string_value(pkey) : p->cfg->partition_key);
    }
    free(dumped);
out:
    json_decref(root);
    return rc;
}

static int publish_all(publisher *p, const ib_strlist *args)
{
    const publish_cfg *c = p->cfg;
    if (c->raw) {
        /* the subject an event would get: --subject, else <prefix>.<type>,
         * else <prefix>.raw */
        char subject[512];
        if (c->subject != NULL)
            snprintf(subject, sizeof(subject), "%s", c->subject);
        else
            snprintf(subject, sizeof(subject), "%s.%s", c->prefix,
                     c->type != NULL ? c->type : "raw");
        for (size_t i = 0; i < args->count; i++)
            if (send_bytes(p, subject, args->items[i], strlen(args->items[i])) != 0)
                return -1;
        return 0;
    }
    if (args->count > 0) {
        for (size_t i = 0; i < args->count; i++)
            if (publish_event(p, c->type, args->items[i], strlen(args->items[i]), c->id, NULL,
                              c->partition_key) != 0)
                return -1;
        return 0;
    }
    if (c->count > 0) {
        size_t size = (size_t)c->payload_size;
        char *payload = malloc(size + 1);
        if (payload == NULL)
            return -1;
        p->total_hint = c->count;
        for (int64_t i = 0; i < c->count; i++) {
            for (size_t b = 0; b < size; b++)
                payload[b] = (char)('a' + (next_rand(p) % 26));
            if (publish_event(p, c->type, payload, size, NULL, NULL, c->partition_key) != 0) {
                free(payload);
                return -1;
            }
        }
        free(payload);
        return 0;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (got == 0)
            continue;
        if (publish_json_line(p, line, lineno) != 0) {
            rc = -1;
            break;
        }
    }
    free(line);
    return rc;
}

/* --traceparent and --tracestate: the trace every event carries, checked
 * here (a consumer would drop a malformed one in silence). Prints why and
 * returns -1. */
static int check_trace(publish_cfg *c)
{
    ib_error e;
    const char *tp = c->traceparent, *ts = c->tracestate;
    if (ts != NULL && (tp == NULL || tp[0] == '\0')) {
        fprintf(stderr, "ibus publish: --tracestate needs --traceparent\n");
        return -1;
    }
    if (tp == NULL || tp[0] == '\0')
        return 0;
    if (strcmp(tp, "new") == 0) {
        if (ib_trace_start(&c->trace, &e) != IB_OK) {
            fprintf(stderr, "ibus publish: --traceparent new: %s\n", e.msg);
            return -1;
        }
    } else if (!ib_trace_parse(&c->trace, tp, strlen(tp))) {
        fprintf(stderr,
                "ibus publish: --traceparent: '%s' is not a W3C traceparent "
                "(00-<32 hex digits, the trace id>-<16 hex digits, the parent span id>-<2 hex "
                "digits, the flags>, lower case, ids not all zero), nor 'new'\n",
                tp);
        return -1;
    }
    if (ts != NULL && !ib_trace_state_parse(&c->trace, ts, strlen(ts))) {
        fprintf(stderr,
                "ibus publish: --tracestate: '%s' is not a W3C tracestate (key=value list "
                "members separated by commas, at most 32, each key once)\n",
                ts);
        return -1;
    }
    c->traced = true;
    return 0;
}

/* What the option table cannot check. Prints why and returns -1. */
static int check_cfg(publish_cfg *c, const ib_strlist *args)
{
    ib_error e;
    if (check_trace(c) != 0)
        return -1;
    if (c->key != NULL && c->id != NULL) {
        fprintf(stderr, "ibus publish: give --id or --key, not both\n");
        return -1;
    }
    if (ib_event_id_derive(c->key_id, c->key_namespace, "", 0, &e) != IB_OK) {
        fprintf(stderr, "ibus publish: --key-namespace: '%s' is not a UUID: %s\n", c->key_namespace,
                e.msg);
        return -1;
    }
    /* the arguments then carry the derived id, as if given with --id */
    if (c->key != NULL) {
        ib_event_id_derive(c->key_id, c->key_namespace, c->key, strlen(c->key), NULL);
        c->id = c->key_id;
    }
    if (c->duplicates < 0 || c->duplicates > 1) {
        fprintf(stderr, "ibus publish: --duplicates: expected a fraction in 0..1\n");
        return -1;
    }
    if (c->partition_key != NULL && c->partitions == 0) {
        fprintf(stderr, "ibus publish: --partition-key needs --partitions\n");
        return -1;
    }
    if (c->partitions > 0 && c->raw) {
        fprintf(stderr, "ibus publish: --partitions needs events, not --raw bytes\n");
        return -1;
    }
    if (c->partition_key != NULL && ib_partition_key_check(c->partition_key, &e) != IB_OK) {
        fprintf(stderr, "ibus publish: --partition-key: %s\n", e.msg);
        return -1;
    }
    if ((args->count > 0 || c->count > 0) && !c->raw && c->type == NULL) {
        fprintf(stderr, "ibus publish: --type: needed for arguments and --count\n");
        return -1;
    }
    /* a subject is a token of the protocol line: nothing may end it early */
    if (ib_cli_check_subject("publish", "--subject", ib_cli_given(c->subject),
                             IB_SUBJECT_NOT_SYSTEM) != 0 ||
        ib_cli_check_subject("publish", "--prefix", c->prefix, IB_SUBJECT_NOT_SYSTEM) != 0)
        return -1;
    return 0;
}

/* After --ack-timeout: every publish still unanswered counts as failed,
 * and the first subjects are named. */
static void count_unanswered(publisher *p)
{
    natsMsgList pending = {0};
    if (js_PublishAsyncGetPendingList(&pending, p->js) != NATS_OK)
        return;
    atomic_fetch_add(&p->failed, (unsigned long long)pending.Count);
    char subjects[512] = "";
    size_t used = 0;
    for (int i = 0; i < pending.Count && i < 3 && used < sizeof(subjects); i++)
        used += (size_t)snprintf(subjects + used, sizeof(subjects) - used, "%s%s",
                                 i > 0 ? ", " : "", natsMsg_GetSubject(pending.Msgs[i]));
    fprintf(stderr,
            "ibus publish: %d publishes not acknowledged within --ack-timeout %" PRId64
            "ms (subjects %s%s): the stream may or may not have stored them\n",
            pending.Count, p->cfg->ack_timeout_ms, subjects, pending.Count > 3 ? ", ..." : "");
    natsMsgList_Destroy(&pending);
}

/* Waits for every acknowledgement and prints the summary; returns the exit
 * code given how publishing went (`rc`). */
static int finish(publisher *p, int rc)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = p->cfg->ack_timeout_ms;
    natsStatus s = js_PublishAsyncComplete(p->js, &po);
    show_progress(p, true);
    if (s == NATS_TIMEOUT)
        count_unanswered(p);
    else if (s != NATS_OK)
        fprintf(stderr, "ibus publish: waiting for the acknowledgements: %s\n",
                natsStatus_GetText(s));
    uint64_t failed = atomic_load(&p->failed);
    /* every publish that was not acknowledged counted as failed */
    uint64_t stored = p->published > failed ? p->published - failed : 0;
    if (!p->cfg->quiet)
        printf("published=%" PRIu64 " unique=%" PRIu64 " duplicates=%" PRIu64 " failed=%" PRIu64
               " stored=%" PRIu64 "%s%s\n",
               p->published, p->unique, p->duplicates, failed, stored,
               p->cfg->traced ? " traceparent=" : "",
               p->cfg->traced ? p->cfg->trace.traceparent : "");
    if (p->published > 0 && stored == 0)
        fprintf(stderr,
                "ibus publish: nothing was stored: none of the %" PRIu64
                " publishes was acknowledged\n",
                p->published);
    return rc == 0 && s == NATS_OK && failed == 0 ? 0 : 1;
}

/* Connects, publishes everything and closes the connection. Returns the
 * exit code: 2 for unusable connection settings, 1 for any other failure. */
static int connect_and_publish(publisher *p, const ib_strlist *args)
{
    const publish_cfg *c = p->cfg;
    ib_nats *n = NULL;
    ib_error e;
    int code = 1;
    char why[640];

    if (ib_cli_nats_check(&c->nats, why, sizeof(why)) != 0) {
        fprintf(stderr, "ibus publish: %s\n", why);
        return 2;
    }
    if (ib_nats_connect(&n, &c->nats, &e) != IB_OK) {
        fprintf(stderr, "ibus publish: %s\n", e.msg);
        return e.status == IB_ERR_CONFIG ? 2 : 1;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = c->max_pending;
    jo.PublishAsync.ErrHandler = on_async_error;
    jo.PublishAsync.ErrHandlerClosure = p;
    jo.Prefix = ib_nats_api_prefix(n); /* the same JetStream as --js-domain/--js-api-prefix name */
    if (natsConnection_JetStream(&p->js, ib_nats_connection(n), &jo) != NATS_OK)
        fprintf(stderr, "ibus publish: cannot create a JetStream context\n");
    else
        code = finish(p, publish_all(p, args));
    jsCtx_Destroy(p->js);
    p->js = NULL;
    ib_nats_close(n, 5000);
    return code;
}

/* Writes the option table of `ibus publish` into `opts` (room for
 * IB_CMD_MAX_OPTIONS), its targets inside `targets` (a publish_cfg), and
 * returns its length. */
static size_t publish_options(ib_opt *opts, void *targets)
{
    publish_cfg *c = targets;
    const ib_opt table[] = {
        IB_NATS_OPTIONS(&c->nats),
        {"type", IB_OPT_STRING, &c->type, "TYPE", NULL,
         "event type (JSON lines may give their own)", 0, 0},
        {"subject", IB_OPT_STRING, &c->subject, "SUBJECT", NULL,
         "subject to publish on (default <prefix>.<type>)", 0, 0},
        {"prefix", IB_OPT_STRING, &c->prefix, "PREFIX", "events", "subject prefix", 0, 0},
        {"source", IB_OPT_STRING, &c->source, "NAME", "ibus-publish", "Event.source", 0, 0},
        {"id", IB_OPT_STRING, &c->id, "UUID", NULL, "id for the events given as arguments", 0, 0},
        {"key", IB_OPT_STRING, &c->key, "STRING", NULL,
         "derive the arguments' id from STRING, any text such as a webhook's evt_ id: the same "
         "key gives the same uuid8 id (ib_event_id_derive); JSON lines may give \"key\"",
         0, 0},
        {"key-namespace", IB_OPT_STRING, &c->key_namespace, "UUID", IB_EVENT_ID_NAMESPACE,
         "namespace of --key and \"key\" (one per kind of key)", 0, 0},
        {"count", IB_OPT_INT, &c->count, "N", "0", "publish N generated events", 0, 100000000},
        {"payload-size", IB_OPT_INT, &c->payload_size, "BYTES", "128",
         "payload size of generated events", 0, 1048576},
        {"duplicates", IB_OPT_DOUBLE, &c->duplicates, "R", "0",
         "republish this fraction of events with the same id", 0, 0},
        {"seed", IB_OPT_INT, &c->seed, "N", "1", "seed for --duplicates and generated payloads", 0,
         0},
        {"max-pending", IB_OPT_INT, &c->max_pending, "N", "4096",
         "unacknowledged publishes in flight", 1, 1000000},
        {"ack-timeout", IB_OPT_DURATION, &c->ack_timeout_ms, "DURATION", "30s",
         "how long to wait for the last acknowledgements; publishes unanswered by then count "
         "as failed",
         1, 3600000},
        {"partitions", IB_OPT_INT, &c->partitions, "N", "0",
         "publish to partition subjects <subject or prefix>.<p>.<key>, p the key's partition of "
         "N (FNV-1a, as a server mapping's partition()); 0: not partitioned",
         0, IB_PARTITIONS_MAX},
        {"partition-key", IB_OPT_STRING, &c->partition_key, "KEY", NULL,
         "with --partitions: the arguments' and generated events' key, one subject token "
         "(default: each event's id); JSON lines may give \"partition_key\"",
         0, 0},
        {"ids-file", IB_OPT_STRING, &c->ids_file, "FILE", NULL,
         "write each unique event id to FILE", 0, 0},
        {"msg-id", IB_OPT_FLAG, &c->msg_id, NULL, NULL,
         "set Nats-Msg-Id to the event id (JetStream drops republishes in its window)", 0, 0},
        {"raw", IB_OPT_FLAG, &c->raw, NULL, NULL,
         "publish the arguments as raw bytes, not as Events, to the subject an event would get "
         "(<prefix>.raw without --type; testing)",
         0, 0},
        {"unchecked-id", IB_OPT_FLAG, &c->unchecked_id, NULL, NULL,
         "send ids as given, even when they are not UUIDs (testing)", 0, 0},
        {"quiet", IB_OPT_FLAG, &c->quiet, NULL, NULL, "no summary line", 0, 0},
        {"traceparent", IB_OPT_STRING, &c->traceparent, "TRACEPARENT|new", NULL,
         "W3C traceparent every event carries (NATS header and Event header), to continue a "
         "trace; 'new' starts one (printed in the summary line)",
         0, 0},
        {"tracestate", IB_OPT_STRING, &c->tracestate, "LIST", NULL,
         "W3C tracestate sent with --traceparent", 0, 0},
    };
    _Static_assert(sizeof(table) / sizeof(table[0]) <= IB_CMD_MAX_OPTIONS, "too many options");
    memcpy(opts, table, sizeof(table));
    return sizeof(table) / sizeof(table[0]);
}

/* --ids-file, truncated or created as fopen's "w" would, but a symbolic
 * link planted at its path is refused (ELOOP), not followed: the run would
 * otherwise overwrite whatever file it names. NULL with errno set. */
static FILE *open_ids_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        int err = errno;
        close(fd);
        errno = err;
    }
    return f;
}

int ib_cmd_publish(int argc, char **argv)
{
    publish_cfg c;
    publisher p;
    ib_strlist args;
    bool help = false;
    ib_error e;
    int code = 2;

    memset(&c, 0, sizeof(c));
    memset(&p, 0, sizeof(p));
    memset(&args, 0, sizeof(args));
    ib_opt opts[IB_CMD_MAX_OPTIONS];
    const size_t nopts = publish_options(opts, &c);

    if (ib_opts_parse(opts, nopts, argc, argv, &args, &help, &e) != IB_OK) {
        fprintf(stderr, "ibus publish: %s\n", e.msg);
        goto out;
    }
    if (help) {
        ib_cmd_usage(stdout, &ib_cmd_publish_desc, opts, nopts);
        code = 0;
        goto out;
    }
    if (check_cfg(&c, &args) != 0)
        goto out;
    p.cfg = &c;
    p.state = (uint64_t)c.seed * 0x9E3779B97F4A7C15ull + 1;
    p.progress = isatty(STDERR_FILENO) && !c.quiet;
    if (c.ids_file != NULL && (p.ids = open_ids_file(c.ids_file)) == NULL) {
        fprintf(stderr, "ibus publish: --ids-file: cannot write %s: %s\n", c.ids_file,
                errno == ELOOP ? "refusing to follow a symbolic link" : strerror(errno));
        goto out;
    }
    code = connect_and_publish(&p, &args);
out:
    if (p.ids != NULL)
        fclose(p.ids);
    ib_seen_ids_free(&p.seen);
    ib_opts_release(opts, nopts);
    return code;
}

const ib_cmd_desc ib_cmd_publish_desc = {
    .name = "publish",
    .synopsis = "[options] [PAYLOAD...]",
    .summary = "publish events (arguments, generated, or JSON lines on stdin)",
    .description = "Publish events as protobuf with uuid4 ids: the arguments (one event each), "
                   "--count generated events, or JSON lines from stdin "
                   "({\"type\":..,\"payload\":..,\"id\":..}). Waits for every "
                   "acknowledgement (at most --ack-timeout), then prints a summary line: "
                   "published=N unique=U duplicates=D failed=F stored=S, where an id sent "
                   "again in the same run counts among the duplicates, a publish not "
                   "acknowledged in time counts as failed, and stored counts those the stream "
                   "acknowledged (N = S + F); exit 1 when any failed, and when none was stored.",
    .options = publish_options,
    .targets_size = sizeof(publish_cfg),
    .main = ib_cmd_publish,
};
