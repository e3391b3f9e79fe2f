/* SPDX-License-Identifier: Apache-2.0 */
/* Event ids: validation, normalisation, generation and derivation. */
#include "uuid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* Offsets of the version and variant nibbles in the 32-digit form. */
#define VERSION_DIGIT 12
#define VARIANT_DIGIT 16

static const char hex_digits[] = "0123456789abcdef";

/* Ids are checked and converted eight digits at a time, each byte a lane
 * of a 64-bit word: no branch per digit (random digits would make such
 * branches guess wrong half the time) and a quarter of the steps. Only
 * lane-wise operations are used, so the byte order of the machine does not
 * matter: a word is loaded and stored with memcpy in memory order. */
#define LANES_ONE 0x0101010101010101ull
#define LANES_HIGH 0x8080808080808080ull

/* 0x80 in each lane of `x` that lies in [lo, hi], 0 in the others. Every
 * lane must be below 0x80 (callers check), so no sum carries into the
 * next lane. */
static inline uint64_t lanes_in(uint64_t x, unsigned lo, unsigned hi)
{
    uint64_t at_least_lo = x + LANES_ONE * (0x80u - lo);
    uint64_t above_hi = x + LANES_ONE * (0x7fu - hi);
    return at_least_lo & ~above_hi & LANES_HIGH;
}

static inline uint64_t load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof(x));
    return x;
}

/* The lanes of eight digits: `lower` gets the lanes holding 'a'-'f',
 * `upper` those holding 'A'-'F'. False if a lane is no hex digit of either
 * case. */
