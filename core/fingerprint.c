/* Payload fingerprints (fingerprint.h): FNV-1a over the type, a NUL and the
 * payload, then a 64-bit finaliser so that every input bit reaches every
 * output bit. The constants are part of the marker file's format: changing
 * them makes every stored fingerprint a false conflict. */
#include "fingerprint.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv_bytes(uint64_t h, const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t ib_fingerprint(const char *type, const uint8_t *payload, size_t len)
{
    uint64_t h = FNV_OFFSET;
    for (const char *t = type; *t != '\0'; t++) {
        h ^= (uint8_t)*t;
        h *= FNV_PRIME;
    }
    /* The NUL keeps ("ab", "c") apart from ("a", "bc"). */
    h *= FNV_PRIME;
    if (len > 0)
        h = fnv_bytes(h, payload, len);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h != 0 ? h : 1;
}
