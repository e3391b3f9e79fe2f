/* SPDX-License-Identifier: Apache-2.0 */
/* The journal layout's in-memory map of unmerged states (journal_map.c),
 * shared by journal.c only. */
#ifndef IB_STORE_LAYOUTS_JOURNAL_H
#define IB_STORE_LAYOUTS_JOURNAL_H

#include <stdint.h>
#include <stddef.h>

#include "store_layouts.h"

enum { IB__SL_JCLAIM = 1, IB__SL_JDONE = 2 };

/* One key's newest state in the journal: a claim (owner, expires_ms,
 * attempts) or a marker (ts, fp). consumer and owner index the map's
 * interned names. */
typedef struct ib__sl_jstate {
    char hex[32];
    uint16_t consumer, owner;
    uint8_t kind;
    uint32_t attempts;
    int64_t expires_ms, ts;
    uint64_t fp;
} ib__sl_jstate;

typedef struct ib__sl_jmap {
    ib__sl_jstate *states; /* dense, `used` of them */
    size_t used, cap;
    uint32_t *slots; /* open addressing: index + 1 into states, 0 = empty */
    size_t nslots;   /* a power of two, at least twice `cap` */
    char *names[64]; /* consumers and owners seen, interned */
    size_t nnames;
} ib__sl_jmap;

void ib__sl_jmap_init(ib__sl_jmap *m);
void ib__sl_jmap_free(ib__sl_jmap *m);
/* Forgets every state (after a merge); names are kept. */
void ib__sl_jmap_clear(ib__sl_jmap *m);
/* The index of `name`, added if new. */
uint16_t ib__sl_jmap_name(ib__sl_jmap *m, const char *name);
/* The state of (consumer, hex), or NULL. */
const ib__sl_jstate *ib__sl_jmap_get(const ib__sl_jmap *m, uint16_t consumer, const char *hex);
/* Sets a key's state, replacing the one it had. */
void ib__sl_jmap_put(ib__sl_jmap *m, const ib__sl_jstate *st);

#endif
