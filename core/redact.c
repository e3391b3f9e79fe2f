/* SPDX-License-Identifier: Apache-2.0 */
/* URL redaction (redact.h). A single pass over the text, element by
 * element (comma-separated outside a query); nothing is parsed beyond the
 * characters that end the parts a secret can hide in. */
#include "redact.h"

#include <string.h>

/* The output so far; `len` stops at cap - 1. */
typedef struct sink {
    char *out;
    size_t cap, len;
} sink;

static void put(sink *s, const char *p, size_t n)
{
    size_t room = s->cap - 1 - s->len;
    if (n > room)
        n = room;
    memcpy(s->out + s->len, p, n);
    s->len += n;
    s->out[s->len] = '\0';
}

static void put_str(sink *s, const char *p)
{
    put(s, p, strlen(p));
}

/* The last '@' in [p, end), or NULL. */
static const char *last_at(const char *p, const char *end)
{
    const char *at = NULL;
    for (; p < end; p++)
        if (*p == '@')
            at = p;
    return at;
}

/* Copies the query at `p` ('?') with each value hidden; returns where it
 * ends: at a fragment or at the end of the text. */
static const char *put_query(sink *s, const char *p)
{
    put(s, "?", 1);
    p++;
    while (*p != '\0' && *p != '#') {
        size_t n = strcspn(p, "&;#");
        const char *eq = memchr(p, '=', n);
        if (eq != NULL) {
            put(s, p, (size_t)(eq - p) + 1);
            if (eq + 1 < p + n)
                put_str(s, IB_REDACTED);
        } else if (n > 0) {
            put_str(s, IB_REDACTED);
        }
        p += n;
        if (*p == '&' || *p == ';')
            put(s, p++, 1);
    }
    return p;
}

/* Copies one element (a URL of a list, or a recorder URI) starting at
 * `p`; returns where it ends: at a ',' that separates elements, or at the
 * end of the text. */
static const char *put_element(sink *s, const char *p)
{
    const char *plain_end = p + strcspn(p, ",?#");
    const char *scheme = strstr(p, "://");
    const char *auth = p;
    if (scheme != NULL && scheme < plain_end) {
        put(s, p, (size_t)(scheme + 3 - p));
        auth = scheme + 3;
    }
    const char *at = last_at(auth, plain_end);
    if (at != NULL)
        auth = at + 1;
    put(s, auth, (size_t)(plain_end - auth));
    p = plain_end;
    if (*p == '?')
        p = put_query(s, p);
    if (*p == '#') {
        put(s, "#", 1);
        put_str(s, IB_REDACTED);
        p += strlen(p);
    }
    return p;
}

char *ib_redact_url(char *out, size_t cap, const char *text)
{
    if (out == NULL || cap == 0)
        return out;
    sink s = {out, cap, 0};
    out[0] = '\0';
    const char *p = text != NULL ? text : "";
    while (*p != '\0') {
        p = put_element(&s, p);
        if (*p == ',')
            put(&s, p++, 1);
    }
    return out;
}
