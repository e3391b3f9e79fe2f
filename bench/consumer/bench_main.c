/* SPDX-License-Identifier: Apache-2.0 */
/* consumer_bench: `ibus run` side by side with a bare nats.c consumer.
 *
 * One command, one nats-server (started here on 127.0.0.1 with a free port
 * and a temporary store, stopped by its pid at the end), one run. The
 * streams are published once; every configuration then reads the same
 * messages through its own durable consumer. See bench/README.md for what
 * each row measures and how.
 *
 *   consumer_bench [--quick] [--messages N] [--batch N] [--no-callgrind] ...
 *
 * Exit status: 0 when every row produced a number, 1 otherwise, 2 on bad
 * usage. Goals are reported, not enforced. */
#include "bench.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench_report.h"

#ifndef IB_BENCH_IBUS
#define IB_BENCH_IBUS "ibus"
#endif
#ifndef IB_BENCH_PLUGIN
#define IB_BENCH_PLUGIN "bench_noop.so"
#endif
#ifndef IB_BENCH_BARE
#define IB_BENCH_BARE "bench_bare"
#endif
#ifndef IB_BENCH_HTTP_PLUGIN
#define IB_BENCH_HTTP_PLUGIN "http.so"
#endif

#define STALL_MS 30000
#define CALLGRIND_STALL_MS 120000
/* From the build (bench/consumer/CMakeLists.txt), which checks that ibus
 * has a function of that name. */
#ifndef IB_BENCH_HOT_PATH
#error "IB_BENCH_HOT_PATH must name the host's batch function"
#endif

static const double ratios[IB__BENCH_COLUMNS] = {0.0, 0.10, 0.50};

