/* SPDX-License-Identifier: Apache-2.0 */
/* The idempotent flow of ib_dispatch_run(), each case run against the real
 * memory: and sqlite: recorders (through the counting wrapper). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "ib_test.h"

#define TYPE "order.created"

/* A NAK delay for delivery `dc` lies within +-20% of base * 2^(dc-1), capped. */
static void assert_backoff(const ib_delivery *dl, int64_t base, int64_t max, uint64_t dc)
{
    int64_t raw = base;
    for (uint64_t k = 1; k < dc && raw < max; k++)
        raw *= 2;
    if (raw > max)
        raw = max;
    assert_int_equal(dl->outcome, IB_OUTCOME_NAK);
    assert_true(dl->nak_delay_ms >= raw * 8 / 10);
    assert_true(dl->nak_delay_ms <= raw * 12 / 10 + 1);
    assert_true(dl->nak_delay_ms <= max);
}

/* ---- cases ------------------------------------------------------------- */

static void success_marks(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "orders/audit/audit", TYPE, &h);
    fx_event(&ev, 1, TYPE);

    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.dead_letter_reason, IB_DLQ_OTHER);
    assert_int_equal(dl.nak_delay_ms, 0);
    assert_int_equal(dl.counts.handled, 1);
    assert_int_equal(dl.counts.duplicates, 0);
    assert_false(dl.counts.unhandled);
    assert_true(dl.handle_seconds >= 0.0);
    assert_int_equal(atomic_load(&h.calls), 1);
    assert_true(fx_marked(f, "orders/audit/audit", ev.id));
    /* the handler saw the event and its delivery facts */
    assert_string_equal(h.consumer, "orders/audit/audit");
    assert_string_equal(h.id, ev.id);
    assert_string_equal(h.subject, "events.test");
    assert_int_equal(h.delivery_count, 1);
    assert_int_equal(h.stream_seq, 42);
    assert_int_equal(h.raw_size, sizeof(ib_raw_event));
    assert_int_equal(h.payload_len, ev.payload_len);
    assert_true(h.payload_matches);
    assert_string_equal(h.header_value, "t-1");
    /* one group commit, one claim call, nothing to release */
    assert_int_equal(atomic_load(&f->calls->claim_batch), 1);
    assert_int_equal(atomic_load(&f->calls->mark_batch), 1);
    assert_int_equal(atomic_load(&f->calls->release_batch), 0);
    fx_handler_destroy(&h);
}

static void retry_naks_with_backoff(fx *f)
{
    fx_handler h;
    ib_event ev;
    ib_dispatch_options o = fx_default_options();
    fx_handler_init(&h, IB_HANDLER_RETRY);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 2, TYPE);

    for (uint64_t dc = 1; dc <= 4; dc++) {
        ib_delivery dl = fx_run_one(f, &ev, dc);
        assert_backoff(&dl, o.nak_base_delay_ms, o.nak_max_delay_ms, dc);
        assert_int_equal(dl.counts.retried, 1);
        assert_int_equal(dl.counts.handled, 0);
        assert_false(fx_marked(f, "c/p/h", ev.id));
        assert_int_equal(atomic_load(&h.calls), (int)dc);
    }
    /* the claim was released: another owner may take it at once */
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(f->inner, &cs, "c/p/h", ev.id, "other", 30000, NULL), IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    fx_handler_destroy(&h);
}

static void duplicate_dropped(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 3, TYPE);

    assert_int_equal(fx_run_one(f, &ev, 1).outcome, IB_OUTCOME_ACK);
    ib_delivery dl = fx_run_one(f, &ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.duplicates, 1);
    assert_int_equal(dl.counts.handled, 0);
    assert_int_equal(atomic_load(&h.calls), 1);
    /* the same id published again (a new message, delivery 1) is a duplicate too */
    dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.counts.duplicates, 1);
    assert_int_equal(atomic_load(&h.calls), 1);
    fx_handler_destroy(&h);
}

static void reject_dead_letters(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_REJECT);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 4, TYPE);

    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "rejected");
    assert_int_equal(dl.counts.rejected, 1);
    assert_false(fx_marked(f, "c/p/h", ev.id));
    assert_int_equal(atomic_load(&f->calls->mark_batch), 0);
    assert_int_equal(atomic_load(&f->calls->release_batch), 1);
    fx_handler_destroy(&h);
}

static void redelivery_runs_only_failed(fx *f)
{
    fx_handler ok, flaky;
    ib_event ev;
    fx_handler_init(&ok, IB_HANDLER_OK);
    fx_handler_init(&flaky, IB_HANDLER_RETRY);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/ok", TYPE, &ok);
    fx_add(f, "c/p/flaky", TYPE, &flaky);
    assert_int_equal(ib_dispatch_count_for(f->d, TYPE), 2);
    fx_event(&ev, 5, TYPE);

    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl.counts.handled, 1);
    assert_int_equal(dl.counts.retried, 1);
    assert_true(fx_marked(f, "c/p/ok", ev.id));
    assert_false(fx_marked(f, "c/p/flaky", ev.id));

    atomic_store(&flaky.verdict, IB_HANDLER_OK);
    dl = fx_run_one(f, &ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.duplicates, 1);
    assert_int_equal(dl.counts.handled, 1);
    assert_int_equal(atomic_load(&ok.calls), 1);
    assert_int_equal(atomic_load(&flaky.calls), 2);
    assert_true(fx_marked(f, "c/p/flaky", ev.id));
    fx_handler_destroy(&ok);
    fx_handler_destroy(&flaky);
}

