/* SPDX-License-Identifier: Apache-2.0 */
/* The ib__recorder_* wrappers of transactional work and the outbox:
 * argument checks shared by every kind, and what a kind without the op
 * answers. The fingerprinted claims and marks live in recorder.c, beside
 * the public calls whose checks they share. */
#include "recorder_internal.h"

#include <stdlib.h>
#include <string.h>

#define HAS_OP(r, field) IB__HAS_OP(r, field)

bool ib__recorder_has_transactions(const ib_recorder *r)
{
    return r != NULL && HAS_OP(r, transact);
}

ib_status ib__recorder_transact(ib_recorder *r, ib__txn_result *out, size_t *consumed,
                                const ib_marker_key *keys, size_t n, const ib__txn_request *req,
                                ib__txn_work_fn work, void *ctx, ib_error *err)
{
    if (consumed != NULL)
        *consumed = 0;
    if (r == NULL || out == NULL || consumed == NULL || (n > 0 && keys == NULL) || req == NULL ||
        req->owner == NULL || req->owner[0] == '\0' || work == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: bad transaction arguments");
    for (size_t i = 0; i < n; i++) {
        ib_status st = ib__recorder_check_key(keys[i].consumer, keys[i].event_id, err);
        if (st != IB_OK)
            return st;
    }
    if (!HAS_OP(r, transact))
        return ib_error_set(err, IB_ERR_UNSUPPORTED,
                            "recorder %s: transactional handlers need the sqlite: recorder",
                            ib_recorder_kind(r));
    if (n == 0)
        return IB_OK;
    return r->ops->transact(r, out, consumed, keys, n, req, work, ctx, err);
}

ib_status ib__recorder_outbox_peek(ib_recorder *r, ib__outbox_entry **out, size_t *n, size_t limit,
                                   ib_error *err)
{
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (r == NULL || out == NULL || n == NULL || limit == 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: bad outbox arguments");
    if (!HAS_OP(r, outbox_peek))
        return IB_OK;
    return r->ops->outbox_peek(r, out, n, limit, err);
}

void ib__outbox_entries_free(ib__outbox_entry *entries, size_t n)
{
    if (entries == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        free(entries[i].subject);
        free(entries[i].msg_id);
        free(entries[i].data);
    }
    free(entries);
}

ib_status ib__recorder_outbox_delete(ib_recorder *r, const int64_t *seqs, size_t n, ib_error *err)
{
    if (r == NULL || (n > 0 && seqs == NULL))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: bad outbox arguments");
    if (n == 0 || !HAS_OP(r, outbox_delete))
        return IB_OK;
    return r->ops->outbox_delete(r, seqs, n, err);
}

ib_status ib__recorder_outbox_count(ib_recorder *r, uint64_t *count, ib_error *err)
{
    if (r == NULL || count == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "recorder: bad outbox arguments");
    *count = 0;
    if (!HAS_OP(r, outbox_count))
        return IB_OK;
    return r->ops->outbox_count(r, count, err);
}

uint64_t ib__recorder_wal_bytes(ib_recorder *r)
{
    if (r == NULL || !HAS_OP(r, wal_bytes))
        return 0;
    return r->ops->wal_bytes(r);
}

int64_t ib__recorder_lock_wait_max_ns(ib_recorder *r)
{
    if (r == NULL || !HAS_OP(r, lock_wait_max_ns))
        return 0;
    return r->ops->lock_wait_max_ns(r);
}
