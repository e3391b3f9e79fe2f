/* SPDX-License-Identifier: Apache-2.0 */
/* One pulled batch through the host: decode and validate every message,
 * run the valid ones through the idempotent core in one call (one claim
 * transaction; marks committed as handlers finish), then settle every
 * message: ack, nak with a delay, or dead-letter. A message is acked only
 * once its marks are durable: during the run (on_settled, as the commit
 * holding them lands) or after it. This file also creates dispatch, so the
 * observer and callbacks it hands dispatch stay its own. */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jetstream.h"
#include "host_internal.h"
#include "log.h"
#include "clock.h"
#include "log_recorder.h"

/* Per-message working state (host_internal.h). */
struct ib_host_item {
    natsMsg *msg;
    ib_jsack_meta meta;
    ib_event *event;
    bool settled;                        /* nothing left to do: not JetStream, or already nak'ed */
    bool rejected;                       /* refused before dispatch: dead-letter it */
    ib_dead_letter_reason reject_reason; /* decode / invalid-id, when rejected */
    char reject_detail[IB_ERROR_MSG_MAX];
    ib_delivery *delivery; /* NULL unless dispatched */
    ib_trace trace;        /* the trace it continues, with this host's span of it */
    bool traced;           /* `trace` is set */
    /* a partitioned consumer's: its partition and key (in the subject), so
     * later events of the key wait while it is retried; NULL otherwise */
    uint32_t partition;
    const char *order_key;
};
typedef ib_host_item item;

/* A partitioned consumer's message settled for good (`waits` false) or
 * nak'ed: the later events of its key wait for it meanwhile. */
static void note_order(ib_host *h, const item *it, bool waits)
{
    if (it->order_key != NULL)
        ib__host_order_note(h->batch.order, it->partition, it->order_key, it->meta.stream_seq,
                            waits);
}

static void settle_ack(ib_host *h, item *it)
{
    ib_error e;
    note_order(h, it, false);
    ib__host_retries_drop(h->batch.retries,
                          it->meta.stream_seq); /* marked: nothing left to wait for */
    if (ib_ack(ib_nats_connection(h->nats), it->msg, &e) != IB_OK) {
        ib_log_kv(IB_SEV_WARN,
                  "ack failed; the message will be redelivered and dropped as a "
                  "duplicate",
                  "error", e.msg, NULL);
        return;
    }
    h->batch.totals.acked++;
    ib_metrics_add(h->metrics, IB_METRIC_ACKS, 1);
}

static void settle_nak(ib_host *h, item *it, int64_t delay_ms)
{
    ib_error e;
    note_order(h, it, true);
    ib__host_retries_add(h->batch.retries, it->meta.stream_seq, ib_clock_monotonic_ms() + delay_ms,
                         it->event);
    if (ib_nak(ib_nats_connection(h->nats), it->msg, delay_ms, &e) != IB_OK)
        ib_log_kv(IB_SEV_WARN, "nak failed; the message comes back after AckWait", "error", e.msg,
                  NULL);
    h->batch.totals.naked++;
    ib_metrics_add(h->metrics, IB_METRIC_NAKS, 1);
}

/* Tests kill the host here: after the dead letter's publish was acked,
 * before the event's attempts are ended. What was sent is flushed first,
 * so the kill loses nothing the server would otherwise have had. */
static void test_kill_before_end_attempts(ib_host *h)
{
    const char *v = getenv("IB_TEST_KILL_BEFORE_END_ATTEMPTS");
    if (v != NULL && v[0] != '\0') {
        natsConnection_FlushTimeout(ib_nats_connection(h->nats), 2000);
        raise(SIGKILL);
    }
}

/* After a dead letter's publish was acked: ends the event's attempts, and
 * only then terminates the original. A crash between the two leaves it
 * un-terminated, so it comes back, is dead-lettered again at once (the
 * dead-letter stream drops the copy) and ends them then; terminated first,
 * nothing would come back to end them, and a replay would find them
 * spent. False when the attempts could not be ended: nak'ed instead. */
