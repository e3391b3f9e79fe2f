/* SPDX-License-Identifier: Apache-2.0 */
/* The Bloom filter of a sealed generation (generations.c): built once from
 * a table that no longer changes, so its "no" is always right. 10 bits and
 * 7 probes per key give about 1 % false "maybe" (store_layouts.h). */
#include <stdlib.h>
#include <string.h>

#include "store_layouts.h"

#define BITS_PER_KEY 10
#define PROBES 7

void ib__sl_bloom_init(ib__sl_bloom *b, uint64_t keys)
{
    memset(b, 0, sizeof(*b));
    b->keys = keys;
    if (keys == 0)
        return;
    uint64_t words = (keys * BITS_PER_KEY + 63) / 64;
    b->words = calloc(words, sizeof(*b->words));
    if (b->words == NULL)
        ib__sl_die("out of memory for a filter of %llu keys", (unsigned long long)keys);
    b->nbits = words * 64;
}

/* Two hashes of the key; probe i looks at h1 + i * h2 (double hashing). */
static void key_hashes(uint64_t h[2], int64_t cid, const uint8_t raw[16])
{
    uint64_t a, c;
    memcpy(&a, raw, 8);
    memcpy(&c, raw + 8, 8);
    h[0] = ib__sl_mix(a ^ ib__sl_mix((uint64_t)cid));
    h[1] = ib__sl_mix(c ^ h[0]) | 1;
}

/* A probe's bit, spread over [0, nbits) without a division. */
static uint64_t bit_of(const ib__sl_bloom *b, uint64_t x)
{
    return (uint64_t)(((unsigned __int128)x * b->nbits) >> 64);
}

void ib__sl_bloom_add(ib__sl_bloom *b, int64_t cid, const uint8_t raw[16])
{
    uint64_t h[2];
    key_hashes(h, cid, raw);
    for (int i = 0; i < PROBES; i++) {
        uint64_t bit = bit_of(b, h[0] + (uint64_t)i * h[1]);
        b->words[bit / 64] |= 1ULL << (bit % 64);
    }
}

bool ib__sl_bloom_maybe(const ib__sl_bloom *b, int64_t cid, const uint8_t raw[16])
{
    if (b->nbits == 0)
        return false;
    uint64_t h[2];
    key_hashes(h, cid, raw);
    for (int i = 0; i < PROBES; i++) {
        uint64_t bit = bit_of(b, h[0] + (uint64_t)i * h[1]);
        if ((b->words[bit / 64] & (1ULL << (bit % 64))) == 0)
            return false;
    }
    return true;
}

void ib__sl_bloom_load(ib__sl_bloom *b, const void *blob, size_t bytes, uint64_t keys)
{
    ib__sl_bloom_free(b);
    b->keys = keys;
    if (bytes < 8)
        return;
    size_t words = bytes / 8;
    b->words = malloc(words * 8);
    if (b->words == NULL)
        ib__sl_die("out of memory for a filter of %zu bytes", bytes);
    memcpy(b->words, blob, words * 8);
    b->nbits = (uint64_t)words * 64;
}

void ib__sl_bloom_free(ib__sl_bloom *b)
{
    free(b->words);
    memset(b, 0, sizeof(*b));
}
