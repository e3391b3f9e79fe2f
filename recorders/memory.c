/* SPDX-License-Identifier: Apache-2.0 */
/* memory: an in-process set of done markers, with claims and an optional
 * capacity bound that evicts the oldest markers.
 *
 * Layout, chosen to stay compact (well under 64 bytes a marker):
 *  - Markers are 28-byte entries kept in insertion order in a ring of
 *    logical positions [tail, head). The ring's storage is a table of
 *    fixed-size chunks allocated only where the live range lies, so growing
 *    never holds two copies of the markers for long and a pruned recorder
 *    gives its memory back. Removing a marker leaves a hole; holes at the
 *    tail are skipped, holes elsewhere are squeezed out when the ring must
 *    grow and a quarter of it is holes.
 *  - An open-addressing index (linear probing, backward-shift deletion, no
 *    tombstones) maps (consumer, id) to a ring slot. A bucket holds 32 bits
 *    of the key's hash beside the slot, so a miss rarely touches an entry.
 *    The hash is seeded per recorder so ids chosen by a producer cannot
 *    aim at one probe chain.
 *  - Consumers are interned: an entry stores a 32-bit consumer number and
 *    the 16 packed bytes of its id.
 *  - A marker's time takes 48 bits (unix ms, +-4000 years) so that 16 bits
 *    of its payload fingerprint fit in the same 28 bytes. Comparing 16
 *    bits never reports a false conflict (equal fingerprints stay equal)
 *    and misses a reused id once in 65 536: enough to catch a producer's
 *    mistake, at no memory per marker.
 *  - Claims in progress live in their own small table; they are few (one
 *    per event in flight) and vanish on mark or release.
 *
 * One mutex guards everything. Striping would scale checks across threads,
 * but eviction must follow one global insertion order, and a batch call
 * already takes the lock once for the whole batch. */
#include "recorder_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "uuid.h"
#include "clock.h"

#define CHUNK_BITS 10
#define CHUNK_SLOTS (1u << CHUNK_BITS)
#define SPACE_MAX ((uint64_t)1 << 31) /* slot numbers stay below NO_SLOT */
#define NO_SLOT UINT32_MAX
#define HOLE UINT32_MAX /* consumer number of a removed entry */
#define MIN_BUCKET_BITS 6
#define MIN_CLAIM_BITS 4
#define CONSUMERS_MAX (1u << 24)

/* 4-byte aligned on purpose: an int64 ts would pad the entry to 32 bytes. */
typedef struct entry {
    uint8_t id[16];
    uint32_t consumer;
    uint32_t ts_lo;
    uint16_t ts_hi; /* bits 32..47 of ts, sign-extended on reading */
    uint16_t fp;    /* fp_short() of the fingerprint; 0 = none */
} entry;

#define TS_MAX (((int64_t)1 << 47) - 1)
#define TS_MIN (-((int64_t)1 << 47))

typedef struct bucket {
    uint32_t tag; /* low 32 bits of the key's hash */
    uint32_t slot;
} bucket;

typedef struct consumer_rec {
    char *name;
    uint64_t hash;
    uint64_t markers;
} consumer_rec;

typedef struct claim {
    uint8_t id[16];
    uint32_t consumer;
    int64_t expires_ms; /* on the lease clock */
    uint32_t attempts;
    char *owner; /* NULL marks a free cell */
} claim;

typedef struct mem_recorder {
    ib_recorder base;
    pthread_mutex_t mu;
    uint64_t seed;
    size_t capacity; /* 0 = unbounded */

    /* ring of entries */
    entry **chunks;
    uint64_t space; /* addressable slots, a power of two >= CHUNK_SLOTS */
    uint64_t tail, head;
    uint64_t live;
    uint64_t chunks_allocated;

    /* index over the ring */
    bucket *buckets;
    unsigned bucket_bits;

    /* interned consumers, with their own little index; `last` remembers
     * the consumer of the previous call, since a caller usually asks for
     * one consumer many times in a row (a string compare beats hashing) */
    uint32_t last;
    consumer_rec *consumers;
    uint32_t nconsumers, consumers_cap;
    uint32_t *cindex; /* consumer number + 1; 0 = empty */
    unsigned cindex_bits;

    /* claims in progress */
    claim *claims;
    unsigned claim_bits;
    uint32_t nclaims;
    uint64_t owner_bytes;
} mem_recorder;

static inline mem_recorder *mem(ib_recorder *r)
{
    return (mem_recorder *)r;
}

/* --- hashing --------------------------------------------------------- */

static inline uint64_t fmix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t key_hash(const mem_recorder *m, uint32_t consumer, const uint8_t id[16])
{
    uint64_t a, b;
    memcpy(&a, id, 8);
    memcpy(&b, id + 8, 8);
    uint64_t h = m->seed ^ ((uint64_t)consumer * 0x9e3779b97f4a7c15ULL);
    h = fmix(h ^ a);
    return fmix(h ^ b);
}

static uint64_t name_hash(const mem_recorder *m, const char *s)
{
    uint64_t h = m->seed ^ 0xcbf29ce484222325ULL;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return fmix(h);
}

/* --- ring access ------------------------------------------------------ */

static inline uint32_t slot_of(const mem_recorder *m, uint64_t pos)
{
    return (uint32_t)(pos & (m->space - 1));
}

static inline entry *at_slot(const mem_recorder *m, uint32_t slot)
{
    return &m->chunks[slot >> CHUNK_BITS][slot & (CHUNK_SLOTS - 1)];
}

static inline entry *at_pos(const mem_recorder *m, uint64_t pos)
{
    return at_slot(m, slot_of(m, pos));
}

