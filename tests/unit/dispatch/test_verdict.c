/* SPDX-License-Identifier: Apache-2.0 */
/* What a handler adds to its verdict (ABI 1.3: verdict_detail through
 * ib_dispatch_note_verdict) and handlers on IB_EVENT_TYPE_ANY, against both
 * recorder kinds. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "ib_test.h"

#define TYPE "order.created"

/* What noting_handle() notes before it answers. */
static struct {
    ib_verdict verdict;
    int64_t retry_after_ms;
    const char *reason;
    bool noted; /* ib_dispatch_note_verdict's answer */
    void *ctx;  /* ib_dispatch_current's answers */
    size_t handler;
} plan;

static ib_verdict noting_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                                const ib_raw_event *ev)
{
    (void)state, (void)payload, (void)len, (void)bus, (void)ev;
    plan.noted = ib_dispatch_note_verdict(plan.retry_after_ms, plan.reason);
    assert_true(ib_dispatch_current(&plan.ctx, &plan.handler));
    return plan.verdict;
}

static void add_noting(fx *f, const char *consumer)
{
    static const char *const types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {.consumer = consumer, .event_types = types, .handle = noting_handle};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
}

static ib_delivery run_planned(fx *f, ib_verdict v, int64_t retry_after_ms, const char *reason)
{
    ib_event ev;
    plan.verdict = v;
    plan.retry_after_ms = retry_after_ms;
    plan.reason = reason;
    plan.noted = false;
    fx_event(&ev, 7, TYPE);
    return fx_run_one(f, &ev, 1);
}

static void retry_after_sets_the_delay(fx *f)
{
    ib_dispatch_options o = fx_default_options();
    o.nak_base_delay_ms = 100;
    o.nak_max_delay_ms = 5000;
    o.observer_ctx = &o;
    fx_dispatch(f, &o);
    add_noting(f, "c/http/http");

    ib_delivery dl = run_planned(f, IB_HANDLER_RETRY, 2500, NULL);
    assert_true(plan.noted);
    assert_ptr_equal(plan.ctx, &o);
    assert_int_equal(plan.handler, 0);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl.nak_delay_ms, 2500); /* no jitter: the server asked for it */
    /* within the host's bounds */
    assert_int_equal(run_planned(f, IB_HANDLER_RETRY, 86400000, NULL).nak_delay_ms, 5000);
    assert_int_equal(run_planned(f, IB_HANDLER_RETRY, 0, NULL).nak_delay_ms, 1);
    /* a negative delay keeps the back-off */
    dl = run_planned(f, IB_HANDLER_RETRY, -1, NULL);
    assert_true(dl.nak_delay_ms >= 80 && dl.nak_delay_ms <= 121);
    /* outside a handler call nothing is noted */
    assert_false(ib_dispatch_note_verdict(1000, "x"));
    void *ctx;
    size_t h;
    assert_false(ib_dispatch_current(&ctx, &h));
}
BOTH_KINDS(retry_after_sets_the_delay)

static void reject_reason_reaches_the_delivery(fx *f)
{
    fx_dispatch(f, NULL);
    add_noting(f, "c/http/http");
    ib_delivery dl = run_planned(f, IB_HANDLER_REJECT, -1, "HTTP 422: missing\r\namount");
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_int_equal(dl.dead_letter_reason, IB_DLQ_REJECTED);
    assert_non_null(dl.reject_detail);
    assert_string_equal(dl.reject_detail, "HTTP 422: missing  amount");

    char long_reason[600];
    memset(long_reason, 'r', sizeof(long_reason) - 1);
    long_reason[sizeof(long_reason) - 1] = '\0';
    dl = run_planned(f, IB_HANDLER_REJECT, -1, long_reason);
    assert_int_equal(strlen(dl.reject_detail), IB_VERDICT_REASON_MAX);
    /* a retry's reason is not a rejection's */
    dl = run_planned(f, IB_HANDLER_RETRY, -1, "busy");
    assert_null(dl.reject_detail);
}
BOTH_KINDS(reject_reason_reaches_the_delivery)

