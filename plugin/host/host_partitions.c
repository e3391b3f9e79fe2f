/* SPDX-License-Identifier: Apache-2.0 */
/* A partitioned consumer (ibus run --partitions N; docs/partitions.md):
 * which partitions this process owns, and what changes when that does.
 *
 * Every tick (a second, or a third of the lease when shorter; on the
 * batch thread between batches) the process announces itself, reads the
 * live members, and computes by rendezvous hashing which partitions it
 * should own. Then, per partition:
 *   owned, still ours      renew the lease (every third of the lease);
 *   owned, another's now   hand it over: stop pulling it (what the puller
 *                          held is nak'ed at once), give the lease back;
 *   not owned, ours now    take the lease, replay the partition's marker
 *                          log into a table, hand the table to the log
 *                          recorder, and pull the partition's durable.
 * Between batches, so no handler of a partition runs while it changes
 * hands here. A lease that cannot be renewed is dropped once its stop
 * time passes (partition_lease.h), and a message of a partition not owned
 * (or past that time) is nak'ed unrun: only the owner starts handlers.
 *
 * A partition's durable is "<durable>_p<P>", filtered to "<base>.<P>.*";
 * leases and members live in the bucket "ibus_fleet_<durable>", the
 * marker log in the stream "IBUS_MARKERS_<durable>" on subjects
 * "ibus.markers.<durable>.<P>". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fleet_members.h"
#include "host_internal.h"
#include "log.h"
#include "log_recorder.h"
#include "marker_stream.h"
#include "partition.h"
#include "partition_lease.h"
#include "rendezvous.h"

/* One partition as this process sees it. */
typedef struct fleet_part {
    bool owned;
    bool pulled;             /* its durable was added to the puller */
    ib_lease_state held;     /* the lease's newest epoch, ours while owned */
    int64_t stop_at_mono;    /* start no handler of it from here on */
    int64_t refresh_at_mono; /* read its markers again from here on; 0: never */
} fleet_part;

struct ib_host_fleet {
    uint32_t n;
    int64_t lease_ms;
    char token[IB_FLEET_MEMBER_MAX + 1]; /* this process among the members */
    ib_host_partition_names names;       /* bucket, log_stream, log_base */
    kvStore *kv;
    ib_marker_stream *log;
    ib_fleet_list *members;
    fleet_part *parts;
    int64_t next_tick_mono;  /* the members read again (MEMBERS_EVERY_MS) */
    int64_t next_renew_mono; /* the leases renewed again (a third of a lease) */
    uint32_t owned;
};

/* The durable of partition `p`. */
static void part_durable(char *out, size_t cap, const ib_host *h, uint32_t p)
{
    ib_host_partition_durable(out, cap, h->cfg->durable, p);
}

void ib_host_partition_durable(char *out, size_t cap, const char *durable, uint32_t p)
{
    snprintf(out, cap, "%s_p%" PRIu32, durable, p);
}

void ib_host_partition_names_make(ib_host_partition_names *out, const char *durable)
{
    snprintf(out->bucket, sizeof(out->bucket), "ibus_fleet_%s", durable);
    snprintf(out->log_stream, sizeof(out->log_stream), "IBUS_MARKERS_%s", durable);
    snprintf(out->log_base, sizeof(out->log_base), "ibus.markers.%s", durable);
}

/* Past partition `p`'s stop time nothing of it is started here: the
 * recorder decides nothing new for it, and the puller sends no request
 * that could still deliver one of its messages then (a process stopped
 * past its lease would otherwise take messages from the new owner once it
 * runs again, and hand them back out of order). */
static void act_until(ib_host *h, uint32_t p)
{
    char durable[300];
    int64_t stop_at = h->fleet->parts[p].stop_at_mono;
    part_durable(durable, sizeof(durable), h, p);
    ib_log_recorder_hold_until(h->recorder, p, stop_at);
    ib_puller_ask_until(h->puller, h->cfg->stream, durable, stop_at);
}

/* The lease takes effect from when its write was sent: stop_at counts from
 * then, by this host's monotonic clock. */
static void lease_set(ib_host *h, uint32_t p, const ib_lease_state *st, int64_t sent_mono)
{
    ib_host_fleet *f = h->fleet;
    f->parts[p].held = *st;
    f->parts[p].stop_at_mono = ib_partition_lease_stop_at(sent_mono, f->lease_ms);
    act_until(h, p);
}

