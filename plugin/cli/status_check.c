/* SPDX-License-Identifier: Apache-2.0 */
/* ibus status: what needs attention (status.h). Each finding has a code
 * scripts can match, a sentence saying what it means, and the option that
 * fixes it:
 *
 *   not-pull             the consumer is a push consumer or does not ack
 *                        explicitly: ibus run cannot bind it
 *   not-pulling          messages wait, no pull request waits and nothing
 *                        was delivered for an AckWait
 *   stuck-claims         claims held more than an AckWait past their lease
 *   exhausted            events that used their attempts (the next delivery
 *                        dead-letters them)
 *   unfinished           events attempted and not marked that no process
 *                        holds (they wait for a retry), or messages
 *                        delivered and not acked while no process pulls
 *   dead-letters         dead letters of the durable wait
 *   no-dead-letter-stream  no stream captures the dead-letter subject
 *   dead-letters-unreadable, markers-unreadable
 *   ack-wait             AckWait differs from --ack-wait
 *   max-deliver          the consumer has a MaxDeliver
 *   retention            --retention against the stream's MaxAge
 *   replicas             a replica of a stream, the consumer or the bucket
 *                        is offline or behind
 * and a partitioned consumer's (status_partitions.c). */
#include "status.h"

#include <inttypes.h>
#include <string.h>

#include "host.h"
#include "owner.h"

static const char *dur(char *buf, size_t cap, int64_t ms)
{
    return ib_host_duration_str(buf, cap, ms);
}

static void check_consumer(ib_status_report *r)
{
    const ib_status_consumer *c = &r->consumer;
    char a[48], b[48];
    if (!c->pull || !c->explicit_ack) {
        ib_status_finding_add(
            r, "not-pull", "--durable",
            "consumer %s is %s: ibus run binds only pull consumers with explicit acks", c->durable,
            !c->pull ? "a push consumer" : "not acking explicitly");
        return;
    }
    int64_t quiet = c->delivered_ms > 0 ? r->now_ms - c->delivered_ms : -1;
    int64_t wait = c->ack_wait_ms > 1000 ? c->ack_wait_ms : 1000;
    if (c->pending > 0 && c->waiting == 0 && (quiet < 0 || quiet > wait)) {
        if (quiet < 0)
            snprintf(a, sizeof(a), "nothing was ever delivered");
        else
            snprintf(a, sizeof(a), "nothing was delivered for %s",
                     ib_status_age(b, sizeof(b), quiet));
        ib_status_finding_add(r, "not-pulling", NULL,
                              "%" PRIu64
                              " messages wait, %s and no pull request waits: no ibus run pulls %s "
                              "(or every one is stuck in a batch)",
                              c->pending, a, c->durable);
    } else if (c->ack_pending > 0 && c->waiting == 0 && quiet > wait) {
        /* all delivered, some never acked: retries nobody is there to take */
        ib_status_finding_add(
            r, "unfinished", NULL,
            "%" PRId64 " messages were delivered and not acked (%" PRId64
            " of them more than once), nothing was delivered for %s and no pull request "
            "waits: they wait for a redelivery, which only a running ibus run on %s takes",
            c->ack_pending, c->redelivered, ib_status_age(b, sizeof(b), quiet), c->durable);
    }
}

/* Keys attempted and not marked that no process holds: retries on their
 * way back, or work a process left when it stopped. The summary counts
 * held keys in claims whether or not they have attempts, so attempted
 * less claims less exhausted (reported on their own) is a lower bound,
 * and a handler that is running now never counts. */
static uint64_t unheld_attempts(const ib__consumer_summary *s)
{
    uint64_t other = s->claims + s->exhausted;
    return s->attempted > other ? s->attempted - other : 0;
}

/* Whose a claim is, for people: the owner token's label and pid, and
 * whether it still runs. */
static void holder(char *out, size_t cap, const char *owner, bool host_local)
{
    static const char *const state[] = {[IB_OWNER_UNKNOWN] = "cannot tell whether it runs",
                                        [IB_OWNER_ALIVE] = "it still runs",
                                        [IB_OWNER_GONE] = "it is gone"};
    ib_owner_liveness l = ib_owner_liveness_of(owner, host_local);
    snprintf(out, cap, "%s: %s", owner, state[l]);
}