static bool end_attempts_then_terminate(ib_host *h, item *it)
{
    ib_error e;
    test_kill_before_end_attempts(h);
    if (it->event != NULL && ib_dispatch_end_attempts(h->dispatch, it->event, &e) != IB_OK) {
        ib_log(IB_SEV_WARN,
               "dead letter published, but its attempts could not be ended; message nak'ed to "
               "end them when it comes back",
               IB_LOG_STR("consumer", h->cfg->durable), IB_LOG_STR("event_id", it->event->id),
               IB_LOG_STR("error", e.msg));
        settle_nak(h, it, h->cfg->retry_base_ms);
        return false;
    }
    ib__host_retries_drop(h->batch.retries, it->meta.stream_seq); /* its attempts end here */
    note_order(h, it, false);
    if (ib_term(ib_nats_connection(h->nats), it->msg, &e) != IB_OK)
        ib_log_kv(IB_SEV_WARN,
                  "dead-lettered, but +TERM failed; the message comes back after AckWait and its "
                  "copy is dropped",
                  "error", e.msg, NULL);
    return true;
}

static void settle_dead_letter(ib_host *h, item *it, ib_dead_letter_reason why, const char *detail)
{
    const char *reason = ib_dead_letter_reason_str(why);
    ib_error e;
    ib_dead_letter_info info = {
        .reason = why,
        .detail = detail,
        .stream = h->cfg->stream,
        .consumer = h->cfg->durable,
        .stream_seq = it->meta.stream_seq,
        .delivery_count = it->meta.delivered,
        .event_id = it->event != NULL ? it->event->id : NULL,
        .event_type = it->event != NULL ? it->event->type : NULL,
        .trace = it->traced ? &it->trace : NULL,
        /* whose verdict it was: two handlers of one type are told apart */
        .handler =
            !it->rejected && it->delivery != NULL ? it->delivery->dead_letter_consumer : NULL,
    };
    if (ib_dead_letter_publish(ib_nats_connection(h->nats), ib_nats_jetstream(h->nats),
                               h->set.dead_letter_subject, it->msg, &info, h->cfg->retry_base_ms,
                               5000, &e) != IB_OK) {
        h->batch.totals.naked++;
        ib_metrics_add(h->metrics, IB_METRIC_NAKS, 1);
        ib__host_retries_add(h->batch.retries, it->meta.stream_seq,
                             ib_clock_monotonic_ms() + h->cfg->retry_base_ms, it->event);
        ib_log(IB_SEV_ERROR, "dead-letter failed; message nak'ed",
               IB_LOG_STR("durable", h->cfg->durable), IB_LOG_STR("event_id", info.event_id),
               IB_LOG_STR("type", info.event_type), IB_LOG_STR("reason", reason),
               IB_LOG_U64("delivery_count", it->meta.delivered),
               IB_LOG_U64("stream_seq", it->meta.stream_seq), IB_LOG_STR("error", e.msg));
        return;
    }
    if (!end_attempts_then_terminate(h, it))
        return;
    h->batch.totals.dead_lettered++;
    ib_metrics_dead_letter(h->metrics, why);
    ib_log(IB_SEV_WARN, "dead-lettered", IB_LOG_STR("durable", h->cfg->durable),
           IB_LOG_STR("event_id", info.event_id), IB_LOG_STR("type", info.event_type),
           IB_LOG_STR("reason", reason), IB_LOG_U64("delivery_count", it->meta.delivered),
           IB_LOG_U64("stream_seq", it->meta.stream_seq),
           IB_LOG_STR("subject", h->set.dead_letter_subject), IB_LOG_STR("handler", info.handler),
           IB_LOG_STR("detail", detail));
}

/* A redelivery on which every handler found the event already marked:
 * the marks were durable and the ack never landed (lost, or the process
 * died between the commit and the ack): the crash window at work. A
 * producer's retry is a new message with delivery count 1; a RETRY of one
 * handler brings its event back with that handler still unmarked, and so
 * does one whose circuit is open; none of them counts. */
static bool redelivered_all_marked(const ib_delivery *d)
{
    const ib_delivery_counts *c = &d->counts;
    unsigned other = c->handled + c->retried + c->rejected + c->busy + c->recorder_failed +
                     c->coalesced + c->lost + c->exhausted + c->conflicts + c->waiting;
    return d->delivery_count > 1 && c->duplicates > 0 && other == 0;
}

