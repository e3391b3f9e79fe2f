/* SPDX-License-Identifier: Apache-2.0 */
/* Printing a consumer_bench run: Markdown tables, then the goals of
 * issue 5 judged on the numbers of this run only. */
#include "bench_report.h"

#include <stdio.h>

static const char *const column_names[IB__BENCH_COLUMNS] = {"0% dups", "10% dups", "50% dups"};

static bool cell_good(const ib__bench_cell *c)
{
    return c->ok && c->verified && c->msgs_per_s > 0;
}

/* "123456" or "n/a"; a number whose processes failed their check gets a
 * trailing "?" and fails the run. */
static const char *fmt_rate(char *buf, size_t len, const ib__bench_cell *c)
{
    if (!c->ok || c->msgs_per_s <= 0)
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.0f%s", c->msgs_per_s, c->verified ? "" : "?");
    return buf;
}

/* The rest of a table's head after "| config |": each duplicate ratio's
 * heading (`head` formats its name) and its alignment cells. */
static void print_column_heads(FILE *out, const char *head, const char *align)
{
    for (int k = 0; k < IB__BENCH_COLUMNS; k++)
        fprintf(out, head, column_names[k]);
    fprintf(out, "\n|---|");
    for (int k = 0; k < IB__BENCH_COLUMNS; k++)
        fprintf(out, "%s", align);
    fprintf(out, "\n");
}

static bool print_throughput(FILE *out, const ib__bench_report *r)
{
    bool all = true;
    char a[32], b[32];
    fprintf(out,
            "Throughput: %zu messages per stream (128-byte payloads), pull batch %ld; "
            "msg/s = acks between the first and the last consumer-info poll (every %lld ms) "
            "that saw them; median of %d interleaved runs.\n\n",
            r->messages, r->batch, (long long)r->poll_ms, r->repeat);
    fprintf(out, "| config |");
    print_column_heads(out, " %s msg/s | ratio |", "---:|---:|");
    for (size_t i = 0; i < r->row_count; i++) {
        if (!r->rows[i].ran)
            continue;
        fprintf(out, "| %s |", r->rows[i].label);
        for (int k = 0; k < IB__BENCH_COLUMNS; k++) {
            const ib__bench_cell *c = &r->rows[i].cells[k], *base = &r->rows[0].cells[k];
            if (cell_good(c) && cell_good(base))
                snprintf(b, sizeof(b), "%.2f", c->msgs_per_s / base->msgs_per_s);
            else
                snprintf(b, sizeof(b), "n/a");
            fprintf(out, " %s | %s |", fmt_rate(a, sizeof(a), c), b);
            all = all && cell_good(c);
        }
        fprintf(out, "\n");
    }
    return all;
}

/* Where the cores went: a consumer near 1.0 is CPU-bound on its main
 * thread; the two together near 2.0 means the machine is. */
static void print_cpu(FILE *out, const ib__bench_report *r)
{
    fprintf(out, "\nCPU between the first and the last ack, in cores (consumer processes / "
                 "nats-server; this machine has 2).\n\n| config |");
    print_column_heads(out, " %s |", "---:|");
    for (size_t i = 0; i < r->row_count; i++) {
        if (!r->rows[i].ran)
            continue;
        fprintf(out, "| %s |", r->rows[i].label);
        for (int k = 0; k < IB__BENCH_COLUMNS; k++) {
            const ib__bench_cell *c = &r->rows[i].cells[k];
            if (cell_good(c))
                fprintf(out, " %.2f / %.2f |", c->consumer_cpu, c->server_cpu);
            else
                fprintf(out, " n/a |");
        }
        fprintf(out, "\n");
    }
}

/* "lowest-highest %" of a cell's per-process shares into buf, or "n/a". */
static const char *fmt_shares(char *buf, size_t cap, const ib__bench_cell *c)
{
    if (cell_good(c) && c->shares.seen)
        snprintf(buf, cap, "%.0f-%.0f %%", c->shares.lowest * 100, c->shares.highest * 100);
    else
        snprintf(buf, cap, "n/a");
    return buf;
}

/* For the rows of several processes: how evenly they shared the work (the
 * acks each wrote in its summary line; a joiner starts late by design). */
