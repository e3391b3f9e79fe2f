/* SPDX-License-Identifier: Apache-2.0 */
/* kv:BUCKET: markers and claims in a NATS JetStream key-value bucket, so
 * that processes on several hosts share them (the fleet topology).
 *
 * Every decision comes from a write result, never from a read alone: a
 * claim is won by creating the next claim epoch (expect no message), and
 * exactly one of several racing creators succeeds, also on a replicated
 * bucket of nats-server 2.9, where Update(revision) is not safe. Taking
 * over, releasing and renewing a lease all create the next epoch rather
 * than changing the current one; the epoch's value carries the attempt
 * count, the lease end and the owner. Lease ends are wall-clock unix ms
 * (the recorder's now_ms), since holders may run on other hosts: the hosts'
 * clocks must agree to well within a lease.
 *
 * A new event costs no read: its claim is the Create of epoch 1, whose
 * result decides; only when it finds the key taken is the key read (its
 * marker, its anchor, its newest epoch: kv_read.c) and decided again, at
 * most KV_RETRIES times. What this process holds it remembers (kv_held.c),
 * so a renewal or a release creates the next epoch without a read, and a
 * mark made well inside its lease is a plain Create of the done marker:
 * no other owner can have taken a claim whose lease still runs. A mark
 * near or past the lease's end reads first, and is refused when another
 * owner's lease runs on the newest epoch (a take-over racing it can still
 * slip in between the read and the write; its holder then finds the key
 * done). The writes of a batch are pipelined, and the anchor is rewritten
 * with every epoch above 1 and with every mark, behind the marker, so the
 * TTL never leaves a live claim or a marker without it (kv_io.h). The bucket's TTL must
 * exceed a lease plus the time between renewals (half a lease in the
 * host), or a holder that stopped renewing could lose its anchor while
 * its newest epoch's lease still runs. */
#include "kv_bucket.h"
#include "kv_held.h"
#include "kv_io.h"
#include "kv_read.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ib_recorder_ops kv_ops;

/* --- decisions made from the head of a key, then written ------------------- */

/* decide: fill `w` and return true to write it, or settle the key and
 * return false. written: the write went through. */
typedef bool (*decide_fn)(void *ctx, size_t i, const kv_head *h, int64_t now, kv_write *w);
typedef void (*written_fn)(void *ctx, size_t i, const kv_head *h, const kv_write *w);

typedef struct round_state {
    kv_head *heads;       /* by key */
    kv_write *w;          /* this round's writes */
    size_t *index;        /* w[j] is for key index[j] */
    ib_marker_key *batch; /* this round's keys to read */
    size_t *batch_of;     /* batch[j] is key batch_of[j] */
    kv_head *read;        /* their heads */
    bool *todo;
} round_state;

static void round_free(round_state *rs)
{
    free(rs->heads);
    free(rs->w);
    free(rs->index);
    free(rs->batch);
    free(rs->batch_of);
    free(rs->read);
    free(rs->todo);
}

static bool round_alloc(round_state *rs, size_t n)
{
    rs->heads = calloc(n, sizeof(*rs->heads));
    rs->w = calloc(n, sizeof(*rs->w));
    rs->index = calloc(n, sizeof(*rs->index));
    rs->batch = calloc(n, sizeof(*rs->batch));
    rs->batch_of = calloc(n, sizeof(*rs->batch_of));
    rs->read = calloc(n, sizeof(*rs->read));
    rs->todo = calloc(n, sizeof(*rs->todo));
    return rs->heads != NULL && rs->w != NULL && rs->index != NULL && rs->batch != NULL &&
           rs->batch_of != NULL && rs->read != NULL && rs->todo != NULL;
}

/* Reads the heads of the keys still to decide (pipelined), lets `decide`
 * choose for each, and returns how many writes it chose. */
