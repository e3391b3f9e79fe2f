/* SPDX-License-Identifier: Apache-2.0 */
/* The batch flow of the idempotent core: one ib_dispatch_run() call.
 *
 * This comment is the one description of how a batch goes through the
 * core: what an item goes through, which thread owns what, the invariants
 * and the steps. dispatch.h states the rules a caller sees (outcomes, the
 * poison rule, circuits); recorders/include/recorder.h the recorder calls.
 *
 * THE ITEM. A batch of n deliveries becomes one item per (delivery,
 * handler subscribed to its type), in batch order. Its result (enum
 * item_result) moves through three phases and never back:
 *   claim   R_CLAIM (to claim) -> R_FOLLOW (same key as an earlier item of
 *           the batch: takes that leader's result), R_POISON_CHECK/DONE/
 *           OPEN (the poison rule without durable attempts), R_WAIT (its
 *           circuit is open: not claimed), R_DONE (marked already),
 *           R_BUSY (another owner holds it), R_CONFLICT (marked with
 *           another fingerprint), R_CLAIM_FAILED, or R_RUN (acquired);
 *   call    R_RUN -> R_SKIPPED (its delivery conflicts), R_TXN_FAILED,
 *           R_HELD_BACK (its circuit opened meanwhile), R_UNRUN (the claim
 *           was lost before the call could start), or the handler's
 *           verdict: R_OK, R_RETRY, R_REJECT;
 *   mark    R_OK -> R_MARKED, or R_LOST (another owner took the claim over,
 *           so the fenced mark skipped it).
 * ib__run_decide() (dispatch_outcome.c) reads the items of a delivery
 * through one table (what the observer is told, what they add up to) and
 * chooses its outcome.
 *
 * THE FILES. This one holds the steps; the run's state is declared in
 * dispatch_run_state.h, its reusable buffers are dispatch_scratch.c,
 * what the circuits hear and decide is dispatch_run_circuits.c, and the
 * outcomes dispatch_outcome.c; those three run on the run thread only.
 *
 * WHO OWNS WHAT (workers post, the run thread owns: libuv's threadpool)
 *  - The run thread (the caller of ib_dispatch_run, under run_mu) owns the
 *    run: the scratch buffers, every item and its phase, the pending
 *    marks, the circuits' records, the outcomes. It alone writes items,
 *    and it alone calls the recorder for the batch's claims, marks and
 *    releases. Every verdict reaches the items in one place (take_done).
 *    It holds serve_mu for the whole batch but while it is aside (below).
 *  - With concurrency N > 1 and more than one call, the calls run on the
 *    pool's N workers. A worker reads its item (written before the loop
 *    started, or atomics: lost, lease_end) and writes none: it posts the
 *    call's start and then its verdict, run time and note, by value, to
 *    the completion queue (dispatch_done.h). The run thread meanwhile
 *    waits on that queue until something is posted or the next commit is
 *    due (serve). Before a call, claim_still_ours may renew that item's
 *    lease in the store; the new end travels in the completion.
 *  - Otherwise (concurrency 1, the default, or a single call) the run
 *    thread makes the calls itself, one at a time (call_inline): handing
 *    each batch to another thread and back would cost two thread wake-ups
 *    per batch, which is most of what a quick handler costs. For the time
 *    of the handler call it is aside: it lets serve_mu go and the queue
 *    wakes the stand-in, not it, for a request.
 *  - The stand-in, a thread of the queue that sleeps otherwise, serves a
 *    request made while the run thread is aside (stand_in): it takes
 *    serve_mu and renews or commits as the run thread would, leaving the
 *    health callback and the settling to the run thread once back
 *    (come_back). So a lease is kept and finished marks are made durable
 *    during a long call, whichever thread makes it.
 *  - Another thread of the host (its control thread) asks, while a batch
 *    runs, for the batch's leases to be renewed (ib__drun_extend_leases)
 *    and its pending marks made durable (ib__drun_flush_marks): it posts
 *    a request to the queue and returns at once with what was done for
 *    the requests before; it never waits for the store. Between batches
 *    the queue is closed and there is nothing to do. It may also look for
 *    calls that overran (ib__drun_overdue) in the table the run thread
 *    publishes under lease_mu (lease_keys, lease_started...), reading only.
 *
 * INVARIANTS
 *  1. A delivery is acked only once every item of it is marked or was done
 *     before (settle_ready, ib__run_decide); otherwise it is nak'ed or
 *     dead-lettered, by the rules of dispatch.h.
 *  2. The run does not return before the mark of every call that said OK
 *     is durable (commit_all retries until it lands).
 *  3. No call starts while a commit has failed: the pool is held
 *     (ib__pool_hold), and a call of the run thread or one made alone is
 *     not started before the commit lands.
 *  4. No call starts on a claim that may have been taken over: its lease
 *     end is checked on the boot clock, renewed when near (claim_still_ours).
 *  5. An attempt is counted for a call that started, and for no other: in
 *     the claim for the first key when its call starts first and at once;
 *     before the call for a claim taken over (run alone, after the marks
 *     earned so far are durable); at the release for a RETRY.
 *  6. A mark waits at most commit_interval_ms after its call returned (the
 *     run thread's wait ends when it is due; between its own calls it
 *     looks), and never through a call of a handler whose last call
 *     outlasted it, unless a flush makes it durable sooner.
 *  7. No lock another thread waits for is held across a handler call, and
 *     only serve_mu across a store write: the stand-in holds it while it
 *     renews or commits, so a run thread back from a call made meanwhile
 *     waits for that one write. The queue's lock and lease_mu are held for
 *     a few copies; run_mu is taken by ib_dispatch_run alone and only
 *     serialises batches (the pool runs one at a time, the scratch is
 *     shared).
 *
 * THE STEPS of a batch (run_locked):
 *  1. prepare: check the deliveries, size the scratch and the queue,
 *     fingerprint each event and find its handlers.
 *  2. plan: make the items; mark followers; apply the poison rule where
 *     attempts are not durable; circuits choose their probes.
 *  3. claim: one acquire call for every key to claim; items take their
 *     claim phase; the overdue table is published and the queue opened
 *     (requests are taken from now on); deliveries all of whose items are
 *     done are settled at once (an early ack).
 *  4. run_alone: calls on claims taken over, each alone (call_one),
 *     attempt first.
 *  5. run_handlers: the rest on the pool, all together (run_parallel), or
 *     on the run thread one at a time in batch order (run_in_order: the
 *     pending marks committed first before the call of a handler whose
 *     last call outlasted the commit interval). The run thread serves the
 *     queue while the pool runs, and between its own calls (serve): a
 *     request to renew renews every live claim in one call; a request to
 *     flush commits now; a completion is taken (take_done: the item's
 *     result, its circuit, its pending mark); once commit_interval_ms has
 *     passed since the last commit, the pending marks go in one fenced
 *     call and what became ready is settled. During its own calls the
 *     stand-in serves the requests. A failed commit holds the pool, or the
 *     next call of the run thread, until it lands, tried again when its
 *     back-off ends. Then commit_all; then transactional handlers, each
 *     in the recorder's transaction with its marker, requests served
 *     between two transactions.
 *     A batch on the pool with a caller's ib_dispatch_more grows (grow):
 *     whenever the run thread wakes and no more than `concurrency` calls
 *     are left to finish, it asks the caller for the deliveries it has
 *     ready, and takes steps 1-3 for them (their items follow earlier
 *     items of their key in the whole run, their claim is one call); their
 *     calls go to the workers by ib__pool_extend. Calls on claims taken
 *     over among them are left by the workers and run alone once the
 *     pool's loop is over (run_taken_over), as step 4 runs them. Every
 *     buffer a worker reads was sized for the whole room in step 1, so
 *     growing never moves one. It never grows while a commit fails, the
 *     recorder is down or a circuit is not closed, nor with transactional
 *     handlers.
 *  6. leases_done: close the queue and withdraw the overdue table;
 *     release: one call frees the claims of calls that did not say OK and
 *     counts their attempts.
 *  7. ib__run_circuits_update, then ib__run_decide for every delivery not
 *     settled yet. */
#include "dispatch_run.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "dispatch_run_state.h"
#include "fingerprint.h"
#include "uuid.h"

