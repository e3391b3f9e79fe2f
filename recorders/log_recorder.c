/* SPDX-License-Identifier: Apache-2.0 */
/* The partitioned consumer's recorder (log_recorder.h): claims and marks
 * answered from the owned partitions' tables, each step written as one
 * record per partition. */
#include "log_recorder.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "partition.h"
#include "recorder_internal.h"
#include "uuid.h"

/* A partition this process may own. */
typedef struct owned {
    ib_marker_table *table; /* NULL: not owned */
    uint64_t epoch;
    uint64_t sequence; /* of the last record sent */
    int64_t stop_at;   /* monotonic ms: decide nothing new from here on */
} owned;

/* One route: an id's partition. */
typedef struct route {
    uint8_t id[16];
    uint32_t partition;
    bool used;
} route;

typedef struct log_recorder {
    ib_recorder base;
    pthread_mutex_t mu;
    ib_marker_stream *stream;
    uint32_t partitions;
    owned *parts; /* by partition */
    route *routes;
    size_t routes_cap; /* a power of two */
    size_t routes_used;
    /* Scratch of the call in progress (one at a time, under `mu`), each
     * with room for `scratch_cap` keys: where each key lives, two flags
     * per key (what the call writes, what it counts), the keys a record
     * took already, and a record's entries. */
    struct placed *at;
    bool *pick, *count, *sent;
    size_t scratch_cap;
    /* The records the call in progress writes, sent together by
     * flush_records; where each one's entries and names start in the
     * pools below (pointed at only once the pools move no more). */
    ib_marker_log_record *recs;
    struct record_at {
        size_t entries, names;
    } * rec_at;
    size_t nrecs, recs_cap;
    ib_marker_log_entry *entries;
    size_t nentries, entries_cap;
    const char **names;
    size_t nnames_used, names_cap;
} log_recorder;

static log_recorder *lr_of(ib_recorder *r)
{
    return (log_recorder *)r;
}

/* ---- routes ------------------------------------------------------------- */

static size_t route_home(const uint8_t id[16], size_t mask)
{
    uint64_t h;
    memcpy(&h, id + 8, sizeof(h));
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & mask;
}

static route *route_slot(route *routes, size_t cap, const uint8_t id[16])
{
    for (size_t k = route_home(id, cap - 1);; k = (k + 1) & (cap - 1))
        if (!routes[k].used || memcmp(routes[k].id, id, 16) == 0)
            return &routes[k];
}

/* The partition of a packed id, or -1 when it is not routed. */
static int64_t route_find(const log_recorder *l, const uint8_t id[16])
{
    if (l->routes_used == 0)
        return -1;
    const route *s = route_slot(l->routes, l->routes_cap, id);
    return s->used ? (int64_t)s->partition : -1;
}

static bool routes_grow(log_recorder *l)
{
    size_t cap = l->routes_cap * 2;
    route *fresh = calloc(cap, sizeof(*fresh));
    if (fresh == NULL)
        return false;
    for (size_t i = 0; i < l->routes_cap; i++)
        if (l->routes[i].used)
            *route_slot(fresh, cap, l->routes[i].id) = l->routes[i];
    free(l->routes);
    l->routes = fresh;
    l->routes_cap = cap;
    return true;
}

