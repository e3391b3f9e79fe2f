/* SPDX-License-Identifier: Apache-2.0 */
/* host: `ibus run`, the subscriber host. It binds one durable pull
 * consumer, runs every event it pulls through the idempotent core
 * (plugin/dispatch) and settles the message. This comment is the one
 * description of the host's threads, what each owns and the order of a
 * message's life; the other host_*.c files point here.
 *
 * THE LIFE OF A MESSAGE
 *  1. The batch thread asks the puller for up to --batch messages
 *     (run_loop), having asked for the next batch ahead when the last one
 *     was quick.
 *  2. Decode (host_batch.c): the JetStream metadata from the reply
 *     subject, then the event, bounded and validated. A message that is
 *     not a delivery is dropped; one that does not decode is marked for
 *     the dead-letter subject; a valid one becomes a delivery.
 *  3. Dispatch: the batch is published as the batch in flight
 *     (host_inflight.c), and the deliveries go through ib_dispatch_run:
 *     one claim transaction, the handlers (on this thread, or the
 *     dispatch's workers with --concurrency > 1),
 *     their marks committed as they finish. While it runs, the control
 *     thread sends +WPI for the batch every half AckWait and asks the
 *     dispatch to renew its claims' leases (the batch thread writes them,
 *     between two handler calls, or the dispatch's stand-in during one).
 *  4. A delivery whose marks are durable is acked at once (on_settled, on
 *     the committer's thread).
 *  5. The batch in flight is cleared; from here no +WPI goes out for it.
 *  6. Settle: every other message is acked, nak'ed with a delay (noted in
 *     the retries table under --idle-exit) or dead-lettered: published to
 *     the dead-letter subject, its attempts ended, then terminated.
 *  7. The messages are destroyed; the outbox of transactional handlers is
 *     sent when due (host_outbox.c).
 *  8. On a stop: the loop ends, what was pulled and not started is handed
 *     back (nak'ed at once), the outbox flushed, the control loop stopped,
 *     then the puller, the connection (flushing the last acks), dispatch,
 *     the plugins and the recorder, and the summary line is written.
 *
 * THREADS AND WHO OWNS WHAT (host_internal.h has the structs)
 *  - The batch thread (main): run_loop, the puller, ib_host_batch (totals,
 *    working arrays, outbox, retries), and everything set up before the
 *    control loop's watcher timers are armed (ib_host_settings, the
 *    parts), which nobody writes after. Signals are handled here alone.
 *  - The dispatch's threads run handlers and commit marks during
 *    ib_dispatch_run; they call back into the host (the observer,
 *    on_settled, on_recorder, on_circuit) only while a batch runs.
 *  - The control thread: one loop of timers (host_timers.c), and
 *    ib_host_control with everything its timers keep (the probe's and the
 *    consumer info's state, the watchdog's socket, the keeper's context)
 *    and ib_host_health's list of overdue calls. The batch thread never
 *    reads them.
 *  - Shared: the batch in flight (its own lock), ib_host_run_state and
 *    ib_host_recorder_health (atomics), and /healthz's reason (a lock
 *    held for a copy). The HTTP server's thread only reads them.
 *
 * INVARIANTS
 *  1. No lock is held across a store write or a network call. The +WPI
 *     publishes go out under the in-flight record's `sending` flag, not
 *     its lock; the lease renewal is asked for after it (the dispatch
 *     writes it); every other lock of the host guards a copy.
 *  2. The batch thread waits for the control thread in one place only:
 *     ending a batch waits for the +WPI being sent for it (publishes into
 *     the connection's buffer), never for a store.
 *  3. No +WPI for a message follows its settlement by the batch thread: a
 *     +WPI after a nak would restart AckWait and replace the nak's delay.
 *     Acks during the run (4 above) may cross a +WPI; the server drops a
 *     +WPI for a message no longer pending.
 *  4. A message is acked only once its marks are durable; a stop makes the
 *     marks of finished calls durable before the drain deadline can end
 *     the process.
 *  5. One timer runs at a time, and each does one bounded step (one store
 *     transaction or one request with its timeout): a prune pass lets the
 *     other due timers run between its transactions and ends at a stop.
 *  6. The control loop sleeps until its nearest deadline; a signal, a
 *     timer added or the end of the run loop wakes it at once.
 *  7. While draining, the control loop reads no store for itself (no
 *     probe, consumer info, recorder gauges, marker count or prune), so
 *     the deadline waits on nothing but the requests to flush finished
 *     marks and renew leases, which return at once.
 *  8. The watchdog is pinged from the control loop: a loop stuck in one
 *     step stops the pings, as does a handler call past its timeout.
 *
 * THE CONTROL LOOP'S TIMERS (host_control.c arms them; T = AckWait / 8,
 * within 20 ms and 250 ms)
 *  - systemd watchdog ping, from start-up: half $WATCHDOG_USEC (at least
 *    20 ms), while no handler call is overdue (host_health.c);
 *  and once the consumer is bound, each first at once:
 *  - in-progress: every T, +WPI and lease renewal once half AckWait passed
 *    since the batch began or the last +WPI;
 *  - overdue scan against --handler-timeout: every T (host_health.c);
 *  - stop: every T and on every wake-up, until the stop is seen; then the
 *    drain deadline, once, --drain-timeout after the stop (when set);
 *  - connection gauges (ibus_connected, ibus_consumer_bound): every T;
 *  - recorder probe: every 2 s while idle (T while a batch runs);
 *  - consumer info (pending gauges): every 5 s (T while disconnected);
 *  - prune: a tenth of the retention, 1 s to 60 s, when there is one
 *    (host_retention.c);
 *  - recorder gauges (WAL bytes, outbox): every 5 s;
 *  - marker count: every 5 s, or 30 s when nothing prunes; not on kv:.
 */
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jetstream.h"
#include "host_internal.h"
#include "host_signal.h"
#include "log.h"
#include "owner.h"
#include "clock.h"
#include "utf8.h"
#include <infinity_bus/version.h>
#include <jansson.h>

extern char **environ;

/* How long the shutdown hand-back collects messages to nak. */
#define HAND_BACK_WAIT_MS 1500

/* A deleted consumer: how often to look it up, and how long to wait for it
 * to come back before exiting 1. */
#define CONSUMER_LOOKUP_INTERVAL_MS 1000
#define CONSUMER_GONE_GRACE_MS 10000
/* How long start-up waits out a server that times out or has no
 * responder (with_grace). */
