/* SPDX-License-Identifier: Apache-2.0 */
/* The http plugin's request bodies (http_body.h). */
#include "http_body.h"
#include "http_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ib_http_buf_reset(ib_http_buf *b)
{
    b->len = 0;
    b->oom = false;
}

void ib_http_buf_free(ib_http_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* Makes room for `n` more bytes; false (and `oom`) when memory runs out. */
static bool reserve(ib_http_buf *b, size_t n)
{
    if (b->oom)
        return false;
    if (b->len + n > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

static void put(ib_http_buf *b, const void *data, size_t n)
{
    if (!reserve(b, n))
        return;
    if (n > 0)
        memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_str(ib_http_buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A JSON string. Control bytes are escaped; a byte that does not start a
 * well-formed UTF-8 sequence becomes U+FFFD, so the body stays valid JSON
 * whatever the event's strings hold (a host checks them, an older one or
 * another caller may not). */
static void put_json_string(ib_http_buf *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    put(b, "\"", 1);
    while (*s != '\0') {
        size_t run = 0; /* printable ASCII that needs no escape, copied in one go */
        while (s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\')
            run++;
        if (run > 0) {
            put(b, s, run);
            s += run;
            continue;
        }
        size_t n = ib_http_utf8_len(s, strnlen((const char *)s, 4));
        char esc[8];
        if (*s == '"' || *s == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*s;
            put(b, esc, 2);
        } else if (*s < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", *s);
            put(b, esc, 6);
        } else if (n == 0) {
            put(b, "\\ufffd", 6);
            n = 1;
        } else {
            put(b, s, n);
        }
        s += n;
    }
    put(b, "\"", 1);
}

static void put_base64(ib_http_buf *b, const uint8_t *d, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    put(b, "\"", 1);
    if (!reserve(b, (n + 2) / 3 * 4 + 1))
        return;
    for (size_t i = 0; i < n; i += 3) {
        char *q = (char *)b->p + b->len;
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        q[0] = tab[(v >> 18) & 63];
        q[1] = tab[(v >> 12) & 63];
        q[2] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        q[3] = i + 2 < n ? tab[v & 63] : '=';
        b->len += 4;
    }
    put(b, "\"", 1);
}

/* Writes `v` as `width` decimal digits (zero-padded) at `out`. */
static void digits(char *out, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--, v /= 10)
        out[i] = (char)('0' + v % 10);
}

/* RFC 3339 in UTC with milliseconds, or null. Formatted by hand: this runs
 * once per request. */
static void put_time(ib_http_buf *b, int64_t ms)
{
    struct tm tm;
    time_t s = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    if (ms == 0 || gmtime_r(&s, &tm) == NULL || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) {
        put_str(b, "null");
        return;
    }
    char out[] = "\"YYYY-MM-DDTHH:MM:SS.mmmZ\"";
    digits(out + 1, (unsigned)(tm.tm_year + 1900), 4);
    digits(out + 6, (unsigned)tm.tm_mon + 1, 2);
    digits(out + 9, (unsigned)tm.tm_mday, 2);
    digits(out + 12, (unsigned)tm.tm_hour, 2);
    digits(out + 15, (unsigned)tm.tm_min, 2);
    digits(out + 18, (unsigned)tm.tm_sec, 2);
    digits(out + 21, (unsigned)(ms - (int64_t)s * 1000), 3);
    put(b, out, sizeof(out) - 1);
}

bool ib_http_body_json(ib_http_buf *b, const ib_raw_event *ev)
{
    size_t n;
    const uint8_t *payload = ib_raw_event_payload(ev, &n);
    bool json = n > 0 && ib_http_json_valid(payload, n);

    ib_http_buf_reset(b);
    put_str(b, "{\"id\":");
    put_json_string(b, ib_raw_event_id(ev));
    put_str(b, ",\"type\":");
    put_json_string(b, ib_raw_event_type(ev));
    put_str(b, ",\"source\":");
    put_json_string(b, ib_raw_event_source(ev));
    put_str(b, ",\"created_at\":");
    put_time(b, ib_raw_event_created_at_ms(ev));
    put_str(b, json ? ",\"payload_encoding\":\"json\",\"payload\":"
                    : ",\"payload_encoding\":\"base64\",\"payload\":");
    if (json)
        put(b, payload, n);
    else
        put_base64(b, payload, n);
    put_str(b, "}");
    return !b->oom;
}

/* ---- protobuf ----------------------------------------------------------- */

static void put_varint(ib_http_buf *b, uint64_t v)
{
    uint8_t q[10];
    size_t n = 0;
    do {
        q[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v != 0)
            q[n] |= 0x80;
        n++;
    } while (v != 0);
    put(b, q, n);
}

/* A length-delimited field (wire type 2); empty ones are left out. */
static void put_bytes(ib_http_buf *b, unsigned field, const void *d, size_t n)
{
    if (n == 0)
        return;
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, n);
    put(b, d, n);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* One map<string,string> entry: a nested message {1: key, 2: value}. */
static void put_header(ib_http_buf *b, const ib_header *h)
{
    size_t kl = strlen(h->key), vl = strlen(h->value);
    size_t inner = (kl > 0 ? 1 + varint_len(kl) + kl : 0) + (vl > 0 ? 1 + varint_len(vl) + vl : 0);
    put_varint(b, 6u << 3 | 2);
    put_varint(b, inner);
    put_bytes(b, 1, h->key, kl);
    put_bytes(b, 2, h->value, vl);
}

bool ib_http_body_protobuf(ib_http_buf *b, const ib_raw_event *ev)
{
    size_t n;
    const uint8_t *payload = ib_raw_event_payload(ev, &n);
    int64_t created = ib_raw_event_created_at_ms(ev);

    ib_http_buf_reset(b);
    put_bytes(b, 1, ib_raw_event_id(ev), strlen(ib_raw_event_id(ev)));
    put_bytes(b, 2, ib_raw_event_type(ev), strlen(ib_raw_event_type(ev)));
    put_bytes(b, 3, payload, n);
    if (created != 0) {
        put_varint(b, 4u << 3 | 0);
        put_varint(b, (uint64_t)created); /* int64: two's complement, 10 bytes if negative */
    }
    put_bytes(b, 5, ib_raw_event_source(ev), strlen(ib_raw_event_source(ev)));
    for (size_t i = 0; i < ib_raw_event_header_count(ev); i++)
        put_header(b, ib_raw_event_header_at(ev, i));
    return !b->oom;
}