/* The event's header array is handed to plugins as it is. */
_Static_assert(sizeof(ib_event_header) == sizeof(ib_header), "header layouts differ");
_Static_assert(offsetof(ib_event_header, key) == offsetof(ib_header, key), "header layouts differ");
_Static_assert(offsetof(ib_event_header, value) == offsetof(ib_header, value),
               "header layouts differ");

/* ---- planning ----------------------------------------------------------- */

/* The earlier item with the same (consumer, id) as item `i`, or `i` itself
 * (then remembered). Consumers are unique per handler, so the handler stands
 * for the consumer. */
static size_t first_occurrence(run_ctx *c, size_t i)
{
    const run_item *it = &c->items[i];
    const char *id = ib__run_item_id(c, it);
    size_t mask = c->seen_cap - 1;
    for (size_t k = (size_t)ib__run_pair_hash(id, it->h->index) & mask;; k = (k + 1) & mask) {
        uint32_t v = c->s->seen[k];
        if (v == 0) {
            c->s->seen[k] = (uint32_t)(i + 1);
            return i;
        }
        const run_item *o = &c->items[v - 1];
        if (o->h == it->h && memcmp(ib__run_item_id(c, o), id, IB_ID_LEN) == 0)
            return v - 1;
    }
}

/* One item per (delivery, subscribed handler), in batch order, for the
 * deliveries from `from` on (0, or the first taken in by grow); an item
 * follows the first earlier one of its key in the whole run. */
static void plan(run_ctx *c, size_t from)
{
    run_scratch *s = c->s;
    uint64_t max_deliver = c->r->opts.max_deliver;
    size_t total = s->first[from];

    for (size_t i = from; i < c->n; i++) {
        size_t count = s->first[i + 1] - s->first[i];
        const ib_event *ev = c->dl[i].event;
        s->fps[i] = count > 0 ? ib_fingerprint(ev->type, ev->payload, ev->payload_len) : 0;
        /* Without durable attempts the poison rule falls back to
         * JetStream's delivery count. */
        bool poison = !c->durable && max_deliver != 0 && c->dl[i].delivery_count >= max_deliver;
        for (size_t k = 0; k < count; k++, total++) {
            run_item *it = &c->items[total];
            it->h = s->lists[i][k];
            it->delivery = i;
            it->leader = total;
            it->work = 0;
            it->seconds = 0;
            it->busy_ms = 0;
            it->attempts = 0;
            it->finished = false;
            it->probe = false;
            it->held = false;
            it->recorded = false;
            it->taken_over = false;
            it->counted = false;
            atomic_init(&it->lost, false);
            atomic_init(&it->lease_end, 0);
            it->note.retry_after_ms = -1;
            it->note.reason[0] = '\0';
            if (c->cs != NULL && ib__circuit_blocks(c->cs, it->h->index)) {
                it->result = R_WAIT; /* neither leads nor follows: not claimed */
                continue;
            }
            if (poison) {
                /* Poisoned items neither lead nor follow: they never run. */
                it->result = R_POISON_CHECK;
                continue;
            }
            it->leader = first_occurrence(c, total);
            it->result = it->leader == total ? R_CLAIM : R_FOLLOW;
            /* the same id with other content earlier in the batch */
            if (it->result == R_FOLLOW && s->fps[c->items[it->leader].delivery] != s->fps[i]) {
                it->result = R_CONFLICT;
                it->leader = total;
            }
        }
    }
    c->total = total;
}

/* ---- recorder calls ----------------------------------------------------- */

static double seconds_since(int64_t t0_ns)
{
    return (double)(ib_clock_monotonic_ns() - t0_ns) * 1e-9;
}

/* A recorder call failed: keep its error for the caller and tell the
 * health callback. */
static void recorder_failed(run_ctx *c, const ib_error *e, ib_status st)
{
    ib_error local = *e;
    if (local.status == IB_OK)
        ib_error_set(&local, st, "recorder %s: %s", ib_recorder_kind(c->r->recorder),
                     ib_status_str(st));
    if (c->err != NULL && c->err->status == IB_OK)
        *c->err = local;
    c->r->recorder_down = true;
    if (c->r->opts.on_recorder != NULL)
        c->r->opts.on_recorder(c->r->opts.observer_ctx, false, &local);
}

static void recorder_worked(run_ctx *c)
{
    if (!c->r->recorder_down)
        return;
    c->r->recorder_down = false;
    c->r->commit_backoff_ms = 0;
    if (c->r->opts.on_recorder != NULL)
        c->r->opts.on_recorder(c->r->opts.observer_ctx, true, NULL);
}

/* Gathers into s->keys the keys of every item from item `first_item` on
 * in state `want` or `want2`; returns how many. */
static size_t gather(run_ctx *c, size_t first_item, unsigned char want, unsigned char want2)
{
    run_scratch *s = c->s;
    size_t nk = 0;
    for (size_t i = first_item; i < c->total; i++) {
        const run_item *it = &c->items[i];
        if (it->result != want && it->result != want2)
            continue;
        s->keys[nk] = (ib_marker_key){it->h->consumer, ib__run_item_id(c, it)};
        s->key_fps[nk] = s->fps[it->delivery];
        s->key_items[nk++] = i;
    }
    return nk;
}

/* What one acquire answer makes of an item. With `counted` the claim
 * counted the attempt of an ACQUIRED key; else info->attempts is the count
 * so far and the call, if it starts, is the next one. */
static void take_claim(run_item *it, const ib_claim_info *info, bool counted, bool taken_over,
                       int64_t lease_end)
{
    bool poison_check = it->result == R_POISON_CHECK;
    it->attempts = info->attempts;
    it->taken_over = taken_over;
    switch (info->state) {
    case IB_CLAIM_ACQUIRED:
        /* a poisoned item is held, and released after the run */
        it->result = poison_check ? R_POISON_OPEN : R_RUN;
        it->counted = counted;
        if (!counted && it->attempts < UINT32_MAX)
            it->attempts++;
        atomic_store_explicit(&it->lease_end, lease_end, memory_order_relaxed);
        break;
    case IB_CLAIM_CONFLICT:
        it->result = R_CONFLICT;
        break;
    case IB_CLAIM_DONE:
        it->result = poison_check ? R_POISON_DONE : R_DONE;
        break;
    case IB_CLAIM_EXHAUSTED:
        it->result = R_POISON_OPEN;
        break;
    default:
        /* A live claim elsewhere is busy, on the poison delivery too. */
        it->result = R_BUSY;
        it->busy_ms = info->remaining_ms;
        break;
    }
}

/* A delivery that conflicts runs none of its handlers: the content is not
 * the event its id stood for. Their claims are released after the run. */
static void skip_conflicted(run_ctx *c, size_t from)
{
    for (size_t i = from; i < c->n; i++) {
        size_t first = c->s->first[i], end = c->s->first[i + 1];
        bool conflict = false;
        for (size_t j = first; j < end && !conflict; j++)
            conflict = c->items[j].result == R_CONFLICT;
        for (size_t j = first; conflict && j < end; j++)
            if (c->items[j].result == R_RUN)
                c->items[j].result = R_SKIPPED;
    }
}

/* Fills s->work with the items from `first_item` on whose handler runs,
 * in batch order, after the entries there: first the plain ones (for the
 * pool), then the transactional ones. A batch with transactional items
 * never grows, so entries added to it are plain and stay before them. */
static void plan_work(run_ctx *c, size_t first_item)
{
    run_scratch *s = c->s;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = first_item; i < c->total; i++) {
            run_item *it = &c->items[i];
            if (it->result != R_RUN || it->h->transactional != (pass == 1))
                continue;
            it->work = c->nwork + c->ntxn;
            s->work[it->work] = i;
            if (pass == 0)
                c->nwork++;
            else
                c->ntxn++;
        }
    }
}

/* One acquire call for every first occurrence (and every poisoned item)
 * from item `first_item` on (0, or the first of deliveries taken in by
 * grow, those from delivery `from`); adds to s->work the items whose
 * handler runs and publishes them in the overdue table. */