#define START_GRACE_MS 30000

/* open_consumer(): a signal came before the consumer was bound. */
#define STOPPED_BEFORE_BINDING (-2)
/* While the first connect fails: the first reminder, and the longest
 * interval between two (wait_connected). */
#define CONNECT_LOG_FIRST_MS 2000
#define CONNECT_LOG_MAX_MS 60000
/* Once --idle-exit's time has passed, the run still waits for the retries
 * it asked for whose delay ends within the longer of --idle-exit and
 * this; one due later is left to the next run (and the exit is 1). */
#define IDLE_RETRY_WAIT_MS 60000

/* /readyz: ready once connected, bound and not stopping, with a recorder
 * that answers; otherwise `why` says which of these is missing, so a probe
 * that fails names its reason. */
static int ready(void *ctx, char *why, size_t cap)
{
    ib_host *h = ctx;
    if (atomic_load(&h->run.stopping)) {
        snprintf(why, cap, "stopping");
        return 0;
    }
    if (h->nats == NULL || !ib_nats_is_connected(h->nats)) {
        char err[160] = "";
        if (h->nats != NULL)
            ib_nats_last_error(h->nats, err, sizeof(err));
        snprintf(why, cap, "not connected to NATS at %s%s%s", h->set.nats_url,
                 err[0] != '\0' ? ": " : "", err);
        return 0;
    }
    if (!atomic_load(&h->run.bound)) {
        snprintf(why, cap, "consumer %s on stream %s not bound", h->cfg->durable, h->cfg->stream);
        return 0;
    }
    if (atomic_load(&h->rec.down)) {
        snprintf(why, cap, "recorder %s is failing", h->set.recorder_shown);
        return 0;
    }
    /* bound is set once dispatch exists */
    return ib__host_circuits_why(h, why, cap) ? 0 : 1;
}

/* Fatal setup errors: configuration problems exit 2, the rest 1. An
 * empty message means the failing step has logged its own. */
static int fail(const ib_error *e)
{
    char msg[sizeof(e->msg) + 64];
    if (e->msg[0] != '\0')
        ib_log_kv(IB_SEV_ERROR, ib_host_flag_hint(msg, sizeof(msg), e->msg), "status",
                  ib_status_str(e->status), NULL);
    return e->status == IB_ERR_CONFIG || e->status == IB_ERR_PLUGIN || e->status == IB_ERR_SCHEMA ||
                   e->status == IB_ERR_INVALID_ARG
               ? 2
               : 1;
}

/* Every handler of `pl` as ib_host_handler_describe writes it, joined by
 * "; ", into buf (cap bytes). */
static const char *describe_handlers(char *buf, size_t cap, const ib_host *h, const ib_plugin *pl)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ib_plugin_handler_count(pl) && used + 1 < cap; i++) {
        char one[512];
        ib_host_handler_describe(one, sizeof(one), pl, i, h->cfg->durable, h->cfg->consumer_names);
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i > 0 ? "; " : "", one);
    }
    return buf;
}

/* Every plugin configuration given by name (--plugin-config NAME=...,
 * IB_PLUGIN_CONFIG_<NAME>) must name a loaded plugin: a misspelt name
 * would otherwise leave the plugin it meant unconfigured, or running on
 * its defaults, without a word. Checked before any init(), so that
 * plugin's own complaint cannot hide the cause. */
static int check_plugin_configs(const ib_host *h, ib_error *err)
{
    const char *names[IB_HOST_MAX_PLUGINS];
    char loaded[512] = "", meant[160] = "";
    ib_plugin_config_stray st;
    for (size_t p = 0; p < h->plugin_count; p++) {
        names[p] = ib_plugin_name(h->plugins[p]);
        size_t used = strlen(loaded);
        snprintf(loaded + used, sizeof(loaded) - used, "%s%s", used > 0 ? ", " : "", names[p]);
    }
    if (!ib_plugin_config_find_stray(&st, h->cfg->plugin_configs, environ, names, h->plugin_count))
        return 0;
    int len = (int)st.name_len;
    if (st.from_env) {
        char var[sizeof("IB_PLUGIN_CONFIG_") + IB_PLUGIN_NAME_MAX];
        if (st.nearest != NULL && ib_plugin_config_env_name(var, sizeof(var), st.nearest))
            snprintf(meant, sizeof(meant), "did you mean %s? ", var);
        ib_error_set(err, IB_ERR_CONFIG,
                     "environment variable %.*s: no plugin of that name is loaded (loaded: %s); "
                     "%sunset it, or name the plugin as it declares itself",
                     len, st.entry, loaded, meant);
        return -1;
    }
    if (st.nearest != NULL)
        snprintf(meant, sizeof(meant), "did you mean %s? ", st.nearest);
    ib_error_set(err, IB_ERR_CONFIG,
                 "--plugin-config %.*s=...: no plugin named '%.*s' is loaded (loaded: %s); "
                 "%suse the name the plugin declares",
                 len, st.entry, len, st.entry, loaded, meant);
    return -1;
}

/* Inits plugin `pl` with its configuration and says it is loaded.
 * Returns 0, or -1 with `err` set. */
static int init_plugin(ib_host *h, ib_plugin *pl, const char *path, ib_error *err)
{
    char *config = NULL;
    if (ib_plugin_config_lookup(&config, h->cfg->plugin_configs, ib_plugin_name(pl), err) != IB_OK)
        return -1;
    ib_status st =
        ib_plugin_init(pl, ib__host_api(h->cfg->check_only), config != NULL ? config : "", err);
    free(config);
    if (st != IB_OK)
        return -1;
    char handlers[1024];
    ib_log_kv(IB_SEV_INFO, "plugin loaded", "plugin", ib_plugin_name(pl), "version",
              ib_plugin_version(pl), "path", path, "handlers",
              describe_handlers(handlers, sizeof(handlers), h, pl), NULL);
    return 0;
}

/* Opens every plugin, checks the configurations given by name against
 * their names, then inits each. Returns 0, or -1 with `err` set. */
