/* SPDX-License-Identifier: Apache-2.0 */
/* Retention of the subscriber host: the floor below which pruning could
 * forget a marker whose event can still arrive, the start-up check against
 * it, and the keeper's timers on the control loop (host_control.c), which
 * prune in the background and keep the recorder's gauges (marker count,
 * WAL size, outbox) current.
 *
 * A prune pass may take many bounded transactions, and the control loop
 * must keep sending in-progress acks and enforcing the drain deadline
 * meanwhile: between two of them the pass lets the other due timers run
 * (keeper_quitting), and it ends at once when the loop stops or a
 * drain begins. The batch thread never prunes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_internal.h"
#include "host_timers.h"
#include "log.h"
#include "clock.h"

/* How often the cheap gauges (WAL size, outbox) are read. */
#define GAUGES_EVERY_MS 5000
/* How often markers are counted: counting walks them all, so never per
 * scrape; less often when nothing prunes (the count then only grows). */
#define COUNT_EVERY_MS 5000
#define COUNT_IDLE_EVERY_MS 30000
/* Bounds of the pruning period (a tenth of the retention). */
#define PRUNE_MIN_EVERY_MS 1000
#define PRUNE_MAX_EVERY_MS 60000

/* a + b, saturating at IB_HOST_UNBOUNDED; both >= 0 */
static int64_t add_sat(int64_t a, int64_t b)
{
    return a > IB_HOST_UNBOUNDED - b ? IB_HOST_UNBOUNDED : a + b;
}

int64_t ib_host_redelivery_horizon_ms(const ib_delivery_window *w)
{
    if (w->no_consumer || w->max_deliver == 1)
        return 0;
    if (w->max_deliver <= 0)
        return IB_HOST_UNBOUNDED;
    int64_t delay = w->nak_max_ms > w->backoff_max_ms ? w->nak_max_ms : w->backoff_max_ms;
    int64_t step = add_sat(w->ack_wait_ms > 0 ? w->ack_wait_ms : 0, delay > 0 ? delay : 0);
    int64_t n = w->max_deliver - 1;
    return step != 0 && n > IB_HOST_UNBOUNDED / step ? IB_HOST_UNBOUNDED : n * step;
}

int64_t ib_host_retention_floor_ms(const ib_delivery_window *w)
{
    /* Every marker is younger than its message, and nothing delivers a
     * message once MaxAge has removed it from the stream, however many
     * redeliveries the consumer would still allow: MaxAge bounds the
     * redelivery horizon too. */
    return w->max_age_ms > 0 ? w->max_age_ms : IB_HOST_UNBOUNDED;
}

const char *ib_host_duration_str(char *buf, size_t cap, int64_t ms)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    if (ms == IB_HOST_UNBOUNDED) {
        snprintf(buf, cap, "unbounded");
        return buf;
    }
    if (ms <= 0) {
        snprintf(buf, cap, "0s");
        return buf;
    }
    size_t len = 0;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && len < cap; i++) {
        if (ms < units[i].ms)
            continue;
        int w = snprintf(buf + len, cap - len, "%" PRId64 "%s", ms / units[i].ms, units[i].unit);
        len += w > 0 ? (size_t)w : 0;
        ms %= units[i].ms;
    }
    return buf;
}

const char *ib_host_retention_explain(char *buf, size_t cap, const char *what, int64_t retention_ms,
                                      const ib_delivery_window *w, const char *stream)
{
    char ret[32], floor[32], age[32], hz_s[32], horizon[96];
    int64_t f = ib_host_retention_floor_ms(w);
    int64_t hz = ib_host_redelivery_horizon_ms(w);
    ib_host_duration_str(ret, sizeof(ret), retention_ms);
    if (w->max_age_ms > 0)
        ib_host_duration_str(age, sizeof(age), w->max_age_ms);
    else
        snprintf(age, sizeof(age), "none");
    if (w->no_consumer)
        snprintf(horizon, sizeof(horizon), "redelivery horizon not checked: no consumer named");
    else if (hz == IB_HOST_UNBOUNDED)
        snprintf(horizon, sizeof(horizon),
                 "redelivery horizon unbounded: consumer has no "
                 "MaxDeliver");
    else
        snprintf(horizon, sizeof(horizon), "redelivery horizon %s",
                 ib_host_duration_str(hz_s, sizeof(hz_s), hz));
    if (f == IB_HOST_UNBOUNDED)
        snprintf(buf, cap,
                 "%s %s is shorter than the time a message can still be delivered, which has "
                 "no bound (stream %.48s MaxAge %s; %s)",
                 what, ret, stream, age, horizon);
    else
        snprintf(buf, cap,
                 "%s %s is shorter than the %s a message can still be delivered (stream %.48s "
                 "MaxAge %s; %s)",
                 what, ret, ib_host_duration_str(floor, sizeof(floor), f), stream, age, horizon);
    return buf;
}

/* A kv: bucket prunes by its TTL, checked against the horizon at open. */
static bool prunes_itself(const char *recorder_kind)
{
    return recorder_kind != NULL && strcmp(recorder_kind, "kv") == 0;
}