static ib_status decide_round(kv_recorder *k, round_state *rs, const ib_marker_key *keys, size_t n,
                              decide_fn decide, void *ctx, size_t *m, ib_error *err)
{
    size_t t = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rs->todo[i])
            continue;
        rs->todo[i] = false;
        rs->batch[t] = keys[i];
        rs->batch_of[t++] = i;
    }
    *m = 0;
    if (t == 0)
        return IB_OK;
    ib_status st = ib__kv_read_heads(k, rs->read, rs->batch, t, err);
    int64_t now = k->base.now_ms();
    for (size_t j = 0; j < t && st == IB_OK; j++) {
        size_t i = rs->batch_of[j];
        rs->heads[i] = rs->read[j];
        if (decide(ctx, i, &rs->heads[i], now, &rs->w[*m]))
            rs->index[(*m)++] = i;
    }
    return st;
}

/* Decides every key from its head and writes the chosen epochs in one
 * pipelined batch, then rewrites their anchors; a key whose write lost a
 * race is read and decided again. Keys still undecided after KV_RETRIES
 * rounds keep what `decide` set before its last write. */
static ib_status run_rounds(kv_recorder *k, const ib_marker_key *keys, size_t n, decide_fn decide,
                            written_fn written, void *ctx, ib_error *err)
{
    round_state rs;
    if (!round_alloc(&rs, n)) {
        round_free(&rs);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory for %zu keys", k->bucket,
                            n);
    }
    for (size_t i = 0; i < n; i++)
        rs.todo[i] = true;
    ib_status st = IB_OK;
    for (int round = 0; round <= KV_RETRIES && st == IB_OK; round++) {
        size_t m = 0;
        st = decide_round(k, &rs, keys, n, decide, ctx, &m, err);
        if (st != IB_OK || m == 0)
            break;
        st = ib__kv_publish(k, rs.w, m, err);
        for (size_t j = 0; j < m && st == IB_OK; j++) {
            if (rs.w[j].result == KV_WRITTEN)
                written(ctx, rs.index[j], &rs.heads[rs.index[j]], &rs.w[j]);
            else
                rs.todo[rs.index[j]] = true;
        }
        if (st == IB_OK)
            st = ib__kv_refresh_anchors(k, rs.w, m, keys, rs.index, err);
    }
    round_free(&rs);
    return st;
}

/* --- acquire (and the plain claims) ----------------------------------------- */

typedef struct acquire_ctx {
    kv_recorder *k;
    const ib_marker_key *keys;
    const uint64_t *fps; /* NULL = no conflict check */
    ib_claim_info *out;
    const ib_claim_request *req;
    const ib__acquire_opts *opts; /* NULL: the public claim */
    size_t key0;                  /* the index of the call's keys[0] here; SIZE_MAX: absent */
} acquire_ctx;

static bool acquire_decide(void *vctx, size_t i, const kv_head *h, int64_t now, kv_write *w)
{
    acquire_ctx *c = vctx;
    const ib_claim_request *req = c->req;
    ib_claim_info *out = &c->out[i];
    *out = (ib_claim_info){.state = IB_CLAIM_DONE, .attempts = h->attempts};
    if (h->done) {
        uint64_t fp = c->fps != NULL ? c->fps[i] : 0;
        if (fp != 0 && h->fp != 0 && fp != h->fp)
            out->state = IB_CLAIM_CONFLICT;
        return false;
    }
    /* Holders may be on other hosts: never host-local. */
    int64_t hold = ib__claim_hold_ms(h->owner, req->owner, h->end, now, req->lease_ms,
                                     req->probe_holders, false);
    if (hold > 0) {
        out->state = IB_CLAIM_BUSY;
        out->remaining_ms = hold;
        return false;
    }
    if (c->opts != NULL && c->opts->taken_over != NULL)
        c->opts->taken_over[i] = h->owner[0] != '\0' && strcmp(h->owner, req->owner) != 0;
    if (req->max_attempts > 0 && h->attempts >= req->max_attempts) {
        out->state = IB_CLAIM_EXHAUSTED;
        return false;
    }
    /* Until the write is known to have won, the answer is "busy, for a
     * time nobody can tell". */
    out->state = IB_CLAIM_BUSY;
    bool count =
        c->opts == NULL || !c->opts->defer_attempts || (c->opts->count_key0 && c->key0 == i);
    uint32_t attempts = h->attempts == UINT32_MAX || !count ? h->attempts : h->attempts + 1;
    ib__kv_prepare_epoch(c->k, w, &c->keys[i], h->epoch + 1, attempts,
                         ib__lease_end(now, req->lease_ms), req->owner);
    return true;
}

