/* SPDX-License-Identifier: Apache-2.0 */
/* Rule 2, for calls: no two product .c files use each other's functions
 * in a circle. The include check cannot see this: a file may declare what
 * it calls in a shared private header, so two files that include only that
 * header can still lean on each other, and then neither can be understood,
 * tested or moved without the other.
 *
 * It reads text, not the build. A name is external when a .c file defines
 * it at file scope without `static`: a function (clang-format puts its name
 * and parameters at column 0, its `{` alone on the next line), a variable
 * or a function pointer. A file uses another when that name appears in it
 * as a whole identifier outside comments and string literals; a use inside
 * a macro body counts too, since the macro runs in the using file.
 *
 * Every product folder is read, the plugin examples and bench programs
 * included: a circle inside one example is as hard to follow as one in
 * the host. Separate programs may define the same name (every plugin has
 * an ib_plugin_entry); a file that defines a name uses its own. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layering.h"

typedef struct {
    const char *name; /* points into the defining file's code_only text */
    size_t len;
    size_t file; /* node of the defining file */
} def;

typedef struct {
    size_t n; /* product .c files: the graph's nodes */
    const char **path;
    char **code; /* their text with comments and literals blanked */
    def *defs;
    size_t ndefs, cap;
    size_t *slot; /* hash table of defs: index + 1, 0 = empty */
    size_t nslots;
} call_run;

static bool ident(int c)
{
    return isalnum((unsigned char)c) || c == '_';
}

static void blank(char *s, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (s[i] != '\n')
            s[i] = ' ';
}

/* A copy of s with comments and string and character literals turned to
 * spaces; newlines stay, so line numbers still hold. */
static char *code_only(const char *s)
{
    size_t n = strlen(s), j;
    char *c = strdup(s);
    for (size_t i = 0; c && i < n; i = j) {
        j = i + 1;
        if (c[i] == '/' && c[i + 1] == '*') {
            for (j = i + 2; j < n && !(c[j] == '*' && c[j + 1] == '/');)
                j++;
            j = j < n ? j + 2 : n;
        } else if (c[i] == '/' && c[i + 1] == '/') {
            for (j = i + 2; j < n && c[j] != '\n';)
                j++;
        } else if (c[i] == '"' || c[i] == '\'') {
            for (; j < n && c[j] != c[i] && c[j] != '\n'; j++)
                if (c[j] == '\\' && j + 1 < n)
                    j++;
            j = j < n && c[j] == c[i] ? j + 1 : j;
        } else {
            continue;
        }
        blank(c, i, j);
    }
    return c;
}

static bool starts_word(const char *s, const char *word)
{
    size_t n = strlen(word);
    return strncmp(s, word, n) == 0 && !ident(s[n]);
}

/* The identifier ending just before `end` (spaces skipped); its length. */
static size_t name_before(const char *start, const char *end, const char **name)
{
    while (end > start && isspace((unsigned char)end[-1]))
        end--;
    const char *b = end;
    while (b > start && ident(b[-1]))
        b--;
    *name = b;
    return (size_t)(end - b);
}

/* The name a file-scope statement at s defines for other files, if any:
 * `T name(...)\n{`, `T (*name)(...)...;`, `T name...;` or `T name = ...`.
 * Prototypes, type definitions and static or extern lines define nothing. */