int64_t ib_host_retention_effective_ms(int64_t retention_ms, const ib_delivery_window *w,
                                       const char *recorder_kind)
{
    if (retention_ms != IB_HOST_RETENTION_AUTO)
        return retention_ms;
    if (prunes_itself(recorder_kind))
        return 0;
    int64_t floor_ms = w != NULL ? ib_host_retention_floor_ms(w) : IB_HOST_UNBOUNDED;
    return floor_ms == IB_HOST_UNBOUNDED ? 0 : floor_ms;
}

/* An automatic retention: the floor itself, which needs no check, or no
 * pruning when there is no floor. Says what it chose. */
static void retention_choose(ib_host *h, const ib_delivery_window *w)
{
    h->set.retention_ms = ib_host_retention_effective_ms(IB_HOST_RETENTION_AUTO, w, NULL);
    if (h->set.retention_ms == 0) {
        ib_log(IB_SEV_WARN,
               "markers are kept for ever: the stream has no MaxAge, so a message can be "
               "delivered at any time; give the stream a MaxAge (ibus run --create sets one) or "
               "choose a retention",
               IB_LOG_STR("stream", h->cfg->stream), IB_LOG_STR("retention_ms", NULL),
               IB_LOG_STR("floor_ms", NULL));
        return;
    }
    ib_log(IB_SEV_INFO, "retention follows the stream's MaxAge",
           IB_LOG_STR("stream", h->cfg->stream), IB_LOG_I64("retention_ms", h->set.retention_ms),
           IB_LOG_I64("floor_ms", h->set.retention_ms));
}

/* The window and floor of the bound consumer `f` and the stream, into *w.
 * 0, or -1 with `err` set when the stream cannot be read. */
static int read_window(ib_host *h, ib_delivery_window *w, const ib_consumer_facts *f, ib_error *err)
{
    memset(w, 0, sizeof(*w));
    w->ack_wait_ms = f->ack_wait_ms;
    w->max_deliver = f->max_deliver;
    w->backoff_max_ms = f->backoff_max_ms;
    w->nak_max_ms = h->cfg->retry_max_ms;
    return ib_stream_max_age_get(&w->max_age_ms, ib_nats_jetstream(h->nats), h->cfg->stream, err) ==
                   IB_OK
               ? 0
               : -1;
}

int ib__host_retention_check(ib_host *h, const ib_consumer_facts *f, ib_error *err)
{
    const ib_host_config *cfg = h->cfg;
    bool automatic = cfg->retention_ms == IB_HOST_RETENTION_AUTO;
    const char *kind = h->recorder != NULL ? ib_recorder_kind(h->recorder) : NULL;
    h->set.retention_ms = automatic ? 0 : cfg->retention_ms;
    if (cfg->retention_ms == 0 || (automatic && prunes_itself(kind)))
        return 0;
    ib_delivery_window w;
    if (read_window(h, &w, f, err) != 0)
        return -1;
    char why[640];
    int64_t fl = ib_host_retention_floor_ms(&w);
    if (automatic) {
        retention_choose(h, &w);
        return 0;
    }
    /* the figures of every line below; no floor (no MaxAge) is null */
    const ib_log_field figures[] = {
        IB_LOG_I64("retention_ms", cfg->retention_ms),
        fl == IB_HOST_UNBOUNDED ? IB_LOG_STR("floor_ms", NULL) : IB_LOG_I64("floor_ms", fl),
    };
    if (cfg->retention_ms >= fl) {
        ib_log_fields(IB_SEV_INFO, "retention checked", figures, 2);
        return 0;
    }
    ib_host_retention_explain(why, sizeof(why), "--retention", cfg->retention_ms, &w, cfg->stream);
    if (cfg->retention_unsafe) {
        ib_log(IB_SEV_WARN,
               "retention below the floor (--retention-unsafe): markers may be pruned while "
               "their event can still arrive, and then it runs again",
               IB_LOG_STR("detail", why), figures[0], figures[1]);
        return 0;
    }
    /* Logged here, whole: with a long stream name the sentence outgrows an
     * ib_error, and both figures and the way out must reach the operator.
     * The empty message tells the caller it was said. */
    size_t len = strlen(why);
    snprintf(why + len, sizeof(why) - len,
             ": markers could be pruned while their event can still arrive; %s or pass "
             "--retention-unsafe",
             fl == IB_HOST_UNBOUNDED ? "give the stream a MaxAge" : "raise --retention");
    ib_log(IB_SEV_ERROR, why, IB_LOG_STR("status", ib_status_str(IB_ERR_CONFIG)), figures[0],
           figures[1]);
    if (err != NULL) {
        err->status = IB_ERR_CONFIG;
        err->msg[0] = '\0';
    }
    h->set.retention_ms = 0;
    return -1;
}

/* The keeper's timers' context: what they need of the host and the loop
 * they run on. */
struct ib_host_keeper {
    ib_host *h;
    ib_timers *loop;
};

