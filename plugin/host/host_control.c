/* SPDX-License-Identifier: Apache-2.0 */
/* The control thread of the host: one loop of timers (host_timers.c) for
 * all of the host's periodic work, which used to be three threads (the
 * watcher, the keeper and the watchdog's). host.c's opening comment lists
 * the timers with their periods; this file arms them and holds the
 * watcher's jobs:
 *   - +WPI for the batch's messages every half AckWait, so JetStream does
 *     not redeliver work that is still running, and the claims' leases
 *     renewed with them (host_inflight.c: never under a lock);
 *   - the connection gauges, and the consumer's pending counts read from
 *     the server every few seconds, so they move while nothing arrives (a
 *     stuck handler, a paused process);
 *   - while no batch runs, the recorder probed every few seconds, so a
 *     store that fails while idle turns /readyz false (and back) without
 *     waiting for the next event;
 *   - the stop: once SIGTERM or SIGINT arrives (the signal handler wakes
 *     the loop), the marks of finished calls are made durable and the
 *     drain deadline is armed: if handlers are still running when it
 *     passes, the process exits 1 (their messages were not acked and come
 *     back; their marks, if any, were made).
 * The overdue scan and the watchdog's ping live in host_health.c, pruning
 * and the recorder's gauges in host_retention.c.
 *
 * The loop runs one timer at a time, so each step is bounded by one store
 * transaction or one request with its timeout, and a prune pass lets the
 * other timers run between its transactions (host_retention.c). */
#include <stdlib.h>
#include <unistd.h>

#include "jetstream.h"
#include "host_internal.h"
#include "host_signal.h"
#include "host_timers.h"
#include "log.h"
#include "clock.h"

/* The control thread's own state: nothing here is read or written by the
 * batch thread once the loop runs. */
struct ib_host_control {
    ib_host *h;
    ib_timers *loop;
    pthread_t thread;
    bool started;
    int64_t tick_ms;  /* the watcher's tick: AckWait / 8, 20 to 250 ms */
    int64_t last_wpi; /* monotonic: the last +WPI sent */
    bool probe_down;  /* the probe set recorder_down */
    bool info_failing;
    bool stop_seen;   /* the stop was acted on: marks flushed, deadline armed */
    atomic_int bound; /* the watcher's timers are armed (ib__host_control_bind) */
    ib_host_watchdog *watchdog;
    ib_host_keeper *keeper; /* the keeper's timers' context */
};

/* ---- in-progress acks and lease renewals ---------------------------------- */

static void send_wpi(void *ctx, natsMsg *msg)
{
    ib_host *h = ctx;
    ib_in_progress(ib_nats_connection(h->nats), msg, NULL);
}

/* JetStream will not redeliver now; keep our claims as long, so a
 * duplicate of the same id elsewhere does not run meanwhile. A request
 * the dispatch carries out (its batch thread, or its stand-in during a
 * handler call): it returns at once, with what the
 * renewals asked for before did (so a lost claim is logged one tick
 * after its renewal found it). */
static void renew_leases(void *ctx)
{
    ib_host *h = ctx;
    size_t extended = 0, lost = 0;
    ib_error e;
    if (ib_dispatch_extend_leases(h->dispatch, &extended, &lost, &e) != IB_OK)
        ib_log_kv(IB_SEV_WARN, "cannot extend claim leases", "error", e.msg, NULL);
    else if (lost > 0)
        ib_log_kv(IB_SEV_WARN,
                  "claims expired while their handlers ran and were taken over; a "
                  "duplicate may run twice",
                  NULL);
}

static int64_t in_progress_timer(void *ctx, int64_t now)
{
    ib_host_control *c = ctx;
    static const ib_host_inflight_ops ops = {.send = send_wpi, .renew = renew_leases};
    ib__host_inflight_keep(&c->h->inflight, now, c->h->set.ack_wait_ms / 2, &c->last_wpi, &ops,
                           c->h);
    return c->tick_ms;
}

/* ---- the recorder probe and the consumer info ------------------------------ */

/* How often the idle probe reads the recorder: well inside a readiness
 * probe's period and failure threshold, and cheap (one read of one key). */
#define PROBE_EVERY_MS 2000