ib_status ib_log_recorder_route(ib_recorder *r, const char *event_id, uint32_t partition,
                                ib_error *err)
{
    log_recorder *l = lr_of(r);
    uint8_t id[16];
    if (!ib_id_pack(id, event_id))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "log recorder: an id that is not normalised");
    if (partition >= l->partitions)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "log recorder: partition %u of %u", partition,
                            l->partitions);
    pthread_mutex_lock(&l->mu);
    ib_status st = IB_OK;
    if ((l->routes_used + 1) * 2 > l->routes_cap && !routes_grow(l)) {
        st = ib_error_set(err, IB_ERR_NOMEM, "log recorder: no memory for routes");
    } else {
        route *s = route_slot(l->routes, l->routes_cap, id);
        if (!s->used)
            l->routes_used++;
        *s = (route){.partition = partition, .used = true};
        memcpy(s->id, id, 16);
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

void ib_log_recorder_routes_clear(ib_recorder *r)
{
    log_recorder *l = lr_of(r);
    pthread_mutex_lock(&l->mu);
    if (l->routes_used > 0)
        memset(l->routes, 0, l->routes_cap * sizeof(*l->routes));
    l->routes_used = 0;
    pthread_mutex_unlock(&l->mu);
}

/* ---- ownership ---------------------------------------------------------- */

ib_status ib_log_recorder_own(ib_recorder *r, uint32_t partition, uint64_t epoch,
                              ib_marker_table *table, ib_error *err)
{
    log_recorder *l = lr_of(r);
    if (partition >= l->partitions || table == NULL) {
        ib_marker_table_free(table);
        return ib_error_set(err, IB_ERR_INVALID_ARG, "log recorder: cannot own partition %u",
                            partition);
    }
    pthread_mutex_lock(&l->mu);
    ib_marker_table_free(l->parts[partition].table);
    l->parts[partition] = (owned){.table = table, .epoch = epoch, .stop_at = INT64_MAX};
    pthread_mutex_unlock(&l->mu);
    return IB_OK;
}

void ib_log_recorder_hold_until(ib_recorder *r, uint32_t partition, int64_t stop_at_mono)
{
    log_recorder *l = lr_of(r);
    if (partition >= l->partitions)
        return;
    pthread_mutex_lock(&l->mu);
    l->parts[partition].stop_at = stop_at_mono;
    pthread_mutex_unlock(&l->mu);
}

void ib_log_recorder_disown(ib_recorder *r, uint32_t partition)
{
    log_recorder *l = lr_of(r);
    if (partition >= l->partitions)
        return;
    pthread_mutex_lock(&l->mu);
    ib_marker_table_free(l->parts[partition].table);
    l->parts[partition] = (owned){0};
    pthread_mutex_unlock(&l->mu);
}

bool ib_log_recorder_owns(ib_recorder *r, uint32_t partition)
{
    log_recorder *l = lr_of(r);
    if (partition >= l->partitions)
        return false;
    pthread_mutex_lock(&l->mu);
    bool owns = l->parts[partition].table != NULL;
    pthread_mutex_unlock(&l->mu);
    return owns;
}

ib_marker_table_stats ib_log_recorder_partition_stats(ib_recorder *r, uint32_t partition)
{
    log_recorder *l = lr_of(r);
    ib_marker_table_stats st = {0};
    if (partition >= l->partitions)
        return st;
    pthread_mutex_lock(&l->mu);
    if (l->parts[partition].table != NULL)
        st = ib_marker_table_stats_get(l->parts[partition].table);
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* ---- one key ------------------------------------------------------------ */

/* Where a key lives: its packed id, and the owned partition's table
 * (NULL when the id is not routed or its partition is not owned). */
typedef struct placed {
    uint8_t id[16];
    uint32_t partition;
    ib_marker_table *table;
} placed;

/* `deciding`: for a claim, a count or a renewal, which the partition's
 * stop time ends; a mark or an end of attempts records what happened
 * and is placed while the table is held. */
static placed place(const log_recorder *l, const char *event_id, bool deciding)
{
    placed p = {0};
    ib_id_pack(p.id, event_id); /* the wrappers checked the id */
    int64_t part = route_find(l, p.id);
    if (part >= 0 && l->parts[part].table != NULL &&
        (!deciding || ib_clock_monotonic_ms() < l->parts[part].stop_at)) {
        p.partition = (uint32_t)part;
        p.table = l->parts[part].table;
    }
    return p;
}

/* ---- the keys of one call ------------------------------------------------ */

static bool grow(void *pp, size_t n, size_t size)
{
    void **p = pp;
    void *grown = realloc(*p, n * size);
    if (grown == NULL)
        return false;
    *p = grown;
    return true;
}

/* Places the `n` keys of this call in l->at (`deciding` as for place) and clears l->pick and
 * l->count. Errors: IB_ERR_NOMEM. */
static ib_status view_keys(log_recorder *l, const ib_marker_key *keys, size_t n, bool deciding,
                           ib_error *err)
{
    if (n > l->scratch_cap) {
        if (!grow(&l->at, n, sizeof(*l->at)) || !grow(&l->pick, n, sizeof(bool)) ||
            !grow(&l->count, n, sizeof(bool)) || !grow(&l->sent, n, sizeof(bool)))
            return ib_error_set(err, IB_ERR_NOMEM, "log recorder: no memory for %zu keys", n);
        l->scratch_cap = n;
    }
    l->nrecs = l->nentries = l->nnames_used = 0;
    for (size_t i = 0; i < n; i++)
        l->at[i] = place(l, keys[i].event_id, deciding);
    memset(l->pick, 0, n * sizeof(bool));
    memset(l->count, 0, n * sizeof(bool));
    return IB_OK;
}

/* What the owned table knows of key i of the view (all 0 when its
 * partition is not owned here). */
static ib_pair_state pair_of(const log_recorder *l, const ib_marker_key *keys, size_t i)
{
    if (l->at[i].table == NULL)
        return (ib_pair_state){0};
    return ib_marker_table_lookup(l->at[i].table, keys[i].consumer, l->at[i].id);
}

/* ---- appending ---------------------------------------------------------- */

/* Room for one more record of up to `entries` entries and
 * IB_MARKER_LOG_CONSUMERS_MAX names. */
static bool reserve_record(log_recorder *l, size_t entries)
{
    if (l->nrecs == l->recs_cap) {
        size_t cap = l->recs_cap > 0 ? 2 * l->recs_cap : 8;
        if (!grow(&l->recs, cap, sizeof(*l->recs)) || !grow(&l->rec_at, cap, sizeof(*l->rec_at)))
            return false;
        l->recs_cap = cap;
    }
    if (l->nentries + entries > l->entries_cap) {
        size_t cap = 2 * (l->nentries + entries);
        if (!grow(&l->entries, cap, sizeof(*l->entries)))
            return false;
        l->entries_cap = cap;
    }
    if (l->nnames_used + IB_MARKER_LOG_CONSUMERS_MAX > l->names_cap) {
        size_t cap = 2 * (l->nnames_used + IB_MARKER_LOG_CONSUMERS_MAX);
        if (!grow(&l->names, cap, sizeof(*l->names)))
            return false;
        l->names_cap = cap;
    }
    return true;
}

/* Sends every record queued by this call together, then applies each to
 * its partition's table, in the order queued, once all are stored. */
static ib_status flush_records(log_recorder *l, ib_error *err)
{
    if (l->nrecs == 0)
        return IB_OK;
    for (size_t i = 0; i < l->nrecs; i++) {
        l->recs[i].entries = l->entries + l->rec_at[i].entries;
        l->recs[i].names = l->names + l->rec_at[i].names;
    }
    ib_status st = ib_marker_stream_append_all(l->stream, l->recs, l->nrecs, err);
    if (st != IB_OK && st != IB_ERR_NOMEM)
        err->status = st = IB_ERR_RECORDER; /* the message says what failed */
    for (size_t i = 0; st == IB_OK && i < l->nrecs; i++)
        st = ib_marker_table_apply(l->parts[l->recs[i].partition].table, &l->recs[i], err);
    l->nrecs = l->nentries = l->nnames_used = 0;
    return st;
}

/* Queues a `kind` record for every key i of the view with want[i] (NULL:
 * every key; each must be placed in an owned partition), one or more per
 * partition, in partition order; flush_records sends them. */
static ib_status queue_keys(log_recorder *l, ib_marker_log_kind kind, const ib_marker_key *keys,
                            const uint64_t *fps, const bool *want, size_t n, ib_error *err)
{
    const placed *at = l->at;
    bool *sent = l->sent;
    memset(sent, 0, n * sizeof(bool));
    for (size_t first = 0; first < n; first++) {
        if (sent[first] || (want != NULL && !want[first]) || at[first].table == NULL)
            continue;
        uint32_t p = at[first].partition;
        /* every key of partition p not queued yet, in records of at most
         * IB_MARKER_LOG_ENTRIES_MAX entries and IB_MARKER_LOG_CONSUMERS_MAX
         * names */
        ib_marker_log_record *rec = NULL;
        const char **names = NULL; /* rec's */
        ib_marker_log_entry *entries = NULL;
        for (size_t i = first; i < n; i++) {
            if (sent[i] || (want != NULL && !want[i]) || at[i].table == NULL ||
                at[i].partition != p)
                continue;
            size_t name = 0;
            while (rec != NULL && name < rec->nnames && strcmp(names[name], keys[i].consumer) != 0)
                name++;
            if (rec == NULL || rec->nentries == IB_MARKER_LOG_ENTRIES_MAX ||
                (name == rec->nnames && rec->nnames == IB_MARKER_LOG_CONSUMERS_MAX)) {
                size_t most = n < IB_MARKER_LOG_ENTRIES_MAX ? n : IB_MARKER_LOG_ENTRIES_MAX;
                if (!reserve_record(l, most))
                    return ib_error_set(err, IB_ERR_NOMEM, "log recorder: no memory for records");
                owned *o = &l->parts[p];
                l->rec_at[l->nrecs] = (struct record_at){l->nentries, l->nnames_used};
                rec = &l->recs[l->nrecs++];
                *rec = (ib_marker_log_record){
                    .kind = kind, .partition = p, .epoch = o->epoch, .sequence = ++o->sequence};
                names = l->names + l->nnames_used;
                entries = l->entries + l->nentries;
                l->nnames_used += IB_MARKER_LOG_CONSUMERS_MAX;
                l->nentries += most;
                name = 0;
            }
            if (name == rec->nnames)
                names[rec->nnames++] = keys[i].consumer;
            ib_marker_log_entry *e = &entries[rec->nentries++];
            e->consumer = (uint16_t)name;
            memcpy(e->id, at[i].id, 16);
            e->fingerprint = fps != NULL ? fps[i] : 0;
            sent[i] = true;
        }
    }
    return IB_OK;
}

/* Queues and sends at once: one kind of record for the keys picked. */
static ib_status append_keys(log_recorder *l, ib_marker_log_kind kind, const ib_marker_key *keys,
                             const uint64_t *fps, const bool *want, size_t n, ib_error *err)
{
    ib_status st = queue_keys(l, kind, keys, fps, want, n, err);
    return st == IB_OK ? flush_records(l, err) : st;
}

/* ---- the recorder calls ------------------------------------------------- */

/* How long a key of a partition not owned here is answered BUSY: the
 * caller naks it, and its partition's owner takes it. */
#define NOT_OURS_MS 1000

/* One claim of the view (see lr_acquire); l->pick[i] when it is claimed,
 * l->count[i] when its attempt is counted now. */
static ib_claim_info claim_one(log_recorder *l, const ib_marker_key *keys, const uint64_t *fps,
                               size_t i, const ib_claim_request *req, const ib__acquire_opts *opts)
{
    if (l->at[i].table == NULL)
        return (ib_claim_info){.state = IB_CLAIM_BUSY, .remaining_ms = NOT_OURS_MS};
    ib_pair_state s = pair_of(l, keys, i);
    uint64_t fp = fps != NULL ? fps[i] : 0;
    if (s.marked) {
        bool other = fp != 0 && s.fingerprint != 0 && fp != s.fingerprint;
        return (ib_claim_info){.state = other ? IB_CLAIM_CONFLICT : IB_CLAIM_DONE};
    }
    if (req->max_attempts > 0 && s.attempts >= req->max_attempts)
        return (ib_claim_info){.state = IB_CLAIM_EXHAUSTED, .attempts = s.attempts};
    if (opts != NULL && opts->taken_over != NULL)
        opts->taken_over[i] = s.in_flight; /* its call never came back */
    l->pick[i] = true;
    l->count[i] = opts == NULL || !opts->defer_attempts || (i == 0 && opts->count_key0);
    return (ib_claim_info){.state = IB_CLAIM_ACQUIRED, .attempts = s.attempts};
}

static ib_status lr_acquire(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                            const uint64_t *fps, size_t n, const ib_claim_request *req,
                            const ib__acquire_opts *opts, ib_error *err)
{
    log_recorder *l = lr_of(r);
    pthread_mutex_lock(&l->mu);
    ib_status st = view_keys(l, keys, n, true, err);
    bool any_count = false;
    for (size_t i = 0; st == IB_OK && i < n; i++) {
        if (opts != NULL && opts->taken_over != NULL)
            opts->taken_over[i] = false;
        out[i] = claim_one(l, keys, fps, i, req, opts);
        any_count |= l->count[i];
    }
    if (st == IB_OK)
        st = queue_keys(l, IB_MARKER_LOG_CLAIMED, keys, fps, l->pick, n, err);
    if (st == IB_OK && any_count)
        st = queue_keys(l, IB_MARKER_LOG_COUNTED, keys, fps, l->count, n, err);
    if (st == IB_OK)
        st = flush_records(l, err); /* both kinds in one round trip */
    for (size_t i = 0; st == IB_OK && i < n; i++)
        out[i].attempts += l->count[i];
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* Counts (COUNTED) the keys of the view in flight here whose count[i] is
 * set (`count` NULL: all of them; held[i] says which are in flight), and
 * with `release` frees every one of them (RELEASED). */
static ib_status count_and_release(log_recorder *l, bool *held, const ib_marker_key *keys,
                                   const bool *count, size_t n, bool release, ib_error *err)
{
    for (size_t i = 0; i < n; i++) {
        ib_pair_state s = pair_of(l, keys, i);
        held[i] = s.in_flight && !s.marked;
        l->pick[i] = held[i] && (count == NULL || count[i]);
    }
    ib_status st = queue_keys(l, IB_MARKER_LOG_COUNTED, keys, NULL, l->pick, n, err);
    if (st == IB_OK && release)
        st = queue_keys(l, IB_MARKER_LOG_RELEASED, keys, NULL, held, n, err);
    return st == IB_OK ? flush_records(l, err) : st;
}

static ib_status lr_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                   const bool *count, size_t n, const char *owner, int64_t lease_ms,
                                   bool release, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)owner;
    (void)lease_ms; /* the partition's lease covers every claim of it */
    pthread_mutex_lock(&l->mu);
    ib_status st = view_keys(l, keys, n, true, err);
    if (st == IB_OK)
        st = count_and_release(l, held, keys, count, n, release, err);
    pthread_mutex_unlock(&l->mu);
    return st;
}

static ib_status lr_renew(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                          const char *owner, int64_t lease_ms, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)owner;
    (void)lease_ms;
    pthread_mutex_lock(&l->mu);
    ib_status st = view_keys(l, keys, n, true, err);
    for (size_t i = 0; st == IB_OK && i < n; i++) {
        ib_pair_state s = pair_of(l, keys, i);
        held[i] = s.in_flight && !s.marked;
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

static ib_status lr_mark_owned(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                               const uint64_t *fps, size_t n, const char *owner, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)owner;
    pthread_mutex_lock(&l->mu);
    ib_status st = view_keys(l, keys, n, false, err);
    for (size_t i = 0; st == IB_OK && i < n; i++) {
        marked[i] = l->at[i].table != NULL;
        l->pick[i] = marked[i] && !pair_of(l, keys, i).marked; /* the first mark stands */
    }
    if (st == IB_OK)
        st = append_keys(l, IB_MARKER_LOG_DONE, keys, fps, l->pick, n, err);
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* Ends the attempts (ENDED) of keys placed in an owned partition; a key
 * that is not is an error (nothing can be decided for it here). */
static ib_status lr_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    log_recorder *l = lr_of(r);
    pthread_mutex_lock(&l->mu);
    ib_status st = view_keys(l, keys, n, false, err);
    for (size_t i = 0; st == IB_OK && i < n; i++)
        if (l->at[i].table == NULL)
            st = ib_error_set(err, IB_ERR_RECORDER,
                              "log recorder: an event of a partition this process does not own");
    if (st == IB_OK)
        st = append_keys(l, IB_MARKER_LOG_ENDED, keys, NULL, NULL, n, err);
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* Frees claims without counting an attempt (RELEASED). */
static ib_status lr_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                  const char *owner, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)owner;
    pthread_mutex_lock(&l->mu);
    ib_status st = view_keys(l, keys, n, false, err);
    /* l->count is all false after view_keys: nothing is counted */
    bool *held = malloc((n > 0 ? n : 1) * sizeof(*held));
    if (st == IB_OK && held == NULL)
        st = ib_error_set(err, IB_ERR_NOMEM, "log recorder: no memory");
    if (st == IB_OK)
        st = count_and_release(l, held, keys, l->count, n, true, err);
    free(held);
    pthread_mutex_unlock(&l->mu);
    return st;
}

