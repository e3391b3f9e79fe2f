/* SPDX-License-Identifier: Apache-2.0 */
/* Handler calls that overrun, as the host sees them (host_internal.h):
 * the control loop's scan against --handler-timeout, /healthz's liveness
 * answer, and systemd's watchdog, which a stuck process stops feeding.
 *
 * A call past the timeout is not interrupted: C code cannot be cancelled
 * safely, and the call may still finish its work. It keeps its claim
 * (renewed with the batch's others) and its message stays in progress, so
 * no other process runs the event while this one might; /healthz answers
 * 503 so that the supervisor restarts the process, after which the claim
 * passes on by the lease rules. A call that returns late clears it all. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "host_internal.h"
#include "log.h"

/* ---- the scan --------------------------------------------------------------- */

typedef struct overdue_scan {
    ib_host *h;
    size_t found;
    size_t fresh; /* overdue calls not seen before this scan */
} overdue_scan;

static ib_host_overdue *overdue_find(ib_host *h, const ib_overdue_call *call)
{
    for (size_t i = 0; i < h->health.seen_n; i++) {
        ib_host_overdue *o = &h->health.seen[i];
        if (o->handler == call->handler && o->started_ms == call->started_ms &&
            strcmp(o->event_id, call->event_id) == 0)
            return o;
    }
    return NULL;
}

/* One call past the timeout: the first found names /healthz's reason; a
 * new one is logged and counted once. */
static void on_overdue(void *ctx, const ib_overdue_call *call)
{
    overdue_scan *s = ctx;
    ib_host *h = s->h;
    char ran[32], limit[32];
    ib_host_duration_str(ran, sizeof(ran), call->running_ms / 1000 * 1000);
    ib_host_duration_str(limit, sizeof(limit), h->cfg->handler_timeout_ms);
    if (s->found++ == 0) {
        pthread_mutex_lock(&h->health.lock);
        snprintf(h->health.why, sizeof(h->health.why),
                 "handler %s has run %s on event %s (--handler-timeout %s)", call->consumer, ran,
                 call->event_id, limit);
        pthread_mutex_unlock(&h->health.lock);
    }
    ib_host_overdue *o = overdue_find(h, call);
    if (o != NULL) {
        o->seen = true;
        return;
    }
    if (h->health.seen_n == IB_HOST_OVERDUE_MAX)
        return; /* counted in the gauge; too many to tell apart */
    s->fresh++;
    o = &h->health.seen[h->health.seen_n++];
    *o = (ib_host_overdue){.handler = call->handler, .started_ms = call->started_ms, .seen = true};
    snprintf(o->event_id, sizeof(o->event_id), "%s", call->event_id);
    if (call->handler < h->consumer_metrics_n)
        ib_metrics_consumer_timeout(h->consumer_metrics[call->handler]);
    ib_log(IB_SEV_ERROR,
           "handler call overdue: past --handler-timeout; /healthz fails until it returns, so the "
           "supervisor restarts the process (the event is not acked and comes back)",
           IB_LOG_STR("consumer", call->consumer), IB_LOG_STR("event_id", call->event_id),
           IB_LOG_I64("running_ms", call->running_ms),
           IB_LOG_I64("timeout_ms", h->cfg->handler_timeout_ms));
}

/* Forgets the calls the last scan did not see: they returned. */
static size_t overdue_forget_returned(ib_host *h)
{
    size_t kept = 0, gone = 0;
    for (size_t i = 0; i < h->health.seen_n; i++) {
        if (h->health.seen[i].seen)
            h->health.seen[kept++] = h->health.seen[i];
        else
            gone++;
    }
    h->health.seen_n = kept;
    return gone;
}

void ib__host_flush_marks(ib_host *h, const char *why)
{
    size_t marked = 0;
    ib_error e = {0};
    if (ib_dispatch_flush_marks(h->dispatch, &marked, &e) != IB_OK)
        ib_log(IB_SEV_WARN, "cannot make the marks of finished handler calls durable yet",
               IB_LOG_STR("why", why), IB_LOG_STR("error", e.msg));
    else if (marked > 0)
        ib_log(IB_SEV_INFO, "marks of finished handler calls made durable early",
               IB_LOG_STR("why", why), IB_LOG_U64("marked", marked));
}

