/* SPDX-License-Identifier: Apache-2.0 */
/* How far a misspelled name is from a known one, for "did you mean"
 * hints (option names, plugin names). */
#ifndef IB_SPELLING_H
#define IB_SPELLING_H

#include <stdbool.h>
#include <stddef.h>

/* What ib_spelling_distance() answers for a name of 64 bytes or more. */
#define IB_SPELLING_FAR 99

/* The edit distance (insertions, deletions, substitutions) between
 * a[0..an) and b[0..bn), ignoring ASCII case when `fold`; IB_SPELLING_FAR
 * when either is 64 bytes or longer. Reads only the bytes given; no
 * allocation. */
size_t ib_spelling_distance(const char *a, size_t an, const char *b, size_t bn, bool fold);

#endif