static ib_status lr_release(ib_recorder *r, const char *consumer, const char *event_id,
                            const char *owner, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return lr_release_batch(r, &key, 1, owner, err);
}

static ib_status lr_mark_processed(ib_recorder *r, const char *consumer, const char *event_id,
                                   ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    bool marked = false;
    ib_status st = lr_mark_owned(r, &marked, &key, NULL, 1, "", err);
    if (st == IB_OK && !marked)
        st = ib_error_set(err, IB_ERR_RECORDER,
                          "log recorder: an event of a partition this process does not own");
    return st;
}

/* The pair of `consumer` and `event_id` in the partition it is routed
 * to, or else in any owned partition (an admin read names no route). */
static ib_pair_state find_pair(log_recorder *l, const char *consumer, const char *event_id)
{
    placed p = place(l, event_id, false);
    if (p.table != NULL)
        return ib_marker_table_lookup(p.table, consumer, p.id);
    for (uint32_t i = 0; i < l->partitions; i++) {
        if (l->parts[i].table == NULL)
            continue;
        ib_pair_state s = ib_marker_table_lookup(l->parts[i].table, consumer, p.id);
        if (s.known)
            return s;
    }
    return (ib_pair_state){0};
}

static ib_status lr_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                 const char *event_id, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)err;
    pthread_mutex_lock(&l->mu);
    *processed = find_pair(l, consumer, event_id).marked;
    pthread_mutex_unlock(&l->mu);
    return IB_OK;
}

