/* SPDX-License-Identifier: Apache-2.0 */
/* Rule 2: no circles, between files and between CMake targets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layering.h"

typedef struct {
    const lay_tree *tree;
    lay_graph *g;
} file_run;

static void add_edge(void *ctx, const lay_file *f, int line, const char *name, bool quoted)
{
    file_run *r = ctx;
    if (!quoted && strncmp(name, "infinity_bus/", 13) != 0)
        return;
    lay_target t = lay_resolve(r->tree, f, name, quoted);
    if (t.file)
        lay_graph_edge(r->g, (size_t)(f - r->tree->files), (size_t)(t.file - r->tree->files), line);
}

int lay_check_file_cycles(const lay_tree *t)
{
    lay_graph g;
    file_run r = {t, &g};
    const char **names = malloc(t->n * sizeof *names);
    if (!names)
        return 1;
    lay_graph_init(&g, t->n);
    for (size_t i = 0; i < t->n; i++) {
        names[i] = t->files[i].path;
        lay_each_include(&t->files[i], add_edge, &r);
    }
    int found = lay_graph_cycles(&g, names, "file-cycle", "files include each other in a circle");
    printf("file-cycles: %zu files, %zu quoted includes of our own headers\n", t->n, g.m);
    lay_graph_free(&g);
    free(names);
    return found;
}

/* Target names seen in the edge file; a small linear table is enough. */
typedef struct {
    char **names;
    size_t n, cap;
} name_set;

static size_t intern(name_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return i;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        char **grown = realloc(s->names, s->cap * sizeof *grown);
        if (!grown)
            abort();
        s->names = grown;
    }
    s->names[s->n] = strdup(name);
    if (!s->names[s->n])
        abort();
    return s->n++;
}

/* The edge file holds one "target dependency" pair per line, written by
 * targets.cmake at configure time from the targets' link libraries. */
int lay_check_target_cycles(const char *edges_path)
{
    FILE *fp = fopen(edges_path, "r");
    char from[256], to[256];
    name_set s = {0};
    lay_graph g;
    if (!fp) {
        printf("FAIL [target-cycle] cannot read %s; reconfigure the build\n", edges_path);
        return 1;
    }
    lay_graph_init(&g, 0);
    while (fscanf(fp, "%255s %255s", from, to) == 2) {
        size_t a = intern(&s, from), b = intern(&s, to);
        lay_graph_edge(&g, a, b, 0);
    }
    fclose(fp);
    g.n = s.n;
    int found = lay_graph_cycles(&g, (const char *const *)s.names, "target-cycle",
                                 "CMake targets link each other in a circle");
    printf("target-cycles: %zu targets, %zu link edges between them\n", s.n, g.m);
    if (g.m == 0) {
        printf("FAIL [target-cycle] %s lists no edges; the check saw nothing\n", edges_path);
        found++;
    }
    for (size_t i = 0; i < s.n; i++)
        free(s.names[i]);
    free(s.names);
    lay_graph_free(&g);
    return found;
}
