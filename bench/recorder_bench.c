/* SPDX-License-Identifier: Apache-2.0 */
/* recorder_bench: events/s of the idempotent flow on each recorder, beside
 * a plain SQLite loop measured in the same run.
 *
 * The stream has 10% duplicates: a duplicate repeats an event seen at
 * least a few batches earlier (a redelivery), so no batch holds one id
 * twice. Each flow is check (or claim) -> handle (no-op) -> mark, and must
 * handle exactly the distinct ids, which the bench verifies.
 *
 * The baseline is what a hand-written recorder would do at best: the
 * spec's table in a fresh WAL file with synchronous=NORMAL, one prepared
 * INSERT OR IGNORE per event (duplicates included), all in ONE
 * transaction. The recorder flows commit per mark or per batch, as marks
 * must be durable before an ack; a second plain row commits every 256
 * inserts, to show what per-batch commits cost before any recorder work.
 *
 * usage: recorder_bench [--quick] [--events N] [--checks N] [--dir DIR] [--only FLOW] */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder.h"
#include "uuid.h"

#define CONSUMER "bench/plugin/handler"
#define OWNER "bench-owner"
#define LEASE_MS 60000
#define DUP_DISTANCE 1024 /* a duplicate repeats an event at least this far back */

typedef struct stream {
    char (*ids)[IB_ID_BUF_SIZE];
    size_t n;
    size_t distinct;
} stream;

typedef struct result {
    const char *name;
    size_t events;
    double seconds;
} result;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* uuid4-shaped random ids, as producers send them. */
static void random_id(char out[IB_ID_BUF_SIZE])
{
    uint8_t b[16];
    uint64_t x = next_rand(), y = next_rand();
    memcpy(b, &x, 8);
    memcpy(b + 8, &y, 8);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    ib_id_unpack(out, b);
}

static int make_stream(stream *s, size_t n)
{
    s->ids = malloc(n * sizeof(*s->ids));
    if (s->ids == NULL)
        return -1;
    s->n = n;
    s->distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (i >= DUP_DISTANCE && next_rand() % 10 == 0) {
            size_t j = next_rand() % (i - DUP_DISTANCE + 1);
            memcpy(s->ids[i], s->ids[j], IB_ID_BUF_SIZE);
        } else {
            random_id(s->ids[i]);
            s->distinct++;
        }
    }
    return 0;
}

static void die(const char *what, const ib_error *err)
{
    fprintf(stderr, "recorder_bench: %s: %s\n", what, err != NULL ? err->msg : "");
    exit(1);
}

static ib_recorder *open_recorder(const char *uri)
{
    ib_recorder *r = NULL;
    ib_error err;
    if (ib_recorder_open(&r, uri, NULL, &err) != IB_OK)
        die(uri, &err);
    return r;
}

static void remove_db(const char *path)
{
    char p[4200];
    unlink(path);
    snprintf(p, sizeof(p), "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", path);
    unlink(p);
}

static void check_handled(const char *flow, size_t handled, const stream *s)
{
    if (handled != s->distinct) {
        fprintf(stderr, "recorder_bench: %s handled %zu events, expected %zu\n", flow, handled,
                s->distinct);
        exit(1);
    }
}

/* check -> handle -> mark, one event at a time. */
static double flow_single(ib_recorder *r, const stream *s, const char *flow)
{
    ib_error err;
    size_t handled = 0;
    double t0 = now_s();
    for (size_t i = 0; i < s->n; i++) {
        bool done = false;
        if (ib_recorder_is_processed(r, &done, CONSUMER, s->ids[i], &err) != IB_OK)
            die("is_processed", &err);
        if (done)
            continue;
        handled++; /* the handler: a no-op */
        if (ib_recorder_mark(r, CONSUMER, s->ids[i], &err) != IB_OK)
            die("mark", &err);
    }
    double t = now_s() - t0;
    check_handled(flow, handled, s);
    return t;
}

/* Claims and marks one batch the way `flow` names: the host's calls
 * (acquire_batch, mark_owned_batch) or the plain ones. */
static void claim_keys(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys, size_t n,
                       bool host)
{
    ib_error err;
    ib_claim_info info[256];
    if (!host || n > 256) {
        if (ib_recorder_claim_batch(r, states, keys, n, OWNER, LEASE_MS, &err) != IB_OK)
            die("claim_batch", &err);
        return;
    }
    ib_claim_request req = {.owner = OWNER, .lease_ms = LEASE_MS};
    if (ib_recorder_acquire_batch(r, info, keys, n, &req, &err) != IB_OK)
        die("acquire_batch", &err);
    for (size_t i = 0; i < n; i++)
        states[i] = info[i].state;
}

static void mark_keys(ib_recorder *r, const ib_marker_key *keys, size_t n, bool host)
{
    ib_error err;
    bool marked[256];
    if (!host || n > 256) {
        if (ib_recorder_mark_batch(r, keys, n, &err) != IB_OK)
            die("mark_batch", &err);
        return;
    }
    if (ib_recorder_mark_owned_batch(r, marked, keys, n, OWNER, &err) != IB_OK)
        die("mark_owned_batch", &err);
}

