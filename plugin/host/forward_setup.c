/* SPDX-License-Identifier: Apache-2.0 */
/* The forwarder's start (forward_internal.h): the connection, the
 * durable, and the checks on the target that must pass before anything
 * moves. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "forward_internal.h"
#include "host_signal.h"
#include "log.h"
#include "redact.h"

/* How long a start-up request that failed for want of an answer (a
 * leader election, a server restarted a moment ago) is tried again. */
#define START_GRACE_MS 30000

/* Exit codes (forward.h). */
#define EXIT_RUNTIME 1
#define EXIT_CONFIG 2

/* Logs `e` and returns its exit code: 2 for what configuration must
 * change, 1 for the rest. */
static int fail(const char *what, const ib_error *e)
{
    ib_log(IB_SEV_ERROR, what, IB_LOG_STR("error", e->msg),
           IB_LOG_STR("status", ib_status_str(e->status)));
    return e->status == IB_ERR_CONFIG || e->status == IB_ERR_INVALID_ARG ? EXIT_CONFIG
                                                                         : EXIT_RUNTIME;
}

/* Connects, waiting for the server as long as --connect-timeout allows
 * (for ever when 0), a warning every 10 s. 0, or the exit code. */
static int connect_nats(ib_forwarder *f)
{
    ib_nats_config nc = f->cfg->nats;
    ib_error e = {0};
    nc.retry_initial_connect = true;
    nc.name = f->cfg->durable;
    if (ib_nats_connect(&f->nats, &nc, &e) != IB_OK)
        return fail("cannot connect to NATS", &e);
    int64_t started = ib_clock_monotonic_ms(), limit = f->cfg->connect_timeout_ms;
    while (!ib_nats_wait_connected(f->nats, ib__host_signal_flag(), 10000)) {
        char why[256];
        int64_t waited = ib_clock_monotonic_ms() - started;
        bool give_up = ib_nats_is_closed(f->nats) || (limit > 0 && waited >= limit);
        if (ib__host_signal_received() || give_up) {
            ib_log(IB_SEV_ERROR, "not connected to NATS; exiting 1",
                   IB_LOG_STR("url", f->url_shown),
                   IB_LOG_STR("error", ib_nats_last_error(f->nats, why, sizeof(why))),
                   IB_LOG_I64("waited_ms", waited));
            return EXIT_RUNTIME;
        }
        ib_log(IB_SEV_WARN, "still cannot connect to NATS; retrying",
               IB_LOG_STR("url", f->url_shown),
               IB_LOG_STR("error", ib_nats_last_error(f->nats, why, sizeof(why))),
               IB_LOG_I64("waited_ms", waited));
    }
    return 0;
}

/* The durable, made when missing with --create (and with it the
 * dead-letter stream), tried again while the server does not answer. */
static ib_status ensure_durable(ib_forwarder *f, ib_consumer_facts *facts, ib_error *e)
{
    const ib_forward_config *c = f->cfg;
    ib_consumer_setup s = {
        .stream = c->stream,
        .durable = c->durable,
        .filter_subject = c->filter,
        .create = c->create,
        .stream_replicas = (int)c->stream_replicas,
        .dead_letter_subject = f->dead_letter,
        .ack_wait_ms = c->ack_wait_ms,
        .max_ack_pending = c->max_ack_pending,
        .batch = (size_t)c->batch,
        .pull_expires_ms = c->pull_expires_ms,
        .waiting_requests = IB_PULLER_MAX_WAITING,
    };
    int64_t age = 0;
    if (c->create &&
        ib_stream_max_age_get(&age, ib_nats_jetstream(f->nats), c->stream, e) == IB_ERR_CONFIG)
        return ib_error_set(e, IB_ERR_CONFIG,
                            "source stream %s does not exist: --create makes the durable and "
                            "the dead-letter stream, never the stream it forwards",
                            c->stream);
    int64_t deadline = ib_clock_monotonic_ms() + START_GRACE_MS;
    for (;;) {
        ib_status st = ib_consumer_ensure(facts, ib_nats_jetstream(f->nats), &s, e);
        if (st == IB_ERR_CONFIG && !c->create && strstr(e->msg, "does not exist") != NULL)
            return ib_error_set(e, IB_ERR_CONFIG,
                                "durable %s on stream %s, or the stream, does not exist: create "
                                "it, or start ibus forward with --create (and --filter)",
                                c->durable, c->stream);
        if (st != IB_ERR_NATS && st != IB_ERR_TIMEOUT)
            return st;
        if (ib__host_signal_received() || ib_clock_monotonic_ms() > deadline)
            return st;
        nats_Sleep(500);
    }
}

/* The partition subjects "<base>.<p>.<key>" as one filter. */
static void partition_filter(char *out, size_t cap, const char *base)
{
    snprintf(out, cap, "%s.*.*", base);
}

/* The target must be one stream that captures every partition subject,
 * and not the source read whole: its durable would read the forwards
 * back and forward them again, for ever. IB_OK, or IB_ERR_CONFIG saying
 * why; `*window_ms` gets the target's duplicate window. */