static void hold(kv_recorder *k, const ib_marker_key *key, const char *owner, const kv_write *w,
                 int64_t lease_ms, bool add)
{
    kv_lease c = {.epoch = w->epoch, .attempts = w->attempts, .end = w->end, .lease_ms = lease_ms};
    ib__kv_held_put(k, key, owner, &c, add);
}

static void acquire_written(void *vctx, size_t i, const kv_head *h, const kv_write *w)
{
    acquire_ctx *c = vctx;
    (void)h;
    c->out[i].state = IB_CLAIM_ACQUIRED;
    c->out[i].attempts = w->attempts;
    hold(c->k, &c->keys[i], c->req->owner, w, c->req->lease_ms, true);
}

/* Keys whose first write found them taken, compacted for the read path,
 * and where each came from. */
typedef struct slow_keys {
    ib_marker_key *keys;
    uint64_t *fps;
    size_t *from;
    size_t n;
} slow_keys;

static void slow_free(slow_keys *s)
{
    free(s->keys);
    free(s->fps);
    free(s->from);
}

static bool slow_alloc(slow_keys *s, size_t n)
{
    s->keys = calloc(n, sizeof(*s->keys));
    s->fps = calloc(n, sizeof(*s->fps));
    s->from = calloc(n, sizeof(*s->from));
    s->n = 0;
    return s->keys != NULL && s->fps != NULL && s->from != NULL;
}

/* The keys of a batch whose Create of epoch 1 lost: read and decided. */
static ib_status acquire_slow(kv_recorder *k, ib_claim_info *out, const slow_keys *s, bool with_fps,
                              const ib_claim_request *req, const ib__acquire_opts *opts,
                              ib_error *err)
{
    ib_claim_info *info = calloc(s->n, sizeof(*info));
    bool *taken = calloc(s->n, sizeof(*taken));
    if (info == NULL || taken == NULL) {
        free(info);
        free(taken);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to claim %zu keys",
                            k->bucket, s->n);
    }
    ib__acquire_opts slow_opts = {.defer_attempts = opts != NULL && opts->defer_attempts,
                                  .count_key0 = opts != NULL && opts->count_key0,
                                  .taken_over = taken};
    acquire_ctx c = {k,
                     s->keys,
                     with_fps ? s->fps : NULL,
                     info,
                     req,
                     &slow_opts,
                     s->n > 0 && s->from[0] == 0 ? 0 : SIZE_MAX};
    ib_status st = run_rounds(k, s->keys, s->n, acquire_decide, acquire_written, &c, err);
    for (size_t j = 0; j < s->n && st == IB_OK; j++) {
        out[s->from[j]] = info[j];
        if (opts != NULL && opts->taken_over != NULL)
            opts->taken_over[s->from[j]] = taken[j];
    }
    free(info);
    free(taken);
    return st;
}

/* A new event costs one Create (epoch 1, pipelined with the batch's) and
 * no read; only the keys it finds taken are read and decided. */
