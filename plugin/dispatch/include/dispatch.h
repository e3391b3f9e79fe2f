/* SPDX-License-Identifier: Apache-2.0 */
/* The idempotent core (spec section 3), independent of NATS.
 *
 * A dispatch table maps event types to handlers, each with its own consumer
 * identity. ib_dispatch_run() takes a batch of deliveries and, for each event
 * and each handler subscribed to its type: claims (consumer, id) in the
 * recorder (one acquire call for the batch), drops it
 * if already processed, otherwise runs the handler, marks it on OK (the
 * committer: see below), releases the claim on RETRY or REJECT; then decides
 * the message's outcome:
 *
 *   every handler done or already marked     -> ACK
 *   any REJECT                               -> DEAD_LETTER "rejected"
 *   any RETRY, or a claim call that failed   -> NAK with back-off delay
 *   a claim busy elsewhere                   -> NAK, waiting (part of) the lease
 *   no handler for the type                  -> ACK, counted unhandled
 *   attempts used up, some handler not done  -> DEAD_LETTER "max-deliver",
 *   (the poison rule)                           handlers not run
 *   id marked with another payload           -> DEAD_LETTER "conflict" (or ACK, as
 *   fingerprint (a reused id)                   options.on_conflict says), no handler run
 *
 * In detail, per delivery (the rules are checked in this order):
 *
 *   - Poison rule. With a recorder that keeps attempts across crashes
 *     (ib_recorder_has_durable_attempts: sqlite, kv:), the recorder counts
 *     one attempt per handler call that started (as it starts, or with
 *     its RETRY when the claim is released; dispatch_run.c, invariant 5),
 *     and its claim answers EXHAUSTED once options.max_deliver attempts
 *     were made: that handler is not run and the delivery is
 *     dead-lettered "max-deliver". A RETRY on the last allowed attempt
 *     dead-letters at once. Deliveries on which no handler ran (busy,
 *     recorder failures, a crash of a batch mate) spend nothing. Without
 *     durable attempts (memory) the rule reads the delivery count: on
 *     delivery max_deliver no handler runs; a live claim there is busy,
 *     otherwise the delivery is dead-lettered unless every handler is done.
 *   - Duplicates inside one batch: when the same (consumer, event id) pair
 *     occurs in several deliveries of a batch, only the first occurrence is
 *     claimed and run; the later ones follow its result (counted as
 *     duplicates when it succeeded, else as coalesced).
 *   - A claim held by another live owner (BUSY) is never acked: that
 *     process may still fail. It is NAK'ed after options.busy_delay_ms
 *     doubling per delivery, at most the holder's remaining lease (with
 *     durable attempts), or after the whole remaining lease (without).
 *   - Fingerprints. Each event's type and payload are hashed once
 *     (ib_fingerprint); the claim compares the hash with the one its marker
 *     stored (markers without one match anything) and the mark stores it.
 *     A delivery whose id is marked for one of its handlers with another
 *     fingerprint, or that met the same id with other content earlier in
 *     the batch, is a conflict: none of its handlers runs (claims taken are
 *     released), and it is dead-lettered "conflict" or acked as a duplicate
 *     as options.on_conflict says. The observer hears IB_RESULT_CONFLICT.
 *   - Transactional handlers (ib_dispatch_handler.transactional) run after
 *     the batch's other handlers are marked, one at a time on the caller's
 *     thread, inside the recorder's transaction (ib__recorder_transact):
 *     each in a savepoint, its marker written in the same transaction, a
 *     transaction holding handlers for at most commit_interval_ms. OK
 *     commits its writes with its marker; RETRY and REJECT roll them back.
 *     A transaction that fails after a handler said OK keeps nothing of it,
 *     and the delivery is retried like a RETRY; one that cannot start runs
 *     nothing and NAKs like a failed claim.
 *   - REJECT wins over everything else; the OK handlers of that event are
 *     still marked, so a replay of the dead letter does not rerun them.
 *   - A failed claim NAKs the deliveries affected with the back-off. A
 *     failed mark is never given up: the committer retries it with back-off
 *     (no further handler starts meanwhile) until it lands; the run does not
 *     return before every OK handler's mark is durable. A mark refused
 *     because another owner took the claim over (LOST) is not written; that
 *     delivery is NAK'ed and the new holder's result decides.
 *
 * The committer: the marks of handlers that finished within
 * options.commit_interval_ms share one fenced mark call, and each delivery
 * whose marks are all durable is handed to options.on_settled at once, so
 * the caller acks it before the rest of the batch is done. A kill -9 thus
 * repeats at most the handlers running plus those finished within one
 * window.
 *
 * Circuits (options.circuit.enabled): each handler has a circuit that
 * tells an outage of its downstream from a poison event. Its failure-rate
 * window holds the handler's calls of the last circuit.window_ms (at most
 * IB_CIRCUIT_WINDOW_CALLS of them): RETRY is a failure; OK (its mark
 * committed or not yet, or a claim lost after OK) and REJECT (the
 * downstream answered) are successes; calls that never ran are not in
 * it. Every call joins the window as soon as the run thread sees it
 * returned, and the circuit decides only on a window that holds every
 * call seen so far. The circuit
 *
 *   CLOSED    -> OPEN       when the window holds failures of at least
 *                           circuit.min_events distinct events and they are
 *                           at least circuit.failure_pct % of its calls,
 *                           which are IB_CIRCUIT_RATE_MIN_CALLS or more (a
 *                           few calls reach the rate by chance), or its
 *                           last IB_CIRCUIT_RUN_CALLS calls all failed, from
 *                           at least circuit.min_events events (an outage:
 *                           in a window too young for the rate, or right
 *                           after a busy spell, whose successes dilute the
 *                           rate); one or two events failing alone never
 *                           open it;
 *   OPEN                    the handler is not run: its items are neither
 *                           claimed nor counted as attempts, and the delivery
 *                           is NAK'ed until the next probe is due (+ up to 20 %);
 *   OPEN      -> HALF_OPEN  when the probe is due (circuit.probe_min_ms after
 *                           opening, doubling after each failed probe up to
 *                           circuit.probe_max_ms): one delivery of the batch,
 *                           preferably one not probed lately, runs the handler;
 *   HALF_OPEN -> CLOSED     when the probe did not fail (its window starts over);
 *   HALF_OPEN -> OPEN       when it failed (or did not run: the next batch
 *                           tries again).
 *
 * A RETRY of a handler whose circuit is open once the batch's calls are
 * counted (the failed probe, and every call of the batch that opened it)
 * does not spend the event's budget: its attempts are ended
 * (ib_recorder_end_attempts) and the delivery waits like the others, so an
 * outage never dead-letters. Handlers whose circuits are closed keep
 * running on the same deliveries. ib_dispatch_hold_ms() tells the caller
 * when every circuit is open, so it can stop pulling until a probe is due.
 * The memory recorder's poison rule reads JetStream's delivery count,
 * which waiting deliveries raise: there an outage longer than the retry
 * budget still dead-letters once the circuit closes.
 *
 * Ordering: with options.concurrency <= 1 the handlers of a batch run one
 * at a time on the caller's thread, in batch order (for each delivery, in
 * registration order); meanwhile a stand-in thread of the table renews
 * leases and commits marks when asked. With
 * concurrency N > 1 they run on N worker threads, so within a batch
 * handlers of different events (and different handlers of one event) run
 * in any order and at the same time. Transactional handlers run on the
 * caller's thread (see above). Across batches order is kept: a
 * batch is finished (run, marked) before ib_dispatch_run() returns (a
 * batch that grows, ib_dispatch_run_more, is one batch); the
 * host acks each message once its marks are durable (on_settled) or when
 * the run returns. Strict order is not a JetStream promise anyway: a
 * NAK'ed or timed-out message is redelivered after later ones.
 *
 * Thread safety: register every handler (ib_dispatch_add) before the first
 * ib_dispatch_run() and before sharing the table between threads.
 * ib_dispatch_run() may be called from several threads; calls on one table
 * are serialised. It must not be called from inside a handler of the same
 * table (it would wait for itself). ib_dispatch_count_for() and
 * ib_dispatch_backoff_ms() are safe from any thread. */
