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

#include "error.h"

/* The most partitions a stream may have: each is a durable of its own. */
#define IB_PARTITIONS_MAX 4096u
/* The longest partition key, in bytes. */
#define IB_PARTITION_KEY_MAX 128u

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

/* Checks that `key` (NUL-terminated) can be a partition key: one subject
 * token of 1 to IB_PARTITION_KEY_MAX bytes of valid UTF-8, with no '.',
 * '*', '>', space or control character, so the subject shows it as it is
 * and a server mapping can read it. Errors: IB_ERR_INVALID_ARG, saying
 * why, never with the key's bytes (they may be anything). */
ib_status ib_partition_key_check(const char *key, ib_error *err);

/* Writes the subject of an event with partition key `key` among `n`
 * partitions (1..IB_PARTITIONS_MAX) under `base`: "<base>.<p>.<key>",
 * p the partition (decimal). `base` is a valid subject without wildcards.
 * Errors: IB_ERR_INVALID_ARG when `n` is out of range, `key` fails
 * ib_partition_key_check or the subject does not fit in `cap` bytes. */
ib_status ib_partition_subject(char *out, size_t cap, const char *base, const char *key, uint32_t n,
                               ib_error *err);

#endif
