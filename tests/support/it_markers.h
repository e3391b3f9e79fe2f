/* SPDX-License-Identifier: Apache-2.0 */
/* Markers made by the test itself, as if made at another time: for the
 * retention tests. A file of its own in the support library, so only the
 * tests that use it link the recorders. */
#ifndef IB_IT_MARKERS_H
#define IB_IT_MARKERS_H

#include <stdint.h>

#include "it_support.h"

/* A well-formed uuid4 in 32 hex digits, distinct per (group, i). */
void it_seed_id(char out[33], unsigned group, unsigned i);

/* Marks the ids it_seed_id gives for `group`, 0..n-1, under `consumer` in
 * the test's marker file (<dir>/markers.db, created if missing) as if
 * marked `age_ms` ago, through the recorder API with an injected clock.
 * Fails the test when the recorder does. */
void it_seed_markers(it_env *e, const char *consumer, unsigned group, unsigned n, int64_t age_ms);

#endif
