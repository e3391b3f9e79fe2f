/* SPDX-License-Identifier: Apache-2.0 */
/* Internals of the subscriber host shared by its files; host.c's opening
 * comment describes the whole. Calls go one way: host.c drives
 * host_batch.c (dispatch and batches), host_control.c (the control thread
 * and its timers, which call host_health.c and host_retention.c) and
 * host_retention.c's retention check; none calls back into host.c, and
 * the stop signal lives in host_signal.c. */
#ifndef IB_HOST_INTERNAL_H
#define IB_HOST_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "jetstream.h"
#include "dispatch.h"
#include "event.h"
#include "host.h"
#include "host_signal.h"
#include "ops.h"
#include "loader.h"
#include "recorder.h"
#include "redact.h"

/* Per-message working state of one batch; defined and used by
 * host_batch.c alone. */
typedef struct ib_host_item ib_host_item;

/* A handler call past --handler-timeout that the control loop has reported
 * (host_health.c), so each is logged and counted once. */
typedef struct ib_host_overdue {
    size_t handler;
    int64_t started_ms;
    char event_id[IB_ID_BUF_SIZE];
    bool seen; /* visited by the last scan */
} ib_host_overdue;

/* How many overdue calls the control loop tells apart; more are still counted
 * in the gauge and fail /healthz, but are logged as one. */
#define IB_HOST_OVERDUE_MAX 16

/* Totals for the final summary line; unmarked is the events an idle exit
 * left unmarked (host_retries.c). */
typedef struct ib_host_totals {
    uint64_t received, handled, duplicates, retried, rejected, unhandled, dead_lettered, acked,
        naked, busy, unmarked;
} ib_host_totals;

/* The messages this process nak'ed and has not acked or terminated since
 * (host_retries.c, which says how it is used); main thread only. */
typedef struct ib_host_retries ib_host_retries;

/* How long after a retry's delay the idle exit still waits for it: the
 * server sends it back to a waiting pull as soon as the delay ends, and
 * its batch still has to run. */
#define IB_HOST_RETRY_GRACE_MS 2000

/* A partitioned consumer's keys in order across batches (host_order.c). */
typedef struct ib_host_order ib_host_order;

/* The outbox's sending state (host_outbox.c; main thread only). */
typedef struct ib_host_outbox {
    ib_bus_proxy bus;    /* the staging bus of the transactional handler in flight */
    ib__txn *txn;        /* its transaction */
    bool dirty;          /* something may wait: staged, a failed send, a reconnect */
    bool failing;        /* the last send failed (logged once per change) */
    uint64_t reconnects; /* ib_nats_reconnects() when last seen */
    int64_t retry_at_ms; /* monotonic: no send before (the back-off after a failure) */
    int64_t sweep_at_ms; /* monotonic: the next send whatever happened */
    int64_t backoff_ms;
    uint64_t sent; /* entries sent and deleted */
} ib_host_outbox;

/* The batch in flight (host_inflight.c): the batch thread publishes it
 * around dispatch, the control thread keeps it in progress. `lock` guards
 * every field and is never held across a network call or a store write:
 * `sending` says the control thread is sending +WPI for `msgs` without
 * it, and ib__host_inflight_end waits on `sent` until it is done. */
typedef struct ib_host_inflight {
    pthread_mutex_t lock;
    pthread_cond_t sent;
    natsMsg **msgs; /* BORROWED from the batch thread, valid until end returns */
    size_t n;
    int64_t since_ms; /* monotonic: when the batch started */
    bool sending;
} ib_host_inflight;

/* What ib__host_inflight_keep does with a batch due for +WPI: `send` is
 * called for each message without the lock; `renew` (may be NULL) once
 * after, once the batch thread can end the batch. */
typedef struct ib_host_inflight_ops {
    void (*send)(void *ctx, natsMsg *msg);
    void (*renew)(void *ctx);
} ib_host_inflight_ops;

/* Init and destroy the in-flight record (no batch). */
void ib__host_inflight_init(ib_host_inflight *f);
void ib__host_inflight_destroy(ib_host_inflight *f);

