/* SPDX-License-Identifier: Apache-2.0 */
/* What a delivery's items add up to once the batch is over: one table
 * from an item's result to what the observer hears and what it counts
 * as, then the outcome by the rules of dispatch.h. Run thread only. */
#include "dispatch_run_state.h"

/* What an item's final result counts as in its delivery (tally). */
enum result_kind {
    K_DUPLICATE, /* marked before: a duplicate */
    K_HANDLED,   /* ran and marked (a follower of it: a duplicate) */
    K_EXHAUSTED, /* the poison rule: attempts used up, not marked */
    K_WAITING,   /* its circuit is open (or opened during the batch) */
    K_BUSY,      /* another owner holds its claim */
    K_REJECTED,  /* its handler said REJECT */
    K_LOST,      /* its claim was taken over, before or after the call */
    K_RECORDER,  /* a claim or transaction failed: not run */
    K_CONFLICT,  /* marked with another fingerprint */
    K_SKIPPED,   /* acquired, not run: its delivery conflicts */
    K_RETRIED,   /* its handler said RETRY */
    K_ORDERED,   /* not run: an earlier delivery of its order key did not succeed */
};

/* observed: no handler call to report for this result. */
#define NOT_OBSERVED (-1)

/* The one table from an item's result to what the observer hears of it
 * (a follower of a handled leader hears IB_RESULT_DUPLICATE) and what it
 * counts as. Results of the claim and call phases that a finished batch
 * cannot leave behind count as a RETRY, the safe reading. */
typedef struct result_rule {
    int observed; /* ib_handler_result, or NOT_OBSERVED */
    enum result_kind kind;
} result_rule;

static const result_rule result_rules[R_COUNT] = {
    [R_CLAIM] = {NOT_OBSERVED, K_RETRIED},
    [R_FOLLOW] = {NOT_OBSERVED, K_RETRIED},
    [R_POISON_CHECK] = {NOT_OBSERVED, K_RETRIED},
    [R_POISON_DONE] = {IB_RESULT_DUPLICATE, K_DUPLICATE},
    [R_POISON_OPEN] = {NOT_OBSERVED, K_EXHAUSTED},
    [R_DONE] = {IB_RESULT_DUPLICATE, K_DUPLICATE},
    [R_BUSY] = {NOT_OBSERVED, K_BUSY},
    [R_CLAIM_FAILED] = {IB_RESULT_RECORDER_FAILED, K_RECORDER},
    [R_RUN] = {NOT_OBSERVED, K_RETRIED},
    [R_OK] = {NOT_OBSERVED, K_RETRIED},
    [R_RETRY] = {IB_RESULT_RETRY, K_RETRIED},
    [R_REJECT] = {IB_RESULT_REJECT, K_REJECTED},
    [R_MARKED] = {IB_RESULT_HANDLED, K_HANDLED},
    [R_LOST] = {IB_RESULT_LOST, K_LOST},
    [R_CONFLICT] = {IB_RESULT_CONFLICT, K_CONFLICT},
    [R_SKIPPED] = {NOT_OBSERVED, K_SKIPPED},
    [R_TXN_FAILED] = {IB_RESULT_RECORDER_FAILED, K_RECORDER},
    [R_WAIT] = {IB_RESULT_WAITING, K_WAITING},
    [R_HELD_BACK] = {IB_RESULT_WAITING, K_WAITING},
    [R_UNRUN] = {IB_RESULT_LOST, K_LOST},
    [R_ORDER_HELD] = {NOT_OBSERVED, K_ORDERED},
};

/* Reports one item's result to the observer: a leader's, if it ran or
 * failed to start for a recorder error; any item's that was skipped as
 * already marked (a follower of a leader that succeeded included), so
 * duplicates reach the observer exactly as tally() counts them. */
static void observe(run_ctx *c, const ib_delivery *dl, const run_item *it)
{
    const ib_dispatch_options *o = &c->r->opts;
    bool follower = it->result == R_FOLLOW;
    const result_rule *rule = &result_rules[follower ? c->items[it->leader].result : it->result];
    int res = follower && rule->kind == K_HANDLED ? IB_RESULT_DUPLICATE : rule->observed;
    if (res == NOT_OBSERVED)
        return; /* busy, poisoned, skipped: no handler call to report */
    if (follower && res != IB_RESULT_DUPLICATE)
        return; /* coalesced: its leader's call was reported */
    o->observer(o->observer_ctx, dl, it->h->consumer, it->h->index, (ib_handler_result)res,
                follower ? 0 : it->seconds);
}