static ib_status kv_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                  const uint64_t *fingerprints, size_t n,
                                  const ib_claim_request *req, const ib__acquire_opts *opts,
                                  ib_error *err)
{
    bool defer = opts != NULL && opts->defer_attempts;
    kv_recorder *k = kv_of(r);
    kv_write *w = calloc(n, sizeof(*w));
    slow_keys s = {0};
    ib_status st = w != NULL && slow_alloc(&s, n)
                       ? IB_OK
                       : ib_error_set(err, IB_ERR_NOMEM,
                                      "recorder kv:%s: no memory to claim %zu keys", k->bucket, n);
    int64_t end = ib__lease_end(r->now_ms(), req->lease_ms);
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        uint32_t first = !defer || (i == 0 && opts->count_key0) ? 1 : 0;
        ib__kv_prepare_epoch(k, &w[i], &keys[i], 1, first, end, req->owner);
        out[i] = (ib_claim_info){.state = IB_CLAIM_BUSY};
    }
    if (st == IB_OK)
        st = ib__kv_publish(k, w, n, err);
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        if (w[i].result == KV_WRITTEN) {
            out[i] = (ib_claim_info){.state = IB_CLAIM_ACQUIRED, .attempts = w[i].attempts};
            hold(k, &keys[i], req->owner, &w[i], req->lease_ms, true);
            continue;
        }
        s.keys[s.n] = keys[i];
        s.fps[s.n] = fingerprints != NULL ? fingerprints[i] : 0;
        s.from[s.n++] = i;
    }
    if (st == IB_OK && s.n > 0)
        st = acquire_slow(k, out, &s, fingerprints != NULL, req, opts, err);
    slow_free(&s);
    free(w);
    return st;
}

static ib_status kv_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                                size_t n, const char *owner, int64_t lease_ms, ib_error *err)
{
    ib_claim_info *info = calloc(n, sizeof(*info));
    if (info == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to claim %zu keys",
                            kv_of(r)->bucket, n);
    ib_claim_request req = {.owner = owner, .lease_ms = lease_ms};
    ib_status st = kv_acquire_batch(r, info, keys, NULL, n, &req, NULL, err);
    for (size_t i = 0; i < n; i++)
        states[i] = info[i].state;
    free(info);
    return st;
}

static ib_status kv_claim(ib_recorder *r, ib_claim_state *state, const char *consumer,
                          const char *event_id, const char *owner, int64_t lease_ms, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return kv_claim_batch(r, state, &key, 1, owner, lease_ms, err);
}

/* --- release and renew: the holder writes the next epoch ------------------------ */

typedef struct owned_ctx {
    kv_recorder *k;
    const ib_marker_key *keys;
    bool *flags; /* renew: held; release: NULL */
    const char *owner;
    int64_t lease_ms;   /* renew: the new lease; release: 0 */
    bool counts;        /* add an attempt (ib__recorder_count_attempts) ... */
    const bool *count;  /* ... to key i if count[i]; NULL = every key */
    const size_t *from; /* keys[j] is key from[j] of the call (slow path); NULL = j */
} owned_ctx;

/* The attempts of key i after an owned write that may count one. */
static uint32_t attempts_after(uint32_t attempts, bool counts, const bool *count, size_t i)
{
    bool add = counts && (count == NULL || count[i]);
    return add && attempts < UINT32_MAX ? attempts + 1 : attempts;
}

/* Release ends the lease now and clears the owner, keeping the attempt
 * count; renew starts a new lease for the same owner. Both only from the
 * owner's own epoch: a key taken over, or done, is left alone. */
static bool owned_decide(void *vctx, size_t i, const kv_head *h, int64_t now, kv_write *w)
{
    owned_ctx *c = vctx;
    bool mine = !h->done && h->epoch > 0 && strcmp(h->owner, c->owner) == 0;
    if (c->flags != NULL)
        c->flags[i] = false;
    if (!mine)
        return false;
    bool renew = c->lease_ms > 0;
    ib__kv_prepare_epoch(
        c->k, w, &c->keys[i], h->epoch + 1,
        attempts_after(h->attempts, c->counts, c->count, c->from != NULL ? c->from[i] : i),
        renew ? ib__lease_end(now, c->lease_ms) : now, renew ? c->owner : "");
    return true;
}

static void owned_written(void *vctx, size_t i, const kv_head *h, const kv_write *w)
{
    owned_ctx *c = vctx;
    (void)h;
    if (c->flags != NULL)
        c->flags[i] = true;
    if (c->lease_ms > 0)
        hold(c->k, &c->keys[i], c->owner, w, c->lease_ms, false);
}