static void claim(run_ctx *c, size_t from, size_t first_item)
{
    run_scratch *s = c->s;
    ib__drun *r = c->r;
    ib_error e = {0};
    size_t first_work = c->nwork + c->ntxn;
    size_t nk = gather(c, first_item, R_CLAIM, R_POISON_CHECK);
    if (nk == 0)
        return;
    ib_claim_request req = {
        .owner = r->opts.owner,
        .lease_ms = r->opts.lease_ms,
        .max_attempts =
            c->durable
                ? (uint32_t)(r->opts.max_deliver > UINT32_MAX ? UINT32_MAX : r->opts.max_deliver)
                : 0,
        .probe_holders = ib_recorder_is_host_local(r->recorder),
    };
    /* Each attempt is counted as its call starts or returns (recorder.h,
     * "attempts counted as handlers start"), but the first key's: its call
     * is started first and alone (run_alone), right after the claim, so
     * the claim counts it; not when a transactional call may come first,
     * nor on the pool, whose first calls start together (and may need
     * each other). s->flags says which keys were taken over. */
    bool txn = false;
    for (size_t k = 0; k < nk && !txn; k++)
        txn = c->items[s->key_items[k]].h->transactional;
    ib__acquire_opts opts = {.defer_attempts = true,
                             .count_key0 =
                                 first_item == 0 && !txn && (r->opts.concurrency <= 1 || nk == 1),
                             .taken_over = s->flags};
    int64_t lease_end = ib_clock_boottime_ms() + r->opts.lease_ms;
    /* Keys checked already: ids by check_deliveries, consumers when their
     * handler registered. */
    ib_status st = ib__recorder_acquire_checked(r->recorder, s->infos, s->keys, s->key_fps, nk,
                                                &req, &opts, &e);
    if (st != IB_OK) {
        for (size_t k = 0; k < nk; k++)
            c->items[s->key_items[k]].result = R_CLAIM_FAILED;
        recorder_failed(c, &e, st);
        return;
    }
    recorder_worked(c);
    for (size_t k = 0; k < nk; k++)
        take_claim(&c->items[s->key_items[k]], &s->infos[k], k == 0 && opts.count_key0, s->flags[k],
                   lease_end);
    skip_conflicted(c, from);
    plan_work(c, first_item);
    for (size_t w = first_work; w < c->nwork + c->ntxn; w++) {
        const run_item *it = &c->items[s->work[w]];
        s->lease_keys[w] = (ib_marker_key){it->h->consumer, ib__run_item_id(c, it)};
        s->lease_live[w] = true;
        atomic_store_explicit(&s->started[w], 0, memory_order_relaxed);
    }
    pthread_mutex_lock(&r->lease_mu);
    r->lease_keys = s->lease_keys;
    r->lease_started = s->started;
    r->lease_items = c->items;
    r->lease_work = s->work;
    r->lease_n = c->nwork + c->ntxn;
    pthread_mutex_unlock(&r->lease_mu);
    /* from now on the control thread's renewals and flushes are requests */
    if (first_work == 0)
        ib__doneq_open(r->done);
}

/* The batch is over: its claims are not renewed any more, and what is
 * asked from now on finds no batch. */
static void leases_done(ib__drun *r)
{
    ib__doneq_close(r->done);
    pthread_mutex_lock(&r->lease_mu);
    r->lease_keys = NULL;
    r->lease_started = NULL;
    r->lease_items = NULL;
    r->lease_work = NULL;
    r->lease_n = 0;
    pthread_mutex_unlock(&r->lease_mu);
}

double ib__drun_recorder_seconds(const ib__drun *r)
{
    return r->last_recorder_seconds;
}

/* While a batch runs, a renewal or a flush is a request to its run
 * thread, which performs it between completions (renew_leases,
 * flush_marks), or to the stand-in while the run thread is inside a
 * handler call of its own; the caller returns at once with what was done
 * for the requests made before. Between batches there is nothing to do. */
ib_status ib__drun_extend_leases(ib__drun *r, size_t *extended, size_t *lost, ib_error *err)
{
    ib__doneq_request(r->done, IB__DONE_RENEW);
    return ib__doneq_take_renew(r->done, extended, lost, err);
}

ib_status ib__drun_flush_marks(ib__drun *r, size_t *marked, ib_error *err)
{
    ib__doneq_request(r->done, IB__DONE_FLUSH);
    return ib__doneq_take_flush(r->done, marked, err);
}

size_t ib__drun_overdue(ib__drun *r, int64_t age_ms,
                        void (*visit)(void *ctx, const ib_overdue_call *call), void *ctx)
{
    size_t found = 0;
    pthread_mutex_lock(&r->lease_mu);
    int64_t now = ib_clock_monotonic_ms();
    for (size_t w = 0; w < r->lease_n; w++) {
        int64_t started = atomic_load_explicit(&r->lease_started[w], memory_order_acquire);
        if (started == 0 || now - started < age_ms)
            continue;
        const run_item *it = &r->lease_items[r->lease_work[w]];
        ib_overdue_call call = {.handler = it->h->index,
                                .consumer = r->lease_keys[w].consumer,
                                .event_id = r->lease_keys[w].event_id,
                                .started_ms = started,
                                .running_ms = now - started};
        found++;
        if (visit != NULL)
            visit(ctx, &call);
    }
    pthread_mutex_unlock(&r->lease_mu);
    return found;
}

ib_circuit_state ib__drun_circuit_state(const ib__drun *r, size_t handler)
{
    ib__circuits *cs = atomic_load_explicit(&((ib__drun *)r)->circuits, memory_order_acquire);
    return cs != NULL ? ib__circuit_state(cs, handler) : IB_CIRCUIT_CLOSED;
}

int64_t ib__drun_hold_ms(const ib__drun *r)
{
    ib__circuits *cs = atomic_load_explicit(&((ib__drun *)r)->circuits, memory_order_acquire);
    return cs != NULL ? ib__circuits_hold_ms(cs, ib_clock_monotonic_ms()) : 0;
}

/* Frees the claims this batch holds but did not turn into marks, so a
 * redelivery (here or in another process) can take them at once rather than
 * after the lease. Best effort: a claim left behind only expires. */
static void release(run_ctx *c)
{
    run_scratch *s = c->s;
    ib__drun *r = c->r;
    ib_error e = {0};
    size_t nk = 0;
    for (size_t i = 0; i < c->total; i++) {
        const run_item *it = &c->items[i];
        unsigned char res = it->result;
        /* an exhausted key holds no claim of ours: releasing it is a no-op */
        if (res != R_RETRY && res != R_REJECT && res != R_POISON_OPEN && res != R_SKIPPED &&
            res != R_TXN_FAILED && res != R_HELD_BACK && res != R_ORDER_HELD)
            continue;
        /* A RETRY whose attempt is not counted yet (it did not run alone)
         * is counted as it is freed: the call returned, so no crash of it
         * can be mistaken for a batch mate's. s->flags: count it. */
        s->flags[nk] = res == R_RETRY && !it->counted;
        s->keys[nk++] = (ib_marker_key){it->h->consumer, ib__run_item_id(c, it)};
    }
    if (nk == 0)
        return;
    /* s->infos' space takes the held answers nobody needs */
    bool *held = (bool *)s->infos;
    ib_status st = c->durable
                       ? ib__recorder_count_attempts(r->recorder, held, s->keys, s->flags, nk,
                                                     r->opts.owner, 0, true, &e)
                       : ib_recorder_release_batch(r->recorder, s->keys, nk, r->opts.owner, &e);
    if (st != IB_OK)
        recorder_failed(c, &e, st);
}

/* ---- the committer ------------------------------------------------------ */

/* An item is settled for an early ack when it, or the leader it follows,
 * is marked or was already done. */
static bool item_acked(const run_ctx *c, const run_item *it)
{
    unsigned char r = it->result == R_FOLLOW ? c->items[it->leader].result : it->result;
    return r == R_MARKED || r == R_DONE || r == R_POISON_DONE;
}

/* Settles, through on_settled, every delivery whose items are all marked
 * or done: its ack may leave now, before the rest of the batch finishes. */