/* claim -> handle the acquired -> mark those (see claim_keys). */
static double flow_batch(ib_recorder *r, const stream *s, size_t batch, const char *flow)
{
    bool host = strstr(flow, "acquire") != NULL;
    ib_marker_key *keys = malloc(batch * sizeof(*keys));
    ib_marker_key *won = malloc(batch * sizeof(*won));
    ib_claim_state *states = malloc(batch * sizeof(*states));
    if (keys == NULL || won == NULL || states == NULL)
        die("malloc", NULL);
    size_t handled = 0;
    double t0 = now_s();
    for (size_t at = 0; at < s->n; at += batch) {
        size_t n = s->n - at < batch ? s->n - at : batch, nwon = 0;
        for (size_t i = 0; i < n; i++)
            keys[i] = (ib_marker_key){CONSUMER, s->ids[at + i]};
        claim_keys(r, states, keys, n, host);
        for (size_t i = 0; i < n; i++)
            if (states[i] == IB_CLAIM_ACQUIRED)
                won[nwon++] = keys[i];
        handled += nwon; /* the handlers: no-ops */
        mark_keys(r, won, nwon, host);
    }
    double t = now_s() - t0;
    check_handled(flow, handled, s);
    free(keys);
    free(won);
    free(states);
    return t;
}

static void sql_or_die(sqlite3 *db, int rc, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "recorder_bench: baseline %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

/* The plain loop: same kind of file, same keys, one transaction every
 * `per_tx` events (0 = one transaction for the whole stream). */
static double baseline(const char *path, const stream *s, size_t per_tx)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    remove_db(path);
    sql_or_die(db, sqlite3_open(path, &db), "open");
    sql_or_die(db, sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL), "wal");
    sql_or_die(db, sqlite3_exec(db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL), "sync");
    sql_or_die(db,
               sqlite3_exec(db,
                            "CREATE TABLE processed_log (consumer TEXT NOT NULL, event_id TEXT "
                            "NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (consumer, event_id)) "
                            "WITHOUT ROWID",
                            NULL, NULL, NULL),
               "create");
    double t0 = now_s();
    sql_or_die(db,
               sqlite3_prepare_v2(db,
                                  "INSERT OR IGNORE INTO processed_log (consumer, event_id, ts) "
                                  "VALUES (?1, ?2, ?3)",
                                  -1, &ins, NULL),
               "prepare");
    if (per_tx == 0)
        per_tx = s->n;
    for (size_t i = 0; i < s->n; i++) {
        if (i % per_tx == 0)
            sql_or_die(db, sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), "begin");
        sqlite3_bind_text(ins, 1, CONSUMER, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, s->ids[i], IB_ID_LEN, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 3, (sqlite3_int64)i);
        sql_or_die(db, sqlite3_step(ins), "insert");
        sqlite3_reset(ins);
        if (i % per_tx == per_tx - 1 || i == s->n - 1)
            sql_or_die(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
    }
    double t = now_s() - t0;
    sqlite3_finalize(ins);
    sqlite3_close(db);
    remove_db(path);
    return t;
}

static double sqlite_run(const char *path, const stream *s, size_t batch, const char *flow)
{
    char uri[4200];
    remove_db(path);
    snprintf(uri, sizeof(uri), "sqlite:%s?synchronous=normal", path);
    ib_recorder *r = open_recorder(uri);
    double t = batch == 0 ? flow_single(r, s, flow) : flow_batch(r, s, batch, flow);
    ib_recorder_close(r);
    remove_db(path);
    return t;
}

static void print_row(const result *x, double base_rate)
{
    double rate = (double)x->events / x->seconds;
    printf("%-46s %9zu %9.3f %12.0f %8.2fx\n", x->name, x->events, x->seconds, rate,
           rate / base_rate);
}

typedef struct bench_opts {
    size_t events;
    size_t checks;
    const char *only; /* run only the flows whose name holds this */
    const char *dir;
} bench_opts;

/* Returns 0, or 2 after printing the usage. */
static int parse_opts(bench_opts *o, int argc, char **argv)
{
    *o = (bench_opts){.events = 200000, .checks = 10000000, .dir = getenv("TMPDIR")};
    if (o->dir == NULL || o->dir[0] == '\0')
        o->dir = P_tmpdir;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o->events = 5000;
            o->checks = 200000;
        } else if (strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
            o->events = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--checks") == 0 && i + 1 < argc) {
            o->checks = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            o->dir = argv[++i];
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            o->only = argv[++i];
        } else {
            fprintf(stderr, "usage: recorder_bench [--quick] [--events N] [--checks N] "
                            "[--dir DIR] [--only FLOW]\n");
            return 2;
        }
    }
    if (o->events < 2 * DUP_DISTANCE)
        o->events = 2 * DUP_DISTANCE;
    if (o->checks < 10)
        o->checks = 10;
    return 0;
}

#define MAX_ROWS 10

