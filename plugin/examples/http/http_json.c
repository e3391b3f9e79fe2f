/* SPDX-License-Identifier: Apache-2.0 */
/* Whether a payload is one JSON value (http_json.h): a scanner that
 * allocates nothing, to the rules jansson 2.14 applies with
 * JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, which the fuzz target checks
 * it against: RFC 8259 grammar, UTF-8 checked, no \u0000, surrogate
 * escapes in pairs, numbers that stay finite as a double, at most 2048
 * nested values. */
#include "http_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

/* The bytes still to read: [p, end). */
typedef struct scan {
    const uint8_t *p, *end;
} scan;

size_t ib_http_utf8_len(const uint8_t *s, size_t avail)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* JSON's four white-space bytes. */
static bool is_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_ws(scan *s)
{
    while (s->p < s->end && is_ws(*s->p))
        s->p++;
}

static bool is_digit(const scan *s)
{
    return s->p < s->end && *s->p >= '0' && *s->p <= '9';
}

/* Four hex digits at p (at least 4 bytes there) as a number, or -1. */
static long hex4(const uint8_t *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A \u escape at s->p (the backslash); a high surrogate must have its low
 * half right after it. */
static bool unicode_escape(scan *s)
{
    if (s->end - s->p < 6 || s->p[1] != 'u')
        return false;
    long u = hex4(s->p + 2);
    s->p += 6;
    if (u <= 0 || (u >= 0xdc00 && u <= 0xdfff))
        return false;
    if (u < 0xd800 || u > 0xdbff)
        return true;
    if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u')
        return false;
    long lo = hex4(s->p + 2);
    s->p += 6;
    return lo >= 0xdc00 && lo <= 0xdfff;
}

static bool string(scan *s)
{
    s->p++; /* the opening quote */
    while (s->p < s->end) {
        uint8_t c = *s->p;
        size_t n;
        if (c == '"') {
            s->p++;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c == '\\') {
            if (s->end - s->p >= 2 && s->p[1] != '\0' && strchr("\"\\/bfnrt", s->p[1]) != NULL)
                s->p += 2;
            else if (!unicode_escape(s))
                return false;
            continue;
        }
        if ((n = ib_http_utf8_len(s->p, (size_t)(s->end - s->p))) == 0)
            return false;
        s->p += n;
    }
    return false;
}

/* A number token; jansson reads it as a double and refuses one that
 * overflows. */
static bool number(scan *s)
{
    const uint8_t *start = s->p;
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0') {
        s->p++; /* no digit after a leading 0 */
    } else {
        if (!is_digit(s))
            return false;
        while (is_digit(s))
            s->p++;
    }
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!is_digit(s))
            return false;
        while (is_digit(s))
            s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!is_digit(s))
            return false;
        while (is_digit(s))
            s->p++;
    }
    size_t n = (size_t)(s->p - start);
    char small[64], *text = n < sizeof(small) ? small : malloc(n + 1);
    if (text == NULL)
        return false;
    memcpy(text, start, n);
    text[n] = '\0';
    bool finite = !isinf(strtod(text, NULL));
    if (text != small)
        free(text);
    return finite;
}

static bool word(scan *s, const char *w, size_t n)
{
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
        return false;
    s->p += n;
    return true;
}

/* A value that is not an array or object. */
static bool scalar(scan *s)
{
    switch (*s->p) {
    case '"':
        return string(s);
    case 't':
        return word(s, "true", 4);
    case 'f':
        return word(s, "false", 5);
    case 'n':
        return word(s, "null", 4);
    default:
        return number(s);
    }
}

/* An object member's key and colon, white space around them. */
static bool key(scan *s)
{
    skip_ws(s);
    if (s->p == s->end || *s->p != '"' || !string(s))
        return false;
    skip_ws(s);
    if (s->p == s->end || *s->p != ':')
        return false;
    s->p++;
    return true;
}

/* After a value inside containers `stack[0..*depth)`: closes what ends
 * there. Returns 1 when another value follows (a comma was read), 0 at the
 * end of the top-level value, -1 on an error. */
static int after_value(scan *s, const char *stack, size_t *depth)
{
    for (;;) {
        skip_ws(s);
        if (*depth == 0)
            return 0;
        if (s->p == s->end)
            return -1;
        char open = stack[*depth - 1];
        if (*s->p == ',') {
            s->p++;
            return open == '{' && !key(s) ? -1 : 1;
        }
        if (*s->p != (open == '[' ? ']' : '}'))
            return -1;
        s->p++;
        (*depth)--;
    }
}

bool ib_http_json_valid(const uint8_t *data, size_t len)
{
    scan s = {.p = data, .end = data + len};
    char stack[MAX_DEPTH];
    size_t depth = 0;
    for (;;) {
        skip_ws(&s);
        /* what cannot start a value ends it here, before any work */
        if (s.p == s.end || depth + 1 > MAX_DEPTH)
            return false;
        uint8_t c = *s.p;
        if (c == '[' || c == '{') {
            stack[depth++] = (char)c;
            s.p++;
            skip_ws(&s);
            if (s.p < s.end && *s.p == (c == '[' ? ']' : '}')) {
                s.p++;
                depth--;
            } else if (c == '[' || key(&s)) {
                continue;
            } else {
                return false;
            }
        } else if (!scalar(&s)) {
            return false;
        }
        int next = after_value(&s, stack, &depth);
        if (next <= 0)
            return next == 0 && s.p == s.end;
    }
}