static void reject_still_marks_ok_handlers(fx *f)
{
    fx_handler ok, bad;
    ib_event ev;
    fx_handler_init(&ok, IB_HANDLER_OK);
    fx_handler_init(&bad, IB_HANDLER_REJECT);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/ok", TYPE, &ok);
    fx_add(f, "c/p/bad", TYPE, &bad);
    fx_event(&ev, 6, TYPE);

    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "rejected");
    assert_int_equal(dl.counts.handled, 1);
    assert_int_equal(dl.counts.rejected, 1);
    assert_true(fx_marked(f, "c/p/ok", ev.id));
    assert_false(fx_marked(f, "c/p/bad", ev.id));
    /* a replay of the dead letter runs only the handler that refused it */
    atomic_store(&bad.verdict, IB_HANDLER_OK);
    dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(atomic_load(&ok.calls), 1);
    assert_int_equal(atomic_load(&bad.calls), 2);
    fx_handler_destroy(&ok);
    fx_handler_destroy(&bad);
}

/* Without durable attempts (memory) the poison rule reads the delivery
 * count; with them (sqlite) it reads the handler attempts the recorder
 * counted, so only deliveries on which the handler ran use up the budget. */
static void poison_not_done_dead_letters(fx *f)
{
    fx_handler h;
    ib_event ev;
    ib_dispatch_options o = fx_default_options();
    o.max_deliver = 3;
    fx_handler_init(&h, IB_HANDLER_RETRY);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 7, TYPE);

    if (ib_recorder_has_durable_attempts(f->inner)) {
        /* a late first delivery still runs: attempts, not deliveries */
        for (int attempt = 1; attempt <= 2; attempt++) {
            ib_delivery dl = fx_run_one(f, &ev, (uint64_t)(attempt + 5));
            assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
            assert_int_equal(atomic_load(&h.calls), attempt);
        }
        /* RETRY on the last allowed attempt ends the retries */
        ib_delivery dl = fx_run_one(f, &ev, 8);
        assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
        assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "max-deliver");
        assert_int_equal(atomic_load(&h.calls), 3);
        /* and a copy that comes back is dead-lettered without running */
        dl = fx_run_one(f, &ev, 9);
        assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
        assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "max-deliver");
        assert_int_equal(dl.counts.exhausted, 1);
        assert_int_equal(atomic_load(&h.calls), 3);
        assert_false(fx_marked(f, "c/p/h", ev.id));
        fx_handler_destroy(&h);
        return;
    }
    ib_delivery dl = fx_run_one(f, &ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_int_equal(atomic_load(&h.calls), 1);
    for (uint64_t dc = 3; dc <= 4; dc++) {
        dl = fx_run_one(f, &ev, dc);
        assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
        assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "max-deliver");
        assert_int_equal(atomic_load(&h.calls), 1); /* not run again */
    }
    assert_false(fx_marked(f, "c/p/h", ev.id));
    /* the poisoned deliveries were claimed, never run */
    assert_int_equal(atomic_load(&f->calls->claim_batch), 3);
    fx_handler_destroy(&h);
}

/* A dead letter ends the event's attempts for every handler of its type
 * (ib_dispatch_end_attempts, which the host calls once the dead letter is
 * published): the next delivery of the id runs with a fresh budget and
 * is stopped again after it; a handler that marked the event stays
 * marked and does not run. */
static void dead_letter_ends_attempts(fx *f)
{
    fx_handler bad, good;
    ib_event ev;
    ib_dispatch_options o = fx_default_options();
    o.max_deliver = 2;
    fx_handler_init(&bad, IB_HANDLER_RETRY);
    fx_handler_init(&good, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/bad", TYPE, &bad);
    fx_add(f, "c/p/good", TYPE, &good);
    fx_event(&ev, 8, TYPE);
    ib_error e = {0};
    bool durable = ib_recorder_has_durable_attempts(f->inner);

    for (int round = 1; round <= 3; round++) {
        ib_delivery dl;
        /* a fresh delivery each round, as a replay is: delivery 1 */
        for (uint64_t dc = 1; dc <= 2; dc++)
            dl = fx_run_one(f, &ev, dc);
        assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
        assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "max-deliver");
        /* memory counts deliveries: the second is poisoned, never run */
        assert_int_equal(atomic_load(&bad.calls), (durable ? 2 : 1) * round);
        assert_int_equal(atomic_load(&good.calls), 1);
        assert_true(fx_marked(f, "c/p/good", ev.id));
        assert_int_equal(ib_dispatch_end_attempts(f->d, &ev, &e), IB_OK);
    }
    /* unknown types and NULL are nothing to do */
    ib_event other;
    fx_event(&other, 9, "no.handler");
    assert_int_equal(ib_dispatch_end_attempts(f->d, &other, &e), IB_OK);
    assert_int_equal(ib_dispatch_end_attempts(NULL, &ev, &e), IB_OK);
    fx_handler_destroy(&bad);
    fx_handler_destroy(&good);
}

static void poison_done_acks(fx *f)
{
    fx_handler a, b;
    ib_event ev;
    ib_dispatch_options o = fx_default_options();
    o.max_deliver = 3;
    fx_handler_init(&a, IB_HANDLER_OK);
    fx_handler_init(&b, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/a", TYPE, &a);
    fx_add(f, "c/p/b", TYPE, &b);
    fx_event(&ev, 8, TYPE);
    /* both done before (say a process marked and crashed before its ack) */
    assert_int_equal(ib_recorder_mark(f->inner, "c/p/a", ev.id, NULL), IB_OK);
    assert_int_equal(ib_recorder_mark(f->inner, "c/p/b", ev.id, NULL), IB_OK);

    ib_delivery dl = fx_run_one(f, &ev, 3);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.duplicates, 2);
    assert_int_equal(atomic_load(&a.calls) + atomic_load(&b.calls), 0);

    /* only one of two done: still poison when deliveries count; with
     * counted attempts the other handler has never run, so it runs now */
    ib_event ev2;
    fx_event(&ev2, 9, TYPE);
    assert_int_equal(ib_recorder_mark(f->inner, "c/p/a", ev2.id, NULL), IB_OK);
    dl = fx_run_one(f, &ev2, 3);
    if (ib_recorder_has_durable_attempts(f->inner)) {
        assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
        assert_int_equal(dl.counts.duplicates, 1);
        assert_int_equal(dl.counts.handled, 1);
        assert_int_equal(atomic_load(&b.calls), 1);
        fx_handler_destroy(&a);
        fx_handler_destroy(&b);
        return;
    }
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_string_equal(ib_dead_letter_reason_str(dl.dead_letter_reason), "max-deliver");
    assert_int_equal(dl.counts.duplicates, 1);
    assert_int_equal(atomic_load(&a.calls) + atomic_load(&b.calls), 0);
    fx_handler_destroy(&a);
    fx_handler_destroy(&b);
}

