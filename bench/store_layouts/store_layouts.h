/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the files of store_layouts (bench/store_layouts.c), the
 * benchmark of candidate marker-file layouts (issue 30). It uses SQLite
 * alone: no recorder code, so it measures layouts, not an implementation.
 * Not installed, not part of any contract.
 *
 * Every layout runs the flow `ibus run` runs against its recorder, per
 * batch of ids: an acquire transaction (is the id marked? claimed by
 * another live owner? if neither, write a claim) and a mark transaction
 * (is the claim still ours? write the marker, drop the claim), each under
 * BEGIN IMMEDIATE, in WAL mode, with the connection settings of
 * ib__sl_store_open. Errors are fatal: a benchmark that measured something
 * other than what it says is worse than none, so every helper below dies
 * with a message naming what failed (ib__sl_die) instead of returning. */
#ifndef IB_STORE_LAYOUTS_H
#define IB_STORE_LAYOUTS_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IB__SL_CONSUMER "orders/billing/charge"
#define IB__SL_LEASE_MS 60000
#define IB__SL_DAY_MS 86400000LL
#define IB__SL_WEEK_MS (7 * IB__SL_DAY_MS)
#define IB__SL_PAGE_SIZE 4096
#define IB__SL_CACHE_KIB 8192 /* per connection, as the recorder sets it */
#define IB__SL_OWNER_MAX 48

/* ---- ids and streams (ids.c) ------------------------------------------- */

/* An event id: a uuid4 as 32 lowercase hex digits, and the 16 bytes they
 * spell (hex order is byte order, so both sort alike). */
typedef struct ib__sl_id {
    char hex[33];
    uint8_t raw[16];
} ib__sl_id;

/* The ids one run offers, in batches of `batch`: new uuid4 ids, and 10 %
 * duplicates, each repeating a new id of 2 to 8 batches earlier (marked by
 * then), as a redelivery would. */
typedef struct ib__sl_stream {
    ib__sl_id *ids;
    uint64_t *fps;      /* the payload fingerprint of each id */
    unsigned char *dup; /* 1: a duplicate, must be answered "marked" */
    size_t n, fresh;    /* ids offered, new ids among them */
    size_t batch;
} ib__sl_stream;

/* The markers a file is preloaded with: `n` random uuid4 ids in byte order,
 * each with a ts spread evenly over the week before `base_ms + WEEK` (a
 * week's retention) and a fingerprint, both derived from the id, so every
 * layout holds the same markers. */
typedef struct ib__sl_preload {
    uint8_t (*raw)[16];
    size_t n;
    int64_t base_ms;
    bool random_order; /* insert in the order drawn instead of sorted */
    size_t *order;     /* with random_order: a permutation of 0..n-1 */
} ib__sl_preload;

uint64_t ib__sl_rand(uint64_t *state);
uint64_t ib__sl_mix(uint64_t x);
/* Sets the uuid4 version and variant bits of raw and fills id from it. */
void ib__sl_id_make(ib__sl_id *id, const uint8_t raw[16]);
void ib__sl_id_random(ib__sl_id *id, uint64_t *rng);
void ib__sl_stream_make(ib__sl_stream *s, size_t fresh, size_t batch, uint64_t seed);
void ib__sl_stream_free(ib__sl_stream *s);
void ib__sl_preload_make(ib__sl_preload *p, size_t n, uint64_t seed, bool random_order);
void ib__sl_preload_free(ib__sl_preload *p);
/* The i-th marker to insert (sorted, or drawn order with random_order). */
const uint8_t *ib__sl_preload_raw(const ib__sl_preload *p, size_t i);
int64_t ib__sl_preload_ts(const ib__sl_preload *p, const uint8_t raw[16]);
uint64_t ib__sl_preload_fp(const uint8_t raw[16]);
/* Which day of the week (0 = oldest) a preloaded marker's ts falls on. */
int ib__sl_preload_day(const ib__sl_preload *p, const uint8_t raw[16]);

/* ---- the store: one connection and what it measured (db.c) ------------- */

