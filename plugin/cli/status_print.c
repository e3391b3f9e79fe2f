/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: the report as text for people and as JSON (status.h). */
#include "status.h"

#include <inttypes.h>
#include <string.h>

#include <jansson.h>

#include "dlq.h"
#include "host.h"

/* "5m ago", or "never" for a time of 0. */
static const char *ago(char *buf, size_t cap, int64_t now, int64_t t)
{
    char a[40];
    if (t <= 0)
        snprintf(buf, cap, "never");
    else
        snprintf(buf, cap, "%s ago", ib_status_age(a, sizeof(a), now - t));
    return buf;
}

static const char *replicas_text(char *buf, size_t cap, const ib_status_replicas *r)
{
    if (r->total == 0)
        snprintf(buf, cap, "not clustered");
    else if (r->current == r->total)
        snprintf(buf, cap, "%d replicas, leader %s, all current", r->total, r->leader);
    else
        snprintf(buf, cap, "%d replicas, leader %s, behind: %s", r->total,
                 r->leader[0] != '\0' ? r->leader : "none", r->behind);
    return buf;
}

static void print_stream(FILE *out, const ib_status_report *r)
{
    const ib_status_stream *s = &r->stream;
    char a[48], b[48], c[48], rep[IB_STATUS_NAME_MAX * 3];
    fprintf(out,
            "  stream        %" PRIu64 " messages (seq %" PRIu64 "..%" PRIu64 "), %" PRIu64
            " bytes; first %s, last %s\n",
            s->messages, s->first_seq, s->last_seq, s->bytes,
            ago(a, sizeof(a), r->now_ms, s->first_ms), ago(b, sizeof(b), r->now_ms, s->last_ms));
    fprintf(out, "                max age %s; %s\n",
            s->max_age_ms > 0 ? ib_host_duration_str(c, sizeof(c), s->max_age_ms) : "none",
            replicas_text(rep, sizeof(rep), &s->replicas));
}

static void print_consumer(FILE *out, const ib_status_report *r)
{
    const ib_status_consumer *c = &r->consumer;
    char a[48], b[48], w[48], md[32], rep[IB_STATUS_NAME_MAX * 3];
    fprintf(out,
            "  consumer      pending %" PRIu64 ", ack pending %" PRId64 ", redelivered %" PRId64
            ", waiting pulls %" PRId64 "\n",
            c->pending, c->ack_pending, c->redelivered, c->waiting);
    fprintf(out,
            "                last delivered seq %" PRIu64 " %s; ack floor seq %" PRIu64 " %s\n",
            c->delivered_seq, ago(a, sizeof(a), r->now_ms, c->delivered_ms), c->ack_floor_seq,
            ago(b, sizeof(b), r->now_ms, c->ack_floor_ms));
    if (c->max_deliver > 0)
        snprintf(md, sizeof(md), "%" PRId64, c->max_deliver);
    else
        snprintf(md, sizeof(md), "unlimited");
    fprintf(
        out,
        "                ack wait %s, max deliver %s, max ack pending %" PRId64 ", filter %s; %s\n",
        ib_host_duration_str(w, sizeof(w), c->ack_wait_ms), md, c->max_ack_pending,
        c->filter[0] != '\0' ? c->filter : "none", replicas_text(rep, sizeof(rep), &c->replicas));
}

static void print_identity(FILE *out, const ib_status_report *r, const ib__consumer_summary *s)
{
    char a[48], b[48], c[48];
    fprintf(out, "                %s: markers %" PRIu64, s->consumer, s->markers);
    if (s->markers > 0)
        fprintf(out, " (oldest %s, newest %s)", ago(a, sizeof(a), r->now_ms, s->oldest_ms),
                ago(b, sizeof(b), r->now_ms, s->newest_ms));
    fprintf(out, "; claims %" PRIu64, s->claims);
    if (s->claims > 0 && s->lease_left_min_ms > 0)
        fprintf(out, " (shortest lease left %s)",
                ib_status_age(c, sizeof(c), s->lease_left_min_ms));
    else if (s->claims > 0)
        fprintf(out, " (%" PRIu64 " past their lease, the oldest ended %s ago)", s->claims_ended,
                ib_status_age(c, sizeof(c), -s->lease_left_min_ms));
    fprintf(out, "; attempted %" PRIu64 ", exhausted %" PRIu64 "\n", s->attempted, s->exhausted);
}

