/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: what the server and the recorder say (status.h). */
#include "status.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dlq.h"
#include "js_api.h"

static void replicas_from(ib_status_replicas *r, const jsClusterInfo *ci)
{
    memset(r, 0, sizeof(*r));
    if (ci == NULL || ci->Leader == NULL)
        return;
    snprintf(r->leader, sizeof(r->leader), "%s", ci->Leader);
    r->total = 1 + ci->ReplicasLen;
    r->current = 1;
    size_t used = 0;
    for (int i = 0; i < ci->ReplicasLen; i++) {
        const jsPeerInfo *p = ci->Replicas[i];
        if (p->Current && !p->Offline) {
            r->current++;
            continue;
        }
        int w = snprintf(r->behind + used, sizeof(r->behind) - used, "%s%s%s", used > 0 ? ", " : "",
                         p->Name != NULL ? p->Name : "?", p->Offline ? " (offline)" : "");
        used += w > 0 && (size_t)w < sizeof(r->behind) - used ? (size_t)w : 0;
    }
}

static void explain(char *why, size_t cap, const char *what, natsStatus s, jsErrCode jerr)
{
    char d[200];
    snprintf(why, cap, "%s: %s (jetstream error %d)", what, ib_nats_strerror(d, sizeof(d), s),
             (int)jerr);
}

int ib_status_read_stream(ib_status_stream *s, jsCtx *js, const char *name, char *why, size_t cap)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    natsStatus st = js_GetStreamInfo(&si, js, name, NULL, &jerr);
    if (st == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr)
        return 0;
    if (st != NATS_OK) {
        explain(why, cap, "stream info", st, jerr);
        return -1;
    }
    s->exists = true;
    s->messages = si->State.Msgs;
    s->bytes = si->State.Bytes;
    s->first_seq = si->State.FirstSeq;
    s->last_seq = si->State.LastSeq;
    /* the state's times are nanoseconds; an empty stream has none */
    s->first_ms = si->State.Msgs > 0 ? si->State.FirstTime / 1000000 : 0;
    s->last_ms = si->State.Msgs > 0 ? si->State.LastTime / 1000000 : 0;
    s->max_age_ms = si->Config != NULL ? si->Config->MaxAge / 1000000 : 0;
    replicas_from(&s->replicas, si->Cluster);
    jsStreamInfo_Destroy(si);
    return 0;
}

void ib_status_consumer_from(ib_status_consumer *c, const jsConsumerInfo *ci)
{
    const jsConsumerConfig *cc = ci->Config;
    memset(c, 0, sizeof(*c));
    snprintf(c->durable, sizeof(c->durable), "%s", ci->Name != NULL ? ci->Name : "");
    c->exists = true;
    c->pull = cc->DeliverSubject == NULL || cc->DeliverSubject[0] == '\0';
    c->explicit_ack = cc->AckPolicy == js_AckExplicit;
    snprintf(c->filter, sizeof(c->filter), "%s",
             cc->FilterSubject != NULL ? cc->FilterSubject : "");
    c->pending = ci->NumPending;
    c->ack_pending = ci->NumAckPending;
    c->redelivered = ci->NumRedelivered;
    c->waiting = ci->NumWaiting;
    c->delivered_seq = ci->Delivered.Stream;
    c->delivered_ms = ci->Delivered.Last / 1000000;
    c->ack_floor_seq = ci->AckFloor.Stream;
    c->ack_floor_ms = ci->AckFloor.Last / 1000000;
    c->ack_wait_ms = cc->AckWait / 1000000; /* nanoseconds */
    c->max_deliver = cc->MaxDeliver;
    c->max_ack_pending = cc->MaxAckPending;
    for (int i = 0; cc->BackOff != NULL && i < cc->BackOffLen; i++)
        if (cc->BackOff[i] / 1000000 > c->backoff_max_ms)
            c->backoff_max_ms = cc->BackOff[i] / 1000000;
    replicas_from(&c->replicas, ci->Cluster);
}

int ib_status_read_consumer(ib_status_consumer *c, jsCtx *js, const char *stream,
                            const char *durable, char *why, size_t cap)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    memset(c, 0, sizeof(*c));
    snprintf(c->durable, sizeof(c->durable), "%s", durable);
    natsStatus st = js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr);
    if (st == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr || jerr == JSStreamNotFoundErr)
        return 0;
    if (st != NATS_OK) {
        explain(why, cap, "consumer info", st, jerr);
        return -1;
    }
    ib_status_consumer_from(c, ci);
    jsConsumerInfo_Destroy(ci);
    return 0;
}