static size_t external_name(const char *s, const char **name)
{
    const char *end = s, *paren = NULL, *eq = NULL, *open = NULL, *close = NULL;
    int depth = 0;
    if (starts_word(s, "static") || starts_word(s, "typedef") || starts_word(s, "extern"))
        return 0;
    for (; *end && !(depth == 0 && (*end == ';' || *end == '{')); end++) {
        if (*end == '(' && depth++ == 0) {
            paren = paren ? paren : end;
            open = end;
        } else if (*end == ')' && --depth == 0) {
            close = end;
        } else if (*end == '=' && depth == 0 && !eq) {
            eq = end;
        }
    }
    if (!*end)
        return 0;
    const char *after = paren ? paren + 1 : NULL;
    while (after && isspace((unsigned char)*after))
        after++;
    if (after && *after == '*' && (!eq || paren < eq)) { /* a function pointer */
        const char *b = after + 1, *e;
        while (isspace((unsigned char)*b))
            b++;
        for (e = b; ident(*e); e++)
            ;
        *name = b;
        return (size_t)(e - b);
    }
    if (paren && (!eq || paren < eq)) { /* a function: defined only before `{` */
        const char *last = end;
        while (last > s && isspace((unsigned char)last[-1]))
            last--;
        return *end == '{' && close && last == close + 1 ? name_before(s, open, name) : 0;
    }
    if (*end == '{' && !eq)
        return 0; /* struct, union or enum definition */
    const char *stop = eq ? eq : end, *bracket = memchr(s, '[', (size_t)(stop - s));
    return name_before(s, bracket ? bracket : stop, name);
}

static int add_def(call_run *r, size_t file, const char *name, size_t len)
{
    if (len == 0 || (len == 4 && strncmp(name, "main", 4) == 0))
        return 0;
    if (r->ndefs == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 256;
        def *grown = realloc(r->defs, r->cap * sizeof *grown);
        if (!grown)
            return -1;
        r->defs = grown;
    }
    r->defs[r->ndefs++] = (def){name, len, file};
    return 0;
}

/* Every external name of file `file`: statements that start at column 0
 * outside any braces. */
static int collect_defs(call_run *r, size_t file)
{
    const char *c = r->code[file];
    int depth = 0;
    for (const char *s = c; *s; s++) {
        if ((s == c || s[-1] == '\n') && depth == 0 && (isalpha((unsigned char)*s) || *s == '_')) {
            const char *name;
            size_t len = external_name(s, &name);
            if (add_def(r, file, name, len) != 0)
                return -1;
        }
        depth += *s == '{' ? 1 : *s == '}' ? -1 : 0;
    }
    return 0;
}

static size_t hash(const char *s, size_t len)
{
    size_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int build_index(call_run *r)
{
    r->nslots = 64;
    while (r->nslots < 2 * r->ndefs)
        r->nslots *= 2;
    r->slot = calloc(r->nslots, sizeof *r->slot);
    if (!r->slot)
        return -1;
    for (size_t d = 0; d < r->ndefs; d++) {
        size_t i = hash(r->defs[d].name, r->defs[d].len) & (r->nslots - 1);
        while (r->slot[i])
            i = (i + 1) & (r->nslots - 1);
        r->slot[i] = d + 1;
    }
    return 0;
}

typedef struct {
    lay_graph g;
    const def **why; /* per edge: the name that made it */
    size_t cap;
    bool *seen; /* [from * n + to] */
} uses;

/* An edge from -> to, once per pair, remembering the first name and line. */
static int use(call_run *r, uses *u, size_t from, const def *d, int line)
{
    if (d->file == from || u->seen[from * r->n + d->file])
        return 0;
    u->seen[from * r->n + d->file] = true;
    if (lay_graph_edge(&u->g, from, d->file, line) != 0)
        return -1;
    if (u->g.m > u->cap) {
        u->cap = u->g.cap;
        const def **grown = realloc(u->why, u->cap * sizeof *grown);
        if (!grown)
            return -1;
        u->why = grown;
    }
    u->why[u->g.m - 1] = d;
    return 0;
}

/* Whether file `from` itself defines the name at s: then its uses are its
 * own, whoever else defines a namesake. Each plugin example defines
 * ib_plugin_entry, and no plugin calls another's. */
static bool defined_here(const call_run *r, size_t from, const char *s, size_t len)
{
    size_t mask = r->nslots - 1;
    for (size_t i = hash(s, len) & mask; r->slot[i]; i = (i + 1) & mask) {
        const def *d = &r->defs[r->slot[i] - 1];
        if (d->file == from && d->len == len && memcmp(d->name, s, len) == 0)
            return true;
    }
    return false;
}

/* Looks every identifier of file `from` up among the external names. */
static int collect_uses(call_run *r, uses *u, size_t from)
{
    const char *c = r->code[from];
    int line = 1;
    for (const char *s = c; *s; s++) {
        if (*s == '\n')
            line++;
        if (!(isalpha((unsigned char)*s) || *s == '_') || (s > c && ident(s[-1])))
            continue;
        size_t len = 1;
        while (ident(s[len]))
            len++;
        bool own = defined_here(r, from, s, len);
        size_t mask = r->nslots - 1;
        for (size_t i = hash(s, len) & mask; !own && r->slot[i]; i = (i + 1) & mask) {
            const def *d = &r->defs[r->slot[i] - 1];
            if (d->len == len && memcmp(d->name, s, len) == 0 && use(r, u, from, d, line) != 0)
                return -1;
        }
        s += len - 1;
    }
    return 0;
}

/* Picks the product .c files and blanks their comments and literals. */
static int load(call_run *r, const lay_tree *t)
{
    r->path = calloc(t->n, sizeof *r->path);
    r->code = calloc(t->n, sizeof *r->code);
    if (!r->path || !r->code)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        const char *p = t->files[i].path;
        size_t len = strlen(p);
        if (len < 2 || strcmp(p + len - 2, ".c") != 0)
            continue;
        r->path[r->n] = p;
        if (!(r->code[r->n++] = code_only(t->files[i].text)))
            return -1;
    }
    return 0;
}