static int load_plugins(ib_host *h, ib_error *err)
{
    ib_plugin_open_options po = {.allow_insecure_files = h->cfg->allow_insecure_plugins};
    for (const char *const *p = h->cfg->plugins; p != NULL && *p != NULL; p++) {
        if (h->plugin_count == IB_HOST_MAX_PLUGINS) {
            ib_error_set(err, IB_ERR_CONFIG, "at most %d plugins can be loaded",
                         IB_HOST_MAX_PLUGINS);
            return -1;
        }
        ib_plugin *pl = NULL;
        if (ib_plugin_open(&pl, *p, &po, err) != IB_OK)
            return -1;
        h->plugins[h->plugin_count++] = pl;
    }
    if (h->plugin_count == 0) {
        ib_error_set(err, IB_ERR_CONFIG, "no plugin to load");
        return -1;
    }
    if (check_plugin_configs(h, err) != 0)
        return -1;
    for (size_t i = 0; i < h->plugin_count; i++)
        if (init_plugin(h, h->plugins[i], h->cfg->plugins[i], err) != 0)
            return -1;
    return ib_host_overrides_check(h->cfg->consumer_names, h->plugins, h->plugin_count, err) ==
                   IB_OK
               ? 0
               : -1;
}

static int bind_consumer(ib_host *h, ib_error *err)
{
    ib_consumer_facts facts;
    ib_consumer_setup s = ib__host_consumer_setup(h, h->cfg->durable, h->cfg->subject,
                                                  h->cfg->create, h->set.dead_letter_subject);
    if (ib_consumer_ensure(&facts, ib_nats_jetstream(h->nats), &s, err) != IB_OK)
        return -1;
    /* The lease follows the server's AckWait. The poison rule fires on
     * the configured max_deliver, or on the consumer's own MaxDeliver when an operator
     * set one (then a dead-letter publish that fails on that last delivery
     * strands the message: say so). */
    h->set.ack_wait_ms = facts.ack_wait_ms > 0 ? facts.ack_wait_ms : h->cfg->ack_wait_ms;
    h->set.max_deliver = (uint64_t)h->cfg->max_deliver;
    if (facts.max_deliver > 0) {
        h->set.max_deliver = (uint64_t)facts.max_deliver;
        ib_log_kv(IB_SEV_WARN,
                  "consumer has a MaxDeliver limit: a message whose dead-letter publish fails on "
                  "the last delivery is not redelivered; prefer MaxDeliver -1 (ibus enforces "
                  "its own delivery limit)",
                  "durable", h->cfg->durable, NULL);
    }
    ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_PENDING, (int64_t)facts.num_pending);
    ib_log(IB_SEV_INFO, "consumer bound", IB_LOG_STR("stream", h->cfg->stream),
           IB_LOG_STR("durable", h->cfg->durable), IB_LOG_I64("ack_wait_ms", h->set.ack_wait_ms),
           IB_LOG_U64("max_deliver", h->set.max_deliver));
    /* now that the consumer's real settings are known */
    return ib__host_retention_check(h, &facts, err);
}

/* A string for jansson, which refuses invalid UTF-8 (json_string gives
 * NULL): each byte of a broken sequence becomes U+FFFD, as in the logs. A
 * durable name reaches the summary unchecked when the server was never
 * reached, so it can hold any bytes. */
static json_t *json_text(const char *s)
{
    json_t *j = json_string(s);
    if (j != NULL)
        return j;
    size_t n = strlen(s);
    char *fixed = malloc(n * 3 + 1);
    if (fixed == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = ib__utf8_decode(&cp, (const uint8_t *)s + i, n - i);
        if (len == 0) {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(fixed + o, s + i, len);
            o += len;
            i += len;
        }
    }
    j = json_stringn(fixed, o);
    free(fixed);
    return j;
}

/* One log field as a jansson value, typed as the JSON logs type it. A
 * counter beyond INT64_MAX (jansson's integers are signed) becomes a real. */
static json_t *json_from_field(const ib_log_field *f)
{
    switch (f->kind) {
    case IB_LOG_KIND_STR:
        return f->v.s != NULL ? json_text(f->v.s) : json_null();
    case IB_LOG_KIND_I64:
        return json_integer((json_int_t)f->v.i);
    case IB_LOG_KIND_U64:
        return f->v.u <= INT64_MAX ? json_integer((json_int_t)f->v.u) : json_real((double)f->v.u);
    case IB_LOG_KIND_F64:
        return isfinite(f->v.f) ? json_real(f->v.f) : json_null();
    case IB_LOG_KIND_BOOL:
        return json_boolean(f->v.b);
    default:
        return json_null();
    }
}

char *ib_host_summary_line(long pid, const char *durable, int exit_code, const ib_log_field *fields,
                           size_t n)
{
    json_t *o = json_object();
    int bad = o == NULL;
    bad |= json_object_set_new(o, "pid", json_integer(pid));
    bad |= json_object_set_new(o, "durable", durable != NULL ? json_text(durable) : json_null());
    bad |= json_object_set_new(o, "exit", json_integer(exit_code));
    for (size_t i = 0; i < n && !bad; i++)
        bad |= json_object_set_new(o, fields[i].key, json_from_field(&fields[i]));
    /* compact, as the line always was: readers look for "acked":N */
    size_t need = bad ? 0 : json_dumpb(o, NULL, 0, JSON_COMPACT);
    char *line = need > 0 ? malloc(need + 2) : NULL;
    if (line != NULL) {
        json_dumpb(o, line, need, JSON_COMPACT);
        line[need] = '\n';
        line[need + 1] = '\0';
    }
    json_decref(o);
    return line;
}

/* Why a file the host writes cannot be opened: a symbolic link at its path
 * (O_NOFOLLOW's ELOOP) is said as such. */
static const char *open_error(int err)
{
    return err == ELOOP ? "refusing to follow a symbolic link" : strerror(err);
}

/* A symbolic link where the summary file should be would have the host
 * append to whatever file it names: refused at start, before any event is
 * taken, as the open at exit refuses one planted since. Returns 0, or -1
 * with `e` set. */
static int check_summary_file(const ib_host_config *cfg, ib_error *e)
{
    struct stat st;
    if (cfg->summary_file == NULL || cfg->summary_file[0] == '\0' ||
        lstat(cfg->summary_file, &st) != 0 || !S_ISLNK(st.st_mode))
        return 0;
    ib_error_set(e, IB_ERR_CONFIG, "summary file %s: %s", cfg->summary_file, open_error(ELOOP));
    return -1;
}

/* Appends `line` to `path` with one write() (hosts sharing the file do not
 * mix their lines); says why when it cannot. */
static void append_summary(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    size_t len = strlen(line);
    ssize_t w = fd >= 0 ? write(fd, line, len) : -1;
    int err = errno;
    if (fd >= 0)
        close(fd);
    if (w == (ssize_t)len)
        return;
    ib_log(IB_SEV_ERROR, fd < 0 ? "cannot open the summary file" : "cannot write the summary file",
           IB_LOG_STR("path", path), IB_LOG_STR("error", w < 0 ? open_error(err) : "short write"));
}

