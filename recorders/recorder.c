/* SPDX-License-Identifier: Apache-2.0 */
/* The ib_recorder_* wrappers: argument checks shared by every kind, and the
 * fallbacks that let a kind offering only is_processed/mark_processed serve
 * every call. Kinds may rely on keys having been checked here, or by the
 * caller of a *_checked entry point. */
#include "recorder_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uuid.h"
#include "clock.h"

#define HAS_OP(r, field) IB__HAS_OP(r, field)

ib_status ib__recorder_check_key(const char *consumer, const char *event_id, ib_error *err)
{
    if (consumer == NULL || consumer[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: consumer is empty");
    if (strnlen(consumer, IB_CONSUMER_MAX + 1) > IB_CONSUMER_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: consumer is longer than %d bytes",
                            IB_CONSUMER_MAX);
    if (event_id == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: event id is missing");
    /* The id is not quoted: it failed validation, so it may hold anything. */
    uint8_t packed[16];
    if (!ib_id_pack(packed, event_id))
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "recorder: event id is not normalised (32 lowercase hex digits)");
    return IB_OK;
}

static ib_status check_recorder(const ib_recorder *r, const void *out, ib_error *err)
{
    if (r == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: recorder is NULL");
    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: output parameter is NULL");
    return IB_OK;
}

/* check_recorder, then the one key of a one-key call. */
static ib_status check_call(const ib_recorder *r, const void *out, const char *consumer,
                            const char *event_id, ib_error *err)
{
    ib_status st = check_recorder(r, out, err);
    if (st == IB_OK)
        st = ib__recorder_check_key(consumer, event_id, err);
    return st;
}

static ib_status check_keys(const ib_marker_key *keys, size_t n, ib_error *err)
{
    if (n > 0 && keys == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: keys is NULL");
    for (size_t i = 0; i < n; i++) {
        ib_status st = ib__recorder_check_key(keys[i].consumer, keys[i].event_id, err);
        if (st != IB_OK) {
            /* Say which key, keeping the reason. */
            if (err != NULL) {
                char reason[IB_ERROR_MSG_MAX];
                memcpy(reason, err->msg, sizeof(reason));
                ib_error_set(err, st, "%s (key %zu of %zu)", reason, i, n);
            }
            return st;
        }
    }
    return IB_OK;
}

static ib_status check_owner(const char *owner, ib_error *err)
{
    if (owner == NULL || owner[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: claim owner is empty");
    if (strnlen(owner, IB_OWNER_MAX + 1) > IB_OWNER_MAX)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "recorder: claim owner is longer than %d bytes", IB_OWNER_MAX);
    return IB_OK;
}

/* check_owned_call() of a call without a lease. */
#define NO_LEASE INT64_MIN

static ib_status check_lease(int64_t lease_ms, ib_error *err)
{
    if (lease_ms <= 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "recorder: lease must be positive, got %lld ms", (long long)lease_ms);
    return IB_OK;
}

static ib_status unsupported(const ib_recorder *r, const char *what, ib_error *err)
{
    return ib_error_set(err, IB_ERR_UNSUPPORTED, "recorder %s: %s is not supported", r->ops->kind,
                        what);
}

void ib_recorder_close(ib_recorder *r)
{
    if (r != NULL)
        r->ops->close(r);
}

const char *ib_recorder_kind(const ib_recorder *r)
{
    return r != NULL ? r->ops->kind : "none";
}

ib_status ib_recorder_is_processed(ib_recorder *r, bool *processed, const char *consumer,
                                   const char *event_id, ib_error *err)
{
    ib_status st = check_call(r, processed, consumer, event_id, err);
    if (st != IB_OK)
        return st;
    return r->ops->is_processed(r, processed, consumer, event_id, err);
}

ib_status ib_recorder_mark(ib_recorder *r, const char *consumer, const char *event_id,
                           ib_error *err)
{
    ib_status st = check_call(r, r, consumer, event_id, err);
    if (st != IB_OK)
        return st;
    return r->ops->mark_processed(r, consumer, event_id, err);
}

ib_status ib_recorder_check_batch(ib_recorder *r, bool *processed, const ib_marker_key *keys,
                                  size_t n, ib_error *err)
{
    ib_status st = check_recorder(r, n > 0 ? (const void *)processed : r, err);
    if (st == IB_OK)
        st = check_keys(keys, n, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, check_batch))
        return r->ops->check_batch(r, processed, keys, n, err);
    for (size_t i = 0; i < n; i++) {
        st = r->ops->is_processed(r, &processed[i], keys[i].consumer, keys[i].event_id, err);
        if (st != IB_OK)
            return st;
    }
    return IB_OK;
}

ib_status ib_recorder_mark_batch(ib_recorder *r, const ib_marker_key *keys, size_t n, ib_error *err)
{
    ib_status st = check_recorder(r, r, err);
    if (st == IB_OK)
        st = check_keys(keys, n, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, mark_batch))
        return r->ops->mark_batch(r, keys, n, err);
    for (size_t i = 0; i < n; i++) {
        st = r->ops->mark_processed(r, keys[i].consumer, keys[i].event_id, err);
        if (st != IB_OK)
            return st;
    }
    return IB_OK;
}

/* Claim emulated with the seed's calls: no mutual exclusion, but a done id
 * is still dropped. */
static ib_status claim_fallback(ib_recorder *r, ib_claim_state *state, const char *consumer,
                                const char *event_id, ib_error *err)
{
    bool done = false;
    ib_status st = r->ops->is_processed(r, &done, consumer, event_id, err);
    if (st == IB_OK)
        *state = done ? IB_CLAIM_DONE : IB_CLAIM_ACQUIRED;
    return st;
}

ib_status ib_recorder_claim(ib_recorder *r, ib_claim_state *state, const char *consumer,
                            const char *event_id, const char *owner, int64_t lease_ms,
                            ib_error *err)
{
    ib_status st = check_call(r, state, consumer, event_id, err);
    if (st == IB_OK)
        st = check_owner(owner, err);
    if (st == IB_OK)
        st = check_lease(lease_ms, err);
    if (st != IB_OK)
        return st;
    if (HAS_OP(r, claim))
        return r->ops->claim(r, state, consumer, event_id, owner, lease_ms, err);
    if (HAS_OP(r, claim_batch)) {
        ib_marker_key key = {consumer, event_id};
        return r->ops->claim_batch(r, state, &key, 1, owner, lease_ms, err);
    }
    return claim_fallback(r, state, consumer, event_id, err);
}

/* Whether a call checks its keys one by one: every public call does; the
 * in-tree *_checked entry points take keys their caller has checked. */
typedef enum key_trust { KEYS_UNCHECKED, KEYS_CHECKED } key_trust;

/* The checks every batch call with an owner makes: recorder and output,
 * keys (unless `trust` says the caller checked them), owner, and (unless
 * lease_ms is NO_LEASE) the lease. */
static ib_status check_owned_call(const ib_recorder *r, const void *out, size_t n,
                                  const ib_marker_key *keys, key_trust trust, const char *owner,
                                  int64_t lease_ms, ib_error *err)
{
    ib_status st = check_recorder(r, n > 0 ? out : (const void *)r, err);
    if (st == IB_OK && trust == KEYS_UNCHECKED)
        st = check_keys(keys, n, err);
    if (st == IB_OK)
        st = check_owner(owner, err);
    if (st == IB_OK && lease_ms != NO_LEASE)
        st = check_lease(lease_ms, err);
    return st;
}

ib_status ib_recorder_claim_batch(ib_recorder *r, ib_claim_state *states, const ib_marker_key *keys,
                                  size_t n, const char *owner, int64_t lease_ms, ib_error *err)
{
    ib_status st = check_owned_call(r, states, n, keys, KEYS_UNCHECKED, owner, lease_ms, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, claim_batch))
        return r->ops->claim_batch(r, states, keys, n, owner, lease_ms, err);
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        if (HAS_OP(r, claim))
            st = r->ops->claim(r, &states[i], keys[i].consumer, keys[i].event_id, owner, lease_ms,
                               err);
        else
            st = claim_fallback(r, &states[i], keys[i].consumer, keys[i].event_id, err);
    }
    return st;
}

ib_status ib_recorder_release(ib_recorder *r, const char *consumer, const char *event_id,
                              const char *owner, ib_error *err)
{
    ib_status st = check_call(r, r, consumer, event_id, err);
    if (st == IB_OK)
        st = check_owner(owner, err);
    if (st != IB_OK)
        return st;
    if (HAS_OP(r, release))
        return r->ops->release(r, consumer, event_id, owner, err);
    ib_marker_key key = {consumer, event_id};
    if (HAS_OP(r, release_batch))
        return r->ops->release_batch(r, &key, 1, owner, err);
    return IB_OK; /* without claims there is nothing to free */
}

ib_status ib_recorder_release_batch(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                    const char *owner, ib_error *err)
{
    ib_status st = check_recorder(r, r, err);
    if (st == IB_OK)
        st = check_keys(keys, n, err);
    if (st == IB_OK)
        st = check_owner(owner, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, release_batch))
        return r->ops->release_batch(r, keys, n, owner, err);
    if (!HAS_OP(r, release))
        return IB_OK;
    for (size_t i = 0; i < n && st == IB_OK; i++)
        st = r->ops->release(r, keys[i].consumer, keys[i].event_id, owner, err);
    return st;
}

