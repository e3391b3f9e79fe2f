/* SPDX-License-Identifier: Apache-2.0 */
/* A partition's markers in memory (marker_table.h): an open-addressing
 * set of (consumer, id) pairs, kept at most three-quarters full, and the
 * consumers' names, each stored once and named by its index. */
#include "marker_table.h"

#include <stdlib.h>
#include <string.h>

#define NO_CONSUMER UINT16_MAX

typedef struct slot {
    uint8_t id[16];
    uint16_t consumer; /* index into names; NO_CONSUMER: free slot */
    bool marked;
    bool in_flight; /* claimed, and neither released nor marked since */
    uint32_t attempts;
    uint64_t fingerprint;
} slot;

/* What marker_table.h says a pair costs. */
_Static_assert(sizeof(slot) == 32, "a slot is 32 bytes");

struct ib_marker_table {
    slot *slots;
    size_t cap; /* a power of two, or 0 */
    size_t used;
    size_t marked; /* pairs marked */
    char **names;
    size_t nnames, names_cap;
    uint64_t records, stale_records, epoch;
};

ib_status ib_marker_table_create(ib_marker_table **out, ib_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "marker table: no memory");
    return IB_OK;
}

void ib_marker_table_free(ib_marker_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nnames; i++)
        free(t->names[i]);
    free(t->names);
    free(t->slots);
    free(t);
}

/* Ids are random (uuid4) or hashes (uuid8): their first eight bytes are
 * spread already; the consumer is mixed in so two consumers' pairs of one
 * id do not collide. */
static size_t pair_hash(uint16_t consumer, const uint8_t id[16])
{
    uint64_t h;
    memcpy(&h, id, sizeof(h));
    h ^= (uint64_t)(consumer + 1) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return (size_t)h;
}

/* The slot of the pair, or the free slot where it would go. */
static slot *find(slot *slots, size_t cap, uint16_t consumer, const uint8_t id[16])
{
    size_t mask = cap - 1;
    for (size_t k = pair_hash(consumer, id) & mask;; k = (k + 1) & mask) {
        slot *s = &slots[k];
        if (s->consumer == NO_CONSUMER || (s->consumer == consumer && memcmp(s->id, id, 16) == 0))
            return s;
    }
}

/* Room for `more` pairs beyond those there, at most three-quarters
 * full; false when out of memory (the table is unchanged). */
static bool reserve(ib_marker_table *t, size_t more)
{
    size_t need = t->used + more;
    if (t->cap != 0 && need <= t->cap / 4 * 3)
        return true;
    size_t cap = t->cap != 0 ? t->cap : 64;
    while (need > cap / 4 * 3)
        cap *= 2;
    slot *fresh = malloc(cap * sizeof(*fresh));
    if (fresh == NULL)
        return false;
    for (size_t i = 0; i < cap; i++)
        fresh[i].consumer = NO_CONSUMER;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].consumer != NO_CONSUMER)
            *find(fresh, cap, t->slots[i].consumer, t->slots[i].id) = t->slots[i];
    free(t->slots);
    t->slots = fresh;
    t->cap = cap;
    return true;
}

static int name_index(const ib_marker_table *t, const char *name)
{
    for (size_t i = 0; i < t->nnames; i++)
        if (strcmp(t->names[i], name) == 0)
            return (int)i;
    return -1;
}

/* The table's indices of the record's names, adding those it lacks. */
static ib_status names_map(ib_marker_table *t, const ib_marker_log_record *rec, uint16_t *map,
                           ib_error *err)
{
    for (size_t i = 0; i < rec->nnames; i++) {
        int k = name_index(t, rec->names[i]);
        if (k >= 0) {
            map[i] = (uint16_t)k;
            continue;
        }
        if (t->nnames >= NO_CONSUMER)
            return ib_error_set(err, IB_ERR_INVALID_ARG, "marker table: more than %u consumers",
                                NO_CONSUMER - 1u);
        if (t->nnames == t->names_cap) {
            size_t cap = t->names_cap != 0 ? t->names_cap * 2 : 8;
            char **grown = realloc(t->names, cap * sizeof(*grown));
            if (grown == NULL)
                return ib_error_set(err, IB_ERR_NOMEM, "marker table: no memory for names");
            t->names = grown;
            t->names_cap = cap;
        }
        char *copy = strdup(rec->names[i]);
        if (copy == NULL)
            return ib_error_set(err, IB_ERR_NOMEM, "marker table: no memory for names");
        t->names[t->nnames] = copy;
        map[i] = (uint16_t)t->nnames++;
    }
    return IB_OK;
}