/* True while the lease just taken of partition `p` is still ours by its
 * stop time, or once a renewal says it is (a renewal writes only while
 * the epoch held is the newest). */
static bool lease_still_held(ib_host *h, uint32_t p)
{
    ib_host_fleet *f = h->fleet;
    fleet_part *fp = &f->parts[p];
    if (ib_clock_monotonic_ms() < fp->stop_at_mono)
        return true;
    ib_lease_result res;
    ib_lease_state st;
    ib_error e = {0};
    int64_t sent = ib_clock_monotonic_ms();
    if (ib_partition_lease_renew(f->kv, ib_nats_jetstream(h->nats), f->names.bucket, p, &fp->held,
                                 f->lease_ms, ib_clock_realtime_ms(), &res, &st, &e) != IB_OK ||
        res != IB_LEASE_OURS)
        return false;
    lease_set(h, p, &st, sent);
    return true;
}

/* Stops pulling partition `p` and naks what the puller held of it. */
static void stop_pulling(ib_host *h, uint32_t p)
{
    fleet_part *fp = &h->fleet->parts[p];
    if (!fp->pulled)
        return;
    char durable[300];
    part_durable(durable, sizeof(durable), h, p);
    natsMsg *msgs[64];
    size_t n = 0, total = 0;
    int64_t deadline = ib_clock_monotonic_ms() + 2000;
    do {
        int64_t left = deadline - ib_clock_monotonic_ms();
        ib_puller_remove(h->puller, h->cfg->stream, durable, msgs, &n, 64, left > 0 ? left : 0);
        for (size_t i = 0; i < n; i++) {
            ib_nak(ib_nats_connection(h->nats), msgs[i], 0, NULL);
            natsMsg_Destroy(msgs[i]);
        }
        total += n;
    } while (n == 64);
    fp->pulled = false;
    if (total > 0)
        ib_log(IB_SEV_INFO, "handed back a partition's undelivered messages",
               IB_LOG_U64("partition", p), IB_LOG_U64("count", total));
}

/* Forgets partition `p`: no more pulls, no more answers from its table. */
static void drop_part(ib_host *h, uint32_t p)
{
    ib_host_fleet *f = h->fleet;
    stop_pulling(h, p);
    ib_log_recorder_disown(h->recorder, p);
    ib__host_order_forget(h->batch.order, p);
    if (f->parts[p].owned) {
        f->parts[p].owned = false;
        f->owned--;
        ib_metrics_gauge_set(h->metrics, IB_METRIC_PARTITIONS_OWNED, f->owned);
    }
}

/* Gives partition `p` back: its lease ends now, so its next owner need not
 * wait for it. Between batches, so nothing of it runs. */
static void give_back(ib_host *h, uint32_t p, const char *why)
{
    ib_host_fleet *f = h->fleet;
    fleet_part *fp = &f->parts[p];
    drop_part(h, p);
    ib_lease_result res;
    ib_lease_state st;
    ib_error e = {0};
    if (ib_partition_lease_renew(f->kv, ib_nats_jetstream(h->nats), f->names.bucket, p, &fp->held,
                                 0, ib_clock_realtime_ms(), &res, &st, &e) != IB_OK)
        ib_log(IB_SEV_WARN, "could not give a partition's lease back; it ends by itself",
               IB_LOG_U64("partition", p), IB_LOG_STR("error", e.msg));
    ib_log(IB_SEV_INFO, "partition handed over", IB_LOG_U64("partition", p),
           IB_LOG_STR("why", why));
}

/* When partition `p`, taken now, is read again from its log: once the
 * log's MaxAge has passed, spread over a quarter of it by partition so
 * that a process's partitions are not all read at once; 0 when the log
 * keeps records for ever. The markers in memory are then those the log
 * still holds, as a next owner's would be: without it the table of a
 * long-lived owner grows with every marker it ever made. */
static int64_t refresh_time(const ib_host *h, uint32_t p)
{
    int64_t age = ib_marker_stream_max_age_ms(h->fleet->log);
    if (age <= 0)
        return 0;
    return ib_clock_monotonic_ms() + age + age / 4 * p / h->fleet->n;
}