/* The exit summary: the "stopped" record, and one line appended to
 * --summary-file. */
static void write_summary(const ib_host *h, int exit_code)
{
    const ib_host_totals *t = &h->batch.totals;
    const ib_puller_stats *ps = &h->batch.pull_stats;
    /* pull_requests and leftovers (messages that reached the inbox after
     * their pull request had ended) show the consumption design at work. */
    const ib_log_field counters[] = {
        IB_LOG_U64("received", t->received),
        IB_LOG_U64("handled", t->handled),
        IB_LOG_U64("duplicates", t->duplicates),
        IB_LOG_U64("retried", t->retried),
        IB_LOG_U64("rejected", t->rejected),
        IB_LOG_U64("unhandled", t->unhandled),
        IB_LOG_U64("dead_lettered", t->dead_lettered),
        IB_LOG_U64("acked", t->acked),
        IB_LOG_U64("naked", t->naked),
        IB_LOG_U64("busy", t->busy),
        IB_LOG_U64("unmarked", t->unmarked),
        IB_LOG_U64("pull_requests", ps->requests),
        IB_LOG_U64("leftovers", ps->leftovers),
        /* how long joining a shared marker file took (churn tests read them) */
        IB_LOG_I64("first_handled_ms", h->batch.first_handled_ms),
        IB_LOG_I64("lock_wait_max_ms", h->batch.lock_wait_max_ms),
    };
    const size_t n = sizeof(counters) / sizeof(counters[0]);
    if (h->cfg->summary_file != NULL && h->cfg->summary_file[0] != '\0') {
        char *line = ib_host_summary_line((long)getpid(), h->cfg->durable, exit_code, counters, n);
        if (line != NULL)
            append_summary(h->cfg->summary_file, line);
        free(line);
    }
    ib_log_fields(IB_SEV_INFO, "stopped", counters, n);
}

/* Stop taking messages: collect what is queued and what still arrives for
 * the request in flight, and nak all of it at once so another process
 * takes it now, not after AckWait. `buf` holds `cap` messages: keep
 * collecting until nothing more comes, within one deadline. */
static void hand_back(ib_host *h, natsMsg **buf, size_t cap)
{
    size_t total =
        ib_puller_hand_back(h->puller, ib_nats_connection(h->nats), buf, cap, HAND_BACK_WAIT_MS);
    if (total > 0)
        ib_log(IB_SEV_INFO, "handed back undelivered messages", IB_LOG_U64("count", total));
}

/* Whether the durable still exists, as far as the pull answers and the
 * server's consumer info tell. The puller only suspects (409 "Consumer
 * Deleted", 503 no responders), and only when a request was waiting at the
 * deletion: nats-server 2.9 answers a pull request for a missing consumer
 * with nothing at all, so the control loop's periodic consumer info saying "not
 * found" is a suspicion too. A lookup that answers "not found" decides.
 * While it is gone /readyz is false; if it does not come back within
 * CONSUMER_GONE_GRACE_MS the process exits 1, so its supervisor notices
 * instead of it idling forever. */
typedef struct consumer_watch {
    int64_t gone_since; /* 0 = present */
    int64_t next_lookup;
} consumer_watch;

/* Returns 1 when the process should exit, else 0. */
static int watch_consumer(ib_host *h, consumer_watch *w)
{
    int64_t now = ib_clock_monotonic_ms();
    ib_puller_condition c = ib_puller_condition_get(h->puller);
    bool info_not_found = atomic_load(&h->run.info_not_found) != 0;
    if (w->gone_since == 0 && c != IB_PULLER_CONSUMER_GONE && !info_not_found)
        return 0;
    if (w->gone_since != 0 && c == IB_PULLER_OK && !info_not_found) {
        /* a message or a normal end of a request: it answers again */
        w->gone_since = 0;
        atomic_store(&h->run.bound, 1);
        ib_log_kv(IB_SEV_INFO, "consumer is back", "durable", h->cfg->durable, NULL);
        return 0;
    }
    if (now < w->next_lookup)
        goto check_grace;
    w->next_lookup = now + CONSUMER_LOOKUP_INTERVAL_MS;
    ib_consumer_facts f;
    ib_error e;
    if (ib_consumer_facts_get(&f, ib_nats_jetstream(h->nats), h->cfg->stream, h->cfg->durable,
                              &e) != IB_OK)
        goto check_grace; /* cannot tell now (disconnected, timeout) */
    if (f.exists && w->gone_since != 0) {
        w->gone_since = 0;
        atomic_store(&h->run.bound, 1);
        ib_log_kv(IB_SEV_INFO, "consumer is back", "durable", h->cfg->durable, NULL);
    } else if (!f.exists && w->gone_since == 0) {
        w->gone_since = now;
        atomic_store(&h->run.bound, 0);
        ib_log(IB_SEV_ERROR,
               "consumer deleted: not ready; exiting 1 unless it comes back within the grace "
               "period",
               IB_LOG_STR("stream", h->cfg->stream), IB_LOG_STR("durable", h->cfg->durable),
               IB_LOG_I64("grace_ms", CONSUMER_GONE_GRACE_MS));
    }
check_grace:
    if (w->gone_since != 0 && now - w->gone_since >= CONSUMER_GONE_GRACE_MS) {
        ib_log_kv(IB_SEV_ERROR, "consumer still deleted after the grace period; exiting 1",
                  "stream", h->cfg->stream, "durable", h->cfg->durable, NULL);
        return 1;
    }
    return 0;
}

/* When every handler's circuit is open there is nothing to pull for until
 * a probe is due: waits (at most 250 ms at a time, so signals and the
 * consumer watch stay prompt) instead of cycling messages through the
 * server. Returns true when it waited; the puller is told, so it pulls
 * nothing ahead until the batch that brings the probe is done. */
static bool hold_for_circuits(ib_host *h)
{
    int64_t hold = ib_dispatch_hold_ms(h->dispatch);
    if (hold <= 0)
        return false;
    ib_puller_hold(h->puller);
    ib__host_outbox_tick(h);
    nats_Sleep(hold < 250 ? hold : 250);
    return true;
}

/* The idle exit's wait for retries: until when the current idle spell
 * waits (a batch starts a new spell), and whether the run said so. */