static void any_type_receives_every_event(fx *f)
{
    static const char *const any[] = {IB_EVENT_TYPE_ANY, NULL};
    fx_handler first, all, last;
    ib_event ev;
    fx_handler_init(&first, IB_HANDLER_OK);
    fx_handler_init(&all, IB_HANDLER_OK);
    fx_handler_init(&last, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/a/first", TYPE, &first);
    ib_dispatch_handler hd = {
        .consumer = "c/http/http", .event_types = any, .handle = fx_handle, .state = &all};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    fx_add(f, "c/b/last", TYPE, &last);

    assert_int_equal(ib_dispatch_count_for(f->d, TYPE), 3);
    assert_int_equal(ib_dispatch_count_for(f->d, "other.type"), 1);
    fx_event(&ev, 11, TYPE);
    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.counts.handled, 3);
    fx_event(&ev, 12, "other.type");
    dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_false(dl.counts.unhandled);
    assert_int_equal(dl.counts.handled, 1);
    assert_int_equal(atomic_load(&all.calls), 2);
    assert_int_equal(atomic_load(&first.calls), 1);
    assert_int_equal(atomic_load(&last.calls), 1);
    assert_true(fx_marked(f, "c/http/http", ev.id));
    fx_handler_destroy(&first);
    fx_handler_destroy(&all);
    fx_handler_destroy(&last);
}
BOTH_KINDS(any_type_receives_every_event)

/* The handler of the order test: RETRY for the event whose id is
 * `failing`, OK otherwise; it notes the ids it ran, in order. */
static struct {
    char failing[IB_ID_BUF_SIZE];
    char ran[8][IB_ID_BUF_SIZE];
    int nran;
} order;

static ib_verdict ordered_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                                 const ib_raw_event *ev)
{
    (void)state, (void)payload, (void)len, (void)bus;
    snprintf(order.ran[order.nran++], IB_ID_BUF_SIZE, "%s", ev->id);
    return strcmp(ev->id, order.failing) == 0 ? IB_HANDLER_RETRY : IB_HANDLER_OK;
}

/* Deliveries with an order key: after the first of key A says RETRY, the
 * later one of key A is not run (nak'ed, attempts untouched, waiting),
 * while key B and deliveries without a key go on. */
static void a_retry_holds_back_its_keys_later_deliveries(fx *f)
{
    static const char *const types[] = {TYPE, NULL};
    ib_event ev[5];
    ib_delivery dl[5];
    const char *keys[5] = {"A", "B", "A", NULL, "B"};
    fx_dispatch(f, NULL);
    ib_dispatch_handler hd = {.consumer = "c/o/o", .event_types = types, .handle = ordered_handle};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    memset(&order, 0, sizeof(order));
    for (unsigned i = 0; i < 5; i++) {
        fx_event(&ev[i], 40 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
        dl[i].order_key = keys[i];
    }
    snprintf(order.failing, sizeof(order.failing), "%s", ev[0].id);
    fx_run_ok(f, dl, 5);
    assert_int_equal(dl[0].outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl[0].counts.retried, 1);
    assert_int_equal(dl[2].outcome, IB_OUTCOME_NAK); /* A's second waits for A's first */
    assert_int_equal(dl[2].counts.waiting, 1);
    assert_int_equal(dl[2].counts.retried, 0);
    assert_true(dl[2].nak_delay_ms > 0);
    assert_false(fx_marked(f, "c/o/o", ev[2].id));
    assert_int_equal(dl[1].outcome, IB_OUTCOME_ACK); /* B */
    assert_int_equal(dl[3].outcome, IB_OUTCOME_ACK); /* no key */
    assert_int_equal(dl[4].outcome, IB_OUTCOME_ACK); /* B again */
    assert_int_equal(order.nran, 4);                 /* every call but A's second */
    for (int i = 0; i < order.nran; i++)
        assert_string_not_equal(order.ran[i], ev[2].id);

    /* once A's first succeeds, A's second runs after it */
    order.failing[0] = '\0';
    order.nran = 0;
    fx_delivery(&dl[0], &ev[0], 2);
    fx_delivery(&dl[1], &ev[2], 2);
    dl[0].order_key = dl[1].order_key = "A";
    fx_run_ok(f, dl, 2);
    assert_int_equal(dl[0].outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl[1].outcome, IB_OUTCOME_ACK);
    assert_int_equal(order.nran, 2);
    assert_string_equal(order.ran[0], ev[0].id);
    assert_string_equal(order.ran[1], ev[2].id);
}
BOTH_KINDS(a_retry_holds_back_its_keys_later_deliveries)

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(retry_after_sets_the_delay_memory),
    cmocka_unit_test(retry_after_sets_the_delay_sqlite),
    cmocka_unit_test(reject_reason_reaches_the_delivery_memory),
    cmocka_unit_test(reject_reason_reaches_the_delivery_sqlite),
    cmocka_unit_test(any_type_receives_every_event_memory),
    cmocka_unit_test(any_type_receives_every_event_sqlite),
    cmocka_unit_test(a_retry_holds_back_its_keys_later_deliveries_memory),
    cmocka_unit_test(a_retry_holds_back_its_keys_later_deliveries_sqlite),
};

IB_TEST_MAIN(tests)
