/* The sqlite recorder's Bloom filter (sqlite_filter.h says what for).
 *
 * 16 bits and 4 probes per key: about 0.24 % false "maybe" at its sized
 * load. The probes come from two 64-bit hashes of the key (double
 * hashing), both from the tail's mixed hash: uuid4 ids are random
 * already, but mixing keeps ids chosen by a client from crowding bits. */
#include "sqlite_filter.h"
#include "sqlite_tail.h"

#include <stdlib.h>
#include <string.h>

#define BITS_PER_KEY 16
#define PROBES 4
#define MIN_BITS (1ULL << 20)

bool ib__sq_filter_reset(sq_filter *f, uint64_t keys)
{
    uint64_t want = keys > UINT64_MAX / (2 * BITS_PER_KEY) ? UINT64_MAX / 2 : keys * BITS_PER_KEY;
    uint64_t nbits = MIN_BITS;
    while (nbits < want && nbits < (1ULL << 40))
        nbits <<= 1;
    ib__sq_filter_free(f);
    f->words = calloc(nbits / 64, sizeof(uint64_t));
    if (f->words == NULL)
        return false;
    f->nbits = nbits;
    return true;
}

void ib__sq_filter_free(sq_filter *f)
{
    free(f->words);
    memset(f, 0, sizeof(*f));
}

/* The two hashes of a key; the second is odd, so the probes differ. */
static void hashes(const char *consumer, const uint8_t id[16], uint64_t *h1, uint64_t *h2)
{
    *h1 = ib__sq_key_hash(consumer, id);
    /* the other half of the bits, spread by an odd multiplier */
    *h2 = ((*h1 >> 32 | *h1 << 32) * 0x9e3779b97f4a7c15ULL) | 1;
}

void ib__sq_filter_add(sq_filter *f, const char *consumer, const uint8_t id[16])
{
    uint64_t h1, h2;
    hashes(consumer, id, &h1, &h2);
    for (int i = 0; i < PROBES; i++) {
        uint64_t bit = (h1 + (uint64_t)i * h2) & (f->nbits - 1);
        f->words[bit / 64] |= 1ULL << (bit % 64);
    }
    f->count++;
}

bool ib__sq_filter_maybe(const sq_filter *f, const char *consumer, const uint8_t id[16])
{
    if (f->words == NULL)
        return true;
    uint64_t h1, h2;
    hashes(consumer, id, &h1, &h2);
    for (int i = 0; i < PROBES; i++) {
        uint64_t bit = (h1 + (uint64_t)i * h2) & (f->nbits - 1);
        if ((f->words[bit / 64] & (1ULL << (bit % 64))) == 0)
            return false;
    }
    return true;
}

bool ib__sq_filter_full(const sq_filter *f)
{
    return f->words != NULL && f->count > f->nbits / BITS_PER_KEY;
}
