/* SPDX-License-Identifier: Apache-2.0 */
/* Rendezvous (highest random weight) hashing: which of the live members
 * of a fleet owns a partition.
 *
 * Each member scores each partition with a hash of the two; the highest
 * score owns it. Every process that sees the same members computes the
 * same owners without talking to the others, and a change of membership
 * moves only what it must: a member that leaves gives up its own
 * partitions (each to the member that scored second for it) and nobody
 * else's; a member that joins takes, from every other member, the
 * partitions it scores highest, about N/P of the N partitions among P
 * members. A leaf: strings and integers, no I/O. */
#ifndef IB_RENDEZVOUS_H
#define IB_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

/* The score of `member` (a NUL-terminated name, such as a process's
 * owner token) for `partition`: a 64-bit hash of both. Part of what every
 * member of a fleet must compute alike: never changes. */
uint64_t ib_rendezvous_score(const char *member, uint32_t partition);

/* The index in `members` (`count` names, BORROWED) of the owner of
 * `partition`: the highest score, ties going to the name that sorts first
 * by strcmp, so the order of the list does not matter. SIZE_MAX when
 * `count` is 0. A name listed twice is one member. */
size_t ib_rendezvous_owner(const char *const *members, size_t count, uint32_t partition);

#endif