/* One finding per strongly connected component of more than one file:
 * the files, then every edge between them with the name behind it. */
static int report(const call_run *r, const uses *u)
{
    size_t *comp = malloc((r->n + 1) * sizeof *comp), *size = calloc(r->n + 1, sizeof *size);
    size_t ncomp = comp && size ? lay_graph_components(&u->g, comp) : 0;
    int found = 0;
    for (size_t v = 0; v < r->n && ncomp; v++)
        size[comp[v]]++;
    for (size_t k = 0; k < ncomp; k++) {
        if (size[k] < 2)
            continue;
        printf("FAIL [call-cycle] %zu files use each other's functions in a circle:", size[k]);
        for (size_t v = 0; v < r->n; v++)
            if (comp[v] == k)
                printf(" %s", r->path[v]);
        printf("\n");
        for (size_t i = 0; i < u->g.m; i++) {
            const lay_edge *e = &u->g.edges[i];
            if (comp[e->from] == k && comp[e->to] == k)
                printf("    %s:%d -> %s (%.*s)\n", r->path[e->from], e->line, r->path[e->to],
                       (int)u->why[i]->len, u->why[i]->name);
        }
        found++;
    }
    if (!comp || !size) {
        printf("FAIL [call-cycle] out of memory\n");
        found++;
    }
    free(comp);
    free(size);
    return found;
}

static int run(call_run *r, uses *u, const lay_tree *t)
{
    if (load(r, t) != 0)
        return -1;
    for (size_t i = 0; i < r->n; i++)
        if (collect_defs(r, i) != 0)
            return -1;
    if (build_index(r) != 0 || !(u->seen = calloc(r->n * r->n + 1, 1)))
        return -1;
    lay_graph_init(&u->g, r->n);
    for (size_t i = 0; i < r->n; i++)
        if (collect_uses(r, u, i) != 0)
            return -1;
    return 0;
}

int lay_check_call_cycles(const lay_tree *t)
{
    call_run r = {0};
    uses u = {0};
    int found;
    if (run(&r, &u, t) != 0) {
        printf("FAIL [call-cycle] out of memory\n");
        found = 1;
    } else {
        found = report(&r, &u);
        printf("call-cycles: %zu .c files, %zu external names, %zu pairs where one file uses "
               "another's\n",
               r.n, r.ndefs, u.g.m);
        if (r.ndefs == 0) {
            printf("FAIL [call-cycle] no external names found; the check saw nothing\n");
            found++;
        }
    }
    for (size_t i = 0; i < r.n; i++)
        free(r.code[i]);
    free(r.code);
    free(r.path);
    free(r.defs);
    free(r.slot);
    free(u.why);
    free(u.seen);
    lay_graph_free(&u.g);
    return found;
}