/* A fixed, well-formed key that no handler uses: is_processed on it reads
 * the store the way a batch does (on kv:, through the stream leader) and
 * never writes. */
#define PROBE_CONSUMER "ibus.readiness-probe"
#define PROBE_EVENT_ID "00000000000040008000000000000000"

static bool draining(const ib_host *h)
{
    return atomic_load(&h->run.stop_requested_at_ms) != 0;
}

/* Reads the probe key when no batch is in flight (a batch reports the
 * recorder's health from its own commits), or when the probe itself has
 * marked the recorder down (the dispatch only reports a recovery from its
 * own failures, so under steady load the probe must clear what it set). A
 * failure marks the recorder down; a success clears only a down state the
 * probe set, so a working read never hides a failed write: a commit's
 * failure is cleared by a commit. Not while draining (the deadline must
 * not wait on a store); a batch in flight puts it off by a tick. */
static int64_t probe_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host_control *c = ctx;
    ib_host *h = c->h;
    if (draining(h) || (!c->probe_down && ib__host_inflight_busy(&h->inflight)))
        return c->tick_ms;
    bool processed = false;
    ib_error e = {0};
    bool ok = ib_recorder_is_processed(h->recorder, &processed, PROBE_CONSUMER, PROBE_EVENT_ID,
                                       &e) == IB_OK;
    if (!ok) {
        c->probe_down = true;
        ib__host_on_recorder(h, false, &e);
    } else if (c->probe_down) {
        c->probe_down = false;
        ib__host_on_recorder(h, true, NULL);
    }
    return PROBE_EVERY_MS;
}

/* How often the consumer's info is read for the pending gauges: one
 * JetStream request, on this thread, never the dispatch thread. */
#define INFO_EVERY_MS 5000

/* Sets ibus_consumer_pending and ibus_consumer_ack_pending from the
 * server's consumer info. Put off by a tick while disconnected (the
 * request would only wait for its timeout), unbound or draining. A
 * failure keeps the last values and is logged once per change, as is the
 * recovery. */
static int64_t info_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host_control *c = ctx;
    ib_host *h = c->h;
    if (draining(h) || !atomic_load(&h->run.bound) || !ib_nats_is_connected(h->nats))
        return c->tick_ms;
    if (h->cfg->partitions > 0)
        return INFO_EVERY_MS; /* one durable per partition: no durable of that name */
    ib_consumer_facts f;
    ib_error e = {0};
    bool answered = ib_consumer_facts_get(&f, ib_nats_jetstream(h->nats), h->cfg->stream,
                                          h->cfg->durable, &e) == IB_OK;
    bool ok = answered && f.exists;
    if (answered)
        atomic_store(&h->run.info_not_found, !f.exists);
    if (ok) {
        ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_PENDING, (int64_t)f.num_pending);
        ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_ACK_PENDING, f.num_ack_pending);
    }
    if (ok != !c->info_failing) {
        c->info_failing = !ok;
        if (ok)
            ib_log_kv(IB_SEV_INFO, "consumer info readable again; pending gauges current",
                      "durable", h->cfg->durable, NULL);
        else
            ib_log_kv(IB_SEV_WARN,
                      "cannot read the consumer info; pending gauges keep their last value",
                      "durable", h->cfg->durable, "error",
                      e.status != IB_OK ? e.msg : "consumer not found", NULL);
    }
    return INFO_EVERY_MS;
}

/* ---- gauges, the stop and the drain deadline ------------------------------- */

static int64_t connection_gauges_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host_control *c = ctx;
    ib_metrics_gauge_set(c->h->metrics, IB_METRIC_CONNECTED, ib_nats_is_connected(c->h->nats));
    ib_metrics_gauge_set(c->h->metrics, IB_METRIC_CONSUMER_BOUND, atomic_load(&c->h->run.bound));
    return c->tick_ms;
}

static int64_t overdue_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host_control *c = ctx;
    ib__host_check_overdue(c->h);
    return c->tick_ms;
}

/* The drain deadline, armed once the stop is seen: exits 1 if it passes
 * while the process still runs (host_close stops the loop before). */
