/* SPDX-License-Identifier: Apache-2.0 */
/* W3C Trace Context parsing, spans and the thread's current trace
 * (trace.h). */
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"

/* Offsets of the dashes and fields of a traceparent. */
#define TP_TRACE 3
#define TP_SPAN 36
#define TP_FLAGS 53

/* tracestate limits (W3C): key, tenant and system lengths, value length,
 * and the member length above which a long list is cut first. */
#define TS_KEY_MAX 256
#define TS_TENANT_MAX 241
#define TS_SYSTEM_MAX 14
#define TS_VALUE_MAX 256
#define TS_LONG_MEMBER 128

static _Thread_local const ib_trace *current;

void ib_trace_current_set(const ib_trace *t)
{
    current = t;
}

const ib_trace *ib_trace_current(void)
{
    return current;
}

/* Lowercase hex only: the W3C format has no upper case. */
static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* `n` lowercase hex digits at `s`, not all zero when `nonzero`. */
static bool hex_run(const char *s, size_t n, bool nonzero)
{
    bool zero = true;
    for (size_t i = 0; i < n; i++) {
        if (hex_value(s[i]) < 0)
            return false;
        zero = zero && s[i] == '0';
    }
    return !(nonzero && zero);
}

static bool ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Narrows [*s, *s + *len) to leave out white space at both ends. */
static void trim(const char **s, size_t *len)
{
    while (*len > 0 && ows((*s)[0])) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && ows((*s)[*len - 1]))
        (*len)--;
}

static void format_traceparent(ib_trace *t)
{
    snprintf(t->traceparent, sizeof(t->traceparent), "00-%s-%s-%02x", t->trace_id, t->span_id,
             (unsigned)t->flags);
}

bool ib_trace_parse(ib_trace *out, const char *value, size_t len)
{
    memset(out, 0, sizeof(*out));
    if (value == NULL)
        return false;
    trim(&value, &len);
    if (len < IB_TRACEPARENT_LEN || !hex_run(value, 2, false))
        return false;
    int version = hex_value(value[0]) * 16 + hex_value(value[1]);
    if (version == 0xff || (version == 0 && len != IB_TRACEPARENT_LEN))
        return false;
    /* a later version may append fields, after a dash */
    if (len > IB_TRACEPARENT_LEN && value[IB_TRACEPARENT_LEN] != '-')
        return false;
    if (value[TP_TRACE - 1] != '-' || value[TP_SPAN - 1] != '-' || value[TP_FLAGS - 1] != '-' ||
        !hex_run(value + TP_TRACE, IB_TRACE_ID_HEX, true) ||
        !hex_run(value + TP_SPAN, IB_SPAN_ID_HEX, true) || !hex_run(value + TP_FLAGS, 2, false))
        return false;
    memcpy(out->trace_id, value + TP_TRACE, IB_TRACE_ID_HEX);
    memcpy(out->span_id, value + TP_SPAN, IB_SPAN_ID_HEX);
    int flags = hex_value(value[TP_FLAGS]) * 16 + hex_value(value[TP_FLAGS + 1]);
    out->flags = (uint8_t)(flags & (IB_TRACE_FLAG_SAMPLED | IB_TRACE_FLAG_RANDOM));
    format_traceparent(out);
    return true;
}

/* ---- tracestate ----------------------------------------------------------- */

typedef struct ts_member {
    const char *p;
    size_t len;     /* the whole member, "key=value" */
    size_t key_len; /* up to the '=' */
} ts_member;

static bool lcalpha(char c)
{
    return c >= 'a' && c <= 'z';
}

/* lcalpha / DIGIT / "_" / "-" / "*" / "/" */
static bool key_char(char c)
{
    return lcalpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

static bool key_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!key_char(s[i]))
            return false;
    return true;
}

/* simple-key, or tenant-id "@" system-id. */
static bool valid_key(const char *k, size_t n)
{
    const char *at = memchr(k, '@', n);
    if (at == NULL)
        return n >= 1 && n <= TS_KEY_MAX && lcalpha(k[0]) && key_run(k, n);
    size_t tenant = (size_t)(at - k), system = n - tenant - 1;
    return tenant >= 1 && tenant <= TS_TENANT_MAX &&
           (lcalpha(k[0]) || (k[0] >= '0' && k[0] <= '9')) && key_run(k, tenant) && system >= 1 &&
           system <= TS_SYSTEM_MAX && lcalpha(at[1]) && key_run(at + 1, system);
}

/* 1..256 of %x20-2B / %x2D-3C / %x3E-7E, the last not a space. */
static bool valid_value(const char *v, size_t n)
{
    if (n < 1 || n > TS_VALUE_MAX || v[n - 1] == ' ')
        return false;
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0x20 || v[i] > 0x7e || v[i] == ',' || v[i] == '=')
            return false;
    return true;
}

