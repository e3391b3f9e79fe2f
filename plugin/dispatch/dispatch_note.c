/* SPDX-License-Identifier: Apache-2.0 */
/* The calling thread's current handler call (dispatch_note.h). */
#include "dispatch_note.h"

#include "dispatch.h"

#include <stdbool.h>
#include <string.h>

/* One handler call at a time runs on a thread, and a handler never calls
 * another: a thread-local pointer is the whole bookkeeping. */
static _Thread_local ib__dnote *current;
static _Thread_local void *current_ctx;
static _Thread_local size_t current_handler;

void ib__dnote_enter(ib__dnote *note, void *ctx, size_t handler)
{
    note->retry_after_ms = -1;
    note->reason[0] = '\0';
    current = note;
    current_ctx = ctx;
    current_handler = handler;
}

void ib__dnote_leave(void)
{
    current = NULL;
    current_ctx = NULL;
}

bool ib_dispatch_note_verdict(int64_t retry_after_ms, const char *reason)
{
    ib__dnote *n = current;
    if (n == NULL)
        return false;
    n->retry_after_ms = retry_after_ms < 0 ? -1 : retry_after_ms;
    if (reason == NULL) {
        n->reason[0] = '\0';
        return true;
    }
    size_t i = 0;
    for (; reason[i] != '\0' && i < IB_VERDICT_REASON_MAX; i++)
        n->reason[i] = (reason[i] == '\r' || reason[i] == '\n') ? ' ' : reason[i];
    n->reason[i] = '\0';
    return true;
}

bool ib_dispatch_current(void **ctx, size_t *handler)
{
    if (current == NULL)
        return false;
    *ctx = current_ctx;
    *handler = current_handler;
    return true;
}