/* The baselines, then every flow `only` selects, into `rows`; returns how
 * many. rows[0] is always the one-transaction baseline. */
static size_t run_flows(result rows[MAX_ROWS], const bench_opts *o, const stream *s,
                        const char *path)
{
    static const struct {
        const char *name;
        bool sqlite;
        size_t batch;
    } flows[] = {
        {"sqlite: check -> mark, 1 transaction per mark", true, 0},
        {"sqlite: claim_batch/mark_batch of 64", true, 64},
        {"sqlite: claim_batch/mark_batch of 256", true, 256},
        {"sqlite: acquire_batch/mark_owned_batch of 256", true, 256},
        {"memory: check -> mark", false, 0},
        {"memory: claim_batch/mark_batch of 256", false, 256},
    };
    size_t nrows = 0;
    rows[nrows++] =
        (result){"plain sqlite3 INSERT OR IGNORE, 1 transaction", o->events, baseline(path, s, 0)};
    /* What any design that commits every 256 marks starts from: the same
     * plain loop, committing as often as the batched flow does. */
    if (o->only == NULL || strstr(o->only, "256") != NULL)
        rows[nrows++] = (result){"plain sqlite3 INSERT OR IGNORE, 1 tx per 256", o->events,
                                 baseline(path, s, 256)};
    for (size_t f = 0; f < sizeof(flows) / sizeof(flows[0]); f++) {
        if (o->only != NULL && strstr(flows[f].name, o->only) == NULL)
            continue;
        double t;
        if (flows[f].sqlite) {
            t = sqlite_run(path, s, flows[f].batch, flows[f].name);
        } else {
            ib_recorder *r = open_recorder("memory:");
            t = flows[f].batch == 0 ? flow_single(r, s, flows[f].name)
                                    : flow_batch(r, s, flows[f].batch, flows[f].name);
            ib_recorder_close(r);
        }
        rows[nrows++] = (result){flows[f].name, o->events, t};
    }
    return nrows;
}

/* Checks alone, on a memory recorder holding the stream: 90% hits. Returns
 * the seconds `checks` checks took; `stats` gets the recorder's stats. */
static double memory_checks(ib_recorder_stats *stats, const stream *s, size_t checks)
{
    ib_recorder *m = open_recorder("memory:");
    ib_marker_key *keys = malloc(s->n * sizeof(*keys));
    ib_error err;
    if (keys == NULL)
        die("malloc", NULL);
    for (size_t i = 0; i < s->n; i++)
        keys[i] = (ib_marker_key){CONSUMER, s->ids[i]};
    if (ib_recorder_mark_batch(m, keys, s->n, &err) != IB_OK)
        die("mark_batch", &err);
    free(keys);
    double t0 = now_s();
    size_t hits = 0;
    for (size_t i = 0; i < checks; i++) {
        bool p = false;
        /* In stream order: the ids are random, so the lookups are too, but
         * the harness itself does not add a cache miss per check. */
        const char *id = s->ids[i % s->n];
        if (i % 10 == 9)
            id = "00000000000040008000000000000000";
        if (ib_recorder_is_processed(m, &p, CONSUMER, id, &err) != IB_OK)
            die("is_processed", &err);
        hits += p;
    }
    double tc = now_s() - t0;
    if (hits != checks - checks / 10)
        die("memory checks gave wrong answers", NULL);
    if (ib_recorder_stats_get(m, stats, &err) != IB_OK)
        die("stats", &err);
    ib_recorder_close(m);
    return tc;
}

int main(int argc, char **argv)
{
    bench_opts o;
    if (parse_opts(&o, argc, argv) != 0)
        return 2;
    stream s;
    if (make_stream(&s, o.events) != 0)
        die("malloc", NULL);
    char path[4096];
    snprintf(path, sizeof(path), "%s/recorder_bench.%d.db", o.dir, (int)getpid());

    result rows[MAX_ROWS];
    size_t nrows = run_flows(rows, &o, &s, path);
    ib_recorder_stats st;
    double tc = memory_checks(&st, &s, o.checks);

    printf("recorder_bench: %zu events (%zu distinct, %.0f%% duplicates), SQLite %s, file in %s\n",
           o.events, s.distinct, 100.0 * (double)(o.events - s.distinct) / (double)o.events,
           sqlite3_libversion(), o.dir);
    printf("%-46s %9s %9s %12s %9s\n", "flow", "events", "seconds", "events/s", "vs plain");
    double base_rate = (double)o.events / rows[0].seconds;
    for (size_t i = 0; i < nrows; i++)
        print_row(&rows[i], base_rate);
    printf("memory: %zu is_processed checks in %.3f s = %.2f M checks/s (1 thread)\n", o.checks, tc,
           (double)o.checks / tc / 1e6);
    printf("memory: %llu markers in %llu bytes = %.1f bytes/marker\n",
           (unsigned long long)st.markers, (unsigned long long)st.storage_bytes,
           (double)st.storage_bytes / (double)st.markers);
    free(s.ids);
    return 0;
}
