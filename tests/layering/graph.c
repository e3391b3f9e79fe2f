/* SPDX-License-Identifier: Apache-2.0 */
/* Directed graphs and their cycles, for files, targets and the table. */
#include <stdio.h>
#include <stdlib.h>

#include "layering.h"

void lay_graph_init(lay_graph *g, size_t n)
{
    g->n = n;
    g->edges = NULL;
    g->m = 0;
    g->cap = 0;
}

void lay_graph_free(lay_graph *g)
{
    free(g->edges);
    g->edges = NULL;
    g->m = g->cap = 0;
}

int lay_graph_edge(lay_graph *g, size_t from, size_t to, int line)
{
    if (g->m == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 64;
        lay_edge *grown = realloc(g->edges, cap * sizeof *grown);
        if (!grown)
            return -1;
        g->edges = grown;
        g->cap = cap;
    }
    g->edges[g->m++] = (lay_edge){from, to, line};
    return 0;
}

enum { WHITE, GREY, BLACK };

typedef struct {
    const lay_graph *g;
    const char *const *names;
    const char *rule, *what;
    unsigned char *colour;
    size_t *path; /* the edges (indices into g->edges) from the root */
    size_t depth;
    int found;
} walk;

/* Prints the circle closed by edge e: from where e->to sits on the path. */
static void report(walk *w, const lay_edge *e)
{
    size_t start = w->depth;
    if (e->to != e->from) {
        while (start > 0 && w->g->edges[w->path[start - 1]].from != e->to)
            start--;
        if (start > 0)
            start--;
    }
    printf("FAIL [%s] %s: ", w->rule, w->what);
    for (size_t i = start; i < w->depth; i++) {
        const lay_edge *p = &w->g->edges[w->path[i]];
        printf("%s", w->names[p->from]);
        if (p->line > 0)
            printf(":%d", p->line);
        printf(" -> ");
    }
    printf("%s", w->names[e->from]);
    if (e->line > 0)
        printf(":%d", e->line);
    printf(" -> %s\n", w->names[e->to]);
    w->found++;
}

static void visit(walk *w, size_t v)
{
    w->colour[v] = GREY;
    for (size_t i = 0; i < w->g->m; i++) {
        const lay_edge *e = &w->g->edges[i];
        if (e->from != v)
            continue;
        if (w->colour[e->to] == GREY) {
            report(w, e);
        } else if (w->colour[e->to] == WHITE) {
            w->path[w->depth++] = i;
            visit(w, e->to);
            w->depth--;
        }
    }
    w->colour[v] = BLACK;
}

int lay_graph_cycles(const lay_graph *g, const char *const *names, const char *rule,
                     const char *what)
{
    walk w = {g, names, rule, what, calloc(g->n + 1, 1), calloc(g->n + 1, sizeof(size_t)), 0, 0};
    if (!w.colour || !w.path) {
        free(w.colour);
        free(w.path);
        printf("FAIL [%s] out of memory\n", rule);
        return 1;
    }
    for (size_t v = 0; v < g->n; v++)
        if (w.colour[v] == WHITE)
            visit(&w, v);
    free(w.colour);
    free(w.path);
    return w.found;
}

/* Tarjan's strongly connected components; index 0 means not yet visited. */
typedef struct {
    const lay_graph *g;
    size_t *index, *low, *stack, *comp;
    bool *on_stack;
    size_t next, depth, ncomp;
} tarjan;

static void strong(tarjan *t, size_t v)
{
    t->index[v] = t->low[v] = ++t->next;
    t->stack[t->depth++] = v;
    t->on_stack[v] = true;
    for (size_t i = 0; i < t->g->m; i++) {
        size_t w = t->g->edges[i].to;
        if (t->g->edges[i].from != v)
            continue;
        if (t->index[w] == 0) {
            strong(t, w);
            if (t->low[w] < t->low[v])
                t->low[v] = t->low[w];
        } else if (t->on_stack[w] && t->index[w] < t->low[v]) {
            t->low[v] = t->index[w];
        }
    }
    if (t->low[v] != t->index[v])
        return;
    size_t w;
    do {
        w = t->stack[--t->depth];
        t->on_stack[w] = false;
        t->comp[w] = t->ncomp;
    } while (w != v);
    t->ncomp++;
}

size_t lay_graph_components(const lay_graph *g, size_t *comp)
{
    size_t n = g->n + 1;
    size_t *block = calloc(3 * n, sizeof *block);
    tarjan t = {g, block, block + n, block + 2 * n, comp, calloc(n, sizeof(bool)), 0, 0, 0};
    if (!block || !t.on_stack) {
        free(block);
        free(t.on_stack);
        return 0;
    }
    for (size_t v = 0; v < g->n; v++)
        if (t.index[v] == 0)
            strong(&t, v);
    free(block);
    free(t.on_stack);
    return t.ncomp;
}
