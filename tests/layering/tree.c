/* SPDX-License-Identifier: Apache-2.0 */
/* Reading the product tree and resolving includes the way the build does. */
#include <ctype.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layering.h"

/* nftw takes no context pointer, so the walk fills these. */
static lay_tree *walk_tree;
static size_t walk_skip; /* length of "<src>/" */
static size_t walk_cap;

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

bool lay_inside(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static char *read_all(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!fp)
        return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else if (buf) {
            buf[n] = '\0';
        }
    }
    fclose(fp);
    return buf;
}

static const lay_part *part_of(const char *path)
{
    const lay_part *best = NULL;
    for (size_t i = 0; i < lay_nparts; i++) {
        const lay_part *p = &lay_parts[i];
        if (p->dir && lay_inside(path, p->dir) && (!best || strlen(p->dir) > strlen(best->dir)))
            best = p;
    }
    return best;
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (type != FTW_F ||
        !(ends_with(path, ".c") || ends_with(path, ".h") || ends_with(path, ".h.in")))
        return 0;
    if (walk_tree->n == walk_cap) {
        walk_cap = walk_cap ? walk_cap * 2 : 256;
        lay_file *grown = realloc(walk_tree->files, walk_cap * sizeof *grown);
        if (!grown)
            return -1;
        walk_tree->files = grown;
    }
    lay_file *f = &walk_tree->files[walk_tree->n];
    f->path = strdup(path + walk_skip);
    f->text = read_all(path);
    if (!f->path || !f->text) {
        fprintf(stderr, "layering: cannot read %s\n", path);
        free(f->path);
        free(f->text);
        return -1;
    }
    f->part = part_of(f->path);
    walk_tree->n++;
    return 0;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const lay_file *)a)->path, ((const lay_file *)b)->path);
}

int lay_tree_load(lay_tree *t, const char *src)
{
    char root[4096];
    struct stat sb;
    t->files = NULL;
    t->n = 0;
    walk_tree = t;
    walk_cap = 0;
    walk_skip = strlen(src) + 1;
    for (size_t i = 0; lay_roots[i]; i++) {
        snprintf(root, sizeof root, "%s/%s", src, lay_roots[i]);
        if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (nftw(root, visit, 16, FTW_PHYS) != 0) {
            lay_tree_free(t);
            return -1;
        }
    }
    if (t->n == 0) {
        fprintf(stderr, "layering: no product sources under %s\n", src);
        return -1;
    }
    qsort(t->files, t->n, sizeof *t->files, by_path);
    return 0;
}

void lay_tree_free(lay_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->files[i].path);
        free(t->files[i].text);
    }
    free(t->files);
    t->files = NULL;
    t->n = 0;
}

/* Parses one line as an #include; returns the name's length, 0 if none. */
static size_t include_on(const char *s, const char **name, bool *quoted)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s++ != '#')
        return 0;
    while (*s == ' ' || *s == '\t')
        s++;
    if (strncmp(s, "include", 7) != 0)
        return 0;
    s += 7;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s != '"' && *s != '<')
        return 0;
    *quoted = *s == '"';
    const char *end = strchr(s + 1, *quoted ? '"' : '>');
    const char *eol = strchr(s, '\n');
    if (!end || (eol && end > eol))
        return 0;
    *name = s + 1;
    return (size_t)(end - *name);
}

void lay_each_include(const lay_file *f, lay_include_fn *fn, void *ctx)
{
    char name[512];
    int line = 1;
    for (const char *s = f->text; *s; line++) {
        const char *n;
        bool quoted;
        size_t len = include_on(s, &n, &quoted);
        if (len > 0 && len < sizeof name) {
            memcpy(name, n, len);
            name[len] = '\0';
            fn(ctx, f, line, name, quoted);
        }
        const char *eol = strchr(s, '\n');
        if (!eol)
            break;
        s = eol + 1;
    }
}

static const lay_file *find(const lay_tree *t, const char *path)
{
    lay_file key = {.path = (char *)path};
    return bsearch(&key, t->files, t->n, sizeof *t->files, by_path);
}

/* dir/name, or the configure_file template dir/name.in. */
static const lay_file *find_in(const lay_tree *t, const char *dir, size_t dirlen, const char *name)
{
    char path[1024];
    const lay_file *f;
    snprintf(path, sizeof path, "%.*s/%s", (int)dirlen, dir, name);
    if ((f = find(t, path)))
        return f;
    strncat(path, ".in", sizeof path - strlen(path) - 1);
    return find(t, path);
}

/* The include path of a file: its own folder, its part's public folder,
 * then every part's public folder in table order. */
static const lay_file *search(const lay_tree *t, const lay_file *from, const char *name,
                              bool quoted)
{
    const lay_file *f;
    const char *slash = strrchr(from->path, '/');
    if (quoted && slash && (f = find_in(t, from->path, (size_t)(slash - from->path), name)))
        return f;
    if (from->part && from->part->pub &&
        (f = find_in(t, from->part->pub, strlen(from->part->pub), name)))
        return f;
    for (size_t i = 0; i < lay_nparts; i++) {
        const char *pub = lay_parts[i].pub;
        if (pub && (f = find_in(t, pub, strlen(pub), name)))
            return f;
    }
    return NULL;
}

/* Any file of the tree whose path ends in /name (or /name.in). */
static const lay_file *stray(const lay_tree *t, const char *name)
{
    char tail[1024];
    snprintf(tail, sizeof tail, "/%s", name);
    for (size_t i = 0; i < t->n; i++)
        if (ends_with(t->files[i].path, tail))
            return &t->files[i];
    strncat(tail, ".in", sizeof tail - strlen(tail) - 1);
    for (size_t i = 0; i < t->n; i++)
        if (ends_with(t->files[i].path, tail))
            return &t->files[i];
    return NULL;
}

lay_target lay_resolve(const lay_tree *t, const lay_file *from, const char *name, bool quoted)
{
    lay_target r = {LAY_MISSING, NULL, NULL};
    if ((r.file = search(t, from, name, quoted))) {
        r.how = LAY_FOUND;
        r.part = r.file->part;
        return r;
    }
    for (size_t i = 0; lay_generated[i][0]; i++) {
        if (strcmp(lay_generated[i][0], name) == 0) {
            r.how = LAY_GENERATED;
            r.part = lay_part_named(lay_generated[i][1]);
            return r;
        }
    }
    if ((r.file = stray(t, name))) {
        r.how = LAY_STRAY;
        r.part = r.file->part;
    }
    return r;
}

const lay_part *lay_part_named(const char *name)
{
    for (size_t i = 0; i < lay_nparts; i++)
        if (strcmp(lay_parts[i].name, name) == 0)
            return &lay_parts[i];
    return NULL;
}

/* Finds the lay_allowed line of part `name`; NULL if none. */
static const char *allowed_line(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; lay_allowed[i]; i++)
        if (strncmp(lay_allowed[i], name, n) == 0 && lay_allowed[i][n] == ':')
            return lay_allowed[i] + n + 1;
    return NULL;
}

bool lay_edge_allowed(const lay_part *from, const lay_part *to)
{
    const char *s = allowed_line(from->name);
    size_t n = strlen(to->name);
    while (s && *s) {
        while (isspace((unsigned char)*s))
            s++;
        size_t w = strcspn(s, " \t");
        if (w == n && strncmp(s, to->name, n) == 0)
            return true;
        s += w;
    }
    return false;
}