static void settle_ready(run_ctx *c)
{
    const ib_dispatch_options *o = &c->r->opts;
    if (o->on_settled == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        size_t first = c->s->first[i], end = c->s->first[i + 1];
        if (c->s->settled[i] || first == end)
            continue;
        size_t j = first;
        while (j < end && item_acked(c, &c->items[j]))
            j++;
        if (j < end)
            continue;
        ib__run_decide(c, i);
        c->s->settled[i] = true;
        c->dl[i].settled_early = true;
        o->on_settled(o->observer_ctx, &c->dl[i]);
    }
}

/* Starts (hold) or ends the wait of handlers not yet started for a commit
 * that failed: the pool's workers sleep, and no call alone is started. */
static void hold_handlers(run_ctx *c, bool hold)
{
    if (c->commit_failing == hold)
        return;
    c->commit_failing = hold;
    if (c->parallel)
        ib__pool_hold(c->r->pool, hold);
}

/* Writes the pending marks in one fenced call; *marked counts those that
 * landed as ours. A failure keeps them pending, sets the back-off and
 * holds the handlers not started. Tells nobody: commit_pending does, or
 * the run thread once back from a call during which an asker stood in
 * (come_back). Whoever holds serve_mu. */
static ib_status commit_write(run_ctx *c, size_t *marked, ib_error *e)
{
    run_scratch *s = c->s;
    ib__drun *r = c->r;
    *marked = 0;
    int64_t t0 = ib_clock_monotonic_ns();
    ib_status st = ib__recorder_mark_owned_checked(r->recorder, s->flags, s->pend_keys, s->pend_fps,
                                                   c->npend, r->opts.owner, e);
    c->recorder_seconds += seconds_since(t0);
    if (st != IB_OK) {
        int64_t b = r->commit_backoff_ms;
        r->commit_backoff_ms = b <= 0 ? 50 : b >= 1000 ? 2000 : b * 2;
        r->commit_retry_at_ms = ib_clock_monotonic_ms() + r->commit_backoff_ms;
        hold_handlers(c, true);
        return st;
    }
    r->commit_backoff_ms = 0;
    r->commit_retry_at_ms = 0;
    hold_handlers(c, false);
    c->last_commit_ms = ib_clock_monotonic_ms();
    for (size_t k = 0; k < c->npend; k++) {
        run_item *it = &c->items[s->pend_items[k]];
        it->result = s->flags[k] ? R_MARKED : R_LOST;
        s->lease_live[it->work] = false;
        *marked += s->flags[k];
    }
    c->npend = 0;
    return IB_OK;
}

/* Whether the last commit worked (commit_write clears the back-off). */
static bool last_commit_worked(const ib__drun *r)
{
    return r->commit_backoff_ms == 0;
}

/* commit_write, then tells the health callback and settles what became
 * ready. Run thread only. */
static ib_status commit_pending(run_ctx *c, size_t *marked, ib_error *e)
{
    ib_status st = commit_write(c, marked, e);
    if (st != IB_OK) {
        recorder_failed(c, e, st);
        return st;
    }
    recorder_worked(c);
    settle_ready(c);
    return IB_OK;
}

/* Commits the pending marks in one fenced call. Unless `force`, only once
 * commit_interval_ms has passed since the last commit, so marks of
 * handlers finishing close together share one transaction. A failed commit
 * keeps the marks pending and is tried again after a back-off: the process
 * that ran a handler never gives its mark up. Returns true when nothing is
 * left pending. */
static bool commit(run_ctx *c, bool force)
{
    if (c->npend == 0)
        return true;
    int64_t now = ib_clock_monotonic_ms();
    if (!force && now - c->last_commit_ms < c->r->opts.commit_interval_ms)
        return false;
    if (now < c->r->commit_retry_at_ms)
        return false;
    size_t marked;
    ib_error e = {0};
    return commit_pending(c, &marked, &e) == IB_OK;
}

/* When the run thread has something to do without being asked: the
 * commit of the pending marks, or its retry after a failure. */
static int64_t next_due(const run_ctx *c)
{
    if (c->npend == 0)
        return INT64_MAX;
    int64_t at = c->last_commit_ms + c->r->opts.commit_interval_ms;
    return at > c->r->commit_retry_at_ms ? at : c->r->commit_retry_at_ms;
}

/* A renewal asked for by another thread: restarts the leases of the
 * batch's live claims (same owner, lease_ms) in one call. A claim found
 * taken over is not renewed again and its call, if not started, does not
 * start (claim_still_ours). What it did is left for the asker. */
static void renew_leases(run_ctx *c)
{
    run_scratch *s = c->s;
    ib__drun *r = c->r;
    size_t n = 0, extended = 0, lost = 0;
    for (size_t w = 0; w < c->nwork + c->ntxn; w++) {
        if (!s->lease_live[w])
            continue;
        s->renew_keys[n] = s->lease_keys[w];
        s->renew_work[n++] = w;
    }
    ib_error e = {0};
    int64_t lease_end = ib_clock_boottime_ms() + r->opts.lease_ms;
    ib_status st = n > 0 ? ib_recorder_renew_batch(r->recorder, s->renew_held, s->renew_keys, n,
                                                   r->opts.owner, r->opts.lease_ms, &e)
                         : IB_OK;
    for (size_t k = 0; st == IB_OK && k < n; k++) {
        run_item *it = &c->items[s->work[s->renew_work[k]]];
        if (s->renew_held[k]) {
            atomic_store_explicit(&it->lease_end, lease_end, memory_order_relaxed);
            extended++;
        } else {
            atomic_store_explicit(&it->lost, true, memory_order_release);
            s->lease_live[s->renew_work[k]] = false;
            lost++;
        }
    }
    ib__doneq_answer_renew(r->done, extended, lost, st, &e);
}

/* A flush asked for by another thread: the pending marks now, whatever
 * the commit interval or a back-off says. Done by the run thread, or (`aside`) by
 * an asker standing in for it (stand_in): that one only writes; what the
 * commit means for the health callback and the settling is left to the
 * run thread (come_back), so both stay on its thread. */
static void flush_marks(run_ctx *c, bool aside)
{
    size_t marked = 0;
    ib_error e = {0};
    ib_status st = IB_OK;
    if (c->npend > 0 && !aside) {
        st = commit_pending(c, &marked, &e);
    } else if (c->npend > 0) {
        st = commit_write(c, &marked, &e);
        if (st == IB_OK) {
            c->aside_worked = true;
        } else if (!c->aside_failed) {
            c->aside_failed = true;
            c->aside_st = st;
            c->aside_err = e;
        }
    }
    ib__doneq_answer_flush(c->r->done, marked, st, &e);
}

/* What one completion tells the run thread: the start of a call (for
 * ib__drun_overdue), or its end: the item takes its result, its circuit
 * hears of it (one that opens holds the batch's later calls back) and an
 * OK joins the pending marks. The one place a call's outcome is written. */
static void take_done(run_ctx *c, const ib__done *m)
{
    run_scratch *s = c->s;
    run_item *it = &c->items[s->work[m->work]];
    if (m->kind == IB__DONE_START) {
        atomic_store_explicit(&s->started[m->work], m->at_ms, memory_order_release);
        return;
    }
    atomic_store_explicit(&s->started[m->work], 0, memory_order_release);
    it->result = m->result;
    it->seconds = m->seconds;
    it->note = m->note;
    if (m->lease_end_ms != 0)
        atomic_store_explicit(&it->lease_end, m->lease_end_ms, memory_order_relaxed);
    it->finished = true;
    c->ndone++;
    ib__run_circuit_record(c, it);
    if (it->result != R_OK)
        return;
    s->pend_keys[c->npend] = (ib_marker_key){it->h->consumer, ib__run_item_id(c, it)};
    s->pend_fps[c->npend] = s->fps[it->delivery];
    s->pend_items[c->npend++] = s->work[m->work];
}

/* The run thread's one wait: until a completion or a request comes, or
 * `deadline_ms` (monotonic) passes; then does what came, in that order:
 * renewal, flush, completion, and the commit if it is due. */
/* Serves the requests `asked` (IB__DONE_* bits) on the run thread. */
static void serve_requests(run_ctx *c, unsigned asked)
{
    if (asked & IB__DONE_RENEW)
        renew_leases(c);
    if (asked & IB__DONE_FLUSH)
        flush_marks(c, false);
}