/* What acquire answered for one id. */
enum { IB__SL_NEW = 1, IB__SL_MARKED, IB__SL_BUSY };

typedef struct ib__sl_batch {
    const ib__sl_id *ids;
    const uint64_t *fps;
    size_t n;
    unsigned char *verdict; /* acquire writes one per id; mark reads them */
    size_t lost;            /* mark: claims found no longer ours */
    int64_t now_ms;         /* unix ms: marker ts, and leases from it */
} ib__sl_batch;

typedef struct ib__sl_layout ib__sl_layout;

/* Per-transaction figures. hold: BEGIN IMMEDIATE returned to COMMIT
 * returned, the time the write lock is held; wait: BEGIN IMMEDIATE alone. */
typedef struct ib__sl_stats {
    double *hold_ms;
    size_t n, cap;
    bool keep; /* record hold times (the measured run) */
    double wait_max_ms;
    size_t checkpoints;
    double checkpoint_max_ms, checkpoint_total_ms;
    int64_t wal_max_bytes; /* largest WAL (frames x page) seen after a commit */
} ib__sl_stats;

typedef struct ib__sl_store {
    sqlite3 *db;
    const ib__sl_layout *layout;
    void *impl; /* the layout's own state, owned by its file */
    char owner[IB__SL_OWNER_MAX];
    int wal_frames;    /* frames in the WAL after the last commit (WAL hook) */
    double busy_since; /* when the current wait for the lock began */
    ib__sl_stats stats;
    sqlite3_stmt *begin, *commit, *rollback;
} ib__sl_store;

/* Prints "store_layouts: <message>" and exits 1. */
void ib__sl_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void ib__sl_check(sqlite3 *db, int rc, const char *what);
void ib__sl_exec(sqlite3 *db, const char *sql);
sqlite3_stmt *ib__sl_prepare(sqlite3 *db, const char *sql);
/* Steps: true on a row, false when done (the statement is then reset). */
bool ib__sl_row(sqlite3_stmt *st);
/* Steps a statement that returns no row, and resets it. */
void ib__sl_done(sqlite3_stmt *st);
int64_t ib__sl_int(sqlite3 *db, const char *sql);
double ib__sl_now_ms(void);   /* CLOCK_MONOTONIC */
int64_t ib__sl_unix_ms(void); /* CLOCK_REALTIME */

/* Opens `path` as `ibus run` does: WAL, synchronous as given (0 off ..
 * 3 extra), an 8 MiB page cache, a polling busy handler bounded at 10 s,
 * journal_size_limit 64 MiB, and the recorder's checkpoint policy (a WAL
 * hook counts frames; ib__sl_txn checkpoints passively past 16 MiB and
 * restarts past 32 MiB). The layout's open is not called. */
void ib__sl_store_open(ib__sl_store *s, const char *path, const ib__sl_layout *layout,
                       int synchronous);
/* Calls the layout's close, then closes the connection. */
void ib__sl_store_close(ib__sl_store *s);
/* One write transaction: BEGIN IMMEDIATE, body(s, ctx), COMMIT, then the
 * checkpoint policy. Returns the hold time in ms (also recorded in
 * s->stats when stats.keep). */
double ib__sl_txn(ib__sl_store *s, void (*body)(ib__sl_store *, void *), void *ctx);

/* ---- files (files.c) ---------------------------------------------------- */

uint64_t ib__sl_file_bytes(const char *path); /* 0 when missing */
uint64_t ib__sl_db_bytes(const char *path);   /* the file plus its -wal */
void ib__sl_remove_db(const char *path);      /* the file, -wal and -shm */
void ib__sl_copy_file(const char *from, const char *to);
/* Drops the file's pages from the OS page cache (a cold start). */
void ib__sl_evict(const char *path);
/* Reads the file through, so its pages are in the OS page cache. */
void ib__sl_read_through(const char *path);

/* ---- layouts ------------------------------------------------------------ */

