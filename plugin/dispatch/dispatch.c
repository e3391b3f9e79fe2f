/* SPDX-License-Identifier: Apache-2.0 */
/* The dispatch table as callers see it: options, the owner token, and the
 * two objects it holds, the handler table (dispatch_table.c) and the batch
 * flow (dispatch_run.c). The struct is private to this file; the files
 * below it never see it. */
#include "dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "dispatch_circuit.h"
#include "dispatch_run.h"
#include "dispatch_table.h"
#include "owner.h"

struct ib_dispatch {
    char *owner;               /* the claim owner token; the run borrows it */
    ib__dtable *table;         /* handlers by type; filled by ib_dispatch_add */
    ib__drun *run;             /* reads the table; holds everything a batch needs */
    ib_recorder *recorder;     /* BORROWED: the run's */
    const char *recorder_kind; /* for the refusal of a transactional handler */
    bool transactions;         /* the recorder runs transactional work */
    bool transactional_bus;    /* the caller can make a transactional handler's bus */
};

static ib_status options_check(const ib_dispatch_options *o, ib_error *err)
{
    if (o->concurrency > IB_DISPATCH_MAX_CONCURRENCY)
        return ib_error_set(err, IB_ERR_CONFIG, "dispatch: concurrency %u is above the limit %d",
                            o->concurrency, IB_DISPATCH_MAX_CONCURRENCY);
    if (o->owner != NULL && strlen(o->owner) > IB_OWNER_MAX)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "dispatch: claim owner token is longer than %d bytes", IB_OWNER_MAX);
    return IB_OK;
}

/* Fills in the defaults of every option left at zero (or out of range),
 * so the run reads complete options. */
static void options_complete(ib_dispatch_options *o)
{
    if (o->lease_ms <= 0)
        o->lease_ms = IB_DISPATCH_DEFAULT_LEASE_MS;
    if (o->nak_base_delay_ms <= 0)
        o->nak_base_delay_ms = IB_DISPATCH_DEFAULT_NAK_BASE_MS;
    if (o->nak_max_delay_ms <= 0)
        o->nak_max_delay_ms = IB_DISPATCH_DEFAULT_NAK_MAX_MS;
    if (o->busy_delay_ms <= 0)
        o->busy_delay_ms = IB_DISPATCH_DEFAULT_BUSY_MS;
    if (o->nak_max_delay_ms < o->nak_base_delay_ms)
        o->nak_max_delay_ms = o->nak_base_delay_ms;
    /* Zero-initialised options get the default window; committing after
     * every handler is asked for with a negative value. */
    if (o->commit_interval_ms == 0)
        o->commit_interval_ms = IB_DISPATCH_DEFAULT_COMMIT_MS;
    else if (o->commit_interval_ms < 0)
        o->commit_interval_ms = 0;
    o->circuit = ib__circuit_options_complete(&o->circuit);
}

/* The caller's owner token, or a fresh one: two processes must never share
 * one, or each would take the other's claims as its own. */