static inline int64_t entry_ts(const entry *e)
{
    int64_t hi = (int16_t)e->ts_hi;
    return (int64_t)((uint64_t)hi << 32) | e->ts_lo;
}

/* A clock beyond +-4000 years (only an injected one) is clamped. */
static inline void entry_set_ts(entry *e, int64_t ts)
{
    ts = ts > TS_MAX ? TS_MAX : ts < TS_MIN ? TS_MIN : ts;
    e->ts_lo = (uint32_t)(uint64_t)ts;
    e->ts_hi = (uint16_t)((uint64_t)ts >> 32);
}

/* The 16 bits of a fingerprint an entry keeps: never 0 for a fingerprint,
 * so "none" stays apart. The top bits: ib_fingerprint's finaliser mixes
 * every input bit into them. */
static inline uint16_t fp_short(uint64_t fp)
{
    if (fp == 0)
        return 0;
    uint16_t v = (uint16_t)(fp >> 48);
    return v != 0 ? v : 1;
}

/* --- consumers ---------------------------------------------------------- */

/* Number of `name`, or HOLE if it was never interned. */
static uint32_t consumer_find_hashed(const mem_recorder *m, const char *name, uint64_t h)
{
    size_t mask = ((size_t)1 << m->cindex_bits) - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t v = m->cindex[i];
        if (v == 0)
            return HOLE;
        const consumer_rec *c = &m->consumers[v - 1];
        if (c->hash == h && strcmp(c->name, name) == 0)
            return v - 1;
    }
}

static uint32_t consumer_find(mem_recorder *m, const char *name)
{
    if (m->last < m->nconsumers && strcmp(m->consumers[m->last].name, name) == 0)
        return m->last;
    uint32_t c = consumer_find_hashed(m, name, name_hash(m, name));
    if (c != HOLE)
        m->last = c;
    return c;
}

static void cindex_put(uint32_t *cindex, unsigned bits, uint64_t h, uint32_t number)
{
    size_t mask = ((size_t)1 << bits) - 1;
    size_t i = h & mask;
    while (cindex[i] != 0)
        i = (i + 1) & mask;
    cindex[i] = number + 1;
}

static ib_status consumer_intern(mem_recorder *m, uint32_t *out, const char *name, ib_error *err)
{
    uint32_t c = consumer_find(m, name);
    if (c != HOLE) {
        *out = c;
        return IB_OK;
    }
    if (m->nconsumers >= CONSUMERS_MAX)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: more than %u consumers",
                            CONSUMERS_MAX);
    if (m->nconsumers == m->consumers_cap) {
        uint32_t cap = m->consumers_cap * 2;
        consumer_rec *nc = realloc(m->consumers, cap * sizeof(*nc));
        if (nc == NULL)
            goto nomem;
        m->consumers = nc;
        m->consumers_cap = cap;
    }
    /* Keep the consumer index at most half full. */
    if ((size_t)(m->nconsumers + 1) * 2 > ((size_t)1 << m->cindex_bits)) {
        unsigned bits = m->cindex_bits + 1;
        uint32_t *ni = calloc((size_t)1 << bits, sizeof(*ni));
        if (ni == NULL)
            goto nomem;
        for (uint32_t i = 0; i < m->nconsumers; i++)
            cindex_put(ni, bits, m->consumers[i].hash, i);
        free(m->cindex);
        m->cindex = ni;
        m->cindex_bits = bits;
    }
    uint64_t h = name_hash(m, name);
    char *copy = strdup(name);
    if (copy == NULL)
        goto nomem;
    m->consumers[m->nconsumers] = (consumer_rec){.name = copy, .hash = h, .markers = 0};
    cindex_put(m->cindex, m->cindex_bits, h, m->nconsumers);
    *out = m->nconsumers++;
    return IB_OK;
nomem:
    return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory interning a consumer");
}

/* --- index ------------------------------------------------------------ */

static inline size_t bucket_mask(const mem_recorder *m)
{
    return ((size_t)1 << m->bucket_bits) - 1;
}

static inline size_t home_of(const mem_recorder *m, uint64_t h)
{
    return (size_t)(h >> (64 - m->bucket_bits));
}

/* Bucket holding (consumer, id), or the first empty bucket of its probe
 * chain (whose slot is NO_SLOT). */
static size_t index_probe(const mem_recorder *m, uint32_t consumer, const uint8_t id[16],
                          uint64_t h)
{
    size_t mask = bucket_mask(m);
    uint32_t tag = (uint32_t)h;
    for (size_t i = home_of(m, h);; i = (i + 1) & mask) {
        const bucket *b = &m->buckets[i];
        if (b->slot == NO_SLOT)
            return i;
        if (b->tag == tag) {
            const entry *e = at_slot(m, b->slot);
            if (e->consumer == consumer && memcmp(e->id, id, 16) == 0)
                return i;
        }
    }
}

static void index_put(mem_recorder *m, uint32_t slot)
{
    const entry *e = at_slot(m, slot);
    uint64_t h = key_hash(m, e->consumer, e->id);
    size_t mask = bucket_mask(m);
    size_t i = home_of(m, h);
    while (m->buckets[i].slot != NO_SLOT)
        i = (i + 1) & mask;
    m->buckets[i] = (bucket){.tag = (uint32_t)h, .slot = slot};
}

/* Backward-shift deletion: later members of the probe run move up so no
 * lookup ever needs a tombstone. */
static void index_delete(mem_recorder *m, size_t i)
{
    size_t mask = bucket_mask(m);
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        bucket b = m->buckets[j];
        if (b.slot == NO_SLOT)
            break;
        const entry *e = at_slot(m, b.slot);
        size_t home = home_of(m, key_hash(m, e->consumer, e->id));
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->buckets[i] = b;
            i = j;
        }
    }
    m->buckets[i].slot = NO_SLOT;
}