static void unhandled_acks(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 10, "nobody.listens");

    assert_int_equal(ib_dispatch_count_for(f->d, "nobody.listens"), 0);
    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_true(dl.counts.unhandled);
    assert_int_equal(dl.counts.handled, 0);
    assert_int_equal(atomic_load(&h.calls), 0);
    assert_int_equal(atomic_load(&f->calls->claim_batch), 0);
    fx_handler_destroy(&h);
}

static void busy_naks_without_running(fx *f)
{
    fx_handler h;
    ib_event ev;
    ib_dispatch_options o = fx_default_options();
    o.busy_delay_ms = 150;
    o.max_deliver = 3;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 11, TYPE);
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(f->inner, &cs, "c/p/h", ev.id, "elsewhere", 60000, NULL),
                     IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);

    /* a copy on a delivery past --max-deliver is busy, never poison. With
     * counted attempts it comes back after the busy delay doubled per
     * delivery (150 ms x 2^4), at most the holder's remaining lease; where
     * deliveries are the budget, after that lease (50 s left); +20% jitter */
    fx_clock_set(fx_clock_now() + 10000);
    ib_delivery dl = fx_run_one(f, &ev, 5);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    int64_t wait = ib_recorder_has_durable_attempts(f->inner) ? 2400 : 50000;
    assert_true(dl.nak_delay_ms >= wait && dl.nak_delay_ms <= wait + wait / 5);
    dl = fx_run_one(f, &ev, 30);
    assert_true(dl.nak_delay_ms >= 50000 && dl.nak_delay_ms <= 60000);
    assert_int_equal(dl.counts.busy, 1);
    assert_int_equal(atomic_load(&h.calls), 0);
    assert_false(fx_marked(f, "c/p/h", ev.id));
    /* the other owner's claim is untouched */
    assert_int_equal(ib_recorder_claim(f->inner, &cs, "c/p/h", ev.id, "third", 60000, NULL), IB_OK);
    assert_int_equal(cs, IB_CLAIM_BUSY);
    fx_handler_destroy(&h);
}

static void expired_lease_runs(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 12, TYPE);
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(f->inner, &cs, "c/p/h", ev.id, "crashed", 5000, NULL),
                     IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    fx_clock_set(fx_clock_now() + 6000);

    ib_delivery dl = fx_run_one(f, &ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.handled, 1);
    assert_int_equal(atomic_load(&h.calls), 1);
    assert_true(fx_marked(f, "c/p/h", ev.id));
    fx_handler_destroy(&h);
}

static void batch_duplicates_run_once(fx *f)
{
    fx_handler h;
    ib_event a, b;
    ib_delivery dl[4];
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&a, 13, TYPE);
    fx_event(&b, 14, TYPE);
    fx_delivery(&dl[0], &a, 1);
    fx_delivery(&dl[1], &a, 1);
    fx_delivery(&dl[2], &b, 1);
    fx_delivery(&dl[3], &a, 2);

    fx_run_ok(f, dl, 4);
    assert_int_equal(atomic_load(&h.calls), 2);
    for (int i = 0; i < 4; i++)
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl[0].counts.handled, 1);
    assert_int_equal(dl[1].counts.duplicates, 1);
    assert_int_equal(dl[2].counts.handled, 1);
    assert_int_equal(dl[3].counts.duplicates, 1);
    assert_int_equal(atomic_load(&f->calls->claim_batch), 1);
    assert_int_equal(atomic_load(&f->calls->mark_batch), 1);
    assert_true(fx_marked(f, "c/p/h", a.id));
    assert_true(fx_marked(f, "c/p/h", b.id));
    fx_handler_destroy(&h);
}

/* A later copy in the batch follows a failed first occurrence. */
static void batch_duplicates_follow_failure(fx *f)
{
    static const struct {
        ib_verdict verdict;
        ib_outcome outcome;
        const char *reason;
    } table[] = {
        {IB_HANDLER_RETRY, IB_OUTCOME_NAK, NULL},
        {IB_HANDLER_REJECT, IB_OUTCOME_DEAD_LETTER, "rejected"},
    };
    fx_handler h;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++) {
        ib_event ev;
        ib_delivery dl[2];
        int before = atomic_load(&h.calls);
        atomic_store(&h.verdict, table[t].verdict);
        fx_event(&ev, 15 + (unsigned)t, TYPE);
        fx_delivery(&dl[0], &ev, 1);
        fx_delivery(&dl[1], &ev, 3);
        fx_run_ok(f, dl, 2);
        assert_int_equal(atomic_load(&h.calls), before + 1);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(dl[i].outcome, table[t].outcome);
            if (table[t].reason != NULL)
                assert_string_equal(ib_dead_letter_reason_str(dl[i].dead_letter_reason),
                                    table[t].reason);
            else
                assert_true(dl[i].nak_delay_ms > 0);
        }
        assert_int_equal(dl[1].counts.coalesced, 1);
        assert_int_equal(dl[1].counts.duplicates, 0);
        assert_false(fx_marked(f, "c/p/h", ev.id));
    }
    fx_handler_destroy(&h);
}

/* The committer: with a window of 0 every handler's mark is committed as
 * it finishes, and each delivery is settled (acked by the host) right
 * after the commit holding its marks, before the next handler runs. */