static void serve(run_ctx *c, int64_t deadline_ms)
{
    ib__done m;
    unsigned asked = 0;
    bool got = ib__doneq_wait(c->r->done, &m, &asked, deadline_ms);
    for (;;) {
        serve_requests(c, asked);
        if (!got)
            break;
        take_done(c, &m);
        /* what else was posted meanwhile, without sleeping */
        got = ib__doneq_wait(c->r->done, &m, &asked, 0);
    }
    commit(c, false);
}

/* Commits until nothing is pending, serving requests while a back-off
 * runs: the batch does not end while a handler's success is not durable.
 * The host keeps the messages in progress meanwhile. */
static void commit_all(run_ctx *c)
{
    while (!commit(c, true))
        serve(c, c->r->commit_retry_at_ms);
}

/* ---- handlers ----------------------------------------------------------- */

/* Calls the handler of `it` with `bus` and keeps its verdict, run time and
 * note in `d` (only there). With `post` (a worker's call), the start is
 * posted to the run thread; without, it is stamped in the published table
 * at once and cleared after the call (a call on the run thread itself). */
static void call_handler(run_ctx *c, const run_item *it, ib_bus_proxy *bus, ib__done *d, bool post)
{
    static const uint8_t no_payload[1];
    const ib_delivery *dl = &c->dl[it->delivery];
    const ib_event *ev = dl->event;
    /* Never a NULL payload pointer, so memcpy(dst, payload, 0) is safe. */
    const uint8_t *payload = ev->payload != NULL ? ev->payload : no_payload;
    ib_raw_event raw = {
        .size = sizeof(raw),
        .id = ev->id,
        .type = ev->type,
        .payload = payload,
        .payload_len = ev->payload_len,
        .created_at_ms = ev->created_at_ms,
        .source = ev->source != NULL ? ev->source : "",
        .headers = (const ib_header *)ev->headers,
        .header_count = ev->header_count,
        .subject = dl->subject != NULL ? dl->subject : "",
        .stream_seq = dl->stream_seq,
        .delivery_count = dl->delivery_count != 0 ? dl->delivery_count : 1,
        .consumer = it->h->consumer,
        .message = dl->message,
        .message_len = dl->message != NULL ? dl->message_len : 0,
        .traceparent = dl->trace != NULL ? dl->trace->traceparent : NULL,
        .tracestate =
            dl->trace != NULL && dl->trace->tracestate[0] != '\0' ? dl->trace->tracestate : NULL,
    };
    const ib_trace *outer = ib_trace_current();
    int64_t t0 = ib_clock_monotonic_ns();
    /* for ib__drun_overdue: 0 means "not running", so never 0 */
    int64_t t0_ms = t0 / 1000000 > 0 ? t0 / 1000000 : 1;
    if (post)
        ib__doneq_post(c->r->done,
                       &(ib__done){.kind = IB__DONE_START, .work = it->work, .at_ms = t0_ms});
    else
        atomic_store_explicit(&c->s->started[it->work], t0_ms, memory_order_release);
    ib_trace_current_set(dl->trace);
    ib__dnote_enter(&d->note, c->r->opts.observer_ctx, it->h->index);
    ib_verdict v = it->h->handle(it->h->state, payload, ev->payload_len, bus, &raw);
    ib__dnote_leave();
    ib_trace_current_set(outer);
    if (!post)
        atomic_store_explicit(&c->s->started[it->work], 0, memory_order_release);
    d->seconds = seconds_since(t0);
    /* An unknown verdict is a plugin bug: take it as transient, so the event
     * is neither marked nor lost (the poison rule ends the loop). */
    d->result = v == IB_HANDLER_OK ? R_OK : v == IB_HANDLER_REJECT ? R_REJECT : R_RETRY;
}

/* Whether the claim of `it` is still ours to start its call on: not found
 * lost by a renewal, and its lease not within the margin of its end by the
 * boot clock (which runs on while the process is stopped). A lease near
 * its end is renewed for this key first (its new end goes in `d`). On
 * false, d->result says why: R_UNRUN (lost, or the renewal found it taken
 * over) or R_CLAIM_FAILED (the renewal failed: nothing is known). On a
 * worker: reads the item, writes only `d`. */
static bool claim_still_ours(run_ctx *c, const run_item *it, ib__done *d)
{
    ib__drun *r = c->r;
    if (atomic_load_explicit(&it->lost, memory_order_acquire)) {
        d->result = R_UNRUN;
        return false;
    }
    int64_t now = ib_clock_boottime_ms();
    int64_t margin = r->opts.lease_ms / LEASE_MARGIN_DIVISOR;
    if (now < atomic_load_explicit(&it->lease_end, memory_order_relaxed) - margin)
        return true;
    ib_marker_key key = {it->h->consumer, ib__run_item_id(c, it)};
    bool held = false;
    ib_error e = {0};
    if (ib_recorder_renew_batch(r->recorder, &held, &key, 1, r->opts.owner, r->opts.lease_ms, &e) !=
        IB_OK) {
        d->result = R_CLAIM_FAILED;
        return false;
    }
    if (!held) {
        d->result = R_UNRUN;
        return false;
    }
    d->lease_end_ms = now + r->opts.lease_ms;
    return true;
}

/* Whether an item's final result lets the later deliveries of its order
 * key run: it succeeded, or its event was settled for good (a duplicate,
 * a dead letter, a conflict). */
static bool order_passes(const run_ctx *c, const run_item *it)
{
    unsigned char r = it->result == R_FOLLOW ? c->items[it->leader].result : it->result;
    return r == R_OK || r == R_MARKED || r == R_DONE || r == R_POISON_DONE ||
           r == R_POISON_OPEN || r == R_REJECT || r == R_CONFLICT;
}

/* Whether `it` waits for an earlier delivery of the batch with the same
 * order key (ib_delivery.order_key) that did not succeed. Only while the
 * calls run one at a time on the run thread, where every earlier item is
 * finished when this one is asked about (with the pool, order is not
 * promised). */
static bool waits_for_order(const run_ctx *c, const run_item *it)
{
    const char *key = c->dl[it->delivery].order_key;
    if (key == NULL || c->parallel)
        return false;
    for (size_t j = 0; j < c->s->first[it->delivery]; j++) {
        const char *other = c->dl[c->items[j].delivery].order_key;
        if (other != NULL && strcmp(other, key) == 0 && !order_passes(c, &c->items[j]))
            return true;
    }
    return false;
}

/* Whether the call of `it` is to be made: not when its circuit opened
 * since the batch was planned (d->result R_HELD_BACK: the run thread
 * releases the claim and ends the attempt it counted), nor when its claim
 * is no longer ours (claim_still_ours says why in `d`). Writes only `d`. */
static bool may_call(run_ctx *c, const run_item *it, ib__done *d)
{
    if (c->cs != NULL && !it->probe && ib__circuit_blocks(c->cs, it->h->index)) {
        d->result = R_HELD_BACK;
        return false;
    }
    if (waits_for_order(c, it)) {
        d->result = R_ORDER_HELD;
        return false;
    }
    return claim_still_ours(c, it, d);
}

/* Whether the call of `it` waits to run alone (run_taken_over): its claim
 * was taken over from a holder that never released it, and its attempt
 * is not counted yet. Workers leave it. */
static bool waits_to_run_alone(const run_ctx *c, const run_item *it)
{
    return c->durable && it->taken_over && !it->counted;
}

/* Runs the handler of work entry `w` on a worker and posts what became of
 * it; writes no item. An item that already ran (alone, run_alone) is left
 * as it is, and nothing is posted for it, nor for one that waits to run
 * alone. */
static void run_call(run_ctx *c, size_t w)
{
    const run_item *it = &c->items[c->s->work[w]];
    if (it->finished || waits_to_run_alone(c, it))
        return;
    ib__done d = {.kind = IB__DONE_CALL, .work = w, .result = R_RUN};
    d.note.retry_after_ms = -1;
    if (may_call(c, it, &d))
        call_handler(c, it, c->bus, &d, true);
    ib__doneq_post(c->r->done, &d);
}

/* The pool's work: every work entry of the batch (run_parallel), or the
 * one the run thread chose (call_alone). */