/* The throughput rows, in table order; the first is the baseline. */
static const ib__bench_config rows[] = {
    {"bare nats.c consumer, ack only", IB__BENCH_BARE, 0, 1, 0, 0, 0, 0},
    {"bare + ib_event_decode", IB__BENCH_BARE_DECODE, 0, 1, 0, 0, 0, 0},
    {"ibus run, memory recorder", IB__BENCH_IBUS, IB__BENCH_MEMORY, 1, 0, 0, 0, 0},
    {"ibus run, sqlite synchronous=normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 0, 0, 0, 0},
    {"ibus run, sqlite synchronous=full", IB__BENCH_IBUS, IB__BENCH_SQLITE_FULL, 1, 0, 0, 0, 0},
    {"2 x ibus run, one sqlite file (normal)", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 2, 0, 0, 0,
     0},
    {"3 x ibus run, one sqlite file (normal)", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 3, 0, 0, 0,
     0},
    {"ibus run, kv: 1 replica", IB__BENCH_IBUS, IB__BENCH_KV1, 1, 0, 0, 0, 0},
    {"ibus run, kv: 3 replicas (3-node cluster)", IB__BENCH_IBUS, IB__BENCH_KV3, 1, 0, 0, 0, 0},
    {"ibus run --batch 256, sqlite normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 0, 0, 256,
     0},
    {"bare, two pipelined pull requests", IB__BENCH_BARE_PIPELINED, 0, 1, 0, 0, 0, 0},
    /* processes started the way a user scales out: one, then more while it is busy */
    {"3 x ibus run, one file, 2 join after 1.5 s", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 3, 0, 0,
     0, 1500},
    {"ibus run, sqlite default (full), a file of --big-markers", IB__BENCH_IBUS,
     IB__BENCH_SQLITE_BIG, 1, 0, 0, 0, 0},
    {"3 x ibus run, kv: 1 replica, one bucket", IB__BENCH_IBUS, IB__BENCH_KV1, 3, 0, 0, 0, 0},
    /* issue 26: the http plugin against a local endpoint answering 204,
     * beside the native no-op plugin at the same concurrency */
    {"ibus run --concurrency 8, sqlite normal, no-op plugin", IB__BENCH_IBUS,
     IB__BENCH_SQLITE_NORMAL, 1, 8, 0, 0, 0},
    {"ibus run --concurrency 8, sqlite normal, http plugin (204)", IB__BENCH_IBUS_HTTP,
     IB__BENCH_SQLITE_NORMAL, 1, 8, 0, 0, 0},
    /* the same with more requests in flight: is the row bound by round trips? */
    {"ibus run --concurrency 32, sqlite normal, http plugin (204)", IB__BENCH_IBUS_HTTP,
     IB__BENCH_SQLITE_NORMAL, 1, 32, 0, 0, 0},
    /* row 11 at the default synchronous=full, as a user who adds processes runs it */
    {"3 x ibus run, one file, 2 join after 1.5 s, sqlite default (full)", IB__BENCH_IBUS,
     IB__BENCH_SQLITE_FULL, 3, 0, 0, 0, 1500},
    /* a fleet as deploy/ runs it: several processes on one 3-replica bucket */
    {"3 x ibus run, kv: 3 replicas (3-node cluster), one bucket", IB__BENCH_IBUS, IB__BENCH_KV3, 3,
     0, 0, 0, 0},
};
#define ROW_COUNT (sizeof(rows) / sizeof(rows[0]))
_Static_assert(ROW_COUNT <= IB__BENCH_MAX_ROWS, "the report holds every throughput row");

static const ib__bench_config slow_rows[] = {
    {"ibus run --concurrency 1, sqlite normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 1, 5, 0,
     0},
    {"ibus run --concurrency 16, sqlite normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 16, 5,
     0, 0},
    {"ibus run, 1 ms handler, sqlite normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 0, 1, 0,
     0},
    {"3 x ibus run, 1 ms handler, 2 join after 0.3 s", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 3,
     0, 1, 0, 300},
    /* issue 44: what a user who adds replicas runs: 1 ms handlers on 8
     * threads, the default synchronous=full; the handlers' own limit is
     * 8 / 1 ms = 8,000 events/s per process */
    {"ibus run, 1 ms handler, --concurrency 8, sqlite default (full)", IB__BENCH_IBUS,
     IB__BENCH_SQLITE_FULL, 1, 8, 1, 0, 0},
    {"3 x ibus run, 1 ms handler, --concurrency 8, 2 join after 0.3 s, sqlite default (full)",
     IB__BENCH_IBUS, IB__BENCH_SQLITE_FULL, 3, 8, 1, 0, 300},
    /* the same without a file: what 8 threads sleeping 1 ms reach on this
     * machine (a sleep overruns its millisecond), the ceiling of the two
     * rows above */
    {"ibus run, 1 ms handler, --concurrency 8, memory recorder", IB__BENCH_IBUS, IB__BENCH_MEMORY,
     1, 8, 1, 0, 0},
};
_Static_assert(sizeof(slow_rows) / sizeof(slow_rows[0]) == IB__BENCH_SLOW_ROWS,
               "the report holds every slow row");

static const ib__bench_config latency_rows[] = {
    {"bare nats.c consumer, ack only", IB__BENCH_BARE, 0, 1, 0, 0, 0, 0},
    {"ibus run, memory recorder", IB__BENCH_IBUS, IB__BENCH_MEMORY, 1, 0, 0, 0, 0},
    {"ibus run, sqlite synchronous=normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 0, 0, 0, 0},
};

static const ib__bench_config callgrind_rows[IB__BENCH_CALLGRIND_ROWS] = {
    {"bare + ib_event_decode", IB__BENCH_BARE_DECODE, 0, 1, 0, 0, 0, 0},
    {"ibus run, memory recorder", IB__BENCH_IBUS, IB__BENCH_MEMORY, 1, 0, 0, 0, 0},
    {"ibus run, sqlite synchronous=normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 0, 0, 0, 0},
};

typedef struct bench_opts {
    size_t messages, slow_messages, markers, callgrind_events, big_markers;
    int repeat;
    double latency_seconds;
    long batch;
    int64_t poll_ms;
    bool quick, no_callgrind, keep;
    const char *only; /* comma-separated sections; NULL = all */
    const char *rows; /* comma-separated throughput row numbers; NULL = all */
    const char *ibus, *plugin, *bare, *nats_server, *valgrind, *tmp;
    /* another build of ibus (and its no-op plugin), measured beside this
     * one in every ibus cell of the throughput rows; NULL = none */
    const char *baseline_ibus, *baseline_plugin;
} bench_opts;

static int usage(void)
{
    fprintf(stderr,
            "usage: consumer_bench [options]\n"
            "  --quick               small run (a few thousand messages), for a smoke test\n"
            "  --messages N          messages per duplicate ratio (default 200000)\n"
            "  --slow-messages N     messages for the slow-handler rows (default 2000;\n"
            "                        16 times as many for the 1 ms --concurrency 8 rows)\n"
            "  --markers N           markers for the memory rows (default 1000000)\n"
            "  --big-markers N       markers already in the file of the large-file row "
            "(default 2000000)\n"
            "  --callgrind-events N  events of the smaller callgrind run (default 20000)\n"
            "  --latency-seconds S   length of each paced latency run (default 3)\n"
            "  --repeat N            runs of each throughput cell, median reported (default 3)\n"
            "  --batch N             pull batch of every consumer (default 64, ibus' default)\n"
            "  --poll-ms MS          consumer info poll interval (default 5)\n"
            "  --no-callgrind        skip the instruction counts\n"
            "  --keep                keep the temporary directory (logs, databases)\n"
            "  --only LIST           run only these sections (comma-separated): throughput,\n"
            "                        recorders, slow, latency, memory, callgrind (latency needs "
            "throughput)\n"
            "  --rows LIST           throughput rows to run, numbered from 0 (e.g. 0,2)\n"
            "  --ibus PATH --plugin PATH --bare PATH --nats-server PATH --valgrind PATH\n"
            "  --baseline-ibus PATH --baseline-plugin PATH\n"
            "                        another build, run beside this one in every ibus\n"
            "                        throughput cell (a table of ratios against it)\n"
            "  --tmp DIR             parent of the temporary directory (default $TMPDIR or "
            "/tmp)\n");
    return 2;
}

static void opts_defaults(bench_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->messages = 200000;
    o->slow_messages = 2000;
    o->markers = 1000000;
    o->big_markers = 2000000;
    o->callgrind_events = 20000;
    o->latency_seconds = 3;
    o->repeat = 3;
    o->batch = 64;
    o->poll_ms = 5;
    o->ibus = IB_BENCH_IBUS;
    o->plugin = IB_BENCH_PLUGIN;
    o->bare = IB_BENCH_BARE;
    o->nats_server = "nats-server";
    o->valgrind = "valgrind";
    o->tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
}

/* Sizes the command line set, so --quick shrinks only the others. */
enum {
    SET_MESSAGES = 1 << 0,
    SET_SLOW = 1 << 1,
    SET_MARKERS = 1 << 2,
    SET_BIG = 1 << 7,
    SET_CALLGRIND = 1 << 3,
    SET_LATENCY = 1 << 4,
    SET_REPEAT = 1 << 5,
};

/* One option that takes a value; -1 for an unknown one. */
static int parse_value_opt(bench_opts *o, unsigned *set, const char *f, const char *v)
{
    if (strcmp(f, "--messages") == 0)
        o->messages = strtoull(v, NULL, 10), *set |= SET_MESSAGES;
    else if (strcmp(f, "--slow-messages") == 0)
        o->slow_messages = strtoull(v, NULL, 10), *set |= SET_SLOW;
    else if (strcmp(f, "--markers") == 0)
        o->markers = strtoull(v, NULL, 10), *set |= SET_MARKERS;
    else if (strcmp(f, "--big-markers") == 0)
        o->big_markers = strtoull(v, NULL, 10), *set |= SET_BIG;
    else if (strcmp(f, "--callgrind-events") == 0)
        o->callgrind_events = strtoull(v, NULL, 10), *set |= SET_CALLGRIND;
    else if (strcmp(f, "--latency-seconds") == 0)
        o->latency_seconds = strtod(v, NULL), *set |= SET_LATENCY;
    else if (strcmp(f, "--batch") == 0)
        o->batch = strtol(v, NULL, 10);
    else if (strcmp(f, "--repeat") == 0)
        o->repeat = (int)strtol(v, NULL, 10), *set |= SET_REPEAT;
    else if (strcmp(f, "--poll-ms") == 0)
        o->poll_ms = strtol(v, NULL, 10);
    else if (strcmp(f, "--ibus") == 0)
        o->ibus = v;
    else if (strcmp(f, "--plugin") == 0)
        o->plugin = v;
    else if (strcmp(f, "--bare") == 0)
        o->bare = v;
    else if (strcmp(f, "--nats-server") == 0)
        o->nats_server = v;
    else if (strcmp(f, "--valgrind") == 0)
        o->valgrind = v;
    else if (strcmp(f, "--tmp") == 0)
        o->tmp = v;
    else if (strcmp(f, "--baseline-ibus") == 0)
        o->baseline_ibus = v;
    else if (strcmp(f, "--baseline-plugin") == 0)
        o->baseline_plugin = v;
    else if (strcmp(f, "--only") == 0)
        o->only = v;
    else if (strcmp(f, "--rows") == 0)
        o->rows = v;
    else
        return -1;
    return 0;
}

/* --quick: small sizes for whatever the command line left at its default. */
static void apply_quick(bench_opts *o, unsigned set)
{
    if (!(set & SET_MESSAGES))
        o->messages = 3000;
    if (!(set & SET_SLOW))
        o->slow_messages = 200;
    if (!(set & SET_MARKERS))
        o->markers = 20000;
    if (!(set & SET_BIG))
        o->big_markers = 20000;
    if (!(set & SET_CALLGRIND))
        o->callgrind_events = 1000;
    if (!(set & SET_LATENCY))
        o->latency_seconds = 0.5;
    if (!(set & SET_REPEAT))
        o->repeat = 1;
}

static int parse_opts(bench_opts *o, int argc, char **argv)
{
    unsigned set = 0;
    opts_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(f, "--quick") == 0) {
            o->quick = true;
            continue;
        }
        if (strcmp(f, "--no-callgrind") == 0) {
            o->no_callgrind = true;
            continue;
        }
        if (strcmp(f, "--keep") == 0) {
            o->keep = true;
            continue;
        }
        if (strcmp(f, "--help") == 0 || v == NULL)
            return -1;
        i++;
        if (parse_value_opt(o, &set, f, v) != 0)
            return -1;
    }
    if (o->quick)
        apply_quick(o, set);
    if (o->messages < 100 || o->slow_messages < 20 || o->markers < 100 ||
        o->callgrind_events < 100 || o->latency_seconds <= 0 || o->repeat < 1 ||
        o->repeat > IB__BENCH_MAX_REPEAT || o->batch < 1 || o->batch > 4096 || o->poll_ms < 1)
        return -1;
    return 0;
}

/* Whether `name` is in the comma-separated `list` (NULL lists everything). */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    if (list == NULL)
        return true;
    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, name, len) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static bool wanted(const bench_opts *o, const char *name)
{
    return listed(o->only, name);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* ---- sections ------------------------------------------------------------ */

typedef struct bench {
    bench_opts o;
    ib__bench_env env;
    ib__bench_server server;
    ib__bench_cluster cluster; /* started only for the 3-replica kv: row */
    ib__bench_http http;       /* started only for the http plugin's row */
    natsConnection *nc;
    jsCtx *js;
    ib__bench_report r;
    int runs; /* durable names are unique within a run */
} bench;

static void progress(const char *what, const char *detail)
{
    fprintf(stderr, "consumer_bench: %s%s%s\n", what, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
}

/* Runs config `c` over `stream` (`total` messages) and measures it.
 * `*verified` is cleared later, by ib__bench_reap_all(), if the processes
 * turn out not to have exited cleanly: the caller sets it first. */
static bool measure_row(bench *b, ib__bench_rate *rate, bool *verified, ib__bench_shares *shares,
                        const ib__bench_config *c, const char *stream, uint64_t total)
{
    char durable[64];
    ib__bench_launch l;
    ib_error e;
    snprintf(durable, sizeof(durable), "run%d", ++b->runs);
    if (ib__bench_consumer_create(b->js, stream, durable, &e) != IB_OK ||
        ib__bench_launch_start(&l, &b->env, c, stream, durable, NULL, &e) != IB_OK) {
        progress(c->label, e.msg);
        return false;
    }
    ib__bench_watch w = {.pids = l.pids, .n = l.n, .server = b->server.pid};
    ib_status st =
        ib__bench_measure(rate, b->js, stream, durable, total, b->o.poll_ms, STALL_MS, &w, &e);
    rate->startup_ms = st == IB_OK ? (double)(rate->t_first_ns - l.started_ns) / 1e6 : 0;
    ib__bench_launch_retire(&l, total, verified, shares);
    if (st != IB_OK) {
        progress(c->label, e.msg);
        return false;
    }
    return true;
}

static bool fill(bench *b, const char *name, const char *subject, size_t messages, double dups,
                 uint64_t seed)
{
    ib_error e;
    ib__bench_stream_spec spec = {name, subject, messages, dups, seed};
    if (ib__bench_stream_fill(b->nc, b->js, &spec, &e) != IB_OK) {
        progress("publish", e.msg);
        return false;
    }
    return true;
}

/* The 3-node cluster of the 3-replica kv: row, in its own directory. */
static bool start_cluster(bench *b)
{
    char dir[700];
    ib_error e;
    if (b->env.kv_cluster != NULL)
        return true;
    snprintf(dir, sizeof(dir), "%s/cluster", b->env.dir);
    progress("starting a 3-node cluster in", dir);
    if (mkdir(dir, 0700) != 0) {
        progress("cluster", strerror(errno));
        return false;
    }
    if (ib__bench_cluster_start(&b->cluster, b->o.nats_server, dir, &e) != IB_OK) {
        progress("cluster", e.msg);
        return false;
    }
    b->env.kv_cluster = b->cluster.urls;
    return true;
}

/* The endpoint of the http row, started once for the run. */
static bool start_http(bench *b)
{
    ib_error e;
    if (b->env.http_url != NULL)
        return true;
    if (ib__bench_http_start(&b->http, &e) != IB_OK) {
        progress("http endpoint", e.msg);
        return false;
    }
    progress("http endpoint (answers 204) at", b->http.url);
    b->env.http_url = b->http.url;
    return true;
}

/* The file of the large-file row, filled once for the run. */
static bool big_template(bench *b)
{
    static char path[700];
    ib_error e;
    progress("filling a marker file", "big-template.db");
    if (ib__bench_big_template(path, sizeof(path), b->env.dir, b->o.big_markers, &e) != IB_OK) {
        progress("big-template.db", e.msg);
        return false;
    }
    b->env.big_template = path;
    b->r.big_markers = b->o.big_markers;
    struct stat st;
    char wal[720];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    b->r.big_file_bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    b->r.big_file_bytes += stat(wal, &st) == 0 ? (uint64_t)st.st_size : 0;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Adds one repetition's figures to a cell. */
static void cell_add(ib__bench_cell *cell, const ib__bench_rate *rate)
{
    cell->samples[cell->nsamples++] = rate->msgs_per_s;
    if (rate->startup_ms > cell->startup_ms)
        cell->startup_ms = rate->startup_ms;
    cell->consumer_cpu += rate->consumer_cpu;
    cell->server_cpu += rate->server_cpu;
}

/* The same cell with the baseline build, right after this build's: the
 * two share the minute's load. */
static void measure_baseline(bench *b, ib__bench_cell *cell, const ib__bench_config *c,
                             const char *stream)
{
    const char *ibus = b->env.ibus, *plugin = b->env.plugin;
    ib__bench_rate rate;
    bool verified = true;
    b->env.ibus = b->o.baseline_ibus;
    b->env.plugin = b->o.baseline_plugin != NULL ? b->o.baseline_plugin : plugin;
    progress(c->label, "the baseline build");
    if (measure_row(b, &rate, &verified, NULL, c, stream, b->o.messages) && verified) {
        cell->ok = true;
        cell->verified = true;
        cell_add(cell, &rate);
    }
    b->env.ibus = ibus;
    b->env.plugin = plugin;
    b->r.has_baseline = true;
}

/* Folds the samples of a cell into its median rate and mean CPU. */
static void cell_summarise(ib__bench_cell *c)
{
    double sorted[IB__BENCH_MAX_REPEAT];
    if (c->nsamples == 0) {
        c->ok = false;
        return;
    }
    memcpy(sorted, c->samples, sizeof(double) * (size_t)c->nsamples);
    qsort(sorted, (size_t)c->nsamples, sizeof(double), cmp_double);
    c->msgs_per_s = c->nsamples % 2 == 1
                        ? sorted[c->nsamples / 2]
                        : (sorted[c->nsamples / 2 - 1] + sorted[c->nsamples / 2]) / 2;
    c->consumer_cpu /= c->nsamples;
    c->server_cpu /= c->nsamples;
}

/* Every row over every stream, `repeat` times, the repetitions interleaved
 * so that a burst of load elsewhere on the machine hits one sample of many
 * cells rather than every sample of one; each cell reports its median. */
static void throughput(bench *b)
{
    char name[16], subject[32];
    for (size_t k = 0; k < IB__BENCH_COLUMNS; k++) {
        snprintf(name, sizeof(name), "B%d", (int)(ratios[k] * 100 + 0.5));
        snprintf(subject, sizeof(subject), "bench.b%d", (int)(ratios[k] * 100 + 0.5));
        progress("publishing", name);
        b->r.published[k] = fill(b, name, subject, b->o.messages, ratios[k], 1);
    }
    bool big = listed(b->o.rows, "12") && big_template(b);
    for (size_t i = 0; i < ROW_COUNT; i++) {
        char number[8];
        b->r.rows[i].label = rows[i].label;
        snprintf(number, sizeof(number), "%zu", i);
        b->r.rows[i].ran = listed(b->o.rows, number);
        /* Without its cluster the row runs nothing and reports n/a. */
        bool can = !b->r.rows[i].ran || rows[i].recorder != IB__BENCH_KV3 || start_cluster(b);
        can = can && (rows[i].recorder != IB__BENCH_SQLITE_BIG || big);
        can = can && (!b->r.rows[i].ran || rows[i].kind != IB__BENCH_IBUS_HTTP || start_http(b));
        for (size_t k = 0; k < IB__BENCH_COLUMNS; k++) {
            b->r.rows[i].cells[k].ok = b->r.published[k] && can;
            b->r.rows[i].cells[k].verified = true;
        }
    }
    for (int rep = 0; rep < b->o.repeat; rep++) {
        for (size_t i = 0; i < ROW_COUNT; i++) {
            if (!b->r.rows[i].ran)
                continue;
            for (size_t k = 0; k < IB__BENCH_COLUMNS; k++) {
                ib__bench_cell *cell = &b->r.rows[i].cells[k];
                ib__bench_rate rate;
                char what[64];
                if (!cell->ok)
                    continue;
                snprintf(name, sizeof(name), "B%d", (int)(ratios[k] * 100 + 0.5));
                snprintf(what, sizeof(what), "%s, repetition %d", name, rep + 1);
                progress(rows[i].label, what);
                if (!measure_row(b, &rate, &cell->verified, &cell->shares, &rows[i], name,
                                 b->o.messages)) {
                    cell->ok = false;
                    continue;
                }
                cell_add(cell, &rate);
                /* the big file is of this build's schema, which an older
                 * baseline refuses (exit 2) */
                if (b->o.baseline_ibus != NULL && rows[i].kind == IB__BENCH_IBUS &&
                    rows[i].recorder != IB__BENCH_SQLITE_BIG)
                    measure_baseline(b, &b->r.base[i].cells[k], &rows[i], name);
            }
        }
    }
    for (size_t i = 0; i < ROW_COUNT; i++)
        for (size_t k = 0; k < IB__BENCH_COLUMNS; k++) {
            if (b->r.rows[i].ran && b->r.rows[i].cells[k].ok)
                cell_summarise(&b->r.rows[i].cells[k]);
            if (b->r.base[i].cells[k].ok)
                cell_summarise(&b->r.base[i].cells[k]);
        }
    b->r.row_count = ROW_COUNT;
}

static void recorders(bench *b)
{
    static const struct {
        const char *label, *sync; /* sync NULL: memory */
        bool check_only;
    } kinds[IB__BENCH_RECORDER_ROWS] = {
        {"memory:", NULL, false},
        {"sqlite synchronous=normal", "normal", false},
        {"sqlite synchronous=full", "full", false},
        {"sqlite synchronous=normal, check_batch instead of claim_batch", "normal", true},
    };
    for (int i = 0; i < IB__BENCH_RECORDER_ROWS; i++) {
        char uri[700];
        ib_error e;
        b->r.recorder_labels[i] = kinds[i].label;
        if (kinds[i].sync == NULL)
            snprintf(uri, sizeof(uri), "memory:");
        else
            snprintf(uri, sizeof(uri), "sqlite:%s/recorder-%d.db?synchronous=%s", b->env.dir, i,
                     kinds[i].sync);
        progress("recorder in process", kinds[i].label);
        b->r.recorder_ok[i] =
            ib__bench_recorder_rate(&b->r.recorder_rate[i], uri, b->o.messages, (size_t)b->o.batch,
                                    kinds[i].check_only, &e) == IB_OK;
        if (!b->r.recorder_ok[i])
            progress(kinds[i].label, e.msg);
    }
}

/* Whether slow row `c` takes the longer stream (IB__BENCH_SLOW_FAST_SCALE). */
static bool slow_row_is_fast(const ib__bench_config *c)
{
    return c->sleep_ms == 1 && c->concurrency >= 8;
}

static void slow(bench *b)
{
    size_t fast_messages = b->o.slow_messages * IB__BENCH_SLOW_FAST_SCALE;
    if (!fill(b, "SLOW", "bench.slow", b->o.slow_messages, 0.10, 2) ||
        !fill(b, "SLOWFAST", "bench.slowfast", fast_messages, 0.10, 5))
        return;
    for (size_t i = 0; i < IB__BENCH_SLOW_ROWS; i++) {
        ib__bench_cell *cell = &b->r.slow[i];
        ib__bench_rate rate;
        bool fast = slow_row_is_fast(&slow_rows[i]);
        b->r.slow_labels[i] = slow_rows[i].label;
        cell->verified = true;
        progress(slow_rows[i].label, fast ? "SLOWFAST" : "SLOW");
        cell->ok =
            measure_row(b, &rate, &cell->verified, &cell->shares, &slow_rows[i],
                        fast ? "SLOWFAST" : "SLOW", fast ? fast_messages : b->o.slow_messages);
        cell->msgs_per_s = rate.msgs_per_s;
        cell->consumer_cpu = rate.consumer_cpu;
        cell->server_cpu = rate.server_cpu;
    }
}

static void latency(bench *b)
{
    /* Half the rate of the production setting measured above. */
    const ib__bench_cell *base = &b->r.rows[3].cells[1];
    if (!base->ok)
        return;
    b->r.latency_rate = base->msgs_per_s / 2;
    size_t messages = (size_t)(b->r.latency_rate * b->o.latency_seconds);
    if (messages < 200)
        messages = 200;
    for (size_t i = 0; i < 3; i++) {
        const ib__bench_config *c = &latency_rows[i];
        char stream[16], subject[32], durable[64];
        ib__bench_launch l;
        ib__bench_gen gen;
        ib_error e;
        ib__bench_latency *out = &b->r.latency[i];
        b->r.latency_labels[i] = c->label;
        snprintf(stream, sizeof(stream), "LAT%zu", i);
        snprintf(subject, sizeof(subject), "bench.lat%zu", i);
        snprintf(durable, sizeof(durable), "run%d", ++b->runs);
        progress(c->label, "latency");
        if (ib__bench_stream_create(b->js, stream, subject, &e) != IB_OK ||
            ib__bench_consumer_create(b->js, stream, durable, &e) != IB_OK ||
            ib__bench_gen_init(&gen, 0.10, 3, &e) != IB_OK) {
            progress(c->label, e.msg);
            continue;
        }
        if (ib__bench_launch_start(&l, &b->env, c, stream, durable, NULL, &e) != IB_OK) {
            ib__bench_gen_free(&gen);
            progress(c->label, e.msg);
            continue;
        }
        if (ib__bench_wait_pulling(b->js, stream, durable, 20000, &e) == IB_OK &&
            ib__bench_latency_run(out, b->nc, stream, subject, durable, &gen, messages,
                                  b->r.latency_rate, &e) == IB_OK)
            b->r.latency_ok[i] = true;
        else
            progress(c->label, e.msg);
        ib__bench_launch_retire(&l, messages, &b->r.latency_ok[i], NULL);
        ib__bench_gen_free(&gen);
    }
}

static void memory(bench *b)
{
    static const ib__bench_config sqlite_row = {
        "ibus run, sqlite normal", IB__BENCH_IBUS, IB__BENCH_SQLITE_NORMAL, 1, 0, 0, 0, 0};
    static const ib__bench_config memory_row = {
        "ibus run, memory recorder", IB__BENCH_IBUS, IB__BENCH_MEMORY, 1, 0, 0, 0, 0};
    ib__bench_rate rate;
    ib_error e;

    b->r.markers = b->o.markers;
    b->r.sqlite_rss_verified = true;
    b->r.memory_rss_verified = true;
    progress("publishing", "MARKERS");
    if (fill(b, "MARKERS", "bench.markers", b->o.markers, 0, 4)) {
        progress(sqlite_row.label, "MARKERS");
        b->r.sqlite_rss_ok = measure_row(b, &rate, &b->r.sqlite_rss_verified, NULL, &sqlite_row,
                                         "MARKERS", b->o.markers) &&
                             rate.hwm_done_kib > 0;
        b->r.sqlite_hwm_kib = rate.hwm_done_kib;
        b->r.sqlite_markers_rate = rate.msgs_per_s;

        progress(memory_row.label, "MARKERS");
        b->r.memory_rss_ok = measure_row(b, &rate, &b->r.memory_rss_verified, NULL, &memory_row,
                                         "MARKERS", b->o.markers) &&
                             rate.rss_first_kib > 0 && rate.rss_done_kib > 0;
        if (b->r.memory_rss_ok)
            b->r.memory_bytes_rss = (double)(rate.rss_done_kib - rate.rss_first_kib) * 1024.0 /
                                    (double)(b->o.markers - rate.acked_first);
        b->r.memory_hwm_kib = rate.hwm_done_kib;
    }
    progress("memory recorder in process", NULL);
    b->r.memory_stats_ok =
        ib__bench_memrec_bytes(&b->r.memory_bytes_stats, b->o.markers, &e) == IB_OK;
    if (!b->r.memory_stats_ok)
        progress("memory recorder in process", e.msg);
}

/* One callgrind run over `stream`; the instruction counts in `out`. */
static bool callgrind_one(bench *b, ib__bench_instr *out, const ib__bench_config *c,
                          const char *stream, uint64_t total)
{
    char durable[64], file[700];
    ib__bench_launch l;
    ib__bench_rate rate;
    ib_error e;
    snprintf(durable, sizeof(durable), "run%d", ++b->runs);
    snprintf(file, sizeof(file), "%s/callgrind.%s.out", b->env.dir, durable);
    if (ib__bench_consumer_create(b->js, stream, durable, &e) != IB_OK ||
        ib__bench_launch_start(&l, &b->env, c, stream, durable, file, &e) != IB_OK) {
        progress(c->label, e.msg);
        return false;
    }
    ib_status st =
        ib__bench_measure(&rate, b->js, stream, durable, total, 50, CALLGRIND_STALL_MS, NULL, &e);
    bool stopped = ib__bench_launch_stop(&l);
    if (st != IB_OK || !stopped) {
        progress(c->label, st != IB_OK ? e.msg : "ibus under callgrind did not exit 0");
        return false;
    }
    const char *function = c->kind == IB__BENCH_IBUS ? IB_BENCH_HOT_PATH : NULL;
    if (ib__bench_callgrind_read(out, file, function, &e) != IB_OK) {
        progress(c->label, e.msg);
        return false;
    }
    return true;
}

static void callgrind(bench *b)
{
    size_t n = b->o.callgrind_events;
    b->r.callgrind_events = n;
    /* Same seed: the first n messages of CG2 are those of CG1. */
    if (!fill(b, "CG1", "bench.cg1", n, 0.10, 5) || !fill(b, "CG2", "bench.cg2", 2 * n, 0.10, 5))
        return;
    for (size_t i = 0; i < IB__BENCH_CALLGRIND_ROWS; i++) {
        ib__bench_instr one, two;
        bool hot = callgrind_rows[i].kind == IB__BENCH_IBUS;
        b->r.callgrind_labels[i] = callgrind_rows[i].label;
        b->r.callgrind_has_hot[i] = hot;
        progress("callgrind", callgrind_rows[i].label);
        if (!callgrind_one(b, &one, &callgrind_rows[i], "CG1", n) ||
            !callgrind_one(b, &two, &callgrind_rows[i], "CG2", 2 * n))
            continue;
        if (two.total <= one.total || (hot && two.hot_path <= one.hot_path)) {
            progress("callgrind", "the larger run cost fewer instructions; discarded");
            continue;
        }
        b->r.instr_total[i] = (double)(two.total - one.total) / (double)n;
        b->r.instr_hot[i] = (double)(two.hot_path - one.hot_path) / (double)n;
        b->r.callgrind_ok[i] = true;
    }
}

/* First line of `nats-server --version`, e.g. "nats-server: v2.9.10". */
static void server_version(char *out, size_t len, const bench *b)
{
    char path[700];
    snprintf(out, len, "nats-server (version unknown)");
    snprintf(path, sizeof(path), "%s/nats-server.version", b->env.dir);
    char *argv[] = {(char *)b->o.nats_server, "--version", NULL};
    if (ib__bench_run(path, argv, 10000) != 0)
        return;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    if (fgets(out, (int)len, f) != NULL)
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static void describe_machine(bench *b)
{
    struct utsname u;
    time_t now = time(NULL);
    struct tm tm;
    char day[32], server[128];
    gmtime_r(&now, &tm);
    strftime(day, sizeof(day), "%Y-%m-%d %H:%M UTC", &tm);
    uname(&u);
    server_version(server, sizeof(server), b);
    snprintf(b->r.header, sizeof(b->r.header), "%s, %s %s, %ld CPUs, %s, nats.c %s, SQLite %s", day,
             u.sysname, u.release, sysconf(_SC_NPROCESSORS_ONLN), server, nats_GetVersion(),
             sqlite3_libversion());
}

int main(int argc, char **argv)
{
    static bench b;
    char dir[600];
    ib_error e;
    int code = 1;

    if (parse_opts(&b.o, argc, argv) != 0)
        return usage();
    snprintf(dir, sizeof(dir), "%s/consumer_bench.XXXXXX", b.o.tmp);
    if (mkdtemp(dir) == NULL) {
        perror("consumer_bench: mkdtemp");
        return 1;
    }
    b.env = (ib__bench_env){.ibus = b.o.ibus,
                            .plugin = b.o.plugin,
                            .http_plugin = IB_BENCH_HTTP_PLUGIN,
                            .bare = b.o.bare,
                            .valgrind = b.o.valgrind,
                            .dir = dir,
                            .batch = b.o.batch};
    progress("starting nats-server in", dir);
    if (ib__bench_server_start(&b.server, b.o.nats_server, dir, &e) != IB_OK) {
        progress("nats-server", e.msg);
        goto out_dir;
    }
    b.env.url = b.server.url;
    if (ib__bench_connect(&b.nc, &b.js, b.server.url, &e) != IB_OK) {
        progress("connect", e.msg);
        goto out_server;
    }
    describe_machine(&b);
    b.r.messages = b.o.messages;
    b.r.repeat = b.o.repeat;
    b.r.slow_messages = b.o.slow_messages;
    b.r.batch = b.o.batch;
    b.r.poll_ms = b.o.poll_ms;
    b.r.callgrind_skipped = b.o.no_callgrind && wanted(&b.o, "callgrind");

    if ((b.r.ran_throughput = wanted(&b.o, "throughput")))
        throughput(&b);
    if ((b.r.ran_recorders = wanted(&b.o, "recorders")))
        recorders(&b);
    if ((b.r.ran_slow = wanted(&b.o, "slow")))
        slow(&b);
    if ((b.r.ran_latency = wanted(&b.o, "latency") && b.r.ran_throughput))
        latency(&b);
    if ((b.r.ran_memory = wanted(&b.o, "memory")))
        memory(&b);
    if ((b.r.ran_callgrind = wanted(&b.o, "callgrind") && !b.o.no_callgrind))
        callgrind(&b);
    progress("waiting for the consumers to exit", NULL);
    ib__bench_reap_all();

    code = ib__bench_report_print(stdout, &b.r) ? 0 : 1;

    jsCtx_Destroy(b.js);
    natsConnection_Destroy(b.nc);
    ib__bench_cluster_stop(&b.cluster);
    ib__bench_http_stop(&b.http);
out_server:
    ib__bench_server_stop(&b.server);
out_dir:
    if (b.o.keep)
        progress("kept", dir);
    else
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    nats_Close();
    return code;
}
