/* SHA-256 (FIPS 180-4), for ids derived from keys (ib_event_id_derive):
 * a hash every language has, so a producer anywhere derives the same id. */
#ifndef IB_SHA256_H
#define IB_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct ib__sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t used;    /* bytes in block */
    uint64_t total; /* bytes absorbed */
} ib__sha256;

void ib__sha256_init(ib__sha256 *s);
void ib__sha256_update(ib__sha256 *s, const void *data, size_t len);
/* Writes the 32-byte digest; `s` is spent afterwards. */
void ib__sha256_final(ib__sha256 *s, uint8_t out[32]);

#endif
