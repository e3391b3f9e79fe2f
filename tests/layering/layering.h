/* SPDX-License-Identifier: Apache-2.0 */
/* The house-keeping checks: include rules, no circles, short functions.
 *
 * One small program reads the product sources (never tests/) and answers
 * one question per subcommand, so each is its own ctest test with its own
 * verdict. It is C rather than a script because a fresh CI machine is only
 * promised a compiler, and because the checks resolve includes the way the
 * build's include directories do, which wants real data structures. */
#ifndef LAYERING_H
#define LAYERING_H

#include <stdbool.h>
#include <stddef.h>

/* A part: a folder with one job. `dir` holds its sources and private
 * headers; `pub` is the folder of its public headers (PUBLIC include
 * directory), NULL when the part publishes none. A part whose `pub` equals
 * its `dir` exports the whole folder (core/ does). `dir` NULL means the
 * build generates the part's headers (proto/). */
typedef struct {
    const char *name;
    const char *dir;
    const char *pub;
} lay_part;

/* The tables in parts.c: the data the rules are made of. */
extern const lay_part lay_parts[];
extern const size_t lay_nparts;
extern const char *const lay_allowed[];
extern const char *const lay_generated[][2];
extern const char *const lay_roots[];
extern const char *const lay_low_parts[];

/* One product file, read whole. */
typedef struct {
    char *path;           /* relative to the source root, '/' separated */
    char *text;           /* NUL-terminated contents */
    const lay_part *part; /* NULL when no part claims the folder */
} lay_file;

typedef struct {
    lay_file *files; /* sorted by path */
    size_t n;
} lay_tree;

/* Reads every .c, .h and .h.in file under the product roots of `src`.
 * Returns 0, or -1 after printing why; lay_tree_free releases it. */
int lay_tree_load(lay_tree *t, const char *src);
void lay_tree_free(lay_tree *t);

/* How an include was resolved. */
typedef enum {
    LAY_FOUND,     /* through the include path a build would use */
    LAY_STRAY,     /* only by searching the whole tree: reachable from the
                      includer only through an include path it should not have */
    LAY_GENERATED, /* a header the build generates (lay_generated) */
    LAY_MISSING,   /* names nothing of ours */
} lay_how;

typedef struct {
    lay_how how;
    const lay_file *file; /* LAY_FOUND, LAY_STRAY */
    const lay_part *part; /* owner; NULL when LAY_MISSING */
} lay_target;

/* Resolves `#include "name"` (or <name> when !quoted) written in `from`. */
lay_target lay_resolve(const lay_tree *t, const lay_file *from, const char *name, bool quoted);

/* Calls fn for each #include line of f. `name` is only valid during fn. */
typedef void lay_include_fn(void *ctx, const lay_file *f, int line, const char *name, bool quoted);
void lay_each_include(const lay_file *f, lay_include_fn *fn, void *ctx);

/* True when path lies inside folder dir ("a/b/c.h" is inside "a"). */
bool lay_inside(const char *path, const char *dir);
/* Part lookup by name; NULL if the tables do not know it. */
const lay_part *lay_part_named(const char *name);
/* True when the table lets part `from` include headers of part `to`. */
bool lay_edge_allowed(const lay_part *from, const lay_part *to);

/* A directed graph over nodes 0..n-1; `line` is where an edge comes from
 * in its source file (0 when that means nothing). */
typedef struct {
    size_t from, to;
    int line;
} lay_edge;

typedef struct {
    size_t n;
    lay_edge *edges;
    size_t m, cap;
} lay_graph;

void lay_graph_init(lay_graph *g, size_t n);
int lay_graph_edge(lay_graph *g, size_t from, size_t to, int line);
void lay_graph_free(lay_graph *g);
/* Prints one "FAIL [rule] what: a -> b -> a" line per circle a depth-first
 * walk closes, naming nodes by names[]; returns how many it printed. */
int lay_graph_cycles(const lay_graph *g, const char *const *names, const char *rule,
                     const char *what);
/* Fills comp[v] (g->n entries, caller's) with the strongly connected
 * component of node v and returns how many there are; 0 when out of
 * memory. Two nodes share a component when each reaches the other. */
size_t lay_graph_components(const lay_graph *g, size_t *comp);

/* The checks; each prints its findings and returns the number of them. */
int lay_check_table(void);
int lay_check_includes(const lay_tree *t);
int lay_check_file_cycles(const lay_tree *t);
int lay_check_target_cycles(const char *edges_path);
int lay_check_length(const lay_tree *t, int limit);
int lay_check_call_cycles(const lay_tree *t);

#endif
