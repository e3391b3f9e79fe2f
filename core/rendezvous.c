/* SPDX-License-Identifier: Apache-2.0 */
#include "rendezvous.h"

#include <string.h>

/* The finaliser of SplitMix64: a bijection of 64-bit words that spreads
 * every input bit over the output, so members whose names hash close
 * together still score a partition independently. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* FNV-1a, 64 bits, of a NUL-terminated name. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t ib_rendezvous_score(const char *member, uint32_t partition)
{
    uint64_t p = mix64((uint64_t)partition + 0x9e3779b97f4a7c15ull);
    return mix64(name_hash(member) ^ p);
}

size_t ib_rendezvous_owner(const char *const *members, size_t count, uint32_t partition)
{
    size_t best = SIZE_MAX;
    uint64_t best_score = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t score = ib_rendezvous_score(members[i], partition);
        if (best == SIZE_MAX || score > best_score ||
            (score == best_score && strcmp(members[i], members[best]) < 0)) {
            best = i;
            best_score = score;
        }
    }
    return best;
}
