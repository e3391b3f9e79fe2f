/* SPDX-License-Identifier: Apache-2.0 */
/* Payload fingerprints and transactional handlers in ib_dispatch_run(),
 * against the real recorders (through the counting wrapper). Conflicts on
 * both kinds that store fingerprints; transactions on sqlite: only, whose
 * file holds the handler's writes beside the markers. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "ib_test.h"

#define TYPE "order.created"

/* `ev` with another payload: the same id, other content. */
static ib_event other_content(const ib_event *ev)
{
    static const uint8_t other[] = "other-bytes";
    ib_event o = *ev;
    o.payload = other;
    o.payload_len = sizeof(other) - 1;
    return o;
}

typedef struct conflict_seen {
    int conflicts;
    char consumer[64];
} conflict_seen;

static void count_conflicts(void *ctx, const ib_delivery *d, const char *consumer, size_t handler,
                            ib_handler_result result, double seconds)
{
    conflict_seen *seen = ctx;
    (void)d;
    (void)handler;
    (void)seconds;
    if (result == IB_RESULT_CONFLICT) {
        seen->conflicts++;
        snprintf(seen->consumer, sizeof(seen->consumer), "%s", consumer);
    }
}

/* ---- fingerprints ------------------------------------------------------- */

/* A marked id that comes back with other content is dead-lettered
 * "conflict" without running the handler; the same content is still a
 * duplicate. */
static void marked_id_with_other_content_conflicts(fx *f)
{
    fx_handler h;
    ib_event ev;
    conflict_seen seen = {0};
    ib_dispatch_options o = fx_default_options();
    o.observer = count_conflicts;
    o.observer_ctx = &seen;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 1, TYPE);
    ib_event reused = other_content(&ev);

    assert_int_equal(fx_run_one(f, &ev, 1).outcome, IB_OUTCOME_ACK);
    ib_delivery dl = fx_run_one(f, &reused, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_int_equal(dl.dead_letter_reason, IB_DLQ_CONFLICT);
    assert_int_equal(dl.counts.conflicts, 1);
    assert_int_equal(dl.counts.duplicates, 0);
    assert_int_equal(seen.conflicts, 1);
    assert_string_equal(seen.consumer, "c/p/h");
    dl = fx_run_one(f, &ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.duplicates, 1);
    assert_int_equal(dl.counts.conflicts, 0);
    assert_int_equal(atomic_load(&h.calls), 1);
    fx_handler_destroy(&h);
}
BOTH_KINDS(marked_id_with_other_content_conflicts)

/* drop and log ack a conflict like a duplicate; the observer still hears
 * it, so the host can count and log it. */
static void conflict_policy_drop_acks(fx *f)
{
    fx_handler h;
    ib_event ev;
    conflict_seen seen = {0};
    ib_dispatch_options o = fx_default_options();
    o.on_conflict = IB_CONFLICT_DROP;
    o.observer = count_conflicts;
    o.observer_ctx = &seen;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 2, TYPE);
    ib_event reused = other_content(&ev);

    fx_run_one(f, &ev, 1);
    ib_delivery dl = fx_run_one(f, &reused, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.conflicts, 1);
    assert_int_equal(seen.conflicts, 1);
    assert_int_equal(atomic_load(&h.calls), 1);
    fx_handler_destroy(&h);
}
BOTH_KINDS(conflict_policy_drop_acks)

/* Two copies of one id with different content in one batch: the first
 * runs, the second conflicts (it does not follow the first). */
static void batch_copy_with_other_content_conflicts(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 3, TYPE);
    ib_event reused = other_content(&ev);

    ib_delivery dl[3];
    fx_delivery(&dl[0], &ev, 1);
    fx_delivery(&dl[1], &reused, 1);
    fx_delivery(&dl[2], &ev, 1);
    fx_run_ok(f, dl, 3);
    assert_int_equal(dl[0].outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl[0].counts.handled, 1);
    assert_int_equal(dl[1].outcome, IB_OUTCOME_DEAD_LETTER);
    assert_int_equal(dl[1].dead_letter_reason, IB_DLQ_CONFLICT);
    assert_int_equal(dl[2].outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl[2].counts.duplicates, 1);
    assert_int_equal(atomic_load(&h.calls), 1);
    fx_handler_destroy(&h);
}
BOTH_KINDS(batch_copy_with_other_content_conflicts)

/* A delivery that conflicts for one handler runs none: the other handler,
 * which had not succeeded yet, is not run on content its id never stood
 * for, and its claim is released. */
