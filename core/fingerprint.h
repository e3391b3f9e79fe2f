/* SPDX-License-Identifier: Apache-2.0 */
/* Payload fingerprints: what a marker remembers of the event it stands
 * for, so that an id reused for other content is caught (recorder.h). */
#ifndef IB_FINGERPRINT_H
#define IB_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit hash of an event's type (NUL-terminated, not NULL) and payload
 * (`len` bytes; `payload` may be NULL when `len` is 0). The same in every
 * process, host and build (part of the marker file's format); never 0,
 * which stands for "no fingerprint". Not a cryptographic hash: it catches
 * a producer's mistake, not an attacker. */
uint64_t ib_fingerprint(const char *type, const uint8_t *payload, size_t len);

#endif