static void check_markers(ib_status_report *r)
{
    const ib_status_markers *m = &r->markers;
    char a[48], who[IB_OWNER_MAX + 64];
    if (m->error[0] != '\0') {
        ib_status_finding_add(r, "markers-unreadable", "--recorder",
                              "the markers cannot be read: %s", m->error);
        return;
    }
    int64_t grace = r->consumer.ack_wait_ms > 0 ? r->consumer.ack_wait_ms : r->expect.ack_wait_ms;
    for (size_t i = 0; i < m->n; i++) {
        const ib__consumer_summary *s = &m->v[i];
        if (s->claims_ended > 0 && -s->lease_left_min_ms > grace) {
            holder(who, sizeof(who), s->lease_left_min_owner, m->host_local);
            ib_status_finding_add(r, "stuck-claims", NULL,
                                  "%s holds %" PRIu64
                                  " claims past their lease, the oldest ended %s ago (held by "
                                  "%s); a redelivery takes one over, and none came",
                                  s->consumer, s->claims_ended,
                                  ib_status_age(a, sizeof(a), -s->lease_left_min_ms), who);
        }
        uint64_t waiting = unheld_attempts(s);
        if (waiting > 0)
            ib_status_finding_add(
                r, "unfinished", NULL,
                "%s: %" PRIu64 " events were attempted and are not marked, and no process "
                "holds them: they wait for a retry (a handler asked for one, or its "
                "process stopped first) and are redelivered to an ibus run that pulls %s",
                s->consumer, waiting, r->consumer.durable);
        if (s->exhausted > 0)
            ib_status_finding_add(r, "exhausted", NULL,
                                  "%s: %" PRIu64 " events used their %" PRId64
                                  " attempts: their next delivery is "
                                  "dead-lettered without running the handler",
                                  s->consumer, s->exhausted, r->expect.max_deliver);
    }
}

static void check_dlq(ib_status_report *r)
{
    const ib_status_dlq *d = &r->dlq;
    char fix[IB_STATUS_NAME_MAX + 32];
    if (d->error[0] != '\0') {
        ib_status_finding_add(r, "dead-letters-unreadable", NULL,
                              "the dead letters cannot be read: %s", d->error);
        return;
    }
    if (d->stream[0] == '\0') {
        ib_status_finding_add(
            r, "no-dead-letter-stream", "--create",
            "no stream captures the dead-letter subject %s: a dead letter cannot be published, "
            "so its event is nak'ed again and again; ibus run --create makes DLQ_%s, or name "
            "another subject with --dead-letter",
            d->subject, r->consumer.durable);
        return;
    }
    if (d->count > 0) {
        /* --stream, not --durable: where ibus run's IB_STREAM is set, ibus dlq
         * would read it as the dead-letter stream */
        snprintf(fix, sizeof(fix), "ibus dlq --stream %s", d->stream);
        ib_status_finding_add(
            r, "dead-letters", fix,
            "%s%" PRIu64 " dead letters of %s wait in %s: look at them with ibus dlq --stream %s "
            "list, replay them once the cause is fixed",
            d->complete ? "" : "at least ", d->count, r->consumer.durable, d->stream, d->stream);
    }
}

static void check_ack_wait(ib_status_report *r)
{
    const ib_status_consumer *c = &r->consumer;
    char a[48], b[48], fix[80];
    if (c->ack_wait_ms == r->expect.ack_wait_ms)
        return;
    dur(a, sizeof(a), c->ack_wait_ms);
    snprintf(fix, sizeof(fix), "--ack-wait %s", a);
    ib_status_finding_add(
        r, "ack-wait", fix,
        "the consumer's AckWait is %s, --ack-wait says %s: --ack-wait applies only when ibus "
        "run creates the consumer, so %s rules (claims are leased for it, handler timeouts "
        "such as the http plugin's timeout= must stay below it); say what is in force, or "
        "change the consumer's AckWait",
        a, dur(b, sizeof(b), r->expect.ack_wait_ms), a);
}