/* Batch thread: publishes `n` messages (BORROWED until end returns) as the
 * batch in flight since `now_ms`, and clears it. End returns once no +WPI
 * for them is being sent, so the caller may settle and destroy them; it
 * never waits for a lease renewal. */
void ib__host_inflight_begin(ib_host_inflight *f, natsMsg **msgs, size_t n, int64_t now_ms);
/* Batch thread: the batch in flight now holds `n` messages of the same
 * array (it grew while its last calls ran). */
void ib__host_inflight_grow(ib_host_inflight *f, size_t n);
void ib__host_inflight_end(ib_host_inflight *f);

/* Whether a batch is in flight now. Any thread. */
bool ib__host_inflight_busy(ib_host_inflight *f);

/* Control thread: when a batch is in flight and `every_ms` passed since it
 * started and since *last (the last send, updated), sends +WPI for each
 * of its messages through ops->send, then calls ops->renew, both with the
 * lock released. Returns whether it sent. */
bool ib__host_inflight_keep(ib_host_inflight *f, int64_t now_ms, int64_t every_ms, int64_t *last,
                            const ib_host_inflight_ops *ops, void *ctx);

/* A partitioned consumer's ownership (host_partitions.c; batch thread
 * only); NULL when the consumer is not partitioned. */
typedef struct ib_host_fleet ib_host_fleet;

/* The control thread's own state (host_control.c). */
typedef struct ib_host_control ib_host_control;

/* Timers on one loop (host_timers.h). */
typedef struct ib_timers ib_timers;

/* What the host derives from its configuration and from the bound
 * consumer: written on the main thread before the control loop's watcher
 * timers are armed (ib__host_control_bind), read-only after. */
typedef struct ib_host_settings {
    char dead_letter_subject[512];
    char owner[256];
    ib_event_limits limits;
    int64_t ack_wait_ms;
    uint64_t max_deliver;
    /* The configured server URL(s) and recorder URI as messages, /readyz
     * and logs show them: without userinfo or query values (redact.h). */
    char nats_url[IB_REDACT_MAX];
    char recorder_shown[IB_REDACT_MAX];
    /* The retention the keeper prunes with, set by the retention check at
     * bind (the configured one, or the floor for an automatic one); 0 =
     * no pruning. */
    int64_t retention_ms;
} ib_host_settings;

/* Where the run is, read by every thread: atomics, each with one writer
 * at a time. */
typedef struct ib_host_run_state {
    atomic_int bound;    /* the consumer is bound (main thread) */
    atomic_int stopping; /* the run loop ended: not ready (main thread) */
    /* The control loop's last consumer info said "not found" (cleared
     * when it reads the consumer again): the run loop then looks the
     * consumer up itself, as when the puller suspects it gone. */
    atomic_int info_not_found;
    /* Monotonic ms when a stop was requested (0 = none): set by the
     * control loop on a signal, or by the main thread once its loop ends;
     * the drain deadline runs from it. */
    atomic_llong stop_requested_at_ms;
} ib_host_run_state;

/* The recorder's health as /readyz and the log tell it (host_batch.c),
 * from any thread: the dispatch's commits and the control loop's probe
 * report to ib__host_on_recorder. */
typedef struct ib_host_recorder_health {
    /* The recorder's file now speaks another schema (a newer version
     * migrated it): the run loop stops and the process exits 2. */
    atomic_int schema_changed;
    atomic_int down; /* the last recorder call failed: not ready */
    /* failed calls since the last line about the outage, when that line
     * and the outage began (monotonic ms; 0 while the recorder works) */
    atomic_uint_fast64_t failed_calls;
    atomic_int_fast64_t said_ms;
    atomic_int_fast64_t down_since_ms;
} ib_host_recorder_health;

/* The batch thread's own state (main thread; the dispatch's threads call
 * back into it through the observer and on_settled while a batch runs,
 * never between batches). The control thread never touches it. */