static void count_delivery(ib_host *h, const item *it)
{
    const ib_delivery *d = it->delivery;
    const ib_delivery_counts *c = &d->counts;
    if (c->handled > 0 && h->batch.first_handled_ms < 0)
        h->batch.first_handled_ms = ib_clock_monotonic_ms() - h->batch.opened_at_ms;
    h->batch.totals.handled += c->handled;
    h->batch.totals.duplicates += c->duplicates;
    h->batch.totals.retried += c->retried;
    h->batch.totals.rejected += c->rejected;
    h->batch.totals.busy += c->busy;
    ib_metrics_add(h->metrics, IB_METRIC_EVENTS_HANDLED, c->handled);
    ib_metrics_add(h->metrics, IB_METRIC_DUPLICATES_DROPPED, c->duplicates);
    ib_metrics_add(h->metrics, IB_METRIC_HANDLER_FAILURES, c->retried + c->rejected);
    ib_metrics_add(h->metrics, IB_METRIC_CLAIMS_LOST, c->lost);
    if (redelivered_all_marked(d))
        ib_metrics_add(h->metrics, IB_METRIC_REDELIVERED_DUPLICATES, c->duplicates);
    if (c->unhandled) {
        h->batch.totals.unhandled++;
        ib_metrics_add(h->metrics, IB_METRIC_EVENTS_UNHANDLED, 1);
    }
}

/* A handler not run because its id is marked with another payload: a
 * producer reused the id. Counted, and logged with the consumer and the id,
 * never the payload (it may hold anything); louder unless the operator
 * chose to drop such events. */
static void observe_conflict(ib_host *h, const ib_delivery *d, const char *consumer)
{
    static const char *const action[] = {
        [IB_CONFLICT_DEAD_LETTER] = "dead-letter",
        [IB_CONFLICT_DROP] = "drop",
        [IB_CONFLICT_LOG] = "log",
    };
    ib_conflict_policy p = h->cfg->on_conflict;
    ib_metrics_add(h->metrics, IB_METRIC_CONFLICTS, 1);
    ib_log_kv(p == IB_CONFLICT_DROP ? IB_SEV_INFO : IB_SEV_WARN,
              "conflict: event id already marked with another payload", "consumer", consumer,
              "event_id", d->event->id, "type", d->event->type, "on_conflict",
              (unsigned)p < sizeof(action) / sizeof(action[0]) ? action[p] : "?", NULL);
}

/* The ibus_consumer_runs_total result of each observer report. */
static const ib_metric_result run_result[] = {
    [IB_RESULT_HANDLED] = IB_METRIC_RESULT_HANDLED,
    [IB_RESULT_RETRY] = IB_METRIC_RESULT_RETRY,
    [IB_RESULT_REJECT] = IB_METRIC_RESULT_REJECTED,
    [IB_RESULT_MARK_FAILED] = IB_METRIC_RESULT_COUNT, /* retired, never reported */
    [IB_RESULT_RECORDER_FAILED] = IB_METRIC_RESULT_RECORDER_FAILED,
    [IB_RESULT_LOST] = IB_METRIC_RESULT_CLAIM_LOST,
    [IB_RESULT_CONFLICT] = IB_METRIC_RESULT_CONFLICT,
    [IB_RESULT_DUPLICATE] = IB_METRIC_RESULT_DUPLICATE,
};

/* Dispatch observer: the handler's consumer series (one count per report,
 * one sample per call), the process-wide histogram, and one log line per
 * handler failure or conflict naming the handler's consumer identity.
 * `handler` indexes the slots registered with the handlers, so the hot path
 * is two relaxed adds and no lookup. */
static void observe_delivery(ib_host *h, const ib_delivery *d, const char *consumer, size_t handler,
                             ib_handler_result result, double seconds)
{
    static const char *const what[] = {
        [IB_RESULT_HANDLED] = "handled",
        [IB_RESULT_RETRY] = "retry",
        [IB_RESULT_REJECT] = "rejected",
        [IB_RESULT_MARK_FAILED] = "mark-failed", /* retired, never reported */
        [IB_RESULT_LOST] = "claim-lost",
    };
    ib_metrics_consumer *slot =
        handler < h->consumer_metrics_n ? h->consumer_metrics[handler] : NULL;
    if (result == IB_RESULT_WAITING) {
        ib_metrics_consumer_waits(slot, 1); /* not run: its circuit is open */
        return;
    }
    if ((unsigned)result < sizeof(run_result) / sizeof(run_result[0]))
        ib_metrics_consumer_count(slot, run_result[result]);
    if (result == IB_RESULT_DUPLICATE)
        return; /* not run: nothing to time or say */
    if (result == IB_RESULT_CONFLICT) {
        observe_conflict(h, d, consumer); /* not run: no time to observe */
        return;
    }
    if (result != IB_RESULT_RECORDER_FAILED) {
        ib_metrics_observe(h->metrics, IB_METRIC_HANDLE_SECONDS, seconds);
        ib_metrics_consumer_observe(slot, seconds);
    }
    /* Not the handler's failure: the recorder's outage is logged once
     * (ib__host_on_recorder), and counted per consumer above. */
    if (result == IB_RESULT_HANDLED || result == IB_RESULT_RECORDER_FAILED ||
        (unsigned)result >= sizeof(what) / sizeof(what[0]))
        return;
    ib_log(IB_SEV_WARN, "handler failure", IB_LOG_STR("consumer", consumer),
           IB_LOG_STR("event_id", d->event->id), IB_LOG_STR("type", d->event->type),
           IB_LOG_STR("reason", what[result]), IB_LOG_U64("delivery_count", d->delivery_count));
}