/* What one delivery's items add up to. */
typedef struct verdicts {
    bool reject, retry, busy, open, conflict, wait;
    int64_t busy_ms;         /* longest remaining lease among the busy ones */
    int64_t wait_ms;         /* longest wait for an open circuit's next probe */
    int64_t retry_after_ms;  /* longest delay a retrying handler asked for; < 0: none */
    const char *reason;      /* the first rejecting handler's reason; NULL: none */
    const char *rejected_by; /* whose: that handler's identity, else the first rejecting one */
    /* the poison rule's first open item: its last failure's reason (NULL:
     * none given, or it did not run here), its attempts, and whether they
     * were used up before this delivery */
    const char *last;
    const char *last_by; /* the identity of that item's handler */
    uint32_t attempts;
    bool exhausted;
} verdicts;

/* A handler whose circuit is open: the delivery comes back once its next
 * probe may have run (at once, when the probe closed it in this batch). */
static void wait_for_circuit(const run_ctx *c, verdicts *v, const run_item *it)
{
    int64_t ms = c->cs != NULL ? ib__circuit_wait_ms(c->cs, it->h->index, c->now_ms) : 0;
    v->wait = true;
    if (ms > v->wait_ms)
        v->wait_ms = ms;
}

/* The poison rule applies to `it`: remembers, for the dead letter, what
 * its handler last said and how many attempts it made. */
static void poison_open(verdicts *v, const run_item *it, bool exhausted)
{
    if (!v->open) {
        v->last = it->note.reason[0] != '\0' ? it->note.reason : NULL;
        v->last_by = it->h->consumer;
        v->attempts = it->attempts;
        v->exhausted = exhausted;
        /* used up by calls that never returned: each was counted as it
         * started, alone, by the holder this claim was taken from */
        if (exhausted && it->taken_over) {
            v->last = "the call did not return (the process running it ended or was stopped "
                      "during it)";
            v->exhausted = false;
        }
    }
    v->open = true;
}

/* Another owner holds an item's claim for up to `remaining_ms` more: the
 * delivery comes back once the longest such lease may have ended. */
static void wait_for_holder(verdicts *v, int64_t remaining_ms)
{
    v->busy = true;
    if (remaining_ms > v->busy_ms)
        v->busy_ms = remaining_ms;
}

/* What a RETRY asks of the outcome. Held by its open circuit: it waits,
 * its attempts ended. With durable attempts, a RETRY on the last allowed
 * attempt ends the event's retries here. Else the back-off, or the delay
 * the handler asked for. */
static void tally_retry(const run_ctx *c, verdicts *v, const run_item *lead)
{
    if (lead->held)
        wait_for_circuit(c, v, lead);
    else if (c->durable && c->r->opts.max_deliver != 0 && lead->attempts >= c->r->opts.max_deliver)
        poison_open(v, lead, false);
    else
        v->retry = true;
    if (lead->note.retry_after_ms > v->retry_after_ms)
        v->retry_after_ms = lead->note.retry_after_ms;
}

/* Counts one item and notes what it asks of the outcome. A follower counts
 * as a duplicate when its leader succeeded, else as coalesced. */
static void tally(run_ctx *c, ib_delivery *dl, const run_item *it, verdicts *v)
{
    ib_delivery_counts *n = &dl->counts;
    bool follower = it->result == R_FOLLOW;
    const run_item *lead = follower ? &c->items[it->leader] : it;
    unsigned *own = NULL;
    switch (result_rules[lead->result].kind) {
    case K_DUPLICATE:
        n->duplicates++;
        return;
    case K_HANDLED:
        if (follower)
            n->duplicates++;
        else
            n->handled++;
        return;
    case K_EXHAUSTED:
        poison_open(v, lead, true);
        n->exhausted += !follower;
        return;
    case K_WAITING:
        wait_for_circuit(c, v, lead);
        own = &n->waiting;
        break;
    case K_BUSY:
        wait_for_holder(v, lead->busy_ms);
        own = &n->busy;
        break;
    case K_REJECTED:
        v->reject = true;
        if (v->rejected_by == NULL)
            v->rejected_by = lead->h->consumer;
        if (v->reason == NULL && lead->note.reason[0] != '\0') {
            v->reason = lead->note.reason;
            v->rejected_by = lead->h->consumer;
        }
        own = &n->rejected;
        break;
    case K_LOST:
        /* the new holder decides; come back when its lease may have ended */
        wait_for_holder(v, c->r->opts.lease_ms);
        own = &n->lost;
        break;
    case K_RECORDER:
        v->retry = true;
        own = &n->recorder_failed;
        break;
    case K_CONFLICT:
        /* a follower of a conflicting leader carries the same content */
        v->conflict = true;
        n->conflicts++;
        return;
    case K_SKIPPED:
        if (follower) {
            v->retry = true; /* its own delivery did not conflict: try again */
            n->coalesced++;
        } else {
            n->conflicts++;
        }
        return;
    case K_RETRIED:
        tally_retry(c, v, lead);
        own = &n->retried;
        break;
    case K_ORDERED:
        v->retry = true; /* after the delivery it waits for */
        own = &n->waiting;
        break;
    }
    if (follower)
        n->coalesced++;
    else
        (*own)++;
}

