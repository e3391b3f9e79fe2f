/* SPDX-License-Identifier: Apache-2.0 */
/* Strict UTF-8 (RFC 3629) for the core's checks of raw protobuf strings.
 *
 * Internal to core (ib__ prefix): refuses overlong forms, UTF-16 surrogates
 * (U+D800..U+DFFF), code points above U+10FFFF and truncated sequences. NUL
 * is valid UTF-8; callers that refuse it check separately. */
#ifndef IB_UTF8_H
#define IB_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True if the `len` bytes at `s` are valid UTF-8 (len 0 is valid; `s` may
 * then be NULL). */
bool ib__utf8_valid(const void *s, size_t len);

/* Decodes the code point starting at `s` (`len` > 0 bytes available) into
 * `*cp` and returns its length in bytes (1 to 4), or 0 if the bytes there do
 * not start a valid sequence (then `*cp` is unchanged). */
size_t ib__utf8_decode(uint32_t *cp, const uint8_t *s, size_t len);

#endif