typedef struct idle_wait {
    int64_t horizon_ms; /* 0 = the idle time has not passed in this spell */
    bool said;          /* once a run: a retry that comes back and is nak'ed again is no news */
} idle_wait;

/* --idle-exit's time has passed: true while a retry this process asked
 * for is still to come back within the wait bound, so the loop keeps
 * pulling for it; false when the run may end. A retry due later is not
 * waited for: the end counts it. */
static bool wait_for_retries(ib_host *h, idle_wait *w)
{
    int64_t now = ib_clock_monotonic_ms(), until;
    int64_t bound =
        h->cfg->idle_exit_ms > IDLE_RETRY_WAIT_MS ? h->cfg->idle_exit_ms : IDLE_RETRY_WAIT_MS;
    if (w->horizon_ms == 0)
        w->horizon_ms = now + bound;
    size_t k = ib__host_retries_due(h->batch.retries, now, w->horizon_ms, &until);
    if (k == 0)
        return false;
    if (!w->said) {
        char msg[160];
        snprintf(msg, sizeof(msg), "idle; waiting %" PRId64 " s for %zu retries to come back",
                 (until - now + 999) / 1000, k);
        ib_log(IB_SEV_INFO, msg, IB_LOG_U64("retries", k), IB_LOG_I64("wait_ms", until - now));
        w->said = true;
    }
    return true;
}

static int run_loop(ib_host *h, natsMsg **buf)
{
    int64_t last_activity = ib_clock_monotonic_ms();
    int64_t backoff = 50;
    consumer_watch watch = {0};
    idle_wait idle = {0};

    while (!ib__host_signal_received()) {
        if (ib_nats_is_closed(h->nats)) {
            char why[256];
            ib_log_kv(IB_SEV_ERROR, "nats connection closed for good; exiting 1", "error",
                      ib_nats_last_error(h->nats, why, sizeof(why)), NULL);
            return 1;
        }
        if (h->fleet == NULL && watch_consumer(h, &watch) != 0)
            return 1;
        ib__host_fleet_tick(h);
        if (atomic_load(&h->rec.schema_changed))
            return 2;
        if (hold_for_circuits(h)) {
            last_activity = ib_clock_monotonic_ms(); /* waiting events are not idleness */
            continue;
        }
        size_t n = 0;
        ib_error e;
        if (ib_puller_next(h->puller, buf, &n, h->batch.cap, 250, &e) != IB_OK) {
            /* Typically a reconnect in progress: wait and retry. */
            ib_log_kv(IB_SEV_WARN, "pull failed; retrying", "error", e.msg, NULL);
            nats_Sleep(backoff);
            backoff = backoff < 2000 ? backoff * 2 : 2000;
            continue;
        }
        backoff = 50;
        for (size_t more = 1, take = ib__host_batch_take(h); n > 0 && n < take && more > 0;
             n += more)
            more = ib_puller_take(h->puller, buf + n, take - n); /* what is ready, no waiting */
        if (n == 0) {
            ib__host_outbox_tick(h);
            if (h->cfg->idle_exit_ms > 0 &&
                ib_clock_monotonic_ms() - last_activity >= h->cfg->idle_exit_ms &&
                !wait_for_retries(h, &idle)) {
                ib_log_kv(IB_SEV_INFO, "idle; exiting", NULL);
                h->batch.idle_exited = true;
                return 0;
            }
            continue;
        }
        /* The puller pulls ahead while the handlers and the recorder run,
         * as far as the time a batch takes allows against AckWait: it is
         * told that time once the batch is done. */
        int64_t started = ib_clock_monotonic_ms();
        ib__host_process_batch(h, buf, n);
        last_activity = ib_clock_monotonic_ms();
        h->batch.last_ms = last_activity - started;
        idle.horizon_ms = 0; /* a new idle spell starts */
        ib_puller_batch_took(h->puller, last_activity - started);
        ib__host_outbox_tick(h);
    }
    return 0;
}

/* The claim owner token of this process incarnation (core/owner.h):
 * readable as <durable>@<host>, unique even where containers share the
 * hostname and PID 1. */
static int make_owner(ib_host *h, ib_error *err)
{
    char host[64] = "host", label[96];
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    snprintf(label, sizeof(label), "%.24s@%.32s", h->cfg->durable, host);
    return ib_owner_make(h->set.owner, sizeof(h->set.owner), label, err) == IB_OK ? 0 : -1;
}

/* Fills in what the host derives from its configuration alone. */
static void host_init(ib_host *h, const ib_host_config *cfg)
{
    memset(h, 0, sizeof(*h));
    h->batch.opened_at_ms = ib_clock_monotonic_ms();
    h->batch.first_handled_ms = -1;
    h->cfg = cfg;
    ib__host_inflight_init(&h->inflight);
    pthread_mutex_init(&h->health.lock, NULL);
    if (cfg->dead_letter != NULL && cfg->dead_letter[0] != '\0')
        snprintf(h->set.dead_letter_subject, sizeof(h->set.dead_letter_subject), "%s",
                 cfg->dead_letter);
    else
        snprintf(h->set.dead_letter_subject, sizeof(h->set.dead_letter_subject), "ibus.dlq.%s",
                 cfg->durable);
    h->set.limits.max_bytes = (size_t)cfg->max_event_bytes;
    h->set.limits.id_flags = cfg->uuid_versions;
    h->set.ack_wait_ms = cfg->ack_wait_ms;
    h->set.max_deliver = (uint64_t)cfg->max_deliver;
    h->batch.bus.subject_prefix = cfg->publish_prefix != NULL ? cfg->publish_prefix : "events";
    h->batch.bus.source = cfg->durable;
    h->batch.bus.timeout_ms = 5000;
    ib_redact_url(h->set.nats_url, sizeof(h->set.nats_url),
                  cfg->nats.url != NULL && cfg->nats.url[0] != '\0' ? cfg->nats.url
                                                                    : "nats://127.0.0.1:4222");
    ib_redact_url(h->set.recorder_shown, sizeof(h->set.recorder_shown), cfg->recorder);
}

/* The longest a delivered event may still come back, from the settings
 * ibus creates its consumer with (the recorder opens before the consumer
 * is bound). 0 when unbounded: then no TTL is long enough to check
 * against. */
