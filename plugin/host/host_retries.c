/* SPDX-License-Identifier: Apache-2.0 */
/* The retries this process asked for, so that --idle-exit ends honestly
 * (issue 45): a run that stops while messages it nak'ed are still on
 * their way back would otherwise exit 0 with events unmarked.
 *
 * Life cycle of an entry:
 *   1. host_batch.c naks a message (a handler's RETRY, a busy claim, a
 *      recorder outage, a dead letter that could not be published): the
 *      entry for its stream sequence records when the server sends it
 *      back (now + the nak's delay) and the event's id and type.
 *   2. The message comes back and is acked (its marks are durable) or
 *      terminated (dead-lettered): the entry goes. Nak'ed again, it stays
 *      with the new time.
 *   3. At the idle exit the run loop keeps pulling while some entry is due
 *      back within the wait bound (ib__host_retries_due); then every entry
 *      left is checked against the recorder: an event every subscribed
 *      handler marked (another process took it) is done, the rest are
 *      what the run leaves unmarked.
 *
 * Invariants:
 *   1. Only the main thread touches the table (settling and the run loop
 *      both run there; dispatch's on_settled is called on it too).
 *   2. A stream sequence is in the table at most once: it names one
 *      message of the durable's stream.
 *   3. When the table could not grow, `incomplete` is set for good: the
 *      count at the end is then a lower bound, said as such.
 *
 * The table is an open-addressing hash on the stream sequence (linear
 * probing, deletion by backward shift, so no tombstones): a recorder
 * outage can nak every delivery of a long run, and each ack looks its
 * message up. */
#include <stdlib.h>
#include <string.h>

#include "host_internal.h"
#include "log.h"

#define FIRST_SLOTS 64

typedef struct retry_entry {
    uint64_t seq; /* 0 = a free slot (stream sequences start at 1) */
    int64_t due_ms;
    char id[IB_ID_BUF_SIZE]; /* "" when the message had no decoded event */
    char *type;              /* OWNED; NULL when it had none */
} retry_entry;

struct ib_host_retries {
    retry_entry *slots;
    size_t cap; /* a power of two */
    size_t n;
    bool incomplete;
};

ib_host_retries *ib__host_retries_new(void)
{
    ib_host_retries *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->slots = calloc(FIRST_SLOTS, sizeof(*r->slots));
    if (r->slots == NULL) {
        free(r);
        return NULL;
    }
    r->cap = FIRST_SLOTS;
    return r;
}

void ib__host_retries_free(ib_host_retries *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->cap; i++)
        free(r->slots[i].type);
    free(r->slots);
    free(r);
}

static size_t home(const ib_host_retries *r, uint64_t seq)
{
    return (size_t)((seq * 0x9E3779B97F4A7C15ULL) >> 32) & (r->cap - 1);
}

/* The slot holding `seq`, or the free slot where it would go. */
static size_t find(const ib_host_retries *r, uint64_t seq)
{
    size_t i = home(r, seq);
    while (r->slots[i].seq != 0 && r->slots[i].seq != seq)
        i = (i + 1) & (r->cap - 1);
    return i;
}

/* Doubles the table; false (nothing changed) when out of memory. */
static bool grow(ib_host_retries *r)
{
    ib_host_retries bigger = {.cap = r->cap * 2};
    bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
    if (bigger.slots == NULL)
        return false;
    for (size_t i = 0; i < r->cap; i++)
        if (r->slots[i].seq != 0)
            bigger.slots[find(&bigger, r->slots[i].seq)] = r->slots[i];
    free(r->slots);
    r->slots = bigger.slots;
    r->cap = bigger.cap;
    return true;
}