/* The holder's next epoch for every key it remembers holding, without a
 * read; keys it does not remember, and those whose Create lost (taken
 * over, or done), go to `s` for the read path. */
static ib_status owned_fast(kv_recorder *k, bool *held, slow_keys *s, const ib_marker_key *keys,
                            size_t n, const char *owner, int64_t lease_ms, bool counts,
                            const bool *count, ib_error *err)
{
    kv_write *w = calloc(n, sizeof(*w));
    size_t *idx = calloc(n, sizeof(*idx));
    ib_status st = w != NULL && idx != NULL
                       ? IB_OK
                       : ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory for %zu claims",
                                      k->bucket, n);
    int64_t now = k->base.now_ms();
    size_t m = 0;
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        kv_lease c;
        if (ib__kv_held_get(k, &keys[i], owner, &c) && c.epoch < UINT32_MAX / 2) {
            ib__kv_prepare_epoch(
                k, &w[m], &keys[i], c.epoch + 1, attempts_after(c.attempts, counts, count, i),
                lease_ms > 0 ? ib__lease_end(now, lease_ms) : now, lease_ms > 0 ? owner : "");
            idx[m++] = i;
        }
    }
    if (st == IB_OK && m > 0)
        st = ib__kv_publish(k, w, m, err);
    if (st == IB_OK && m > 0)
        st = ib__kv_refresh_anchors(k, w, m, keys, idx, err);
    for (size_t i = 0, j = 0; i < n && st == IB_OK; i++) {
        bool tried = j < m && idx[j] == i;
        if (tried && w[j].result == KV_WRITTEN) {
            if (held != NULL)
                held[i] = true;
            if (lease_ms > 0)
                hold(k, &keys[i], owner, &w[j], lease_ms, false);
        } else {
            s->keys[s->n] = keys[i];
            s->from[s->n++] = i;
        }
        j += tried;
    }
    free(w);
    free(idx);
    return st;
}

/* Renew (lease_ms > 0; held[i]: key i still held) or release (lease_ms 0:
 * every key is forgotten; held may be NULL), adding `count` attempts. */
static ib_status owned_batch(kv_recorder *k, bool *held, const ib_marker_key *keys, size_t n,
                             const char *owner, int64_t lease_ms, bool counts, const bool *count,
                             ib_error *err)
{
    slow_keys s = {0};
    bool *slow_held = calloc(n, sizeof(*slow_held));
    ib_status st = slow_held != NULL && slow_alloc(&s, n)
                       ? IB_OK
                       : ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory for %zu claims",
                                      k->bucket, n);
    for (size_t i = 0; i < n && held != NULL; i++)
        held[i] = false;
    if (st == IB_OK)
        st = owned_fast(k, held, &s, keys, n, owner, lease_ms, counts, count, err);
    owned_ctx c = {k,     s.keys, held != NULL ? slow_held : NULL, owner, lease_ms, counts,
                   count, s.from};
    if (st == IB_OK && s.n > 0)
        st = run_rounds(k, s.keys, s.n, owned_decide, owned_written, &c, err);
    for (size_t t = 0; t < s.n && st == IB_OK && held != NULL; t++)
        held[s.from[t]] = slow_held[t];
    for (size_t i = 0; i < n && st == IB_OK; i++)
        if (held == NULL || !held[i] || lease_ms == 0)
            ib__kv_held_drop(k, &keys[i], owner);
    free(slow_held);
    slow_free(&s);
    return st;
}

static ib_status kv_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                  const char *owner, ib_error *err)
{
    return owned_batch(kv_of(r), NULL, keys, n, owner, 0, false, NULL, err);
}

static ib_status kv_release(ib_recorder *r, const char *consumer, const char *event_id,
                            const char *owner, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return kv_release_batch(r, &key, 1, owner, err);
}

static ib_status kv_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                                const char *owner, int64_t lease_ms, ib_error *err)
{
    return owned_batch(kv_of(r), held, keys, n, owner, lease_ms, false, NULL, err);
}

