/* SPDX-License-Identifier: Apache-2.0 */
/* ibus publish: a set of the ids a run has sent (seen_ids.h). Open
 * addressing with linear probing, kept at most half full. */
#include "seen_ids.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CAP 1024

/* FNV-1a: ids are short and this is no defence against chosen input,
 * which a publisher's own ids are not. */
static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of `id`, or the empty slot where it would go. */
static size_t find(char **slots, size_t cap, const char *id)
{
    size_t i = (size_t)hash(id) & (cap - 1);
    while (slots[i] != NULL && strcmp(slots[i], id) != 0)
        i = (i + 1) & (cap - 1);
    return i;
}

/* Doubles the table (or makes the first one). 0, or -1 out of memory. */
static int grow(ib_seen_ids *s)
{
    size_t cap = s->cap == 0 ? MIN_CAP : s->cap * 2;
    char **slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i] != NULL)
            slots[find(slots, cap, s->slots[i])] = s->slots[i];
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return 0;
}

int ib_seen_ids_add(ib_seen_ids *s, const char *id)
{
    if ((s->used + 1) * 2 > s->cap && grow(s) != 0)
        return -1;
    size_t i = find(s->slots, s->cap, id);
    if (s->slots[i] != NULL)
        return 0;
    if ((s->slots[i] = strdup(id)) == NULL)
        return -1;
    s->used++;
    return 1;
}

void ib_seen_ids_free(ib_seen_ids *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i]);
    free(s->slots);
    memset(s, 0, sizeof(*s));
}