static void index_fill(mem_recorder *m)
{
    for (size_t i = 0; i <= bucket_mask(m); i++)
        m->buckets[i].slot = NO_SLOT;
    for (uint64_t p = m->tail; p < m->head; p++) {
        const entry *e = at_pos(m, p);
        if (e->consumer != HOLE)
            index_put(m, slot_of(m, p));
    }
}

static ib_status index_resize(mem_recorder *m, unsigned bits, ib_error *err)
{
    bucket *nb = malloc(sizeof(*nb) << bits);
    if (nb == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory growing the index");
    free(m->buckets);
    m->buckets = nb;
    m->bucket_bits = bits;
    index_fill(m);
    return IB_OK;
}

/* Index size for `n` markers: at most three quarters full. */
static unsigned bits_for(uint64_t n)
{
    unsigned bits = MIN_BUCKET_BITS;
    while ((((uint64_t)1 << bits) * 3) / 4 < n)
        bits++;
    return bits;
}

/* --- ring maintenance ----------------------------------------------------- */

static void free_chunk(mem_recorder *m, size_t c)
{
    if (m->chunks[c] != NULL) {
        free(m->chunks[c]);
        m->chunks[c] = NULL;
        m->chunks_allocated--;
    }
}

/* Advances the tail over holes, freeing chunks left behind (unless the
 * ring has wrapped and its newest entries share that chunk). */
static void trim_tail(mem_recorder *m)
{
    while (m->tail < m->head && at_pos(m, m->tail)->consumer == HOLE) {
        uint32_t slot = slot_of(m, m->tail);
        m->tail++;
        bool chunk_end = ((slot + 1) & (CHUNK_SLOTS - 1)) == 0;
        size_t c = slot >> CHUNK_BITS;
        if (chunk_end && (m->tail == m->head || (slot_of(m, m->head - 1) >> CHUNK_BITS) != c))
            free_chunk(m, c);
    }
    if (m->tail == m->head) {
        /* Empty: start over at slot 0 and free everything. */
        for (size_t c = 0; c < m->space / CHUNK_SLOTS; c++)
            free_chunk(m, c);
        m->tail = m->head = 0;
    }
}

/* Copies the live entries, in order, into a fresh ring of `space` slots:
 * squeezes out holes and (with a larger space) makes room. All or nothing. */
static ib_status relayout(mem_recorder *m, uint64_t space, ib_error *err)
{
    size_t nchunks = (size_t)(space / CHUNK_SLOTS);
    entry **nc = calloc(nchunks, sizeof(*nc));
    uint64_t allocated = 0, n = 0;
    if (nc == NULL)
        goto nomem;
    for (uint64_t p = m->tail; p < m->head; p++) {
        const entry *e = at_pos(m, p);
        if (e->consumer == HOLE)
            continue;
        size_t c = (size_t)(n >> CHUNK_BITS);
        if (nc[c] == NULL) {
            nc[c] = malloc(sizeof(entry) * CHUNK_SLOTS);
            if (nc[c] == NULL)
                goto unwind;
            allocated++;
        }
        nc[c][n & (CHUNK_SLOTS - 1)] = *e;
        n++;
    }
    for (size_t c = 0; c < m->space / CHUNK_SLOTS; c++)
        free(m->chunks[c]);
    free(m->chunks);
    m->chunks = nc;
    m->space = space;
    m->chunks_allocated = allocated;
    m->tail = 0;
    m->head = n;
    index_fill(m);
    return IB_OK;
unwind:
    for (size_t c = 0; c < nchunks; c++)
        free(nc[c]);
    free(nc);
nomem:
    return ib_error_set(err, IB_ERR_NOMEM,
                        "recorder memory: out of memory growing the marker ring");
}

/* Removes the marker in bucket `bi` (at ring position `pos`). */
static void remove_marker(mem_recorder *m, size_t bi, uint64_t pos)
{
    entry *e = at_pos(m, pos);
    m->consumers[e->consumer].markers--;
    index_delete(m, bi);
    e->consumer = HOLE;
    m->live--;
    if (pos == m->tail)
        trim_tail(m);
}

static void evict_oldest(mem_recorder *m)
{
    trim_tail(m);
    const entry *e = at_pos(m, m->tail);
    size_t bi = index_probe(m, e->consumer, e->id, key_hash(m, e->consumer, e->id));
    remove_marker(m, bi, m->tail);
}

/* Makes room for one more entry at the head. */
static ib_status reserve_one(mem_recorder *m, ib_error *err)
{
    if (m->capacity != 0 && m->live >= m->capacity)
        evict_oldest(m);
    if (m->head - m->tail == m->space) {
        uint64_t holes = m->space - m->live;
        uint64_t space = holes >= m->space / 4 ? m->space : m->space * 2;
        if (space > SPACE_MAX)
            return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: marker ring is full");
        ib_status st = relayout(m, space, err);
        if (st != IB_OK)
            return st;
    }
    if (bits_for(m->live + 1) > m->bucket_bits) {
        ib_status st = index_resize(m, m->bucket_bits + 1, err);
        if (st != IB_OK)
            return st;
    }
    size_t c = slot_of(m, m->head) >> CHUNK_BITS;
    if (m->chunks[c] == NULL) {
        m->chunks[c] = malloc(sizeof(entry) * CHUNK_SLOTS);
        if (m->chunks[c] == NULL)
            return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory for markers");
        m->chunks_allocated++;
    }
    return IB_OK;
}

/* --- claims ---------------------------------------------------------------- */

static inline size_t claim_mask(const mem_recorder *m)
{
    return ((size_t)1 << m->claim_bits) - 1;
}

static size_t claim_probe(const mem_recorder *m, uint32_t consumer, const uint8_t id[16])
{
    size_t mask = claim_mask(m);
    for (size_t i = key_hash(m, consumer, id) & mask;; i = (i + 1) & mask) {
        const claim *c = &m->claims[i];
        if (c->owner == NULL || (c->consumer == consumer && memcmp(c->id, id, 16) == 0))
            return i;
    }
}

static void claim_delete(mem_recorder *m, size_t i)
{
    size_t mask = claim_mask(m);
    m->owner_bytes -= strlen(m->claims[i].owner) + 1;
    free(m->claims[i].owner);
    m->claims[i].owner = NULL;
    m->nclaims--;
    for (size_t j = (i + 1) & mask; m->claims[j].owner != NULL; j = (j + 1) & mask) {
        size_t home = key_hash(m, m->claims[j].consumer, m->claims[j].id) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->claims[i] = m->claims[j];
            m->claims[j].owner = NULL;
            i = j;
        }
    }
}

