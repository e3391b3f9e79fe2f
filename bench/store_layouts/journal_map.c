/* SPDX-License-Identifier: Apache-2.0 */
/* The journal layout's map of unmerged states: open addressing over a
 * dense array, so that a merge can sort the array (journal.h). */
#include <stdlib.h>
#include <string.h>

#include "journal.h"

#define FIRST_CAP 16384

static void *zalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL)
        ib__sl_die("out of memory");
    return p;
}

void ib__sl_jmap_init(ib__sl_jmap *m)
{
    memset(m, 0, sizeof(*m));
    m->cap = FIRST_CAP;
    m->nslots = 2 * FIRST_CAP;
    m->states = zalloc(m->cap, sizeof(*m->states));
    m->slots = zalloc(m->nslots, sizeof(*m->slots));
}

void ib__sl_jmap_free(ib__sl_jmap *m)
{
    free(m->states);
    free(m->slots);
    for (size_t i = 0; i < m->nnames; i++)
        free(m->names[i]);
    memset(m, 0, sizeof(*m));
}

void ib__sl_jmap_clear(ib__sl_jmap *m)
{
    m->used = 0;
    memset(m->slots, 0, m->nslots * sizeof(*m->slots));
}

uint16_t ib__sl_jmap_name(ib__sl_jmap *m, const char *name)
{
    for (size_t i = 0; i < m->nnames; i++)
        if (strcmp(m->names[i], name) == 0)
            return (uint16_t)i;
    if (m->nnames == sizeof(m->names) / sizeof(m->names[0]))
        ib__sl_die("journal: more than %zu consumers and owners", m->nnames);
    m->names[m->nnames] = strdup(name);
    if (m->names[m->nnames] == NULL)
        ib__sl_die("out of memory");
    return (uint16_t)m->nnames++;
}

static uint64_t key_hash(uint16_t consumer, const char *hex)
{
    uint64_t w[4], h = consumer;
    memcpy(w, hex, sizeof(w));
    for (int i = 0; i < 4; i++)
        h = ib__sl_mix(h ^ w[i]);
    return h;
}

/* The slot holding (consumer, hex), or the empty slot where it would go. */
static size_t find_slot(const ib__sl_jmap *m, uint16_t consumer, const char *hex)
{
    size_t mask = m->nslots - 1;
    for (size_t k = (size_t)key_hash(consumer, hex) & mask;; k = (k + 1) & mask) {
        uint32_t v = m->slots[k];
        if (v == 0)
            return k;
        const ib__sl_jstate *st = &m->states[v - 1];
        if (st->consumer == consumer && memcmp(st->hex, hex, 32) == 0)
            return k;
    }
}

const ib__sl_jstate *ib__sl_jmap_get(const ib__sl_jmap *m, uint16_t consumer, const char *hex)
{
    uint32_t v = m->slots[find_slot(m, consumer, hex)];
    return v != 0 ? &m->states[v - 1] : NULL;
}

static void grow(ib__sl_jmap *m)
{
    ib__sl_jstate *states = realloc(m->states, 2 * m->cap * sizeof(*states));
    if (states == NULL)
        ib__sl_die("out of memory");
    m->states = states;
    m->cap *= 2;
    free(m->slots);
    m->nslots = 2 * m->cap;
    m->slots = zalloc(m->nslots, sizeof(*m->slots));
    for (size_t i = 0; i < m->used; i++)
        m->slots[find_slot(m, states[i].consumer, states[i].hex)] = (uint32_t)(i + 1);
}

void ib__sl_jmap_put(ib__sl_jmap *m, const ib__sl_jstate *st)
{
    size_t k = find_slot(m, st->consumer, st->hex);
    if (m->slots[k] != 0) {
        m->states[m->slots[k] - 1] = *st;
        return;
    }
    if (m->used == m->cap) {
        grow(m);
        k = find_slot(m, st->consumer, st->hex);
    }
    m->states[m->used] = *st;
    m->slots[k] = (uint32_t)++m->used;
}