/* The stream that captures `subject`, asked of the server
 * (<api prefix>.STREAM.NAMES with a subject filter; nats.c 3.4 has no call
 * for it). "" when none does. */
static int stream_for_subject(char *out, size_t cap, natsConnection *nc, const char *api_prefix,
                              const char *subject, char *why, size_t why_cap)
{
    char api[IB_JS_API_PREFIX_MAX + 16];
    snprintf(api, sizeof(api), "%s.STREAM.NAMES", api_prefix);
    natsMsg *reply = NULL;
    json_t *req = json_pack("{s:s}", "subject", subject);
    char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    out[0] = '\0';
    if (body == NULL) {
        snprintf(why, why_cap, "out of memory");
        return -1;
    }
    natsStatus s = natsConnection_RequestString(&reply, nc, api, body, 5000);
    free(body);
    if (s != NATS_OK) {
        explain(why, why_cap, "stream names", s, 0);
        return -1;
    }
    json_t *root =
        json_loadb(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), 0, NULL);
    json_t *names = json_object_get(root, "streams");
    const char *first = json_string_value(json_array_get(names, 0));
    if (first != NULL)
        snprintf(out, cap, "%s", first);
    int rc = root != NULL ? 0 : -1;
    if (rc != 0)
        snprintf(why, why_cap, "stream names: the server's answer is not JSON");
    json_decref(root);
    natsMsg_Destroy(reply);
    return rc;
}

typedef struct dlq_count {
    ib_status_dlq *d;
    uint64_t scan;
} dlq_count;

static int count_dead_letter(void *ctx, ib_dlq_entry *e)
{
    dlq_count *c = ctx;
    ib_status_dlq *d = c->d;
    if (d->count == 0 || e->time_ms < d->oldest_ms)
        d->oldest_ms = e->time_ms;
    d->count++;
    ib_dead_letter_reason r = IB_DLQ_OTHER;
    for (int k = 0; k < IB_DLQ_REASON_COUNT; k++)
        if (e->reason != NULL && strcmp(e->reason, ib_dead_letter_reason_str(k)) == 0)
            r = (ib_dead_letter_reason)k;
    d->by_reason[r]++;
    return d->count >= c->scan; /* stop there: the count is then a lower bound */
}

void ib_status_read_dlq(ib_status_dlq *d, natsConnection *nc, const char *api_prefix, jsCtx *js,
                        const char *durable, uint64_t scan)
{
    char why[256];
    d->complete = true;
    if (stream_for_subject(d->stream, sizeof(d->stream), nc, api_prefix, d->subject, why,
                           sizeof(why)) != 0) {
        snprintf(d->error, sizeof(d->error), "%s", why);
        return;
    }
    if (d->stream[0] == '\0')
        return;
    ib_status_stream s;
    if (ib_status_read_stream(&s, js, d->stream, why, sizeof(why)) != 0) {
        snprintf(d->error, sizeof(d->error), "%s", why);
        return;
    }
    d->stream_messages = s.messages;
    d->replicas = s.replicas;
    if (s.messages == 0)
        return;
    ib_dlq_filter f = {.consumer = durable};
    dlq_count c = {d, scan};
    uint64_t visited = 0;
    if (ib_dlq_walk(js, d->stream, &f, count_dead_letter, &c, &visited) != 0)
        snprintf(d->error, sizeof(d->error), "cannot read the dead letters of %s", d->stream);
    d->complete = d->count < scan;
}

/* Whether `id` is one of `durable`'s: "<durable>/..." or named by an
 * override "plugin/handler=ID". */
static bool belongs(const char *id, const char *durable, const char *const *overrides)
{
    size_t dl = strlen(durable);
    if (strncmp(id, durable, dl) == 0 && id[dl] == '/')
        return true;
    for (size_t i = 0; overrides != NULL && overrides[i] != NULL; i++) {
        const char *eq = strchr(overrides[i], '=');
        if (eq != NULL && strcmp(eq + 1, id) == 0)
            return true;
    }
    return false;
}

int ib_status_markers_pick(ib_status_markers *m, const ib__consumer_summary *all, size_t n,
                           const char *durable, const char *const *overrides)
{
    m->v = calloc(n > 0 ? n : 1, sizeof(*m->v));
    m->n = 0;
    if (m->v == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!belongs(all[i].consumer, durable, overrides))
            continue;
        m->v[m->n] = all[i];
        m->v[m->n].consumer = strdup(all[i].consumer);
        if (m->v[m->n].consumer == NULL)
            return -1;
        m->n++;
    }
    return 0;
}