static int64_t created_horizon_ms(const ib_host_config *cfg)
{
    ib_delivery_window w = {
        .ack_wait_ms = cfg->ack_wait_ms,
        .max_deliver = cfg->max_deliver,
        .nak_max_ms = cfg->retry_max_ms,
    };
    for (size_t i = 0; cfg->backoff_ms != NULL && i < cfg->backoff_len; i++)
        w.backoff_max_ms =
            cfg->backoff_ms[i] > w.backoff_max_ms ? cfg->backoff_ms[i] : w.backoff_max_ms;
    int64_t horizon = ib_host_redelivery_horizon_ms(&w);
    return horizon == IB_HOST_UNBOUNDED ? 0 : horizon;
}

/* Opens the recorder, on the host's NATS connection when it has one.
 * Returns 0, or -1 with `e` set. */
static int open_recorder(ib_host *h, ib_error *e)
{
    /* A kv: bucket is created only with --create, and refused when it
     * forgets markers before the last redelivery can come. */
    ib_recorder_options ro = {
        .size = sizeof(ro),
        .sqlite_allow_insecure = h->cfg->allow_insecure_db,
        .nats_connection = h->nats != NULL ? ib_nats_connection(h->nats) : NULL,
        .kv_create = h->cfg->create,
        .kv_min_ttl_ms = created_horizon_ms(h->cfg),
        /* a kv: bucket on the run's connection is in the run's domain */
        .kv_js_api_prefix = h->nats != NULL ? ib_nats_api_prefix(h->nats) : NULL,
    };
    /* A file whose lock another process holds past the busy timeout (one
     * stopped in a write, a long outside transaction) is waited for, not
     * given up on: the holder goes on or dies, and then the file is free.
     * A signal ends the wait (exit 1, as any stop before consuming). */
    bool said = false;
    while (ib_recorder_open(&h->recorder, h->cfg->recorder, &ro, e) != IB_OK) {
        if (e->status != IB_ERR_BUSY || ib__host_signal_received())
            return -1;
        if (!said)
            ib_log(IB_SEV_WARN,
                   "the marker file is locked by another process past the busy timeout; "
                   "waiting for it",
                   IB_LOG_STR("recorder", h->cfg->recorder), IB_LOG_STR("error", e->msg));
        said = true;
    }
    if (said)
        ib_log_kv(IB_SEV_INFO, "the marker file is free again; going on", NULL);
    ib_metrics_gauge_set(h->metrics, IB_METRIC_RECORDER_UP, 1);
    return 0;
}

/* Open, first part: what needs no NATS (owner, metrics, batch arrays,
 * recorder, plugins, HTTP). Returns 0, or -1 with `e` set. */
static int open_local(ib_host *h, natsMsg ***buf, ib_error *e)
{
    const ib_host_config *cfg = h->cfg;
    if (check_summary_file(cfg, e) != 0 || make_owner(h, e) != 0)
        return -1;
    h->metrics = ib_metrics_create();
    if (h->metrics == NULL || ib__host_batch_alloc(h, (size_t)cfg->batch) != 0 ||
        (*buf = calloc(h->batch.room, sizeof(**buf))) == NULL ||
        (cfg->idle_exit_ms > 0 && (h->batch.retries = ib__host_retries_new()) == NULL)) {
        ib_error_set(e, IB_ERR_NOMEM, "out of memory");
        return -1;
    }
    ib_metrics_set_version(h->metrics, IB_VERSION);

    /* A recorder that lives on this NATS connection opens once connected
     * (open_consumer); every other one now, so a bad URI or file is reported
     * before any wait for a server. */
    if (cfg->partitions == 0 && !ib__recorder_uri_needs_connection(cfg->recorder) &&
        open_recorder(h, e) != 0)
        return -1;
    if (load_plugins(h, e) != 0)
        return -1;
    if (cfg->http != NULL && cfg->http[0] != '\0' &&
        ib_http_start(&h->http, cfg->http, h->metrics, ready, h, e) != IB_OK)
        return -1;
    ib_http_set_live(h->http, ib__host_live, h);
    if (ib__host_control_start(h) != 0) {
        ib_error_set(e, IB_ERR_IO, "cannot start the control thread");
        return -1;
    }
    return 0;
}

/* How long the first connect may take: --connect-timeout, else
 * --idle-exit (a run that may stop when idle has no reason to wait longer
 * for a server it never reached); 0 = for ever. */
static int64_t connect_limit_ms(const ib_host_config *cfg)
{
    return cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : cfg->idle_exit_ms;
}

/* Waits for the first connect, which nats.c retries in the background
 * (the first failure was logged by ib_nats_connect), for at most `limit_ms`
 * (0 = for ever). While it fails, one warning after 2 s, then at doubling
 * intervals up to one a minute, says what it waits for, so a wrong URL is
 * never silent. Returns true once connected. */
static bool wait_connected(ib_host *h, int64_t limit_ms)
{
    int64_t started = ib_clock_monotonic_ms(), interval = CONNECT_LOG_FIRST_MS;
    for (;;) {
        int64_t wait = interval;
        if (limit_ms > 0) {
            int64_t left = started + limit_ms - ib_clock_monotonic_ms();
            if (left <= 0)
                return false;
            wait = left < wait ? left : wait;
        }
        if (ib_nats_wait_connected(h->nats, ib__host_signal_flag(), wait))
            return true;
        if (ib_nats_is_closed(h->nats) || ib__host_signal_received())
            return false;
        if (limit_ms > 0 && ib_clock_monotonic_ms() - started >= limit_ms)
            return false;
        char why[256];
        ib_log(IB_SEV_WARN, "still cannot connect to NATS; retrying",
               IB_LOG_STR("url", h->set.nats_url),
               IB_LOG_STR("error", ib_nats_last_error(h->nats, why, sizeof(why))),
               IB_LOG_I64("waited_ms", ib_clock_monotonic_ms() - started));
        interval = interval * 2 < CONNECT_LOG_MAX_MS ? interval * 2 : CONNECT_LOG_MAX_MS;
    }
}

/* A stop asked for before the consumer was bound: the run did none of its
 * work, which a supervisor must not take for a clean stop. Returns 1. */
static int stopped_before_consuming(void)
{
    ib_log_kv(IB_SEV_ERROR, "stopped by a signal before consuming anything; exiting 1", NULL);
    return 1;
}

/* Connects and waits for the connection. Returns true when connected;
 * otherwise `*code` is the exit code: 1 for a signal while waiting, when
 * the connect limit passed, or when nats.c gave up on every server (each
 * said why), or fail()'s for a setup error. */
