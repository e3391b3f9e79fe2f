/* SPDX-License-Identifier: Apache-2.0 */
/* Ids, the stream of one run and the preload set (store_layouts.h). All
 * seeded: the same options give the same ids in every run and layout. */
#include <stdlib.h>
#include <string.h>

#include "store_layouts.h"

#define DUP_PERCENT 10
#define DUP_NEAREST 2 /* a duplicate repeats an id of 2 to 8 batches back */
#define DUP_FARTHEST 8

uint64_t ib__sl_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t ib__sl_rand(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return ib__sl_mix(*state);
}

void ib__sl_id_make(ib__sl_id *id, const uint8_t raw[16])
{
    static const char digits[] = "0123456789abcdef";
    memcpy(id->raw, raw, 16);
    id->raw[6] = (uint8_t)((id->raw[6] & 0x0f) | 0x40);
    id->raw[8] = (uint8_t)((id->raw[8] & 0x3f) | 0x80);
    for (int i = 0; i < 16; i++) {
        id->hex[2 * i] = digits[id->raw[i] >> 4];
        id->hex[2 * i + 1] = digits[id->raw[i] & 15];
    }
    id->hex[32] = '\0';
}

void ib__sl_id_random(ib__sl_id *id, uint64_t *rng)
{
    uint8_t raw[16];
    uint64_t a = ib__sl_rand(rng), b = ib__sl_rand(rng);
    memcpy(raw, &a, 8);
    memcpy(raw + 8, &b, 8);
    ib__sl_id_make(id, raw);
}

bool ib__sl_hex_raw(uint8_t raw[16], const char *hex, size_t len)
{
    if (hex == NULL || len != 32)
        return false;
    for (int i = 0; i < 32; i++) {
        char c = hex[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return false;
        if (i % 2 == 0)
            raw[i / 2] = (uint8_t)(v << 4);
        else
            raw[i / 2] |= (uint8_t)v;
    }
    return true;
}

static void *alloc_or_die(size_t n, size_t size)
{
    void *p = calloc(n != 0 ? n : 1, size);
    if (p == NULL)
        ib__sl_die("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

/* A new id of batches [b - 8, b - 2], or SIZE_MAX when there is none yet. */
static size_t pick_original(const ib__sl_stream *s, size_t b, uint64_t *rng)
{
    if (b < DUP_FARTHEST)
        return SIZE_MAX;
    size_t lo = (b - DUP_FARTHEST) * s->batch, hi = (b - DUP_NEAREST + 1) * s->batch;
    for (int tries = 0; tries < 16; tries++) {
        size_t j = lo + ib__sl_rand(rng) % (hi - lo);
        if (!s->dup[j])
            return j;
    }
    return SIZE_MAX;
}

void ib__sl_stream_make(ib__sl_stream *s, size_t fresh, size_t batch, uint64_t seed)
{
    /* Enough room for the duplicates on top of `fresh` new ids. */
    size_t cap = fresh + fresh / 4 + 2 * batch;
    uint64_t rng = seed;
    memset(s, 0, sizeof(*s));
    s->batch = batch;
    s->ids = alloc_or_die(cap, sizeof(*s->ids));
    s->fps = alloc_or_die(cap, sizeof(*s->fps));
    s->dup = alloc_or_die(cap, 1);
    while (s->fresh < fresh && s->n < cap) {
        size_t i = s->n++;
        size_t orig =
            ib__sl_rand(&rng) % 100 < DUP_PERCENT ? pick_original(s, i / batch, &rng) : SIZE_MAX;
        if (orig != SIZE_MAX) {
            s->ids[i] = s->ids[orig];
            s->fps[i] = s->fps[orig];
            s->dup[i] = 1;
        } else {
            ib__sl_id_random(&s->ids[i], &rng);
            s->fps[i] = ib__sl_rand(&rng);
            s->fresh++;
        }
    }
}

void ib__sl_stream_free(ib__sl_stream *s)
{
    free(s->ids);
    free(s->fps);
    free(s->dup);
    memset(s, 0, sizeof(*s));
}

static int raw_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

void ib__sl_preload_make(ib__sl_preload *p, size_t n, uint64_t seed, bool random_order)
{
    uint64_t rng = seed;
    ib__sl_id id;
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->random_order = random_order;
    /* A week that ends a day before now, so a run's own markers (ts = now)
     * are never the oldest day. */
    p->base_ms = ib__sl_unix_ms() - IB__SL_WEEK_MS - IB__SL_DAY_MS;
    p->raw = alloc_or_die(n, sizeof(*p->raw));
    for (size_t i = 0; i < n; i++) {
        ib__sl_id_random(&id, &rng);
        memcpy(p->raw[i], id.raw, 16);
    }
    qsort(p->raw, n, sizeof(*p->raw), raw_cmp);
    if (!random_order)
        return;
    p->order = alloc_or_die(n, sizeof(*p->order));
    for (size_t i = 0; i < n; i++)
        p->order[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = ib__sl_rand(&rng) % i, t = p->order[i - 1];
        p->order[i - 1] = p->order[j];
        p->order[j] = t;
    }
}

void ib__sl_preload_free(ib__sl_preload *p)
{
    free(p->raw);
    free(p->order);
    memset(p, 0, sizeof(*p));
}

const uint8_t *ib__sl_preload_raw(const ib__sl_preload *p, size_t i)
{
    return p->raw[p->order != NULL ? p->order[i] : i];
}

static uint64_t raw_hash(const uint8_t raw[16], uint64_t salt)
{
    uint64_t a, b;
    memcpy(&a, raw, 8);
    memcpy(&b, raw + 8, 8);
    return ib__sl_mix(a ^ ib__sl_mix(b ^ salt));
}

int64_t ib__sl_preload_ts(const ib__sl_preload *p, const uint8_t raw[16])
{
    return p->base_ms + (int64_t)(raw_hash(raw, 1) % (uint64_t)IB__SL_WEEK_MS);
}

uint64_t ib__sl_preload_fp(const uint8_t raw[16])
{
    return raw_hash(raw, 2);
}

int ib__sl_preload_day(const ib__sl_preload *p, const uint8_t raw[16])
{
    return (int)((ib__sl_preload_ts(p, raw) - p->base_ms) / IB__SL_DAY_MS);
}