static inline bool hex_lanes(uint64_t x, uint64_t *lower, uint64_t *upper)
{
    *lower = *upper = 0;
    if ((x & LANES_HIGH) != 0)
        return false;
    uint64_t digit = lanes_in(x, '0', '9');
    *lower = lanes_in(x, 'a', 'f');
    *upper = lanes_in(x, 'A', 'F');
    return (digit | *lower | *upper) == LANES_HIGH;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool is_dash_position(size_t i)
{
    return i == 8 || i == 13 || i == 18 || i == 23;
}

/* Checks run in a fixed order (empty, length, dashes, characters, version,
 * variant) so the reason reported for an id is always the same one. */
ib_id_reason ib_id_normalise(char out[IB_ID_BUF_SIZE], const char *in, size_t len,
                             unsigned versions)
{
    char undashed[IB_ID_LEN];
    char digits[IB_ID_BUF_SIZE];

    out[0] = '\0';
    if (in == NULL || len == 0)
        return IB_ID_EMPTY;
    if (len != 32 && len != 36)
        return IB_ID_BAD_LENGTH;
    if (len == 36) {
        for (size_t i = 0; i < len; i++) {
            if (is_dash_position(i) && in[i] != '-')
                return IB_ID_BAD_DASHES;
        }
        /* The groups of 8-4-4-4-12 digits, without their dashes. */
        memcpy(undashed, in, 8);
        memcpy(undashed + 8, in + 9, 4);
        memcpy(undashed + 12, in + 14, 4);
        memcpy(undashed + 16, in + 19, 4);
        memcpy(undashed + 20, in + 24, 12);
        in = undashed;
    }
    bool hex = true;
    for (size_t i = 0; i < IB_ID_LEN; i += 8) {
        uint64_t x = load8(in + i), lower, upper;
        hex &= hex_lanes(x, &lower, &upper);
        x |= upper >> 2; /* 0x20 in an upper-case lane: its lower case */
        memcpy(digits + i, &x, sizeof(x));
    }
    if (!hex)
        return IB_ID_BAD_CHAR;
    digits[IB_ID_LEN] = '\0';
    if (versions == IB_ID_VERSIONS_DEFAULT)
        versions = IB_ID_VERSIONS_DEFAULT_SET;
    if (!(versions & IB_ID_VERSION(hex_value((unsigned char)digits[VERSION_DIGIT]))))
        return IB_ID_BAD_VERSION;
    /* RFC 4122 variant: the two top bits of the variant nibble are 10. */
    if ((hex_value((unsigned char)digits[VARIANT_DIGIT]) & 0xc) != 0x8)
        return IB_ID_BAD_VARIANT;
    memcpy(out, digits, IB_ID_BUF_SIZE);
    return IB_ID_VALID;
}

bool ib_id_is_normalised(const char *id)
{
    if (id == NULL)
        return false;
    /* strnlen stops at the NUL, so a short id is never read past its end. */
    if (strnlen(id, IB_ID_LEN + 1) != IB_ID_LEN)
        return false;
    bool ok = true;
    for (size_t i = 0; i < IB_ID_LEN; i += 8) {
        uint64_t lower, upper;
        ok &= hex_lanes(load8(id + i), &lower, &upper) && upper == 0;
    }
    return ok;
}

const char *ib_id_reason_str(ib_id_reason reason)
{
    switch (reason) {
    case IB_ID_VALID:
        return "valid";
    case IB_ID_EMPTY:
        return "id is empty";
    case IB_ID_BAD_LENGTH:
        return "length is neither 32 nor 36 characters";
    case IB_ID_BAD_CHAR:
        return "contains a byte that is not a hex digit (or a misplaced dash or a NUL)";
    case IB_ID_BAD_DASHES:
        return "36 characters without dashes at positions 8, 13, 18 and 23";
    case IB_ID_BAD_VERSION:
        return "UUID version not accepted";
    case IB_ID_BAD_VARIANT:
        return "variant is not RFC 4122 (10xx)";
    }
    return "unknown reason";
}

int ib_id_version(const char *in, size_t len)
{
    if (in == NULL || (len != 32 && len != 36))
        return -1;
    /* the 36-character form has one dash before the version digit */
    return hex_value((unsigned char)in[len == 36 ? VERSION_DIGIT + 2 : VERSION_DIGIT]);
}

int ib_id_versions_parse(unsigned *out, const char *text)
{
    unsigned set = 0;
    *out = 0;
    if (text == NULL)
        return -1;
    if (strcmp(text, "any") == 0) {
        *out = IB_ID_ANY_VERSION;
        return 0;
    }
    /* one digit 1..8, then a comma and another, and so on */
    for (const char *p = text;; p += 2) {
        if (p[0] < '1' || p[0] > '8' || (p[1] != ',' && p[1] != '\0'))
            return -1;
        set |= IB_ID_VERSION(p[0] - '0');
        if (p[1] == '\0')
            break;
    }
    *out = set;
    return 0;
}

const char *ib_id_versions_str(char *buf, size_t cap, unsigned versions)
{
    size_t used = 0;
    if (versions == IB_ID_VERSIONS_DEFAULT)
        versions = IB_ID_VERSIONS_DEFAULT_SET;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    if ((versions & IB_ID_ANY_VERSION) == IB_ID_ANY_VERSION) {
        snprintf(buf, cap, "any");
        return buf;
    }
    for (int v = 0; v < 16 && used < cap; v++)
        if (versions & IB_ID_VERSION(v))
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", used > 0 ? "," : "", v);
    return buf;
}

static void set_v4_bits(uint8_t bytes[16])
{
    bytes[6] = (uint8_t)((bytes[6] & 0x0f) | 0x40);
    bytes[8] = (uint8_t)((bytes[8] & 0x3f) | 0x80);
}

ib_status ib_uuid4_generate(char out[IB_ID_BUF_SIZE])
{
    uint8_t bytes[16];
    size_t got = 0;

    out[0] = '\0';
    while (got < sizeof(bytes)) {
        ssize_t r = getrandom(bytes + got, sizeof(bytes) - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return IB_ERR_IO;
        }
        got += (size_t)r;
    }
    set_v4_bits(bytes);
    ib_id_unpack(out, bytes);
    return IB_OK;
}

/* A 128-bit hash built from two 64-bit lanes that absorb the same stream
 * with different seeds and multipliers and are cross-mixed at the end. Not
 * cryptographic: derived ids only need to be stable and well spread, and
 * nobody gains from forging one (the parent id is already attacker-chosen). */
typedef struct derive_hash {
    uint64_t a;
    uint64_t b;
    uint64_t total;
    uint8_t pending[8];
    size_t npending;
} derive_hash;

static uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64 - r));
}

