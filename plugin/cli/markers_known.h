/* SPDX-License-Identifier: Apache-2.0 */
/* ibus markers: a --consumer the recorder has never heard of is an error,
 * not a quiet "not processed". */
#ifndef IB_CLI_MARKERS_KNOWN_H
#define IB_CLI_MARKERS_KNOWN_H

#include "recorder.h"

/* Whether `consumer` names an identity `r` knows, matched exactly, part by
 * part: the recorder holds at least one marker of exactly that identity,
 * or, when `event_id` is non-NULL (lookup, forget), that very key has a
 * claim or counted attempts. A prefix of an identity, a sibling handler of
 * the same plugin or an empty recorder is never enough.
 *
 * Returns 0 when known. Otherwise prints, for `ibus markers ACTION` on
 * `uri`, that the identity is unknown, the identities the recorder knows
 * (the first 16) and the nearest of them when one differs in a single part
 * or starts with the given parts, and returns 2. A recorder error is
 * printed and gives 1 (2 for a kind that cannot list). Walks every marker
 * only when the identity is unknown. */
int ib_cli_markers_identity_check(ib_recorder *r, const char *uri, const char *action,
                                  const char *consumer, const char *event_id);

#endif