/* Whether a stop was requested: a drain has begun. */
static bool draining(const ib_host *h)
{
    return atomic_load(&h->run.stop_requested_at_ms) != 0;
}

/* Asked before each bounded transaction of a prune pass: lets the control
 * loop's other due timers run, then says whether the pass must end now
 * (the loop stops, or a drain began). */
static bool keeper_quitting(void *arg)
{
    ib_host_keeper *k = arg;
    ib__timers_run_due(k->loop);
    return ib__timers_quitting(k->loop) || draining(k->h);
}

/* One prune pass: markers older than the retention, in the recorder's
 * bounded transactions, asking between them whether the keeper is to stop
 * (so a stop waits for one transaction, never for the pass), and letting
 * the other timers run. Returns false
 * when the kind cannot prune, so the keeper stops trying. */
static bool prune_once(ib_host_keeper *k)
{
    ib_host *h = k->h;
    uint64_t removed = 0;
    ib_error e = {0};
    int64_t cutoff = ib_clock_realtime_ms() - h->set.retention_ms;
    ib_status st = ib__recorder_prune_until(h->recorder, &removed, cutoff, keeper_quitting, k, &e);
    /* a pass an error stopped still removed what it counted */
    ib_metrics_add(h->metrics, IB_METRIC_MARKERS_PRUNED, removed);
    if (st == IB_ERR_UNSUPPORTED) {
        ib_log_kv(IB_SEV_ERROR, "this recorder cannot prune; background pruning stopped",
                  "recorder", h->set.recorder_shown, "error", e.msg, NULL);
        return false;
    }
    if (st != IB_OK)
        ib_log_kv(IB_SEV_WARN, "pruning failed; trying again at the next pass", "error", e.msg,
                  NULL);
    return true;
}

static void count_markers(ib_host *h)
{
    ib_recorder_stats s;
    ib_error e;
    if (ib_recorder_stats_get(h->recorder, &s, &e) == IB_OK)
        ib_metrics_gauge_set(h->metrics, IB_METRIC_MARKERS, (int64_t)s.markers);
}

/* Cheap reads; a failure keeps the last value (the control loop's probe reports
 * the recorder's health). */
static void read_gauges(ib_host *h)
{
    uint64_t n = 0;
    ib_error e;
    ib_metrics_gauge_set(h->metrics, IB_METRIC_RECORDER_WAL_BYTES,
                         (int64_t)ib__recorder_wal_bytes(h->recorder));
    if (ib__recorder_outbox_count(h->recorder, &n, &e) == IB_OK)
        ib_metrics_gauge_set(h->metrics, IB_METRIC_OUTBOX_PENDING, (int64_t)n);
}

/* How often to prune: a tenth of the retention, so a marker outlives it
 * by at most 10%, within PRUNE_MIN_EVERY_MS..PRUNE_MAX_EVERY_MS. */
static int64_t prune_every_ms(int64_t retention_ms)
{
    int64_t every = retention_ms / 10;
    if (every < PRUNE_MIN_EVERY_MS)
        return PRUNE_MIN_EVERY_MS;
    return every > PRUNE_MAX_EVERY_MS ? PRUNE_MAX_EVERY_MS : every;
}

/* The keeper's timers; `ctx` is the ib_host_keeper. Every task runs once
 * when armed (so a backlog of old markers goes at once), then on its own
 * period. */
static int64_t prune_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host_keeper *k = ctx;
    if (!draining(k->h) && !prune_once(k))
        return IB_TIMER_NOMORE;
    return prune_every_ms(k->h->set.retention_ms);
}

/* Not while draining: the drain deadline waits on no read of ours. */
static int64_t recorder_gauges_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host *h = ((ib_host_keeper *)ctx)->h;
    if (!draining(h))
        read_gauges(h);
    return GAUGES_EVERY_MS;
}

/* Counting walks every marker: not while draining, so the drain deadline
 * never waits for it; less often when nothing prunes (the count then only
 * grows). */
static int64_t count_timer(void *ctx, int64_t now)
{
    (void)now;
    ib_host *h = ((ib_host_keeper *)ctx)->h;
    if (!draining(h))
        count_markers(h);
    return h->set.retention_ms > 0 ? COUNT_EVERY_MS : COUNT_IDLE_EVERY_MS;
}

int ib__host_keeper_arm(ib_host_keeper **out, ib_host *h, ib_timers *loop)
{
    ib_host_keeper *k = calloc(1, sizeof(*k));
    *out = k;
    if (k == NULL)
        return -1;
    k->h = h;
    k->loop = loop;
    if (h->set.retention_ms > 0 && ib__timers_add(loop, 0, prune_timer, k) < 0)
        return -1;
    if (ib__timers_add(loop, 0, recorder_gauges_timer, k) < 0)
        return -1;
    /* a kv: bucket is counted by reading every key over the network */
    if (strcmp(ib_recorder_kind(h->recorder), "kv") != 0 &&
        ib__timers_add(loop, 0, count_timer, k) < 0)
        return -1;
    return 0;
}

void ib__host_keeper_free(ib_host_keeper *k)
{
    free(k);
}
