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

/* What a subject read as a partition subject under a base says. */
typedef enum ib_partition_place {
    IB_PARTITION_IN_PLACE = 0, /* "<base>.<p>.<key>", and the key's partition is p */
    IB_PARTITION_MISPLACED,    /* that shape, but the key's partition is another: its
                                  owner must not handle it (forward it to *belongs) */
    IB_PARTITION_NOT_OURS,     /* not that shape: another base, a partition that is
                                  not a decimal below n (or has a leading zero), or a
                                  key that is not one valid token */
} ib_partition_place;

/* Reads `subject` (as the server delivered it, written by any producer)
 * as "<base>.<p>.<key>" among `n` partitions (1..IB_PARTITIONS_MAX):
 * *partition gets p and *belongs the key's own partition (both only when
 * the shape is right; else untouched). `base` as ib_partition_subject
 * takes it. The partition owner calls it before it handles a message. */
ib_partition_place ib_partition_subject_read(const char *subject, const char *base, uint32_t n,
                                             uint32_t *partition, uint32_t *belongs);

#endif