/* How long a busy copy waits before it comes back. Where attempts are
 * counted, a busy delivery spends nothing, so it may come back soon: after
 * busy_delay_ms doubling per delivery, at most the holder's remaining
 * lease (most holders finish in milliseconds, and a copy that waited out a
 * whole lease would hold its event back for that long). Where deliveries
 * are the budget (memory), it waits the whole remaining lease. */
static int64_t busy_wait_ms(const run_ctx *c, const ib_delivery *dl, int64_t remaining_ms)
{
    if (!c->durable)
        return remaining_ms;
    uint64_t dc = dl->delivery_count > 1 ? dl->delivery_count - 1 : 0;
    int64_t step = c->r->opts.busy_delay_ms;
    for (uint64_t k = 0; k < dc && step < remaining_ms; k++)
        step *= 2;
    return step < remaining_ms ? step : remaining_ms;
}

/* The outcome of a delivery whose items added up to `v`. REJECT wins, then
 * a RETRY or failed claim, then a conflict (dead-lettered or acked, as
 * on_conflict says), then the poison rule, then a busy claim; ACK when
 * none of them applies. */
static void choose_outcome(const run_ctx *c, ib_delivery *dl, const verdicts *v)
{
    const ib_dispatch_options *o = &c->r->opts;
    if (v->reject) {
        dl->outcome = IB_OUTCOME_DEAD_LETTER;
        dl->dead_letter_reason = IB_DLQ_REJECTED;
        dl->reject_detail = v->reason;
        dl->dead_letter_consumer = v->rejected_by;
    } else if (v->retry) {
        dl->outcome = IB_OUTCOME_NAK;
        dl->nak_delay_ms = v->retry_after_ms >= 0 ? ib_dispatch_retry_after_ms(o, v->retry_after_ms)
                                                  : ib_dispatch_backoff_ms(o, dl->delivery_count);
    } else if (v->conflict) {
        dl->outcome =
            o->on_conflict == IB_CONFLICT_DEAD_LETTER ? IB_OUTCOME_DEAD_LETTER : IB_OUTCOME_ACK;
        if (dl->outcome == IB_OUTCOME_DEAD_LETTER)
            dl->dead_letter_reason = IB_DLQ_CONFLICT;
    } else if (v->open) {
        dl->outcome = IB_OUTCOME_DEAD_LETTER;
        dl->dead_letter_reason = IB_DLQ_MAX_DELIVER;
        dl->reject_detail = v->last;
        dl->dead_letter_consumer = v->last_by;
        dl->attempts = c->durable ? v->attempts : 0; /* memory: deliveries are the budget */
        dl->exhausted = v->exhausted;
    } else if (v->busy || v->wait) {
        int64_t busy = v->busy ? busy_wait_ms(c, dl, v->busy_ms) : 0;
        dl->outcome = IB_OUTCOME_NAK;
        dl->nak_delay_ms = ib_dispatch_busy_delay_ms(o, busy > v->wait_ms ? busy : v->wait_ms);
    } else {
        dl->outcome = IB_OUTCOME_ACK;
    }
}

/* Fills delivery i's outputs: its counters, its handlers' time, the
 * observer's reports and its outcome. */
void ib__run_decide(run_ctx *c, size_t i)
{
    ib_delivery *dl = &c->dl[i];
    const ib_dispatch_options *o = &c->r->opts;
    size_t first = c->s->first[i], end = c->s->first[i + 1];
    verdicts v = {.retry_after_ms = -1};

    if (first == end) {
        dl->counts.unhandled = true;
        dl->outcome = IB_OUTCOME_ACK;
        return;
    }
    for (size_t j = first; j < end; j++) {
        const run_item *it = &c->items[j];
        dl->handle_seconds += it->seconds;
        if (o->observer != NULL)
            observe(c, dl, it);
        tally(c, dl, it, &v);
    }
    choose_outcome(c, dl, &v);
}