ib_status ib_recorder_lookup(ib_recorder *r, bool *found, int64_t *ts_ms, const char *consumer,
                             const char *event_id, ib_error *err)
{
    ib_status st = check_call(r, found, consumer, event_id, err);
    if (st != IB_OK)
        return st;
    if (!HAS_OP(r, lookup))
        return unsupported(r, "lookup", err);
    int64_t ts = 0;
    st = r->ops->lookup(r, found, &ts, consumer, event_id, err);
    if (st == IB_OK && ts_ms != NULL)
        *ts_ms = *found ? ts : 0;
    return st;
}

ib_status ib_recorder_forget(ib_recorder *r, bool *existed, const char *consumer,
                             const char *event_id, ib_error *err)
{
    ib_status st = check_call(r, r, consumer, event_id, err);
    if (st != IB_OK)
        return st;
    if (!HAS_OP(r, forget))
        return unsupported(r, "forget", err);
    bool had = false;
    st = r->ops->forget(r, &had, consumer, event_id, err);
    if (st == IB_OK && existed != NULL)
        *existed = had;
    return st;
}

ib_status ib_recorder_prune(ib_recorder *r, uint64_t *removed, int64_t older_than_ms, ib_error *err)
{
    ib_status st = check_recorder(r, r, err);
    if (st != IB_OK)
        return st;
    if (!HAS_OP(r, prune))
        return unsupported(r, "prune", err);
    uint64_t n = 0;
    st = r->ops->prune(r, &n, older_than_ms, err);
    if (removed != NULL)
        *removed = n;
    return st;
}

