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

/* A space or a control byte ends a protocol token. */
static const char *blank_problem(const char *s)
{
    if (ib_nats_control_at(s) >= 0)
        return "holds a control byte";
    if (strchr(s, ' ') != NULL)
        return "holds a space";
    return NULL;
}

const char *ib_nats_name_problem(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return "is empty";
    if (strlen(name) > NAME_MAX_BYTES)
        return "is longer than 255 bytes";
    const char *blank = blank_problem(name);
    if (blank != NULL)
        return blank;
    if (strpbrk(name, ".*>") != NULL)
        return "holds '.', '*' or '>' (a name is one token of a subject)";
    return NULL;
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
    if (subject == NULL || subject[0] == '\0')
        return "is empty";
    if (strlen(subject) > SUBJECT_MAX_BYTES)
        return "is longer than 1024 bytes";
    const char *blank = blank_problem(subject);
    if (blank != NULL)
        return blank;
    if ((flags & IB_SUBJECT_NOT_SYSTEM) != 0 && subject[0] == '$')
        return "is a $ subject (the server's API and system subjects)";
    if ((flags & IB_SUBJECT_NOT_SYSTEM) != 0 && strncmp(subject, "_INBOX", 6) == 0)
        return "is an _INBOX subject (the replies other clients wait for)";
    for (const char *t = subject;;) {
        const char *dot = strchr(t, '.');
        size_t len = dot != NULL ? (size_t)(dot - t) : strlen(t);
        const char *why = token_problem(t, len, dot == NULL, flags);
        if (why != NULL)
            return why;
        if (dot == NULL)
            return NULL;
        t = dot + 1;
    }
}