#ifndef IB_DISPATCH_H
#define IB_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dead_letter.h"
#include "error.h"
#include "event.h"
#include "infinity_bus/plugin.h"
#include "recorder.h"
#include "trace.h"

typedef struct ib_dispatch ib_dispatch;

#define IB_DISPATCH_DEFAULT_LEASE_MS 30000 /* JetStream's default AckWait */
#define IB_DISPATCH_DEFAULT_NAK_BASE_MS 1000
#define IB_DISPATCH_DEFAULT_NAK_MAX_MS 60000
#define IB_DISPATCH_DEFAULT_BUSY_MS 100 /* floor of the nak delay of a busy copy */
#define IB_DISPATCH_DEFAULT_COMMIT_MS 2 /* group-commit window of finished handlers */
#define IB_DISPATCH_MAX_CONCURRENCY 1024

/* What became of one handler call, as reported to an observer. */
typedef enum ib_handler_result {
    IB_RESULT_HANDLED = 0,         /* ran, said OK, and its mark is durable */
    IB_RESULT_RETRY = 1,           /* ran and said RETRY */
    IB_RESULT_REJECT = 2,          /* ran and said REJECT */
    IB_RESULT_MARK_FAILED = 3,     /* retired: marks are retried until they land */
    IB_RESULT_RECORDER_FAILED = 4, /* not run: the claim or check call failed */
    IB_RESULT_LOST = 5,            /* ran and said OK, but another owner had taken its
                                      claim over: not marked over the new holder */
    IB_RESULT_CONFLICT = 6,        /* not run: the id is marked with another payload
                                      fingerprint (a producer reused the id) */
    IB_RESULT_DUPLICATE = 7,       /* not run: already marked (by an earlier delivery or
                                      an earlier copy in the batch that succeeded) */
    IB_RESULT_WAITING = 8,         /* not run: its circuit is open; the delivery waits */
} ib_handler_result;