static void conflict_runs_no_handler_of_the_delivery(fx *f)
{
    fx_handler a, b;
    ib_event ev;
    fx_handler_init(&a, IB_HANDLER_OK);
    fx_handler_init(&b, IB_HANDLER_RETRY);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/a", TYPE, &a);
    fx_add(f, "c/p/b", TYPE, &b);
    fx_event(&ev, 4, TYPE);
    ib_event reused = other_content(&ev);

    assert_int_equal(fx_run_one(f, &ev, 1).outcome, IB_OUTCOME_NAK);
    atomic_store(&b.verdict, IB_HANDLER_OK);
    ib_delivery dl = fx_run_one(f, &reused, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_DEAD_LETTER);
    assert_int_equal(dl.dead_letter_reason, IB_DLQ_CONFLICT);
    assert_int_equal(dl.counts.conflicts, 2);
    assert_int_equal(atomic_load(&a.calls), 1);
    assert_int_equal(atomic_load(&b.calls), 1);
    assert_false(fx_marked(f, "c/p/b", ev.id));
    /* b's claim was released: the right content runs it at once */
    dl = fx_run_one(f, &ev, 3);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(atomic_load(&b.calls), 2);
    fx_handler_destroy(&a);
    fx_handler_destroy(&b);
}
BOTH_KINDS(conflict_runs_no_handler_of_the_delivery)

/* A marker written without a fingerprint (an older file, or the plain
 * mark call) matches any content. */
static void marker_without_fingerprint_matches(fx *f)
{
    fx_handler h;
    ib_event ev;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, NULL);
    fx_add(f, "c/p/h", TYPE, &h);
    fx_event(&ev, 5, TYPE);
    assert_int_equal(ib_recorder_mark(f->inner, "c/p/h", ev.id, NULL), IB_OK);

    ib_delivery dl = fx_run_one(f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl.counts.duplicates, 1);
    assert_int_equal(dl.counts.conflicts, 0);
    assert_int_equal(atomic_load(&h.calls), 0);
    fx_handler_destroy(&h);
}
BOTH_KINDS(marker_without_fingerprint_matches)

/* ---- transactional handlers --------------------------------------------- */

/* The bus a transactional handler gets in these tests: the transaction
 * itself, so the handler can reach its connection. */
static ib_bus_proxy *txn_as_bus(void *ctx, ib_bus_proxy *bus, ib__txn *txn)
{
    (void)ctx;
    (void)bus;
    return (ib_bus_proxy *)txn;
}

/* A transactional handler: adds a row for the event to its own table and
 * answers the verdict the payload's first byte asks for ('R' RETRY, 'X'
 * REJECT, else OK). Counts its calls. */
static atomic_int txn_calls;

static ib_verdict txn_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                             const ib_raw_event *ev)
{
    sqlite3 *db = ib__txn_db((ib__txn *)bus);
    (void)state;
    atomic_fetch_add(&txn_calls, 1);
    char sql[160];
    snprintf(sql, sizeof(sql), "INSERT INTO effects (id) VALUES ('%s')", ib_raw_event_id(ev));
    if (sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS effects (id TEXT)", NULL, NULL, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return IB_HANDLER_RETRY;
    if (len > 0 && payload[0] == 'R')
        return IB_HANDLER_RETRY;
    if (len > 0 && payload[0] == 'X')
        return IB_HANDLER_REJECT;
    return IB_HANDLER_OK;
}

static void add_transactional(fx *f, const char *consumer)
{
    const char *types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = consumer, .event_types = types, .handle = txn_handle, .transactional = true};
    ib_error err = {0};
    ib_status st = ib_dispatch_add(f->d, &hd, &err);
    if (st != IB_OK)
        print_error("ib_dispatch_add: %s\n", err.msg);
    assert_int_equal(st, IB_OK);
}

/* Rows the handler left for `id` in the marker file. */
static int effects_of(fx *f, const char *id)
{
    sqlite3 *db = NULL;
    char path[PATH_MAX + 32], sql[160];
    int count = 0;
    snprintf(path, sizeof(path), "%s/markers.db", f->dir);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM effects WHERE id = '%s'", id);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        count = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return count;
}

static ib_event with_payload(unsigned n, const char *payload)
{
    ib_event ev;
    fx_event(&ev, n, TYPE);
    ev.payload = (const uint8_t *)payload;
    ev.payload_len = strlen(payload);
    return ev;
}

static void transactional_refused_without_transactions(void **state)
{
    fx f;
    (void)state;
    fx_open(&f, "memory");
    ib_dispatch_options o = fx_default_options();
    o.transactional_bus = txn_as_bus;
    fx_dispatch(&f, &o);
    const char *types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = "c/p/t", .event_types = types, .handle = txn_handle, .transactional = true};
    ib_error err = {0};
    assert_int_equal(ib_dispatch_add(f.d, &hd, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "sqlite:"));
    assert_non_null(strstr(err.msg, "c/p/t"));
    fx_close(&f);
}

/* OK keeps the handler's row and its marker together; RETRY and REJECT
 * keep neither, and their claims are released. */