/* Reads one list-member of `len` bytes at `p` (white space around it
 * already trimmed) into `m`. */
static bool read_member(ts_member *m, const char *p, size_t len)
{
    const char *eq = memchr(p, '=', len);
    if (eq == NULL)
        return false;
    m->p = p;
    m->len = len;
    m->key_len = (size_t)(eq - p);
    return valid_key(p, m->key_len) && valid_value(eq + 1, len - m->key_len - 1);
}

static bool duplicate_key(const ts_member *v, size_t n, const ts_member *m)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].key_len == m->key_len && memcmp(v[i].p, m->p, m->key_len) == 0)
            return true;
    return false;
}

/* Splits `value` into members; false when one is invalid, a key repeats
 * or there are more than IB_TRACESTATE_MEMBERS. */
static bool split_members(ts_member *v, size_t *n, const char *value, size_t len)
{
    *n = 0;
    for (size_t start = 0; start <= len;) {
        const char *comma = memchr(value + start, ',', len - start);
        size_t end = comma != NULL ? (size_t)(comma - value) : len;
        const char *p = value + start;
        size_t mlen = end - start;
        trim(&p, &mlen);
        if (mlen > 0) {
            ts_member m;
            if (*n == IB_TRACESTATE_MEMBERS || !read_member(&m, p, mlen) ||
                duplicate_key(v, *n, &m))
                return false;
            v[(*n)++] = m;
        }
        start = end + 1;
    }
    return true;
}

/* Length of the members joined by ",". */
static size_t joined_len(const ts_member *v, size_t n)
{
    size_t total = n > 0 ? n - 1 : 0;
    for (size_t i = 0; i < n; i++)
        total += v[i].len;
    return total;
}

/* Cuts the list to IB_TRACESTATE_MAX: long members from the end first,
 * then any from the end. */
static void cut_members(ts_member *v, size_t *n)
{
    for (size_t i = *n; i > 0 && joined_len(v, *n) > IB_TRACESTATE_MAX; i--) {
        if (v[i - 1].len <= TS_LONG_MEMBER)
            continue;
        memmove(&v[i - 1], &v[i], (*n - i) * sizeof(*v));
        (*n)--;
    }
    while (*n > 0 && joined_len(v, *n) > IB_TRACESTATE_MAX)
        (*n)--;
}

bool ib_trace_state_parse(ib_trace *t, const char *value, size_t len)
{
    ts_member v[IB_TRACESTATE_MEMBERS];
    size_t n = 0;
    t->tracestate[0] = '\0';
    if (value == NULL || !split_members(v, &n, value, len))
        return false;
    cut_members(v, &n);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            t->tracestate[w++] = ',';
        memcpy(t->tracestate + w, v[i].p, v[i].len);
        w += v[i].len;
    }
    t->tracestate[w] = '\0';
    return true;
}

/* ---- new ids ---------------------------------------------------------------- */

/* A per-thread splitmix64 sequence from a random seed: distinct values for
 * each thread's spans, random-looking across threads and processes. */
static _Thread_local uint64_t span_seq;
static _Thread_local bool span_seeded;

static uint64_t next_span_bits(void)
{
    if (!span_seeded) {
        if (getrandom(&span_seq, sizeof(span_seq), GRND_NONBLOCK) != (ssize_t)sizeof(span_seq))
            span_seq = (uint64_t)ib_clock_monotonic_ns() ^ (uint64_t)(uintptr_t)&span_seq ^
                       ((uint64_t)pthread_self() << 17);
        span_seeded = true;
    }
    uint64_t z = (span_seq += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void hex64(char *out, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = digits[v & 0xf];
    out[16] = '\0';
}

void ib_trace_child(ib_trace *out, const ib_trace *parent)
{
    char span[IB_SPAN_ID_HEX + 1];
    uint64_t bits;
    do {
        bits = next_span_bits();
        hex64(span, bits);
    } while (bits == 0 || strcmp(span, parent->span_id) == 0);
    if (out != parent)
        memcpy(out, parent, sizeof(*out));
    memcpy(out->span_id, span, sizeof(span));
    format_traceparent(out);
}

ib_status ib_trace_start(ib_trace *out, ib_error *err)
{
    uint64_t id[2] = {0, 0};
    memset(out, 0, sizeof(*out));
    while (id[0] == 0 && id[1] == 0) {
        if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
            return ib_error_set(err, IB_ERR_IO, "no randomness for a trace id: %s",
                                strerror(errno));
    }
    hex64(out->trace_id, id[0]);
    hex64(out->trace_id + 16, id[1]);
    out->flags = IB_TRACE_FLAG_SAMPLED | IB_TRACE_FLAG_RANDOM;
    memset(out->span_id, '0', IB_SPAN_ID_HEX);
    ib_trace_child(out, out);
    return IB_OK;
}
