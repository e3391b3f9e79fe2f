/* The unmerged tail of the sqlite recorder's marker journal, in memory.
 *
 * Every change to a key's marker or claim is appended to the journal
 * (processed_journal, sqlite_journal.c) as the key's whole new state. Each
 * process reads the journal's new rows at the start of its transactions and
 * keeps, per key, the newest state it has seen here; a merge moves the
 * journal into the B-trees, after which these entries are dropped. A key
 * found here is answered from memory; a key not found here is in the
 * B-trees or nowhere.
 *
 * Not thread-safe: the recorder mutex guards it. */
#ifndef IB_SQLITE_TAIL_H
#define IB_SQLITE_TAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "infinity_bus/recorder.h"

/* A key's whole state: its marker and its claim. */
typedef struct sq_state {
    uint8_t id[16];               /* the key's id, packed (set by whoever reads the state) */
    bool done;                    /* marked */
    int64_t ts;                   /* done: unix ms when marked */
    uint64_t fp;                  /* done: payload fingerprint, 0 = none */
    uint32_t attempts;            /* handler attempts counted by the claim */
    int64_t expires;              /* claim's lease end on the lease clock */
    char owner[IB_OWNER_MAX + 1]; /* claim holder; "" = none or released */
} sq_state;

/* Whether a state has a claim row to keep (a holder or counted attempts). */
static inline bool ib__sq_state_has_claim(const sq_state *st)
{
    return st->owner[0] != '\0' || st->attempts > 0;
}

typedef struct sq_tail_entry {
    uint64_t seq;         /* journal row this state came from; 0 = empty slot */
    const char *consumer; /* interned */
    const char *owner;    /* interned; "" = none */
    uint8_t id[16];
    bool done;
    uint32_t attempts;
    int64_t ts;
    uint64_t fp;
    int64_t expires;
} sq_tail_entry;

typedef struct sq_tail {
    sq_tail_entry *slots; /* open addressing, linear probing */
    size_t cap;           /* a power of two, or 0 */
    size_t used;
    char **names; /* interned consumers and owners, owned */
    size_t nnames, names_cap;
    uint64_t seen;   /* the newest journal row applied */
    uint64_t merged; /* entries from rows at or below this were dropped */
} sq_tail;

/* A 64-bit hash of a key, well mixed (the tail's table and the filter
 * use it). */
uint64_t ib__sq_key_hash(const char *consumer, const uint8_t id[16]);

/* An empty tail; frees nothing. */
void ib__sq_tail_init(sq_tail *t);

/* Frees everything the tail owns and leaves it empty. */
void ib__sq_tail_free(sq_tail *t);

/* Forgets every entry and sets `seen` and `merged` to 0, so that the next
 * catch-up reads the whole journal again. Keeps the interned names. */
void ib__sq_tail_clear(sq_tail *t);

/* The entry for (consumer, id), or NULL. BORROWED until the next change. */
const sq_tail_entry *ib__sq_tail_find(const sq_tail *t, const char *consumer, const uint8_t id[16]);

/* Records `st` as the state of (consumer, id) from journal row `seq`,
 * unless the entry already holds a newer row. Raises `seen` to `seq`.
 * Returns false when out of memory (the tail is then unchanged). */
bool ib__sq_tail_put(sq_tail *t, uint64_t seq, const char *consumer, const uint8_t id[16],
                     const sq_state *st);

/* Drops every entry from a row at or below `merged` (now in the B-trees)
 * and records `merged`. Returns false when out of memory: the tail is then
 * cleared instead, which is also correct, only slower. */
bool ib__sq_tail_sweep(sq_tail *t, uint64_t merged);

/* Copies an entry's state out. */
void ib__sq_tail_state(const sq_tail_entry *e, sq_state *out);

/* Every entry (in no order), for a merge: calls `visit` for each. */
void ib__sq_tail_each(const sq_tail *t, void (*visit)(void *ctx, const sq_tail_entry *e),
                      void *ctx);

#endif