void ib__host_retries_add(ib_host_retries *r, uint64_t seq, int64_t due_ms, const ib_event *event)
{
    if (r == NULL || seq == 0)
        return;
    if ((r->n + 1) * 4 > r->cap * 3 && !grow(r)) {
        r->incomplete = true;
        return;
    }
    retry_entry *e = &r->slots[find(r, seq)];
    if (e->seq == 0) {
        r->n++;
        e->seq = seq;
        e->id[0] = '\0';
        e->type = NULL;
    }
    e->due_ms = due_ms;
    if (event == NULL || e->type != NULL)
        return; /* the same message carries the same event */
    snprintf(e->id, sizeof(e->id), "%s", event->id);
    e->type = strdup(event->type);
    if (e->type == NULL)
        r->incomplete = true; /* counted unmarked at the end: it cannot be checked */
}

void ib__host_retries_drop(ib_host_retries *r, uint64_t seq)
{
    if (r == NULL || seq == 0 || r->n == 0)
        return;
    size_t i = find(r, seq);
    if (r->slots[i].seq == 0)
        return;
    free(r->slots[i].type);
    r->slots[i] = (retry_entry){0};
    r->n--;
    /* backward shift: move up every later entry of the run that the hole
     * now separates from its home slot */
    for (size_t j = (i + 1) & (r->cap - 1); r->slots[j].seq != 0; j = (j + 1) & (r->cap - 1)) {
        size_t h = home(r, r->slots[j].seq);
        bool movable = i <= j ? (h <= i || h > j) : (h <= i && h > j);
        if (!movable)
            continue;
        r->slots[i] = r->slots[j];
        r->slots[j] = (retry_entry){0};
        i = j;
    }
}

size_t ib__host_retries_due(const ib_host_retries *r, int64_t now_ms, int64_t horizon_ms,
                            int64_t *until_ms)
{
    size_t k = 0;
    *until_ms = now_ms;
    for (size_t i = 0; r != NULL && i < r->cap; i++) {
        const retry_entry *e = &r->slots[i];
        int64_t back = e->due_ms + IB_HOST_RETRY_GRACE_MS;
        if (e->seq == 0 || back <= now_ms || e->due_ms > horizon_ms)
            continue;
        k++;
        if (back > *until_ms)
            *until_ms = back;
    }
    return k;
}

/* Whether every handler subscribed to the entry's type has marked its
 * event; false when that cannot be told (no event, the recorder fails:
 * said once, through *warned). */
static bool marked(ib_host *h, const retry_entry *e, bool *warned)
{
    ib_marker_key keys[64];
    char names[64][IB_CONSUMER_MAX + 2];
    bool done[64];
    size_t n = 0;
    ib_error err;
    if (e->type == NULL)
        return false;
    for (size_t p = 0; p < h->plugin_count; p++)
        for (size_t i = 0; i < ib_plugin_handler_count(h->plugins[p]); i++) {
            const ib_handler_desc *d = ib_plugin_handler(h->plugins[p], i);
            bool subscribed = false;
            for (size_t t = 0; d->event_types != NULL && d->event_types[t] != NULL; t++)
                subscribed = subscribed || strcmp(d->event_types[t], e->type) == 0;
            if (!subscribed)
                continue;
            if (n == sizeof(keys) / sizeof(keys[0]))
                return false;
            ib_host_handler_identity(names[n], h->plugins[p], i, h->cfg->durable,
                                     h->cfg->consumer_names);
            keys[n] = (ib_marker_key){names[n], e->id};
            n++;
        }
    if (n > 0 && ib_recorder_check_batch(h->recorder, done, keys, n, &err) != IB_OK) {
        if (!*warned)
            ib_log_kv(IB_SEV_WARN,
                      "cannot tell whether retried events were marked; counted unmarked",
                      "recorder", h->set.recorder_shown, "error", err.msg, NULL);
        *warned = true;
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!done[i])
            return false;
    return true; /* no handler subscribes: nothing was left to mark */
}

size_t ib__host_retries_unmarked(ib_host *h, bool *lower_bound)
{
    size_t left = 0;
    bool warned = false;
    const ib_host_retries *r = h->batch.retries;
    *lower_bound = r != NULL && r->incomplete;
    for (size_t i = 0; r != NULL && i < r->cap; i++)
        if (r->slots[i].seq != 0 && !marked(h, &r->slots[i], &warned))
            left++;
    return left;
}