typedef struct ib_host_batch {
    ib_host_totals totals;
    int64_t opened_at_ms;       /* monotonic ms when the host started */
    int64_t first_handled_ms;   /* ms from the start to the first handled event; -1 = none */
    int64_t lock_wait_max_ms;   /* the recorder's longest wait for its write turn */
    ib_puller_stats pull_stats; /* copied from the puller before it is freed */
    /* working arrays of one batch (host_batch.c), room entries each: a
     * pull brings at most cap messages, and with --concurrency > 1 the
     * batch takes in more while its last calls run, up to room */
    ib_host_item *items;
    ib_delivery *deliveries;
    size_t cap;
    size_t room;
    int64_t last_ms;  /* how long the last batch took */
    ib_bus_proxy bus; /* the bus handlers publish through */
    ib_host_outbox outbox;
    /* With --idle-exit: the retries this process asked for (NULL without
     * it), and whether the run loop ended on the idle exit. */
    ib_host_retries *retries;
    bool idle_exited;
    /* A partitioned consumer's keys waiting for a retried event of theirs
     * (host_order.c); NULL otherwise. */
    ib_host_order *order;
    /* When each handler's open circuit was last logged at WARN, by
     * registration index (host_circuit.c; the dispatch thread only). */
    int64_t *circuit_warned_ms;
} ib_host_batch;

/* Handler calls past --handler-timeout (host_health.c): `overdue` counts
 * them now (the control loop writes it; /healthz and the watchdog read
 * it), and `why`, under `lock`, says which for /healthz. The list of calls
 * seen is the control loop's alone. */
typedef struct ib_host_health {
    atomic_int overdue;
    pthread_mutex_t lock; /* guards `why` alone: held for a copy */
    char why[320];
    ib_host_overdue seen[IB_HOST_OVERDUE_MAX];
    size_t seen_n;
} ib_host_health;

/* The host: the parts it wires together, and one struct per owner of the
 * rest (host.c's opening comment says who owns what). */
typedef struct ib_host {
    const ib_host_config *cfg;
    ib_host_settings set;

    ib_recorder *recorder;
    ib_plugin *plugins[IB_HOST_MAX_PLUGINS];
    size_t plugin_count;
    ib_dispatch *dispatch;
    ib_nats *nats;
    ib_puller *puller;
    ib_metrics *metrics;
    /* Each handler's ibus_consumer_* slot, by dispatch registration index
     * (the observer's `handler`): counting needs no lookup. The slots are
     * the registry's; the array is the host's. */
    ib_metrics_consumer **consumer_metrics;
    size_t consumer_metrics_n;
    ib_http *http;

    ib_host_run_state run;
    ib_host_recorder_health rec;
    ib_host_health health;
    ib_host_batch batch;       /* the batch thread's */
    ib_host_inflight inflight; /* shared by the batch and control threads */
    /* The control thread, its timers and their state (host_control.c);
     * NULL before open_local and after host_close. */
    ib_host_control *control;
    ib_host_fleet *fleet; /* partitioned consumers only */
} ib_host;

/* How many pulls a batch may grow to while its last calls run (the
 * dispatch's ib_dispatch_run_more): enough that the workers' idle tail
 * comes once per four pulls, not at every one, while the claims held
 * ahead of the calls stay at most one pull. */
#define IB_HOST_BATCH_GROWTH 4

/* How many messages the next batch takes from the puller: a pull's
 * worth (h->batch.cap), or for a partitioned consumer whose last batch
 * was short, up to room: the pulls of several partitions in one batch,
 * whose log records then go in one round trip (log_recorder.h). Short
 * is under a sixteenth of the partition lease, so a batch that grows
 * stays well inside the renewal period of its partitions. */
size_t ib__host_batch_take(const ib_host *h);

/* Allocates and frees the per-batch working arrays (batch *
 * IB_HOST_BATCH_GROWTH entries each; h->batch.cap = batch). Returns 0, or
 * -1 when out of memory. Free is a no-op when nothing was allocated. */
int ib__host_batch_alloc(ib_host *h, size_t batch);
void ib__host_batch_free(ib_host *h);

/* Creates h->dispatch over h->recorder, with host_batch.c's observer and
 * callbacks (which own the handler metrics, the failure log lines, early
 * acks and readiness after recorder failures), registers every loaded
 * plugin's handlers under their consumer identities (host_consumers.c),
 * and registers each identity's ibus_consumer_* series (h->consumer_metrics,
 * freed by the caller with free()). Returns 0, or -1 with `err` set;
 * h->dispatch may then be non-NULL and is freed by the caller. */
