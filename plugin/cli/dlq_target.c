/* SPDX-License-Identifier: Apache-2.0 */
/* Where a dead letter may be replayed (dlq.h, "Where a dead letter may be
 * replayed"). The dead letter is input: its Ibus-Subject could name any
 * subject the operator's credentials may publish to, and a replay with a
 * wide set of rights is exactly what a forger wants (a purge of a stream
 * through $JS.API.STREAM.PURGE.<name>). So the subject must be a plain one
 * outside $ and _INBOX, and JetStream itself is asked which stream captures
 * it: only the stream the dead letter names will do. A subject that moved
 * to another stream since is skipped too: replaying it would hand the event
 * to consumers it was never meant for. */
#include "dlq.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jetstream.h"
#include "js_api.h"

/* Subjects remembered per run; beyond that each is asked again. */
#define CACHE_MAX 64

/* One subject and the stream capturing it ("" = none, "\n" = several). */
typedef struct cached {
    char *subject;
    char stream[IB_DLQ_STREAM_MAX + 1];
} cached;

struct ib_dlq_targets {
    natsConnection *nc;
    char names_subject[IB_JS_API_PREFIX_MAX + 16]; /* <api prefix>.STREAM.NAMES */
    int64_t timeout_ms;
    cached cache[CACHE_MAX];
    size_t n;
};

ib_dlq_targets *ib_dlq_targets_create(natsConnection *nc, const char *api_prefix,
                                      int64_t timeout_ms)
{
    ib_dlq_targets *t = calloc(1, sizeof(*t));
    if (t != NULL) {
        t->nc = nc;
        snprintf(t->names_subject, sizeof(t->names_subject), "%s.STREAM.NAMES",
                 api_prefix != NULL ? api_prefix : IB_JS_API_DEFAULT);
        t->timeout_ms = timeout_ms;
    }
    return t;
}

void ib_dlq_targets_free(ib_dlq_targets *t)
{
    for (size_t i = 0; t != NULL && i < t->n; i++)
        free(t->cache[i].subject);
    free(t);
}

int ib_dlq_target_precheck(const ib_dlq_entry *e, char *why, size_t cap)
{
    if (e->invalid[0] != '\0') {
        snprintf(why, cap, "%s", e->invalid);
        return -1;
    }
    if (e->subject == NULL || e->subject[0] == '\0') {
        snprintf(why, cap, "no Ibus-Subject (the subject to replay to)");
        return -1;
    }
    const char *p = ib_nats_subject_problem(e->subject, IB_SUBJECT_NOT_SYSTEM);
    if (p != NULL) {
        snprintf(why, cap, "the target %s", p);
        return -1;
    }
    if (e->stream == NULL || e->stream[0] == '\0') {
        snprintf(why, cap, "no Ibus-Stream (the stream its subject must belong to)");
        return -1;
    }
    p = ib_nats_name_problem(e->stream);
    if (p != NULL) {
        snprintf(why, cap, "Ibus-Stream '%.300s' %s", e->stream, p);
        return -1;
    }
    return 0;
}

/* The stream names of an answer of $JS.API.STREAM.NAMES into `out`: the
 * one name, "" for none, "\n" for several. 0, or -1 with why. */
static int parse_names(char *out, size_t cap, const char *data, int len, char *why, size_t wcap)
{
    json_error_t jerr;
    json_t *root = json_loadb(data, (size_t)(len > 0 ? len : 0), 0, &jerr);
    json_t *error = json_object_get(root, "error");
    json_t *streams = json_object_get(root, "streams");
    int rc = 0;
    if (root == NULL || error != NULL) {
        const char *d = json_string_value(json_object_get(error, "description"));
        snprintf(why, wcap, "JetStream refused the stream lookup: %.200s",
                 d != NULL ? d : "unreadable answer");
        rc = -1;
    } else if (json_array_size(streams) > 1) {
        snprintf(out, cap, "\n");
    } else {
        const char *name = json_string_value(json_array_get(streams, 0));
        snprintf(out, cap, "%s", name != NULL ? name : "");
    }
    json_decref(root);
    return rc;
}

/* Asks JetStream which stream captures `subject`. 0, or -1 with why. */
static int ask(ib_dlq_targets *t, char *out, size_t cap, const char *subject, char *why,
               size_t wcap)
{
    json_t *req = json_pack("{s:s}", "subject", subject);
    char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    natsMsg *reply = NULL;
    natsStatus s = body != NULL ? natsConnection_RequestString(&reply, t->nc, t->names_subject,
                                                               body, t->timeout_ms)
                                : NATS_NO_MEMORY;
    int rc = -1;
    if (s == NATS_OK)
        rc = parse_names(out, cap, natsMsg_GetData(reply), natsMsg_GetDataLength(reply), why, wcap);
    else
        snprintf(why, wcap, "cannot ask JetStream which stream captures %.300s: %s", subject,
                 natsStatus_GetText(s));
    natsMsg_Destroy(reply);
    free(body);
    json_decref(req);
    return rc;
}

/* The stream capturing `subject` into `out`, from the cache or from
 * JetStream (then remembered while there is room). 0, or -1 with why. */
static int capturing(ib_dlq_targets *t, char out[IB_DLQ_STREAM_MAX + 1], const char *subject,
                     char *why, size_t wcap)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->cache[i].subject, subject) == 0) {
            memcpy(out, t->cache[i].stream, sizeof(t->cache[i].stream));
            return 0;
        }
    }
    if (ask(t, out, IB_DLQ_STREAM_MAX + 1, subject, why, wcap) != 0)
        return -1;
    if (t->n < CACHE_MAX) {
        cached *c = &t->cache[t->n];
        if ((c->subject = strdup(subject)) != NULL) {
            memcpy(c->stream, out, sizeof(c->stream));
            t->n++;
        }
    }
    return 0;
}

ib_dlq_target ib_dlq_target_check(ib_dlq_targets *t, const ib_dlq_entry *e, char *why, size_t cap)
{
    if (ib_dlq_target_precheck(e, why, cap) != 0)
        return IB_DLQ_TARGET_SKIP;
    char stream[IB_DLQ_STREAM_MAX + 1];
    if (capturing(t, stream, e->subject, why, cap) != 0)
        return IB_DLQ_TARGET_FAIL;
    if (stream[0] == '\0') {
        snprintf(why, cap, "no stream captures the target");
        return IB_DLQ_TARGET_SKIP;
    }
    if (strcmp(stream, "\n") == 0) {
        snprintf(why, cap, "several streams capture the target");
        return IB_DLQ_TARGET_SKIP;
    }
    if (strcmp(stream, e->stream) != 0) {
        snprintf(why, cap,
                 "the target belongs to stream %.256s, not %.256s (the stream the dead letter "
                 "names)",
                 stream, e->stream);
        return IB_DLQ_TARGET_SKIP;
    }
    return IB_DLQ_TARGET_OK;
}
