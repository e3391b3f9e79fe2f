/* SPDX-License-Identifier: Apache-2.0 */
/* What NATS and JetStream would misread in a name or a subject (see
 * jetstream.h, "Names and subjects"). A subject is a token of the NATS
 * protocol line (PUB <subject> ...): a space or a CR/LF in it ends the
 * token, and whatever follows is read as the rest of the line, or as a
 * line of its own. Stream and consumer names become tokens of API
 * subjects ($JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>), so a '.', '*'
 * or '>' in one would name another subject. */
#include "jetstream.h"

#include <string.h>

/* Longest name and subject accepted: JetStream names are file names on the
 * server; subjects share the server's control line (4 KiB) with the rest. */
#define NAME_MAX_BYTES 255
#define SUBJECT_MAX_BYTES 1024

long ib_nats_control_at(const char *s)
{
    for (long i = 0; s != NULL && s[i] != '\0'; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return i;
    return -1;
}

/* What any protocol token must be: not empty, not longer than `max`
 * ("is longer than ..." names it), and without a space or a control byte,
 * which would end it. */
static const char *token_text_problem(const char *s, size_t max, const char *too_long)
{
    if (s == NULL || s[0] == '\0')
        return "is empty";
    if (strlen(s) > max)
        return too_long;
    if (ib_nats_control_at(s) >= 0)
        return "holds a control byte";
    if (strchr(s, ' ') != NULL)
        return "holds a space";
    return NULL;
}

const char *ib_nats_name_problem(const char *name)
{
    const char *why = token_text_problem(name, NAME_MAX_BYTES, "is longer than 255 bytes");
    if (why == NULL && strpbrk(name, ".*>") != NULL)
        why = "holds '.', '*' or '>' (a name is one token of a subject)";
    return why;
}

/* The rules of one token (`len` bytes at `t`), `last` when no '.' follows. */
static const char *token_problem(const char *t, size_t len, bool last, unsigned flags)
{
    if (len == 0)
        return "has an empty token (a leading, trailing or doubled '.')";
    bool wildcard = len == 1 && (t[0] == '*' || t[0] == '>');
    if (wildcard && (flags & IB_SUBJECT_WILDCARDS) == 0)
        return "holds a wildcard ('*' or '>' as a token): a message needs one subject";
    if (wildcard && t[0] == '>' && !last)
        return "has a '>' that is not the last token ('>' ends a filter)";
    return NULL;
}

const char *ib_nats_subject_problem(const char *subject, unsigned flags)
{
    const char *why = token_text_problem(subject, SUBJECT_MAX_BYTES, "is longer than 1024 bytes");
    if (why != NULL)
        return why;
    if ((flags & IB_SUBJECT_NOT_SYSTEM) != 0 && subject[0] == '$')
        return "is a $ subject (the server's API and system subjects)";
    if ((flags & IB_SUBJECT_NOT_SYSTEM) != 0 && strncmp(subject, "_INBOX", 6) == 0)
        return "is an _INBOX subject (the replies other clients wait for)";
    for (const char *t = subject;;) {
        const char *dot = strchr(t, '.');
        size_t len = dot != NULL ? (size_t)(dot - t) : strlen(t);
        why = token_problem(t, len, dot == NULL, flags);
        if (why != NULL)
            return why;
        if (dot == NULL)
            return NULL;
        t = dot + 1;
    }
}