typedef struct settle_seen {
    fx_handler *h;
    int order[4];
    int calls_at[4];
    int n;
    ib_delivery *base;
} settle_seen;

static void note_settled(void *ctx, ib_delivery *d)
{
    settle_seen *ss = ctx;
    assert_int_equal(d->outcome, IB_OUTCOME_ACK);
    assert_true(d->settled_early);
    ss->order[ss->n] = (int)(d - ss->base);
    ss->calls_at[ss->n++] = atomic_load(&ss->h->calls);
}

static void marks_commit_as_handlers_finish(fx *f)
{
    fx_handler h;
    ib_event ev[4];
    ib_delivery dl[4];
    settle_seen ss = {.h = &h, .base = dl};
    ib_dispatch_options o = fx_default_options();
    o.commit_interval_ms = -1; /* commit after every handler */
    o.on_settled = note_settled;
    o.observer_ctx = &ss;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    for (unsigned i = 0; i < 4; i++) {
        fx_event(&ev[i], 40 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    fx_run_ok(f, dl, 4);
    assert_int_equal(ss.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ss.order[i], i);
        assert_int_equal(ss.calls_at[i], i + 1); /* before the next handler ran */
        assert_int_equal(dl[i].counts.handled, 1);
    }
    assert_int_equal(atomic_load(&f->calls->mark_batch), 4);
    fx_handler_destroy(&h);
}

typedef struct health_seen {
    atomic_int failures, recoveries;
} health_seen;

static void count_health(void *ctx, bool healthy, const ib_error *e)
{
    health_seen *hs = ctx;
    if (healthy) {
        assert_null(e);
        atomic_fetch_add(&hs->recoveries, 1);
    } else {
        assert_int_equal(e->status, IB_ERR_RECORDER);
        atomic_fetch_add(&hs->failures, 1);
    }
}

static void *recover_later(void *arg)
{
    fx *f = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 300 * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&f->calls->fail_mark, false);
    return NULL;
}

/* A mark that fails is never given up by the process that ran the handler:
 * it is retried with back-off until the recorder works again, and the
 * handlers are not run a second time (they were, when a failed mark
 * released the claim and nak'ed). */
static void mark_failure_retried(fx *f)
{
    fx_handler h;
    ib_event ev[3];
    ib_delivery dl[3];
    ib_error err = {0};
    health_seen hs = {0};
    pthread_t th;
    ib_dispatch_options o = fx_default_options();
    o.on_recorder = count_health;
    o.observer_ctx = &hs;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    for (unsigned i = 0; i < 3; i++) {
        fx_event(&ev[i], 20 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    atomic_store(&f->calls->fail_mark, true);
    assert_int_equal(pthread_create(&th, NULL, recover_later, f), 0);

    assert_int_equal(ib_dispatch_run(f->d, dl, 3, NULL, &err), IB_OK);
    pthread_join(th, NULL);
    assert_int_equal(err.status, IB_ERR_RECORDER); /* detail for the caller's log */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
        assert_int_equal(dl[i].counts.handled, 1);
        assert_true(fx_marked(f, "c/p/h", ev[i].id));
    }
    assert_int_equal(atomic_load(&h.calls), 3);
    assert_true(atomic_load(&f->calls->mark_batch) >= 2);
    assert_true(atomic_load(&hs.failures) >= 1);
    assert_int_equal(atomic_load(&hs.recoveries), 1);
    fx_handler_destroy(&h);
}

static void claim_failure_naks(fx *f)
{
    fx_handler h;
    ib_event ev;
    ib_error err = {0};
    ib_delivery dl;
    ib_dispatch_options o = fx_default_options();
    o.max_deliver = 5;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 30, TYPE);

    atomic_store(&f->calls->fail_claim, true);
    fx_delivery(&dl, &ev, 1);
    assert_int_equal(ib_dispatch_run(f->d, &dl, 1, NULL, &err), IB_OK);
    assert_int_equal(err.status, IB_ERR_RECORDER);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_true(dl.nak_delay_ms > 0);
    assert_int_equal(dl.counts.recorder_failed, 1);
    assert_int_equal(atomic_load(&h.calls), 0);

    /* the poison rule's check failing NAKs as well: never a blind dead letter */
    atomic_store(&f->calls->fail_check, true);
    fx_delivery(&dl, &ev, 5);
    assert_int_equal(ib_dispatch_run(f->d, &dl, 1, NULL, &err), IB_OK);
    assert_int_equal(err.status, IB_ERR_RECORDER);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl.counts.recorder_failed, 1);
    assert_int_equal(atomic_load(&h.calls), 0);

    /* deliveries far past --max-deliver on which the recorder failed
     * spent nothing: once it works, the handler runs (with counted
     * attempts; memory falls back to the delivery count) */
    for (uint64_t dc = 6; dc <= 9; dc++) {
        fx_delivery(&dl, &ev, dc);
        assert_int_equal(ib_dispatch_run(f->d, &dl, 1, NULL, &err), IB_OK);
        assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    }
    atomic_store(&f->calls->fail_claim, false);
    atomic_store(&f->calls->fail_check, false);
    fx_delivery(&dl, &ev, 10);
    assert_int_equal(ib_dispatch_run(f->d, &dl, 1, NULL, &err), IB_OK);
    if (ib_recorder_has_durable_attempts(f->inner)) {
        assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
        assert_int_equal(dl.counts.handled, 1);
        assert_int_equal(atomic_load(&h.calls), 1);
    } else {
        assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
        assert_int_equal(atomic_load(&h.calls), 0);
    }
    fx_handler_destroy(&h);
}

/* ---- what a handler sees ---------------------------------------------- */

typedef struct probe {
    bool payload_non_null;
    size_t payload_len;
    bool subject_empty;
    size_t header_count;
    bool header_absent;
    const char *source;
} probe;