/* Rebuilds the claim table with `bits`, dropping claims whose lease ended
 * at or before `drop_expired_at` (INT64_MIN keeps them all). */
static ib_status claims_rebuild(mem_recorder *m, unsigned bits, int64_t drop_expired_at,
                                ib_error *err)
{
    claim *nt = calloc((size_t)1 << bits, sizeof(*nt));
    if (nt == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory for claims");
    size_t nmask = ((size_t)1 << bits) - 1;
    for (size_t i = 0; i <= claim_mask(m); i++) {
        claim *c = &m->claims[i];
        if (c->owner == NULL)
            continue;
        if (c->expires_ms <= drop_expired_at) {
            m->owner_bytes -= strlen(c->owner) + 1;
            free(c->owner);
            m->nclaims--;
            continue;
        }
        size_t j = key_hash(m, c->consumer, c->id) & nmask;
        while (nt[j].owner != NULL)
            j = (j + 1) & nmask;
        nt[j] = *c;
    }
    free(m->claims);
    m->claims = nt;
    m->claim_bits = bits;
    return IB_OK;
}

static void claim_clear(mem_recorder *m, uint32_t consumer, const uint8_t id[16])
{
    if (m->nclaims == 0)
        return;
    size_t i = claim_probe(m, consumer, id);
    if (m->claims[i].owner != NULL)
        claim_delete(m, i);
}

/* --- operations (lock held) ----------------------------------------------- */

static bool find_locked(mem_recorder *m, size_t *bi, uint32_t *consumer, const char *name,
                        const uint8_t id[16])
{
    uint32_t c = consumer_find(m, name);
    if (consumer != NULL)
        *consumer = c;
    if (c == HOLE)
        return false;
    size_t i = index_probe(m, c, id, key_hash(m, c, id));
    if (bi != NULL)
        *bi = i;
    return m->buckets[i].slot != NO_SLOT;
}

/* Adds the marker of consumer number `c` and packed `id`, whose claim the
 * caller has cleared. `fp`: the marker's fingerprint (0 = none); a marker
 * that exists keeps its own. */
static ib_status insert_marker(mem_recorder *m, uint32_t c, const uint8_t id[16], uint64_t fp,
                               ib_error *err)
{
    uint64_t h = key_hash(m, c, id);
    if (m->buckets[index_probe(m, c, id, h)].slot != NO_SLOT)
        return IB_OK; /* first mark wins; its ts stays */
    ib_status st = reserve_one(m, err);
    if (st != IB_OK)
        return st;
    uint32_t slot = slot_of(m, m->head);
    entry *e = at_slot(m, slot);
    memcpy(e->id, id, 16);
    e->consumer = c;
    entry_set_ts(e, m->base.now_ms());
    e->fp = fp_short(fp);
    size_t bi = index_probe(m, c, id, h);
    m->buckets[bi] = (bucket){.tag = (uint32_t)h, .slot = slot};
    m->head++;
    m->live++;
    m->consumers[c].markers++;
    return IB_OK;
}

/* Marks (name, event_id), whatever claim it has. */
static ib_status mark_locked(mem_recorder *m, const char *name, const char *event_id, uint64_t fp,
                             ib_error *err)
{
    uint8_t id[16];
    uint32_t c;
    ib_id_pack(id, event_id);
    ib_status st = consumer_intern(m, &c, name, err);
    if (st != IB_OK)
        return st;
    claim_clear(m, c, id);
    return insert_marker(m, c, id, fp, err);
}

/* The fenced mark of one key: allowed unless another owner's lease still
 * runs (`now` on the lease clock). The id is packed, the consumer looked up
 * and the claim probed once, for the decision and the mark alike. */
static ib_status mark_owned_locked(mem_recorder *m, bool *marked, const ib_marker_key *key,
                                   uint64_t fp, const char *owner, int64_t now, ib_error *err)
{
    uint8_t id[16];
    ib_id_pack(id, key->event_id);
    uint32_t c = consumer_find(m, key->consumer);
    size_t ci = 0;
    const claim *cl = NULL;
    if (c != HOLE && m->nclaims > 0) {
        ci = claim_probe(m, c, id);
        cl = m->claims[ci].owner != NULL ? &m->claims[ci] : NULL;
    }
    *marked = cl == NULL || strcmp(cl->owner, owner) == 0 || cl->expires_ms <= now;
    if (!*marked)
        return IB_OK;
    if (c == HOLE) {
        ib_status st = consumer_intern(m, &c, key->consumer, err);
        if (st != IB_OK)
            return st;
    }
    if (cl != NULL)
        claim_delete(m, ci);
    return insert_marker(m, c, id, fp, err);
}

/* Claims one key (ib_recorder_acquire_batch's rules; `fp` as for
 * ib__recorder_acquire_fp, 0 = no check). Attempts are counted while the
 * claim exists; a release forgets them (the memory kind does not declare
 * durable attempts, so the host does not rely on them). */
static ib_status acquire_locked(mem_recorder *m, ib_claim_info *info, bool *taken_over,
                                const char *name, const char *event_id, uint64_t fp,
                                const ib_claim_request *req, bool count, ib_error *err)
{
    uint8_t id[16];
    uint32_t c;
    size_t bi;
    *info = (ib_claim_info){.state = IB_CLAIM_DONE};
    ib_id_pack(id, event_id);
    if (find_locked(m, &bi, NULL, name, id)) {
        uint16_t have = at_slot(m, m->buckets[bi].slot)->fp;
        if (fp != 0 && have != 0 && have != fp_short(fp))
            info->state = IB_CLAIM_CONFLICT;
        return IB_OK;
    }
    ib_status st = consumer_intern(m, &c, name, err);
    if (st != IB_OK)
        return st;
    int64_t now = m->base.lease_now_ms();
    int64_t expires = ib__lease_end(now, req->lease_ms);
    size_t i = claim_probe(m, c, id);
    claim *cl = &m->claims[i];
    if (cl->owner != NULL) {
        int64_t hold = ib__claim_hold_ms(cl->owner, req->owner, cl->expires_ms, now, req->lease_ms,
                                         req->probe_holders, true);
        info->attempts = cl->attempts;
        if (hold > 0) {
            info->state = IB_CLAIM_BUSY;
            info->remaining_ms = hold;
            return IB_OK;
        }
        if (taken_over != NULL)
            *taken_over = strcmp(cl->owner, req->owner) != 0;
        if (req->max_attempts > 0 && cl->attempts >= req->max_attempts) {
            info->state = IB_CLAIM_EXHAUSTED;
            return IB_OK;
        }
        if (strcmp(cl->owner, req->owner) != 0) {
            /* Ended lease: take it over. */
            char *copy = strdup(req->owner);
            if (copy == NULL)
                return ib_error_set(err, IB_ERR_NOMEM,
                                    "recorder memory: out of memory for a claim");
            m->owner_bytes += strlen(req->owner) + 1;
            m->owner_bytes -= strlen(cl->owner) + 1;
            free(cl->owner);
            cl->owner = copy;
        }
        cl->expires_ms = expires;
        if (count && cl->attempts < UINT32_MAX)
            cl->attempts++;
        info->state = IB_CLAIM_ACQUIRED;
        info->attempts = cl->attempts;
        return IB_OK;
    }
    /* Keep the claim table at most half full. */
    if ((size_t)(m->nclaims + 1) * 2 > claim_mask(m) + 1) {
        st = claims_rebuild(m, m->claim_bits + 1, INT64_MIN, err);
        if (st != IB_OK)
            return st;
        i = claim_probe(m, c, id);
        cl = &m->claims[i];
    }
    char *copy = strdup(req->owner);
    if (copy == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory for a claim");
    memcpy(cl->id, id, 16);
    cl->consumer = c;
    cl->expires_ms = expires;
    cl->owner = copy;
    cl->attempts = count ? 1 : 0;
    m->nclaims++;
    m->owner_bytes += strlen(req->owner) + 1;
    info->state = IB_CLAIM_ACQUIRED;
    info->attempts = cl->attempts;
    return IB_OK;
}

static ib_status claim_locked(mem_recorder *m, ib_claim_state *state, const char *name,
                              const char *event_id, const char *owner, int64_t lease_ms,
                              ib_error *err)
{
    ib_claim_request req = {.owner = owner, .lease_ms = lease_ms};
    ib_claim_info info;
    ib_status st = acquire_locked(m, &info, NULL, name, event_id, 0, &req, true, err);
    *state = info.state;
    return st;
}

/* The claim cell of a key held by anyone, or NULL. */
static claim *claim_find(mem_recorder *m, const char *name, const char *event_id)
{
    uint8_t id[16];
    if (m->nclaims == 0)
        return NULL;
    uint32_t c = consumer_find(m, name);
    if (c == HOLE)
        return NULL;
    ib_id_pack(id, event_id);
    claim *cl = &m->claims[claim_probe(m, c, id)];
    return cl->owner != NULL ? cl : NULL;
}

static void release_locked(mem_recorder *m, const char *name, const char *event_id,
                           const char *owner)
{
    uint8_t id[16];
    if (m->nclaims == 0)
        return;
    uint32_t c = consumer_find(m, name);
    if (c == HOLE)
        return;
    ib_id_pack(id, event_id);
    size_t i = claim_probe(m, c, id);
    if (m->claims[i].owner != NULL && strcmp(m->claims[i].owner, owner) == 0)
        claim_delete(m, i);
}

/* --- vtable --------------------------------------------------------------- */

static ib_status mem_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                  const char *event_id, ib_error *err)
{
    mem_recorder *m = mem(r);
    uint8_t id[16];
    (void)err;
    ib_id_pack(id, event_id);
    pthread_mutex_lock(&m->mu);
    *processed = find_locked(m, NULL, NULL, consumer, id);
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

static ib_status mem_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys,
                                 size_t n, ib_error *err)
{
    mem_recorder *m = mem(r);
    uint8_t id[16];
    (void)err;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        ib_id_pack(id, keys[i].event_id);
        processed[i] = find_locked(m, NULL, NULL, keys[i].consumer, id);
    }
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

/* Not atomic on allocation failure: the marks made before it stay, which is
 * harmless since marking is idempotent and the caller retries the batch. */
static ib_status mem_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    mem_recorder *m = mem(r);
    ib_status st = IB_OK;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        st = mark_locked(m, keys[i].consumer, keys[i].event_id, 0, err);
    pthread_mutex_unlock(&m->mu);
    return st;
}

