/* SPDX-License-Identifier: Apache-2.0 */
/* store_layouts: candidate layouts of the SQLite marker file side by side
 * (issue 30), each at several sizes, as Markdown tables with ratios against
 * a baseline measured in the same run. SQLite alone: no recorder code.
 *
 * For every size and layout: a file preloaded with that many markers (made
 * once, see store_layouts/preload.c) is copied; start-up is timed cold (the
 * copy evicted from the OS page cache) and warm; then the same stream of
 * ids (--ids new ids plus 10 % duplicates) runs through the layout's acquire
 * and mark transactions, as `ibus run` drives its recorder, every answer
 * checked; then the file's bytes per marker, the markers it holds (checked),
 * an outside tool's SELECT through processed_log (its plan checked), and
 * the prune of the oldest day of a week's markers. The bare row (one INSERT
 * OR IGNORE per id, no claims) is the baseline of each size; each layout is
 * also given against its own rate on the empty file. With --procs N > 1,
 * the two layouts that used the least CPU per new id at the largest size
 * (or --procs-layouts) also run as N processes on one file, N - 1 of them
 * joining late (procs.c).
 *
 * Each layout's file under store_layouts/ opens with how it works. Progress
 * goes to stderr, tables to stdout; exit status 0 means every figure was
 * measured and every check passed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_layouts/store_layouts.h"

#define RUN_SEED 0x5eedULL
#define USAGE                                                                                      \
    "usage: store_layouts [--quick] [--sizes N,N,...] [--ids N] [--batch N]\n"                     \
    "         [--synchronous off|normal|full|extra] [--repeat N] [--dir DIR] [--keep]\n"           \
    "         [--layouts NAME,...] [--procs N] [--procs-layouts NAME,...] [--procs-ids N]\n"       \
    "         [--join-ms MS] [--prune-rows N] [--lookups N] [--scan-lookups N] [--seed N]\n"       \
    "         [--preload-order sorted|random]\n"                                                   \
    "layouts: bare (the baseline, always run), plain, compact, compact-blob, journal, "            \
    "generations\n"

/* Whether `name` is one of the comma-separated `list` (NULL: all are). */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p != NULL; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return true;
    }
    return list == NULL;
}

static void check_names(const char *list, const char *option)
{
    char name[64];
    for (const char *p = list; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ",");
        snprintf(name, sizeof(name), "%.*s", (int)len, p);
        if (ib__sl_layout_named(name) == NULL)
            ib__sl_die("%s: no layout named \"%s\"\n%s", option, name, USAGE);
        p += len + (p[len] == ',');
    }
}

static void defaults(ib__sl_opts *o)
{
    static const size_t sizes[] = {0, 2000000, 10000000};
    memset(o, 0, sizeof(*o));
    memcpy(o->sizes, sizes, sizeof(sizes));
    o->nsizes = 3;
    o->ids = 100000;
    o->batch = 64;
    o->synchronous = 2;
    o->procs = 3;
    o->join_ms = 1500;
    o->prune_rows = 2000;
    o->lookups = 2000;
    o->scan_lookups = 3;
    o->seed = 42;
    o->repeat = 3;
    o->ready_fd = -1;
}

/* --quick: tiny sizes, a few seconds in all (the ctest smoke run). */
static void quick(ib__sl_opts *o)
{
    static const size_t sizes[] = {0, 4000, 20000};
    o->quick = true;
    memcpy(o->sizes, sizes, sizeof(sizes));
    o->nsizes = 3;
    o->ids = 2000;
    o->join_ms = 100;
    o->prune_rows = 500;
    o->lookups = 200;
    o->scan_lookups = 2;
    o->repeat = 1;
}

static size_t count_arg(const char *v, const char *option)
{
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-')
        ib__sl_die("%s: \"%s\" is not a count\n%s", option, v, USAGE);
    return (size_t)n;
}

static void sizes_arg(ib__sl_opts *o, const char *v)
{
    char one[32];
    o->nsizes = 0;
    for (const char *p = v; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (o->nsizes == IB__SL_MAX_SIZES)
            ib__sl_die("--sizes: at most %d sizes", IB__SL_MAX_SIZES);
        snprintf(one, sizeof(one), "%.*s", (int)len, p);
        o->sizes[o->nsizes++] = count_arg(one, "--sizes");
        p += len + (p[len] == ',');
    }
    if (o->nsizes == 0)
        ib__sl_die("--sizes: no size given\n%s", USAGE);
}