static void print_markers(FILE *out, const ib_status_report *r)
{
    const ib_status_markers *m = &r->markers;
    char rep[IB_STATUS_NAME_MAX * 3];
    fprintf(out, "  markers       %s", m->recorder);
    if (m->bucket.total > 0)
        fprintf(out, " (bucket %s)", replicas_text(rep, sizeof(rep), &m->bucket));
    if (m->error[0] != '\0')
        fprintf(out, ": not readable\n");
    else if (!m->visible)
        fprintf(out, ": kept inside each ibus run process, not visible from here\n");
    else if (m->n == 0)
        fprintf(out, ": none of %s yet\n", r->consumer.durable);
    else
        fputc('\n', out);
    for (size_t i = 0; i < m->n; i++)
        print_identity(out, r, &m->v[i]);
}

static void print_dlq(FILE *out, const ib_status_report *r)
{
    const ib_status_dlq *d = &r->dlq;
    char a[48];
    if (d->stream[0] == '\0' || d->error[0] != '\0') {
        fprintf(out, "  dead letters  %s: %s\n", d->subject,
                d->error[0] != '\0' ? "not readable" : "no stream captures it");
        return;
    }
    fprintf(out, "  dead letters  %s: %s%" PRIu64, d->stream, d->complete ? "" : "at least ",
            d->count);
    const char *sep = " (";
    for (int k = 0; k < IB_DLQ_REASON_COUNT; k++) {
        if (d->by_reason[k] == 0)
            continue;
        fprintf(out, "%s%s %" PRIu64, sep, ib_dead_letter_reason_str((ib_dead_letter_reason)k),
                d->by_reason[k]);
        sep = ", ";
    }
    fprintf(out, "%s", d->count > 0 ? ")" : "");
    if (d->count > 0)
        fprintf(out, ", oldest %s", ago(a, sizeof(a), r->now_ms, d->oldest_ms));
    fputc('\n', out);
}

/* The retention the runs prune with: "30d" as given; with auto, what it
 * follows: "auto (7d, the stream's MaxAge)", "auto (none: ...)". */
static const char *retention_text(char *buf, size_t cap, const ib_status_report *r)
{
    char d[48];
    const ib_status_expect *e = &r->expect;
    if (!e->retention_auto)
        snprintf(buf, cap, "%s", ib_host_duration_str(d, sizeof(d), e->retention_ms));
    else if (e->retention_ms > 0)
        snprintf(buf, cap, "auto (%s, the stream's MaxAge)",
                 ib_host_duration_str(d, sizeof(d), e->retention_ms));
    else if ((r->markers.kind != NULL && strcmp(r->markers.kind, "kv") == 0) ||
             strncmp(r->markers.recorder, "kv:", 3) == 0)
        snprintf(buf, cap, "auto (none: the bucket's TTL prunes)");
    else
        snprintf(buf, cap, "auto (none: the stream has no MaxAge, markers are kept for ever)");
    return buf;
}

static void print_findings(FILE *out, const ib_status_report *r)
{
    for (size_t i = 0; i < r->nfindings; i++) {
        const ib_status_finding *f = &r->findings[i];
        fprintf(out, "%s  %s: %s%s%s%s\n", i == 0 ? "attention\n" : "", f->code, f->message,
                f->fix[0] != '\0' ? " [fix: " : "", f->fix, f->fix[0] != '\0' ? "]" : "");
    }
}

/* A partitioned consumer: the stream, then its members and partitions
 * (status_partitions_print.c) in place of one consumer and its markers. */
static void print_partitioned(FILE *out, const ib_status_report *r)
{
    fprintf(out, "partitioned consumer %s on stream %s: %s\n", r->parts->durable, r->stream.name,
            r->nfindings == 0 ? "healthy" : "attention needed");
    print_stream(out, r);
    ib_status_print_partitions_text(out, r);
    print_findings(out, r);
}

void ib_status_print_text(FILE *out, const ib_status_report *r)
{
    char a[48], b[96], c[48];
    if (r->parts != NULL) {
        print_partitioned(out, r);
        return;
    }
    fprintf(out, "durable %s on stream %s: %s\n", r->consumer.durable, r->stream.name,
            r->nfindings == 0 ? "healthy" : "attention needed");
    print_stream(out, r);
    print_consumer(out, r);
    print_markers(out, r);
    print_dlq(out, r);
    fprintf(out,
            "  ibus run      --ack-wait %s --max-deliver %" PRId64
            " --retention %s --retry-max-delay %s\n",
            ib_host_duration_str(a, sizeof(a), r->expect.ack_wait_ms), r->expect.max_deliver,
            retention_text(b, sizeof(b), r),
            ib_host_duration_str(c, sizeof(c), r->expect.retry_max_ms));
    print_findings(out, r);
}
