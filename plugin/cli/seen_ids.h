/* SPDX-License-Identifier: Apache-2.0 */
/* ibus publish: the event ids one run has sent, so a repeated id counts
 * as a duplicate whichever way it came (--id, --key, JSON lines). Private
 * to the CLI. */
#ifndef IB_CLI_SEEN_IDS_H
#define IB_CLI_SEEN_IDS_H

#include <stddef.h>

/* A set of id strings (any bytes up to a NUL: --unchecked-id sends ids
 * that are not UUIDs). Zero-initialise; free with ib_seen_ids_free. */
typedef struct ib_seen_ids {
    char **slots; /* OWNED copies; NULL = empty slot */
    size_t cap;   /* a power of two, or 0 before the first add */
    size_t used;
} ib_seen_ids;

/* Adds a copy of `id`. Returns 1 when it was new, 0 when the set already
 * held it, -1 when out of memory (the set is unchanged). */
int ib_seen_ids_add(ib_seen_ids *s, const char *id);

/* Frees every copy and the table; the set is empty again. */
void ib_seen_ids_free(ib_seen_ids *s);

#endif