static void print_process_shares(FILE *out, const ib__bench_report *r)
{
    char a[32];
    bool any = false;
    for (size_t i = 0; i < r->row_count && !any; i++)
        for (int k = 0; k < IB__BENCH_COLUMNS; k++)
            any = any || (r->rows[i].ran && r->rows[i].cells[k].shares.seen);
    if (!any)
        return;
    fprintf(out, "\nEach process's part of the acks, lowest-highest over the repetitions.\n\n"
                 "| config |");
    print_column_heads(out, " %s |", "---:|");
    for (size_t i = 0; i < r->row_count; i++) {
        if (!r->rows[i].ran || !r->rows[i].cells[1].shares.seen)
            continue;
        fprintf(out, "| %s |", r->rows[i].label);
        for (int k = 0; k < IB__BENCH_COLUMNS; k++)
            fprintf(out, " %s |", fmt_shares(a, sizeof(a), &r->rows[i].cells[k]));
        fprintf(out, "\n");
    }
}

static bool print_recorders(FILE *out, const ib__bench_report *r)
{
    bool all = true;
    fprintf(out,
            "\nRecorders alone, in process: claim_batch then mark_batch of %ld fresh ids per "
            "call, %zu ids (no NATS, no handler): the ceiling of the ibus rows. The last row "
            "checks instead of claiming, to show what the claims cost.\n\n"
            "| recorder | ids/s | ratio to the bare consumer (10%% dups) |\n|---|---:|---:|\n",
            r->batch, r->messages);
    for (int i = 0; i < IB__BENCH_RECORDER_ROWS; i++) {
        const char *label = r->recorder_labels[i] != NULL ? r->recorder_labels[i] : "?";
        const ib__bench_cell *bare = &r->rows[0].cells[1];
        if (!r->recorder_ok[i]) {
            fprintf(out, "| %s | n/a | n/a |\n", label);
            all = false;
        } else if (cell_good(bare)) {
            fprintf(out, "| %s | %.0f | %.2f |\n", label, r->recorder_rate[i],
                    r->recorder_rate[i] / bare->msgs_per_s);
        } else {
            fprintf(out, "| %s | %.0f | - |\n", label, r->recorder_rate[i]);
        }
    }
    return all;
}

static bool print_slow(FILE *out, const ib__bench_report *r)
{
    char a[32], b[32];
    fprintf(out,
            "\nSlow handler: 5 ms (or 1 ms) per event, %zu messages (%zu for the 1 ms rows at "
            "--concurrency 8, so processes that join after 0.3 s share most of it; 10%% dups; a "
            "duplicate does not run the handler).\n\n| config | msg/s | ratio to the first row of "
            "its handler | each process's part |\n|---|---:|---:|---:|\n",
            r->slow_messages, r->slow_messages * IB__BENCH_SLOW_FAST_SCALE);
    for (int i = 0; i < IB__BENCH_SLOW_ROWS; i++) {
        int base = i < 2 ? 0 : i < 4 ? 2 : 4;
        if (cell_good(&r->slow[i]) && cell_good(&r->slow[base]))
            snprintf(b, sizeof(b), "%.1f", r->slow[i].msgs_per_s / r->slow[base].msgs_per_s);
        else
            snprintf(b, sizeof(b), "n/a");
        char sh[32];
        fprintf(out, "| %s | %s | %s | %s |\n", r->slow_labels[i] != NULL ? r->slow_labels[i] : "?",
                fmt_rate(a, sizeof(a), &r->slow[i]), b,
                r->slow[i].shares.seen ? fmt_shares(sh, sizeof(sh), &r->slow[i]) : "-");
    }
    bool all = true;
    for (int i = 0; i < IB__BENCH_SLOW_ROWS; i++)
        all = all && cell_good(&r->slow[i]);
    return all;
}

static bool print_latency(FILE *out, const ib__bench_report *r)
{
    bool all = true;
    fprintf(out,
            "\nLatency, publish to ack: paced publisher at %.0f msg/s (half the sqlite normal "
            "rate at 10%% dups), 10%% dups; acks seen by a core subscription on $JS.ACK.<stream>."
            "<durable>.>.\n\n| config | messages | publish rate | p50 ms | p99 ms | max ms |\n"
            "|---|---:|---:|---:|---:|---:|\n",
            r->latency_rate);
    for (int i = 0; i < 3; i++) {
        const ib__bench_latency *l = &r->latency[i];
        const char *label = r->latency_labels[i] != NULL ? r->latency_labels[i] : "?";
        if (!r->latency_ok[i]) {
            fprintf(out, "| %s | n/a | n/a | n/a | n/a | n/a |\n", label);
            all = false;
            continue;
        }
        fprintf(out, "| %s | %zu | %.0f | %.2f | %.2f | %.2f |\n", label, l->messages, l->rate,
                l->p50_ms, l->p99_ms, l->max_ms);
    }
    return all;
}