static ib_status kv_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                   const bool *count, size_t n, const char *owner, int64_t lease_ms,
                                   bool release, ib_error *err)
{
    return owned_batch(kv_of(r), held, keys, n, owner, release ? 0 : lease_ms, true, count, err);
}

/* --- the end of attempts: the next epoch counts none ------------------------------ */

/* Keeps the owner and the lease as they are; a key done, never claimed or
 * without attempts is left alone. */
static bool end_decide(void *vctx, size_t i, const kv_head *h, int64_t now, kv_write *w)
{
    owned_ctx *c = vctx;
    (void)now;
    if (h->done || h->epoch == 0 || h->attempts == 0)
        return false;
    ib__kv_prepare_epoch(c->k, w, &c->keys[i], h->epoch + 1, 0, h->end, h->owner);
    return true;
}

static void end_written(void *vctx, size_t i, const kv_head *h, const kv_write *w)
{
    (void)vctx;
    (void)i;
    (void)h;
    (void)w;
}

static ib_status kv_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    owned_ctx c = {kv_of(r), keys, NULL, NULL, 0, false, NULL, NULL};
    return run_rounds(kv_of(r), keys, n, end_decide, end_written, &c, err);
}

/* --- marks ------------------------------------------------------------------------- */

/* The anchor a mark leaves: a key never claimed gets one (epoch 1,
 * released, no attempt), a claimed one is rewritten to name epoch `epoch`
 * (released now), so it lives as long as the marker (kv_io.h). */
static void mark_anchor(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                        uint32_t attempts, int64_t now)
{
    if (epoch == 0)
        ib__kv_prepare_epoch(k, w, key, 1, 0, now, "");
    else
        ib__kv_prepare_anchor(k, w, key, epoch, attempts, now, "");
}

/* Plain marks: each with an anchor for a key never claimed (a Create that
 * finds the key claimed changes nothing). */
static ib_status kv_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    kv_recorder *k = kv_of(r);
    int64_t now = r->now_ms();
    kv_write *a = calloc(n > 0 ? n : 1, sizeof(*a));
    if (a == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to mark %zu keys",
                            k->bucket, n);
    for (size_t i = 0; i < n; i++)
        mark_anchor(k, &a[i], &keys[i], 0, 0, now);
    ib_status st = ib__kv_mark_keys_with(k, keys, NULL, NULL, n, now, a, n, err);
    free(a);
    return st;
}

static ib_status kv_mark(ib_recorder *r, const char *consumer, const char *event_id, ib_error *err)
{
    ib_marker_key key = {consumer, event_id};
    return kv_mark_batch(r, &key, 1, err);
}

/* Keys whose lease this process holds with a quarter of it still to run
 * are marked without a read: nobody takes a claim over before its lease
 * ends (clocks agree to well within a lease). fast[i] says which; their
 * anchor rewrites go to `a`, every one of them: an anchor left as the
 * claim's Create wrote it is older than the marker by the handler's run,
 * and once the TTL removed it a redelivery's Create of epoch 1 would win
 * while the marker still says done. */
static size_t plan_fast_marks(kv_recorder *k, bool *fast, kv_write *a, const ib_marker_key *keys,
                              size_t n, const char *owner, int64_t now)
{
    size_t na = 0;
    for (size_t i = 0; i < n; i++) {
        kv_lease c;
        fast[i] = ib__kv_held_get(k, &keys[i], owner, &c) && now + c.lease_ms / 4 < c.end;
        if (fast[i])
            mark_anchor(k, &a[na++], &keys[i], c.epoch, c.attempts, now);
    }
    return na;
}

/* Marks unless another owner's lease still runs on the key's newest
 * epoch: without a read for the keys held well inside their lease, after
 * reading the others' heads. */