/* One entry of a record, on a table with room for it. */
static void apply_entry(ib_marker_table *t, ib_marker_log_kind kind, uint16_t consumer,
                        const ib_marker_log_entry *e)
{
    slot *s = find(t->slots, t->cap, consumer, e->id);
    if (s->consumer == NO_CONSUMER) {
        if (kind == IB_MARKER_LOG_ENDED || kind == IB_MARKER_LOG_RELEASED)
            return; /* nothing to end or release */
        memset(s, 0, sizeof(*s));
        s->consumer = consumer;
        memcpy(s->id, e->id, 16);
        s->fingerprint = e->fingerprint;
        t->used++;
    }
    if (s->marked)
        return; /* the first mark stands */
    switch (kind) {
    case IB_MARKER_LOG_CLAIMED:
        s->in_flight = true;
        break;
    case IB_MARKER_LOG_COUNTED:
        if (s->attempts < UINT32_MAX)
            s->attempts++;
        break;
    case IB_MARKER_LOG_RELEASED:
        s->in_flight = false;
        break;
    case IB_MARKER_LOG_DONE:
        t->marked++;
        s->marked = true;
        s->in_flight = false;
        s->fingerprint = e->fingerprint;
        break;
    case IB_MARKER_LOG_ENDED:
        s->attempts = 0;
        s->in_flight = false;
        break;
    }
}

ib_status ib_marker_table_apply(ib_marker_table *t, const ib_marker_log_record *rec, ib_error *err)
{
    uint16_t map[IB_MARKER_LOG_CONSUMERS_MAX];
    if (rec->nnames > IB_MARKER_LOG_CONSUMERS_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker table: too many names in a record");
    /* everything that can fail comes first: a record applies whole */
    size_t had = t->nnames;
    ib_status st = names_map(t, rec, map, err);
    if (st == IB_OK && !reserve(t, rec->nentries))
        st = ib_error_set(err, IB_ERR_NOMEM, "marker table: no memory for %zu more pairs",
                          t->used + rec->nentries);
    if (st != IB_OK) {
        while (t->nnames > had)
            free(t->names[--t->nnames]);
        return st;
    }
    for (size_t i = 0; i < rec->nentries; i++)
        apply_entry(t, rec->kind, map[rec->entries[i].consumer], &rec->entries[i]);
    t->records++;
    if (rec->epoch < t->epoch)
        t->stale_records++;
    else
        t->epoch = rec->epoch;
    return IB_OK;
}

ib_pair_state ib_marker_table_lookup(const ib_marker_table *t, const char *consumer,
                                     const uint8_t id[16])
{
    ib_pair_state out = {0};
    int k = name_index(t, consumer);
    if (k < 0 || t->cap == 0)
        return out;
    const slot *s = find(t->slots, t->cap, (uint16_t)k, id);
    if (s->consumer == NO_CONSUMER)
        return out;
    out.known = true;
    out.marked = s->marked;
    out.in_flight = s->in_flight;
    out.attempts = s->attempts;
    out.fingerprint = s->fingerprint;
    return out;
}

bool ib_marker_table_knows(const ib_marker_table *t, const char *consumer)
{
    return name_index(t, consumer) >= 0;
}

ib_marker_table_stats ib_marker_table_stats_get(const ib_marker_table *t)
{
    return (ib_marker_table_stats){.pairs = t->used,
                                   .marked = t->marked,
                                   .records = t->records,
                                   .stale_records = t->stale_records,
                                   .epoch = t->epoch};
}