/* What becomes of a delivery whose id is marked for one of its handlers
 * with another payload fingerprint (ib_fingerprint: type and payload): a
 * producer reused an id for other content. None of its handlers runs. */
typedef enum ib_conflict_policy {
    IB_CONFLICT_DEAD_LETTER = 0, /* dead-lettered with reason "conflict" (the default) */
    IB_CONFLICT_DROP = 1,        /* acked like a duplicate */
    IB_CONFLICT_LOG = 2,         /* acked like a duplicate; the host logs it louder */
} ib_conflict_policy;

/* A handler's circuit. Numbered: the values are the ibus_circuit_state
 * gauge, never renumbered. */
typedef enum ib_circuit_state {
    IB_CIRCUIT_CLOSED = 0,    /* 0: the handler runs */
    IB_CIRCUIT_HALF_OPEN = 1, /* 1: one probe call runs */
    IB_CIRCUIT_OPEN = 2,      /* 2: the handler is not run; its deliveries wait */
} ib_circuit_state;

/* The most calls a circuit's window holds, whatever circuit.window_ms. */
#define IB_CIRCUIT_WINDOW_CALLS 100
/* A run of this many failed calls at the window's end opens a circuit
 * whatever the rate (from circuit.min_events events or more): a downstream
 * that fails 30 % of the time makes such a run about once in 170,000 calls. */
#define IB_CIRCUIT_RUN_CALLS 10
/* The failure rate counts only in a window of at least this many calls:
 * fewer reach circuit.failure_pct by chance too often (3 failures among a
 * fresh window's first 5 calls), and an outage opens the circuit on its
 * run of IB_CIRCUIT_RUN_CALLS failures first anyway. docs/outages.md
 * ("Why these defaults") has the odds that chose it. */
#define IB_CIRCUIT_RATE_MIN_CALLS 30
#define IB_CIRCUIT_DEFAULT_WINDOW_MS 30000
#define IB_CIRCUIT_DEFAULT_FAILURE_PCT 50
#define IB_CIRCUIT_DEFAULT_MIN_EVENTS 3
#define IB_CIRCUIT_DEFAULT_PROBE_MIN_MS 1000
#define IB_CIRCUIT_DEFAULT_PROBE_MAX_MS 5000

/* The circuits' settings (see "Circuits" above). Zero-initialised: off;
 * with `enabled`, a field left at 0 takes its default. */