static ib_status check_target(ib_forwarder *f, const ib_consumer_facts *facts, int64_t *window_ms,
                              ib_error *e)
{
    const ib_forward_config *c = f->cfg;
    ib_partition_stream ps;
    char all[1100];
    partition_filter(all, sizeof(all), c->subject);
    ib_status st =
        ib_partition_stream_find(&ps, ib_nats_jetstream(f->nats), c->subject, c->partitions, e);
    if (st != IB_OK)
        return st;
    if (!ps.found && ps.partial)
        return ib_error_set(e, IB_ERR_CONFIG,
                            "--subject %s: stream %s captures some of the partition subjects "
                            "%s.<0..%" PRIu32 ">.<key>, not all; give it the subject %s",
                            c->subject, ps.name, c->subject, c->partitions - 1, all);
    if (!ps.found)
        return ib_error_set(e, IB_ERR_CONFIG,
                            "--subject %s: no stream captures the partition subjects %s; create "
                            "the partitioned stream first (its subjects %s, or %s.>)",
                            c->subject, all, all, c->subject);
    if (strcmp(ps.name, c->stream) == 0 &&
        (facts->filter_subject[0] == '\0' || ib_nats_subjects_overlap(facts->filter_subject, all)))
        return ib_error_set(
            e, IB_ERR_CONFIG,
            "--subject %s: the partition subjects are in stream %s, the stream forwarded, and "
            "durable %s reads them (filter '%s'): it would forward its own forwards for ever; "
            "give the durable a filter that leaves %s out (--filter when creating it)",
            c->subject, ps.name, c->durable,
            facts->filter_subject[0] != '\0' ? facts->filter_subject : "the whole stream", all);
    *window_ms = ps.duplicate_window_ms;
    ib_log(IB_SEV_INFO, "target stream", IB_LOG_STR("stream", ps.name), IB_LOG_STR("subjects", all),
           IB_LOG_I64("duplicate_window_ms", ps.duplicate_window_ms));
    return IB_OK;
}

/* A forward is stored once as long as the target's duplicate window
 * reaches from its first try to its last: the source message comes back
 * after AckWait (or a BackOff step) when its ack was lost, after the retry
 * delay when its forward failed, and up to MaxDeliver times. */
static void check_window(const ib_forwarder *f, const ib_consumer_facts *facts, int64_t window_ms)
{
    int64_t again =
        facts->ack_wait_ms > facts->backoff_max_ms ? facts->ack_wait_ms : facts->backoff_max_ms;
    if (f->cfg->retry_delay_ms > again)
        again = f->cfg->retry_delay_ms;
    bool bounded = facts->max_deliver > 0;
    int64_t horizon = bounded ? again * facts->max_deliver : again;
    if (window_ms >= horizon)
        return;
    ib_log(IB_SEV_WARN,
           bounded ? "the target's duplicate window is shorter than AckWait times MaxDeliver of "
                     "the durable: a forward repeated after it is stored twice"
                   : "the target's duplicate window is shorter than one redelivery of the "
                     "durable: a forward repeated after it is stored twice",
           IB_LOG_I64("duplicate_window_ms", window_ms), IB_LOG_I64("redelivery_ms", horizon),
           IB_LOG_I64("ack_wait_ms", facts->ack_wait_ms),
           IB_LOG_I64("max_deliver", facts->max_deliver));
}

static int start_puller(ib_forwarder *f, const ib_consumer_facts *facts)
{
    const ib_forward_config *c = f->cfg;
    ib_error e = {0};
    ib_puller_options po = {
        .stream = c->stream,
        .durable = c->durable,
        .ack_wait_ms = facts->ack_wait_ms,
        .batch = (size_t)c->batch,
        .expires_ms = c->pull_expires_ms,
    };
    if (ib_puller_create(&f->puller, f->nats, &po, &e) != IB_OK)
        return fail("cannot pull the durable", &e);
    f->pulling = true;
    ib_log(IB_SEV_INFO, "forwarding", IB_LOG_STR("stream", c->stream),
           IB_LOG_STR("durable", c->durable), IB_LOG_STR("subject", c->subject),
           IB_LOG_U64("partitions", c->partitions), IB_LOG_I64("key_token", c->key_token),
           IB_LOG_STR("dead_letter", f->dead_letter));
    return 0;
}

int ib__forward_open(ib_forwarder *f)
{
    const ib_forward_config *c = f->cfg;
    if (c->dead_letter != NULL && c->dead_letter[0] != '\0')
        snprintf(f->dead_letter, sizeof(f->dead_letter), "%s", c->dead_letter);
    else
        snprintf(f->dead_letter, sizeof(f->dead_letter), "ibus.dlq.%s", c->durable);
    f->limits.max_bytes = (size_t)c->max_event_bytes;
    f->limits.id_flags = c->uuid_versions;
    ib_redact_url(f->url_shown, sizeof(f->url_shown),
                  c->nats.url != NULL && c->nats.url[0] != '\0' ? c->nats.url
                                                                : "nats://127.0.0.1:4222");
    int code = connect_nats(f);
    if (code != 0)
        return code;
    ib_consumer_facts facts;
    int64_t window_ms = 0;
    ib_error e = {0};
    if (ensure_durable(f, &facts, &e) != IB_OK)
        return fail("cannot read the durable", &e);
    if (check_target(f, &facts, &window_ms, &e) != IB_OK)
        return fail("refused to forward", &e);
    check_window(f, &facts, window_ms);
    return start_puller(f, &facts);
}

void ib__forward_close(ib_forwarder *f)
{
    ib_puller_free(f->puller);
    f->puller = NULL;
    /* acks are fire-and-forget: flush so the last ones reach the server */
    ib_nats_close(f->nats, 5000);
    f->nats = NULL;
}