/* Makes sure partition `p`'s durable exists. The dead-letter stream,
 * one for the consumer and named after its --durable (DLQ_<durable>), is
 * made with partition 0's durable, which ib__host_fleet_open makes
 * first. */
static int ensure_durable(ib_host *h, uint32_t p, ib_error *e)
{
    char durable[300], filter[600];
    part_durable(durable, sizeof(durable), h, p);
    snprintf(filter, sizeof(filter), "%s.%" PRIu32 ".*", h->cfg->subject, p);
    ib_consumer_facts facts;
    ib_consumer_setup s = ib__host_consumer_setup(h, durable, filter, true,
                                                  p == 0 ? h->set.dead_letter_subject : NULL);
    s.dead_letter_owner = h->cfg->durable; /* DLQ_<durable>, as ibus dlq --durable reads */
    return ib_consumer_ensure(&facts, ib_nats_jetstream(h->nats), &s, e) == IB_OK ? 0 : -1;
}

/* Under the partition's lease: what the previous owner was delivered and
 * never acked comes first, in stream order, so the events of a key stay
 * in order across a crash (ib_consumer_rewind). */
static int rewind_durable(ib_host *h, uint32_t p, ib_error *e)
{
    char durable[300];
    part_durable(durable, sizeof(durable), h, p);
    uint64_t from = 0;
    if (ib_consumer_rewind(&from, ib_nats_jetstream(h->nats), h->cfg->stream, durable, e) != IB_OK)
        return -1;
    if (from != 0)
        ib_log(IB_SEV_INFO, "partition's durable rewound to its ack floor",
               IB_LOG_U64("partition", p), IB_LOG_U64("from_seq", from));
    return 0;
}

/* Takes partition `p` when its lease is free: lease, markers, durable.
 * A partition whose markers cannot all be read is given back, not taken. */
static void take(ib_host *h, uint32_t p)
{
    ib_host_fleet *f = h->fleet;
    fleet_part *fp = &f->parts[p];
    ib_lease_result res;
    ib_lease_state st;
    ib_error e = {0};
    int64_t sent = ib_clock_monotonic_ms();
    if (ib_partition_lease_take(f->kv, ib_nats_jetstream(h->nats), f->names.bucket, p, f->token,
                                f->lease_ms, ib_clock_realtime_ms(), &res, &st, &e) != IB_OK) {
        ib_log(IB_SEV_WARN, "cannot take a partition's lease", IB_LOG_U64("partition", p),
               IB_LOG_STR("error", e.msg));
        return;
    }
    if (res != IB_LEASE_OURS)
        return; /* its owner still holds it: asked again at the next tick */
    lease_set(h, p, &st, sent);
    ib_marker_table *t = NULL;
    uint64_t records = 0;
    int64_t t0 = ib_clock_monotonic_ms();
    bool read = ib_marker_table_create(&t, &e) == IB_OK &&
                ib_marker_stream_replay(f->log, p, t, &records, &e) == IB_OK &&
                ensure_durable(h, p, &e) == 0;
    if (read && !lease_still_held(h, p)) {
        /* the replay outlasted the lease (a pause, a slow server): another
         * process may own the partition now, and its durable is not ours
         * to rewind */
        ib_log(IB_SEV_WARN, "a partition's lease ran out while its markers were read; not taken",
               IB_LOG_U64("partition", p), IB_LOG_I64("replay_ms", ib_clock_monotonic_ms() - t0));
        ib_marker_table_free(t);
        return;
    }
    if (!read || rewind_durable(h, p, &e) != 0) {
        ib_log(IB_SEV_ERROR, "cannot take a partition: its markers or its durable cannot be read",
               IB_LOG_U64("partition", p), IB_LOG_STR("error", e.msg));
        ib_marker_table_free(t);
        fp->owned = false;
        ib_partition_lease_renew(f->kv, ib_nats_jetstream(h->nats), f->names.bucket, p, &fp->held,
                                 0, ib_clock_realtime_ms(), &res, &st, &e);
        return;
    }
    ib_marker_table_stats ts = ib_marker_table_stats_get(t);
    if (ib_log_recorder_own(h->recorder, p, fp->held.epoch, t, &e) != IB_OK)
        return;
    char durable[300];
    part_durable(durable, sizeof(durable), h, p);
    ib_puller_durable d = {
        .stream = h->cfg->stream, .durable = durable, .ack_wait_ms = h->set.ack_wait_ms};
    if (ib_puller_add(h->puller, &d, &e) != IB_OK) {
        ib_log_recorder_disown(h->recorder, p);
        ib_log(IB_SEV_ERROR, "cannot pull a partition", IB_LOG_U64("partition", p),
               IB_LOG_STR("error", e.msg));
        return;
    }
    fp->pulled = true;
    fp->owned = true;
    fp->refresh_at_mono = refresh_time(h, p);
    act_until(h, p);
    f->owned++;
    ib_metrics_gauge_set(h->metrics, IB_METRIC_PARTITIONS_OWNED, f->owned);
    ib_log(IB_SEV_INFO, "partition taken", IB_LOG_U64("partition", p),
           IB_LOG_U64("epoch", fp->held.epoch), IB_LOG_U64("records", records),
           IB_LOG_U64("markers", ts.marked), IB_LOG_I64("replay_ms", ib_clock_monotonic_ms() - t0));
}