static bool open_connection(ib_host *h, int *code)
{
    ib_nats_config nc = h->cfg->nats;
    ib_error e;
    nc.retry_initial_connect = true;
    if (ib_nats_connect(&h->nats, &nc, &e) != IB_OK) {
        *code = fail(&e);
        return false;
    }
    h->batch.bus.js = ib_nats_jetstream(h->nats);
    int64_t limit = connect_limit_ms(h->cfg);
    if (wait_connected(h, limit))
        return true;
    *code = 1;
    if (ib__host_signal_received()) {
        *code = stopped_before_consuming();
        return false;
    }
    /* Closed before it ever connected (nats.c gave up on every server),
     * or the limit passed: say why, so exit 1 is not silent. */
    char why[256];
    ib_nats_last_error(h->nats, why, sizeof(why));
    if (ib_nats_is_closed(h->nats))
        ib_log_kv(IB_SEV_ERROR, "cannot connect to NATS; exiting 1", "url", h->set.nats_url,
                  "error", why, NULL);
    else
        ib_log(IB_SEV_ERROR,
               h->cfg->connect_timeout_ms > 0
                   ? "cannot connect to NATS within the connect timeout; exiting 1"
                   : "cannot connect to NATS within the idle exit time; exiting 1",
               IB_LOG_STR("url", h->set.nats_url), IB_LOG_STR("error", why),
               IB_LOG_I64("waited_ms", limit));
    return false;
}

/* Whether a failed start-up step may succeed when tried again: the
 * server timed out or had no responder (a cluster electing the leader of a
 * stream or bucket, a node restarted a moment ago), not a configuration
 * error. */
static bool transient(ib_status st)
{
    return st == IB_ERR_NATS || st == IB_ERR_RECORDER || st == IB_ERR_TIMEOUT || st == IB_ERR_BUSY;
}

/* A JetStream request the server refused for want of a permission gets no
 * answer: it fails as a timeout, and only the connection's error callback
 * heard why. Turns such a failure of `e` into the refusal it is. */
static void read_denial(ib_host *h, ib_error *e)
{
    char why[160];
    if (!transient(e->status) || !ib_nats_denied(h->nats, why, sizeof(why)))
        return;
    ib_error_set(e, IB_ERR_REFUSED,
                 "the server refused a permission: %s; grant this user its role's permissions "
                 "(docs/security.md)",
                 why);
}

/* Runs a start-up step that talks to JetStream, retrying a transient
 * failure with back-off (250 ms doubling to 2 s) for up to
 * START_GRACE_MS, so a host started during a leader election waits it out
 * instead of exiting 1. One warning line says it waits. Returns 0, or -1
 * with `e` set by the last try (or a signal stopped the wait). */
static int with_grace(ib_host *h, int (*step)(ib_host *, ib_error *), const char *what, ib_error *e)
{
    int64_t deadline = ib_clock_monotonic_ms() + START_GRACE_MS;
    int64_t wait = 250;
    for (bool warned = false;; warned = true) {
        if (step(h, e) == 0)
            return 0;
        read_denial(h, e);
        if (!transient(e->status) || ib__host_signal_received() ||
            ib_clock_monotonic_ms() + wait > deadline)
            return -1;
        if (!warned)
            ib_log_kv(IB_SEV_WARN, "start-up step failed; retrying while the servers settle",
                      "step", what, "error", e->msg, NULL);
        nats_Sleep(wait);
        wait = wait < 1000 ? wait * 2 : 2000;
    }
}

/* Open, last part: a recorder on this connection, the consumer,
 * dispatch, the puller, and the control loop's timers.
 * Returns 0; -1 with `e` set; or STOPPED_BEFORE_BINDING when a signal came
 * before the consumer was bound (one after it is a clean stop). */
static int open_consumer(ib_host *h, ib_error *e)
{
    const ib_host_config *cfg = h->cfg;
    bool partitioned = cfg->partitions > 0;
    if (partitioned) {
        /* the durables are the partitions', pulled once their lease is taken */
        if (with_grace(h, ib__host_fleet_open, "open the partitions", e) != 0)
            return -1;
    } else if (h->recorder == NULL && with_grace(h, open_recorder, "open the recorder", e) != 0) {
        return -1;
    }
    if (ib__host_signal_received())
        return STOPPED_BEFORE_BINDING;
    if ((!partitioned && with_grace(h, bind_consumer, "bind the consumer", e) != 0) ||
        ib__host_dispatch_open(h, e) != 0)
        return -1;
    ib_puller_options po = {
        .stream = cfg->stream,
        .durable = partitioned ? NULL : cfg->durable,
        .ack_wait_ms = h->set.ack_wait_ms,
        .batch = (size_t)cfg->batch,
        .expires_ms = cfg->pull_expires_ms,
        .flush_ms = cfg->flush_ms,
    };
    if (ib_puller_create(&h->puller, h->nats, &po, e) != IB_OK)
        return -1;
    atomic_store(&h->run.bound, 1);
    if (ib__host_control_bind(h) != 0) {
        ib_error_set(e, IB_ERR_IO, "cannot arm the control loop's timers");
        return -1;
    }
    ib_log_kv(IB_SEV_INFO, "running", "owner", h->set.owner, "recorder",
              partitioned ? "the partition log" : h->set.recorder_shown, "dead_letter",
              h->set.dead_letter_subject, NULL);
    ib__host_fleet_tick(h); /* take this process's partitions before the first pull */
    return 0;
}

/* Open: everything the loop needs, in order. Returns true when the host
 * can serve; otherwise `*code` is the exit code and host_close() frees
 * what was opened. */
static bool host_open(ib_host *h, natsMsg ***buf, int *code)
{
    ib_error e;
    *code = 0;
    if (open_local(h, buf, &e) != 0) {
        *code = fail(&e);
        return false;
    }
    if (!open_connection(h, code))
        return false;
    int opened = open_consumer(h, &e);
    if (opened == STOPPED_BEFORE_BINDING) {
        *code = stopped_before_consuming();
        return false;
    }
    if (opened != 0) {
        *code = fail(&e);
        if (*code == 1 && ib__host_signal_received())
            stopped_before_consuming();
        return false;
    }
    /* What a transactional handler staged before a crash goes out first. */
    ib__host_outbox_flush(h);
    return true;
}

/* After an idle exit: the events this process nak'ed and nobody marked
 * since. None: 0. Some: 1, with a line saying how many and that they wait
 * for the next run, so a run that leaves work behind never ends as one
 * that finished it. */