static ib_status kv_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                     const uint64_t *fingerprints, size_t n, const char *owner,
                                     ib_error *err)
{
    kv_recorder *k = kv_of(r);
    bool *want = calloc(n, sizeof(*want)), *fast = calloc(n, sizeof(*fast));
    kv_head *h = calloc(n, sizeof(*h));
    kv_write *a = calloc(n, sizeof(*a));
    slow_keys s = {0};
    int64_t now = r->now_ms();
    ib_status st = want != NULL && fast != NULL && h != NULL && a != NULL && slow_alloc(&s, n)
                       ? IB_OK
                       : ib_error_set(err, IB_ERR_NOMEM,
                                      "recorder kv:%s: no memory to mark %zu keys", k->bucket, n);
    size_t na = st == IB_OK ? plan_fast_marks(k, fast, a, keys, n, owner, now) : 0;
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        if (fast[i]) {
            marked[i] = want[i] = true;
            continue;
        }
        s.keys[s.n] = keys[i];
        s.from[s.n++] = i;
    }
    if (st == IB_OK && s.n > 0)
        st = ib__kv_read_heads(k, h, s.keys, s.n, err);
    for (size_t t = 0; t < s.n && st == IB_OK; t++) {
        size_t i = s.from[t];
        bool foreign =
            !h[t].done && h[t].owner[0] != '\0' && strcmp(h[t].owner, owner) != 0 && h[t].end > now;
        marked[i] = !foreign;
        want[i] = !foreign && !h[t].done;
        if (want[i])
            mark_anchor(k, &a[na++], &keys[i], h[t].epoch, h[t].attempts, now);
    }
    if (st == IB_OK)
        st = ib__kv_mark_keys_with(k, keys, want, fingerprints, n, now, a, na, err);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        ib__kv_held_drop(k, &keys[i], owner);
    slow_free(&s);
    free(want);
    free(fast);
    free(h);
    free(a);
    return st;
}

/* --- reads ------------------------------------------------------------------------- */

static ib_status read_done(kv_recorder *k, kv_read *rd, const char *consumer, const char *event_id,
                           ib_error *err)
{
    char subject[KV_SUBJECT_MAX];
    ib_marker_key key = {consumer, event_id};
    ib__kv_subject(k, subject, 'd', &key, 0);
    return ib__kv_read_last(k, rd, subject, err);
}

static ib_status kv_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                 const char *event_id, ib_error *err)
{
    kv_read rd;
    ib_status st = read_done(kv_of(r), &rd, consumer, event_id, err);
    *processed = st == IB_OK && rd.found && !rd.deleted;
    return st;
}

static ib_status kv_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys,
                                size_t n, ib_error *err)
{
    kv_recorder *k = kv_of(r);
    char(*subjects)[KV_SUBJECT_MAX] = calloc(n, sizeof(*subjects));
    kv_read *reads = calloc(n, sizeof(*reads));
    ib_status st = IB_OK;
    if (subjects == NULL || reads == NULL)
        st = ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to check %zu keys",
                          k->bucket, n);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        ib__kv_subject(k, subjects[i], 'd', &keys[i], 0);
    if (st == IB_OK)
        st = ib__kv_read_many(k, reads, subjects, n, err);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        processed[i] = reads[i].found && !reads[i].deleted;
    free(subjects);
    free(reads);
    return st;
}

static ib_status kv_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                           const char *event_id, ib_error *err)
{
    kv_read rd;
    ib_status st = read_done(kv_of(r), &rd, consumer, event_id, err);
    *found = st == IB_OK && rd.found && !rd.deleted;
    *ts_ms = *found ? strtoll(rd.value, NULL, 10) : 0;
    return st;
}

/* A tombstone on the done key; claim keys stay (see the file comment). */
static ib_status kv_forget(ib_recorder *r, bool *existed, const char *consumer,
                           const char *event_id, ib_error *err)
{
    kv_recorder *k = kv_of(r);
    kv_read rd;
    ib_status st = read_done(k, &rd, consumer, event_id, err);
    *existed = st == IB_OK && rd.found && !rd.deleted;
    ib_marker_key key = {consumer, event_id};
    if (*existed) {
        char subject[KV_SUBJECT_MAX];
        ib__kv_subject(k, subject, 'd', &key, 0);
        /* kvStore_Delete takes the key without the "$KV.<bucket>." prefix. */
        natsStatus s = kvStore_Delete(k->kv, subject + strlen(k->bucket) + 5);
        if (s != NATS_OK)
            return ib__kv_fail(k, err, s, "forget");
    }
    return st == IB_OK ? kv_end_attempts(r, &key, 1, err) : st;
}