int ib__host_dispatch_open(ib_host *h, ib_error *err);

/* Reports the recorder's health (`ctx` is the ib_host): counts a failure in
 * ibus_recorder_errors_total, sets ibus_recorder_up and recorder_down
 * (hence /readyz), and logs one line per change of state, and while it
 * fails a reminder every 10 s at most with the calls that failed since.
 * `e` may be NULL when healthy. Safe from any thread. */
void ib__host_on_recorder(void *ctx, bool healthy, const ib_error *e);

/* Processes one pulled batch: decode, dispatch, ack/nak/dead-letter, and
 * destroys the messages. `msgs` has room for h->batch.room messages: the
 * batch may take in more from the puller while its last calls run, and
 * processes and destroys those too. */
void ib__host_process_batch(ib_host *h, natsMsg **msgs, size_t n);

/* The host API table every plugin's init() receives (static storage,
 * valid for the process lifetime): the bus part's table with the ABI 1.3
 * and 1.5 slots added; with `checking`, the table of ibus run --check
 * (flags IB_HOST_CHECKING). Call it first on the main thread, before
 * handlers run. */
const ib_host_api *ib__host_api(bool checking);

/* The bus a transactional handler gets (ib_dispatch_options.
 * transactional_bus; `ctx` is the ib_host): a copy of `bus` whose publishes
 * are staged in the outbox inside `txn`, and whose transaction_db answers
 * the transaction's connection. Valid until the next call. */
ib_bus_proxy *ib__host_transactional_bus(void *ctx, ib_bus_proxy *bus, ib__txn *txn);

/* The retries table (host_retries.c). New returns NULL when out of memory;
 * free is a no-op for NULL. Add records that message `seq` was nak'ed and
 * comes back at `due_ms` (monotonic), with its event (BORROWED for the
 * call; NULL when it had none); drop forgets it once acked or terminated.
 * Both are no-ops on a NULL table. */
ib_host_retries *ib__host_retries_new(void);
void ib__host_retries_free(ib_host_retries *r);
void ib__host_retries_add(ib_host_retries *r, uint64_t seq, int64_t due_ms, const ib_event *event);
void ib__host_retries_drop(ib_host_retries *r, uint64_t seq);

/* The retries still to come back at `now_ms` (within their grace) whose
 * delay ends by `horizon_ms`: returns how many, and in *until_ms the
 * latest time one of them is still awaited (now_ms when none). */
size_t ib__host_retries_due(const ib_host_retries *r, int64_t now_ms, int64_t horizon_ms,
                            int64_t *until_ms);

/* Of the retries left in h->retries, those whose event is not marked by
 * every handler subscribed to its type, asking h->recorder (an event that
 * cannot be checked counts as unmarked). *lower_bound is set when the
 * table could not hold every nak. */
size_t ib__host_retries_unmarked(ib_host *h, bool *lower_bound);

/* Sends every staged outbox entry, oldest first, each with Nats-Msg-Id,
 * deleting each once JetStream acknowledged it. Returns 0 when the outbox
 * is empty, -1 when a send or the recorder failed (what is left stays, and
 * is retried after a back-off; logged once per change). A no-op for
 * recorders without transactions. Main thread. */
int ib__host_outbox_flush(ib_host *h);

/* Sends the outbox when it is due: something was staged or the connection
 * came back (and no back-off runs), or the periodic sweep is due. Cheap
 * otherwise; call it between batches. Main thread. */
void ib__host_outbox_tick(ib_host *h);

/* The dispatch's on_circuit callback (`ctx` is the ib_host): one log
 * line per change that matters (WARN when a circuit opens, and at most
 * once a minute while it stays open; INFO when it closes; the probes at
 * DEBUG), ibus_circuit_state and ibus_circuit_transitions_total. Runs on
 * the dispatch thread. */