static bool print_memory(FILE *out, const ib__bench_report *r)
{
    bool sqlite_good = r->sqlite_rss_ok && r->sqlite_rss_verified;
    bool memory_good = r->memory_rss_ok && r->memory_rss_verified;
    fprintf(out,
            "\nMemory, one `ibus run` over %zu unique events (one marker each).\n\n"
            "| measure | value |\n|---|---:|\n",
            r->markers);
    if (sqlite_good)
        fprintf(out, "| sqlite normal: peak RSS (VmHWM) when all are marked | %.1f MiB |\n",
                (double)r->sqlite_hwm_kib / 1024.0);
    else
        fprintf(out, "| sqlite normal: peak RSS (VmHWM) when all are marked | n/a |\n");
    if (sqlite_good)
        fprintf(out, "| sqlite normal: rate over those events | %.0f msg/s |\n",
                r->sqlite_markers_rate);
    if (memory_good)
        fprintf(out,
                "| memory recorder: RSS growth per marker, first ack to last | %.1f B |\n"
                "| memory recorder: peak RSS (VmHWM) | %.1f MiB |\n",
                r->memory_bytes_rss, (double)r->memory_hwm_kib / 1024.0);
    else
        fprintf(out, "| memory recorder: RSS growth per marker, first ack to last | n/a |\n");
    if (r->memory_stats_ok)
        fprintf(out,
                "| memory recorder: its own storage_bytes per marker (in process) | %.1f B |\n",
                r->memory_bytes_stats);
    else
        fprintf(out, "| memory recorder: its own storage_bytes per marker (in process) | n/a |\n");
    return sqlite_good && memory_good && r->memory_stats_ok;
}

static bool print_callgrind(FILE *out, const ib__bench_report *r)
{
    bool all = true;
    if (r->callgrind_skipped) {
        fprintf(out, "\nInstructions per event: skipped (--no-callgrind).\n");
        return true;
    }
    fprintf(out,
            "\nInstructions per event (valgrind --tool=callgrind; runs over %zu and %zu events, "
            "10%% dups, difference / %zu). Hot path = inclusive cost of " IB_BENCH_HOT_PATH " "
            "(decode, dispatch, claim/mark, ack bookkeeping); whole process = every thread, "
            "nats.c's reader included.\n\n| consumer | hot path | whole process |\n"
            "|---|---:|---:|\n",
            r->callgrind_events, 2 * r->callgrind_events, r->callgrind_events);
    for (int i = 0; i < IB__BENCH_CALLGRIND_ROWS; i++) {
        const char *label = r->callgrind_labels[i] != NULL ? r->callgrind_labels[i] : "?";
        if (!r->callgrind_ok[i])
            fprintf(out, "| %s | n/a | n/a |\n", label);
        else if (r->callgrind_has_hot[i])
            fprintf(out, "| %s | %.0f | %.0f |\n", label, r->instr_hot[i], r->instr_total[i]);
        else
            fprintf(out, "| %s | - | %.0f |\n", label, r->instr_total[i]);
        all = all && r->callgrind_ok[i];
    }
    return all;
}

static void goal(FILE *out, const char *what, bool known, bool met, const char *fmt, double v)
{
    char measured[64];
    if (known)
        snprintf(measured, sizeof(measured), fmt, v);
    else
        snprintf(measured, sizeof(measured), "n/a");
    fprintf(out, "| %s | %s | %s |\n", what, measured, !known ? "unknown" : met ? "yes" : "NO");
}

/* The worst ratio of this build to the baseline build over every ibus cell
 * both measured; 0 when there is none. `*row` names its row. */
static double worst_against_baseline(const ib__bench_report *r, const char **row)
{
    double worst = 0;
    for (size_t i = 0; i < r->row_count; i++)
        for (int c = 0; c < IB__BENCH_COLUMNS; c++) {
            const ib__bench_cell *now = &r->rows[i].cells[c], *was = &r->base[i].cells[c];
            if (!cell_good(now) || !cell_good(was))
                continue;
            double v = now->msgs_per_s / was->msgs_per_s;
            if (worst == 0 || v < worst) {
                worst = v;
                *row = r->rows[i].label;
            }
        }
    return worst;
}