/* The observer, with the delivery's trace current so its log lines name
 * it. */
static void observe(void *ctx, const ib_delivery *d, const char *consumer, size_t handler,
                    ib_handler_result result, double seconds)
{
    const ib_trace *outer = ib_trace_current();
    ib_trace_current_set(d->trace);
    observe_delivery(ctx, d, consumer, handler, result, seconds);
    ib_trace_current_set(outer);
}

/* Acks a delivery whose marks just became durable, during the run. */
static void on_settled(void *ctx, ib_delivery *d)
{
    ib_host *h = ctx;
    const ib_trace *outer = ib_trace_current();
    ib_trace_current_set(d->trace);
    settle_ack(h, d->user);
    ib_trace_current_set(outer);
}

/* While the recorder fails, a WARN line at most this often says so. */
#define RECORDER_STILL_EVERY_MS 10000

/* The line of a change of state; the failed calls it covers start over. */
static void recorder_changed(ib_host *h, bool healthy, const ib_error *e)
{
    int64_t now = ib_clock_monotonic_ms();
    uint64_t calls = atomic_exchange(&h->rec.failed_calls, 0);
    if (healthy) {
        int64_t since = atomic_exchange(&h->rec.down_since_ms, 0);
        atomic_store(&h->rec.said_ms, 0);
        ib_log(IB_SEV_INFO, "recorder works again; ready",
               IB_LOG_STR("recorder", h->set.recorder_shown), IB_LOG_U64("failed_calls", calls),
               IB_LOG_I64("down_ms", since > 0 ? now - since : 0));
        return;
    }
    atomic_store(&h->rec.down_since_ms, now);
    atomic_store(&h->rec.said_ms, now);
    ib_log_kv(IB_SEV_ERROR,
              "recorder failing: deliveries are nak'ed with back-off, finished handlers' "
              "marks are retried, not ready until it works",
              "recorder", h->set.recorder_shown, "error", e != NULL ? e->msg : "", NULL);
}

/* A failure while the recorder is down already: a reminder with the calls
 * that failed since the last line, once RECORDER_STILL_EVERY_MS passed.
 * The exchange on recorder_said_ms lets one thread write it. */
static void recorder_still_failing(ib_host *h, const ib_error *e)
{
    int64_t now = ib_clock_monotonic_ms();
    int_fast64_t said = atomic_load(&h->rec.said_ms);
    if (said == 0 || now - said < RECORDER_STILL_EVERY_MS ||
        !atomic_compare_exchange_strong(&h->rec.said_ms, &said, now))
        return;
    uint64_t calls = atomic_exchange(&h->rec.failed_calls, 0);
    ib_log(IB_SEV_WARN, "recorder still failing: deliveries are still nak'ed, not ready",
           IB_LOG_STR("recorder", h->set.recorder_shown), IB_LOG_U64("failed_calls", calls),
           IB_LOG_I64("over_ms", now - said), IB_LOG_STR("error", e != NULL ? e->msg : ""));
}

/* Counts recorder failures, keeps readiness and logs each change of
 * state, with a reminder at most every RECORDER_STILL_EVERY_MS while it
 * fails: never a line per failed call. Called by the dispatch after
 * commits and by the control loop's idle probe (host_control.c), from either
 * thread. */