/* The claim states a layout's acquire decides from. */
typedef struct ib__sl_claim {
    bool found;
    bool ours;
    int64_t expires_ms;
    int64_t attempts;
} ib__sl_claim;

/* The prune of the oldest day of markers. */
typedef struct ib__sl_prune {
    double max_ms;  /* the longest single write transaction */
    double total_s; /* all of it, checkpoints included */
    size_t txns;
    uint64_t rows;
} ib__sl_prune;

/* One candidate layout. Functions die on error. `body` functions run inside
 * a write transaction that the caller opened (ib__sl_txn). */
struct ib__sl_layout {
    const char *name;
    const char *preload_as; /* uses this layout's preload file; NULL = its own */
    /* Creates the tables on an empty file (inside a transaction). */
    void (*create)(ib__sl_store *s);
    /* Bulk-inserts the preload set (same transaction as create). */
    void (*preload)(ib__sl_store *s, const ib__sl_preload *p);
    /* Start-up: allocates s->impl, prepares, loads what the layout needs
     * before its first acquire. */
    void (*open)(ib__sl_store *s);
    void (*acquire)(ib__sl_store *s, void *batch);
    void (*mark)(ib__sl_store *s, void *batch); /* NULL: no mark transaction */
    /* After a commit of acquire (marked false) or mark (true); NULL = none. */
    void (*committed)(ib__sl_store *s, bool marked);
    /* After a rollback of acquire; NULL = nothing in memory to undo. */
    void (*rolled_back)(ib__sl_store *s);
    /* Deletes markers older than cutoff_ms in bounded transactions. */
    void (*prune)(ib__sl_store *s, int64_t cutoff_ms, size_t rows, ib__sl_prune *out);
    uint64_t (*count)(ib__sl_store *s); /* markers held */
    /* processed_log as an outside tool reads it: 0 none, 1 the lookup must
     * use the primary key (checked), 2 it cannot (measured anyway). */
    int view;
    void (*close)(ib__sl_store *s); /* frees s->impl */
};

extern const ib__sl_layout ib__sl_bare, ib__sl_plain, ib__sl_compact, ib__sl_compact_blob,
    ib__sl_journal, ib__sl_generations;

/* ---- helpers the B-tree layouts share (claims.c, prune.c) -------------- */

/* How a layout spells a key: (consumer TEXT, event_id TEXT), (cid
 * INTEGER, event_id TEXT) or (cid INTEGER, event_id BLOB of 16 bytes). */
typedef enum { IB__SL_KEY_TEXT, IB__SL_KEY_CID_HEX, IB__SL_KEY_CID_BLOB } ib__sl_key_kind;

typedef struct ib__sl_key {
    ib__sl_key_kind kind;
    const char *consumer;
    int64_t cid;
} ib__sl_key;

/* Binds ?1 (consumer or cid) and ?2 (the id) of st. */
void ib__sl_bind_key(sqlite3_stmt *st, const ib__sl_key *k, const ib__sl_id *id);

/* The claims table and the acquire/mark flow every B-tree layout shares;
 * only the "is it marked?" probe and the marker insert differ. */
typedef struct ib__sl_flow {
    ib__sl_key key;
    sqlite3_stmt *claim_get, *claim_put, *claim_del;
    sqlite3_stmt *marker_put; /* (?1 key, ?2 id, ?3 ts, ?4 fp) */
    bool (*is_marked)(ib__sl_store *s, const ib__sl_id *id);
} ib__sl_flow;

/* Creates processed_claims keyed the way `kind` says. */
void ib__sl_claims_create(sqlite3 *db, ib__sl_key_kind kind);
void ib__sl_flow_prepare(ib__sl_flow *f, sqlite3 *db);
void ib__sl_flow_finalize(ib__sl_flow *f);
void ib__sl_flow_acquire(ib__sl_store *s, ib__sl_flow *f, ib__sl_batch *b);
void ib__sl_flow_mark(ib__sl_store *s, ib__sl_flow *f, ib__sl_batch *b);
/* Reads the claim of one key (claim_get bound and stepped). */
void ib__sl_claim_read(ib__sl_claim *c, sqlite3_stmt *get, const char *owner);
/* Whether an id with claim c may be claimed now; false: BUSY. */
bool ib__sl_claim_free(const ib__sl_claim *c, int64_t now_ms);