/* Issue 30 (the marker file), with issue 21's joiners: rows 4 (the
 * default settings, synchronous=full) and 12 (the same on a file of
 * --big-markers), 3 (normal) and 11 (three processes on one file, two
 * joining a busy one; 17 the same at full), the best bare consumer (rows 0
 * and 10). */
static void print_share_goals(FILE *out, const ib__bench_report *r)
{
    const ib__bench_cell *bare = &r->rows[0].cells[1], *sql = &r->rows[3].cells[1];
    const ib__bench_cell *full = &r->rows[4].cells[1], *big = &r->rows[12].cells[1];
    const ib__bench_cell *joined = &r->rows[11].cells[1], *two = &r->rows[10].cells[1];
    bool k = cell_good(full) && cell_good(bare) && cell_good(two);
    double v = k ? full->msgs_per_s /
                       (two->msgs_per_s > bare->msgs_per_s ? two->msgs_per_s : bare->msgs_per_s)
                 : 0;
    goal(out, "one process, default settings >= 0.6 x the best bare consumer (10% dups)", k,
         v >= 0.6, "%.2f x", v);
    k = cell_good(full) && cell_good(big);
    v = k ? big->msgs_per_s / full->msgs_per_s : 0;
    goal(out, "default settings on a file of --big-markers >= 0.8 x on an empty one", k, v >= 0.8,
         "%.2f x", v);
    k = cell_good(sql) && cell_good(joined);
    v = k ? joined->msgs_per_s / sql->msgs_per_s : 0;
    goal(out, "3 x sqlite, 2 joining a busy file >= 1.0 x 1 x sqlite (10% dups)", k, v >= 1.0,
         "%.2f x", v);
    const ib__bench_cell *joined_full = &r->rows[17].cells[1];
    k = cell_good(full) && cell_good(joined_full);
    v = k ? joined_full->msgs_per_s / full->msgs_per_s : 0;
    goal(out, "the same at the default (full) >= 1.2 x 1 x default (10% dups, issue 44)", k,
         v >= 1.2, "%.2f x", v);
    const ib__bench_cell *three = &r->rows[6].cells[1];
    k = cell_good(three) && three->shares.seen;
    char shares[32];
    fprintf(out,
            "| 3 x sqlite started together: each process's part of the acks 25-42 %% (10%% "
            "dups) | %s | %s |\n",
            fmt_shares(shares, sizeof(shares), three),
            !k                                                              ? "unknown"
            : three->shares.lowest >= 0.25 && three->shares.highest <= 0.42 ? "yes"
                                                                            : "NO");
    goal(out, "start-up on a file of --big-markers <= 1000 ms", cell_good(big),
         big->startup_ms <= 1000, "%.0f ms", big->startup_ms);
    k = r->rows[12].ran && r->big_file_bytes > 0 && r->big_markers > 0;
    v = k ? (double)r->big_file_bytes / (double)r->big_markers : 0;
    goal(out, "disk per marker on the file of --big-markers <= 64 B", k, v <= 64, "%.1f B", v);
    /* only a run with --baseline-ibus has a baseline to judge */
    if (r->has_baseline) {
        const char *row = "";
        v = worst_against_baseline(r, &row);
        char what[200];
        snprintf(what, sizeof(what),
                 "no ibus cell more than 5%% slower than the baseline (worst: %s)", row);
        goal(out, what, v > 0, v >= 0.95, "%.2f x", v);
    }
    k = cell_good(&r->slow[2]) && cell_good(&r->slow[3]);
    v = k ? r->slow[3].msgs_per_s / r->slow[2].msgs_per_s : 0;
    goal(out, "1 ms handler: 3 x joining >= 2 x one process", k, v >= 2, "%.1f x", v);
    k = cell_good(&r->slow[4]);
    v = k ? r->slow[4].msgs_per_s / 8000.0 : 0;
    goal(out, "1 ms handler, --concurrency 8, full: one process >= 0.9 x its handlers' 8,000/s", k,
         v >= 0.9, "%.2f", v);
    k = cell_good(&r->slow[4]) && cell_good(&r->slow[6]);
    v = k ? r->slow[4].msgs_per_s / r->slow[6].msgs_per_s : 0;
    goal(out, "the same against the memory recorder's row (no file), for reference", k, v >= 0.9,
         "%.2f", v);
    k = cell_good(&r->slow[4]) && cell_good(&r->slow[5]);
    v = k ? r->slow[5].msgs_per_s / r->slow[4].msgs_per_s : 0;
    goal(out, "1 ms handler, --concurrency 8, full: 3 x joining >= 2.7 x one process", k, v >= 2.7,
         "%.1f x", v);
}

