/* SPDX-License-Identifier: Apache-2.0 */
/* What a handler adds to its verdict while it runs (private to the dispatch
 * part): the calling thread's current handler call, so the host API's
 * verdict_detail and http_request slots (ABI 1.3) reach the right run item
 * although every handler of a batch shares one bus proxy.
 *
 * dispatch_run.c enters a note around each handler call and reads it after
 * the call returns; dispatch.h's ib_dispatch_note_verdict() and
 * ib_dispatch_current() write and read it from inside the handler. */
#ifndef IB_DISPATCH_NOTE_H
#define IB_DISPATCH_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "infinity_bus/plugin.h"

/* The detail of one handler call; owned by its run item. */
typedef struct ib__dnote {
    int64_t retry_after_ms;                 /* < 0: none asked */
    char reason[IB_VERDICT_REASON_MAX + 1]; /* "": none given */
} ib__dnote;

/* Clears `note` and makes it the calling thread's current one until
 * ib__dnote_leave(); `ctx` and `handler` are what ib_dispatch_current()
 * answers meanwhile (BORROWED). */
void ib__dnote_enter(ib__dnote *note, void *ctx, size_t handler);

/* Ends the calling thread's current handler call. */
void ib__dnote_leave(void);

#endif