/* The consumer's small integer in processed_consumers, added if missing
 * (compact layouts; once per transaction). */
void ib__sl_consumers_create(sqlite3 *db);
int64_t ib__sl_consumer_cid(sqlite3 *db, sqlite3_stmt *get, sqlite3_stmt *put, const char *name);

/* Deletes the rows of `table` with ts < cutoff in transactions that each
 * walk at most `rows` keys of its primary key (spelled as `kind` says): no
 * index on ts, as in the recorder. Adds to *out. */
void ib__sl_prune_ranges(ib__sl_store *s, const char *table, ib__sl_key_kind kind,
                         int64_t cutoff_ms, size_t rows, ib__sl_prune *out);
/* Adds one transaction's hold time to *out. */
void ib__sl_prune_note(ib__sl_prune *out, double hold_ms);

/* ---- options and results (store_layouts.c, run.c, lookup.c, procs.c) -- */

#define IB__SL_MAX_SIZES 8
#define IB__SL_MAX_REPEAT 9

typedef struct ib__sl_opts {
    size_t sizes[IB__SL_MAX_SIZES];
    size_t nsizes;
    size_t ids;   /* new ids per run */
    size_t batch; /* ids per transaction */
    int synchronous;
    const char *dir;
    bool keep, quick, random_order;
    const char *layouts; /* comma-separated names; NULL = all */
    int procs;           /* 1 = no multi-process variant */
    const char *procs_layouts;
    size_t procs_ids; /* new ids per process of the variant; 0 = 3 x ids */
    int join_ms;
    size_t prune_rows, lookups, scan_lookups;
    uint64_t seed;
    int repeat; /* runs per layout and size; the median is reported */
    /* --child: one process of the multi-process variant (procs.c) */
    const char *child_layout, *child_file, *child_report;
    int ready_fd;
} ib__sl_opts;

/* What one layout measured at one size. */
typedef struct ib__sl_result {
    bool ran;
    double preload_s;
    bool preload_reused;
    double start_cold_ms, start_warm_ms;
    size_t fresh; /* new ids the run marked */
    double seconds;
    double cpu_us; /* user + system CPU of this process per new id */
    double hold_p99_ms, hold_max_ms;
    double pages_written, cache_misses; /* per batch */
    size_t checkpoints;
    double checkpoint_max_ms;
    uint64_t markers, bytes; /* after the run: markers held, file + -wal */
    uint64_t file_bytes;     /* the file alone */
    int64_t seventh_ms;      /* run markers older than this are the first seventh */
    ib__sl_prune prune;
    bool pruned;
    int lookup_plan; /* 0 no view, 1 searched by the primary key, 2 scanned */
    double lookup_us;
    size_t lookups;
} ib__sl_result;

/* Calls `each` after every batch with the new ids marked so far. */
typedef void (*ib__sl_progress)(void *ctx, size_t fresh_done);

/* Runs the stream through the store's layout, verifying every answer:
 * a new id must be acquired and marked, a duplicate answered "marked".
 * Fills fresh, seconds, the transaction figures and seventh_ms of r. */
void ib__sl_run_stream(ib__sl_result *r, ib__sl_store *s, const ib__sl_stream *st,
                       ib__sl_progress each, void *ctx);
/* Opens the store and the layout, and runs the first batch's acquire
 * (rolled back, so the run starts from the same file). Returns the ms it
 * took; the store is left open. */
double ib__sl_start(ib__sl_store *s, const char *path, const ib__sl_layout *layout,
                    const ib__sl_opts *o, const ib__sl_stream *st);
/* Measures one layout on `work`, a fresh copy of a file of `preloaded`
 * markers: cold and warm start-up, the run of `st`, the file's bytes per
 * marker, and with `full` the outside lookup, then the prune of markers
 * older than cutoff_ms (0: the run's first seventh). */