static ib_status mem_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                                 size_t n, const char *owner, int64_t lease_ms, ib_error *err)
{
    mem_recorder *m = mem(r);
    ib_status st = IB_OK;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        st = claim_locked(m, &states[i], keys[i].consumer, keys[i].event_id, owner, lease_ms, err);
    pthread_mutex_unlock(&m->mu);
    return st;
}

static ib_status mem_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                   const char *owner, ib_error *err)
{
    mem_recorder *m = mem(r);
    (void)err;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++)
        release_locked(m, keys[i].consumer, keys[i].event_id, owner);
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

/* The one-key calls are batches of one. */

static ib_status mem_mark(ib_recorder *r, const char *consumer, const char *event_id, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return mem_mark_batch(r, &key, 1, err);
}

static ib_status mem_claim(ib_recorder *r, ib_claim_state *state, const char *consumer,
                           const char *event_id, const char *owner, int64_t lease_ms, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return mem_claim_batch(r, state, &key, 1, owner, lease_ms, err);
}

static ib_status mem_release(ib_recorder *r, const char *consumer, const char *event_id,
                             const char *owner, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return mem_release_batch(r, &key, 1, owner, err);
}

static ib_status mem_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                   const uint64_t *fingerprints, size_t n,
                                   const ib_claim_request *req, const ib__acquire_opts *opts,
                                   ib_error *err)
{
    mem_recorder *m = mem(r);
    ib_status st = IB_OK;
    bool defer = opts != NULL && opts->defer_attempts;
    bool *taken_over = opts != NULL ? opts->taken_over : NULL;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        st =
            acquire_locked(m, &out[i], taken_over != NULL ? &taken_over[i] : NULL, keys[i].consumer,
                           keys[i].event_id, fingerprints != NULL ? fingerprints[i] : 0, req,
                           !defer || (i == 0 && opts->count_key0), err);
    pthread_mutex_unlock(&m->mu);
    return st;
}

