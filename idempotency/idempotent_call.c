/* SPDX-License-Identifier: Apache-2.0 */
/* ib_idempotent_call(): the seed's handler wrapper (check, handle, mark only
 * on success) on top of the recorder's fenced claims, for programs with
 * their own consumer loop. `ibus run` does the same per batch in
 * plugin/dispatch; this is the one-event form. */
#include <infinity_bus/idempotency.h>

#include "error.h"
#include "owner.h"
#include "recorder.h"
#include "uuid.h"

#define DEFAULT_LEASE_MS 30000

_Static_assert(IB_EVENT_ID_SIZE == IB_ID_BUF_SIZE, "public and core id sizes differ");
_Static_assert(IB_OWNER_TOKEN_MAX <= IB_OWNER_MAX + 1, "owner tokens must fit the recorders");

ib_status ib_event_id_normalise(char out[IB_EVENT_ID_SIZE], const char *in, size_t len,
                                bool any_version, ib_error *err)
{
    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "event id: no output buffer");
    ib_id_reason why =
        ib_id_normalise(out, in, len, any_version ? IB_ID_ANY_VERSION : IB_ID_VERSIONS_DEFAULT);
    if (why != IB_ID_VALID)
        return ib_error_set(err, IB_ERR_INVALID_ID, "event id: %s", ib_id_reason_str(why));
    return IB_OK;
}

/* The options as this call uses them: defaults filled in, and the fields a
 * caller built against an older, shorter struct did not have left at
 * theirs. */
typedef struct call_options {
    const char *owner;
    int64_t lease_ms;
    uint32_t max_attempts;
    bool probe_holders;
} call_options;

#define HAS_FIELD(o, field)                                                                        \
    ((o)->size >= offsetof(ib_idempotent_options, field) + sizeof((o)->field))

static ib_status read_options(call_options *out, const ib_idempotent_options *o, ib_error *err)
{
    *out = (call_options){.lease_ms = DEFAULT_LEASE_MS};
    if (o == NULL || o->size == 0)
        return IB_OK;
    if (o->size < offsetof(ib_idempotent_options, owner) + sizeof(o->owner))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "idempotent call: options size %zu too small",
                            o->size);
    out->owner = o->owner;
    if (HAS_FIELD(o, lease_ms) && o->lease_ms != 0)
        out->lease_ms = o->lease_ms;
    if (HAS_FIELD(o, max_attempts))
        out->max_attempts = o->max_attempts;
    if (HAS_FIELD(o, probe_holders))
        out->probe_holders = o->probe_holders;
    if (out->lease_ms < 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "idempotent call: lease_ms %lld is negative",
                            (long long)out->lease_ms);
    return IB_OK;
}

/* Runs the handler under an acquired claim and settles it: mark (fenced)
 * on success, release on failure. */
static ib_status run_and_settle(ib_recorder *r, ib_idempotent_result *res, const ib_marker_key *key,
                                const char *owner, ib_idempotent_fn fn, void *ctx, ib_error *err)
{
    ib_error fn_err = {0};
    res->handler_ran = true;
    ib_status st = fn(ctx, &fn_err);
    if (st != IB_OK) {
        res->outcome = IB_IDEMPOTENT_FAILED;
        /* Best effort: a release that fails leaves a lease that ends on
         * its own; the handler's failure is what the caller must see. */
        (void)ib_recorder_release(r, key->consumer, key->event_id, owner, NULL);
        if (fn_err.msg[0] != '\0')
            return ib_error_set(err, st, "%s", fn_err.msg);
        return ib_error_set(err, st, "handler failed: %s", ib_status_str(st));
    }
    bool marked = false;
    st = ib_recorder_mark_owned_batch(r, &marked, key, 1, owner, err);
    if (st != IB_OK) {
        res->outcome = IB_IDEMPOTENT_ERROR;
        return st;
    }
    res->outcome = marked ? IB_IDEMPOTENT_HANDLED : IB_IDEMPOTENT_LEASE_LOST;
    return IB_OK;
}

ib_status ib_idempotent_call(ib_recorder *r, ib_idempotent_result *res, const char *consumer,
                             const char *event_id, ib_idempotent_fn fn, void *ctx,
                             const ib_idempotent_options *options, ib_error *err)
{
    if (res == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "idempotent call: no result");
    *res = (ib_idempotent_result){.outcome = IB_IDEMPOTENT_ERROR};
    if (r == NULL || fn == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "idempotent call: a recorder and a handler are required");
    call_options opt;
    ib_status st = read_options(&opt, options, err);
    if (st != IB_OK)
        return st;
    char token[IB_OWNER_TOKEN_MAX];
    if (opt.owner == NULL) {
        st = ib_owner_make(token, sizeof(token), "ib_idempotent_call", err);
        if (st != IB_OK)
            return st;
        opt.owner = token;
    }

    const ib_marker_key key = {.consumer = consumer, .event_id = event_id};
    const ib_claim_request req = {.owner = opt.owner,
                                  .lease_ms = opt.lease_ms,
                                  .max_attempts = opt.max_attempts,
                                  .probe_holders = opt.probe_holders};
    ib_claim_info claim = {0};
    st = ib_recorder_acquire_batch(r, &claim, &key, 1, &req, err);
    if (st != IB_OK)
        return st;
    res->attempts = claim.attempts;
    switch (claim.state) {
    case IB_CLAIM_ACQUIRED:
        return run_and_settle(r, res, &key, opt.owner, fn, ctx, err);
    case IB_CLAIM_DONE:
    case IB_CLAIM_CONFLICT: /* only answered when fingerprints are passed */
        res->outcome = IB_IDEMPOTENT_DUPLICATE;
        return IB_OK;
    case IB_CLAIM_BUSY:
        res->outcome = IB_IDEMPOTENT_BUSY;
        res->remaining_ms = claim.remaining_ms;
        return IB_OK;
    case IB_CLAIM_EXHAUSTED:
        res->outcome = IB_IDEMPOTENT_EXHAUSTED;
        return IB_OK;
    }
    return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: unknown claim state %d",
                        ib_recorder_kind(r), (int)claim.state);
}
