/* SPDX-License-Identifier: Apache-2.0 */
/* The watcher thread of the host. While the main thread is inside a batch
 * (possibly for long, with slow handlers), it
 *   - sends +WPI for the batch's messages every half AckWait, so JetStream
 *     does not redeliver work that is still running;
 *   - keeps the connection gauges current, and the consumer's pending
 *     counts, read from the server every few seconds, so they move while
 *     nothing arrives (a stuck handler, a paused process);
 *   - while no batch runs, probes the recorder every few seconds, so a
 *     store that fails while idle turns /readyz false (and back) without
 *     waiting for the next event;
 *   - finds handler calls past --handler-timeout (host_health.c), which
 *     fail /healthz until they return;
 *   - enforces the drain deadline after SIGTERM: if handlers are still
 *     running when it passes, the process exits 1 (their messages were not
 *     acked and come back; their marks, if any, were made). */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "jetstream.h"
#include "host_internal.h"
#include "host_signal.h"
#include "log.h"
#include "clock.h"

static void send_wpi(void *ctx, natsMsg *msg)
{
    ib_host *h = ctx;
    ib_in_progress(ib_nats_connection(h->nats), msg, NULL);
}

/* JetStream will not redeliver now; keep our claims as long, so a
 * duplicate of the same id elsewhere does not run meanwhile. A store
 * write: never under a lock (ib__host_inflight_keep calls it after). */
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

static void send_in_progress(ib_host *h, int64_t now, int64_t *last_wpi)
{
    static const ib_host_inflight_ops ops = {.send = send_wpi, .renew = renew_leases};
    ib__host_inflight_keep(&h->inflight, now, h->ack_wait_ms / 2, last_wpi, &ops, h);
}

/* How often the idle probe reads the recorder: well inside a readiness
 * probe's period and failure threshold, and cheap (one read of one key). */
#define PROBE_EVERY_MS 2000

/* A fixed, well-formed key that no handler uses: is_processed on it reads
 * the store the way a batch does (on kv:, through the stream leader) and
 * never writes. */
#define PROBE_CONSUMER "ibus.readiness-probe"
#define PROBE_EVENT_ID "00000000000040008000000000000000"

/* Reads the probe key when no batch is in flight (a batch reports the
 * recorder's health from its own commits), or when the probe itself has
 * marked the recorder down (the dispatch only reports a recovery from its
 * own failures, so under steady load the probe must clear what it set). A
 * failure marks the recorder down; a success clears only a down state the
 * probe set, so a working read never hides a failed write: a commit's
 * failure is cleared by a commit. Runs outside every lock; a slow store
 * delays the next tick by at most the recorder's own request timeout. */
static void probe_recorder(ib_host *h, int64_t now)
{
    if (h->recorder == NULL || now - h->probe_last_ms < PROBE_EVERY_MS)
        return;
    bool idle = h->probe_down || !ib__host_inflight_busy(&h->inflight);
    if (!idle)
        return;
    h->probe_last_ms = now;
    bool processed = false;
    ib_error e = {0};
    bool ok = ib_recorder_is_processed(h->recorder, &processed, PROBE_CONSUMER, PROBE_EVENT_ID,
                                       &e) == IB_OK;
    if (!ok) {
        h->probe_down = true;
        ib__host_on_recorder(h, false, &e);
    } else if (h->probe_down) {
        h->probe_down = false;
        ib__host_on_recorder(h, true, NULL);
    }
}

/* How often the consumer's info is read for the pending gauges: one
 * JetStream request, on this thread, never the dispatch thread. */
#define INFO_EVERY_MS 5000

/* Sets ibus_consumer_pending and ibus_consumer_ack_pending from the
 * server's consumer info. Skipped while disconnected (the request would
 * only wait for its timeout). A failure keeps the last values and is
 * logged once per change, as is the recovery. A slow server delays the
 * next tick by at most the JetStream request timeout. */
static void read_consumer_info(ib_host *h, int64_t now)
{
    if (now - h->info_last_ms < INFO_EVERY_MS || !atomic_load(&h->bound) ||
        !ib_nats_is_connected(h->nats))
        return;
    h->info_last_ms = now;
    ib_consumer_facts f;
    ib_error e = {0};
    bool answered = ib_consumer_facts_get(&f, ib_nats_jetstream(h->nats), h->cfg->stream,
                                          h->cfg->durable, &e) == IB_OK;
    bool ok = answered && f.exists;
    if (answered)
        atomic_store(&h->info_not_found, !f.exists);
    if (ok) {
        ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_PENDING, (int64_t)f.num_pending);
        ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_ACK_PENDING, f.num_ack_pending);
    }
    if (ok == !h->info_failing)
        return;
    h->info_failing = !ok;
    if (ok)
        ib_log_kv(IB_SEV_INFO, "consumer info readable again; pending gauges current", "durable",
                  h->cfg->durable, NULL);
    else
        ib_log_kv(IB_SEV_WARN,
                  "cannot read the consumer info; pending gauges keep their last value", "durable",
                  h->cfg->durable, "error", e.status != IB_OK ? e.msg : "consumer not found", NULL);
}

static void *watch_main(void *arg)
{
    ib_host *h = arg;
    int64_t last_wpi = 0;
    int64_t tick = h->ack_wait_ms / 8;
    if (tick < 20)
        tick = 20;
    if (tick > 250)
        tick = 250;

    while (!atomic_load(&h->watcher_quit)) {
        int64_t now = ib_clock_monotonic_ms();
        send_in_progress(h, now, &last_wpi);
        ib__host_check_overdue(h);
        ib_metrics_gauge_set(h->metrics, IB_METRIC_CONNECTED, ib_nats_is_connected(h->nats));
        ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_BOUND, atomic_load(&h->bound));

        int64_t stop_at = atomic_load(&h->stop_requested_at_ms);
        if (stop_at == 0 && ib__host_signal_received()) {
            stop_at = now;
            atomic_store(&h->stop_requested_at_ms, now);
            /* what finished before the stop is made durable before any
             * deadline can end the process */
            ib__host_flush_marks(h, "stop requested");
        }
        /* not while draining: the deadline below must not wait on a store */
        if (stop_at == 0) {
            probe_recorder(h, now);
            read_consumer_info(h, now);
        }
        if (stop_at > 0 && h->cfg->drain_timeout_ms > 0 &&
            now - stop_at > h->cfg->drain_timeout_ms) {
            ib_log_kv(IB_SEV_ERROR, "drain deadline passed with handlers still running; exiting 1",
                      NULL);
            _exit(1);
        }
        struct timespec ts = {.tv_sec = tick / 1000, .tv_nsec = (tick % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int ib__host_watch_start(ib_host *h)
{
    int rc = ib__host_thread_start(&h->watcher, watch_main, h);
    h->watcher_started = rc == 0;
    return rc;
}

void ib__host_watch_stop(ib_host *h)
{
    if (!h->watcher_started)
        return;
    atomic_store(&h->watcher_quit, 1);
    pthread_join(h->watcher, NULL);
    h->watcher_started = false;
}
