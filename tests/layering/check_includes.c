/* SPDX-License-Identifier: Apache-2.0 */
/* Rule 1: who may include what. */
#include <stdio.h>
#include <string.h>

#include "layering.h"

#define MAX_PARTS 64

typedef struct {
    const lay_tree *tree;
    int findings;
    bool used[MAX_PARTS][MAX_PARTS]; /* [from][to]: an include crosses this edge */
    bool present[MAX_PARTS];         /* the part has files in the tree */
} include_run;

static size_t index_of(const lay_part *p)
{
    return (size_t)(p - lay_parts);
}

static bool is_low(const lay_part *p)
{
    for (size_t i = 0; lay_low_parts[i]; i++)
        if (strcmp(lay_low_parts[i], p->name) == 0)
            return true;
    return false;
}

/* A header outside its part's public folder is private to its own folder. */
static bool private_to_other_folder(const lay_file *hdr, const lay_file *from)
{
    const lay_part *p = hdr->part;
    if (p && p->pub && lay_inside(hdr->path, p->pub))
        return false;
    const char *a = strrchr(hdr->path, '/'), *b = strrchr(from->path, '/');
    size_t na = a ? (size_t)(a - hdr->path) : 0, nb = b ? (size_t)(b - from->path) : 0;
    return na != nb || strncmp(hdr->path, from->path, na) != 0;
}

static void allowed_list(const lay_part *from, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < lay_nparts; i++) {
        if (&lay_parts[i] != from && lay_edge_allowed(from, &lay_parts[i])) {
            strncat(out, " ", cap - strlen(out) - 1);
            strncat(out, lay_parts[i].name, cap - strlen(out) - 1);
        }
    }
    if (!out[0])
        strncat(out, " nothing", cap - strlen(out) - 1);
}

static void fail(include_run *r, const lay_file *f, int line, const char *name, bool quoted,
                 const char *rule, const char *why)
{
    printf("FAIL [%s] %s:%d: #include %c%s%c: %s\n", rule, f->path, line, quoted ? '"' : '<', name,
           quoted ? '"' : '>', why);
    r->findings++;
}

/* Checks one include against the rules, in order; reports the first broken. */
static void check_one(void *ctx, const lay_file *f, int line, const char *name, bool quoted)
{
    include_run *r = ctx;
    char why[512], list[256];
    if (strncmp(name, "../", 3) == 0 || strstr(name, "/../")) {
        fail(r, f, line, name, quoted, "relative-escape",
             "no \"../\" in product includes; use the part's include directory");
        return;
    }
    if (!quoted && strncmp(name, "infinity_bus/", 13) != 0)
        return; /* a system or third-party header */
    lay_target t = lay_resolve(r->tree, f, name, quoted);
    if (t.how == LAY_MISSING) {
        fail(r, f, line, name, quoted, "unknown-header",
             "names no header of the tree; if the build generates it, add it to lay_generated "
             "in tests/layering/parts.c");
        return;
    }
    const char *hpath = t.file ? t.file->path : "(generated)";
    if (t.file && lay_inside(t.file->path, "plugin") && is_low(f->part)) {
        snprintf(why, sizeof why, "%s is under plugin/; %s/ never includes plugin/", hpath,
                 f->part->dir);
        fail(r, f, line, name, quoted, "low-layer", why);
        return;
    }
    if (t.file && private_to_other_folder(t.file, f)) {
        snprintf(why, sizeof why, "%s is private to its folder (not in %s's include/)", hpath,
                 t.part ? t.part->name : "any part");
        fail(r, f, line, name, quoted, "private-header", why);
        return;
    }
    if (t.how == LAY_STRAY) {
        snprintf(why, sizeof why, "%s is not on the part's include path", hpath);
        fail(r, f, line, name, quoted, "include-path", why);
        return;
    }
    if (!t.part || t.part == f->part)
        return;
    if (!lay_edge_allowed(f->part, t.part)) {
        allowed_list(f->part, list, sizeof list);
        snprintf(why, sizeof why, "%s belongs to part %s; part %s may include only:%s", hpath,
                 t.part->name, f->part->name, list);
        fail(r, f, line, name, quoted, "part-table", why);
        return;
    }
    r->used[index_of(f->part)][index_of(t.part)] = true;
}

/* The table itself: known names, and a DAG. */
int lay_check_table(void)
{
    int findings = 0;
    lay_graph g;
    if (lay_nparts > MAX_PARTS) {
        printf("FAIL [table] more than %d parts; raise MAX_PARTS\n", MAX_PARTS);
        return 1;
    }
    lay_graph_init(&g, lay_nparts);
    for (size_t i = 0; lay_allowed[i]; i++) {
        const char *s = lay_allowed[i];
        size_t n = strcspn(s, ":");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n, s);
        if (!lay_part_named(name)) {
            printf("FAIL [table] lay_allowed names unknown part \"%s\"\n", name);
            findings++;
        }
        for (s += n + (s[n] == ':'); *s;) {
            while (*s == ' ' || *s == '\t')
                s++;
            size_t w = strcspn(s, " \t");
            snprintf(name, sizeof name, "%.*s", (int)w, s);
            if (w && !lay_part_named(name)) {
                printf("FAIL [table] lay_allowed line \"%s\" names unknown part \"%s\"\n",
                       lay_allowed[i], name);
                findings++;
            }
            s += w;
        }
    }
    for (size_t a = 0; a < lay_nparts; a++)
        for (size_t b = 0; b < lay_nparts; b++)
            if (a != b && lay_edge_allowed(&lay_parts[a], &lay_parts[b]))
                lay_graph_edge(&g, a, b, 0);
    const char *names[MAX_PARTS];
    for (size_t i = 0; i < lay_nparts; i++)
        names[i] = lay_parts[i].name;
    findings += lay_graph_cycles(&g, names, "table", "lay_allowed is not a DAG");
    lay_graph_free(&g);
    return findings;
}

/* Edges the table allows that no include uses: a hint, never a failure.
 * Parts with no files yet (a folder being added) stay quiet. */
static void note_unused(const include_run *r)
{
    for (size_t a = 0; a < lay_nparts; a++)
        for (size_t b = 0; b < lay_nparts; b++)
            if (a != b && r->present[a] && lay_edge_allowed(&lay_parts[a], &lay_parts[b]) &&
                !r->used[a][b])
                printf("note: the table allows %s -> %s, but no include uses it; "
                       "remove it from lay_allowed if it is gone for good\n",
                       lay_parts[a].name, lay_parts[b].name);
}

int lay_check_includes(const lay_tree *t)
{
    static include_run r;
    memset(&r, 0, sizeof r);
    r.tree = t;
    for (size_t i = 0; i < t->n; i++) {
        const lay_file *f = &t->files[i];
        if (!f->part) {
            printf("FAIL [no-part] %s: no part in tests/layering/parts.c claims this folder\n",
                   f->path);
            r.findings++;
            continue;
        }
        r.present[index_of(f->part)] = true;
        lay_each_include(f, check_one, &r);
    }
    note_unused(&r);
    return r.findings;
}