/* Every ibus cell beside the baseline build's (--baseline-ibus), run
 * right after it. */
static void print_baseline(FILE *out, const ib__bench_report *r)
{
    if (!r->has_baseline)
        return;
    fprintf(out, "\nThis build against the baseline build (--baseline-ibus), msg/s and the "
                 "ratio of this one to it, each cell run right after this build's (not the "
                 "large-file row: its file has this build's schema, which an older build "
                 "refuses).\n\n"
                 "| config | 0%% dups | base | ratio | 10%% dups | base | ratio | 50%% dups | "
                 "base | ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < r->row_count; i++) {
        bool any = false;
        for (int c = 0; c < IB__BENCH_COLUMNS; c++)
            any = any || cell_good(&r->base[i].cells[c]);
        if (!any)
            continue;
        fprintf(out, "| %s |", r->rows[i].label);
        for (int c = 0; c < IB__BENCH_COLUMNS; c++) {
            const ib__bench_cell *now = &r->rows[i].cells[c], *was = &r->base[i].cells[c];
            if (cell_good(now) && cell_good(was))
                fprintf(out, " %.0f | %.0f | %.2f |", now->msgs_per_s, was->msgs_per_s,
                        now->msgs_per_s / was->msgs_per_s);
            else
                fprintf(out, " n/a | n/a | - |");
        }
        fprintf(out, "\n");
    }
}

/* Start-up on an empty file and on a large one, and the large file's
 * throughput next to the empty file's (issue 21). */
static void print_big(FILE *out, const ib__bench_report *r)
{
    const ib__bench_cell *empty = &r->rows[4].cells[1], *big = &r->rows[12].cells[1];
    if (!r->rows[12].ran)
        return;
    fprintf(out,
            "\nA large marker file: the default settings (synchronous=full), 10%% dups, on an "
            "empty file and on one that "
            "holds %zu markers already. Start-up is the start of `ibus run` to the first ack "
            "the driver saw (worst repetition).\n\n| file | start-up ms | msg/s |\n"
            "|---|---:|---:|\n",
            r->big_markers);
    fprintf(out, "| empty | %.0f | %.0f |\n", empty->startup_ms, empty->msgs_per_s);
    fprintf(out, "| %zu markers | %.0f | %.0f |\n", r->big_markers, big->startup_ms,
            big->msgs_per_s);
}

/* The faster of the two bare consumers (rows 0 and 10) that ran
 * cleanly, at 10% dups; NULL when neither did. */
static const ib__bench_cell *best_bare(const ib__bench_report *r)
{
    const ib__bench_cell *one = &r->rows[0].cells[1], *two = &r->rows[10].cells[1];
    if (!cell_good(two))
        return cell_good(one) ? one : NULL;
    return cell_good(one) && one->msgs_per_s > two->msgs_per_s ? one : two;
}

/* Issue 24: the fleet recorder against the best bare consumer (for 3
 * replicas that is the bare consumer of the stream's own server: the
 * stream stays there), three processes on one bucket against one; issue
 * 26: the http plugin against the native no-op plugin, both at
 * --concurrency 8. All at 10% dups. */
static void print_fleet_goals(FILE *out, const ib__bench_report *r)
{
    const ib__bench_cell *bare = best_bare(r);
    static const struct {
        int row, of; /* of < 0: the best bare consumer */
        double ratio;
        const char *what;
    } goals[] = {{7, -1, 0.25, "kv: 1 replica >= 0.25 x the best bare consumer (10% dups)"},
                 {13, 7, 1.0, "3 x kv: 1 replica, one bucket >= 1 process (10% dups)"},
                 {8, -1, 0.10, "kv: 3 replicas >= 0.10 x the best bare consumer (10% dups)"},
                 {15, 14, 0.5, "http plugin, concurrency 8 >= 0.5 x the no-op plugin (10% dups)"}};
    for (size_t i = 0; i < sizeof(goals) / sizeof(goals[0]); i++) {
        const ib__bench_cell *c = &r->rows[goals[i].row].cells[1];
        const ib__bench_cell *of = goals[i].of < 0 ? bare : &r->rows[goals[i].of].cells[1];
        bool k = of != NULL && cell_good(of) && cell_good(c);
        double v = k ? c->msgs_per_s / of->msgs_per_s : 0;
        goal(out, goals[i].what, k, v >= goals[i].ratio, "%.2f x", v);
    }
}