static ib_status kv_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                            const char *event_id, ib_error *err)
{
    kv_head h;
    ib_marker_key key = {consumer, event_id};
    ib_status st = kv_lookup(r, &out->marked, &out->ts_ms, consumer, event_id, err);
    if (st == IB_OK)
        st = ib__kv_read_head(kv_of(r), &h, &key, err);
    if (st != IB_OK || out->marked || h.epoch == 0)
        return st;
    int64_t left = h.owner[0] != '\0' ? h.end - r->now_ms() : 0;
    memcpy(out->owner, h.owner, sizeof(out->owner));
    out->lease_left_ms = left > 0 ? left : 0;
    out->attempts = h.attempts;
    return IB_OK;
}

static ib_status kv_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err)
{
    (void)older_than_ms;
    *removed = 0;
    return ib_error_set(err, IB_ERR_UNSUPPORTED,
                        "recorder kv:%s: prune is not supported: the bucket's TTL removes old "
                        "markers and claims",
                        kv_of(r)->bucket);
}

/* --- open and close ------------------------------------------------------------------- */

static void kv_close(ib_recorder *r)
{
    ib__kv_disconnect(kv_of(r));
    ib__kv_held_free(kv_of(r));
    pthread_mutex_destroy(&kv_of(r)->acks_mu);
    free(r);
}

ib_status ib__kv_open(ib_recorder **out, const ib__recorder_config *cfg, ib_error *err)
{
    kv_recorder *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory", cfg->path);
    k->base.ops = &kv_ops;
    k->base.now_ms = cfg->now_ms;
    /* Leases are compared across hosts: wall clock, not the boot clock. */
    k->base.lease_now_ms = cfg->now_ms;
    k->wait_ms = 5000;
    k->write_wait_ms = 1500;
    /* The URI parser bounds the name by IB__KV_BUCKET_MAX. */
    size_t blen = strnlen(cfg->path, IB__KV_BUCKET_MAX);
    memcpy(k->bucket, cfg->path, blen);
    memcpy(k->stream, "KV_", 3);
    memcpy(k->stream + 3, cfg->path, blen);
    if (!ib__kv_held_init(k)) {
        free(k);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory", cfg->path);
    }
    pthread_mutex_init(&k->acks_mu, NULL);
    ib_status st = ib__kv_connect(k, cfg, err);
    if (st == IB_OK)
        st = ib__kv_bind(k, cfg, err);
    if (st != IB_OK) {
        kv_close(&k->base);
        return st;
    }
    *out = &k->base;
    return IB_OK;
}

static const ib_recorder_ops kv_ops = {
    .size = sizeof(ib_recorder_ops),
    .kind = "kv",
    .is_processed = kv_is_processed,
    .mark_processed = kv_mark,
    .close = kv_close,
    .check_batch = kv_check_batch,
    .mark_batch = kv_mark_batch,
    .claim = kv_claim,
    .claim_batch = kv_claim_batch,
    .release = kv_release,
    .release_batch = kv_release_batch,
    .lookup = kv_lookup,
    .forget = kv_forget,
    .prune = kv_prune,
    .list = ib__kv_list,
    .stats = ib__kv_stats,
    /* Attempts live in the bucket, shared by every host. */
    .features = IB_RECORDER_DURABLE_ATTEMPTS,
    .acquire_batch = kv_acquire_batch,
    .renew_batch = kv_renew_batch,
    .mark_owned_batch = kv_mark_owned_batch,
    .end_attempts = kv_end_attempts,
    .count_attempts = kv_count_attempts,
    .inspect = kv_inspect,
    .attempt_stats = ib__kv_attempt_stats,
    .summarize = ib__kv_summarize,
};