void ib__host_on_circuit(void *ctx, size_t handler, const char *consumer, ib_circuit_state from,
                         ib_circuit_state to, const char *detail);

/* When some handler's circuit is not closed, writes "circuit open for
 * A, B: ..." into `why` (cap bytes) and returns true, for /readyz. Safe
 * from any thread once h->bound is set. */
bool ib__host_circuits_why(ib_host *h, char *why, size_t cap);

/* Watcher thread: finds handler calls past --handler-timeout, logs and
 * counts each once, and keeps h->overdue, ibus_handlers_overdue and the
 * /healthz reason current (a call that returns clears them). */
void ib__host_check_overdue(ib_host *h);

/* Watcher thread: asks the running batch to make the marks of its
 * finished calls durable now (ib_dispatch_flush_marks: a request, the
 * dispatch writes), logging `why` with the count or the failure
 * the batch reported for the requests before. Never waits on the store. */
void ib__host_flush_marks(ib_host *h, const char *why);

/* /healthz's liveness callback (`ctx` is the ib_host): 0 with the
 * reason while a handler call is past --handler-timeout. */
int ib__host_live(void *ctx, char *why, size_t cap);

/* systemd's watchdog (host_health.c), when the service manager asked for
 * pings ($NOTIFY_SOCKET and $WATCHDOG_USEC, for this PID): open gives 0
 * with *out NULL when it did not (or the socket cannot be used: logged),
 * -1 when out of memory. The timer (ctx: *out) sends WATCHDOG=1 while no
 * handler call is overdue, so a stuck process is restarted, and returns
 * its period, half the watchdog's. Close is a no-op for NULL. */
typedef struct ib_host_watchdog ib_host_watchdog;
int ib__host_watchdog_open(ib_host_watchdog **out, ib_host *h);
int64_t ib__host_watchdog_timer(void *ctx, int64_t now_ms);
void ib__host_watchdog_close(ib_host_watchdog *w);

/* The control thread (host_control.c). Start creates its loop with the
 * watchdog's timer and the stop signal's wake-up, and starts the thread:
 * 0, or -1 (out of memory, no pipe or thread). Bind, once the consumer is
 * bound, arms the watcher's timers (in-progress acks and lease renewals,
 * the overdue scan, the stop and drain deadline, gauges, the recorder
 * probe, the consumer info) and the keeper's: 0, or -1 when the table is
 * full. Stop asks the loop to end, waits for the timer in progress and
 * frees it all; a no-op when not started. Main thread. */
int ib__host_control_start(ib_host *h);
int ib__host_control_bind(ib_host *h);
void ib__host_control_stop(ib_host *h);

/* Wakes the control loop (the batch thread set stop_requested_at_ms).
 * Any thread; a no-op before start. */
void ib__host_control_wake(ib_host *h);

/* Refuses a retention shorter than the time the stream can still deliver
 * a message (ib_host_retention_floor_ms), from the bound consumer's facts
 * `f` and the stream's MaxAge: logs why with both figures and returns -1
 * with IB_ERR_CONFIG and an empty message (said already), unless
 * cfg->retention_unsafe (then a warning). An automatic retention
 * (IB_HOST_RETENTION_AUTO) becomes the floor, or none when the stream has
 * no MaxAge (a warning: markers are kept for ever) or the recorder is kv:
 * (its bucket's TTL prunes); the choice is logged. Sets h->retention_ms.
 * Without retention 0 at once. -1 with IB_ERR_NATS when the stream cannot
 * be read. */
int ib__host_retention_check(ib_host *h, const ib_consumer_facts *f, ib_error *err);

/* Arms the keeper's timers on `loop` (they run on the control thread):
 * prune every tenth of the retention (1 s to 60 s) when there is one, and
 * refresh ibus_markers, ibus_recorder_wal_bytes and ibus_outbox_pending,
 * each at once and then on its period. A prune pass runs the loop's other
 * due timers between its transactions, and ends once the loop quits or a
 * drain begins. *out is their context, freed with ib__host_keeper_free
 * (a no-op for NULL) once the loop has stopped; set also on failure.
 * 0, or -1 when out of memory or the table is full. */