static ib_status lr_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                            const char *event_id, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)err;
    pthread_mutex_lock(&l->mu);
    ib_pair_state s = find_pair(l, consumer, event_id);
    pthread_mutex_unlock(&l->mu);
    memset(out, 0, sizeof(*out));
    out->marked = s.marked;
    out->attempts = s.attempts;
    return IB_OK;
}

static ib_status lr_stats(ib_recorder *r, ib_recorder_stats *stats, ib_error *err)
{
    log_recorder *l = lr_of(r);
    (void)err;
    memset(stats, 0, sizeof(*stats));
    pthread_mutex_lock(&l->mu);
    for (uint32_t i = 0; i < l->partitions; i++) {
        if (l->parts[i].table == NULL)
            continue;
        ib_marker_table_stats st = ib_marker_table_stats_get(l->parts[i].table);
        stats->markers += st.marked;
    }
    pthread_mutex_unlock(&l->mu);
    return IB_OK;
}

static void lr_close(ib_recorder *r)
{
    log_recorder *l = lr_of(r);
    for (uint32_t i = 0; i < l->partitions; i++)
        ib_marker_table_free(l->parts[i].table);
    free(l->parts);
    free(l->routes);
    free(l->at);
    free(l->pick);
    free(l->count);
    free(l->sent);
    free(l->recs);
    free(l->rec_at);
    free(l->entries);
    free(l->names);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static const ib_recorder_ops log_ops = {
    .size = sizeof(ib_recorder_ops),
    .kind = "log",
    .is_processed = lr_is_processed,
    .mark_processed = lr_mark_processed,
    .close = lr_close,
    .release = lr_release,
    .release_batch = lr_release_batch,
    .stats = lr_stats,
    .features = IB_RECORDER_DURABLE_ATTEMPTS,
    .acquire_batch = lr_acquire,
    .renew_batch = lr_renew,
    .mark_owned_batch = lr_mark_owned,
    .end_attempts = lr_end_attempts,
    .inspect = lr_inspect,
    .count_attempts = lr_count_attempts,
};

ib_status ib_log_recorder_create(ib_recorder **out, ib_marker_stream *stream, uint32_t partitions,
                                 ib_error *err)
{
    *out = NULL;
    if (stream == NULL || partitions == 0 || partitions > IB_PARTITIONS_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "log recorder: needs a stream and 1 to %u partitions",
                            IB_PARTITIONS_MAX);
    log_recorder *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "log recorder: no memory");
    l->parts = calloc(partitions, sizeof(*l->parts));
    l->routes_cap = 256;
    l->routes = calloc(l->routes_cap, sizeof(*l->routes));
    if (l->parts == NULL || l->routes == NULL || pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l->parts);
        free(l->routes);
        free(l);
        return ib_error_set(err, IB_ERR_NOMEM, "log recorder: no memory");
    }
    l->base.ops = &log_ops;
    l->base.now_ms = ib_clock_realtime_ms;
    l->base.lease_now_ms = ib_clock_boottime_ms;
    l->stream = stream;
    l->partitions = partitions;
    *out = &l->base;
    return IB_OK;
}
