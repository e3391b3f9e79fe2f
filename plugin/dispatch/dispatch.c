/* The dispatch table: creation, handler registration and the type map.
 * The batch flow itself is in dispatch_run.c. */
#include "dispatch_internal.h"
#include "owner.h"

#include <stdlib.h>
#include <string.h>

#include "uuid.h"

/* FNV-1a: types are short strings; this is cheap and spreads them well
 * enough for a table kept at most half full. */
static uint64_t type_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Slot holding `type`, or the free slot where it would go. */
static ib__dtype *type_slot(ib__dtype *types, size_t cap, const char *type, uint64_t hash)
{
    size_t mask = cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        ib__dtype *t = &types[i];
        if (t->type == NULL || (t->hash == hash && strcmp(t->type, type) == 0))
            return t;
    }
}

ib__dhandler *const *ib__dispatch_lookup(const ib_dispatch *d, const char *type, size_t *count)
{
    *count = 0;
    if (d->type_count == 0 || type == NULL)
        return NULL;
    ib__dtype *t = type_slot(d->types, d->type_cap, type, type_hash(type));
    if (t->type == NULL)
        return NULL;
    *count = t->count;
    return t->handlers;
}

size_t ib_dispatch_count_for(const ib_dispatch *d, const char *type)
{
    size_t count;
    if (d == NULL)
        return 0;
    ib__dispatch_lookup(d, type, &count);
    return count;
}

/* Makes room for `extra` more types while keeping the table at most half
 * full. Rehashing does not change what the table says, so it may happen even
 * if the registration that asked for it fails later. */
static ib_status types_reserve(ib_dispatch *d, size_t extra, ib_error *err)
{
    size_t need = (d->type_count + extra) * 2;
    if (need <= d->type_cap)
        return IB_OK;
    size_t cap = d->type_cap != 0 ? d->type_cap : 16;
    while (cap < need)
        cap *= 2;
    ib__dtype *types = calloc(cap, sizeof(*types));
    if (types == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the type table");
    for (size_t i = 0; i < d->type_cap; i++) {
        if (d->types[i].type != NULL)
            *type_slot(types, cap, d->types[i].type, d->types[i].hash) = d->types[i];
    }
    free(d->types);
    d->types = types;
    d->type_cap = cap;
    return IB_OK;
}

static void handler_free(ib__dhandler *h)
{
    if (h == NULL)
        return;
    free(h->consumer);
    free(h->name);
    free(h);
}

static ib_status check_handler(const ib_dispatch *d, const ib_dispatch_handler *hd, size_t *ntypes,
                               ib_error *err)
{
    if (hd->consumer == NULL || hd->consumer[0] == '\0')
        return ib_error_set(err, IB_ERR_CONFIG, "handler %s: empty consumer identity",
                            hd->name != NULL ? hd->name : "(unnamed)");
    const char *label = hd->name != NULL ? hd->name : hd->consumer;
    if (strlen(hd->consumer) > IB_CONSUMER_MAX)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "handler %s: consumer identity longer than %d bytes", label,
                            IB_CONSUMER_MAX);
    if (hd->handle == NULL)
        return ib_error_set(err, IB_ERR_CONFIG, "handler %s: no handle function", label);
    if (hd->event_types == NULL || hd->event_types[0] == NULL)
        return ib_error_set(err, IB_ERR_CONFIG, "handler %s: subscribes to no event type", label);
    for (size_t i = 0; hd->event_types[i] != NULL; i++) {
        if (hd->event_types[i][0] == '\0')
            return ib_error_set(err, IB_ERR_CONFIG, "handler %s: event type %zu is empty", label,
                                i + 1);
        *ntypes = i + 1;
    }
    for (size_t i = 0; i < d->handler_count; i++) {
        if (strcmp(d->handlers[i]->consumer, hd->consumer) == 0)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "handler %s: consumer identity \"%s\" is already used by "
                                "handler %s; give one of them its own consumer",
                                label, hd->consumer, d->handlers[i]->name);
    }
    return IB_OK;
}

static bool listed_before(const char *const *types, size_t i)
{
    for (size_t j = 0; j < i; j++) {
        if (strcmp(types[j], types[i]) == 0)
            return true;
    }
    return false;
}