static void run_any(void *arg, size_t w)
{
    run_call(arg, w);
}

static void run_solo(void *arg, size_t i)
{
    run_ctx *c = arg;
    (void)i;
    run_call(c, c->solo);
}

/* Runs the call of work entry `w` alone on the pool, the run thread
 * serving what is posted meanwhile (renewals, flushes, commits due) until
 * the call's completion is taken. */
static void call_alone(run_ctx *c, size_t w)
{
    size_t want = c->ndone + 1;
    c->solo = w;
    ib__pool_start(c->r->pool, run_solo, c, 1);
    while (c->ndone < want)
        serve(c, next_due(c));
    ib__pool_finish(c->r->pool);
}

/* The run thread, before a call of its own: lets serve_mu go, so that
 * the stand-in can serve requests while the handler runs (stand_in). */
static void step_aside(run_ctx *c)
{
    c->r->calling = c;
    pthread_mutex_unlock(&c->r->serve_mu);
    ib__doneq_step_aside(c->r->done);
}

/* The run thread, back from its call: takes serve_mu again (waiting, at
 * worst, for the one store write of the stand-in), then tells the health
 * callback and settles what a commit written meanwhile made ready, so
 * both stay on this thread. The stand-in wakes for no request from the
 * first step on. */
static void come_back(run_ctx *c)
{
    ib__doneq_come_back(c->r->done);
    pthread_mutex_lock(&c->r->serve_mu);
    c->r->calling = NULL;
    if (c->aside_failed)
        recorder_failed(c, &c->aside_err, c->aside_st);
    if (c->aside_worked && last_commit_worked(c->r))
        recorder_worked(c);
    if (c->aside_worked)
        settle_ready(c);
    c->aside_failed = c->aside_worked = false;
}

/* The stand-in (dispatch_done.h), woken by a request made while the run
 * thread is inside a handler call of its own: when serve_mu is free and a
 * batch is in such a call, serves the requests made so far as the run
 * thread would between completions. Otherwise returns at once: the run
 * thread is back and serves them itself, or no batch runs. */
static void stand_in(void *arg)
{
    ib__drun *r = arg;
    if (pthread_mutex_trylock(&r->serve_mu) != 0)
        return;
    run_ctx *c = r->calling;
    if (c != NULL) {
        unsigned asked = ib__doneq_take_requests(r->done);
        if (asked & IB__DONE_RENEW)
            renew_leases(c);
        if (asked & IB__DONE_FLUSH)
            flush_marks(c, true);
    }
    pthread_mutex_unlock(&r->serve_mu);
}

/* Makes the call of work entry `w` on the run thread and takes its
 * verdict at once (take_done), then serves what was asked meanwhile and
 * nobody served, and commits if due. No thread hand-off and, unless a
 * request waits, no lock but serve_mu: this is how calls run unless the
 * batch's run on the pool (run_parallel). Nothing is posted to the queue
 * meanwhile (no worker runs), so it is not read. */
static void call_inline(run_ctx *c, size_t w)
{
    const run_item *it = &c->items[c->s->work[w]];
    ib__done d = {.kind = IB__DONE_CALL, .work = w, .result = R_RUN};
    d.note.retry_after_ms = -1;
    if (may_call(c, it, &d)) {
        step_aside(c);
        call_handler(c, it, c->bus, &d, false);
        come_back(c);
    }
    take_done(c, &d);
    serve_requests(c, ib__doneq_take_requests(c->r->done));
    commit(c, false);
}

/* The call of work entry `w`, alone: on the pool when the batch's calls
 * run there, else on the run thread. */
static void call_one(run_ctx *c, size_t w)
{
    if (c->parallel)
        call_alone(c, w);
    else
        call_inline(c, w);
}

/* Counts the attempt of `it` before its call starts, fenced by its claim
 * (which the count renews): false, with it->result set, when the claim is
 * no longer ours or the count failed. Run thread only. */
static bool count_first(run_ctx *c, run_item *it)
{
    ib__drun *r = c->r;
    ib_marker_key key = {it->h->consumer, ib__run_item_id(c, it)};
    bool held = false;
    ib_error e = {0};
    int64_t t0 = ib_clock_boottime_ms();
    ib_status st = ib__recorder_count_attempts(r->recorder, &held, &key, NULL, 1, r->opts.owner,
                                               r->opts.lease_ms, false, &e);
    if (st != IB_OK) {
        it->result = R_CLAIM_FAILED;
        recorder_failed(c, &e, st);
        return false;
    }
    recorder_worked(c);
    if (!held) {
        it->result = R_UNRUN;
        return false;
    }
    it->counted = true;
    atomic_store_explicit(&it->lease_end, t0 + r->opts.lease_ms, memory_order_relaxed);
    return true;
}

/* Runs the calls whose claim was taken over from a holder that never
 * released it: one of them may be what killed (or hung) that holder. Each
 * runs alone on the pool, after the marks earned so far are durable and
 * with its attempt counted first, so a crash in it spends its own attempt
 * and no other's, and the event that kills every process that runs it is
 * dead-lettered alone. Before any other call of the batch (run_alone),
 * and, for deliveries taken in while the batch ran (grow), after the
 * others (run_parallel). */
static void run_taken_over(run_ctx *c)
{
    for (size_t w = 0; c->durable && w < c->nwork; w++) {
        run_item *it = &c->items[c->s->work[w]];
        if (it->finished || !waits_to_run_alone(c, it))
            continue;
        commit_all(c);
        if (count_first(c, it)) {
            call_one(c, w);
            continue;
        }
        it->finished = true; /* not run: count_first said why */
        c->ndone++;
    }
}

/* The calls that go before the batch's others: the one the claim counted
 * first, and those on claims taken over (run_taken_over). */
static void run_alone(run_ctx *c)
{
    bool taken_over = false;
    for (size_t w = 0; c->durable && w < c->nwork; w++) {
        const run_item *it = &c->items[c->s->work[w]];
        taken_over |= it->taken_over && !it->counted;
    }
    /* the call the claim counted first: it is the first to start. Without
     * calls taken over it is the batch's first call, which starts first
     * in run_in_order anyway, without a round trip of its own. */
    for (size_t w = 0; c->durable && w < c->nwork; w++) {
        run_item *it = &c->items[c->s->work[w]];
        if (!it->counted)
            continue;
        if (taken_over || w != 0)
            call_one(c, w);
        break;
    }
    run_taken_over(c);
}

/* ---- transactional handlers --------------------------------------------- */

/* The work of one transactional item, inside the recorder's transaction:
 * its handler, with a bus that stages what it publishes in the outbox. */
typedef struct txn_ctx {
    run_ctx *c;
    size_t base; /* keys[0] of this transact call is transactional item `base` */
} txn_ctx;

static bool txn_work(void *arg, size_t i, ib__txn *txn)
{
    txn_ctx *t = arg;
    run_ctx *c = t->c;
    const ib_dispatch_options *o = &c->r->opts;
    run_item *it = &c->items[c->s->work[c->nwork + t->base + i]];
    ib__done d = {.result = R_RUN};
    call_handler(c, it, o->transactional_bus(o->observer_ctx, c->bus, txn), &d, false);
    it->result = d.result;
    it->seconds = d.seconds;
    it->note = d.note;
    return it->result == R_OK;
}

/* What one transaction made of transactional items [from, from + n). A
 * handler that said OK but whose transaction failed kept nothing: it is
 * retried like a RETRY. */
static void take_txn_results(run_ctx *c, size_t from, size_t n)
{
    run_scratch *s = c->s;
    for (size_t k = from; k < from + n; k++) {
        run_item *it = &c->items[s->work[c->nwork + k]];
        switch (s->txn_out[k]) {
        case IB__TXN_COMMITTED:
            it->result = R_MARKED;
            s->lease_live[it->work] = false;
            break;
        case IB__TXN_ROLLED_BACK:
            if (it->result == R_OK)
                it->result = R_RETRY;
            break;
        case IB__TXN_LOST:
            it->result = R_LOST;
            break;
        case IB__TXN_DONE:
            it->result = R_DONE;
            break;
        default:
            it->result = R_TXN_FAILED;
            break;
        }
    }
}

