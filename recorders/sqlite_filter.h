/* A Bloom filter over the keys that may have a marker in the sqlite
 * recorder's B-tree (processed_markers), so that a new id, the common
 * case, is answered without a B-tree probe (sqlite_journal.c keeps it
 * complete: every mark this process writes or reads in the journal). It answers "maybe" or
 * "certainly not"; a false "maybe" only costs the probe it would have cost anyway.
 *
 * Not thread-safe: the recorder mutex guards it. */
#ifndef IB_SQLITE_FILTER_H
#define IB_SQLITE_FILTER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sq_filter {
    uint64_t *words; /* the bits; NULL = not built */
    uint64_t nbits;  /* a power of two */
    uint64_t count;  /* keys added since it was built */
} sq_filter;

/* Allocates an empty filter sized for `keys` keys (16 bits each, at least
 * 2^20 bits), replacing what `f` held. False when out of memory (`f` is
 * then empty and unbuilt). */
bool ib__sq_filter_reset(sq_filter *f, uint64_t keys);

/* Frees the bits; the filter is unbuilt. */
void ib__sq_filter_free(sq_filter *f);

/* Adds a key. The filter must be built. */
void ib__sq_filter_add(sq_filter *f, const char *consumer, const uint8_t id[16]);

/* False when the key was certainly never added; true when it may have
 * been, or when the filter is not built. */
bool ib__sq_filter_maybe(const sq_filter *f, const char *consumer, const uint8_t id[16]);

/* Whether it holds more keys than it was sized for (it should be rebuilt
 * larger, or its false answers grow common). */
bool ib__sq_filter_full(const sq_filter *f);

#endif