/* Renews partition `p`'s lease; one that another process took is dropped. */
static void renew(ib_host *h, uint32_t p)
{
    ib_host_fleet *f = h->fleet;
    fleet_part *fp = &f->parts[p];
    ib_lease_result res;
    ib_lease_state st;
    ib_error e = {0};
    int64_t sent = ib_clock_monotonic_ms();
    if (ib_partition_lease_renew(f->kv, ib_nats_jetstream(h->nats), f->names.bucket, p, &fp->held,
                                 f->lease_ms, ib_clock_realtime_ms(), &res, &st, &e) != IB_OK) {
        ib_log(IB_SEV_WARN, "cannot renew a partition's lease; retrying",
               IB_LOG_U64("partition", p), IB_LOG_STR("error", e.msg));
        return; /* the stop time drops it if this goes on */
    }
    if (res == IB_LEASE_OURS) {
        lease_set(h, p, &st, sent);
        return;
    }
    ib_log(IB_SEV_ERROR, "lost a partition's lease to another process; stopped handling it",
           IB_LOG_U64("partition", p), IB_LOG_STR("owner", st.owner));
    drop_part(h, p);
}

/* Drops every owned partition whose stop time has passed. */
static void drop_expired(ib_host *h, int64_t now)
{
    ib_host_fleet *f = h->fleet;
    for (uint32_t p = 0; p < f->n; p++)
        if (f->parts[p].owned && now >= f->parts[p].stop_at_mono) {
            ib_log(IB_SEV_ERROR,
                   "a partition's lease could not be renewed in time; stopped handling it",
                   IB_LOG_U64("partition", p));
            drop_part(h, p);
        }
}

/* How often the members are read (and this process announced): a process
 * that joins gets its partitions within about this, plus the handover; at
 * most every third of a lease. Leases are renewed every third of one. */
#define MEMBERS_EVERY_MS 1000

void ib__host_fleet_tick(ib_host *h)
{
    ib_host_fleet *f = h->fleet;
    if (f == NULL)
        return;
    int64_t now = ib_clock_monotonic_ms();
    drop_expired(h, now);
    if (now < f->next_tick_mono || ib__host_signal_received())
        return;
    f->next_tick_mono =
        now + (f->lease_ms / 3 < MEMBERS_EVERY_MS ? f->lease_ms / 3 : MEMBERS_EVERY_MS);
    bool renew_due = now >= f->next_renew_mono;
    if (renew_due)
        f->next_renew_mono = now + f->lease_ms / 3;
    ib_error e = {0};
    int64_t wall = ib_clock_realtime_ms();
    if (ib_fleet_announce(f->kv, f->token, wall, &e) != IB_OK ||
        ib_fleet_members(ib_nats_jetstream(h->nats), f->names.bucket, wall, f->lease_ms, f->members,
                         &e) != IB_OK) {
        ib_log(IB_SEV_WARN, "cannot read the fleet's members; renewing what this process owns",
               IB_LOG_STR("error", e.msg));
        for (uint32_t p = 0; renew_due && p < f->n; p++)
            if (f->parts[p].owned)
                renew(h, p);
        return;
    }
    const char *names[IB_FLEET_MEMBERS_MAX + 1];
    size_t count = 0;
    bool self = false;
    for (size_t i = 0; i < f->members->count; i++) {
        names[count++] = f->members->at[i];
        self |= strcmp(f->members->at[i], f->token) == 0;
    }
    if (!self)
        names[count++] = f->token; /* announced a moment ago */
    ib_metrics_gauge_set(h->metrics, IB_METRIC_FLEET_MEMBERS, (int64_t)count);
    for (uint32_t p = 0; p < f->n && !ib__host_signal_received(); p++) {
        bool ours = strcmp(names[ib_rendezvous_owner(names, count, p)], f->token) == 0;
        if (!f->parts[p].owned) {
            if (ours)
                take(h, p);
        } else if (!ours) {
            give_back(h, p, "a live process scores higher for it");
        } else if (f->parts[p].refresh_at_mono != 0 && now >= f->parts[p].refresh_at_mono) {
            /* between batches, as a handover: what the puller held comes
             * again, and the lease goes on in its next epoch */
            ib_log(IB_SEV_INFO,
                   "partition read again: markers older than the log's retention "
                   "leave memory",
                   IB_LOG_U64("partition", p));
            drop_part(h, p);
            take(h, p);
        } else if (renew_due) {
            renew(h, p);
        }
    }
}

