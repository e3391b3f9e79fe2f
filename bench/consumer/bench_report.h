/* SPDX-License-Identifier: Apache-2.0 */
/* The results of one consumer_bench run and their printing as Markdown
 * tables (so a run can be pasted into the README as it is). */
#ifndef IB_BENCH_REPORT_H
#define IB_BENCH_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "bench.h"

#define IB__BENCH_COLUMNS 3 /* 0%, 10% and 50% duplicates */
#define IB__BENCH_MAX_ROWS 19
#define IB__BENCH_SLOW_ROWS 7
/* The 1 ms rows at --concurrency 8 get this many times --slow-messages:
 * at 8,000 events/s a stream of the others' size is gone in half a second,
 * before processes that join after 0.3 s have started, so three would
 * measure the join instead of the three (issue 44). */
#define IB__BENCH_SLOW_FAST_SCALE 16

#define IB__BENCH_MAX_REPEAT 9

typedef struct ib__bench_cell {
    bool ok;                         /* measured (every repetition) */
    bool verified;                   /* the processes exited 0 having acked everything */
    double msgs_per_s;               /* median of the repetitions */
    double consumer_cpu, server_cpu; /* cores busy between the first and the last ack, mean */
    double samples[IB__BENCH_MAX_REPEAT];
    int nsamples;
    double startup_ms;       /* exec of the first process to the first ack, worst repetition */
    ib__bench_shares shares; /* several processes: each one's part of the acks */
} ib__bench_cell;

typedef struct ib__bench_row {
    const char *label;
    bool ran; /* selected (consumer_bench --rows) */
    ib__bench_cell cells[IB__BENCH_COLUMNS];
} ib__bench_row;

typedef struct ib__bench_report {
    char header[512];
    size_t messages, slow_messages, markers, callgrind_events, big_markers;
    int repeat;
    long batch;
    int64_t poll_ms;

    bool published[IB__BENCH_COLUMNS];
    ib__bench_row rows[IB__BENCH_MAX_ROWS]; /* rows[0] is the baseline, rows[1] bare +
                                               decode, rows[2] memory, rows[3] sqlite normal,
                                               rows[6] 3 x sqlite, rows[7] kv: 1
                                               replica, rows[8] kv: 3, rows[9]
                                               sqlite --batch 256, rows[10]
                                               bare with two pull requests, rows[11]
                                               3 x sqlite, two joining, rows[12]
                                               sqlite normal on a file of big_markers,
                                               rows[13] 3 x kv: 1 replica,
                                               rows[14] --concurrency 8 no-op,
                                               rows[15] --concurrency 8 http,
                                               rows[16] --concurrency 32 http,
                                               rows[17] row 11 at full */
    size_t row_count;
    /* the baseline build's cells of the ibus rows (--baseline-ibus) */
    bool has_baseline;
    ib__bench_row base[IB__BENCH_MAX_ROWS];
    uint64_t big_file_bytes; /* the big file (and its WAL) as filled */

    /* 5 ms at concurrency 1 and 16; 1 ms alone and 3 joining; 1 ms at
     * concurrency 8 and full, alone and 3 joining (bench_main.c's order) */
    const char *slow_labels[IB__BENCH_SLOW_ROWS];
    ib__bench_cell slow[IB__BENCH_SLOW_ROWS];

    double latency_rate;
    const char *latency_labels[3];
    ib__bench_latency latency[3];
    bool latency_ok[3];

    bool sqlite_rss_ok, sqlite_rss_verified;
    long sqlite_hwm_kib;
    double sqlite_markers_rate;
    bool memory_rss_ok, memory_rss_verified;
    double memory_bytes_rss;
    long memory_hwm_kib;
    bool memory_stats_ok;
    double memory_bytes_stats;

#define IB__BENCH_RECORDER_ROWS 4
    const char *recorder_labels[IB__BENCH_RECORDER_ROWS];
    bool recorder_ok[IB__BENCH_RECORDER_ROWS];
    double recorder_rate[IB__BENCH_RECORDER_ROWS];

    /* sections that ran (consumer_bench --only) */
    bool ran_throughput, ran_recorders, ran_slow, ran_latency, ran_memory, ran_callgrind;

    bool callgrind_skipped;
#define IB__BENCH_CALLGRIND_ROWS 3
    const char *callgrind_labels[IB__BENCH_CALLGRIND_ROWS];
    bool callgrind_ok[IB__BENCH_CALLGRIND_ROWS];
    bool callgrind_has_hot[IB__BENCH_CALLGRIND_ROWS]; /* ibus rows */
    double instr_total[IB__BENCH_CALLGRIND_ROWS], instr_hot[IB__BENCH_CALLGRIND_ROWS];
} ib__bench_report;

/* Prints every table and the goals. Returns true when every row produced
 * a verified number (rows skipped on request excepted). */
bool ib__bench_report_print(FILE *out, const ib__bench_report *r);

#endif
