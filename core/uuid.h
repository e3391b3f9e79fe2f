/* SPDX-License-Identifier: Apache-2.0 */
/* Event ids: validation, normalisation and generation (spec section 1).
 *
 * The dedup key is a UUID written as 32 lowercase hex digits. Accepted on
 * input: that form, the same in upper (or mixed) case, and the canonical
 * 36-character dashed form. Everything is normalised to 32 lowercase hex
 * before a recorder sees it. */
#ifndef IB_UUID_H
#define IB_UUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define IB_ID_LEN 32      /* normalised id length, without the NUL */
#define IB_ID_BUF_SIZE 33 /* buffer size for a normalised id with its NUL */

/* Which UUID versions ib_id_normalise() accepts: a set of version bits,
 * IB_ID_VERSION(v) for version v (0..15). The variant must be RFC 4122 in
 * every case. 0 stands for the default set, so a zeroed struct of limits
 * accepts what the product itself makes. */
#define IB_ID_VERSION(v) (1u << (v))
enum {
    IB_ID_VERSIONS_DEFAULT = 0, /* uuid4 (random ids) and uuid8 (ids derived from a business key
                                   by ib_event_id_derive and `ibus publish --key`) */
    IB_ID_UUID4_ONLY = IB_ID_VERSION(4), /* random ids only */
    IB_ID_ANY_VERSION = 0xffffu,         /* every version (e.g. uuid7 producers) */
};
/* The set IB_ID_VERSIONS_DEFAULT stands for. */
#define IB_ID_VERSIONS_DEFAULT_SET (IB_ID_VERSION(4) | IB_ID_VERSION(8))

/* Why an id was refused; stable names via ib_id_reason_str(). */
typedef enum ib_id_reason {
    IB_ID_VALID = 0,
    IB_ID_EMPTY,       /* no id at all */
    IB_ID_BAD_LENGTH,  /* neither 32 nor 36 characters */
    IB_ID_BAD_CHAR,    /* a byte that is not a hex digit (or a misplaced dash, or NUL) */
    IB_ID_BAD_DASHES,  /* 36 characters without dashes at 8, 13, 18, 23 */
    IB_ID_BAD_VERSION, /* its UUID version is not in the accepted set */
    IB_ID_BAD_VARIANT, /* variant bits are not RFC 4122 (10xx) */
} ib_id_reason;

/* Validates `len` raw bytes at `in` (which need not be NUL-terminated and may
 * contain NULs, which are refused) and writes the normalised id plus NUL into
 * `out`. Returns IB_ID_VALID or the first reason it is refused, checking in
 * this order: empty (len 0 or `in` NULL), length, dash positions (36-character
 * form), characters, version (one of the set `versions`, IB_ID_VERSION bits;
 * 0 = IB_ID_VERSIONS_DEFAULT), variant. On refusal `out` holds an empty
 * string. */
ib_id_reason ib_id_normalise(char out[IB_ID_BUF_SIZE], const char *in, size_t len,
                             unsigned versions);

/* The UUID version of an id in either accepted form (32 hex digits, or 36
 * with dashes): 0..15, or -1 when `len` is neither or the version digit is
 * no hex digit. Checks nothing else; for messages about a refused id. */
int ib_id_version(const char *in, size_t len);

/* Parses a set of accepted versions as an operator writes it: "any", or
 * versions 1..8 separated by commas ("4,8", "4,7,8"). Stores the
 * IB_ID_VERSION bits in *out and returns 0, or -1 for anything else (an
 * empty list included). */
int ib_id_versions_parse(unsigned *out, const char *text);

/* Writes a version set (0 = the default set) the way
 * ib_id_versions_parse reads it, "4,8" or "any", into `buf` and returns
 * it. */
const char *ib_id_versions_str(char *buf, size_t cap, unsigned versions);

/* True if `id` is already a normalised id: exactly 32 lowercase hex digits
 * followed by NUL. Recorders use it to refuse anything else. */
bool ib_id_is_normalised(const char *id);

/* Static description of a reason, e.g. "UUID version not accepted". */
const char *ib_id_reason_str(ib_id_reason reason);

/* Generates a fresh random uuid4 from the kernel's random source
 * (getrandom, retried on EINTR) into `out` as 32 lowercase hex. Returns
 * IB_ERR_IO if the kernel gives no randomness (then `out` is ""). */
ib_status ib_uuid4_generate(char out[IB_ID_BUF_SIZE]);

/* Derives a deterministic uuid4-shaped id from a parent id and a name
 * (e.g. a relay's derived-event type), so a replay derives the same id.
 * Different (parent, name) pairs give different ids with overwhelming
 * probability (a 128-bit non-cryptographic hash: do not use it where an
 * adversary could profit from a collision). The inputs are hashed as given,
 * so pass the normalised parent id; NULL counts as "". `out` receives 32
 * lowercase hex with the version 4 and RFC 4122 variant bits set. */
void ib_uuid_derive(char out[IB_ID_BUF_SIZE], const char *parent_id, const char *name);

/* Packs a normalised id into 16 bytes and back; for compact in-memory keys.
 * ib_id_pack returns false if `id` is not normalised (the same answer as
 * ib_id_is_normalised, so recorders use it as their key check too); then
 * `out` holds garbage. It is on the recorders' hot path: no branch per
 * digit. */
bool ib_id_pack(uint8_t out[16], const char *id);
void ib_id_unpack(char out[IB_ID_BUF_SIZE], const uint8_t in[16]);

#endif
