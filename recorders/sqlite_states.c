/* The JSON text of a journal row's states (sqlite_states.h says which).
 *
 * The recorder reads its journal with this parser rather than SQLite's
 * json_each and json_extract: those parse each state's text once per
 * field, about ten thousand instructions a state, and every process of a
 * host reads the states of every other. The parser accepts what the
 * encoder writes and nothing else; SQLite's functions still read the same
 * text for the views. Fuzzed (tests/fuzz/recorders/fuzz_journal_states.c). */
#include "sqlite_states.h"

#include <stdint.h>
#include <string.h>

#include "uuid.h"

/* --- encoding -------------------------------------------------------------- */

static size_t put_int(char *out, int64_t v)
{
    char digits[24];
    size_t n = 0, len = 0;
    /* negated in unsigned arithmetic, so INT64_MIN is safe */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = digits[--n];
    return len;
}

/* A JSON string: quotes, backslashes and control characters escaped;
 * other bytes as they are (SQLite's JSON functions take UTF-8 text). */
static size_t put_string(char *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;
    out[len++] = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            out[len++] = '\\';
            out[len++] = (char)*c;
        } else if (*c < 0x20) {
            memcpy(out + len, "\\u00", 4);
            len += 4;
            out[len++] = hex[*c >> 4];
            out[len++] = hex[*c & 15];
        } else {
            out[len++] = (char)*c;
        }
    }
    out[len++] = '"';
    return len;
}

size_t ib__sq_state_encode(char *out, const char *event_id, const sq_state *st)
{
    size_t len = 0;
    out[len++] = '[';
    /* a normalised id is 32 hex digits: nothing to escape */
    out[len++] = '"';
    memcpy(out + len, event_id, IB_ID_LEN);
    len += IB_ID_LEN;
    out[len++] = '"';
    out[len++] = ',';
    out[len++] = st->done ? '1' : '0';
    out[len++] = ',';
    len += put_int(out + len, st->done ? st->ts : 0);
    out[len++] = ',';
    len += put_int(out + len, st->done ? (int64_t)st->fp : 0);
    out[len++] = ',';
    len += put_string(out + len, st->owner);
    out[len++] = ',';
    len += put_int(out + len, st->expires);
    out[len++] = ',';
    len += put_int(out + len, st->attempts);
    out[len++] = ']';
    return len;
}

/* --- parsing ---------------------------------------------------------------- */

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consumes `ch` (after whitespace); false if it is not next. */
static bool take(cursor *c, char ch)
{
    skip_space(c);
    if (c->p >= c->end || *c->p != ch)
        return false;
    c->p++;
    return true;
}

/* A decimal integer that fits an int64_t. */
static bool take_int(cursor *c, int64_t *out)
{
    skip_space(c);
    bool neg = c->p < c->end && *c->p == '-';
    if (neg)
        c->p++;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p - '0');
        if (v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
        c->p++;
    }
    /* JSON has no leading zeros (SQLite's json_valid refuses them) */
    if (c->p == start || (*start == '0' && c->p - start > 1))
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* One escape after the backslash: the encoder's \" \\ \u00XX, and the
 * other short JSON escapes; \u only for ASCII. */
static bool take_escape(cursor *c, char *out)
{
    if (c->p >= c->end)
        return false;
    char e = *c->p++;
    static const char plain[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
    const char *at = e != '\0' ? strchr(plain, e) : NULL;
    if (at != NULL) {
        *out = meant[at - plain];
        return true;
    }
    if (e != 'u' || c->end - c->p < 4)
        return false;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(c->p[i]);
        if (h < 0)
            return false;
        v = v * 16 + h;
    }
    if (v == 0 || v >= 0x80)
        return false;
    c->p += 4;
    *out = (char)v;
    return true;
}

/* A JSON string of at most `cap - 1` bytes into `out`, NUL-terminated. */
static bool take_string(cursor *c, char *out, size_t cap)
{
    size_t n = 0;
    if (!take(c, '"'))
        return false;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if ((unsigned char)ch < 0x20)
            return false;
        if (ch == '\\' && !take_escape(c, &ch))
            return false;
        if (n + 1 >= cap)
            return false;
        out[n++] = ch;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[n] = '\0';
    return true;
}

/* One state: ["id",done,ts,fp,"owner",expires,attempts]. */
static bool take_state(cursor *c, sq_state *st)
{
    char id[IB_ID_LEN + 2];
    int64_t done, ts, fp, expires, attempts;
    bool ok = take(c, '[') && take_string(c, id, sizeof(id)) && strlen(id) == IB_ID_LEN &&
              ib_id_pack(st->id, id) && take(c, ',') && take_int(c, &done) &&
              (done == 0 || done == 1) && take(c, ',') && take_int(c, &ts) && take(c, ',') &&
              take_int(c, &fp) && take(c, ',') && take_string(c, st->owner, sizeof(st->owner)) &&
              take(c, ',') && take_int(c, &expires) && take(c, ',') && take_int(c, &attempts) &&
              attempts >= 0 && attempts <= UINT32_MAX && take(c, ']');
    if (!ok)
        return false;
    st->done = done == 1;
    st->ts = ts;
    st->fp = (uint64_t)fp;
    st->expires = expires;
    st->attempts = (uint32_t)attempts;
    return true;
}

int ib__sq_states_parse(const char *text, size_t len, ib__sq_state_visit visit, void *ctx)
{
    cursor c = {text, text + len};
    sq_state st;
    if (!take(&c, '['))
        return -1;
    if (take(&c, ']')) {
        skip_space(&c);
        return c.p == c.end ? 0 : -1;
    }
    for (size_t index = 0;; index++) {
        if (!take_state(&c, &st))
            return -1;
        int rc = visit(ctx, index, &st);
        if (rc != 0)
            return rc;
        if (take(&c, ']'))
            break;
        if (!take(&c, ','))
            return -1;
    }
    skip_space(&c);
    return c.p == c.end ? 0 : -1;
}
