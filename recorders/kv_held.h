/* SPDX-License-Identifier: Apache-2.0 */
/* The claims this process holds, kept by the kv: recorder (kv_held.c). */
#ifndef IB_KV_HELD_H
#define IB_KV_HELD_H

#include "kv_io.h"

/* The claims held (kv_held.c), by (key, owner). put updates an entry, and
 * adds one only when `add`; get says whether there is one. init false =
 * no memory. */
bool ib__kv_held_init(kv_recorder *k);
void ib__kv_held_free(kv_recorder *k);
void ib__kv_held_put(kv_recorder *k, const ib_marker_key *key, const char *owner, const kv_lease *c,
                     bool add);
bool ib__kv_held_get(kv_recorder *k, const ib_marker_key *key, const char *owner, kv_lease *out);
void ib__kv_held_drop(kv_recorder *k, const ib_marker_key *key, const char *owner);

#endif