/* A release forgets the attempts with the claim, as everywhere in this
 * kind: the memory kind's attempts do not outlive the process anyway. */
static ib_status mem_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                    const bool *count, size_t n, const char *owner,
                                    int64_t lease_ms, bool release, ib_error *err)
{
    mem_recorder *m = mem(r);
    (void)err;
    pthread_mutex_lock(&m->mu);
    int64_t expires = ib__lease_end(m->base.lease_now_ms(), lease_ms);
    for (size_t i = 0; i < n; i++) {
        claim *cl = claim_find(m, keys[i].consumer, keys[i].event_id);
        held[i] = cl != NULL && strcmp(cl->owner, owner) == 0;
        if (!held[i])
            continue;
        if (release) {
            release_locked(m, keys[i].consumer, keys[i].event_id, owner);
            continue;
        }
        if ((count == NULL || count[i]) && cl->attempts < UINT32_MAX)
            cl->attempts++;
        cl->expires_ms = expires;
    }
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

static ib_status mem_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                                 const char *owner, int64_t lease_ms, ib_error *err)
{
    mem_recorder *m = mem(r);
    (void)err;
    pthread_mutex_lock(&m->mu);
    int64_t now = m->base.lease_now_ms();
    int64_t expires = ib__lease_end(now, lease_ms);
    for (size_t i = 0; i < n; i++) {
        claim *cl = claim_find(m, keys[i].consumer, keys[i].event_id);
        held[i] = cl != NULL && strcmp(cl->owner, owner) == 0;
        if (held[i])
            cl->expires_ms = expires;
    }
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

/* Not atomic on allocation failure, like mem_mark_batch. */
static ib_status mem_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                      const uint64_t *fingerprints, size_t n, const char *owner,
                                      ib_error *err)
{
    mem_recorder *m = mem(r);
    ib_status st = IB_OK;
    pthread_mutex_lock(&m->mu);
    int64_t now = m->base.lease_now_ms();
    for (size_t i = 0; i < n && st == IB_OK; i++)
        st = mark_owned_locked(m, &marked[i], &keys[i], fingerprints != NULL ? fingerprints[i] : 0,
                               owner, now, err);
    pthread_mutex_unlock(&m->mu);
    return st;
}

/* find_locked for an id still in text, for the admin calls. */
static bool find_key_locked(mem_recorder *m, size_t *bi, const char *consumer, const char *event_id)
{
    uint8_t id[16];
    ib_id_pack(id, event_id);
    return find_locked(m, bi, NULL, consumer, id);
}