void ib__sl_measure(ib__sl_result *r, const ib__sl_layout *layout, const char *work,
                    const ib__sl_opts *o, const ib__sl_stream *st, uint64_t preloaded,
                    int64_t cutoff_ms, bool full);
/* The outside tool's SELECT through processed_log, on its own connection:
 * checks the plan, dies if a layout that must search scans. */
void ib__sl_lookup(ib__sl_result *r, const char *path, const ib__sl_layout *layout,
                   const ib__sl_stream *st, const ib__sl_opts *o);

/* The multi-process variant (procs.c). */
typedef struct ib__sl_procs_result {
    bool ran;
    size_t fresh;
    double total_rate;  /* all new ids / first start to last end */
    double window_rate; /* while every process ran */
    double wait_max_ms;
    int64_t wal_max_bytes;
} ib__sl_procs_result;

/* Runs o->procs processes on `work` (a fresh copy of `preloaded`
 * markers), then checks that the file holds every marker they made. */
void ib__sl_procs_run(ib__sl_procs_result *r, const ib__sl_layout *layout, const char *work,
                      const ib__sl_opts *o, uint64_t preloaded);
int ib__sl_child_main(const ib__sl_opts *o);
/* Every layout, the baseline first (layouts.c). */
extern const ib__sl_layout *const ib__sl_layouts[];
extern const size_t ib__sl_nlayouts;
/* The layout of that name, or NULL. */
const ib__sl_layout *ib__sl_layout_named(const char *name);

/* Everything one run measured, for the tables (report.c). */
#define IB__SL_MAX_LAYOUTS 8

typedef struct ib__sl_table {
    const ib__sl_opts *o;
    const ib__sl_layout *layouts[IB__SL_MAX_LAYOUTS]; /* layouts[0] is bare */
    size_t nlayouts;
    ib__sl_result res[IB__SL_MAX_SIZES][IB__SL_MAX_LAYOUTS];
    ib__sl_procs_result procs[IB__SL_MAX_SIZES][IB__SL_MAX_LAYOUTS];
    char load_start[64], load_end[64];
} ib__sl_table;

/* A layout's preloaded file of one size (preload.c). */
typedef struct ib__sl_preloaded {
    char path[4200];
    double seconds; /* to make it, now or when it was made (reused) */
    bool reused;
    int64_t base_ms; /* its week of markers starts here (ib__sl_preload) */
} ib__sl_preloaded;

/* Makes the file of `layout` preloaded with `n` markers in dir, from *set
 * (drawn first when set->raw is NULL), or reuses the one found there when
 * it was made with the same options. */
void ib__sl_preload_ensure(ib__sl_preloaded *out, const char *dir, const ib__sl_layout *layout,
                           size_t n, const ib__sl_opts *o, ib__sl_preload *set);

/* Prints the tables as Markdown. */
void ib__sl_report(FILE *f, const ib__sl_table *t);

/* ---- the filter of a sealed generation (bloom.c) ----------------------- */

typedef struct ib__sl_bloom {
    uint64_t *words;
    uint64_t nbits; /* a multiple of 64; 0 = empty (answers "no") */
    uint64_t keys;
} ib__sl_bloom;

/* About 10 bits and 7 probes a key: 1 % false "maybe". */
void ib__sl_bloom_init(ib__sl_bloom *b, uint64_t keys);
void ib__sl_bloom_add(ib__sl_bloom *b, int64_t cid, const uint8_t raw[16]);
bool ib__sl_bloom_maybe(const ib__sl_bloom *b, int64_t cid, const uint8_t raw[16]);
/* Replaces b by the filter stored as `blob` (its words, host order). */
void ib__sl_bloom_load(ib__sl_bloom *b, const void *blob, size_t bytes, uint64_t keys);
void ib__sl_bloom_free(ib__sl_bloom *b);
/* Hex digits to bytes; false when `hex` is not 32 of them. */
bool ib__sl_hex_raw(uint8_t raw[16], const char *hex, size_t len);

#endif