void ib__host_on_recorder(void *ctx, bool healthy, const ib_error *e)
{
    ib_host *h = ctx;
    if (!healthy) {
        ib_metrics_add(h->metrics, IB_METRIC_RECORDER_ERRORS, 1);
        atomic_fetch_add(&h->rec.failed_calls, 1);
    }
    if (!healthy && e != NULL && e->status == IB_ERR_SCHEMA &&
        atomic_exchange(&h->rec.schema_changed, 1) == 0)
        ib_log_kv(IB_SEV_ERROR,
                  "marker file changed schema under this process; it stops claiming and exits 2 "
                  "(upgrade it to the version that migrated the file)",
                  "recorder", h->set.recorder_shown, "error", e->msg, NULL);
    ib_metrics_gauge_set(h->metrics, IB_METRIC_RECORDER_UP, healthy);
    if (atomic_exchange(&h->rec.down, !healthy) != !healthy)
        recorder_changed(h, healthy, e);
    else if (!healthy)
        recorder_still_failing(h, e);
}

int ib__host_batch_alloc(ib_host *h, size_t batch)
{
    h->batch.room = batch * IB_HOST_BATCH_GROWTH;
    h->batch.items = calloc(h->batch.room, sizeof(item));
    h->batch.deliveries = calloc(h->batch.room, sizeof(ib_delivery));
    h->batch.cap = batch;
    return h->batch.items != NULL && h->batch.deliveries != NULL ? 0 : -1;
}

void ib__host_batch_free(ib_host *h)
{
    free(h->batch.items);
    free(h->batch.deliveries);
    h->batch.items = NULL;
    h->batch.deliveries = NULL;
}

/* Registers every handler's consumer identity with the metrics, before the
 * first batch, so each series renders (at 0) from the first scrape after
 * start-up and the observer finds its slot by index. */
static int register_consumer_metrics(ib_host *h, ib_error *err)
{
    size_t n = ib_dispatch_handler_count(h->dispatch);
    h->consumer_metrics = calloc(n > 0 ? n : 1, sizeof(*h->consumer_metrics));
    h->batch.circuit_warned_ms = calloc(n > 0 ? n : 1, sizeof(*h->batch.circuit_warned_ms));
    if (h->consumer_metrics == NULL || h->batch.circuit_warned_ms == NULL) {
        ib_error_set(err, IB_ERR_NOMEM, "out of memory for the consumer metrics");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *consumer = ib_dispatch_handler_consumer(h->dispatch, i);
        h->consumer_metrics[i] = ib_metrics_consumer_add(h->metrics, consumer);
        if (h->consumer_metrics[i] == NULL) {
            ib_error_set(err, IB_ERR_NOMEM, "out of memory for the metrics of consumer %s",
                         consumer);
            return -1;
        }
    }
    h->consumer_metrics_n = n;
    return 0;
}

int ib__host_dispatch_open(ib_host *h, ib_error *err)
{
    ib_dispatch_options o = {
        .owner = h->set.owner,
        /* A partitioned consumer's claims live as long as its partitions'
         * leases: the dispatch asks the recorder again before a call whose
         * claim is older than a quarter of one, and the recorder answers
         * from the partition's stop time (log_recorder.h), so a process
         * stopped past its lease starts nothing of it when it runs again. */
        .lease_ms = h->cfg->partitions > 0 ? h->cfg->partition_lease_ms / 4 : h->set.ack_wait_ms,
        .max_deliver = h->set.max_deliver,
        .nak_base_delay_ms = h->cfg->retry_base_ms,
        .nak_max_delay_ms = h->cfg->retry_max_ms,
        .concurrency = (unsigned)h->cfg->concurrency,
        .observer = observe,
        .observer_ctx = h,
        /* a commit interval of 0 means a commit after every handler */
        .commit_interval_ms = h->cfg->commit_interval_ms > 0 ? h->cfg->commit_interval_ms : -1,
        .on_settled = on_settled,
        .on_recorder = ib__host_on_recorder,
        .on_conflict = h->cfg->on_conflict,
        .transactional_bus = ib__host_transactional_bus,
        .circuit = h->cfg->circuit,
        .on_circuit = ib__host_on_circuit,
    };
    if (ib_dispatch_create(&h->dispatch, h->recorder, &o, err) != IB_OK)
        return -1;
    for (size_t i = 0; i < h->plugin_count; i++)
        if (ib_host_plugin_register(h->plugins[i], h->dispatch, h->cfg->durable,
                                    h->cfg->consumer_names, err) != IB_OK)
            return -1;
    return register_consumer_metrics(h, err);
}

