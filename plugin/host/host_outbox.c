/* SPDX-License-Identifier: Apache-2.0 */
/* The transactional outbox as the host runs it.
 *
 * A transactional handler's publishes are staged in the marker file's
 * outbox table inside its transaction (ib__recorder_transact), so they
 * commit with its marker or vanish with it. This file hands such a handler
 * the bus that stages (ib__host_transactional_bus) and sends what the
 * outbox holds: each entry is published with Nats-Msg-Id set to the new
 * event's id, and deleted only once JetStream has acknowledged it. A crash
 * between the two sends it again; the stream's duplicate window drops the
 * copy, and the downstream consumer's markers cover the rest.
 *
 * When it sends: at start-up before the first pull, after a batch that
 * staged something, after every reconnect, and every OUTBOX_SWEEP_MS in
 * any case (so entries another process left behind go out even if that
 * process never comes back). A failed send keeps its entry and everything
 * staged after it (order is kept) and is retried with back-off. All of it
 * runs on the main thread, between batches. */
#include "host_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"

#define OUTBOX_PEEK 128
#define OUTBOX_SWEEP_MS 5000
#define OUTBOX_BACKOFF_MIN_MS 250
#define OUTBOX_BACKOFF_MAX_MS 5000

/* The bus proxy's staging hook: the outbox row joins the handler's
 * savepoint. */
static ib_status stage_in_txn(void *ctx, const char *subject, const char *msg_id,
                              const uint8_t *data, size_t len, ib_error *err)
{
    ib_host *h = ctx;
    ib_status st = ib__txn_outbox_put(h->batch.outbox.txn, subject, msg_id, data, len, err);
    if (st == IB_OK)
        h->batch.outbox.dirty = true;
    return st;
}

ib_bus_proxy *ib__host_transactional_bus(void *ctx, ib_bus_proxy *bus, ib__txn *txn)
{
    ib_host *h = ctx;
    ib_host_outbox *o = &h->batch.outbox;
    o->txn = txn;
    o->bus = bus != NULL ? *bus : h->batch.bus;
    o->bus.stage = stage_in_txn;
    o->bus.stage_ctx = h;
    o->bus.db = ib__txn_db(txn);
    return &o->bus;
}

/* Publishes entries in order until one fails; returns how many went out
 * (their seqs in `seqs`) and sets *failed with the error of the first that
 * did not. */
static size_t send_entries(ib_host *h, const ib__outbox_entry *es, size_t n, int64_t *seqs,
                           bool *failed, ib_error *e)
{
    size_t sent = 0;
    *failed = false;
    for (size_t i = 0; i < n; i++) {
        if (ib_bus_publish_staged(&h->batch.bus, es[i].subject, es[i].msg_id, es[i].data, es[i].len,
                                  e) != IB_OK) {
            *failed = true;
            break;
        }
        seqs[sent++] = es[i].seq;
    }
    return sent;
}

/* One round: peek, send, delete what was sent. Returns the number sent, or
 * -1 when a send or a recorder call failed (`e` says which). */
static long flush_round(ib_host *h, bool *more, ib_error *e)
{
    ib__outbox_entry *es = NULL;
    size_t n = 0;
    int64_t seqs[OUTBOX_PEEK];
    bool failed = false;

    *more = false;
    if (ib__recorder_outbox_peek(h->recorder, &es, &n, OUTBOX_PEEK, e) != IB_OK)
        return -1;
    size_t sent = send_entries(h, es, n, seqs, &failed, e);
    ib__outbox_entries_free(es, n);
    ib_error de;
    if (sent > 0 && ib__recorder_outbox_delete(h->recorder, seqs, sent, &de) != IB_OK) {
        /* sent but still staged: sent again later, and dropped as a copy */
        *e = de;
        return -1;
    }
    h->batch.outbox.sent += sent;
    *more = !failed && n == OUTBOX_PEEK;
    return failed ? -1 : (long)sent;
}

/* Logs a change between sending and failing, once per change. */
static void note_state(ib_host_outbox *o, bool failing, const ib_error *e)
{
    if (failing == o->failing)
        return;
    o->failing = failing;
    if (failing)
        ib_log_kv(IB_SEV_WARN, "outbox: cannot send staged events; kept and retried", "error",
                  e->msg, NULL);
    else
        ib_log_kv(IB_SEV_INFO, "outbox: sending again", NULL);
}

int ib__host_outbox_flush(ib_host *h)
{
    ib_host_outbox *o = &h->batch.outbox;
    ib_error e = {0};
    bool more = true;
    long total = 0;
    if (h->recorder == NULL || !ib__recorder_has_transactions(h->recorder))
        return 0;
    o->dirty = false;
    while (more) {
        long sent = flush_round(h, &more, &e);
        if (sent < 0) {
            o->dirty = true;
            o->backoff_ms = o->backoff_ms <= 0                       ? OUTBOX_BACKOFF_MIN_MS
                            : o->backoff_ms >= OUTBOX_BACKOFF_MAX_MS ? OUTBOX_BACKOFF_MAX_MS
                                                                     : o->backoff_ms * 2;
            o->retry_at_ms = ib_clock_monotonic_ms() + o->backoff_ms;
            o->sweep_at_ms = o->retry_at_ms;
            note_state(o, true, &e);
            return -1;
        }
        total += sent;
    }
    o->backoff_ms = 0;
    o->retry_at_ms = 0;
    o->sweep_at_ms = ib_clock_monotonic_ms() + OUTBOX_SWEEP_MS;
    note_state(o, false, NULL);
    if (total > 0)
        ib_log(IB_SEV_DEBUG, "outbox: sent staged events", IB_LOG_I64("count", total));
    return 0;
}

void ib__host_outbox_tick(ib_host *h)
{
    ib_host_outbox *o = &h->batch.outbox;
    if (h->recorder == NULL || !ib__recorder_has_transactions(h->recorder))
        return;
    uint64_t reconnects = ib_nats_reconnects(h->nats);
    if (reconnects != o->reconnects) {
        o->reconnects = reconnects;
        o->dirty = true;
        o->retry_at_ms = 0; /* the back-off is over: the server is back */
    }
    int64_t now = ib_clock_monotonic_ms();
    if ((o->dirty && now >= o->retry_at_ms) || now >= o->sweep_at_ms)
        ib__host_outbox_flush(h);
}
