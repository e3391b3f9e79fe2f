/* SPDX-License-Identifier: Apache-2.0 */
/* Rule 3: short functions. The project's brace style (clang-format,
 * BreakBeforeBraces: Linux) puts a function's braces, and only a
 * function's, at column 0; a function runs from its `{` line to its `}`
 * line, both counted. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "layering.h"

/* The identifier before the first '(' of a signature line. */
static void name_of(const char *sig, char *out, size_t cap)
{
    const char *paren = strchr(sig, '(');
    const char *end = paren, *start;
    snprintf(out, cap, "?");
    if (!paren)
        return;
    while (end > sig && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    start = end;
    while (start > sig && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
        start--;
    if (end > start)
        snprintf(out, cap, "%.*s", (int)(end - start), start);
}

/* A line at column 0 that may start a signature: not blank, not a
 * preprocessor line, not a comment, not a closing brace. */
static bool signature_line(const char *s)
{
    const char *eol = strchr(s, '\n');
    const char *paren = strchr(s, '(');
    return isalpha((unsigned char)*s) && paren && (!eol || paren < eol);
}

static int check_file(const lay_file *f, int limit)
{
    const char *sig = NULL;
    int line = 1, open = 0, found = 0;
    char name[128];
    for (const char *s = f->text; *s; line++) {
        if (*s == '{' && !open) {
            open = line;
            if (sig)
                name_of(sig, name, sizeof name);
            else
                snprintf(name, sizeof name, "?");
        } else if (*s == '}' && open) {
            int len = line - open + 1;
            if (len > limit) {
                printf("FAIL [function-length] %s:%d: %s is %d lines (limit %d)\n", f->path, open,
                       name, len, limit);
                found++;
            }
            open = 0;
            sig = NULL;
        } else if (!open && signature_line(s)) {
            sig = s;
        }
        const char *eol = strchr(s, '\n');
        if (!eol)
            break;
        s = eol + 1;
    }
    return found;
}

int lay_check_length(const lay_tree *t, int limit)
{
    int found = 0;
    for (size_t i = 0; i < t->n; i++)
        found += check_file(&t->files[i], limit);
    printf("function-length: %zu files read, limit %d lines\n", t->n, limit);
    return found;
}
