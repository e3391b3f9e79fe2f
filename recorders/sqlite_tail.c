/* The journal's unmerged tail in memory (sqlite_tail.h says what it is).
 *
 * A table with open addressing and linear probing, kept at most half full.
 * Entries are never removed one by one: a sweep drops the merged ones by
 * rebuilding the table, so probing needs no tombstones. Consumers and
 * owners are interned: a host has a handful of each, and the entries only
 * keep pointers. */
#include "sqlite_tail.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 1024

void ib__sq_tail_init(sq_tail *t)
{
    memset(t, 0, sizeof(*t));
}

void ib__sq_tail_free(sq_tail *t)
{
    for (size_t i = 0; i < t->nnames; i++)
        free(t->names[i]);
    free(t->names);
    free(t->slots);
    ib__sq_tail_init(t);
}

void ib__sq_tail_clear(sq_tail *t)
{
    if (t->slots != NULL)
        memset(t->slots, 0, t->cap * sizeof(*t->slots));
    t->used = 0;
    t->seen = t->merged = 0;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    return x ^ (x >> 33);
}

uint64_t ib__sq_key_hash(const char *consumer, const uint8_t id[16])
{
    uint64_t a, b, h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)consumer; *p != '\0'; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    memcpy(&a, id, 8);
    memcpy(&b, id + 8, 8);
    return mix(a ^ mix(b ^ h));
}

/* The slot holding the key, or the empty slot where it would go. */
static size_t probe(const sq_tail *t, const char *consumer, const uint8_t id[16])
{
    size_t mask = t->cap - 1;
    size_t i = (size_t)ib__sq_key_hash(consumer, id) & mask;
    for (;;) {
        const sq_tail_entry *e = &t->slots[i];
        if (e->seq == 0 || (memcmp(e->id, id, 16) == 0 && strcmp(e->consumer, consumer) == 0))
            return i;
        i = (i + 1) & mask;
    }
}

const sq_tail_entry *ib__sq_tail_find(const sq_tail *t, const char *consumer, const uint8_t id[16])
{
    if (t->used == 0)
        return NULL;
    const sq_tail_entry *e = &t->slots[probe(t, consumer, id)];
    return e->seq != 0 ? e : NULL;
}

/* The interned copy of `s`, or NULL when out of memory. */
static const char *intern(sq_tail *t, const char *s)
{
    for (size_t i = 0; i < t->nnames; i++)
        if (strcmp(t->names[i], s) == 0)
            return t->names[i];
    if (t->nnames == t->names_cap) {
        size_t cap = t->names_cap == 0 ? 8 : t->names_cap * 2;
        char **grown = realloc(t->names, cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        t->names = grown;
        t->names_cap = cap;
    }
    char *copy = strdup(s);
    if (copy == NULL)
        return NULL;
    t->names[t->nnames++] = copy;
    return copy;
}

/* Moves the entries with a row above `keep_above` into a table of `cap`
 * slots. False when out of memory (nothing changed). */
static bool rebuild(sq_tail *t, size_t cap, uint64_t keep_above)
{
    sq_tail_entry *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return false;
    sq_tail old = *t;
    t->slots = slots;
    t->cap = cap;
    t->used = 0;
    for (size_t i = 0; i < old.cap; i++) {
        const sq_tail_entry *e = &old.slots[i];
        if (e->seq == 0 || e->seq <= keep_above)
            continue;
        t->slots[probe(t, e->consumer, e->id)] = *e;
        t->used++;
    }
    free(old.slots);
    return true;
}

bool ib__sq_tail_put(sq_tail *t, uint64_t seq, const char *consumer, const uint8_t id[16],
                     const sq_state *st)
{
    /* Grow only for a new key: an entry being updated keeps its slot, so
     * pointers to other entries (a merge's list) stay valid. */
    sq_tail_entry *e = t->cap > 0 ? &t->slots[probe(t, consumer, id)] : NULL;
    if (e == NULL || (e->seq == 0 && (t->used + 1) * 2 > t->cap)) {
        if (!rebuild(t, t->cap == 0 ? FIRST_CAP : t->cap * 2, 0))
            return false;
        e = &t->slots[probe(t, consumer, id)];
    }
    if (e->seq > seq)
        return true; /* a newer state is already here */
    const char *owner = intern(t, st->owner);
    const char *name = e->seq != 0 ? e->consumer : intern(t, consumer);
    if (owner == NULL || name == NULL)
        return false;
    if (e->seq == 0)
        t->used++;
    *e = (sq_tail_entry){.seq = seq,
                         .consumer = name,
                         .owner = owner,
                         .done = st->done,
                         .attempts = st->attempts,
                         .ts = st->ts,
                         .fp = st->fp,
                         .expires = st->expires};
    memcpy(e->id, id, 16);
    if (seq > t->seen)
        t->seen = seq;
    return true;
}

bool ib__sq_tail_sweep(sq_tail *t, uint64_t merged)
{
    bool ok = true;
    if (merged <= t->merged)
        return true;
    /* Cleared, the rows above `merged` are read again (seen <= merged). */
    if (t->used > 0 && !rebuild(t, t->cap, merged)) {
        ib__sq_tail_clear(t);
        ok = false;
    }
    t->merged = merged;
    if (t->seen < merged)
        t->seen = merged;
    return ok;
}

void ib__sq_tail_state(const sq_tail_entry *e, sq_state *out)
{
    memcpy(out->id, e->id, 16);
    out->done = e->done;
    out->ts = e->ts;
    out->fp = e->fp;
    out->attempts = e->attempts;
    out->expires = e->expires;
    /* interned from an sq_state's owner, so it fits */
    memcpy(out->owner, e->owner, strlen(e->owner) + 1);
}

void ib__sq_tail_each(const sq_tail *t, void (*visit)(void *ctx, const sq_tail_entry *e), void *ctx)
{
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].seq != 0)
            visit(ctx, &t->slots[i]);
}