/* The trace the message continues (its headers, else its event's), with a
 * span of this host's for this delivery; a fresh trace when asked for and
 * it carries none. A malformed header is no trace, never an error. */
static void trace_item(ib_host *h, item *it)
{
    ib_trace sender;
    ib_error e;
    it->traced = false;
    if (ib_msg_trace_read(&sender, it->msg, it->event)) {
        ib_trace_child(&it->trace, &sender);
        it->traced = true;
    } else if (h->cfg->trace_start) {
        it->traced = ib_trace_start(&it->trace, &e) == IB_OK;
    }
}

/* A partitioned consumer's gate (host_partitions.c): true when the event
 * may run here; otherwise the message is settled: nak'ed when its
 * partition is not owned here, forwarded when its key belongs elsewhere,
 * marked for the dead-letter subject when its subject is not a partition
 * subject. */
static bool admit_partitioned(ib_host *h, item *it)
{
    uint32_t partition = 0;
    const char *subject = natsMsg_GetSubject(it->msg);
    switch (ib__host_fleet_admit(h, subject, it->event->id, &partition)) {
    case IB_HOST_ADMIT_OK:
        it->partition = partition;
        it->order_key = strrchr(subject, '.') + 1; /* read back as <base>.<p>.<key> */
        if (!ib__host_order_must_wait(h->batch.order, partition, it->order_key,
                                      it->meta.stream_seq))
            return true;
        settle_nak(h, it, h->cfg->retry_base_ms); /* an earlier event of its key comes first */
        it->settled = true;
        return false;
    case IB_HOST_ADMIT_NOT_OWNED:
        /* its owner takes it at once; not a retry this process waits
         * for (settle_nak would make --idle-exit wait for it here) */
        if (ib_nak(ib_nats_connection(h->nats), it->msg, 0, NULL) == IB_OK) {
            h->batch.totals.naked++;
            ib_metrics_add(h->metrics, IB_METRIC_NAKS, 1);
        }
        it->settled = true;
        return false;
    case IB_HOST_ADMIT_MISPLACED:
        if (ib__host_fleet_forward(h, it->msg, it->meta.stream_seq, it->event->id, partition))
            settle_ack(h, it);
        else
            settle_nak(h, it, h->cfg->retry_base_ms);
        it->settled = true;
        return false;
    case IB_HOST_ADMIT_NOT_PARTITIONED:
        break;
    }
    it->rejected = true;
    it->reject_reason = IB_DLQ_DECODE;
    snprintf(it->reject_detail, sizeof(it->reject_detail),
             "subject is not <base>.<partition>.<key> of this partitioned consumer");
    return false;
}

/* Decode: reads the JetStream metadata of message `i` and decodes its
 * event. A message that is not a delivery, or that cannot be decoded for
 * lack of resources, is settled here; an invalid one is marked for the
 * dead-letter subject; a valid one gets a delivery in `deliveries[*nd]`. */
static void decode_one(ib_host *h, item *it, natsMsg *msg, ib_delivery *deliveries, size_t *nd)
{
    memset(it, 0, sizeof(*it));
    it->msg = msg;
    const char *reply = natsMsg_GetReply(it->msg);
    ib_error e;
    if (reply == NULL || ib_jsack_parse(&it->meta, reply, strlen(reply), &e) != IB_OK) {
        /* Not a JetStream delivery (someone published to our inbox):
         * nothing to ack, nothing to lose. */
        ib_log_kv(IB_SEV_WARN, "ignoring a message that is not a JetStream delivery", "subject",
                  natsMsg_GetSubject(it->msg), NULL);
        it->settled = true;
        return;
    }
    h->batch.totals.received++;
    ib_metrics_add(h->metrics, IB_METRIC_EVENTS_RECEIVED, 1);
    if (it->meta.delivered > 1)
        ib_metrics_add(h->metrics, IB_METRIC_REDELIVERIES, 1);
    ib_metrics_gauge_set(h->metrics, IB_METRIC_CONSUMER_PENDING, (int64_t)it->meta.pending);

    ib_event_reject why = IB_EVENT_NOT_REJECTED;
    if (ib_event_decode(&it->event, &why, natsMsg_GetData(it->msg),
                        (size_t)natsMsg_GetDataLength(it->msg), &h->set.limits, &e) != IB_OK) {
        it->event = NULL;
        trace_item(h, it);
        if (why == IB_EVENT_NOT_REJECTED) {
            /* Not the message's fault (out of memory): nak it and let it
             * come back, rather than dead-letter good bytes. */
            ib_log_kv(IB_SEV_ERROR, "cannot decode for lack of resources; nak'ed", "error", e.msg,
                      NULL);
            settle_nak(h, it, h->cfg->retry_base_ms);
            it->settled = true;
            return;
        }
        it->rejected = true;
        it->reject_reason = why == IB_EVENT_REJECT_INVALID_ID ? IB_DLQ_INVALID_ID : IB_DLQ_DECODE;
        snprintf(it->reject_detail, sizeof(it->reject_detail), "%s", e.msg);
        return;
    }
    trace_item(h, it);
    if (h->fleet != NULL && !admit_partitioned(h, it))
        return;
    ib_delivery *d = &deliveries[(*nd)++];
    memset(d, 0, sizeof(*d));
    d->trace = it->traced ? &it->trace : NULL;
    d->event = it->event;
    d->subject = natsMsg_GetSubject(it->msg);
    d->stream_seq = it->meta.stream_seq;
    d->delivery_count = it->meta.delivered;
    /* handlers may send the Event on as it came (ib_raw_event.message) */
    d->message = (const uint8_t *)natsMsg_GetData(it->msg);
    d->message_len = (size_t)natsMsg_GetDataLength(it->msg);
    d->user = it;
    d->order_key = it->order_key;
    it->delivery = d;
}