typedef struct ib_circuit_options {
    bool enabled;
    int64_t window_ms;    /* calls older than this leave the window */
    unsigned failure_pct; /* 1..100: share of failed calls that opens it */
    unsigned min_events;  /* distinct failing events needed to open it */
    int64_t probe_min_ms; /* first probe after opening; doubles per failed probe */
    int64_t probe_max_ms; /* longest interval between probes */
} ib_circuit_options;

struct ib_delivery;

/* Called on the thread of ib_dispatch_run(), after the batch's marks, once
 * for every handler call that ran or failed to start for a recorder error,
 * and once for every handler skipped as a duplicate (IB_RESULT_DUPLICATE:
 * the sum of those reports is the deliveries' counts.duplicates), and once
 * for every handler not run because its circuit is open
 * (IB_RESULT_WAITING). Not for busy claims, exhausted attempts or
 * followers of a failed first occurrence. `consumer` and `delivery` are BORROWED for the call;
 * `handler` is the handler's registration index (0-based, as
 * ib_dispatch_handler_consumer() reads it), so an observer can keep
 * per-handler state in an array and never look a name up; `seconds` is the
 * handler's run time (0 when it did not run). */
typedef struct ib_delivery ib_delivery;
typedef void (*ib_dispatch_observer)(void *ctx, const struct ib_delivery *delivery,
                                     const char *consumer, size_t handler, ib_handler_result result,
                                     double seconds);

typedef struct ib_dispatch_options {
    const char *owner;             /* claim owner token, unique per process; copied;
                                      NULL or "" = a fresh random token */
    int64_t lease_ms;              /* claim lease; should match the consumer's AckWait;
                                      <= 0 = IB_DISPATCH_DEFAULT_LEASE_MS */
    uint64_t max_deliver;          /* the poison rule fires on this delivery; 0 = never */
    int64_t nak_base_delay_ms;     /* first retry delay; doubles per delivery;
                                      <= 0 = IB_DISPATCH_DEFAULT_NAK_BASE_MS */
    int64_t nak_max_delay_ms;      /* cap of the back-off; <= 0 = IB_DISPATCH_DEFAULT_NAK_MAX_MS;
                                      raised to the base delay if below it */
    unsigned concurrency;          /* handler threads; 0 or 1 = the caller's, running
                                      the calls one at a time in batch order;
                                      at most IB_DISPATCH_MAX_CONCURRENCY */
    int64_t busy_delay_ms;         /* nak delay when another owner holds the claim;
                                      <= 0 = IB_DISPATCH_DEFAULT_BUSY_MS */
    ib_dispatch_observer observer; /* optional: per-handler results, for logs and metrics */
    void *observer_ctx;            /* BORROWED; passed to observer and the callbacks below */
    /* appended */
    int64_t commit_interval_ms; /* group marks of handlers that finished for at most this
                                   long before committing them; 0 =
                                   IB_DISPATCH_DEFAULT_COMMIT_MS, < 0 = after every handler */
    /* Optional: called on the thread of ib_dispatch_run(), during the run,
     * for a delivery whose outcome is ACK as soon as the commit that holds
     * its marks is durable, so the caller can ack it at once (the delivery
     * then has settled_early set and keeps that outcome). */
    void (*on_settled)(void *ctx, ib_delivery *delivery);
    /* Optional: called on the thread of ib_dispatch_run() after every
     * recorder call that failed (healthy false, `e` its error), and once
     * after the first call that succeeded again (healthy true, `e` NULL). */
    void (*on_recorder)(void *ctx, bool healthy, const ib_error *e);
    /* appended */
    ib_conflict_policy on_conflict;
    /* Required when a transactional handler is registered: the bus proxy
     * to hand a transactional handler whose work runs in `txn` (the
     * recorder's transaction, see ib__recorder_transact), made from the
     * batch's `bus`. Called on the thread of ib_dispatch_run() for each
     * such call; the proxy must stay valid until the next call. */
    ib_bus_proxy *(*transactional_bus)(void *ctx, ib_bus_proxy *bus, ib__txn *txn);
    /* appended */
    ib_circuit_options circuit;
    /* Optional: called on the thread of ib_dispatch_run() at every change
     * of a handler's circuit. `handler` is its registration index,
     * `consumer` its identity; `detail` says why, in one line ("12 of 12
     * calls failed within 30s, from 7 events; last: HTTP 503"). Strings
     * are BORROWED for the call. */
    void (*on_circuit)(void *ctx, size_t handler, const char *consumer, ib_circuit_state from,
                       ib_circuit_state to, const char *detail);
} ib_dispatch_options;