static ib_status mem_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                            const char *event_id, ib_error *err)
{
    mem_recorder *m = mem(r);
    size_t bi = 0;
    (void)err;
    pthread_mutex_lock(&m->mu);
    *found = find_key_locked(m, &bi, consumer, event_id);
    *ts_ms = *found ? entry_ts(at_slot(m, m->buckets[bi].slot)) : 0;
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

/* Ring position of `slot`, which must lie in [tail, head). */
static uint64_t pos_of(const mem_recorder *m, uint32_t slot)
{
    return m->tail + ((slot - slot_of(m, m->tail)) & (m->space - 1));
}

/* Ends the attempts of one key (lock held); its claim cell stays. */
static void end_attempts_locked(mem_recorder *m, const char *consumer, const char *event_id)
{
    claim *cl = claim_find(m, consumer, event_id);
    if (cl != NULL)
        cl->attempts = 0;
}

static ib_status mem_forget(ib_recorder *r, bool *existed, const char *consumer,
                            const char *event_id, ib_error *err)
{
    mem_recorder *m = mem(r);
    size_t bi = 0;
    (void)err;
    pthread_mutex_lock(&m->mu);
    *existed = find_key_locked(m, &bi, consumer, event_id);
    if (*existed)
        remove_marker(m, bi, pos_of(m, m->buckets[bi].slot));
    end_attempts_locked(m, consumer, event_id);
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

/* A marked key holds no claim (marking clears it), so every cell found
 * belongs to a key that is not marked. */
static ib_status mem_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                  ib_error *err)
{
    mem_recorder *m = mem(r);
    (void)err;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++)
        end_attempts_locked(m, keys[i].consumer, keys[i].event_id);
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

static ib_status mem_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                             const char *event_id, ib_error *err)
{
    mem_recorder *m = mem(r);
    size_t bi = 0;
    (void)err;
    pthread_mutex_lock(&m->mu);
    out->marked = find_key_locked(m, &bi, consumer, event_id);
    out->ts_ms = out->marked ? entry_ts(at_slot(m, m->buckets[bi].slot)) : 0;
    const claim *cl = claim_find(m, consumer, event_id);
    if (cl != NULL) {
        int64_t left = cl->expires_ms - m->base.lease_now_ms();
        snprintf(out->owner, sizeof(out->owner), "%s", cl->owner);
        out->lease_left_ms = left > 0 ? left : 0;
        out->attempts = cl->attempts;
    }
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

static ib_status mem_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                                   ib_error *err)
{
    mem_recorder *m = mem(r);
    (void)err;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; m->claims != NULL && i <= claim_mask(m); i++) {
        const claim *cl = &m->claims[i];
        if (cl->owner == NULL || cl->attempts == 0)
            continue;
        out->attempted++;
        out->exhausted += cl->attempts >= max_attempts;
    }
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

/* Every marker of the ring, then every claim cell (each has a holder:
 * marks and releases delete the cell). */
static bool summarize_locked(mem_recorder *m, ib__summary_list *l, uint32_t max_attempts)
{
    int64_t now = m->base.lease_now_ms();
    for (uint64_t p = m->tail; p < m->head; p++) {
        const entry *e = at_pos(m, p);
        if (e->consumer == HOLE)
            continue;
        const char *name = m->consumers[e->consumer].name;
        ib__consumer_summary *s = ib__summary_entry(l, name, strlen(name));
        if (s == NULL)
            return false;
        ib__summary_marker(s, entry_ts(e));
    }
    for (size_t i = 0; m->claims != NULL && i <= claim_mask(m); i++) {
        const claim *cl = &m->claims[i];
        if (cl->owner == NULL)
            continue;
        const char *name = m->consumers[cl->consumer].name;
        ib__consumer_summary *s = ib__summary_entry(l, name, strlen(name));
        if (s == NULL)
            return false;
        ib__summary_claim(s, cl->expires_ms - now, cl->owner);
        if (cl->attempts > 0)
            ib__summary_attempts(s, cl->attempts, max_attempts);
    }
    return true;
}

static ib_status mem_summarize(ib_recorder *r, ib__consumer_summary **out, size_t *n,
                               uint32_t max_attempts, ib_error *err)
{
    mem_recorder *m = mem(r);
    ib__summary_list l = {0};
    pthread_mutex_lock(&m->mu);
    bool ok = summarize_locked(m, &l, max_attempts);
    pthread_mutex_unlock(&m->mu);
    if (!ok) {
        ib__consumer_summaries_free(l.v, l.n);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory");
    }
    ib__summary_take(&l, out, n);
    return IB_OK;
}

static ib_status mem_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err)
{
    mem_recorder *m = mem(r);
    ib_status st = IB_OK;
    pthread_mutex_lock(&m->mu);
    uint64_t n = 0;
    for (uint64_t p = m->tail; p < m->head; p++) {
        entry *e = at_pos(m, p);
        if (e->consumer == HOLE || entry_ts(e) >= older_than_ms)
            continue;
        m->consumers[e->consumer].markers--;
        index_delete(m, index_probe(m, e->consumer, e->id, key_hash(m, e->consumer, e->id)));
        e->consumer = HOLE;
        m->live--;
        n++;
    }
    trim_tail(m);
    /* Give memory back: squeeze holes out of a mostly empty ring, and size
     * the index for what is left. */
    uint64_t range = m->head - m->tail;
    if (range > CHUNK_SLOTS && m->live < range / 2)
        st = relayout(m, m->space, err);
    /* One size of slack, so the next mark does not grow it straight back. */
    if (st == IB_OK && bits_for(m->live) + 1 < m->bucket_bits)
        st = index_resize(m, bits_for(m->live) + 1, err);
    /* Expired claims go too; the claim table shrinks to fit what remains. */
    if (st == IB_OK && m->nclaims > 0) {
        unsigned bits = m->claim_bits;
        while (bits > MIN_CLAIM_BITS && ((size_t)m->nclaims * 8) < ((size_t)1 << bits))
            bits--;
        st = claims_rebuild(m, bits, m->base.lease_now_ms(), err);
    }
    pthread_mutex_unlock(&m->mu);
    *removed = n;
    return st;
}