void ib__host_check_overdue(ib_host *h)
{
    if (h->cfg->handler_timeout_ms <= 0 || h->dispatch == NULL)
        return;
    overdue_scan s = {.h = h};
    for (size_t i = 0; i < h->health.seen_n; i++)
        h->health.seen[i].seen = false;
    ib_dispatch_overdue(h->dispatch, h->cfg->handler_timeout_ms, on_overdue, &s);
    /* A call that may never return: the marks its batch mates earned are
     * asked to be made durable now, not at the end of the commit interval
     * or a back-off, so a restart does not run them again. A request: the
     * dispatch writes them (its batch thread, or its stand-in while that
     * thread is in the call), this one does not wait. */
    if (s.fresh > 0)
        ib__host_flush_marks(h, "a handler call is overdue");
    size_t returned = overdue_forget_returned(h);
    int before = atomic_exchange(&h->health.overdue, (int)s.found);
    ib_metrics_gauge_set(h->metrics, IB_METRIC_HANDLERS_OVERDUE, (int64_t)s.found);
    if (returned > 0)
        ib_log(IB_SEV_WARN, "overdue handler call returned", IB_LOG_U64("count", returned),
               IB_LOG_U64("still_overdue", s.found));
    if (before > 0 && s.found == 0)
        ib_log_kv(IB_SEV_INFO, "no handler call is overdue any more; /healthz answers 200 again",
                  NULL);
}

int ib__host_live(void *ctx, char *why, size_t cap)
{
    ib_host *h = ctx;
    if (atomic_load(&h->health.overdue) == 0)
        return 1;
    pthread_mutex_lock(&h->health.lock);
    snprintf(why, cap, "%s", h->health.why);
    pthread_mutex_unlock(&h->health.lock);
    return 0;
}

/* ---- systemd's watchdog --------------------------------------------------- */

/* The notify socket and the ping period, owned by the control loop. */
struct ib_host_watchdog {
    ib_host *h;
    int fd;
    struct sockaddr_un sa;
    socklen_t len;
    int64_t every_ms;
};

/* $NOTIFY_SOCKET: a path, or "@name" for an abstract socket. */
static int notify_address(struct sockaddr_un *sa, socklen_t *len, const char *name)
{
    size_t n = strlen(name);
    if (n < 2 || n >= sizeof(sa->sun_path) || (name[0] != '/' && name[0] != '@'))
        return -1;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, name, n);
    if (name[0] == '@')
        sa->sun_path[0] = '\0';
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    return 0;
}

int64_t ib__host_watchdog_timer(void *ctx, int64_t now)
{
    (void)now;
    struct ib_host_watchdog *w = ctx;
    static const char ping[] = "WATCHDOG=1";
    /* never blocks: a receiver that does not read (its queue full) must
     * not stall the loop, and a lost ping is harmless */
    if (atomic_load(&w->h->health.overdue) == 0)
        (void)sendto(w->fd, ping, sizeof(ping) - 1, MSG_NOSIGNAL | MSG_DONTWAIT,
                     (const struct sockaddr *)&w->sa, w->len);
    return w->every_ms;
}

/* Whether systemd asked this process for watchdog pings, and how often
 * (half its period, at least 20 ms). */
static bool watchdog_asked(int64_t *every_ms)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (usec == NULL || getenv("NOTIFY_SOCKET") == NULL)
        return false;
    if (pid != NULL && strtoll(pid, NULL, 10) != (long long)getpid())
        return false;
    long long us = strtoll(usec, NULL, 10);
    if (us <= 0)
        return false;
    *every_ms = us / 2000 > 20 ? us / 2000 : 20;
    return true;
}

int ib__host_watchdog_open(struct ib_host_watchdog **out, ib_host *h)
{
    int64_t every = 0;
    *out = NULL;
    if (!watchdog_asked(&every))
        return 0;
    struct ib_host_watchdog *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -1;
    w->h = h;
    w->every_ms = every;
    if (notify_address(&w->sa, &w->len, getenv("NOTIFY_SOCKET")) != 0 ||
        (w->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
        ib_log_kv(IB_SEV_WARN, "cannot use $NOTIFY_SOCKET: no watchdog pings", "error",
                  strerror(errno), NULL);
        free(w);
        return 0;
    }
    *out = w;
    ib_log(IB_SEV_INFO, "systemd watchdog: pinging while no handler call is overdue",
           IB_LOG_I64("every_ms", every));
    return 0;
}

void ib__host_watchdog_close(struct ib_host_watchdog *w)
{
    if (w == NULL)
        return;
    close(w->fd);
    free(w);
}