/* Final avalanche of one lane: every input bit affects every output bit. */
static uint64_t avalanche64(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}

static void derive_block(derive_hash *h, uint64_t w)
{
    h->a ^= w * 0x9e3779b97f4a7c15ull;
    h->a = rotl64(h->a, 29) * 0xd6e8feb86659fd93ull + h->b;
    h->b ^= rotl64(w, 17) * 0xc2b2ae3d27d4eb4full;
    h->b = rotl64(h->b, 37) * 0xa0761d6478bd642full + h->a;
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t w = 0;
    for (int i = 7; i >= 0; i--)
        w = (w << 8) | p[i];
    return w;
}

static void derive_absorb(derive_hash *h, const void *data, size_t len)
{
    const uint8_t *p = data;
    h->total += len;
    while (len > 0) {
        size_t take = sizeof(h->pending) - h->npending;
        if (take > len)
            take = len;
        memcpy(h->pending + h->npending, p, take);
        h->npending += take;
        p += take;
        len -= take;
        if (h->npending == sizeof(h->pending)) {
            derive_block(h, load_le64(h->pending));
            h->npending = 0;
        }
    }
}

/* Each part is framed by its length so ("ab", "c") and ("a", "bc") differ. */
static void derive_absorb_part(derive_hash *h, const char *s)
{
    uint8_t len_le[8];
    uint64_t n = strlen(s);
    for (int i = 0; i < 8; i++)
        len_le[i] = (uint8_t)(n >> (8 * i));
    derive_absorb(h, len_le, sizeof(len_le));
    derive_absorb(h, s, (size_t)n);
}

void ib_uuid_derive(char out[IB_ID_BUF_SIZE], const char *parent_id, const char *name)
{
    derive_hash h = {.a = 0x243f6a8885a308d3ull, .b = 0x13198a2e03707344ull};
    uint8_t bytes[16];
    uint64_t a;
    uint64_t b;

    derive_absorb_part(&h, parent_id != NULL ? parent_id : "");
    derive_absorb_part(&h, name != NULL ? name : "");
    /* Pad the tail with its length so a short tail never equals a zero word. */
    memset(h.pending + h.npending, 0, sizeof(h.pending) - h.npending);
    h.pending[7] = (uint8_t)h.npending;
    derive_block(&h, load_le64(h.pending));
    a = avalanche64(h.a ^ h.total);
    b = avalanche64(h.b + a);
    a = avalanche64(a ^ rotl64(b, 23));
    for (int i = 0; i < 8; i++) {
        bytes[i] = (uint8_t)(a >> (8 * i));
        bytes[8 + i] = (uint8_t)(b >> (8 * i));
    }
    set_v4_bits(bytes);
    ib_id_unpack(out, bytes);
}

bool ib_id_pack(uint8_t out[16], const char *id)
{
    /* strnlen stops at the NUL, so a short id is never read past its end. */
    if (id == NULL || strnlen(id, IB_ID_LEN + 1) != IB_ID_LEN)
        return false;
    bool ok = true;
    uint8_t nibbles[IB_ID_LEN];
    for (size_t i = 0; i < IB_ID_LEN; i += 8) {
        uint64_t x = load8(id + i), lower, upper;
        ok &= hex_lanes(x, &lower, &upper) && upper == 0;
        /* '0'-'9' end in their value, 'a'-'f' in it minus 9 */
        uint64_t v = (x & (LANES_ONE * 0x0f)) + (lower >> 7) * 9;
        memcpy(nibbles + i, &v, sizeof(v));
    }
    for (size_t i = 0; i < 16; i++)
        out[i] = (uint8_t)((nibbles[2 * i] << 4) | nibbles[2 * i + 1]);
    return ok;
}

void ib_id_unpack(char out[IB_ID_BUF_SIZE], const uint8_t in[16])
{
    for (size_t i = 0; i < 16; i++) {
        out[2 * i] = hex_digits[in[i] >> 4];
        out[2 * i + 1] = hex_digits[in[i] & 0xf];
    }
    out[IB_ID_LEN] = '\0';
}