/* One handler as registered. Strings are copied; `handle`/`state` are
 * BORROWED and must outlive the dispatch table. */
typedef struct ib_dispatch_handler {
    const char *consumer;           /* consumer identity, e.g. "orders/audit/audit" */
    const char *name;               /* for logs: "plugin/handler"; NULL = consumer */
    const char *const *event_types; /* NULL-terminated, at least one non-empty type */
    ib_handle_fn handle;
    void *state;
    /* appended */
    /* Runs inside the recorder's transaction (IB_HANDLER_TRANSACTIONAL):
     * one at a time on the run thread, after the batch's other handlers,
     * its writes and its marker committed together. Needs a recorder with
     * transactions (sqlite:); ib_dispatch_add refuses it otherwise. */
    bool transactional;
} ib_dispatch_handler;

typedef enum ib_outcome {
    IB_OUTCOME_ACK = 0,
    IB_OUTCOME_NAK = 1,
    IB_OUTCOME_DEAD_LETTER = 2,
} ib_outcome;

/* Per-delivery counters filled by ib_dispatch_run(). Each handler subscribed
 * to the event's type lands in at most one counter. */
typedef struct ib_delivery_counts {
    unsigned handled;     /* handlers run with OK (and marked) */
    unsigned duplicates;  /* handlers skipped: already marked (also within the batch) */
    unsigned retried;     /* handlers that returned RETRY */
    unsigned rejected;    /* handlers that returned REJECT */
    unsigned busy;        /* handlers skipped: claim held by another process */
    unsigned mark_failed; /* retired, always 0: marks are retried until they land */
    bool unhandled;       /* no handler subscribes to the type */
    /* appended */
    unsigned recorder_failed; /* handlers not run: the claim/check call failed */
    unsigned coalesced;       /* handlers not run: they follow a failed first
                                 occurrence of the same id earlier in the batch */
    unsigned lost;            /* handlers that said OK after another owner had taken
                                 their claim over: not marked */
    unsigned exhausted;       /* handlers not run: their attempts were used up */
    unsigned conflicts;       /* handlers whose marker holds another payload fingerprint */
    /* appended */
    unsigned waiting; /* handlers not run, or whose RETRY did not count: their circuit
                         is open (the delivery waits for it) */
} ib_delivery_counts;

/* One delivered message. The caller fills the inputs; ib_dispatch_run()
 * fills the outputs. */
struct ib_delivery {
    /* inputs */
    const ib_event *event; /* BORROWED; must be a decoded, valid event */
    const char *subject;   /* BORROWED; may be NULL (handlers then see "") */
    uint64_t stream_seq;
    uint64_t delivery_count; /* 1 on the first delivery; 0 is taken as 1 */
    /* outputs */
    ib_outcome outcome;
    ib_dead_letter_reason dead_letter_reason; /* when outcome is DEAD_LETTER, else IB_DLQ_OTHER */
    int64_t nak_delay_ms;                     /* when outcome is NAK, else 0 */
    ib_delivery_counts counts;
    double handle_seconds; /* time spent in this delivery's handlers (summed over
                              handlers, CLOCK_MONOTONIC) */
    /* appended */
    void *user;         /* input: the caller's, untouched (e.g. its message) */
    bool settled_early; /* output: on_settled was called for it during the run */
    /* appended */
    /* output: with outcome DEAD_LETTER "rejected", the reason the first
     * rejecting handler gave (ib_dispatch_note_verdict); with
     * "max-deliver", the reason its last failure gave; else NULL (also
     * when the handler gave none). The run's; valid until the next
     * ib_dispatch_run() on the table. */
    const char *reject_detail;
    /* appended */
    /* input: the message's data the event was decoded from, handed to
     * handlers as ib_raw_event.message (BORROWED; NULL = none) */
    const uint8_t *message;
    size_t message_len;
    /* appended */
    /* input: the trace this delivery continues (trace.h: the host's span of
     * it), BORROWED; NULL = none. Handlers read it as ib_raw_event's
     * traceparent and tracestate, and while a handler of the delivery runs
     * it is the thread's current trace (ib_trace_current), so its log lines
     * and the events it publishes carry it. */
    const ib_trace *trace;
    /* output: with outcome DEAD_LETTER "max-deliver", the attempts counted
     * for its handler (0 when the recorder counts none: the delivery count
     * is then the budget; or when the attempts were used up before this
     * delivery and no handler ran on it: exhausted is then set) */
    uint32_t attempts;
    bool exhausted;
    /* appended */
    /* output: with outcome DEAD_LETTER "rejected" or "max-deliver", the
     * consumer identity of the handler whose verdict the dead letter
     * reports (the one reject_detail quotes, or the first rejecting or
     * exhausted one when none gave a reason), so two handlers of one type
     * can be told apart; else NULL. BORROWED from the table. */
    const char *dead_letter_consumer;
    /* appended */
    /* input: the delivery's order key (BORROWED; NULL = none), such as a
     * partitioned consumer's partition key. While calls run one at a time
     * (concurrency 1), a delivery is not run when an earlier delivery of
     * the batch with the same key did not succeed (a RETRY, a busy or
     * lost claim, a recorder failure, anything held back): it is released
     * unrun, its attempts untouched, and nak'ed after the retry delay
     * (counts.waiting), so a key's events never overtake one another in a
     * batch. */
    const char *order_key;
};

