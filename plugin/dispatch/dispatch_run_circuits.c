/* SPDX-License-Identifier: Apache-2.0 */
/* What the handlers' circuits (dispatch_circuit.h) hear of a batch run and
 * decide during it: probes chosen at the plan, each call told as the run
 * thread takes it, the rest judged together at the end. Run thread only. */
#include "clock.h"
#include "dispatch_run_state.h"

/* The hash a circuit keeps of an event id. */
static uint64_t event_hash(const run_ctx *c, const run_item *it)
{
    return ib__run_pair_hash(ib__run_item_id(c, it), 0) | 1u; /* never 0: 0 marks an empty slot */
}

static void tell_circuit(const run_ctx *c, const run_item *it, const ib__circuit_change *ch)
{
    const ib_dispatch_options *o = &c->r->opts;
    if (ch->changed && o->on_circuit != NULL)
        o->on_circuit(o->observer_ctx, it->h->index, it->h->consumer, ch->from, ch->to, ch->detail);
}

/* The first waiting item of handler `h` from item `from` on whose event
 * was not probed lately, else `from` itself. */
static size_t probe_pick(const run_ctx *c, size_t from)
{
    const ib__dhandler *h = c->items[from].h;
    for (size_t j = from; j < c->total; j++) {
        const run_item *it = &c->items[j];
        if (it->h == h && it->result == R_WAIT &&
            !ib__circuit_probed_lately(c->cs, h->index, event_hash(c, it)))
            return j;
    }
    return from;
}

/* For every open handler whose probe is due, one of its waiting items
 * becomes the probe: claimed and run like any other. */
void ib__run_choose_probes(run_ctx *c)
{
    uint64_t max_deliver = c->r->opts.max_deliver;
    for (size_t i = 0; c->cs != NULL && i < c->total; i++) {
        if (c->items[i].result != R_WAIT ||
            !ib__circuit_probe_due(c->cs, c->items[i].h->index, c->now_ms))
            continue;
        run_item *it = &c->items[probe_pick(c, i)];
        const ib_delivery *dl = &c->dl[it->delivery];
        bool poison = !c->durable && max_deliver != 0 && dl->delivery_count >= max_deliver;
        ib__circuit_change ch;
        ib__circuit_probe_start(c->cs, it->h->index, event_hash(c, it), &ch);
        it->result = poison ? R_POISON_CHECK : R_CLAIM;
        it->probe = true;
        tell_circuit(c, it, &ch);
    }
}

/* Whether a leader item's handler ran and returned a verdict. */
static bool item_ran(const run_item *it)
{
    return it->result == R_MARKED || it->result == R_LOST || it->result == R_REJECT ||
           it->result == R_RETRY;
}

/* Tells the circuit of a call that ran what it did, once, as soon as the
 * run thread sees it finished: an OK whose mark is still pending is a
 * success already, so the window never judges a batch's failures without
 * the successes around them. Returns whether it told. Run thread only. */
static bool circuit_add(run_ctx *c, run_item *it)
{
    ib__circuit_change ch;
    if (c->cs == NULL || it->recorded || !(it->result == R_OK || item_ran(it)))
        return false;
    bool failed = it->result == R_RETRY;
    it->recorded = true;
    /* only failures need their event told apart */
    ib__circuit_record(c->cs, it->h->index, failed ? event_hash(c, it) : 0, failed, it->note.reason,
                       ib_clock_monotonic_ms(), &ch);
    tell_circuit(c, it, &ch);
    return true;
}

/* Lets the circuit of `it` decide on the calls told so far (one that
 * opens then stops the batch's later calls of that handler). */
static void circuit_judge(run_ctx *c, const run_item *it, int64_t now)
{
    ib__circuit_change ch;
    ib__circuit_judge(c->cs, it->h->index, now, &ch);
    tell_circuit(c, it, &ch);
}

/* One call seen finished on its own: told, then judged. */
void ib__run_circuit_record(run_ctx *c, run_item *it)
{
    if (circuit_add(c, it))
        circuit_judge(c, it, ib_clock_monotonic_ms());
}

/* Tells each circuit what its handler's calls that it has not heard of
 * did (transactional ones; a probe that ran nothing), in batch order,
 * lets each judge them all together, then holds every RETRY whose
 * circuit is open now: it waits with the
 * others, and its attempts are ended, as are those of the calls the
 * circuit held back, so an outage spends no event's budget. */
ib_status ib__run_circuits_update(run_ctx *c, ib_error *e)
{
    ib__circuit_change ch;
    for (size_t i = 0; c->cs != NULL && i < c->total; i++) {
        run_item *it = &c->items[i];
        if (it->result == R_FOLLOW || it->result == R_WAIT || it->recorded)
            continue;
        if (item_ran(it) || it->result == R_OK) {
            circuit_add(c, it);
            continue;
        }
        if (!it->probe)
            continue;
        ib__circuit_probe_missed(c->cs, it->h->index, c->now_ms, &ch);
        tell_circuit(c, it, &ch);
    }
    for (size_t i = 0; c->cs != NULL && i < c->total; i++)
        if (c->items[i].recorded)
            circuit_judge(c, &c->items[i], c->now_ms);
    size_t nk = 0;
    for (size_t i = 0; c->cs != NULL && i < c->total; i++) {
        run_item *it = &c->items[i];
        bool retried = it->result == R_RETRY && ib__circuit_blocks(c->cs, it->h->index);
        if (!retried && it->result != R_HELD_BACK)
            continue;
        it->held = true;
        c->s->keys[nk++] = (ib_marker_key){it->h->consumer, ib__run_item_id(c, it)};
    }
    return nk > 0 ? ib_recorder_end_attempts(c->r->recorder, c->s->keys, nk, e) : IB_OK;
}
