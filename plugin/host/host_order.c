/* SPDX-License-Identifier: Apache-2.0 */
/* A partitioned consumer's keys in order across batches (host_internal.h;
 * docs/partitions.md, "Order"): per key, the stream sequences of its
 * events nak'ed by this process and not settled since. A later event of
 * the key waits (is nak'ed) until they are back. Inside a batch the
 * dispatch keeps the order (ib_delivery.order_key); a new owner starts
 * from the durable's ack floor (host_partitions.c). Batch thread only.
 *
 * The keys are a short list, searched in order: only keys with an event
 * out for a retry are in it. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "host_internal.h"
#include "log.h"
#include "partition.h"

/* A key with events nak'ed here and not settled since: their stream
 * sequences, ascending. */
typedef struct waiting_key {
    uint32_t partition;
    char key[IB_PARTITION_KEY_MAX + 1];
    uint64_t *seqs;
    size_t n, cap;
    int64_t since_mono; /* when the list last became non-empty */
} waiting_key;

struct ib_host_order {
    waiting_key *keys;
    size_t n, cap;
    int64_t limit_ms; /* a key waits at most this long for one of its events */
};

ib_host_order *ib__host_order_new(int64_t limit_ms)
{
    ib_host_order *o = calloc(1, sizeof(*o));
    if (o != NULL)
        o->limit_ms = limit_ms;
    return o;
}

static waiting_key *find(ib_host_order *o, uint32_t p, const char *key)
{
    for (size_t i = 0; i < o->n; i++)
        if (o->keys[i].partition == p && strcmp(o->keys[i].key, key) == 0)
            return &o->keys[i];
    return NULL;
}

static void remove_key(ib_host_order *o, waiting_key *w)
{
    free(w->seqs);
    *w = o->keys[--o->n];
}

/* Takes entry `i` out of the list of `w`, and `w` out of `o` once empty. */
static void remove_seq(ib_host_order *o, waiting_key *w, size_t i)
{
    if (--w->n == 0)
        remove_key(o, w);
    else
        memmove(w->seqs + i, w->seqs + i + 1, (w->n - i) * sizeof(*w->seqs));
}

void ib__host_order_free(ib_host_order *o)
{
    if (o == NULL)
        return;
    while (o->n > 0)
        remove_key(o, &o->keys[0]);
    free(o->keys);
    free(o);
}

void ib__host_order_forget(ib_host_order *o, uint32_t p)
{
    for (size_t i = o != NULL ? o->n : 0; i > 0; i--)
        if (o->keys[i - 1].partition == p)
            remove_key(o, &o->keys[i - 1]);
}

bool ib__host_order_must_wait(ib_host_order *o, uint32_t p, const char *key, uint64_t seq)
{
    waiting_key *w = o != NULL ? find(o, p, key) : NULL;
    if (w == NULL)
        return false;
    if (ib_clock_monotonic_ms() - w->since_mono > o->limit_ms) {
        /* the event waited for never came back (aged out of the stream,
         * or settled by another process): the key goes on */
        ib_log(IB_SEV_WARN, "a key's events stopped waiting for an event that did not come back",
               IB_LOG_U64("partition", p), IB_LOG_U64("stream_seq", w->seqs[0]));
        remove_key(o, w);
        return false;
    }
    if (w->seqs[0] < seq)
        return true; /* an earlier event of the key is still to come back */
    if (w->seqs[0] == seq)
        remove_seq(o, w, 0); /* it is back: in flight now */
    return false;
}

/* Adds `seq` to the list of (p, key), making the entry if needed; on no
 * memory the order rests on the batch alone. */
static void add_seq(ib_host_order *o, uint32_t p, const char *key, uint64_t seq)
{
    waiting_key *w = find(o, p, key);
    if (w == NULL) {
        if (o->n == o->cap) {
            size_t cap = o->cap != 0 ? o->cap * 2 : 16;
            waiting_key *grown = realloc(o->keys, cap * sizeof(*grown));
            if (grown == NULL)
                return;
            o->keys = grown;
            o->cap = cap;
        }
        w = &o->keys[o->n++];
        *w = (waiting_key){.partition = p, .since_mono = ib_clock_monotonic_ms()};
        strncpy(w->key, key, IB_PARTITION_KEY_MAX);
    }
    size_t i = 0;
    while (i < w->n && w->seqs[i] < seq)
        i++;
    if (i < w->n && w->seqs[i] == seq)
        return;
    if (w->n == w->cap) {
        size_t cap = w->cap != 0 ? w->cap * 2 : 4;
        uint64_t *grown = realloc(w->seqs, cap * sizeof(*grown));
        if (grown == NULL)
            return;
        w->seqs = grown;
        w->cap = cap;
    }
    memmove(w->seqs + i + 1, w->seqs + i, (w->n - i) * sizeof(*w->seqs));
    w->seqs[i] = seq;
    w->n++;
}

void ib__host_order_note(ib_host_order *o, uint32_t p, const char *key, uint64_t seq, bool waits)
{
    if (o == NULL)
        return;
    if (waits) {
        add_seq(o, p, key, seq);
        return;
    }
    waiting_key *w = find(o, p, key);
    for (size_t i = 0; w != NULL && i < w->n; i++)
        if (w->seqs[i] == seq) {
            remove_seq(o, w, i);
            return;
        }
}
