/* SPDX-License-Identifier: Apache-2.0 */
/* The Markdown tables of a run (store_layouts.h). Ratios are against the
 * bare row of the same size, and against the layout's own rate on the
 * empty file (the first size, when it is 0), all from this one run. */
#include <stdio.h>

#include "store_layouts.h"

static double rate(const ib__sl_result *r)
{
    return r->seconds > 0 ? (double)r->fresh / r->seconds : 0;
}

static void print_ratio(FILE *f, double num, double den)
{
    if (num > 0 && den > 0)
        fprintf(f, " %.2f |", num / den);
    else
        fprintf(f, " - |");
}

static void print_caption(FILE *f, const ib__sl_table *t)
{
    const ib__sl_opts *o = t->o;
    static const char *const sync_names[] = {"off", "normal", "full", "extra"};
    fprintf(f, "# store_layouts: marker-file layouts side by side\n\n");
    fprintf(f,
            "SQLite %s; per run %zu new ids (plus 10 %% duplicates of ids marked 2-8 batches "
            "earlier), batches of %zu, synchronous=%s, WAL, %d-byte pages, %d KiB page cache, "
            "consumer \"%s\", preload %s; seed %llu.\n",
            sqlite3_libversion(), o->ids, o->batch, sync_names[o->synchronous & 3],
            IB__SL_PAGE_SIZE, IB__SL_CACHE_KIB, IB__SL_CONSUMER,
            o->random_order ? "in random order" : "sorted", (unsigned long long)o->seed);
    fprintf(f,
            "Each layout ran %d time(s) per size, interleaved; a row is the run of median rate "
            "(prune and outside SELECT: the first run). Rates include checkpoints; CPU is this "
            "process's user + system time.\n",
            o->repeat);
    fprintf(f, "Load average (1, 5, 15 min) at start: %s; at end: %s.\n", t->load_start,
            t->load_end);
}

static void print_rates(FILE *f, const ib__sl_table *t, size_t si)
{
    const ib__sl_result *bare = &t->res[si][0];
    fprintf(f, "\n## %zu markers: rate\n\n", t->o->sizes[si]);
    fprintf(f, "| layout | new ids/s | x bare | x own at 0 | CPU us / new id | txn p99 ms | "
               "txn max ms | pages written / batch | cache misses / batch | checkpoints (max "
               "ms) |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t l = 0; l < t->nlayouts; l++) {
        const ib__sl_result *r = &t->res[si][l];
        if (!r->ran)
            continue;
        fprintf(f, "| %s | %.0f |", t->layouts[l]->name, rate(r));
        print_ratio(f, rate(r), bare->ran ? rate(bare) : 0);
        if (si > 0 && t->o->sizes[0] == 0)
            print_ratio(f, rate(r), rate(&t->res[0][l]));
        else
            fprintf(f, " - |");
        fprintf(f, " %.1f | %.2f | %.2f | %.1f | %.1f | %zu (%.0f) |\n", r->cpu_us, r->hold_p99_ms,
                r->hold_max_ms, r->pages_written, r->cache_misses, r->checkpoints,
                r->checkpoint_max_ms);
    }
}

static void print_lookup(FILE *f, const ib__sl_result *r)
{
    if (r->lookup_plan == 0)
        fprintf(f, " no view |");
    else
        fprintf(f, " %s, %.1f us (%zu) |", r->lookup_plan == 1 ? "searches" : "SCANS", r->lookup_us,
                r->lookups);
}

static const char *preload_note(const ib__sl_table *t, const ib__sl_layout *L,
                                const ib__sl_result *r)
{
    if (L->preload_as != NULL)
        return " (plain's file)";
    return r->preload_reused && t->o->keep ? " (kept)" : "";
}

static void print_rate(FILE *f, double rate)
{
    if (rate > 0)
        fprintf(f, " %.0f |", rate);
    else
        fprintf(f, " - |");
}

static void print_file(FILE *f, const ib__sl_table *t, size_t si)
{
    fprintf(f, "\n## %zu markers: file, start-up, prune, outside lookup\n\n", t->o->sizes[si]);
    fprintf(f, "| layout | preload s | start-up cold ms | start-up warm ms | "
               "bytes / marker (file + -wal; file) | "
               "prune: longest txn ms | prune: txns, total s | markers pruned | "
               "outside SELECT through processed_log |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t l = 0; l < t->nlayouts; l++) {
        const ib__sl_result *r = &t->res[si][l];
        if (!r->ran)
            continue;
        double markers = r->markers > 0 ? (double)r->markers : 1;
        fprintf(f, "| %s | %.1f%s | %.1f | %.1f | %.1f; %.1f |", t->layouts[l]->name, r->preload_s,
                preload_note(t, t->layouts[l], r), r->start_cold_ms, r->start_warm_ms,
                (double)r->bytes / markers, (double)r->file_bytes / markers);
        if (r->pruned)
            fprintf(f, " %.1f | %zu, %.2f | %llu |", r->prune.max_ms, r->prune.txns,
                    r->prune.total_s, (unsigned long long)r->prune.rows);
        else
            fprintf(f, " - | - | - |");
        print_lookup(f, r);
        fprintf(f, "\n");
    }
}

static void print_procs(FILE *f, const ib__sl_table *t)
{
    bool any = false;
    for (size_t si = 0; si < t->o->nsizes; si++)
        for (size_t l = 0; l < t->nlayouts; l++)
            any |= t->procs[si][l].ran;
    if (!any)
        return;
    int n = t->o->procs;
    fprintf(f, "\n## %d processes on one file, %d joining after %d ms, %zu new ids each\n\n", n,
            n - 1, t->o->join_ms, t->o->procs_ids);
    fprintf(f,
            "| layout | markers | 1 process ids/s | %d processes ids/s | x 1 | while all %d "
            "ran ids/s | x 1 | longest wait for the write lock ms | largest WAL MiB |\n",
            n, n);
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t l = 0; l < t->nlayouts; l++)
        for (size_t si = 0; si < t->o->nsizes; si++) {
            const ib__sl_procs_result *p = &t->procs[si][l];
            double one = rate(&t->res[si][l]);
            if (!p->ran)
                continue;
            fprintf(f, "| %s | %zu | %.0f | %.0f |", t->layouts[l]->name, t->o->sizes[si], one,
                    p->total_rate);
            print_ratio(f, p->total_rate, one);
            print_rate(f, p->window_rate);
            print_ratio(f, p->window_rate, one);
            fprintf(f, " %.1f | %.1f |\n", p->wait_max_ms, (double)p->wal_max_bytes / 1048576.0);
        }
}

void ib__sl_report(FILE *f, const ib__sl_table *t)
{
    print_caption(f, t);
    for (size_t si = 0; si < t->o->nsizes; si++) {
        print_rates(f, t, si);
        print_file(f, t, si);
    }
    print_procs(f, t);
    fflush(f);
}