ib_host_admit ib__host_fleet_admit(ib_host *h, const char *subject, const char *event_id,
                                   uint32_t *partition)
{
    ib_host_fleet *f = h->fleet;
    uint32_t p = 0, own = 0;
    ib_partition_place place = ib_partition_subject_read(subject, h->cfg->subject, f->n, &p, &own);
    if (place == IB_PARTITION_NOT_OURS)
        return IB_HOST_ADMIT_NOT_PARTITIONED;
    if (place == IB_PARTITION_MISPLACED) {
        *partition = own;
        return IB_HOST_ADMIT_MISPLACED;
    }
    *partition = p;
    if (!f->parts[p].owned || ib_clock_monotonic_ms() >= f->parts[p].stop_at_mono)
        return IB_HOST_ADMIT_NOT_OWNED;
    ib_error e = {0};
    if (ib_log_recorder_route(h->recorder, event_id, p, &e) != IB_OK)
        return IB_HOST_ADMIT_NOT_OWNED;
    return IB_HOST_ADMIT_OK;
}

bool ib__host_fleet_forward(ib_host *h, natsMsg *msg, uint64_t stream_seq, const char *event_id,
                            uint32_t belongs)
{
    const char *key = strrchr(natsMsg_GetSubject(msg), '.') + 1; /* MISPLACED has one */
    char to[1024];
    ib_error e = {0};
    /* the key was read back from a subject already: this cannot fail */
    ib_partition_subject(to, sizeof(to), h->cfg->subject, key, (uint32_t)h->cfg->partitions, &e);
    ib_status st = ib_forward_publish(ib_nats_jetstream(h->nats), msg, to, h->cfg->stream,
                                      stream_seq, 5000, NULL, &e);
    ib_log(st == IB_OK ? IB_SEV_WARN : IB_SEV_ERROR,
           st == IB_OK
               ? "a message on another partition's subject was forwarded to its key's partition"
               : "cannot forward a message to its key's partition; nak'ed",
           IB_LOG_STR("event_id", event_id), IB_LOG_U64("stream_seq", stream_seq),
           IB_LOG_U64("partition", belongs), IB_LOG_STR("error", st == IB_OK ? "" : e.msg));
    return st == IB_OK;
}

/* The bucket of leases and members, made when missing. It keeps a key
 * for 20 leases (10 minutes at least): the newest epoch of a live lease
 * is rewritten every third of a lease, and a partition unowned for that
 * long starts again from epoch 1, which the marker log's duplicate
 * window (2 minutes) has long forgotten. */
static int open_bucket(ib_host *h, ib_error *e)
{
    ib_host_fleet *f = h->fleet;
    jsCtx *js = ib_nats_jetstream(h->nats);
    if (js_KeyValue(&f->kv, js, f->names.bucket) == NATS_OK)
        return 0;
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = f->names.bucket;
    cfg.History = 1;
    int64_t ttl = f->lease_ms * 20 > 600000 ? f->lease_ms * 20 : 600000;
    cfg.TTL = ttl * 1000000;
    cfg.Replicas = h->cfg->stream_replicas > 0 ? (int)h->cfg->stream_replicas : 1;
    natsStatus s = js_CreateKeyValue(&f->kv, js, &cfg);
    if (s != NATS_OK && js_KeyValue(&f->kv, js, f->names.bucket) != NATS_OK) {
        ib_error_set(e, IB_ERR_NATS, "cannot open the fleet bucket %s: %s", f->names.bucket,
                     natsStatus_GetText(s));
        return -1;
    }
    return 0;
}