static void print_goals(FILE *out, const ib__bench_report *r)
{
    const ib__bench_cell *bare = &r->rows[0].cells[1], *sql = &r->rows[3].cells[1];
    bool k;
    double v;

    fprintf(out,
            "\nGoals (issues 5, 13, 21, 24, 26 and 30), from this run.\n\n| goal | measured | met "
            "|\n|---|---:|---|\n");
    k = cell_good(bare) && cell_good(sql);
    v = k ? sql->msgs_per_s / bare->msgs_per_s : 0;
    goal(out, "sqlite normal, 10% dups >= 0.8 x bare", k, v >= 0.8, "%.2f x", v);

    /* issue 13: sharing a file and a larger batch must not cost speed */
    static const struct {
        int row;
        const char *what;
    } peers[] = {{6, "3 x sqlite on one file >= 1 x sqlite (10% dups)"},
                 {9, "sqlite --batch 256 >= --batch 64 (10% dups)"}};
    for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
        const ib__bench_cell *p = &r->rows[peers[i].row].cells[1];
        k = cell_good(sql) && cell_good(p);
        v = k ? p->msgs_per_s / sql->msgs_per_s : 0;
        goal(out, peers[i].what, k, v >= 1.0, "%.2f x", v);
    }

    print_share_goals(out, r);

    print_fleet_goals(out, r);

    /* The memory goal holds at every duplicate ratio, so take the worst. */
    k = true;
    v = 1e9;
    for (int c = 0; c < IB__BENCH_COLUMNS; c++) {
        const ib__bench_cell *m = &r->rows[2].cells[c], *d = &r->rows[1].cells[c];
        if (!cell_good(m) || !cell_good(d)) {
            k = false;
            break;
        }
        if (m->msgs_per_s / d->msgs_per_s < v)
            v = m->msgs_per_s / d->msgs_per_s;
    }
    goal(out, "memory >= 0.95 x bare + decode (worst ratio of the three)", k, v >= 0.95, "%.2f x",
         v);

    k = cell_good(&r->slow[0]) && cell_good(&r->slow[1]);
    v = k ? r->slow[1].msgs_per_s / r->slow[0].msgs_per_s : 0;
    goal(out, "slow handler: 16 threads >= 10 x 1 thread", k, v >= 10, "%.1f x", v);

    k = r->sqlite_rss_ok && r->sqlite_rss_verified;
    v = (double)r->sqlite_hwm_kib / 1024.0;
    char what[128];
    snprintf(what, sizeof(what), "sqlite, %zu markers: RSS < 32 MiB", r->markers);
    goal(out, what, k, v < 32, "%.1f MiB", v);

    k = r->memory_rss_ok && r->memory_rss_verified;
    goal(out, "memory recorder < 64 B per marker (RSS growth)", k, r->memory_bytes_rss < 64,
         "%.1f B", r->memory_bytes_rss);
}

bool ib__bench_report_print(FILE *out, const ib__bench_report *r)
{
    fprintf(out, "\n## consumer_bench, %s\n\n", r->header);
    bool ok = true;
    if (r->ran_throughput) {
        ok = print_throughput(out, r) && ok;
        print_cpu(out, r);
        print_process_shares(out, r);
        print_big(out, r);
        print_baseline(out, r);
    }
    if (r->ran_recorders)
        ok = print_recorders(out, r) && ok;
    if (r->ran_slow)
        ok = print_slow(out, r) && ok;
    if (r->ran_latency)
        ok = print_latency(out, r) && ok;
    if (r->ran_memory)
        ok = print_memory(out, r) && ok;
    if (r->ran_callgrind || r->callgrind_skipped)
        ok = print_callgrind(out, r) && ok;
    print_goals(out, r);
    fflush(out);
    return ok;
}
