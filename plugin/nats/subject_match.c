/* SPDX-License-Identifier: Apache-2.0 */
/* How two subject filters relate (jetstream.h, "Names and subjects"):
 * whether one takes in every subject of the other, and whether they share
 * any. Both walk the filters token by token; '*' is any one token, a last
 * '>' one or more. Neither allocates. */
#include "jetstream.h"

#include <string.h>

/* One token of a filter: where it starts and how long it is. */
typedef struct token {
    const char *at;
    size_t len;
} token;

/* Reads the token at *s and moves *s past it (and its '.'); false at the
 * end of the subject. */
static bool next_token(const char **s, token *t)
{
    if (*s == NULL)
        return false;
    const char *dot = strchr(*s, '.');
    t->at = *s;
    t->len = dot != NULL ? (size_t)(dot - *s) : strlen(*s);
    *s = dot != NULL ? dot + 1 : NULL;
    return true;
}

static bool is(const token *t, char c)
{
    return t->len == 1 && t->at[0] == c;
}

static bool same(const token *a, const token *b)
{
    return a->len == b->len && memcmp(a->at, b->at, a->len) == 0;
}

bool ib_nats_subject_covers(const char *outer, const char *inner)
{
    const char *o = outer, *i = inner;
    token a, b;
    for (;;) {
        bool more_a = next_token(&o, &a), more_b = next_token(&i, &b);
        if (!more_a || !more_b)
            return more_a == more_b;
        if (is(&a, '>'))
            return true; /* one or more tokens: inner has at least this one */
        if (is(&b, '>'))
            return false; /* inner goes on for any number of tokens, outer does not */
        if (is(&a, '*'))
            continue;
        if (is(&b, '*') || !same(&a, &b))
            return false;
    }
}

bool ib_nats_subjects_overlap(const char *a, const char *b)
{
    const char *p = a, *q = b;
    token x, y;
    for (;;) {
        bool more_x = next_token(&p, &x), more_y = next_token(&q, &y);
        if (!more_x || !more_y)
            return more_x == more_y;
        if (is(&x, '>') || is(&y, '>'))
            return true; /* the other has a token here, and '>' takes the rest */
        if (!is(&x, '*') && !is(&y, '*') && !same(&x, &y))
            return false;
    }
}