/* The batch as it grows: its messages (n of them, room for
 * h->batch.room) and its valid deliveries (nd, in h->batch.deliveries). */
typedef struct growing {
    ib_host *h;
    natsMsg **msgs;
    size_t n;
    size_t nd;
} growing;

/* The dispatch's ib_dispatch_more: while the batch's last calls run,
 * takes in what the puller has ready (a pull's worth at most, never
 * waiting), decoded and published for +WPI like the batch's own. Nothing
 * once SIGTERM came: the batch ends and the drain begins. */
static size_t take_more(void *ctx, ib_delivery *room, size_t room_len)
{
    growing *g = ctx;
    ib_host *h = g->h;
    if (ib__host_signal_received() || room != h->batch.deliveries + g->nd)
        return 0;
    size_t space = h->batch.room - g->n;
    if (space > h->batch.cap)
        space = h->batch.cap;
    if (space > room_len)
        space = room_len;
    size_t got = ib_puller_take(h->puller, g->msgs + g->n, space);
    size_t nd = g->nd;
    for (size_t i = g->n; i < g->n + got; i++)
        decode_one(h, &h->batch.items[i], g->msgs[i], h->batch.deliveries, &g->nd);
    g->n += got;
    if (got > 0)
        ib__host_inflight_grow(&h->inflight, g->n);
    ib_metrics_gauge_add(h->metrics, IB_METRIC_HANDLERS_IN_FLIGHT, (int64_t)(g->nd - nd));
    return g->nd - nd;
}

/* Dispatch: runs the valid deliveries through the idempotent core, with
 * the batch published for the control loop's in-progress acks; with
 * --concurrency > 1 the batch grows while its last calls run (take_more). */
static void dispatch_batch(ib_host *h, growing *g)
{
    ib_error e;
    ib_delivery *deliveries = h->batch.deliveries;
    size_t nd = g->nd;
    ib__host_inflight_begin(&h->inflight, g->msgs, g->n, ib_clock_monotonic_ms());
    ib_metrics_gauge_add(h->metrics, IB_METRIC_HANDLERS_IN_FLIGHT, (int64_t)nd);
    ib_dispatch_more more = {.take = take_more, .ctx = g, .cap = h->batch.room};
    /* a partitioned consumer's batch does not grow: what it takes in must
     * pass the partition gate, which runs between batches */
    bool grow = h->cfg->concurrency > 1 && h->fleet == NULL;
    ib_status st = ib_dispatch_run_more(h->dispatch, deliveries, nd, grow ? &more : NULL, &nd,
                                        &h->batch.bus, &e);
    ib_metrics_gauge_add(h->metrics, IB_METRIC_HANDLERS_IN_FLIGHT, -(int64_t)g->nd);
    ib__host_inflight_end(&h->inflight); /* no +WPI for them from here on */
    if (st != IB_OK) {
        /* Misuse, not recorder trouble: nothing ran. Nak everything so
         * nothing is lost, and say why. */
        ib_log_kv(IB_SEV_ERROR, "dispatch refused the batch", "error", e.msg, NULL);
        for (size_t i = 0; i < nd; i++) {
            deliveries[i].outcome = IB_OUTCOME_NAK;
            deliveries[i].nak_delay_ms = h->cfg->retry_base_ms;
        }
        return;
    }
    /* ib__host_on_recorder logged the outage: a line per batch would be
     * one per pull while it lasts */
    if (e.status != IB_OK)
        ib_log_kv(IB_SEV_DEBUG, "recorder error; affected messages nak'ed", "recorder",
                  h->set.recorder_shown, "error", e.msg, NULL);
    ib_metrics_observe(h->metrics, IB_METRIC_RECORDER_SECONDS,
                       ib_dispatch_recorder_seconds(h->dispatch));
}