/* A member token is printable without '.', '*', '>' or space: the owner
 * token with anything else replaced. */
static void make_token(char *out, size_t cap, const char *owner)
{
    size_t i = 0;
    for (; owner[i] != '\0' && i + 1 < cap; i++) {
        unsigned char c = (unsigned char)owner[i];
        out[i] = (c <= ' ' || c >= 0x7f || c == '.' || c == '*' || c == '>') ? '_' : (char)c;
    }
    out[i] = '\0';
}

int ib__host_fleet_open(ib_host *h, ib_error *e)
{
    const ib_host_config *cfg = h->cfg;
    ib_host_fleet *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->parts = calloc(cfg->partitions, sizeof(*f->parts))) == NULL ||
        (f->members = malloc(sizeof(*f->members))) == NULL) {
        if (f != NULL)
            free(f->parts);
        free(f);
        return ib_error_set(e, IB_ERR_NOMEM, "out of memory"), -1;
    }
    h->fleet = f;
    /* a key waits for a retried event of its own at most this long */
    if ((h->batch.order = ib__host_order_new(2 * (cfg->retry_max_ms + cfg->ack_wait_ms))) == NULL)
        return ib_error_set(e, IB_ERR_NOMEM, "out of memory"), -1;
    f->n = (uint32_t)cfg->partitions;
    f->lease_ms = cfg->partition_lease_ms;
    make_token(f->token, sizeof(f->token), h->set.owner);
    ib_host_partition_names_make(&f->names, cfg->durable);
    int64_t age = 0;
    if (cfg->create
            ? ensure_durable(h, 0, e) != 0
            : ib_stream_max_age_get(&age, ib_nats_jetstream(h->nats), cfg->stream, e) != IB_OK)
        return -1;
    ib_marker_stream_options lo = {
        .stream = f->names.log_stream,
        .subject_base = f->names.log_base,
        .durable = cfg->durable,
        .partitions = f->n,
        .replicas = cfg->stream_replicas > 0 ? (int)cfg->stream_replicas : 1,
        .max_age_ms = cfg->stream_max_age_ms,
    };
    if (open_bucket(h, e) != 0 ||
        ib_marker_stream_open(&f->log, ib_nats_connection(h->nats), &lo, e) != IB_OK ||
        ib_log_recorder_create(&h->recorder, f->log, f->n, e) != IB_OK)
        return -1;
    ib_metrics_gauge_set(h->metrics, IB_METRIC_RECORDER_UP, 1);
    ib_metrics_gauge_set(h->metrics, IB_METRIC_PARTITIONS, f->n);
    ib_log(IB_SEV_INFO, "partitioned consumer", IB_LOG_STR("durable", cfg->durable),
           IB_LOG_U64("partitions", f->n), IB_LOG_I64("lease_ms", f->lease_ms),
           IB_LOG_STR("member", f->token), IB_LOG_STR("bucket", f->names.bucket),
           IB_LOG_STR("marker_log", f->names.log_stream));
    return 0;
}

void ib__host_fleet_leave(ib_host *h)
{
    ib_host_fleet *f = h->fleet;
    /* without the server, giving back would only wait out each write's
     * timeout: the leases end by themselves, and the drain deadline stays */
    if (f == NULL || f->kv == NULL || !ib_nats_is_connected(h->nats))
        return;
    for (uint32_t p = 0; p < f->n; p++)
        if (f->parts[p].owned)
            give_back(h, p, "this process stops");
    ib_error e = {0};
    ib_fleet_leave(f->kv, f->token, &e);
}

void ib__host_fleet_close(ib_host *h)
{
    ib_host_fleet *f = h->fleet;
    if (f == NULL)
        return;
    /* the recorder borrows the log: it is closed first (host_close) */
    ib_marker_stream_close(f->log);
    if (f->kv != NULL)
        kvStore_Destroy(f->kv);
    ib__host_order_free(h->batch.order);
    h->batch.order = NULL;
    free(f->members);
    free(f->parts);
    free(f);
    h->fleet = NULL;
}