/* Creates an empty dispatch table over `recorder` (BORROWED; must outlive
 * it). `options` may be NULL for the defaults; its strings are copied. The
 * worker threads (with concurrency > 1) and the stand-in thread are
 * started here (with every signal blocked, so the host's signal handling
 * stays on its own threads).
 * `*out` is freed with ib_dispatch_free(). Errors: IB_ERR_INVALID_ARG (no
 * recorder), IB_ERR_CONFIG (an option out of range, named in the message),
 * IB_ERR_NOMEM, IB_ERR_IO (no randomness for an owner token, or threads could
 * not be started). */
ib_status ib_dispatch_create(ib_dispatch **out, ib_recorder *recorder,
                             const ib_dispatch_options *options, ib_error *err);

/* Stops and joins the worker threads and frees the table. Must not race with
 * ib_dispatch_run(). NULL is a no-op. */
void ib_dispatch_free(ib_dispatch *d);

/* Registers a handler. Two handlers with the same consumer identity are
 * refused (IB_ERR_CONFIG, naming it): they would share markers and one would
 * never run. Also IB_ERR_CONFIG: an empty or overlong consumer
 * (IB_CONSUMER_MAX), no handle function, an empty type list or an empty type.
 * A type listed twice for one handler counts once. A transactional handler
 * is refused (IB_ERR_CONFIG, naming the handler and the recorder) when the
 * recorder has no transactions (only sqlite: has) or the options give no
 * transactional_bus. On error the table is unchanged. */
ib_status ib_dispatch_add(ib_dispatch *d, const ib_dispatch_handler *handler, ib_error *err);

/* Number of handlers registered (0 for NULL), and the consumer identity of
 * the one registered `index`-th (0-based; NULL past the last). The string
 * is the table's, valid until ib_dispatch_free(). Read them after
 * registration, e.g. to size per-handler state for the observer. */
size_t ib_dispatch_handler_count(const ib_dispatch *d);
const char *ib_dispatch_handler_consumer(const ib_dispatch *d, size_t index);

/* Number of handlers subscribed to `type` (0 for NULL or an unknown type). */
size_t ib_dispatch_count_for(const ib_dispatch *d, const char *type);

/* Ends the handler attempts of `event` for every handler subscribed to
 * its type (ib_recorder_end_attempts): the host calls it once the event's
 * dead letter is published, so a republish, replay or redelivery of the
 * same id starts with a fresh budget. Handlers that marked the event stay
 * marked. NULL, or an event without a type or a normalised id: nothing
 * to do. Errors: the recorder's (the attempts then stay, and the next
 * delivery of the id is dead-lettered again at once, which ends them). */
ib_status ib_dispatch_end_attempts(ib_dispatch *d, const ib_event *event, ib_error *err);