static ib_verdict probe_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                               const ib_raw_event *ev)
{
    probe *p = state;
    (void)bus;
    p->payload_non_null = payload != NULL && ib_raw_event_payload(ev, NULL) != NULL;
    p->payload_len = len;
    p->subject_empty = ib_raw_event_subject(ev) != NULL && ib_raw_event_subject(ev)[0] == '\0';
    p->header_count = ib_raw_event_header_count(ev);
    p->header_absent = ib_raw_event_header(ev, "trace") == NULL;
    p->source = ib_raw_event_source(ev);
    return IB_HANDLER_OK;
}

/* An empty event still gives handlers usable pointers: a payload pointer
 * they may pass to memcpy with length 0, "" for a missing subject. */
static void empty_event_fields_are_safe(void **state)
{
    (void)state;
    fx f;
    probe p = {0};
    ib_event ev;
    ib_delivery dl;
    const char *types[] = {TYPE, NULL};
    fx_open(&f, "memory");
    fx_dispatch(&f, NULL);
    ib_dispatch_handler hd = {
        .consumer = "c/p/probe", .event_types = types, .handle = probe_handle, .state = &p};
    assert_int_equal(ib_dispatch_add(f.d, &hd, NULL), IB_OK);
    fx_event(&ev, 50, TYPE);
    ev.payload = NULL;
    ev.payload_len = 0;
    ev.headers = NULL;
    ev.header_count = 0;
    fx_delivery(&dl, &ev, 1);
    dl.subject = NULL;

    fx_run_ok(&f, &dl, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_true(p.payload_non_null);
    assert_int_equal(p.payload_len, 0);
    assert_true(p.subject_empty);
    assert_int_equal(p.header_count, 0);
    assert_true(p.header_absent);
    assert_string_equal(p.source, "fixture");
    fx_close(&f);
}

static ib_verdict sleepy_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                                const ib_raw_event *ev)
{
    struct timespec ts = {0, 3 * 1000 * 1000};
    (void)state;
    (void)payload;
    (void)len;
    (void)bus;
    (void)ev;
    while (nanosleep(&ts, &ts) != 0)
        ;
    return IB_HANDLER_OK;
}

/* handle_seconds is the time spent in the delivery's own handlers: a lower
 * bound (the handler sleeps at least 3 ms each), not a speed assertion. */
static void handle_seconds_measured(void **state)
{
    (void)state;
    fx f;
    ib_event a, b;
    ib_delivery dl[3];
    const char *types[] = {TYPE, NULL};
    fx_open(&f, "memory");
    fx_dispatch(&f, NULL);
    ib_dispatch_handler h1 = {.consumer = "c/p/s1", .event_types = types, .handle = sleepy_handle};
    ib_dispatch_handler h2 = {.consumer = "c/p/s2", .event_types = types, .handle = sleepy_handle};
    assert_int_equal(ib_dispatch_add(f.d, &h1, NULL), IB_OK);
    assert_int_equal(ib_dispatch_add(f.d, &h2, NULL), IB_OK);
    fx_event(&a, 51, TYPE);
    fx_event(&b, 52, "nobody.listens");
    fx_delivery(&dl[0], &a, 1);
    fx_delivery(&dl[1], &a, 1); /* a copy: its handlers do not run */
    fx_delivery(&dl[2], &b, 1);

    fx_run_ok(&f, dl, 3);
    assert_true(dl[0].handle_seconds >= 0.006);
    assert_true(dl[1].handle_seconds == 0.0);
    assert_true(dl[2].handle_seconds == 0.0);
    assert_int_equal(dl[1].counts.duplicates, 2);
    fx_close(&f);
}

/* The observer hears every handler call that ran (and recorder failures),
 * and every handler skipped as a duplicate, with the handler's consumer
 * identity and registration index. */
typedef struct seen_results {
    int count[IB_RESULT_DUPLICATE + 1];
    int per_handler[2][IB_RESULT_DUPLICATE + 1];
    char last_consumer[IB_CONSUMER_MAX + 1];
} seen_results;

static void record_result(void *ctx, const ib_delivery *d, const char *consumer, size_t handler,
                          ib_handler_result result, double seconds)
{
    seen_results *s = ctx;
    assert_non_null(d->event);
    assert_true(seconds >= 0);
    assert_true(handler < 2);
    s->count[result]++;
    s->per_handler[handler][result]++;
    snprintf(s->last_consumer, sizeof(s->last_consumer), "%s", consumer);
}

