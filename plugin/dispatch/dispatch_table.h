/* SPDX-License-Identifier: Apache-2.0 */
/* The handler table of the dispatch part: which handlers, in registration
 * order, are subscribed to which event type (private to the dispatch part).
 *
 * A leaf: it knows handlers and types, nothing of recorders or batches.
 * dispatch.c fills it (ib_dispatch_add); the batch flow (dispatch_run.c)
 * only reads it. Registration must be over before the first batch runs, so
 * lookups take no lock. */
#ifndef IB_DISPATCH_TABLE_H
#define IB_DISPATCH_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "dispatch.h"

/* A registered handler; owned by the table. */
typedef struct ib__dhandler {
    char *consumer;
    char *name;
    ib_handle_fn handle;
    void *state;
    size_t index;       /* registration order; with the event id it identifies a
                           (consumer, id) pair, since consumers are unique */
    bool transactional; /* runs inside the recorder's transaction */
} ib__dhandler;

typedef struct ib__dtable ib__dtable;

/* Creates an empty table; `*out` is freed with ib__dtable_free().
 * Errors: IB_ERR_NOMEM. */
ib_status ib__dtable_create(ib__dtable **out, ib_error *err);

/* Frees the table and every handler in it. NULL is a no-op. */
void ib__dtable_free(ib__dtable *t);

/* Registers a handler, with the checks and errors ib_dispatch_add()
 * documents. On error the table is unchanged, except that an IB_ERR_NOMEM
 * while merging the lists of a wildcard (IB_EVENT_TYPE_ANY) table may
 * leave the handler registered: the caller then gives up on the table. */
ib_status ib__dtable_add(ib__dtable *t, const ib_dispatch_handler *hd, ib_error *err);

/* The handler registered `index`-th (0-based), or NULL past the last;
 * `*count` is the number registered. The handler is the table's. */
const ib__dhandler *ib__dtable_handler(const ib__dtable *t, size_t index, size_t *count);

/* Handlers subscribed to `type` (NULL: none), in registration order, and
 * how many in *count; the handlers on IB_EVENT_TYPE_ANY ("*") are
 * subscribed to every type. The list is the table's and stays valid until the next
 * ib__dtable_add(). */
ib__dhandler *const *ib__dtable_lookup(const ib__dtable *t, const char *type, size_t *count);

/* The most handlers any one type has (ib__dtable_lookup's largest
 * count): how many items a delivery can make at most. */
size_t ib__dtable_widest(const ib__dtable *t);

#endif
