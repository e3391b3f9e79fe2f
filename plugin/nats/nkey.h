/* SPDX-License-Identifier: Apache-2.0 */
/* NKey seeds: read a user seed file and derive its public key, which
 * nats.c's natsOptions_SetNKeyFromSeed needs beside the seed file. */
#ifndef IB_NKEY_H
#define IB_NKEY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define IB_NKEY_PUBLIC_LEN 56 /* base32 characters of an encoded public key */

/* Derives the public key (e.g. "UABC...", 56 characters plus NUL) of the
 * first seed found in `seed_file`. Errors: IB_ERR_IO if the file cannot be
 * read, IB_ERR_CONFIG if it holds no valid seed (bad base32, checksum or
 * prefix). */
ib_status ib_nkey_public_from_seed_file(char out[IB_NKEY_PUBLIC_LEN + 1], const char *seed_file,
                                        ib_error *err);

/* Derives the public key from an encoded seed string ("SU..."), `len`
 * characters. Same errors as above, without IB_ERR_IO. */
ib_status ib_nkey_public_from_seed(char out[IB_NKEY_PUBLIC_LEN + 1], const char *seed, size_t len,
                                   ib_error *err);

/* Encodes a raw 32-byte ed25519 seed as a user seed string ("SU...", 58
 * characters plus NUL); for tests and tools that make keys. */
void ib_nkey_encode_user_seed(char out[59], const uint8_t raw_seed[32]);

#endif