static ib_status mem_list(ib_recorder *r, const char *consumer, size_t limit,
                          ib_marker_visit_fn visit, void *ctx, ib_error *err)
{
    mem_recorder *m = mem(r);
    char id[IB_ID_BUF_SIZE];
    size_t seen = 0;
    (void)err;
    pthread_mutex_lock(&m->mu);
    uint32_t only = HOLE;
    if (consumer != NULL) {
        only = consumer_find(m, consumer);
        if (only == HOLE)
            goto out;
    }
    for (uint64_t p = m->head; p > m->tail && (limit == 0 || seen < limit); p--) {
        const entry *e = at_pos(m, p - 1);
        if (e->consumer == HOLE || (only != HOLE && e->consumer != only))
            continue;
        ib_id_unpack(id, e->id);
        ib_marker_info info = {
            .consumer = m->consumers[e->consumer].name, .event_id = id, .ts_ms = entry_ts(e)};
        seen++;
        if (visit(ctx, &info) != 0)
            break;
    }
out:
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

static ib_status mem_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err)
{
    mem_recorder *m = mem(r);
    (void)err;
    pthread_mutex_lock(&m->mu);
    stats->markers = m->live;
    stats->claims = m->nclaims;
    uint64_t names = 0;
    for (uint32_t i = 0; i < m->nconsumers; i++) {
        if (m->consumers[i].markers > 0)
            stats->consumers++;
        names += strlen(m->consumers[i].name) + 1;
    }
    for (uint64_t p = m->tail; p < m->head; p++) {
        const entry *e = at_pos(m, p);
        if (e->consumer == HOLE)
            continue;
        int64_t ts = entry_ts(e);
        if (stats->oldest_ts_ms == 0 || ts < stats->oldest_ts_ms)
            stats->oldest_ts_ms = ts;
        if (stats->newest_ts_ms == 0 || ts > stats->newest_ts_ms)
            stats->newest_ts_ms = ts;
    }
    stats->storage_bytes =
        sizeof(*m) + m->chunks_allocated * sizeof(entry) * CHUNK_SLOTS +
        (m->space / CHUNK_SLOTS) * sizeof(entry *) + (sizeof(bucket) << m->bucket_bits) +
        (uint64_t)m->consumers_cap * sizeof(consumer_rec) + names +
        (sizeof(uint32_t) << m->cindex_bits) + (sizeof(claim) << m->claim_bits) + m->owner_bytes;
    pthread_mutex_unlock(&m->mu);
    return IB_OK;
}

static void mem_close(ib_recorder *r)
{
    mem_recorder *m = mem(r);
    for (size_t c = 0; c < m->space / CHUNK_SLOTS; c++)
        free(m->chunks[c]);
    free(m->chunks);
    free(m->buckets);
    for (uint32_t i = 0; i < m->nconsumers; i++)
        free(m->consumers[i].name);
    free(m->consumers);
    free(m->cindex);
    for (size_t i = 0; m->claims != NULL && i <= claim_mask(m); i++)
        free(m->claims[i].owner);
    free(m->claims);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static const ib_recorder_ops mem_ops = {
    .size = sizeof(ib_recorder_ops),
    .kind = "memory",
    .is_processed = mem_is_processed,
    .mark_processed = mem_mark,
    .close = mem_close,
    .check_batch = mem_check_batch,
    .mark_batch = mem_mark_batch,
    .claim = mem_claim,
    .claim_batch = mem_claim_batch,
    .release = mem_release,
    .release_batch = mem_release_batch,
    .lookup = mem_lookup,
    .forget = mem_forget,
    .prune = mem_prune,
    .list = mem_list,
    .stats = mem_stats,
    .features = IB_RECORDER_HOST_LOCAL,
    .acquire_batch = mem_acquire_batch,
    .renew_batch = mem_renew_batch,
    .mark_owned_batch = mem_mark_owned_batch,
    .end_attempts = mem_end_attempts,
    .count_attempts = mem_count_attempts,
    .inspect = mem_inspect,
    .attempt_stats = mem_attempt_stats,
    .summarize = mem_summarize,
};

ib_status ib__memory_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err)
{
    mem_recorder *m = calloc(1, sizeof(*m));
    if (m == NULL)
        goto nomem;
    m->base.ops = &mem_ops;
    m->base.now_ms = cfg->now_ms;
    m->base.lease_now_ms = cfg->lease_now_ms;
    m->capacity = cfg->memory_capacity;
    /* A failed getrandom only weakens the hash against chosen ids. */
    if (getrandom(&m->seed, sizeof(m->seed), GRND_NONBLOCK) != (ssize_t)sizeof(m->seed))
        m->seed = (uint64_t)(uintptr_t)m ^ (uint64_t)ib_clock_realtime_ms();
    m->space = CHUNK_SLOTS;
    m->chunks = calloc(1, sizeof(*m->chunks));
    if (m->chunks == NULL)
        goto free_m;
    m->bucket_bits = MIN_BUCKET_BITS;
    m->buckets = malloc(sizeof(bucket) << m->bucket_bits);
    if (m->buckets == NULL)
        goto free_chunks;
    index_fill(m);
    m->consumers_cap = 4;
    m->consumers = malloc(m->consumers_cap * sizeof(*m->consumers));
    if (m->consumers == NULL)
        goto free_buckets;
    m->cindex_bits = 3;
    m->cindex = calloc((size_t)1 << m->cindex_bits, sizeof(*m->cindex));
    if (m->cindex == NULL)
        goto free_consumers;
    m->claim_bits = MIN_CLAIM_BITS;
    m->claims = calloc((size_t)1 << m->claim_bits, sizeof(*m->claims));
    if (m->claims == NULL)
        goto free_cindex;
    if (pthread_mutex_init(&m->mu, NULL) != 0)
        goto free_claims;
    *out = &m->base;
    return IB_OK;

free_claims:
    free(m->claims);
free_cindex:
    free(m->cindex);
free_consumers:
    free(m->consumers);
free_buckets:
    free(m->buckets);
free_chunks:
    free(m->chunks);
free_m:
    free(m);
nomem:
    return ib_error_set(err, IB_ERR_NOMEM, "recorder memory: out of memory");
}