static int sync_arg(const char *v)
{
    static const char *const names[] = {"off", "normal", "full", "extra"};
    for (int i = 0; i < 4; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    ib__sl_die("--synchronous: \"%s\" is not off, normal, full or extra", v);
}

/* One option that takes a value; false when `name` is none of them. */
static bool value_option(ib__sl_opts *o, const char *name, const char *v)
{
    if (strcmp(name, "--sizes") == 0)
        sizes_arg(o, v);
    else if (strcmp(name, "--ids") == 0)
        o->ids = count_arg(v, name);
    else if (strcmp(name, "--batch") == 0)
        o->batch = count_arg(v, name);
    else if (strcmp(name, "--synchronous") == 0)
        o->synchronous = sync_arg(v);
    else if (strcmp(name, "--dir") == 0)
        o->dir = v;
    else if (strcmp(name, "--layouts") == 0)
        o->layouts = v;
    else if (strcmp(name, "--procs") == 0)
        o->procs = (int)count_arg(v, name);
    else if (strcmp(name, "--procs-ids") == 0)
        o->procs_ids = count_arg(v, name);
    else if (strcmp(name, "--procs-layouts") == 0)
        o->procs_layouts = v;
    else if (strcmp(name, "--join-ms") == 0)
        o->join_ms = (int)count_arg(v, name);
    else if (strcmp(name, "--prune-rows") == 0)
        o->prune_rows = count_arg(v, name);
    else if (strcmp(name, "--lookups") == 0)
        o->lookups = count_arg(v, name);
    else if (strcmp(name, "--scan-lookups") == 0)
        o->scan_lookups = count_arg(v, name);
    else if (strcmp(name, "--seed") == 0)
        o->seed = count_arg(v, name);
    else if (strcmp(name, "--repeat") == 0)
        o->repeat = (int)count_arg(v, name);
    else
        return false;
    return true;
}

/* The options of --child, which the driver passes (procs.c). */
static bool child_option(ib__sl_opts *o, const char *name, const char *v)
{
    if (strcmp(name, "--child") == 0)
        o->child_layout = v;
    else if (strcmp(name, "--file") == 0)
        o->child_file = v;
    else if (strcmp(name, "--report") == 0)
        o->child_report = v;
    else if (strcmp(name, "--ready-fd") == 0)
        o->ready_fd = atoi(v);
    else if (strcmp(name, "--preload-order") == 0 && strcmp(v, "sorted") == 0)
        o->random_order = false;
    else if (strcmp(name, "--preload-order") == 0 && strcmp(v, "random") == 0)
        o->random_order = true;
    else
        return false;
    return true;
}

static void parse_opts(ib__sl_opts *o, int argc, char **argv)
{
    defaults(o);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            quick(o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            continue;
        if (strcmp(argv[i], "--keep") == 0) {
            o->keep = true;
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (i + 1 >= argc ||
            (!value_option(o, argv[i], argv[i + 1]) && !child_option(o, argv[i], argv[i + 1])))
            ib__sl_die("unknown option or missing value: %s\n%s", argv[i], USAGE);
        i++;
    }
    if (o->batch == 0 || o->batch > 100000)
        ib__sl_die("--batch: 1 to 100000 ids per transaction");
    if (o->ids < 16 * o->batch)
        ib__sl_die("--ids: at least 16 batches (%zu ids)", 16 * o->batch);
    if (o->repeat < 1 || o->repeat > IB__SL_MAX_REPEAT)
        ib__sl_die("--repeat: 1 to %d", IB__SL_MAX_REPEAT);
    check_names(o->layouts, "--layouts");
    check_names(o->procs_layouts, "--procs-layouts");
    if (o->procs_ids == 0)
        o->procs_ids = 3 * o->ids;
}

typedef struct bench {
    ib__sl_opts o;
    char dir[4096];
    bool made_dir;
    /* preloaded files this run made (not kept from an earlier one) */
    char made[IB__SL_MAX_SIZES * IB__SL_MAX_LAYOUTS][64];
    size_t nmade;
    ib__sl_table t;
    ib__sl_stream st;
} bench;

static void loadavg(char *out, size_t cap)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (f == NULL || fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3)
        snprintf(out, cap, "unknown");
    else
        snprintf(out, cap, "%.2f, %.2f, %.2f", a, b, c);
    if (f != NULL)
        fclose(f);
}

static void make_dir(bench *b)
{
    if (b->o.dir != NULL) {
        if (mkdir(b->o.dir, 0700) != 0 && errno != EEXIST)
            ib__sl_die("cannot create %s: %s", b->o.dir, strerror(errno));
        snprintf(b->dir, sizeof(b->dir), "%s", b->o.dir);
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(b->dir, sizeof(b->dir), "%s/store_layouts.XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(b->dir) == NULL)
        ib__sl_die("cannot create a directory in %s: %s", tmp != NULL ? tmp : "/tmp",
                   strerror(errno));
    b->made_dir = true;
}

/* Without --keep, no file of an earlier run is used, and none is left. */
static void remove_preloads(const bench *b)
{
    char path[4200];
    for (size_t si = 0; si < b->o.nsizes; si++)
        for (size_t l = 0; l < ib__sl_nlayouts; l++) {
            snprintf(path, sizeof(path), "%s/%s-%zu.db", b->dir, ib__sl_layouts[l]->name,
                     b->o.sizes[si]);
            ib__sl_remove_db(path);
        }
}

static const ib__sl_layout *preload_layout(const ib__sl_layout *L)
{
    return L->preload_as != NULL ? ib__sl_layout_named(L->preload_as) : L;
}

static void progress(const ib__sl_layout *L, size_t n, const ib__sl_result *r)
{
    fprintf(stderr,
            "store_layouts: %-12s %9zu markers: %7.0f new ids/s, start-up %.0f/%.0f ms, "
            "%.1f B/marker, prune max %.1f ms\n",
            L->name, n, r->seconds > 0 ? (double)r->fresh / r->seconds : 0, r->start_cold_ms,
            r->start_warm_ms, r->markers > 0 ? (double)r->bytes / (double)r->markers : 0,
            r->prune.max_ms);
}

static double rate_of(const ib__sl_result *r)
{
    return r->ran && r->seconds > 0 ? (double)r->fresh / r->seconds : 0;
}

/* Whether this run made the preloaded file at `path` (now, when `made`,
 * or earlier). */
static bool made_here_note(bench *b, const char *path, bool made)
{
    const char *name = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
    for (size_t i = 0; i < b->nmade; i++)
        if (strcmp(b->made[i], name) == 0)
            return true;
    if (made && b->nmade < sizeof(b->made) / sizeof(b->made[0]))
        snprintf(b->made[b->nmade++], sizeof(b->made[0]), "%.63s", name);
    return made;
}

/* One repetition of one layout at one size, on a fresh copy of its file;
 * the prune and the lookup only in the first repetition. */
static void measure_once(bench *b, ib__sl_result *r, const ib__sl_layout *L, size_t n,
                         ib__sl_preload *set, int rep)
{
    ib__sl_preloaded pf;
    char work[4200];
    snprintf(work, sizeof(work), "%s/work-%d.db", b->dir, (int)getpid());
    ib__sl_preload_ensure(&pf, b->dir, preload_layout(L), n, &b->o, set);
    r->preload_s = pf.seconds;
    r->preload_reused = !made_here_note(b, pf.path, !pf.reused);
    ib__sl_copy_file(pf.path, work);
    ib__sl_measure(r, L, work, &b->o, &b->st, n, n > 0 ? pf.base_ms + IB__SL_DAY_MS : 0, rep == 0);
    ib__sl_remove_db(work);
    progress(L, n, r);
}

/* The repetition of median rate, with the first one's prune and lookup. */
static ib__sl_result median(const ib__sl_result *reps, int n)
{
    int order[IB__SL_MAX_REPEAT];
    for (int i = 0; i < n; i++) {
        int j = i;
        for (; j > 0 && rate_of(&reps[order[j - 1]]) > rate_of(&reps[i]); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    ib__sl_result r = reps[order[n / 2]];
    r.prune = reps[0].prune;
    r.pruned = reps[0].pruned;
    r.lookup_plan = reps[0].lookup_plan;
    r.lookup_us = reps[0].lookup_us;
    r.lookups = reps[0].lookups;
    return r;
}

/* Every layout, --repeat times, interleaved so that a burst of other work
 * on the machine hits one sample of several layouts, not one layout. */
static void measure_size(bench *b, size_t si)
{
    static ib__sl_result reps[IB__SL_MAX_LAYOUTS][IB__SL_MAX_REPEAT];
    ib__sl_preload set = {0};
    memset(reps, 0, sizeof(reps));
    for (int rep = 0; rep < b->o.repeat; rep++)
        for (size_t l = 0; l < b->t.nlayouts; l++)
            measure_once(b, &reps[l][rep], b->t.layouts[l], b->o.sizes[si], &set, rep);
    for (size_t l = 0; l < b->t.nlayouts; l++)
        b->t.res[si][l] = median(reps[l], b->o.repeat);
    ib__sl_preload_free(&set);
}

/* The lower, the better: CPU per new id. On a shared machine the rate
 * follows the neighbours' use of the disk; the CPU hardly does. */
static double cost_of(const ib__sl_result *r)
{
    return r->ran && r->fresh > 0 ? r->cpu_us : 1e30;
}

/* --procs-layouts, or the two candidates that used the least CPU per new
 * id at the largest size. */
static void choose_procs(const bench *b, bool chosen[IB__SL_MAX_LAYOUTS])
{
    size_t big = 0;
    for (size_t si = 1; si < b->o.nsizes; si++)
        big = b->o.sizes[si] > b->o.sizes[big] ? si : big;
    const ib__sl_result *res = b->t.res[big];
    for (size_t l = 1; l < b->t.nlayouts && b->o.procs_layouts != NULL; l++)
        chosen[l] = res[l].ran && listed(b->o.procs_layouts, b->t.layouts[l]->name);
    for (int k = 0; k < 2 && b->o.procs_layouts == NULL; k++) {
        size_t best = 0;
        for (size_t l = 1; l < b->t.nlayouts; l++)
            if (!chosen[l] && res[l].ran && (best == 0 || cost_of(&res[l]) < cost_of(&res[best])))
                best = l;
        chosen[best] = best != 0;
    }
}

static void run_procs(bench *b)
{
    bool chosen[IB__SL_MAX_LAYOUTS] = {false};
    char work[4200];
    ib__sl_preloaded pf;
    snprintf(work, sizeof(work), "%s/work-%d.db", b->dir, (int)getpid());
    choose_procs(b, chosen);
    for (size_t si = 0; si < b->o.nsizes; si++) {
        ib__sl_preload set = {0};
        for (size_t l = 1; l < b->t.nlayouts; l++) {
            const ib__sl_layout *L = b->t.layouts[l];
            if (!chosen[l])
                continue;
            ib__sl_preload_ensure(&pf, b->dir, L, b->o.sizes[si], &b->o, &set);
            ib__sl_copy_file(pf.path, work);
            ib__sl_procs_run(&b->t.procs[si][l], L, work, &b->o, b->o.sizes[si]);
            ib__sl_remove_db(work);
            fprintf(stderr, "store_layouts: %-12s %9zu markers: %d processes, %.0f new ids/s\n",
                    L->name, b->o.sizes[si], b->o.procs, b->t.procs[si][l].total_rate);
        }
        ib__sl_preload_free(&set);
    }
}

int main(int argc, char **argv)
{
    bench *b = calloc(1, sizeof(*b));
    if (b == NULL)
        ib__sl_die("out of memory");
    parse_opts(&b->o, argc, argv);
    if (b->o.child_layout != NULL) {
        int rc = ib__sl_child_main(&b->o);
        free(b);
        return rc;
    }
    b->t.o = &b->o;
    loadavg(b->t.load_start, sizeof(b->t.load_start));
    for (size_t l = 0; l < ib__sl_nlayouts; l++)
        if (l == 0 || listed(b->o.layouts, ib__sl_layouts[l]->name))
            b->t.layouts[b->t.nlayouts++] = ib__sl_layouts[l];
    make_dir(b);
    if (!b->o.keep)
        remove_preloads(b);
    fprintf(stderr, "store_layouts: files in %s\n", b->dir);
    ib__sl_stream_make(&b->st, b->o.ids, b->o.batch, b->o.seed ^ RUN_SEED);
    for (size_t si = 0; si < b->o.nsizes; si++)
        measure_size(b, si);
    if (b->o.procs > 1)
        run_procs(b);
    loadavg(b->t.load_end, sizeof(b->t.load_end));
    ib__sl_report(stdout, &b->t);
    if (!b->o.keep)
        remove_preloads(b);
    if (b->made_dir && !b->o.keep)
        rmdir(b->dir);
    ib__sl_stream_free(&b->st);
    free(b);
    return 0;
}
