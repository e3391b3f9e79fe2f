/* SPDX-License-Identifier: Apache-2.0 */
/* One layout at one size: start-up, the measured run, the file, the
 * outside lookup and the prune (store_layouts.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "store_layouts.h"

static const char *verdict_name(int v)
{
    return v == IB__SL_NEW      ? "new"
           : v == IB__SL_MARKED ? "marked"
           : v == IB__SL_BUSY   ? "busy"
                                : "?";
}

/* Every id is new or a duplicate of a marked one; nothing else may come
 * back, or the layout is wrong and its figures mean nothing. */
static void verify(const ib__sl_store *s, const ib__sl_batch *b, const unsigned char *dup)
{
    for (size_t i = 0; i < b->n; i++) {
        int want = dup[i] ? IB__SL_MARKED : IB__SL_NEW;
        if (b->verdict[i] != want)
            ib__sl_die("%s: acquire answered \"%s\" for %s, which is %s", s->layout->name,
                       verdict_name(b->verdict[i]), b->ids[i].hex, dup[i] ? "marked" : "new");
    }
}

static void run_batch(ib__sl_store *s, ib__sl_batch *b, const unsigned char *dup)
{
    const ib__sl_layout *L = s->layout;
    b->now_ms = ib__sl_unix_ms();
    b->lost = 0;
    ib__sl_txn(s, L->acquire, b);
    if (L->committed != NULL)
        L->committed(s, false);
    verify(s, b, dup);
    bool any_new = false;
    for (size_t i = 0; i < b->n; i++)
        any_new |= b->verdict[i] == IB__SL_NEW;
    if (L->mark == NULL || !any_new)
        return;
    ib__sl_txn(s, L->mark, b);
    if (L->committed != NULL)
        L->committed(s, true);
    if (b->lost != 0)
        ib__sl_die("%s: %zu claims were lost before their mark", L->name, b->lost);
}

static int double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void hold_figures(ib__sl_result *r, ib__sl_stats *st)
{
    if (st->n == 0)
        return;
    qsort(st->hold_ms, st->n, sizeof(*st->hold_ms), double_cmp);
    size_t p99 = (size_t)ceil(0.99 * (double)st->n);
    r->hold_p99_ms = st->hold_ms[p99 > 0 ? p99 - 1 : 0];
    r->hold_max_ms = st->hold_ms[st->n - 1];
}

/* User and system CPU of this process: unlike the rate, hardly moved by
 * what else the machine does. */
static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int db_status(sqlite3 *db, int op)
{
    int cur = 0, hi = 0;
    sqlite3_db_status(db, op, &cur, &hi, 1);
    return cur;
}

void ib__sl_run_stream(ib__sl_result *r, ib__sl_store *s, const ib__sl_stream *st,
                       ib__sl_progress each, void *ctx)
{
    unsigned char *verdict = calloc(st->batch, 1);
    size_t fresh = 0, batches = 0;
    if (verdict == NULL)
        ib__sl_die("out of memory");
    s->stats.keep = true;
    (void)db_status(s->db, SQLITE_DBSTATUS_CACHE_WRITE);
    (void)db_status(s->db, SQLITE_DBSTATUS_CACHE_MISS);
    double t0 = ib__sl_now_ms(), cpu0 = cpu_ms();
    for (size_t off = 0; off < st->n; off += st->batch, batches++) {
        ib__sl_batch b = {.ids = st->ids + off, .fps = st->fps + off, .verdict = verdict};
        b.n = st->n - off < st->batch ? st->n - off : st->batch;
        run_batch(s, &b, st->dup + off);
        for (size_t i = 0; i < b.n; i++)
            fresh += !st->dup[off + i];
        if (r->seventh_ms == 0 && fresh >= st->fresh / 7)
            r->seventh_ms = b.now_ms + 1;
        if (each != NULL)
            each(ctx, fresh);
    }
    r->seconds = (ib__sl_now_ms() - t0) / 1e3;
    r->fresh = fresh;
    r->cpu_us = (cpu_ms() - cpu0) * 1e3 / (double)(fresh > 0 ? fresh : 1);
    double nb = batches > 0 ? (double)batches : 1;
    r->pages_written = db_status(s->db, SQLITE_DBSTATUS_CACHE_WRITE) / nb;
    r->cache_misses = db_status(s->db, SQLITE_DBSTATUS_CACHE_MISS) / nb;
    r->checkpoints = s->stats.checkpoints;
    r->checkpoint_max_ms = s->stats.checkpoint_max_ms;
    hold_figures(r, &s->stats);
    s->stats.keep = false;
    free(verdict);
}

double ib__sl_start(ib__sl_store *s, const char *path, const ib__sl_layout *layout,
                    const ib__sl_opts *o, const ib__sl_stream *st)
{
    unsigned char *verdict = calloc(st->batch, 1);
    if (verdict == NULL)
        ib__sl_die("out of memory");
    ib__sl_batch b = {.ids = st->ids, .fps = st->fps, .verdict = verdict};
    b.n = st->n < st->batch ? st->n : st->batch;
    b.now_ms = ib__sl_unix_ms();
    double t0 = ib__sl_now_ms();
    ib__sl_store_open(s, path, layout, o->synchronous);
    layout->open(s);
    ib__sl_done(s->begin);
    layout->acquire(s, &b);
    double ms = ib__sl_now_ms() - t0;
    ib__sl_done(s->rollback);
    if (layout->rolled_back != NULL)
        layout->rolled_back(s);
    verify(s, &b, st->dup);
    free(verdict);
    return ms;
}

/* A cold start (the file out of the OS page cache), then a warm one after
 * reading the file through: the run goes on from the warm one. */
static void start_both(ib__sl_result *r, ib__sl_store *s, const char *work, const ib__sl_layout *L,
                       const ib__sl_opts *o, const ib__sl_stream *st)
{
    ib__sl_evict(work);
    r->start_cold_ms = ib__sl_start(s, work, L, o, st);
    ib__sl_store_close(s);
    ib__sl_read_through(work);
    r->start_warm_ms = ib__sl_start(s, work, L, o, st);
}

void ib__sl_measure(ib__sl_result *r, const ib__sl_layout *L, const char *work,
                    const ib__sl_opts *o, const ib__sl_stream *st, uint64_t preloaded,
                    int64_t cutoff_ms, bool full)
{
    ib__sl_store s;
    start_both(r, &s, work, L, o, st);
    ib__sl_run_stream(r, &s, st, NULL, NULL);
    r->bytes = ib__sl_db_bytes(work);
    r->file_bytes = ib__sl_file_bytes(work);
    r->markers = L->count(&s);
    if (r->markers != preloaded + r->fresh)
        ib__sl_die("%s: holds %llu markers after the run, expected %llu", L->name,
                   (unsigned long long)r->markers, (unsigned long long)(preloaded + r->fresh));
    if (full)
        ib__sl_lookup(r, work, L, st, o);
    if (full && L->prune != NULL) {
        L->prune(&s, cutoff_ms != 0 ? cutoff_ms : r->seventh_ms, o->prune_rows, &r->prune);
        r->pruned = true;
    }
    ib__sl_store_close(&s);
    r->ran = true;
}