static int64_t drain_deadline_timer(void *ctx, int64_t now)
{
    ib_host_control *c = ctx;
    int64_t left = atomic_load(&c->h->run.stop_requested_at_ms) + c->h->cfg->drain_timeout_ms - now;
    if (left >= 0)
        return left + 1; /* it passes once more than drain_timeout_ms went by */
    ib_log_kv(IB_SEV_ERROR, "drain deadline passed with handlers still running; exiting 1", NULL);
    _exit(1);
}

/* The stop: a signal (which also wakes the loop) or the batch thread's
 * end of the run (host_serve sets stop_requested_at_ms). What finished
 * before it is made durable before any deadline can end the process. */
static void check_stop(ib_host_control *c)
{
    ib_host *h = c->h;
    if (c->stop_seen || !atomic_load(&c->bound))
        return; /* not bound yet: the run loop turns a stop into an exit */
    int64_t now = ib_clock_monotonic_ms();
    int64_t stop_at = atomic_load(&h->run.stop_requested_at_ms);
    if (stop_at == 0 && ib__host_signal_received()) {
        stop_at = now;
        atomic_store(&h->run.stop_requested_at_ms, now);
        ib__host_flush_marks(h, "stop requested");
    }
    if (stop_at == 0)
        return;
    c->stop_seen = true;
    if (h->cfg->drain_timeout_ms > 0)
        ib__timers_add(c->loop, stop_at + h->cfg->drain_timeout_ms + 1 - now, drain_deadline_timer,
                       c);
}

static int64_t stop_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host_control *c = ctx;
    check_stop(c);
    return c->stop_seen ? IB_TIMER_NOMORE : c->tick_ms;
}

static void on_wake(void *ctx)
{
    check_stop(ctx);
}

/* ---- the thread ------------------------------------------------------------ */

static void *control_main(void *arg)
{
    ib_host_control *c = arg;
    ib__timers_run(c->loop, on_wake, c);
    return NULL;
}

static void control_free(ib_host_control *c)
{
    ib__host_watchdog_close(c->watchdog);
    ib__host_keeper_free(c->keeper);
    ib__timers_free(c->loop);
    free(c);
}

int ib__host_control_start(ib_host *h)
{
    ib_host_control *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -1;
    c->h = h;
    if (ib__timers_new(&c->loop, NULL, NULL) != 0)
        goto fail;
    atomic_init(&c->bound, 0);
    if (ib__host_watchdog_open(&c->watchdog, h) != 0)
        goto fail;
    if (c->watchdog != NULL)
        ib__timers_add(c->loop, 0, ib__host_watchdog_timer, c->watchdog);
    ib__host_signal_wake_fd(ib__timers_wake_fd(c->loop));
    if (ib__host_thread_start(&c->thread, control_main, c) != 0) {
        ib__host_signal_wake_fd(-1);
        goto fail;
    }
    c->started = true;
    h->control = c;
    return 0;
fail:
    control_free(c);
    return -1;
}

int ib__host_control_bind(ib_host *h)
{
    ib_host_control *c = h->control;
    int64_t tick = h->set.ack_wait_ms / 8;
    if (tick < 20)
        tick = 20;
    if (tick > 250)
        tick = 250;
    /* the timers below read it; the table's lock orders this write
     * before their first run */
    c->tick_ms = tick;
    static const ib_timer_fn watcher[] = {in_progress_timer,       overdue_timer, stop_timer,
                                          connection_gauges_timer, probe_timer,   info_timer};
    for (size_t i = 0; i < sizeof(watcher) / sizeof(watcher[0]); i++)
        if (ib__timers_add(c->loop, 0, watcher[i], c) < 0)
            return -1;
    atomic_store(&c->bound, 1);
    return ib__host_keeper_arm(&c->keeper, h, c->loop);
}

void ib__host_control_wake(ib_host *h)
{
    if (h->control != NULL)
        ib__timers_wake(h->control->loop);
}

void ib__host_control_stop(ib_host *h)
{
    ib_host_control *c = h->control;
    if (c == NULL)
        return;
    /* waits for the timer in progress: a prune pass ends between two of
     * its transactions (it asks whether to stop before each) */
    ib__timers_quit(c->loop);
    pthread_join(c->thread, NULL);
    ib__host_signal_wake_fd(-1);
    control_free(c);
    h->control = NULL;
}