ib_status ib__recorder_prune_until(ib_recorder *r, uint64_t *removed, int64_t older_than_ms,
                                   ib__stop_fn stop, void *ctx, ib_error *err)
{
    if (r == NULL || !HAS_OP(r, prune_until))
        return ib_recorder_prune(r, removed, older_than_ms, err);
    ib_status st = check_recorder(r, r, err);
    if (st != IB_OK)
        return st;
    uint64_t n = 0;
    st = r->ops->prune_until(r, &n, older_than_ms, stop, ctx, err);
    if (removed != NULL)
        *removed = n;
    return st;
}

ib_status ib_recorder_list(ib_recorder *r, const char *consumer, size_t limit,
                           ib_marker_visit_fn visit, void *ctx, ib_error *err)
{
    ib_status st = check_recorder(r, r, err);
    if (st != IB_OK)
        return st;
    if (visit == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: visit callback is NULL");
    if (consumer != NULL &&
        (consumer[0] == '\0' || strnlen(consumer, IB_CONSUMER_MAX + 1) > IB_CONSUMER_MAX))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: consumer is empty or too long");
    if (!HAS_OP(r, list))
        return unsupported(r, "list", err);
    return r->ops->list(r, consumer, limit, visit, ctx, err);
}

ib_status ib_recorder_stats_get(ib_recorder *r, ib_recorder_stats *stats, ib_error *err)
{
    ib_status st = check_recorder(r, stats, err);
    if (st != IB_OK)
        return st;
    if (!HAS_OP(r, stats))
        return unsupported(r, "stats", err);
    memset(stats, 0, sizeof(*stats));
    return r->ops->stats(r, stats, err);
}

/* --- attempts, fenced leases and marks ------------------------------------ */

/* The public calls pass no fingerprints, so they never answer CONFLICT
 * (ib_claim_state); the in-tree *_fp and *_checked forms share their
 * checks (the *_checked ones all but the per-key ones) and fallbacks. */
static ib_status acquire(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                         const uint64_t *fingerprints, size_t n, const ib_claim_request *req,
                         const ib__acquire_opts *opts, key_trust trust, ib_error *err)
{
    if (req == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: claim request is NULL");
    ib_status st = check_owned_call(r, out, n, keys, trust, req->owner, req->lease_ms, err);
    if (st != IB_OK || n == 0)
        return st;
    if (opts != NULL && opts->taken_over != NULL)
        memset(opts->taken_over, 0, n * sizeof(*opts->taken_over));
    if (HAS_OP(r, acquire_batch))
        return r->ops->acquire_batch(r, out, keys, fingerprints, n, req, opts, err);
    ib_claim_state *states = malloc(n * sizeof(*states));
    if (states == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder: no memory to claim %zu keys", n);
    st = ib_recorder_claim_batch(r, states, keys, n, req->owner, req->lease_ms, err);
    for (size_t i = 0; i < n; i++)
        out[i] = (ib_claim_info){.state = st == IB_OK ? states[i] : IB_CLAIM_BUSY};
    free(states);
    return st;
}

ib_status ib_recorder_acquire_batch(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                    size_t n, const ib_claim_request *req, ib_error *err)
{
    return acquire(r, out, keys, NULL, n, req, NULL, KEYS_UNCHECKED, err);
}

ib_status ib__recorder_acquire_fp(ib_recorder *r, ib_claim_info *out, const ib_marker_key *keys,
                                  const uint64_t *fingerprints, size_t n,
                                  const ib_claim_request *req, ib_error *err)
{
    return acquire(r, out, keys, fingerprints, n, req, NULL, KEYS_UNCHECKED, err);
}

ib_status ib__recorder_acquire_checked(ib_recorder *r, ib_claim_info *out,
                                       const ib_marker_key *keys, const uint64_t *fingerprints,
                                       size_t n, const ib_claim_request *req,
                                       const ib__acquire_opts *opts, ib_error *err)
{
    return acquire(r, out, keys, fingerprints, n, req, opts, KEYS_CHECKED, err);
}

ib_status ib__recorder_count_attempts(ib_recorder *r, bool *held, const ib_marker_key *keys,
                                      const bool *count, size_t n, const char *owner,
                                      int64_t lease_ms, bool release, ib_error *err)
{
    ib_status st = check_owned_call(r, held, n, keys, KEYS_UNCHECKED, owner,
                                    release ? NO_LEASE : lease_ms, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, count_attempts))
        return r->ops->count_attempts(r, held, keys, count, n, owner, lease_ms, release, err);
    if (!release)
        return ib_recorder_renew_batch(r, held, keys, n, owner, lease_ms, err);
    for (size_t i = 0; i < n; i++)
        held[i] = true;
    return ib_recorder_release_batch(r, keys, n, owner, err);
}

ib_status ib_recorder_renew_batch(ib_recorder *r, bool *held, const ib_marker_key *keys, size_t n,
                                  const char *owner, int64_t lease_ms, ib_error *err)
{
    ib_status st = check_owned_call(r, held, n, keys, KEYS_UNCHECKED, owner, lease_ms, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, renew_batch))
        return r->ops->renew_batch(r, held, keys, n, owner, lease_ms, err);
    ib_claim_state *states = malloc(n * sizeof(*states));
    if (states == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder: no memory to renew %zu leases", n);
    st = ib_recorder_claim_batch(r, states, keys, n, owner, lease_ms, err);
    for (size_t i = 0; i < n; i++)
        held[i] = st == IB_OK && states[i] == IB_CLAIM_ACQUIRED;
    free(states);
    return st;
}

static ib_status mark_owned(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                            const uint64_t *fingerprints, size_t n, const char *owner,
                            key_trust trust, ib_error *err)
{
    ib_status st = check_owned_call(r, marked, n, keys, trust, owner, NO_LEASE, err);
    if (st != IB_OK || n == 0)
        return st;
    if (HAS_OP(r, mark_owned_batch))
        return r->ops->mark_owned_batch(r, marked, keys, fingerprints, n, owner, err);
    st = ib_recorder_mark_batch(r, keys, n, err);
    for (size_t i = 0; i < n; i++)
        marked[i] = st == IB_OK;
    return st;
}

ib_status ib_recorder_mark_owned_batch(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                       size_t n, const char *owner, ib_error *err)
{
    return mark_owned(r, marked, keys, NULL, n, owner, KEYS_UNCHECKED, err);
}

ib_status ib__recorder_mark_owned_fp(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                     const uint64_t *fingerprints, size_t n, const char *owner,
                                     ib_error *err)
{
    return mark_owned(r, marked, keys, fingerprints, n, owner, KEYS_UNCHECKED, err);
}

ib_status ib__recorder_mark_owned_checked(ib_recorder *r, bool *marked, const ib_marker_key *keys,
                                          const uint64_t *fingerprints, size_t n, const char *owner,
                                          ib_error *err)
{
    return mark_owned(r, marked, keys, fingerprints, n, owner, KEYS_CHECKED, err);
}

bool ib_recorder_has_durable_attempts(const ib_recorder *r)
{
    return r != NULL && HAS_OP(r, acquire_batch) &&
           (r->ops->features & IB_RECORDER_DURABLE_ATTEMPTS) != 0;
}

bool ib_recorder_is_host_local(const ib_recorder *r)
{
    return r != NULL && HAS_OP(r, acquire_batch) &&
           (r->ops->features & IB_RECORDER_HOST_LOCAL) != 0;
}

int64_t ib__claim_hold_ms(const char *holder, const char *owner, int64_t expires, int64_t now,
                          int64_t lease_ms, bool probe, bool host_local)
{
    if (holder == NULL || holder[0] == '\0' || strcmp(holder, owner) == 0)
        return 0;
    int64_t remaining = expires > now ? expires - now : 0;
    /* A holder from before a reboot wrote its end on another boot clock;
     * the probe finds it gone (another boot id) on a host-local store. */
    ib_owner_liveness live = probe ? ib_owner_liveness_of(holder, host_local) : IB_OWNER_UNKNOWN;
    if (live == IB_OWNER_GONE)
        return 0;
    if (remaining > 0)
        return remaining;
    /* Ended, but its holder still runs: its marks may be held up by a
     * recorder outage that also kept it from renewing. Grant one more
     * lease before taking the work over. */
    if (live == IB_OWNER_ALIVE && expires > now - lease_ms)
        return expires + lease_ms - now;
    return 0;
}

/* --- the end of attempts and what shows them ------------------------------- */

ib_status ib_recorder_end_attempts(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                   ib_error *err)
{
    ib_status st = check_recorder(r, r, err);
    if (st == IB_OK)
        st = check_keys(keys, n, err);
    if (st != IB_OK || n == 0 || !HAS_OP(r, end_attempts))
        return st;
    return r->ops->end_attempts(r, keys, n, err);
}

ib_status ib_recorder_inspect(ib_recorder *r, ib_marker_state *out, const char *consumer,
                              const char *event_id, ib_error *err)
{
    ib_status st = check_call(r, out, consumer, event_id, err);
    if (st != IB_OK)
        return st;
    memset(out, 0, sizeof(*out));
    if (HAS_OP(r, inspect))
        return r->ops->inspect(r, out, consumer, event_id, err);
    return ib_recorder_lookup(r, &out->marked, &out->ts_ms, consumer, event_id, err);
}

ib_status ib_recorder_attempt_stats(ib_recorder *r, ib_attempt_stats *out, uint32_t max_attempts,
                                    ib_error *err)
{
    ib_status st = check_recorder(r, out, err);
    if (st != IB_OK)
        return st;
    if (max_attempts == 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: max_attempts must be above 0");
    if (!HAS_OP(r, attempt_stats))
        return unsupported(r, "attempt stats", err);
    memset(out, 0, sizeof(*out));
    return r->ops->attempt_stats(r, out, max_attempts, err);
}
