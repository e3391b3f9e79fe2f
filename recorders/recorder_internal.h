/* SPDX-License-Identifier: Apache-2.0 */
/* Internals shared by the recorder kinds and their tests; not installed.
 *
 * ib_recorder_open() splits in two steps so the URI grammar can be fuzzed
 * without touching the file system: ib__recorder_config_parse() turns a URI
 * plus options into an ib__recorder_config, then the kind's open function
 * builds the recorder from it. */
#ifndef IB_RECORDER_INTERNAL_H
#define IB_RECORDER_INTERNAL_H

#include <stdint.h>

#include "js_api.h"
#include "owner.h"
#include "recorder.h"

/* Whether a kind offers an optional op: a slot counts only if the kind's
 * ops table is large enough to hold it, so a kind built against an older,
 * shorter table is never read past its end. */
#define IB__HAS_OP(r, field)                                                                       \
    ((r)->ops->size >= offsetof(ib_recorder_ops, field) + sizeof((r)->ops->field) &&               \
     (r)->ops->field != NULL)

/* Longest path a sqlite: URI may name. */
#define IB__RECORDER_PATH_MAX 4096

typedef enum ib__recorder_kind {
    IB__RECORDER_MEMORY = 0,
    IB__RECORDER_SQLITE = 1,
    IB__RECORDER_KV = 2,
} ib__recorder_kind;

/* SQLite `synchronous` levels, numbered as the pragma reads them back. */
typedef enum ib__sqlite_sync {
    IB__SQLITE_SYNC_OFF = 0,
    IB__SQLITE_SYNC_NORMAL = 1,
    IB__SQLITE_SYNC_FULL = 2,
    IB__SQLITE_SYNC_EXTRA = 3,
} ib__sqlite_sync;

/* Everything a kind needs to open, after options and URI were merged. */
typedef struct ib__recorder_config {
    ib__recorder_kind kind;
    char path[IB__RECORDER_PATH_MAX]; /* sqlite: file path or ":memory:"; kv: bucket */
    size_t memory_capacity;           /* 0 = unbounded */
    int busy_timeout_ms;              /* > 0 */
    ib__sqlite_sync synchronous;
    unsigned file_mode; /* permission bits for a new file */
    /* sqlite: accept a file of another owner, or writable by others */
    bool allow_insecure;
    int64_t (*now_ms)(void);
    int64_t (*lease_now_ms)(void);
    void *nats_connection;
    /* kv: from the URI's parameters (see kv.c) */
    int kv_replicas;                      /* 0 = not given: bind to any, create with 1 */
    int64_t kv_ttl_ms;                    /* -1 = not given; 0 = keep forever */
    int64_t kv_min_ttl_ms;                /* refuse a bucket keeping keys for less; 0 = no floor */
    int64_t kv_max_bytes;                 /* 0 = not given (unlimited when created) */
    bool kv_create;                       /* create the bucket when it is missing */
    char kv_url[512];                     /* "" = use nats_connection */
    char kv_creds[IB__RECORDER_PATH_MAX]; /* credentials file for kv_url; "" = none */
    /* JetStream API prefix (js_api.h) of the bucket's JetStream: from the
     * URI's domain= or api_prefix=, else, without url=, the one the caller
     * gives with its connection, else "$JS.API" */
    char kv_api_prefix[IB_JS_API_PREFIX_MAX];
} ib__recorder_config;

/* Largest memory capacity accepted; slot numbers are 32-bit. */
#define IB__MEMORY_CAPACITY_MAX ((size_t)1 << 30)
/* Largest busy timeout accepted: one day. */
#define IB__BUSY_TIMEOUT_MAX_MS 86400000
/* Most replicas a JetStream stream may have. */
#define IB__KV_REPLICAS_MAX 5
/* Longest kv: bucket name. */
#define IB__KV_BUCKET_MAX 200
/* Longest bucket TTL (and min_ttl) a kv: URI may give: ten years. */
#define IB__KV_TTL_MAX_MS (10LL * 366 * 86400000)

/* Parses `uri` over `options` (NULL = defaults) into `cfg`. Touches nothing
 * outside its arguments. IB_ERR_CONFIG for a bad URI or option, with a
 * message naming the URI and the reason. */
ib_status ib__recorder_config_parse(ib__recorder_config *cfg, const char *uri,
                                    const ib_recorder_options *options, ib_error *err);

/* Kind constructors; `*out` is owned by the caller (ib_recorder_close). */
ib_status ib__memory_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err);
ib_status ib__sqlite_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err);
ib_status ib__kv_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err);

/* How long a claim held by `holder` (lease ending at `expires` on the lease
 * clock, now `now`) still keeps `owner` out, in ms; 0 when `owner` may take
 * it: free (holder NULL or ""), its own, ended, or held by a holder proven
 * gone (with `probe`). A holder proven alive keeps an ended lease for one
 * more `lease_ms`. `host_local` as for ib_owner_liveness_of(). */
int64_t ib__claim_hold_ms(const char *holder, const char *owner, int64_t expires, int64_t now,
                          int64_t lease_ms, bool probe, bool host_local);

/* ---- summaries (summary.c): what the kinds' summarize ops build ---------- */

/* A list of consumer summaries being filled. Zero-initialise it. */
typedef struct ib__summary_list {
    ib__consumer_summary *v;
    size_t n, cap;
    size_t last; /* index of the entry found last: kinds visit one consumer's keys in a row */
} ib__summary_list;

/* The entry of the `len` bytes of `consumer`, added (zeroed, name copied)
 * when the list has none; NULL when out of memory. */
ib__consumer_summary *ib__summary_entry(ib__summary_list *l, const char *consumer, size_t len);

/* Counts a marker made at `ts_ms`. */
void ib__summary_marker(ib__consumer_summary *s, int64_t ts_ms);

/* Counts a held claim whose lease still runs `left_ms` (negative: ended
 * that long ago), held by `owner`. */
void ib__summary_claim(ib__consumer_summary *s, int64_t left_ms, const char *owner);

/* Counts a key with `attempts` (> 0) handler attempts, not marked. */
void ib__summary_attempts(ib__consumer_summary *s, uint32_t attempts, uint32_t max_attempts);

/* Hands the list over as ib__recorder_summarize's result. */
void ib__summary_take(ib__summary_list *l, ib__consumer_summary **out, size_t *n);

/* When a lease of `lease_ms` taken at `now` (lease clock, >= 0) ends:
 * INT64_MAX rather than an overflow for a lease too long to add. Inline:
 * every claim and renewal of both kinds computes it. */
static inline int64_t ib__lease_end(int64_t now, int64_t lease_ms)
{
    return lease_ms > INT64_MAX - now ? INT64_MAX : now + lease_ms;
}

#endif