ib_status ib_dispatch_add(ib_dispatch *d, const ib_dispatch_handler *hd, ib_error *err)
{
    ib_status st;
    size_t ntypes = 0;
    ib__dhandler *h = NULL;
    ib__dtype *fresh = NULL; /* new types, inserted only once nothing can fail */
    size_t nfresh = 0;

    if (d == NULL || hd == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch add: no table or no handler");
    st = check_handler(d, hd, &ntypes, err);
    if (st != IB_OK)
        return st;

    if (d->handler_count == d->handler_cap) {
        size_t cap = d->handler_cap != 0 ? d->handler_cap * 2 : 8;
        ib__dhandler **hs = realloc(d->handlers, cap * sizeof(*hs));
        if (hs == NULL)
            goto nomem;
        d->handlers = hs;
        d->handler_cap = cap;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        goto nomem;
    h->consumer = strdup(hd->consumer);
    h->name = strdup(hd->name != NULL ? hd->name : hd->consumer);
    if (h->consumer == NULL || h->name == NULL)
        goto nomem;
    h->handle = hd->handle;
    h->state = hd->state;
    h->index = d->handler_count;

    st = types_reserve(d, ntypes, err);
    if (st != IB_OK)
        goto fail;
    fresh = calloc(ntypes, sizeof(*fresh));
    if (fresh == NULL)
        goto nomem;
    /* First pass: every allocation. Growing an existing list without
     * bumping its count leaves the table as it was if a later step fails. */
    for (size_t i = 0; i < ntypes; i++) {
        const char *type = hd->event_types[i];
        if (listed_before(hd->event_types, i))
            continue;
        uint64_t hash = type_hash(type);
        ib__dtype *t = type_slot(d->types, d->type_cap, type, hash);
        if (t->type != NULL) {
            ib__dhandler **hs = realloc(t->handlers, (t->count + 1) * sizeof(*hs));
            if (hs == NULL)
                goto nomem;
            t->handlers = hs;
            continue;
        }
        ib__dtype *f = &fresh[nfresh];
        f->type = strdup(type);
        f->handlers = malloc(sizeof(*f->handlers));
        f->hash = hash;
        nfresh++;
        if (f->type == NULL || f->handlers == NULL)
            goto nomem;
    }
    /* Second pass: commit; nothing below fails. */
    for (size_t i = 0; i < ntypes; i++) {
        const char *type = hd->event_types[i];
        if (listed_before(hd->event_types, i))
            continue;
        uint64_t hash = type_hash(type);
        ib__dtype *t = type_slot(d->types, d->type_cap, type, hash);
        if (t->type == NULL) {
            for (size_t j = 0; j < nfresh; j++) {
                if (fresh[j].type != NULL && strcmp(fresh[j].type, type) == 0) {
                    *t = fresh[j];
                    fresh[j].type = NULL;
                    fresh[j].handlers = NULL;
                    d->type_count++;
                    break;
                }
            }
        }
        t->handlers[t->count++] = h;
    }
    d->handlers[d->handler_count++] = h;
    free(fresh);
    return IB_OK;

nomem:
    st = ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory to register handler %s",
                      hd->name != NULL ? hd->name : hd->consumer);
fail:
    for (size_t j = 0; j < nfresh; j++) {
        free(fresh[j].type);
        free(fresh[j].handlers);
    }
    free(fresh);
    handler_free(h);
    return st;
}

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

ib_status ib_dispatch_create(ib_dispatch **out, ib_recorder *recorder,
                             const ib_dispatch_options *options, ib_error *err)
{
    static const ib_dispatch_options defaults = {0};
    ib_status st;
    char token[IB_OWNER_TOKEN_MAX];

    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch create: no output");
    *out = NULL;
    if (recorder == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch create: no recorder");
    if (options == NULL)
        options = &defaults;
    st = options_check(options, err);
    if (st != IB_OK)
        return st;

    ib_dispatch *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the table");
    d->recorder = recorder;
    d->opts = *options;
    if (d->opts.lease_ms <= 0)
        d->opts.lease_ms = IB_DISPATCH_DEFAULT_LEASE_MS;
    if (d->opts.nak_base_delay_ms <= 0)
        d->opts.nak_base_delay_ms = IB_DISPATCH_DEFAULT_NAK_BASE_MS;
    if (d->opts.nak_max_delay_ms <= 0)
        d->opts.nak_max_delay_ms = IB_DISPATCH_DEFAULT_NAK_MAX_MS;
    if (d->opts.busy_delay_ms <= 0)
        d->opts.busy_delay_ms = IB_DISPATCH_DEFAULT_BUSY_MS;
    if (d->opts.nak_max_delay_ms < d->opts.nak_base_delay_ms)
        d->opts.nak_max_delay_ms = d->opts.nak_base_delay_ms;
    /* Zero-initialised options get the default window; committing after
     * every handler is asked for with a negative value. */
    if (d->opts.commit_interval_ms == 0)
        d->opts.commit_interval_ms = IB_DISPATCH_DEFAULT_COMMIT_MS;
    else if (d->opts.commit_interval_ms < 0)
        d->opts.commit_interval_ms = 0;

    if (options->owner != NULL && options->owner[0] != '\0') {
        d->owner = strdup(options->owner);
    } else {
        /* A fresh token: two processes must never share one, or each
         * would take the other's claims as its own. */
        st = ib_owner_make(token, sizeof(token), "dispatch", err);
        if (st != IB_OK)
            goto fail_owner;
        d->owner = strdup(token);
    }
    if (d->owner == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the owner token");
        goto fail_owner;
    }
    d->opts.owner = d->owner;

    if (pthread_mutex_init(&d->run_mu, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the run mutex");
        goto fail_mutex;
    }
    if (pthread_mutex_init(&d->lease_mu, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the lease mutex");
        goto fail_lease_mutex;
    }
    if (d->opts.concurrency > 1) {
        st = ib__pool_create(&d->pool, d->opts.concurrency, err);
        if (st != IB_OK)
            goto fail_pool;
    }
    *out = d;
    return IB_OK;

fail_pool:
    pthread_mutex_destroy(&d->lease_mu);
fail_lease_mutex:
    pthread_mutex_destroy(&d->run_mu);
fail_mutex:
    free(d->owner);
fail_owner:
    free(d);
    return st;
}

void ib_dispatch_free(ib_dispatch *d)
{
    if (d == NULL)
        return;
    ib__pool_free(d->pool);
    pthread_mutex_destroy(&d->run_mu);
    pthread_mutex_destroy(&d->lease_mu);
    ib__dispatch_scratch_free(&d->scratch);
    for (size_t i = 0; i < d->type_cap; i++) {
        free(d->types[i].type);
        free(d->types[i].handlers);
    }
    free(d->types);
    for (size_t i = 0; i < d->handler_count; i++)
        handler_free(d->handlers[i]);
    free(d->handlers);
    free(d->owner);
    free(d);
}