static int idle_exit_code(ib_host *h)
{
    bool lower_bound;
    size_t left = ib__host_retries_unmarked(h, &lower_bound);
    h->batch.totals.unmarked = left;
    if (left == 0 && !lower_bound)
        return 0;
    char msg[256];
    snprintf(msg, sizeof(msg),
             "this run leaves %s%zu events unmarked (retries it asked for had not come back "
             "when it stopped); they are redelivered to the next run; exiting 1",
             lower_bound ? "at least " : "", left);
    ib_log(IB_SEV_ERROR, msg, IB_LOG_STR("durable", h->cfg->durable), IB_LOG_U64("unmarked", left));
    return 1;
}

/* Serve: the loop until a signal, an idle exit or a fatal error, then the
 * hand-back of what was pulled but not started. Returns the exit code. */
static int host_serve(ib_host *h, natsMsg **buf)
{
    int code = run_loop(h, buf);

    atomic_store(&h->run.stopping, 1);
    if (atomic_load(&h->run.stop_requested_at_ms) == 0)
        atomic_store(&h->run.stop_requested_at_ms, ib_clock_monotonic_ms());
    ib__host_control_wake(h); /* the drain deadline runs from now */
    if (!ib_nats_is_closed(h->nats)) {
        hand_back(h, buf, h->batch.cap);
        ib__host_fleet_leave(h);  /* the others take this process's partitions at once */
        ib__host_outbox_flush(h); /* best effort: what fails waits for the next start */
    }
    if (code == 0 && h->batch.idle_exited)
        code = idle_exit_code(h);
    return code;
}

/* Close: frees whatever host_open() got to, in the order the parts depend
 * on each other, and writes the summary unless configuration failed. */
static void host_close(ib_host *h, natsMsg **buf, int code)
{
    /* HTTP first: /readyz reads the NATS handle, which ib_nats_close frees. */
    ib_http_stop(h->http);
    h->http = NULL;
    ib__host_control_stop(h);
    atomic_store(&h->run.bound, 0);
    if (h->puller != NULL)
        ib_puller_stats_get(h->puller, &h->batch.pull_stats);
    ib_puller_free(h->puller);
    /* Acks are fire-and-forget: flush so the last ones reach the server. */
    ib_nats_close(h->nats, 5000);
    /* Dispatch borrows the plugins' handlers: it goes before them. */
    ib_dispatch_free(h->dispatch);
    for (size_t i = h->plugin_count; i > 0; i--)
        ib_plugin_close(h->plugins[i - 1]);
    h->batch.lock_wait_max_ms = ib__recorder_lock_wait_max_ns(h->recorder) / 1000000;
    ib_recorder_close(h->recorder);
    ib__host_fleet_close(h); /* the log recorder borrowed its stream */
    if (h->metrics != NULL && code != 2)
        write_summary(h, code);
    ib_metrics_free(h->metrics);
    free(h->consumer_metrics);
    free(h->batch.circuit_warned_ms);
    ib__host_batch_free(h);
    ib__host_retries_free(h->batch.retries);
    free(buf);
    ib__host_inflight_destroy(&h->inflight);
    pthread_mutex_destroy(&h->health.lock);
}

/* The recorder part of --check: a file that exists is opened as ibus run
 * would open it (its permissions and schema checked), one that does not is
 * left alone; a kv: bucket needs the server and is not checked. Prints
 * what it found; returns 0, or -1 with `e` set. */
static int check_recorder(ib_host *h, ib_error *e)
{
    char path[4096];
    struct stat st;
    const char *uri = h->cfg->recorder, *shown = h->set.recorder_shown;
    if (ib__recorder_uri_needs_connection(uri)) {
        printf("recorder %s: not checked (a kv: bucket needs the server)\n", shown);
        return 0;
    }
    bool file = ib__recorder_uri_sqlite_path(uri, path, sizeof(path));
    if (file && lstat(path, &st) != 0 && errno == ENOENT) {
        char *slash = strrchr(path, '/');
        if (slash != NULL)
            *slash = '\0';
        const char *dir = slash == NULL ? "." : slash == path ? "/" : path;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            ib_error_set(e, IB_ERR_CONFIG,
                         "recorder %s: directory %s does not exist (create it, or name a file "
                         "in an existing directory)",
                         shown, dir);
            return -1;
        }
        printf("recorder %s: no file yet; ibus run creates it\n", shown);
        return 0;
    }
    ib_recorder_options ro = {
        .size = sizeof(ro),
        .sqlite_allow_insecure = h->cfg->allow_insecure_db,
        .sqlite_must_exist = true,
    };
    if (ib_recorder_open(&h->recorder, uri, &ro, e) != IB_OK)
        return -1;
    printf("recorder %s: opened\n", shown);
    return 0;
}

/* ibus run --check: everything but NATS. Returns 0, or 2 after saying
 * why. */
static int host_check(ib_host *h)
{
    ib_error e;
    char line[1024];
    int code = 0;
    if (check_summary_file(h->cfg, &e) != 0 || load_plugins(h, &e) != 0 ||
        check_recorder(h, &e) != 0) {
        fail(&e);
        code = 2;
    }
    for (size_t p = 0; code == 0 && p < h->plugin_count; p++) {
        printf("plugin %s %s %s\n", ib_plugin_name(h->plugins[p]), ib_plugin_version(h->plugins[p]),
               ib_plugin_path(h->plugins[p]));
        for (size_t i = 0; i < ib_plugin_handler_count(h->plugins[p]); i++)
            printf("handler %s\n",
                   ib_host_handler_describe(line, sizeof(line), h->plugins[p], i, h->cfg->durable,
                                            h->cfg->consumer_names));
    }
    if (code == 0)
        printf("check passed: ibus run would start with this configuration (NATS not "
               "contacted)\n");
    for (size_t i = h->plugin_count; i > 0; i--)
        ib_plugin_close(h->plugins[i - 1]);
    ib_recorder_close(h->recorder);
    ib__host_inflight_destroy(&h->inflight);
    pthread_mutex_destroy(&h->health.lock);
    return code;
}

int ib_host_run(const ib_host_config *cfg)
{
    ib_host h;
    natsMsg **buf = NULL;
    int code;

    host_init(&h, cfg);
    if (cfg->check_only)
        return host_check(&h);
    ib__host_signal_install();
    if (host_open(&h, &buf, &code))
        code = host_serve(&h, buf);
    host_close(&h, buf, code);
    return code;
}
