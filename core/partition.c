/* SPDX-License-Identifier: Apache-2.0 */
/* FNV-1a-32 partitions (partition.h): the server's mapping function. */
#include "partition.h"

#define FNV32_OFFSET 2166136261u
#define FNV32_PRIME 16777619u

uint32_t ib_partition_hash_more(uint32_t hash, const void *more, size_t len)
{
    const unsigned char *p = more;
    for (size_t i = 0; i < len; i++) {
        hash ^= p[i];
        hash *= FNV32_PRIME;
    }
    return hash;
}

uint32_t ib_partition_hash(const void *key, size_t len)
{
    return ib_partition_hash_more(FNV32_OFFSET, key, len);
}

uint32_t ib_partition_of(uint32_t hash, uint32_t n)
{
    return n == 0 ? 0 : hash % n;
}