/* Runs a batch of deliveries through the idempotent flow. `bus` is handed to
 * handlers (may be NULL when nothing publishes). Returns IB_OK when every
 * delivery got an outcome (recorder trouble shows as NAK outcomes, never as
 * a lost event); an error only for misuse (IB_ERR_INVALID_ARG: NULL table or
 * deliveries, a delivery without an event or type, an id that is not
 * normalised), and then no handler has run and no output is set.
 *
 * Recorder failures do not fail the call, but their detail is worth a log
 * line: when one happened, `err` (if non-NULL) holds the first recorder
 * error (err->status != IB_OK) although IB_OK is returned; otherwise `err`
 * is cleared. */
ib_status ib_dispatch_run(ib_dispatch *d, ib_delivery *deliveries, size_t n, ib_bus_proxy *bus,
                          ib_error *err);

/* Where a run takes in more deliveries while its last calls run
 * (ib_dispatch_run_more). `take` appends up to `room_len` deliveries at
 * `room` (decoded, checked, with normalised ids, as ib_dispatch_run
 * wants them) and returns how many; 0 when none is ready now (it must not
 * wait: the run's workers are falling idle). It runs on the thread of
 * ib_dispatch_run_more, which holds the table's locks: it must not call
 * into the table. */
typedef struct ib_dispatch_more {
    size_t (*take)(void *ctx, ib_delivery *room, size_t room_len);
    void *ctx;
    size_t cap; /* deliveries the caller's array holds in all; >= n */
} ib_dispatch_more;

/* ib_dispatch_run, but the batch may grow: with concurrency N > 1, once
 * no more than N of its calls are left to finish (so a worker is about to
 * fall idle), the run asks `more->take` for deliveries to put after the
 * last (deliveries[n...], up to more->cap in all), claims them and hands
 * their calls to the workers, which therefore never wait for a batch's
 * end and its claim. It claims at most what `take` gives at a time, only
 * while every handler's circuit is closed, no commit is failing and no
 * transactional handler is registered. Every delivery taken in is
 * decided like the batch's own: `*ran` (never NULL) says how many the run
 * ended with. The same duplicate rules hold across them: a later
 * delivery of a key met earlier in the run follows the earlier one. A
 * key taken over from a dead holder in a delivery taken in runs alone
 * after the other calls, its attempt counted first, as at a batch's
 * start. NULL `more`, or concurrency 1: ib_dispatch_run. Errors: those of
 * ib_dispatch_run, and IB_ERR_INVALID_ARG for a cap below n. */
ib_status ib_dispatch_run_more(ib_dispatch *d, ib_delivery *deliveries, size_t n,
                               const ib_dispatch_more *more, size_t *ran, ib_bus_proxy *bus,
                               ib_error *err);

/* Time the last ib_dispatch_run() spent in recorder calls (check, claim,
 * mark, release), in seconds. Read it on the thread that ran the batch. */
double ib_dispatch_recorder_seconds(const ib_dispatch *d);

/* Asks the batch whose handlers are running now to restart the leases of
 * its claims (same owner, lease_ms), so a handler that outlives the lease
 * is not taken over by another process that receives the same id. Returns
 * at once: the thread of ib_dispatch_run() does the writing, between two
 * handler completions, or, while it runs a handler itself, the table's
 * stand-in thread; the counts and error it returns are what was done for
 * the requests made before this call
 * (since the last call; each renewal is reported once). Safe to call from
 * any thread while ib_dispatch_run() runs on another; between batches it
 * asks nothing and only reports. `*extended` counts leases restarted,
 * `*lost` claims another owner took over after expiry (their handler may
 * run twice). Errors: the recorder's, from a renewal that failed. */
ib_status ib_dispatch_extend_leases(ib_dispatch *d, size_t *extended, size_t *lost, ib_error *err);

/* Asks the running batch to make durable now the marks of its calls that
 * returned OK and are waiting for the committer (the commit interval or a
 * failed commit's back-off), for a caller that wants them sooner: a call
 * is past --handler-timeout, or the process is about to exit at its drain
 * deadline. Returns at once, like ib_dispatch_extend_leases(): the thread
 * of ib_dispatch_run() commits between two handler completions (or the
 * stand-in while that thread runs a handler), and `*marked` and the
 * error are what was done for the requests made before this call. Their messages are still settled
 * by the batch (or come back after an exit and are dropped as done). Safe from any thread while
 * ib_dispatch_run() runs on another; between batches it asks nothing and
 * only reports. Errors: the recorder's (nothing is lost: the committer
 * still holds the marks and retries them). */
