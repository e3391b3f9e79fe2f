/* SPDX-License-Identifier: Apache-2.0 */
/* Strict UTF-8 validation (RFC 3629, table 3-7 of the Unicode standard). */
#include "utf8.h"

#include <string.h>

static bool is_cont(uint8_t b)
{
    return (b & 0xc0) == 0x80;
}

size_t ib__utf8_decode(uint32_t *cp, const uint8_t *s, size_t len)
{
    uint8_t b0;
    uint8_t lo = 0x80; /* allowed range of the second byte */
    uint8_t hi = 0xbf;
    size_t n;
    uint32_t v;

    if (s == NULL || len == 0)
        return 0;
    b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        n = 2;
        v = b0 & 0x1fu;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        n = 3;
        v = b0 & 0x0fu;
        if (b0 == 0xe0)
            lo = 0xa0; /* shorter forms are overlong */
        else if (b0 == 0xed)
            hi = 0x9f; /* U+D800..U+DFFF are surrogates */
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        n = 4;
        v = b0 & 0x07u;
        if (b0 == 0xf0)
            lo = 0x90; /* overlong */
        else if (b0 == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        return 0; /* continuation byte, C0/C1 (overlong) or F5..FF */
    }
    if (len < n || s[1] < lo || s[1] > hi)
        return 0;
    v = (v << 6) | (s[1] & 0x3fu);
    for (size_t i = 2; i < n; i++) {
        if (!is_cont(s[i]))
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    *cp = v;
    return n;
}

bool ib__utf8_valid(const void *s, size_t len)
{
    const uint8_t *p = s;
    size_t i = 0;

    while (i < len) {
        uint32_t cp;
        size_t n;
        /* Most strings we see are ASCII: skip them eight bytes at a time. */
        if (len - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, sizeof(w));
            if ((w & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        n = ib__utf8_decode(&cp, p + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}