static ib_status owner_copy(char **out, const char *owner, ib_error *err)
{
    char token[IB_OWNER_TOKEN_MAX];
    if (owner == NULL || owner[0] == '\0') {
        ib_status st = ib_owner_make(token, sizeof(token), "dispatch", err);
        if (st != IB_OK)
            return st;
        owner = token;
    }
    *out = strdup(owner);
    if (*out == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the owner token");
    return IB_OK;
}

ib_status ib_dispatch_create(ib_dispatch **out, ib_recorder *recorder,
                             const ib_dispatch_options *options, ib_error *err)
{
    static const ib_dispatch_options defaults = {0};

    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch create: no output");
    *out = NULL;
    if (recorder == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch create: no recorder");
    if (options == NULL)
        options = &defaults;
    ib_status st = options_check(options, err);
    if (st != IB_OK)
        return st;

    ib_dispatch *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the table");
    ib_dispatch_options opts = *options;
    options_complete(&opts);
    st = owner_copy(&d->owner, options->owner, err);
    if (st != IB_OK)
        goto free_dispatch;
    opts.owner = d->owner;
    st = ib__dtable_create(&d->table, err);
    if (st != IB_OK)
        goto free_owner;
    st = ib__drun_create(&d->run, recorder, d->table, &opts, err);
    if (st != IB_OK)
        goto free_table;
    d->recorder = recorder;
    d->recorder_kind = ib_recorder_kind(recorder);
    d->transactions = ib__recorder_has_transactions(recorder);
    d->transactional_bus = options->transactional_bus != NULL;
    *out = d;
    return IB_OK;

free_table:
    ib__dtable_free(d->table);
free_owner:
    free(d->owner);
free_dispatch:
    free(d);
    return st;
}

void ib_dispatch_free(ib_dispatch *d)
{
    if (d == NULL)
        return;
    /* the run first: its workers may still hold the table's handlers */
    ib__drun_free(d->run);
    ib__dtable_free(d->table);
    free(d->owner);
    free(d);
}

ib_status ib_dispatch_add(ib_dispatch *d, const ib_dispatch_handler *hd, ib_error *err)
{
    if (d == NULL || hd == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch add: no table or no handler");
    const char *name = hd->name != NULL ? hd->name : hd->consumer;
    if (hd->transactional && !d->transactions)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "handler %s is transactional: it needs the sqlite: recorder, whose "
                            "file can hold its writes beside the markers (this one is %s:)",
                            name != NULL ? name : "?", d->recorder_kind);
    if (hd->transactional && !d->transactional_bus)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "handler %s is transactional, but the dispatch options give no "
                            "transactional bus",
                            name != NULL ? name : "?");
    return ib__dtable_add(d->table, hd, err);
}

size_t ib_dispatch_count_for(const ib_dispatch *d, const char *type)
{
    size_t count;
    if (d == NULL)
        return 0;
    ib__dtable_lookup(d->table, type, &count);
    return count;
}

ib_status ib_dispatch_end_attempts(ib_dispatch *d, const ib_event *event, ib_error *err)
{
    enum { KEYS_AT_ONCE = 64 };
    ib_marker_key keys[KEYS_AT_ONCE];
    size_t count = 0;
    if (d == NULL || event == NULL || event->type == NULL || !ib_id_is_normalised(event->id))
        return IB_OK;
    ib__dhandler *const *list = ib__dtable_lookup(d->table, event->type, &count);
    ib_status st = IB_OK;
    for (size_t done = 0; done < count && st == IB_OK;) {
        size_t n = 0;
        for (; done < count && n < KEYS_AT_ONCE; done++, n++)
            keys[n] = (ib_marker_key){list[done]->consumer, event->id};
        st = ib_recorder_end_attempts(d->recorder, keys, n, err);
    }
    return st;
}

size_t ib_dispatch_handler_count(const ib_dispatch *d)
{
    size_t count = 0;
    if (d != NULL)
        ib__dtable_handler(d->table, 0, &count);
    return count;
}

const char *ib_dispatch_handler_consumer(const ib_dispatch *d, size_t index)
{
    size_t count;
    const ib__dhandler *h = d != NULL ? ib__dtable_handler(d->table, index, &count) : NULL;
    return h != NULL ? h->consumer : NULL;
}

ib_status ib_dispatch_run(ib_dispatch *d, ib_delivery *deliveries, size_t n, ib_bus_proxy *bus,
                          ib_error *err)
{
    size_t ran;
    return ib_dispatch_run_more(d, deliveries, n, NULL, &ran, bus, err);
}

ib_status ib_dispatch_run_more(ib_dispatch *d, ib_delivery *deliveries, size_t n,
                               const ib_dispatch_more *more, size_t *ran, ib_bus_proxy *bus,
                               ib_error *err)
{
    size_t none;
    if (ran == NULL)
        ran = &none;
    *ran = n;
    if (d == NULL || (deliveries == NULL && n > 0))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch run: no table or no deliveries");
    if (more != NULL && (more->take == NULL || more->cap < n))
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "dispatch run: room for %zu deliveries, below the batch's %zu",
                            more->cap, n);
    return ib__drun_batch(d->run, deliveries, n, more, ran, bus, err);
}

double ib_dispatch_recorder_seconds(const ib_dispatch *d)
{
    return ib__drun_recorder_seconds(d->run);
}

ib_status ib_dispatch_extend_leases(ib_dispatch *d, size_t *extended, size_t *lost, ib_error *err)
{
    return ib__drun_extend_leases(d->run, extended, lost, err);
}

ib_status ib_dispatch_flush_marks(ib_dispatch *d, size_t *marked, ib_error *err)
{
    *marked = 0;
    return d != NULL ? ib__drun_flush_marks(d->run, marked, err) : IB_OK;
}

size_t ib_dispatch_overdue(ib_dispatch *d, int64_t age_ms,
                           void (*visit)(void *ctx, const ib_overdue_call *call), void *ctx)
{
    return d != NULL ? ib__drun_overdue(d->run, age_ms, visit, ctx) : 0;
}

ib_circuit_state ib_dispatch_circuit_state(const ib_dispatch *d, size_t handler)
{
    return d != NULL ? ib__drun_circuit_state(d->run, handler) : IB_CIRCUIT_CLOSED;
}

int64_t ib_dispatch_hold_ms(const ib_dispatch *d)
{
    return d != NULL ? ib__drun_hold_ms(d->run) : 0;
}