typedef struct ib_host_keeper ib_host_keeper;
int ib__host_keeper_arm(ib_host_keeper **out, ib_host *h, ib_timers *loop);
void ib__host_keeper_free(ib_host_keeper *k);

/* The consumer setup of `durable` (filtered to `filter`, NULL = none) on
 * the configured stream, with the configured delivery and stream
 * settings (host_setup.c): what ibus run binds, or with `create` makes.
 * `dead_letter_subject` NULL: no dead-letter stream is made with it. */
ib_consumer_setup ib__host_consumer_setup(const ib_host *h, const char *durable, const char *filter,
                                          bool create, const char *dead_letter_subject);

/* ---- a partitioned consumer (host_partitions.c; batch thread) ---------- */

/* Opens what a partitioned consumer needs once connected: its bucket of
 * leases and members, its marker log and h->recorder over it (the log
 * recorder, owning no partition yet). 0, or -1 with `e` set. */
int ib__host_fleet_open(ib_host *h, ib_error *e);

/* Between batches: drops partitions whose lease could not be renewed in
 * time, and every second (a third of a lease when shorter) announces this
 * process, reads the members and takes or hands over partitions, renewing
 * the leases every third of one (the file's opening comment). A no-op
 * when not partitioned. */
void ib__host_fleet_tick(ib_host *h);

/* What a delivered message of a partitioned consumer may become. */
typedef enum ib_host_admit {
    IB_HOST_ADMIT_OK = 0,          /* its partition is owned here: run it (its id is
                                      routed to the partition for the recorder) */
    IB_HOST_ADMIT_NOT_OWNED,       /* its partition is not owned here (any more): nak it */
    IB_HOST_ADMIT_MISPLACED,       /* its key belongs to another partition: forward it */
    IB_HOST_ADMIT_NOT_PARTITIONED, /* not "<base>.<p>.<key>": dead-letter it */
} ib_host_admit;

/* Reads the subject of a delivered event (`event_id` normalised); for
 * OK *partition is its partition, for MISPLACED the key's own. */
ib_host_admit ib__host_fleet_admit(ib_host *h, const char *subject, const char *event_id,
                                   uint32_t *partition);

/* Publishes a message whose key hashes to partition `belongs`, not the
 * one of its subject (its producer computed another), again to the key's
 * own partition subject with the producer's headers, under the message id
 * "ibus-fwd-<stream>-<stream_seq>" so a retried forward is stored once.
 * True once the stream has it (the caller acks the original), false when
 * the publish failed (the caller naks it); logged either way. */
bool ib__host_fleet_forward(ib_host *h, natsMsg *msg, uint64_t stream_seq, const char *event_id,
                            uint32_t belongs);

/* Per-key order across batches (host_order.c; batch thread). New
 * returns NULL when out of memory; free and every call below are no-ops
 * for NULL. A key waits at most `limit_ms` for one of its events, then
 * goes on (logged): one that aged out of the stream never comes back. */
ib_host_order *ib__host_order_new(int64_t limit_ms);
void ib__host_order_free(ib_host_order *o);

/* Whether the event `seq` of `key` in partition `p` must wait because an
 * earlier event of the key was nak'ed here and has not come back: the
 * caller naks it (and notes it). An event waited for that is back is
 * taken off the list. */
bool ib__host_order_must_wait(ib_host_order *o, uint32_t p, const char *key, uint64_t seq);

/* Notes that event `seq` of `key` was nak'ed (`waits`: later events of
 * the key wait for it) or settled for good (acked, dead-lettered). */
void ib__host_order_note(ib_host_order *o, uint32_t p, const char *key, uint64_t seq, bool waits);

/* Forgets what partition `p`'s keys waited for: it changes owner, and its
 * next owner starts from the durable's ack floor, in order. */
void ib__host_order_forget(ib_host_order *o, uint32_t p);

/* At a stop: gives every owned partition back and leaves the members,
 * so the others take them at once. Close frees the rest, after the
 * recorder (which borrows the log) is closed. Both no-ops when not
 * partitioned. */
void ib__host_fleet_leave(ib_host *h);
void ib__host_fleet_close(ib_host *h);

#endif
