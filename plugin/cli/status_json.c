/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status --json: the report as one JSON object (status.h). Times are
 * RFC 3339 UTC strings (null when there is none), durations integers in
 * milliseconds named *_ms, as in the logs. */
#include "status.h"

#include <jansson.h>

#include "dlq.h"

/* A string for jansson, which refuses invalid UTF-8: null instead. */
static json_t *str(const char *s)
{
    json_t *j = s != NULL ? json_string(s) : NULL;
    return j != NULL ? j : json_null();
}

static json_t *num(int64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *time_or_null(int64_t ms)
{
    char t[40];
    return ms > 0 ? json_string(ib_dlq_format_time(t, sizeof(t), ms)) : json_null();
}

static json_t *age_or_null(const ib_status_report *r, int64_t ms)
{
    return ms > 0 ? num(r->now_ms - ms) : json_null();
}

static json_t *replicas(const ib_status_replicas *p)
{
    if (p->total == 0)
        return json_null();
    return json_pack("{s:i,s:i,s:o,s:o}", "total", p->total, "current", p->current, "leader",
                     str(p->leader), "behind", str(p->behind));
}

static json_t *stream_json(const ib_status_report *r)
{
    const ib_status_stream *s = &r->stream;
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "name", str(s->name), "messages",
                     num((int64_t)s->messages), "bytes", num((int64_t)s->bytes), "first_seq",
                     num((int64_t)s->first_seq), "last_seq", num((int64_t)s->last_seq),
                     "first_time", time_or_null(s->first_ms), "last_time", time_or_null(s->last_ms),
                     "max_age_ms", num(s->max_age_ms), "replicas", replicas(&s->replicas));
}

static json_t *consumer_json(const ib_status_report *r)
{
    const ib_status_consumer *c = &r->consumer;
    json_t *o = json_pack(
        "{s:o,s:o,s:b,s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "durable", str(c->durable), "filter",
        str(c->filter), "pull", c->pull, "explicit_ack", c->explicit_ack, "pending",
        num((int64_t)c->pending), "ack_pending", num(c->ack_pending), "redelivered",
        num(c->redelivered), "waiting_pulls", num(c->waiting), "delivered_seq",
        num((int64_t)c->delivered_seq), "delivered_time", time_or_null(c->delivered_ms),
        "delivered_age_ms", age_or_null(r, c->delivered_ms));
    json_t *more = json_pack(
        "{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "ack_floor_seq", num((int64_t)c->ack_floor_seq),
        "ack_floor_time", time_or_null(c->ack_floor_ms), "ack_floor_age_ms",
        age_or_null(r, c->ack_floor_ms), "ack_wait_ms", num(c->ack_wait_ms), "max_deliver",
        num(c->max_deliver), "max_ack_pending", num(c->max_ack_pending), "backoff_max_ms",
        num(c->backoff_max_ms), "replicas", replicas(&c->replicas));
    if (o != NULL && more != NULL)
        json_object_update(o, more);
    json_decref(more);
    return o;
}

static json_t *identity_json(const ib_status_report *r, const ib__consumer_summary *s)
{
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "consumer", str(s->consumer),
                     "markers", num((int64_t)s->markers), "oldest_time", time_or_null(s->oldest_ms),
                     "newest_time", time_or_null(s->newest_ms), "claims", num((int64_t)s->claims),
                     "claims_past_lease", num((int64_t)s->claims_ended), "lease_left_min_ms",
                     s->claims > 0 ? num(s->lease_left_min_ms) : json_null(),
                     "lease_left_min_owner",
                     s->claims > 0 ? str(s->lease_left_min_owner) : json_null(), "attempted",
                     num((int64_t)s->attempted), "exhausted", num((int64_t)s->exhausted));
    (void)r;
}

static json_t *markers_json(const ib_status_report *r)
{
    const ib_status_markers *m = &r->markers;
    json_t *ids = json_array();
    for (size_t i = 0; ids != NULL && i < m->n; i++)
        json_array_append_new(ids, identity_json(r, &m->v[i]));
    return json_pack("{s:o,s:o,s:b,s:o,s:o,s:o}", "recorder", str(m->recorder), "kind",
                     str(m->kind), "visible", m->visible, "error",
                     m->error[0] != '\0' ? str(m->error) : json_null(), "identities",
                     ids != NULL ? ids : json_null(), "bucket_replicas", replicas(&m->bucket));
}

static json_t *dlq_json(const ib_status_report *r)
{
    const ib_status_dlq *d = &r->dlq;
    json_t *reasons = json_object();
    for (int k = 0; reasons != NULL && k < IB_DLQ_REASON_COUNT; k++)
        json_object_set_new(reasons, ib_dead_letter_reason_str((ib_dead_letter_reason)k),
                            num((int64_t)d->by_reason[k]));
    return json_pack("{s:o,s:o,s:o,s:o,s:b,s:o,s:o,s:o,s:o}", "subject", str(d->subject), "stream",
                     d->stream[0] != '\0' ? str(d->stream) : json_null(), "stream_messages",
                     num((int64_t)d->stream_messages), "count", num((int64_t)d->count), "complete",
                     d->complete, "by_reason", reasons != NULL ? reasons : json_null(),
                     "oldest_time", time_or_null(d->oldest_ms), "error",
                     d->error[0] != '\0' ? str(d->error) : json_null(), "replicas",
                     replicas(&d->replicas));
}

static json_t *findings_json(const ib_status_report *r)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < r->nfindings; i++) {
        const ib_status_finding *f = &r->findings[i];
        json_array_append_new(a, json_pack("{s:s,s:o,s:o}", "code", f->code, "message",
                                           str(f->message), "fix",
                                           f->fix[0] != '\0' ? str(f->fix) : json_null()));
    }
    return a;
}

json_t *ib_status_json(const ib_status_report *r)
{
    const ib_status_expect *e = &r->expect;
    if (r->parts != NULL) /* a partitioned consumer: no one consumer, no recorder */
        return json_pack("{s:o,s:b,s:o,s:o,s:o}", "checked_at", time_or_null(r->now_ms), "healthy",
                         r->nfindings == 0, "stream", stream_json(r), "partitioned",
                         ib_status_partitions_json(r), "attention", findings_json(r));
    /* retention_ms is what the runs prune with (0: never), also for auto */
    json_t *expect =
        json_pack("{s:o,s:o,s:o,s:b,s:o}", "ack_wait_ms", num(e->ack_wait_ms), "max_deliver",
                  num(e->max_deliver), "retention_ms", num(e->retention_ms), "retention_auto",
                  e->retention_auto, "retry_max_delay_ms", num(e->retry_max_ms));
    /* "o" steals every value, also when json_pack fails */
    return json_pack("{s:o,s:b,s:o,s:o,s:o,s:o,s:o,s:o}", "checked_at", time_or_null(r->now_ms),
                     "healthy", r->nfindings == 0, "stream", stream_json(r), "consumer",
                     consumer_json(r), "markers", markers_json(r), "dead_letters", dlq_json(r),
                     "expected", expect, "attention", findings_json(r));
}