static void transactional_writes_commit_with_marker(void **state)
{
    fx f;
    (void)state;
    fx_open(&f, "sqlite");
    ib_dispatch_options o = fx_default_options();
    o.transactional_bus = txn_as_bus;
    o.commit_interval_ms = -1; /* one transaction per handler */
    fx_dispatch(&f, &o);
    add_transactional(&f, "c/p/t");
    ib_event ok = with_payload(10, "ok"), retry = with_payload(11, "R"),
             reject = with_payload(12, "X");
    atomic_store(&txn_calls, 0);

    ib_delivery dl[3];
    fx_delivery(&dl[0], &ok, 1);
    fx_delivery(&dl[1], &retry, 1);
    fx_delivery(&dl[2], &reject, 1);
    fx_run_ok(&f, dl, 3);
    assert_int_equal(dl[0].outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl[0].counts.handled, 1);
    assert_int_equal(dl[1].outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl[2].outcome, IB_OUTCOME_DEAD_LETTER);
    assert_int_equal(effects_of(&f, ok.id), 1);
    assert_int_equal(effects_of(&f, retry.id), 0);
    assert_int_equal(effects_of(&f, reject.id), 0);
    assert_true(fx_marked(&f, "c/p/t", ok.id));
    assert_false(fx_marked(&f, "c/p/t", retry.id));
    assert_int_equal(atomic_load(&f.calls->transact), 3);

    /* a redelivery of the done event does not run it again */
    ib_delivery again = fx_run_one(&f, &ok, 2);
    assert_int_equal(again.outcome, IB_OUTCOME_ACK);
    assert_int_equal(again.counts.duplicates, 1);
    assert_int_equal(atomic_load(&txn_calls), 3);
    assert_int_equal(effects_of(&f, ok.id), 1);
    fx_close(&f);
}

/* Within the commit window the transactional handlers of a batch share
 * one transaction, and a plain handler on the same type runs too. */
static void transactional_handlers_share_a_transaction(void **state)
{
    fx f;
    fx_handler plain;
    (void)state;
    fx_open(&f, "sqlite");
    ib_dispatch_options o = fx_default_options(); /* a long commit window */
    o.transactional_bus = txn_as_bus;
    fx_dispatch(&f, &o);
    fx_handler_init(&plain, IB_HANDLER_OK);
    add_transactional(&f, "c/p/t");
    fx_add(&f, "c/p/plain", TYPE, &plain);
    ib_event ev[4];
    ib_delivery dl[4];
    for (unsigned i = 0; i < 4; i++) {
        ev[i] = with_payload(20 + i, "ok");
        fx_delivery(&dl[i], &ev[i], 1);
    }
    fx_run_ok(&f, dl, 4);
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
        assert_int_equal(dl[i].counts.handled, 2);
        assert_int_equal(effects_of(&f, ev[i].id), 1);
        assert_true(fx_marked(&f, "c/p/t", ev[i].id));
        assert_true(fx_marked(&f, "c/p/plain", ev[i].id));
    }
    assert_int_equal(atomic_load(&f.calls->transact), 1);
    assert_int_equal(atomic_load(&plain.calls), 4);
    fx_handler_destroy(&plain);
    fx_close(&f);
}

/* A transaction that cannot start runs no handler and NAKs: nothing is
 * lost, nothing written. */
static void transaction_failure_naks(void **state)
{
    fx f;
    (void)state;
    fx_open(&f, "sqlite");
    ib_dispatch_options o = fx_default_options();
    o.transactional_bus = txn_as_bus;
    fx_dispatch(&f, &o);
    add_transactional(&f, "c/p/t");
    ib_event ev = with_payload(30, "ok");
    atomic_store(&txn_calls, 0);
    atomic_store(&f.calls->fail_transact, true);
    ib_delivery dl = fx_run_one(&f, &ev, 1);
    assert_int_equal(dl.outcome, IB_OUTCOME_NAK);
    assert_int_equal(dl.counts.recorder_failed, 1);
    assert_int_equal(atomic_load(&txn_calls), 0);
    assert_false(fx_marked(&f, "c/p/t", ev.id));
    atomic_store(&f.calls->fail_transact, false);
    dl = fx_run_one(&f, &ev, 2);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_int_equal(atomic_load(&txn_calls), 1);
    assert_int_equal(effects_of(&f, ev.id), 1);
    fx_close(&f);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(marked_id_with_other_content_conflicts_memory),
    cmocka_unit_test(marked_id_with_other_content_conflicts_sqlite),
    cmocka_unit_test(conflict_policy_drop_acks_memory),
    cmocka_unit_test(conflict_policy_drop_acks_sqlite),
    cmocka_unit_test(batch_copy_with_other_content_conflicts_memory),
    cmocka_unit_test(batch_copy_with_other_content_conflicts_sqlite),
    cmocka_unit_test(conflict_runs_no_handler_of_the_delivery_memory),
    cmocka_unit_test(conflict_runs_no_handler_of_the_delivery_sqlite),
    cmocka_unit_test(marker_without_fingerprint_matches_memory),
    cmocka_unit_test(marker_without_fingerprint_matches_sqlite),
    cmocka_unit_test(transactional_refused_without_transactions),
    cmocka_unit_test(transactional_writes_commit_with_marker),
    cmocka_unit_test(transactional_handlers_share_a_transaction),
    cmocka_unit_test(transaction_failure_naks),
};

IB_TEST_MAIN(tests)