/* Runs the transactional handlers one at a time on the run thread, in
 * transactions that each hold them for at most the commit window, and
 * settles what each commit made durable; the requests posted meanwhile
 * are served between two transactions. A transaction that cannot start
 * leaves the rest not run (NAK'ed with the back-off). */
static void run_transactional(run_ctx *c)
{
    run_scratch *s = c->s;
    ib__drun *r = c->r;
    for (size_t k = 0; k < c->ntxn; k++) {
        const run_item *it = &c->items[s->work[c->nwork + k]];
        s->keys[k] = (ib_marker_key){it->h->consumer, ib__run_item_id(c, it)};
        s->key_fps[k] = s->fps[it->delivery];
        s->txn_out[k] = IB__TXN_NOT_RUN;
    }
    for (size_t done = 0; done < c->ntxn;) {
        /* a call on a claim taken over runs alone, its attempt counted
         * first (run_alone); the others up to the next such one share */
        run_item *first = &c->items[s->work[c->nwork + done]];
        size_t limit = 1;
        if (c->durable && first->taken_over && !first->counted) {
            if (!count_first(c, first)) {
                done++;
                continue;
            }
        } else {
            while (done + limit < c->ntxn) {
                const run_item *next = &c->items[s->work[c->nwork + done + limit]];
                if (c->durable && next->taken_over && !next->counted)
                    break;
                limit++;
            }
        }
        ib__txn_request req = {.owner = r->opts.owner,
                               .fingerprints = s->key_fps + done,
                               .hold_ms = r->opts.commit_interval_ms};
        txn_ctx t = {.c = c, .base = done};
        size_t consumed = 0;
        ib_error e = {0};
        ib_status st = ib__recorder_transact(r->recorder, s->txn_out + done, &consumed,
                                             s->keys + done, limit, &req, txn_work, &t, &e);
        if (st != IB_OK || consumed == 0) {
            take_txn_results(c, done, c->ntxn - done);
            recorder_failed(c, &e, st != IB_OK ? st : IB_ERR_RECORDER);
            break;
        }
        recorder_worked(c);
        take_txn_results(c, done, consumed);
        done += consumed;
        settle_ready(c);
        serve(c, 0);
    }
}

/* Whether the batch takes in more deliveries now (grow): it may, no more
 * than `concurrency` of its calls are left to finish (so a worker is
 * about to fall idle), nothing of the recorder is failing and every
 * circuit is closed (so no call taken in is one a circuit should hold). */
static bool may_grow(const run_ctx *c)
{
    const ib__drun *r = c->r;
    if (c->more == NULL || c->n >= c->more->cap || c->commit_failing || r->recorder_down)
        return false;
    if (c->want - c->ndone > r->opts.concurrency)
        return false;
    for (size_t h = 0; c->cs != NULL && h < r->nhandlers; h++)
        if (ib__circuit_state(c->cs, h) != IB_CIRCUIT_CLOSED)
            return false;
    return true;
}

static size_t prepare_part(run_ctx *c, size_t from);

/* Takes in the deliveries the caller has ready (c->more), up to its room,
 * and goes through steps 1 to 3 for them as for the batch's own: their
 * items follow any earlier item of their key in the run, their keys are
 * claimed in one call, and their calls go to the workers at once, the
 * ones on claims taken over left to run alone after the others. */
static void grow(run_ctx *c)
{
    size_t from = c->n, first_item = c->total, first_work = c->nwork;
    size_t got = c->more->take(c->more->ctx, c->dl + c->n, c->more->cap - c->n);
    if (got == 0)
        return;
    if (got > c->more->cap - c->n)
        got = c->more->cap - c->n;
    c->n += got;
    prepare_part(c, from);
    plan(c, from);
    claim(c, from, first_item);
    settle_ready(c);
    for (size_t w = first_work; w < c->nwork; w++)
        c->want += !waits_to_run_alone(c, &c->items[c->s->work[w]]);
    ib__pool_extend(c->r->pool, c->nwork);
}

/* The batch's calls together on the pool: the run thread takes each
 * completion as it comes, commits on the commit interval and holds the
 * pool while a commit fails. The hold ends (commit_all) before the loop
 * can finish. Between completions the batch grows (grow); the calls
 * waiting to run alone run once the loop is over. */
static void run_parallel(run_ctx *c)
{
    c->want = c->ndone;
    for (size_t w = 0; w < c->nwork; w++)
        c->want += !c->items[c->s->work[w]].finished;
    if (c->commit_failing)
        commit_all(c);
    ib__pool_start(c->r->pool, run_any, c, c->nwork);
    /* one look at the caller's deliveries per wake-up: when it has none
     * ready, the next completion is the next chance */
    while (c->ndone < c->want) {
        serve(c, next_due(c));
        if (may_grow(c))
            grow(c);
    }
    commit_all(c);
    ib__pool_finish(c->r->pool);
    run_taken_over(c);
}

/* Whether the last call of the handler of `it` outlasted the commit
 * interval (or is not known): its call must not start while marks wait. */
static bool handler_slow(const run_ctx *c, const run_item *it)
{
    const ib__drun *r = c->r;
    size_t hi = it->h->index;
    return r->last_call_ms == NULL || hi >= r->nhandlers ||
           r->last_call_ms[hi] >= r->opts.commit_interval_ms;
}

/* The batch's calls one at a time, in batch order, on the run thread
 * (call_inline): the pending marks are committed before the call of a
 * handler whose last call outlasted the commit interval, and a failed
 * commit lands before the next call starts. */
static void run_in_order(run_ctx *c)
{
    ib__drun *r = c->r;
    for (size_t w = 0; w < c->nwork; w++) {
        run_item *it = &c->items[c->s->work[w]];
        /* a call that ran alone (run_alone) is only looked at */
        if (!it->finished) {
            if (handler_slow(c, it))
                commit(c, true);
            if (c->commit_failing)
                commit_all(c);
            call_inline(c, w);
        }
        if (r->last_call_ms != NULL && it->h->index < r->nhandlers)
            r->last_call_ms[it->h->index] = (int64_t)(it->seconds * 1000);
        if (!commit(c, false) && c->commit_failing)
            commit_all(c);
    }
}

static void run_handlers(run_ctx *c)
{
    /* A single call is not worth two thread hand-offs. */
    c->parallel = c->r->pool != NULL && c->nwork > 1;
    run_alone(c);
    if (c->parallel)
        run_parallel(c);
    else
        run_in_order(c);
    commit_all(c);
    if (c->ntxn > 0)
        run_transactional(c);
}

/* ---- entry -------------------------------------------------------------- */

/* The run's claims and marks go through the recorder's *_checked entry
 * points, which rely on these checks instead of repeating them per key. */
static ib_status check_deliveries(const ib_delivery *dl, size_t n, ib_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const ib_event *ev = dl[i].event;
        if (ev == NULL || ev->type == NULL)
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "dispatch run: delivery %zu has no decoded event", i);
        if (!ib_id_is_normalised(ev->id))
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "dispatch run: delivery %zu has an id that is not normalised", i);
    }
    return IB_OK;
}

/* Finds the handler lists of the deliveries from `from` on and resets
 * their outputs; returns the run's item count with them. A delivery taken
 * in (grow) that ib_dispatch_run would refuse gets no item and is nak'ed
 * at once: the caller broke the contract, and nothing of it may run. */
static size_t prepare_part(run_ctx *c, size_t from)
{
    run_scratch *s = c->s;
    size_t total = from == 0 ? 0 : s->first[from];
    for (size_t i = from; i < c->n; i++) {
        size_t count = 0;
        bool refused = from > 0 && check_deliveries(&c->dl[i], 1, NULL) != IB_OK;
        s->first[i] = total;
        s->lists[i] = refused ? NULL : ib__dtable_lookup(c->r->table, c->dl[i].event->type, &count);
        total += count;
        ib_delivery *dl = &c->dl[i];
        dl->outcome = IB_OUTCOME_ACK;
        dl->dead_letter_reason = IB_DLQ_OTHER;
        dl->nak_delay_ms = 0;
        dl->reject_detail = NULL;
        dl->dead_letter_consumer = NULL;
        dl->attempts = 0;
        dl->exhausted = false;
        memset(&dl->counts, 0, sizeof(dl->counts));
        dl->handle_seconds = 0;
        dl->settled_early = false;
        s->settled[i] = refused;
        if (refused) {
            dl->outcome = IB_OUTCOME_NAK;
            dl->nak_delay_ms = c->r->opts.nak_base_delay_ms;
        }
    }
    s->first[c->n] = total;
    return total;
}

