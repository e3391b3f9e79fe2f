/* SPDX-License-Identifier: Apache-2.0 */
/* The handler table: registration and the type map. */
#include "dispatch_table.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Handlers subscribed to one type, in registration order. */
typedef struct dtype {
    char *type; /* NULL: free slot */
    uint64_t hash;
    ib__dhandler **handlers;
    size_t count;
    /* With handlers on IB_EVENT_TYPE_ANY: this type's handlers and those,
     * merged in registration order (what a lookup answers); else NULL. */
    ib__dhandler **merged;
    size_t merged_count;
} dtype;

struct ib__dtable {
    ib__dhandler **handlers; /* every handler, in registration order */
    size_t handler_count, handler_cap;

    dtype *types; /* power-of-two open-addressing table, at most half full */
    size_t type_cap, type_count;
};

/* The types of one registration that are new to the table: allocated
 * before anything in the table changes, moved into it once nothing can
 * fail. */
typedef struct staged_types {
    dtype *fresh;
    size_t count;
} staged_types;

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
static dtype *type_slot(dtype *types, size_t cap, const char *type, uint64_t hash)
{
    size_t mask = cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        dtype *t = &types[i];
        if (t->type == NULL || (t->hash == hash && strcmp(t->type, type) == 0))
            return t;
    }
}

ib_status ib__dtable_create(ib__dtable **out, ib_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the handler table");
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

void ib__dtable_free(ib__dtable *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->type_cap; i++) {
        free(t->types[i].type);
        free(t->types[i].handlers);
        free(t->types[i].merged);
    }
    free(t->types);
    for (size_t i = 0; i < t->handler_count; i++)
        handler_free(t->handlers[i]);
    free(t->handlers);
    free(t);
}

ib__dhandler *const *ib__dtable_lookup(const ib__dtable *t, const char *type, size_t *count)
{
    *count = 0;
    if (t->type_count == 0 || type == NULL)
        return NULL;
    dtype *slot = type_slot(t->types, t->type_cap, type, type_hash(type));
    if (slot->type == NULL)
        slot = type_slot(t->types, t->type_cap, IB_EVENT_TYPE_ANY, type_hash(IB_EVENT_TYPE_ANY));
    if (slot->type == NULL)
        return NULL;
    if (slot->merged != NULL) {
        *count = slot->merged_count;
        return slot->merged;
    }
    *count = slot->count;
    return slot->handlers;
}

/* Merges the handlers of `slot` with those of `any` by registration index
 * into a fresh slot->merged. False without memory (slot unchanged). */
static bool merge_slot(dtype *slot, const dtype *any)
{
    size_t n = slot->count + any->count, a = 0, b = 0, k = 0;
    ib__dhandler **m = malloc(n * sizeof(*m));
    if (m == NULL)
        return false;
    while (a < slot->count || b < any->count) {
        if (b == any->count ||
            (a < slot->count && slot->handlers[a]->index < any->handlers[b]->index))
            m[k++] = slot->handlers[a++];
        else
            m[k++] = any->handlers[b++];
    }
    free(slot->merged);
    slot->merged = m;
    slot->merged_count = k;
    return true;
}

/* After a registration: every named type's lookup list also holds the
 * handlers on IB_EVENT_TYPE_ANY. Registration happens once at start-up,
 * so rebuilding every list is cheap enough. */
static ib_status refresh_any(ib__dtable *t, ib_error *err)
{
    dtype *any = type_slot(t->types, t->type_cap, IB_EVENT_TYPE_ANY, type_hash(IB_EVENT_TYPE_ANY));
    if (any->type == NULL)
        return IB_OK;
    for (size_t i = 0; i < t->type_cap; i++) {
        dtype *slot = &t->types[i];
        if (slot->type != NULL && slot != any && !merge_slot(slot, any))
            return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the type table");
    }
    return IB_OK;
}

const ib__dhandler *ib__dtable_handler(const ib__dtable *t, size_t index, size_t *count)
{
    *count = t->handler_count;
    return index < t->handler_count ? t->handlers[index] : NULL;
}

/* ---- registration ------------------------------------------------------- */

static ib_status check_handler(const ib__dtable *t, const ib_dispatch_handler *hd, size_t *ntypes,
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
    for (size_t i = 0; i < t->handler_count; i++) {
        if (strcmp(t->handlers[i]->consumer, hd->consumer) == 0)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "handler %s: consumer identity \"%s\" is already used by "
                                "handler %s; give one of them its own consumer",
                                label, hd->consumer, t->handlers[i]->name);
    }
    return IB_OK;
}

/* Room for one more handler. A bigger array says nothing new, so it may
 * stay even if the registration fails later. */
static bool handlers_reserve(ib__dtable *t)
{
    if (t->handler_count < t->handler_cap)
        return true;
    size_t cap = t->handler_cap != 0 ? t->handler_cap * 2 : 8;
    ib__dhandler **hs = realloc(t->handlers, cap * sizeof(*hs));
    if (hs == NULL)
        return false;
    t->handlers = hs;
    t->handler_cap = cap;
    return true;
}

