/* SPDX-License-Identifier: Apache-2.0 */
/* A tiny protobuf writer for tests: builds wire bytes by hand, including
 * ones no encoder would produce (invalid UTF-8, wrong wire types, groups).
 * Written independently of core/wire.c so the two check each other. */
#ifndef IB_TEST_PB_BUILDER_H
#define IB_TEST_PB_BUILDER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pb {
    uint8_t *buf;
    size_t len;
    size_t cap;
} pb;

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_SGROUP = 3, PB_EGROUP = 4, PB_I32 = 5 };

static inline void pb_raw(pb *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        b->buf = realloc(b->buf, cap);
        if (b->buf == NULL)
            abort();
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->buf + b->len, p, n);
    b->len += n;
}

static inline void pb_byte(pb *b, uint8_t x)
{
    pb_raw(b, &x, 1);
}

static inline void pb_varint(pb *b, uint64_t v)
{
    while (v >= 0x80) {
        pb_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pb_byte(b, (uint8_t)v);
}

static inline void pb_key(pb *b, uint32_t field, unsigned wire_type)
{
    pb_varint(b, ((uint64_t)field << 3) | wire_type);
}

/* A length-delimited field holding `n` bytes at `p`. */
static inline void pb_bytes(pb *b, uint32_t field, const void *p, size_t n)
{
    pb_key(b, field, PB_LEN);
    pb_varint(b, n);
    pb_raw(b, p, n);
}

static inline void pb_str(pb *b, uint32_t field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

/* A field-6 headers map entry with explicit key and value bytes. */
static inline void pb_entry(pb *b, const void *k, size_t klen, const void *v, size_t vlen)
{
    pb inner = {0};
    pb_bytes(&inner, 1, k, klen);
    pb_bytes(&inner, 2, v, vlen);
    pb_bytes(b, 6, inner.buf, inner.len);
    free(inner.buf);
}

static inline void pb_free(pb *b)
{
    free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

#endif