/* The Ibus-Error of a dead letter dispatch decided: the reason with the
 * count, and what the handler said ("rejected after 1 deliveries: HTTP
 * 422: ..."; "max-deliver after 5 attempts; last: HTTP 503 Service
 * Unavailable"). Attempts are what the poison rule counts; a recorder
 * without them (memory:) counts deliveries. */
static const char *dead_letter_detail(char *buf, size_t cap, const ib_delivery *d)
{
    const char *reason = ib_dead_letter_reason_str(d->dead_letter_reason);
    if (d->dead_letter_reason != IB_DLQ_MAX_DELIVER) {
        snprintf(buf, cap, "%s after %" PRIu64 " deliveries%s%s", reason, d->delivery_count,
                 d->reject_detail != NULL ? ": " : "",
                 d->reject_detail != NULL ? d->reject_detail : "");
        return buf;
    }
    const char *last = d->reject_detail;
    if (d->exhausted)
        last = "not known (no handler ran on this delivery: its attempts were used up before it)";
    else if (last == NULL)
        last = "RETRY (the handler gave no reason)";
    if (d->attempts > 0)
        snprintf(buf, cap, "%s after %" PRIu32 " attempts; last: %s", reason, d->attempts, last);
    else
        snprintf(buf, cap, "%s after %" PRIu64 " deliveries; last: %s", reason, d->delivery_count,
                 last);
    return buf;
}

/* Settle: acks, naks or dead-letters one message as decode and dispatch
 * decided. */
static void settle_one(ib_host *h, item *it)
{
    if (it->settled)
        return; /* done while decoding */
    if (it->rejected) {
        settle_dead_letter(h, it, it->reject_reason, it->reject_detail);
        return;
    }
    ib_delivery *d = it->delivery;
    count_delivery(h, it);
    switch (d->outcome) {
    case IB_OUTCOME_ACK:
        if (!d->settled_early) /* acked as soon as its marks committed */
            settle_ack(h, it);
        break;
    case IB_OUTCOME_NAK:
        settle_nak(h, it, d->nak_delay_ms);
        break;
    case IB_OUTCOME_DEAD_LETTER: {
        char detail[IB_VERDICT_REASON_MAX + 160];
        settle_dead_letter(h, it, d->dead_letter_reason,
                           dead_letter_detail(detail, sizeof(detail), d));
        break;
    }
    }
}

size_t ib__host_batch_take(const ib_host *h)
{
    bool short_batches = h->batch.last_ms < h->cfg->partition_lease_ms / 16;
    return h->fleet != NULL && short_batches ? h->batch.room : h->batch.cap;
}

void ib__host_process_batch(ib_host *h, natsMsg **msgs, size_t n)
{
    item *items = h->batch.items;
    growing g = {.h = h, .msgs = msgs};

    if (n > h->batch.room)
        n = h->batch.room;
    if (h->fleet != NULL)
        ib_log_recorder_routes_clear(h->recorder);
    for (size_t i = 0; i < n; i++)
        decode_one(h, &items[i], msgs[i], h->batch.deliveries, &g.nd);
    g.n = n;
    if (g.nd > 0)
        dispatch_batch(h, &g);
    n = g.n;
    for (size_t i = 0; i < n; i++) {
        /* every log line about the message names its trace */
        ib_trace_current_set(items[i].traced ? &items[i].trace : NULL);
        settle_one(h, &items[i]);
        ib_trace_current_set(NULL);
        ib_event_free(items[i].event);
        natsMsg_Destroy(items[i].msg);
        msgs[i] = NULL;
    }
}