/* The table's copy of a handler, or NULL without memory. */
static ib__dhandler *handler_new(const ib_dispatch_handler *hd, size_t index)
{
    ib__dhandler *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->consumer = strdup(hd->consumer);
    h->name = strdup(hd->name != NULL ? hd->name : hd->consumer);
    if (h->consumer == NULL || h->name == NULL) {
        handler_free(h);
        return NULL;
    }
    h->handle = hd->handle;
    h->state = hd->state;
    h->index = index;
    h->transactional = hd->transactional;
    return h;
}

/* Makes room for `extra` more types while keeping the table at most half
 * full. Rehashing does not change what the table says, so it may happen even
 * if the registration that asked for it fails later. */
static ib_status types_reserve(ib__dtable *t, size_t extra, ib_error *err)
{
    size_t need = (t->type_count + extra) * 2;
    if (need <= t->type_cap)
        return IB_OK;
    size_t cap = t->type_cap != 0 ? t->type_cap : 16;
    while (cap < need)
        cap *= 2;
    dtype *types = calloc(cap, sizeof(*types));
    if (types == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the type table");
    for (size_t i = 0; i < t->type_cap; i++) {
        if (t->types[i].type != NULL)
            *type_slot(types, cap, t->types[i].type, t->types[i].hash) = t->types[i];
    }
    free(t->types);
    t->types = types;
    t->type_cap = cap;
    return IB_OK;
}

/* The slot of types[i] (where it is or would go), or NULL when the handler
 * listed that type before: a type listed twice counts once. */
static dtype *listed_slot(const ib__dtable *t, const char *const *types, size_t i, uint64_t *hash)
{
    for (size_t j = 0; j < i; j++) {
        if (strcmp(types[j], types[i]) == 0)
            return NULL;
    }
    *hash = type_hash(types[i]);
    return type_slot(t->types, t->type_cap, types[i], *hash);
}

/* First step of a registration: every allocation. Growing an existing
 * list without bumping its count leaves the table as it was if a later
 * step fails. */
static bool stage_types(ib__dtable *t, const char *const *types, size_t ntypes, staged_types *sg)
{
    sg->fresh = calloc(ntypes, sizeof(*sg->fresh));
    if (sg->fresh == NULL)
        return false;
    for (size_t i = 0; i < ntypes; i++) {
        uint64_t hash;
        dtype *slot = listed_slot(t, types, i, &hash);
        if (slot == NULL)
            continue;
        if (slot->type != NULL) {
            ib__dhandler **hs = realloc(slot->handlers, (slot->count + 1) * sizeof(*hs));
            if (hs == NULL)
                return false;
            slot->handlers = hs;
            continue;
        }
        dtype *f = &sg->fresh[sg->count++];
        f->type = strdup(types[i]);
        f->handlers = malloc(sizeof(*f->handlers));
        f->hash = hash;
        if (f->type == NULL || f->handlers == NULL)
            return false;
    }
    return true;
}

/* Second step: files the handler under each type it listed; nothing here
 * fails. The walk is stage_types()'s, and a new type's slot is still free
 * (inserting another type cannot end its probe sooner), so the new types
 * come up in the order they were staged. */
static void commit_types(ib__dtable *t, const char *const *types, size_t ntypes, ib__dhandler *h,
                         staged_types *sg)
{
    size_t next = 0;
    for (size_t i = 0; i < ntypes; i++) {
        uint64_t hash;
        dtype *slot = listed_slot(t, types, i, &hash);
        if (slot == NULL)
            continue;
        if (slot->type == NULL) {
            *slot = sg->fresh[next];
            sg->fresh[next++] = (dtype){0};
            t->type_count++;
        }
        slot->handlers[slot->count++] = h;
    }
}

static void staged_free(staged_types *sg)
{
    for (size_t i = 0; i < sg->count; i++) {
        free(sg->fresh[i].type);
        free(sg->fresh[i].handlers);
    }
    free(sg->fresh);
}

static ib_status no_memory(const ib_dispatch_handler *hd, ib_error *err)
{
    return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory to register handler %s",
                        hd->name != NULL ? hd->name : hd->consumer);
}

ib_status ib__dtable_add(ib__dtable *t, const ib_dispatch_handler *hd, ib_error *err)
{
    size_t ntypes = 0;
    ib__dhandler *h = NULL;
    staged_types sg = {0};

    ib_status st = check_handler(t, hd, &ntypes, err);
    if (st != IB_OK)
        return st;
    if (!handlers_reserve(t) || (h = handler_new(hd, t->handler_count)) == NULL)
        return no_memory(hd, err);
    st = types_reserve(t, ntypes, err);
    if (st == IB_OK && !stage_types(t, hd->event_types, ntypes, &sg))
        st = no_memory(hd, err);
    if (st == IB_OK) {
        commit_types(t, hd->event_types, ntypes, h, &sg);
        t->handlers[t->handler_count++] = h;
        h = NULL; /* the table's now */
        st = refresh_any(t, err);
    }
    staged_free(&sg);
    handler_free(h);
    return st;
}

size_t ib__dtable_widest(const ib__dtable *t)
{
    size_t widest = 0;
    for (size_t i = 0; i < t->type_cap; i++) {
        const dtype *slot = &t->types[i];
        if (slot->type == NULL)
            continue;
        size_t count = slot->merged != NULL ? slot->merged_count : slot->count;
        if (count > widest)
            widest = count;
    }
    return widest;
}