static void observer_hears_each_call(fx *f)
{
    fx_handler ok, bad;
    ib_event ev[2];
    ib_delivery dl[2];
    seen_results seen;
    memset(&seen, 0, sizeof(seen));
    ib_dispatch_options o = fx_default_options();
    o.observer = record_result;
    o.observer_ctx = &seen;
    fx_handler_init(&ok, IB_HANDLER_OK);
    fx_handler_init(&bad, IB_HANDLER_RETRY);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/ok", TYPE, &ok);
    fx_add(f, "c/p/bad", TYPE, &bad);
    for (unsigned i = 0; i < 2; i++) {
        fx_event(&ev[i], 70 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    assert_int_equal(ib_dispatch_run(f->d, dl, 2, NULL, NULL), IB_OK);
    assert_int_equal(seen.count[IB_RESULT_HANDLED], 2);
    assert_int_equal(seen.count[IB_RESULT_RETRY], 2);
    assert_int_equal(seen.count[IB_RESULT_DUPLICATE], 0);
    assert_int_equal(seen.per_handler[0][IB_RESULT_HANDLED], 2); /* "ok", registered first */
    assert_int_equal(seen.per_handler[1][IB_RESULT_RETRY], 2);
    assert_string_equal(seen.last_consumer, "c/p/bad");
    assert_int_equal(ib_dispatch_handler_count(f->d), 2);
    assert_string_equal(ib_dispatch_handler_consumer(f->d, 1), "c/p/bad");
    assert_null(ib_dispatch_handler_consumer(f->d, 2));

    /* redelivery: "ok" is a duplicate now, "bad" rejects */
    atomic_store(&bad.verdict, IB_HANDLER_REJECT);
    memset(&seen, 0, sizeof(seen));
    fx_delivery(&dl[0], &ev[0], 2);
    assert_int_equal(ib_dispatch_run(f->d, dl, 1, NULL, NULL), IB_OK);
    assert_int_equal(seen.count[IB_RESULT_HANDLED], 0);
    assert_int_equal(seen.count[IB_RESULT_REJECT], 1);
    assert_int_equal(seen.per_handler[0][IB_RESULT_DUPLICATE], 1);
    assert_int_equal(dl[0].counts.duplicates, 1);

    /* two copies of a new id in one batch: the second is a duplicate of the
     * first for "ok" (reported), and coalesced for "bad" (not reported) */
    memset(&seen, 0, sizeof(seen));
    fx_event(&ev[1], 90, TYPE);
    fx_delivery(&dl[0], &ev[1], 1);
    fx_delivery(&dl[1], &ev[1], 1);
    assert_int_equal(ib_dispatch_run(f->d, dl, 2, NULL, NULL), IB_OK);
    assert_int_equal(seen.per_handler[0][IB_RESULT_HANDLED], 1);
    assert_int_equal(seen.per_handler[0][IB_RESULT_DUPLICATE], 1);
    assert_int_equal(seen.per_handler[1][IB_RESULT_REJECT], 1);
    assert_int_equal(seen.count[IB_RESULT_DUPLICATE], 1);
    assert_int_equal(dl[0].counts.duplicates + dl[1].counts.duplicates, 1);

    fx_handler_destroy(&ok);
    fx_handler_destroy(&bad);
}

/* ---- the table: every case against every recorder kind --------------- */

/* The recorder time of a run is measured apart from the handlers' time. */
static void recorder_time_measured(fx *f)
{
    fx_handler h;
    ib_event ev[8];
    ib_delivery dl[8];
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    assert_true(ib_dispatch_recorder_seconds(f->d) == 0);
    fx_add(f, "c/p/h", TYPE, &h);
    for (unsigned i = 0; i < 8; i++) {
        fx_event(&ev[i], 300 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    assert_int_equal(ib_dispatch_run(f->d, dl, 8, NULL, NULL), IB_OK);
    assert_true(ib_dispatch_recorder_seconds(f->d) > 0);
    /* a batch of nobody's type makes no recorder call */
    ib_event other;
    fx_event(&other, 400, "nobody.handles");
    fx_delivery(&dl[0], &other, 1);
    assert_int_equal(ib_dispatch_run(f->d, dl, 1, NULL, NULL), IB_OK);
    assert_true(ib_dispatch_recorder_seconds(f->d) == 0);
    fx_handler_destroy(&h);
}

BOTH_KINDS(success_marks)
BOTH_KINDS(retry_naks_with_backoff)
BOTH_KINDS(duplicate_dropped)
BOTH_KINDS(reject_dead_letters)
BOTH_KINDS(redelivery_runs_only_failed)
BOTH_KINDS(reject_still_marks_ok_handlers)
BOTH_KINDS(poison_not_done_dead_letters)
BOTH_KINDS(dead_letter_ends_attempts)
BOTH_KINDS(poison_done_acks)
BOTH_KINDS(marks_commit_as_handlers_finish)
BOTH_KINDS(unhandled_acks)
BOTH_KINDS(busy_naks_without_running)
BOTH_KINDS(expired_lease_runs)
BOTH_KINDS(batch_duplicates_run_once)
BOTH_KINDS(batch_duplicates_follow_failure)
BOTH_KINDS(mark_failure_retried)
BOTH_KINDS(claim_failure_naks)
BOTH_KINDS(observer_hears_each_call)
BOTH_KINDS(recorder_time_measured)

/* ---- the table itself -------------------------------------------------- */

static ib_status add_one(ib_dispatch *d, const char *consumer, const char *const *types,
                         fx_handler *h, ib_error *err)
{
    ib_dispatch_handler hd = {
        .consumer = consumer, .name = NULL, .event_types = types, .handle = fx_handle, .state = h};
    return ib_dispatch_add(d, &hd, err);
}

static void add_refuses_bad_handlers(void **state)
{
    (void)state;
    fx f;
    fx_handler h;
    ib_error err = {0};
    static const char *const types[] = {"a.b", "c.d", "a.b", NULL};
    static const char *const none[] = {NULL};
    static const char *const empty[] = {"", NULL};
    fx_open(&f, "memory");
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(&f, NULL);

    assert_int_equal(add_one(f.d, "orders/p/h", types, &h, &err), IB_OK);
    /* a type listed twice counts once */
    assert_int_equal(ib_dispatch_count_for(f.d, "a.b"), 1);
    assert_int_equal(ib_dispatch_count_for(f.d, "c.d"), 1);
    assert_int_equal(ib_dispatch_count_for(f.d, "x.y"), 0);
    assert_int_equal(ib_dispatch_count_for(f.d, NULL), 0);

    assert_int_equal(add_one(f.d, "orders/p/h", types, &h, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "orders/p/h"));
    assert_int_equal(add_one(f.d, "other", none, &h, &err), IB_ERR_CONFIG);
    assert_int_equal(add_one(f.d, "other", NULL, &h, &err), IB_ERR_CONFIG);
    assert_int_equal(add_one(f.d, "other", empty, &h, &err), IB_ERR_CONFIG);
    assert_int_equal(add_one(f.d, "", types, &h, &err), IB_ERR_CONFIG);
    ib_dispatch_handler nofn = {.consumer = "other", .event_types = types};
    assert_int_equal(ib_dispatch_add(f.d, &nofn, &err), IB_ERR_CONFIG);
    /* refusals left the table as it was */
    assert_int_equal(ib_dispatch_count_for(f.d, "a.b"), 1);

    assert_int_equal(add_one(f.d, "other", types, &h, &err), IB_OK);
    assert_int_equal(ib_dispatch_count_for(f.d, "a.b"), 2);

    /* strings are copied: the caller's buffers may go away */
    char consumer[32], type[32];
    const char *tlist[] = {type, NULL};
    strcpy(consumer, "copied/p/h");
    strcpy(type, "copied.type");
    assert_int_equal(add_one(f.d, consumer, tlist, &h, &err), IB_OK);
    memset(consumer, 'x', sizeof(consumer) - 1);
    memset(type, 'x', sizeof(type) - 1);
    assert_int_equal(ib_dispatch_count_for(f.d, "copied.type"), 1);
    ib_event ev;
    fx_event(&ev, 40, "copied.type");
    ib_delivery dl;
    fx_delivery(&dl, &ev, 1);
    assert_int_equal(ib_dispatch_run(f.d, &dl, 1, NULL, &err), IB_OK);
    assert_string_equal(h.consumer, "copied/p/h");
    fx_handler_destroy(&h);
    fx_close(&f);
}

/* Many types: the map grows and every type still finds its handlers. */
static void many_types_lookup(void **state)
{
    (void)state;
    fx f;
    fx_handler h;
    char names[300][24];
    fx_open(&f, "memory");
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(&f, NULL);
    for (int i = 0; i < 300; i++) {
        char consumer[32];
        const char *types[] = {names[i], NULL};
        snprintf(names[i], sizeof(names[i]), "type.%d", i);
        snprintf(consumer, sizeof(consumer), "c/%d", i);
        assert_int_equal(add_one(f.d, consumer, types, &h, NULL), IB_OK);
    }
    for (int i = 0; i < 300; i++)
        assert_int_equal(ib_dispatch_count_for(f.d, names[i]), 1);
    assert_int_equal(ib_dispatch_count_for(f.d, "type.300"), 0);
    fx_handler_destroy(&h);
    fx_close(&f);
}

/* One handler lists many types at once, new ones and known ones mixed,
 * some twice: the new ones are filed in one registration (growing the map
 * on the way), a repeat counts once and every type finds its handlers. */
static void many_types_in_one_handler(void **state)
{
    (void)state;
    fx f;
    fx_handler first, second;
    char names[250][24];
    const char *list1[101], *list2[302];
    size_t n2 = 0;
    fx_open(&f, "memory");
    fx_handler_init(&first, IB_HANDLER_OK);
    fx_handler_init(&second, IB_HANDLER_OK);
    fx_dispatch(&f, NULL);
    for (int i = 0; i < 250; i++)
        snprintf(names[i], sizeof(names[i]), "type.%d", i);
    for (int i = 0; i < 100; i++)
        list1[i] = names[i];
    list1[100] = NULL;
    /* type.50..249, each of the first hundred listed twice */
    for (int i = 50; i < 250; i++) {
        list2[n2++] = names[i];
        if (i < 150)
            list2[n2++] = names[i];
    }
    list2[n2] = NULL;
    assert_true(n2 < sizeof(list2) / sizeof(list2[0]));
    assert_int_equal(add_one(f.d, "c/first", list1, &first, NULL), IB_OK);
    assert_int_equal(add_one(f.d, "c/second", list2, &second, NULL), IB_OK);
    for (int i = 0; i < 250; i++)
        assert_int_equal(ib_dispatch_count_for(f.d, names[i]), i >= 50 && i < 100 ? 2 : 1);

    ib_event ev[3];
    ib_delivery dl[3];
    fx_event(&ev[0], 60, "type.10");
    fx_event(&ev[1], 61, "type.70");
    fx_event(&ev[2], 62, "type.249");
    for (int i = 0; i < 3; i++)
        fx_delivery(&dl[i], &ev[i], 1);
    assert_int_equal(ib_dispatch_run(f.d, dl, 3, NULL, NULL), IB_OK);
    assert_int_equal(atomic_load(&first.calls), 2);
    assert_int_equal(atomic_load(&second.calls), 2);
    assert_int_equal(dl[0].counts.handled, 1);
    assert_int_equal(dl[1].counts.handled, 2);
    assert_int_equal(dl[2].counts.handled, 1);
    fx_handler_destroy(&first);
    fx_handler_destroy(&second);
    fx_close(&f);
}

static void run_refuses_misuse(void **state)
{
    (void)state;
    fx f;
    fx_handler h;
    ib_event good, bad;
    ib_delivery dl[2];
    ib_error err = {0};
    fx_open(&f, "memory");
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(&f, NULL);
    fx_add(&f, "c/p/h", TYPE, &h);
    fx_event(&good, 41, TYPE);
    fx_event(&bad, 42, TYPE);
    memcpy(bad.id, "0123456789ABCDEF0123456789ABCDEF", IB_ID_LEN); /* upper case */
    fx_delivery(&dl[0], &good, 1);
    fx_delivery(&dl[1], &bad, 1);

    assert_int_equal(ib_dispatch_run(f.d, dl, 2, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(atomic_load(&h.calls), 0); /* nothing ran, not even the good one */
    dl[1].event = NULL;
    assert_int_equal(ib_dispatch_run(f.d, dl, 2, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_dispatch_run(NULL, dl, 1, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_dispatch_run(f.d, NULL, 1, NULL, &err), IB_ERR_INVALID_ARG);
    /* an empty batch is fine */
    assert_int_equal(ib_dispatch_run(f.d, NULL, 0, NULL, &err), IB_OK);
    assert_int_equal(atomic_load(&h.calls), 0);
    fx_handler_destroy(&h);
    fx_close(&f);
}

static void create_checks_options(void **state)
{
    (void)state;
    fx f;
    ib_dispatch *d = NULL;
    ib_error err = {0};
    ib_dispatch_options o = fx_default_options();
    fx_open(&f, "memory");

    assert_int_equal(ib_dispatch_create(&d, NULL, &o, &err), IB_ERR_INVALID_ARG);
    assert_null(d);
    o.concurrency = IB_DISPATCH_MAX_CONCURRENCY + 1;
    assert_int_equal(ib_dispatch_create(&d, f.rec, &o, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "concurrency"));
    assert_null(d);
    /* NULL options: defaults, with a random owner that claims work */
    assert_int_equal(ib_dispatch_create(&d, f.rec, NULL, &err), IB_OK);
    f.d = d;
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_RETRY);
    fx_add(&f, "c/p/h", TYPE, &h);
    fx_event(&ev, 43, TYPE);
    ib_delivery dl;
    fx_delivery(&dl, &ev, 1);
    assert_int_equal(ib_dispatch_run(d, &dl, 1, NULL, &err), IB_OK);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_true(dl.nak_delay_ms >= IB_DISPATCH_DEFAULT_NAK_BASE_MS * 8 / 10);
    assert_true(dl.nak_delay_ms <= IB_DISPATCH_DEFAULT_NAK_BASE_MS * 12 / 10);
    ib_dispatch_free(NULL);
    fx_handler_destroy(&h);
    fx_close(&f);
}

/* A delivery's trace reaches its handlers as the raw event's traceparent
 * and tracestate and as the thread's current trace, on the run thread and
 * on workers; a delivery without one shows none; after the run the
 * caller's current trace is what it was. */
static void trace_reaches_handlers(fx *f)
{
    fx_handler h;
    ib_event ev[2];
    ib_trace t;
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_true(ib_trace_parse(&t, tp, strlen(tp)));
    assert_true(ib_trace_state_parse(&t, "rojo=1", 6));
    ib_trace_child(&t, &t);
    for (unsigned threads = 1; threads <= 4; threads += 3) {
        ib_dispatch_options o = fx_default_options();
        o.concurrency = threads;
        fx_handler_init(&h, IB_HANDLER_OK);
        fx_dispatch(f, &o);
        fx_add(f, "orders/audit/audit", TYPE, &h);
        fx_event(&ev[0], 10 * threads, TYPE);
        fx_event(&ev[1], 10 * threads + 1, TYPE);
        ib_delivery dl;
        fx_delivery(&dl, &ev[0], 1);
        dl.trace = &t;
        fx_run_ok(f, &dl, 1);
        assert_string_equal(h.traceparent, t.traceparent);
        assert_string_equal(h.tracestate, "rojo=1");
        assert_true(h.current_is_event);
        assert_null(ib_trace_current());
        fx_delivery(&dl, &ev[1], 1);
        fx_run_ok(f, &dl, 1);
        assert_string_equal(h.traceparent, "");
        assert_string_equal(h.tracestate, "");
        assert_true(h.current_is_event);
        ib_dispatch_free(f->d);
        f->d = NULL;
        fx_handler_destroy(&h);
    }
}
BOTH_KINDS(trace_reaches_handlers)

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(success_marks_memory),
    cmocka_unit_test(success_marks_sqlite),
    cmocka_unit_test(retry_naks_with_backoff_memory),
    cmocka_unit_test(retry_naks_with_backoff_sqlite),
    cmocka_unit_test(duplicate_dropped_memory),
    cmocka_unit_test(duplicate_dropped_sqlite),
    cmocka_unit_test(reject_dead_letters_memory),
    cmocka_unit_test(reject_dead_letters_sqlite),
    cmocka_unit_test(redelivery_runs_only_failed_memory),
    cmocka_unit_test(redelivery_runs_only_failed_sqlite),
    cmocka_unit_test(reject_still_marks_ok_handlers_memory),
    cmocka_unit_test(reject_still_marks_ok_handlers_sqlite),
    cmocka_unit_test(poison_not_done_dead_letters_memory),
    cmocka_unit_test(poison_not_done_dead_letters_sqlite),
    cmocka_unit_test(dead_letter_ends_attempts_memory),
    cmocka_unit_test(dead_letter_ends_attempts_sqlite),
    cmocka_unit_test(poison_done_acks_memory),
    cmocka_unit_test(poison_done_acks_sqlite),
    cmocka_unit_test(marks_commit_as_handlers_finish_memory),
    cmocka_unit_test(marks_commit_as_handlers_finish_sqlite),
    cmocka_unit_test(unhandled_acks_memory),
    cmocka_unit_test(unhandled_acks_sqlite),
    cmocka_unit_test(busy_naks_without_running_memory),
    cmocka_unit_test(busy_naks_without_running_sqlite),
    cmocka_unit_test(expired_lease_runs_memory),
    cmocka_unit_test(expired_lease_runs_sqlite),
    cmocka_unit_test(batch_duplicates_run_once_memory),
    cmocka_unit_test(batch_duplicates_run_once_sqlite),
    cmocka_unit_test(batch_duplicates_follow_failure_memory),
    cmocka_unit_test(batch_duplicates_follow_failure_sqlite),
    cmocka_unit_test(mark_failure_retried_memory),
    cmocka_unit_test(mark_failure_retried_sqlite),
    cmocka_unit_test(claim_failure_naks_memory),
    cmocka_unit_test(claim_failure_naks_sqlite),
    cmocka_unit_test(observer_hears_each_call_memory),
    cmocka_unit_test(observer_hears_each_call_sqlite),
    cmocka_unit_test(recorder_time_measured_memory),
    cmocka_unit_test(recorder_time_measured_sqlite),
    cmocka_unit_test(trace_reaches_handlers_memory),
    cmocka_unit_test(trace_reaches_handlers_sqlite),
    cmocka_unit_test(add_refuses_bad_handlers),
    cmocka_unit_test(many_types_lookup),
    cmocka_unit_test(many_types_in_one_handler),
    cmocka_unit_test(run_refuses_misuse),
    cmocka_unit_test(create_checks_options),
    cmocka_unit_test(empty_event_fields_are_safe),
    cmocka_unit_test(handle_seconds_measured),
};

IB_TEST_MAIN(tests)