ib_status ib_dispatch_flush_marks(ib_dispatch *d, size_t *marked, ib_error *err);

/* A handler call that has run for at least the age asked of
 * ib_dispatch_overdue(). Strings are BORROWED for the visit. */
typedef struct ib_overdue_call {
    size_t handler;       /* registration index */
    const char *consumer; /* its identity */
    const char *event_id;
    int64_t started_ms; /* CLOCK_MONOTONIC ms when the call started: with the
                           handler and id, it tells one call from the next */
    int64_t running_ms;
} ib_overdue_call;

/* Visits, under the lock of the batch in flight (a lock held only for
 * copies, never across a store write or a handler call), every handler
 * call that has been running for at least `age_ms`, as the thread of
 * ib_dispatch_run() last saw it start, and returns how many there are.
 * Safe from any thread while ib_dispatch_run() runs on another (a watcher
 * enforcing a handler timeout); 0 between batches. `visit` must be quick
 * and must not call the table. */
size_t ib_dispatch_overdue(ib_dispatch *d, int64_t age_ms,
                           void (*visit)(void *ctx, const ib_overdue_call *call), void *ctx);

/* The circuit of handler `handler` (registration index) now;
 * IB_CIRCUIT_CLOSED when circuits are off or the index is past the last.
 * Safe from any thread. */
ib_circuit_state ib_dispatch_circuit_state(const ib_dispatch *d, size_t handler);

/* How long the caller may wait before it pulls again: when circuits are on
 * and every handler's circuit is open, the time until the first probe is
 * due (at least 1); otherwise 0. Safe from any thread. */
int64_t ib_dispatch_hold_ms(const ib_dispatch *d);

/* From inside a handler call, on the thread that runs it: adds detail to
 * the verdict the handler is about to return (the host API's
 * verdict_detail, ABI 1.3). With RETRY, a `retry_after_ms` >= 0 replaces
 * the back-off as the delivery's nak delay, clamped by
 * ib_dispatch_retry_after_ms() (the longest one asked wins when several
 * handlers of a delivery retry). `reason` (copied, cut at
 * IB_VERDICT_REASON_MAX bytes, line breaks made spaces; NULL = none)
 * becomes the delivery's reject_detail with REJECT, and with RETRY the
 * last failure a "max-deliver" dead letter and a circuit's change name. Returns false, doing
 * nothing, on a thread that is not running a handler of a dispatch table. */
bool ib_dispatch_note_verdict(int64_t retry_after_ms, const char *reason);

/* From inside a handler call: stores the table's observer_ctx and the
 * handler's registration index (as the observer receives it) and returns
 * true; false on a thread that is not running a handler. */
bool ib_dispatch_current(void **ctx, size_t *handler);

/* The nak delay for a RETRY whose handler asked for `asked_ms`: clamped to
 * [1, the maximum back-off] of `o` (NULL: the defaults), without jitter:
 * the server asked for that time. */
int64_t ib_dispatch_retry_after_ms(const ib_dispatch_options *o, int64_t asked_ms);

/* The back-off delay for a RETRY seen on delivery `delivery_count`:
 * base * 2^(delivery_count - 1), capped at the maximum, then spread by
 * +-20% jitter (so processes that failed together do not retry together)
 * and clamped again to [1, max]. The jitter comes from a lock-free PRNG
 * seeded per process; safe from any thread. `o` may be NULL (defaults);
 * delivery_count 0 is taken as 1. */
int64_t ib_dispatch_backoff_ms(const ib_dispatch_options *o, uint64_t delivery_count);

/* The nak delay for a copy whose id another owner holds: the holder's
 * remaining lease (at least options.busy_delay_ms), plus up to 20% jitter
 * (at least 10 ms). `o` may be NULL. Safe from any thread. */
int64_t ib_dispatch_busy_delay_ms(const ib_dispatch_options *o, int64_t remaining_ms);

#endif
