/* SPDX-License-Identifier: Apache-2.0 */
#include "json_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const unsigned char *s;
    size_t len;
    size_t pos;
    char *why;
    size_t why_len;
} cursor;

static int fail(cursor *c, const char *reason)
{
    snprintf(c->why, c->why_len, "%s at byte %zu", reason, c->pos);
    return -1;
}

static void skip_ws(cursor *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' ||
                               c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

/* Length of a well-formed UTF-8 sequence at p, or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (p[0] >= 0xe0 && p[0] <= 0xef) {
        if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))
            return 0;
        return 3;
    }
    if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

static int hex4(cursor *c, unsigned *out)
{
    unsigned v = 0;
    if (c->pos + 4 > c->len)
        return fail(c, "short \\u escape");
    for (int i = 0; i < 4; i++) {
        unsigned char h = c->s[c->pos++];
        v <<= 4;
        if (h >= '0' && h <= '9')
            v |= h - '0';
        else if (h >= 'a' && h <= 'f')
            v |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
            v |= h - 'A' + 10;
        else
            return fail(c, "bad hex digit");
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *d, unsigned cp)
{
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xc0 | (cp >> 6));
        d[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xe0 | (cp >> 12));
        d[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        d[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (char)(0xf0 | (cp >> 18));
    d[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    d[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Parses a string at the cursor (which is on the opening quote) and returns
 * its decoded bytes (malloc'd) in *out. */
static int parse_string(cursor *c, char **out)
{
    *out = NULL;
    if (c->pos >= c->len || c->s[c->pos] != '"')
        return fail(c, "expected string");
    c->pos++;
    /* decoded text is never longer than the source */
    char *d = malloc(c->len - c->pos + 1);
    size_t n = 0;
    if (d == NULL)
        return fail(c, "out of memory");
    for (;;) {
        if (c->pos >= c->len) {
            free(d);
            return fail(c, "unterminated string");
        }
        unsigned char ch = c->s[c->pos];
        if (ch == '"') {
            c->pos++;
            break;
        }
        if (ch < 0x20) {
            free(d);
            return fail(c, "raw control character in string");
        }
        if (ch == '\\') {
            c->pos++;
            if (c->pos >= c->len) {
                free(d);
                return fail(c, "dangling backslash");
            }
            unsigned char e = c->s[c->pos++];
            unsigned cp;
            switch (e) {
            case '"':
            case '\\':
            case '/':
                d[n++] = (char)e;
                break;
            case 'b':
                d[n++] = '\b';
                break;
            case 'f':
                d[n++] = '\f';
                break;
            case 'n':
                d[n++] = '\n';
                break;
            case 'r':
                d[n++] = '\r';
                break;
            case 't':
                d[n++] = '\t';
                break;
            case 'u':
                if (hex4(c, &cp) != 0) {
                    free(d);
                    return -1;
                }
                if (cp >= 0xdc00 && cp <= 0xdfff) {
                    free(d);
                    return fail(c, "lone low surrogate");
                }
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    unsigned lo;
                    if (c->pos + 2 > c->len || c->s[c->pos] != '\\' || c->s[c->pos + 1] != 'u') {
                        free(d);
                        return fail(c, "lone high surrogate");
                    }
                    c->pos += 2;
                    if (hex4(c, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff) {
                        free(d);
                        return fail(c, "bad surrogate pair");
                    }
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                n += put_utf8(d + n, cp);
                break;
            default:
                free(d);
                return fail(c, "bad escape");
            }
            continue;
        }
        size_t l = utf8_len(c->s + c->pos, c->len - c->pos);
        if (l == 0) {
            free(d);
            return fail(c, "invalid UTF-8");
        }
        memcpy(d + n, c->s + c->pos, l);
        n += l;
        c->pos += l;
    }
    d[n] = '\0';
    *out = d;
    return 0;
}

int json_check_object(json_flat *o, const char *s, size_t len, char *why, size_t why_len)
{
    cursor c = {(const unsigned char *)s, len, 0, why, why_len};
    memset(o, 0, sizeof(*o));
    snprintf(why, why_len, "ok");
    skip_ws(&c);
    if (c.pos >= len || s[c.pos] != '{')
        return fail(&c, "expected '{'");
    c.pos++;
    skip_ws(&c);
    if (c.pos < len && s[c.pos] == '}') {
        c.pos++;
    } else {
        for (;;) {
            if (o->count == JSON_MAX_FIELDS)
                return fail(&c, "too many fields");
            json_field *f = &o->fields[o->count];
            skip_ws(&c);
            if (parse_string(&c, &f->key) != 0)
                return -1;
            o->count++;
            for (size_t i = 0; i + 1 < o->count; i++)
                if (strcmp(o->fields[i].key, f->key) == 0)
                    return fail(&c, "duplicate key");
            skip_ws(&c);
            if (c.pos >= len || s[c.pos] != ':')
                return fail(&c, "expected ':'");
            c.pos++;
            skip_ws(&c);
            if (c.pos + 4 <= len && memcmp(s + c.pos, "null", 4) == 0) {
                c.pos += 4;
            } else if (parse_string(&c, &f->value) != 0) {
                return -1;
            }
            skip_ws(&c);
            if (c.pos < len && s[c.pos] == ',') {
                c.pos++;
                continue;
            }
            if (c.pos < len && s[c.pos] == '}') {
                c.pos++;
                break;
            }
            return fail(&c, "expected ',' or '}'");
        }
    }
    skip_ws(&c);
    if (c.pos != len)
        return fail(&c, "trailing bytes after the object");
    return 0;
}

void json_flat_free(json_flat *o)
{
    for (size_t i = 0; i < o->count; i++) {
        free(o->fields[i].key);
        free(o->fields[i].value);
    }
    o->count = 0;
}

const json_field *json_get(const json_flat *o, const char *key)
{
    for (size_t i = 0; i < o->count; i++)
        if (strcmp(o->fields[i].key, key) == 0)
            return &o->fields[i];
    return NULL;
}
