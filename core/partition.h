/* SPDX-License-Identifier: Apache-2.0 */
/* Partitions: which of N partitions an event's partition key falls in.
 *
 * The function is the one nats-server's subject mapping uses for
 * {{partition(N, t1, ...)}}: FNV-1a of 32 bits over the key's bytes,
 * modulo N. With several tokens the server hashes their bytes one after
 * the other, with nothing between them. A server mapping and ibus thus
 * put every key in the same partition (tests/integration/it_partition.c
 * proves it against a real server), and a duplicate, which carries its
 * original's key, lands where its original did. */
#ifndef IB_PARTITION_H
#define IB_PARTITION_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a, 32 bits, of `len` bytes at `key` (NULL when `len` is 0). Part of
 * the wire contract with the server's mapping: never changes. */
uint32_t ib_partition_hash(const void *key, size_t len);

/* Continues a hash over more bytes: ib_partition_hash of a || b equals
 * ib_partition_hash_more(ib_partition_hash(a), b). For keys that the
 * server reads from several subject tokens. */
uint32_t ib_partition_hash_more(uint32_t hash, const void *more, size_t len);

/* The partition of `hash` among `n`: hash % n, in [0, n). n == 0 gives 0,
 * as the server's mapping does rather than divide by zero. */
uint32_t ib_partition_of(uint32_t hash, uint32_t n);

#endif