static void check_max_deliver(ib_status_report *r)
{
    const ib_status_consumer *c = &r->consumer;
    char fix[80];
    if (c->max_deliver <= 0)
        return;
    if (c->max_deliver != r->expect.max_deliver)
        snprintf(fix, sizeof(fix), "--max-deliver %" PRId64, c->max_deliver);
    else
        snprintf(fix, sizeof(fix), "--create");
    ib_status_finding_add(
        r, "max-deliver", fix,
        "the consumer has MaxDeliver %" PRId64 " (--max-deliver says %" PRId64 "): ibus run "
        "then counts that many attempts, and the server stops delivering after that many "
        "deliveries, although deliveries on which no handler ran (another process's claim, a "
        "recorder outage) are no attempts: an event can stop without a dead letter. Recreate "
        "the consumer with MaxDeliver -1 (ibus run --create does) and keep --max-deliver",
        c->max_deliver, r->expect.max_deliver);
}

static void check_retention(ib_status_report *r)
{
    const ib_status_expect *e = &r->expect;
    char a[48], b[48], fix[80];
    if (e->retention_ms <= 0)
        return;
    if (r->markers.kind != NULL && strcmp(r->markers.kind, "kv") == 0) {
        ib_status_finding_add(
            r, "retention", "--retention 0",
            "--retention %s with a kv: recorder: its bucket's TTL prunes, and ibus run refuses "
            "to start",
            dur(a, sizeof(a), e->retention_ms));
        return;
    }
    if (r->stream.max_age_ms <= 0) {
        ib_status_finding_add(
            r, "retention", "--retention 0",
            "--retention %s, but stream %s has no MaxAge: it can deliver a message at any time, "
            "so markers could be pruned while their event can still arrive (ibus run refuses to "
            "start); give the stream a MaxAge, or prune nothing",
            dur(a, sizeof(a), e->retention_ms), r->stream.name);
        return;
    }
    if (e->retention_ms >= r->stream.max_age_ms)
        return;
    snprintf(fix, sizeof(fix), "--retention %s", dur(b, sizeof(b), r->stream.max_age_ms));
    ib_status_finding_add(
        r, "retention", fix,
        "--retention %s is shorter than stream %s's MaxAge %s: markers could be pruned while "
        "their event can still be delivered (ibus run refuses to start)",
        dur(a, sizeof(a), e->retention_ms), r->stream.name, b);
}

static void check_one_replica(ib_status_report *r, const char *what, const ib_status_replicas *p)
{
    if (p->total > 0 && p->leader[0] == '\0')
        ib_status_finding_add(r, "replicas", NULL,
                              "%s has no leader: nothing is stored or delivered until one is "
                              "elected",
                              what);
    else if (p->current < p->total)
        ib_status_finding_add(
            r, "replicas", NULL,
            "%s: %d of %d replicas current (behind: %s); wait before restarting another node", what,
            p->current, p->total, p->behind);
}

static void check_replicas(ib_status_report *r)
{
    char what[IB_STATUS_NAME_MAX + 32];
    snprintf(what, sizeof(what), "stream %s", r->stream.name);
    check_one_replica(r, what, &r->stream.replicas);
    snprintf(what, sizeof(what), "consumer %s", r->consumer.durable);
    check_one_replica(r, what, &r->consumer.replicas);
    snprintf(what, sizeof(what), "dead-letter stream %s", r->dlq.stream);
    check_one_replica(r, what, &r->dlq.replicas);
    snprintf(what, sizeof(what), "the recorder's bucket (%s)", r->markers.recorder);
    check_one_replica(r, what, &r->markers.bucket);
}

void ib_status_check(ib_status_report *r)
{
    r->nfindings = 0;
    if (r->parts != NULL) {
        /* a partitioned consumer: its partitions stand for the consumer,
         * its partition log for the markers (status_partitions.c) */
        ib_status_check_partitions(r);
        char what[IB_STATUS_NAME_MAX + 32];
        snprintf(what, sizeof(what), "stream %s", r->stream.name);
        check_one_replica(r, what, &r->stream.replicas);
        return;
    }
    check_consumer(r);
    if (!r->consumer.pull || !r->consumer.explicit_ack)
        return; /* not one of ibus run's: the rest does not apply */
    check_markers(r);
    check_dlq(r);
    check_ack_wait(r);
    check_max_deliver(r);
    check_retention(r);
    check_replicas(r);
}