/* Whether a batch may grow at all: on the pool, with no transactional
 * handler (those run after the pool's calls, in the recorder's
 * transaction). */
static bool may_ever_grow(const ib__drun *r)
{
    size_t count = 0;
    if (r->pool == NULL)
        return false;
    ib__dtable_handler(r->table, 0, &count);
    for (size_t i = 0; i < count; i++)
        if (ib__dtable_handler(r->table, i, &count)->transactional)
            return false;
    return true;
}

/* Sizes the scratch for the batch (for all it may grow to: buffers the
 * workers read are never moved while they run), then prepares its
 * deliveries. */
static ib_status prepare(run_ctx *c)
{
    run_scratch *s = c->s;
    if (c->more != NULL && !may_ever_grow(c->r))
        c->more = NULL;
    size_t dmax = c->more != NULL ? c->more->cap : c->n;
    if (!ib__run_scratch_reserve(s, dmax, 0))
        return ib_error_set(c->err, IB_ERR_NOMEM, "dispatch run: no memory for %zu deliveries",
                            dmax);
    size_t total = prepare_part(c, 0);
    if (total >= UINT32_MAX / 2)
        return ib_error_set(c->err, IB_ERR_INVALID_ARG,
                            "dispatch run: %zu handler calls in one batch is too many", total);
    size_t imax = total;
    if (c->more != NULL) {
        size_t widest = ib__dtable_widest(c->r->table);
        if (widest > 0 && dmax < UINT32_MAX / 4 / widest && dmax * widest > total)
            imax = dmax * widest;
        else if (widest > 0 && dmax >= UINT32_MAX / 4 / widest)
            c->more = NULL; /* a room that large is not worth its buffers */
    }
    if (!ib__run_scratch_reserve(s, dmax, imax) || !ib__doneq_reserve(c->r->done, imax))
        return ib_error_set(c->err, IB_ERR_NOMEM, "dispatch run: no memory for %zu handler calls",
                            imax);
    c->items = s->items;
    if (imax == 0)
        return IB_OK; /* nothing to plan, and no set reserved */
    c->seen_cap = 16;
    while (c->seen_cap < imax * 2)
        c->seen_cap *= 2;
    memset(s->seen, 0, c->seen_cap * sizeof(*s->seen));
    return IB_OK;
}

/* The run's circuits: made at the first batch (every handler is
 * registered by then), NULL while circuits are off or out of memory (the
 * handlers then simply run: no circuit is better than no batch). */
static ib__circuits *circuits_of(ib__drun *r)
{
    ib__circuits *cs = atomic_load_explicit(&r->circuits, memory_order_acquire);
    if (cs != NULL || !r->opts.circuit.enabled)
        return cs;
    size_t n = 0;
    ib__dtable_handler(r->table, 0, &n);
    cs = ib__circuits_create(n, &r->opts.circuit);
    atomic_store_explicit(&r->circuits, cs, memory_order_release);
    return cs;
}

static ib_status run_locked(run_ctx *c)
{
    ib_status st = prepare(c);
    if (st != IB_OK)
        return st;
    c->r->last_recorder_seconds = 0;
    if (c->r->last_call_ms == NULL) {
        size_t nh = 0;
        ib__dtable_handler(c->r->table, 0, &nh);
        c->r->last_call_ms = nh > 0 ? calloc(nh, sizeof(*c->r->last_call_ms)) : NULL;
        c->r->nhandlers = c->r->last_call_ms != NULL ? nh : 0;
        /* unknown yet: taken as slow, so the first calls wait for nothing */
        for (size_t i = 0; i < c->r->nhandlers; i++)
            c->r->last_call_ms[i] = INT64_MAX;
    }
    if (c->s->first[c->n] > 0) {
        c->durable = ib_recorder_has_durable_attempts(c->r->recorder);
        c->last_commit_ms = ib_clock_monotonic_ms();
        c->now_ms = c->last_commit_ms;
        c->cs = circuits_of(c->r);
        plan(c, 0);
        ib__run_choose_probes(c);
        int64_t t0 = ib_clock_monotonic_ns();
        claim(c, 0, 0);
        double claim_seconds = seconds_since(t0);
        /* The commit interval counts from the claim's write: a claim that
         * waited for the file's turn has not made any mark wait, and must
         * not make the first call's mark a transaction of its own. */
        c->last_commit_ms = ib_clock_monotonic_ms();
        settle_ready(c);
        run_handlers(c);
        leases_done(c->r);
        int64_t t2 = ib_clock_monotonic_ns();
        release(c);
        c->now_ms = ib_clock_monotonic_ms();
        ib_error e = {0};
        ib_status st = ib__run_circuits_update(c, &e);
        if (st != IB_OK)
            recorder_failed(c, &e, st);
        c->r->last_recorder_seconds = claim_seconds + seconds_since(t2) + c->recorder_seconds;
    }
    for (size_t i = 0; i < c->n; i++)
        if (!c->s->settled[i])
            ib__run_decide(c, i);
    return IB_OK;
}

ib_status ib__drun_batch(ib__drun *r, ib_delivery *deliveries, size_t n,
                         const ib_dispatch_more *more, size_t *ran, ib_bus_proxy *bus,
                         ib_error *err)
{
    ib_status st = check_deliveries(deliveries, n, err);
    if (st != IB_OK)
        return st;
    ib_error_clear(err);

    run_ctx c = {
        .r = r, .s = &r->scratch, .dl = deliveries, .n = n, .more = more, .bus = bus, .err = err};
    pthread_mutex_lock(&r->run_mu);
    pthread_mutex_lock(&r->serve_mu);
    st = run_locked(&c);
    pthread_mutex_unlock(&r->serve_mu);
    pthread_mutex_unlock(&r->run_mu);
    *ran = c.n;
    return st;
}

/* ---- life cycle --------------------------------------------------------- */

ib_status ib__drun_create(ib__drun **out, ib_recorder *recorder, const ib__dtable *table,
                          const ib_dispatch_options *opts, ib_error *err)
{
    ib_status st;

    *out = NULL;
    ib__drun *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the batch flow");
    r->recorder = recorder;
    r->table = table;
    r->opts = *opts;
    if (pthread_mutex_init(&r->run_mu, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the run mutex");
        goto free_run;
    }
    if (pthread_mutex_init(&r->lease_mu, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the lease mutex");
        goto destroy_run_mu;
    }
    if (pthread_mutex_init(&r->serve_mu, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the serve mutex");
        goto destroy_lease_mu;
    }
    atomic_init(&r->circuits, NULL);
    st = ib__doneq_create(&r->done, err);
    if (st != IB_OK)
        goto destroy_serve_mu;
    st = ib__doneq_start_stand_in(r->done, stand_in, r, err);
    if (st != IB_OK)
        goto free_done;
    if (r->opts.concurrency > 1) {
        st = ib__pool_create(&r->pool, r->opts.concurrency, err);
        if (st != IB_OK)
            goto free_done;
    }
    *out = r;
    return IB_OK;

free_done:
    ib__doneq_free(r->done);
destroy_serve_mu:
    pthread_mutex_destroy(&r->serve_mu);
destroy_lease_mu:
    pthread_mutex_destroy(&r->lease_mu);
destroy_run_mu:
    pthread_mutex_destroy(&r->run_mu);
free_run:
    free(r);
    return st;
}

void ib__drun_free(ib__drun *r)
{
    if (r == NULL)
        return;
    ib__pool_free(r->pool);
    ib__doneq_free(r->done);
    ib__circuits_free(atomic_load(&r->circuits));
    pthread_mutex_destroy(&r->run_mu);
    pthread_mutex_destroy(&r->lease_mu);
    pthread_mutex_destroy(&r->serve_mu);
    ib__run_scratch_free(&r->scratch);
    free(r->last_call_ms);
    free(r);
}
