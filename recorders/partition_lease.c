/* SPDX-License-Identifier: Apache-2.0 */
/* Partition leases as Create-only epochs (partition_lease.h). */
#include "partition_lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_TAG "ibus-lease v1 "
#define SUBJECT_MAX 320

static ib_status nats_fail(ib_error *err, const char *bucket, uint32_t partition, const char *what,
                           natsStatus st)
{
    return ib_error_set(err, IB_ERR_NATS, "partition lease %s/%" PRIu32 ": %s: %s", bucket,
                        partition, what, natsStatus_GetText(st));
}

static bool owner_valid(const char *s, size_t len)
{
    if (len == 0 || len > IB_LEASE_OWNER_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

bool ib__lease_value_parse(ib_lease_state *out, const char *v, size_t len)
{
    size_t tag = strlen(VALUE_TAG);
    if (len <= tag || len > tag + IB_LEASE_OWNER_MAX + 24 || memcmp(v, VALUE_TAG, tag) != 0)
        return false;
    const char *owner = v + tag, *end = v + len;
    const char *space = memchr(owner, ' ', (size_t)(end - owner));
    if (space == NULL || !owner_valid(owner, (size_t)(space - owner)))
        return false;
    const char *digits = space + 1;
    /* at most 18 digits: every such number fits in an int64_t */
    if (digits == end || end - digits > 18)
        return false;
    int64_t ms = 0;
    for (const char *p = digits; p < end; p++) {
        if (*p < '0' || *p > '9')
            return false;
        ms = ms * 10 + (*p - '0');
    }
    memcpy(out->owner, owner, (size_t)(space - owner));
    out->owner[space - owner] = '\0';
    out->end_ms = ms;
    return true;
}

/* The epoch a key subject "...p.<partition>.<epoch>" names, or 0. */
static uint64_t epoch_of(const char *subject)
{
    const char *dot = strrchr(subject, '.');
    if (dot == NULL || dot[1] == '\0' || strlen(dot + 1) > 18)
        return 0;
    uint64_t e = 0;
    for (const char *p = dot + 1; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        e = e * 10 + (uint64_t)(*p - '0');
    }
    return e;
}

ib_status ib_partition_lease_read(jsCtx *js, const char *bucket, uint32_t partition,
                                  ib_lease_state *out, ib_error *err)
{
    char stream[SUBJECT_MAX], subject[SUBJECT_MAX];
    memset(out, 0, sizeof(*out));
    snprintf(stream, sizeof(stream), "KV_%s", bucket);
    snprintf(subject, sizeof(subject), "$KV.%s.p.%" PRIu32 ".*", bucket, partition);
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetLastMsg(&m, js, stream, subject, NULL, &jerr);
    if (st == NATS_NOT_FOUND)
        return IB_OK;
    if (st != NATS_OK)
        return nats_fail(err, bucket, partition, "read", st);
    const char *op = NULL;
    bool deleted = natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK;
    int len = natsMsg_GetDataLength(m);
    out->epoch = epoch_of(natsMsg_GetSubject(m));
    bool ok = !deleted && out->epoch > 0 &&
              ib__lease_value_parse(out, natsMsg_GetData(m), len > 0 ? (size_t)len : 0);
    natsMsg_Destroy(m);
    if (!ok) {
        memset(out, 0, sizeof(*out));
        return ib_error_set(err, IB_ERR_RECORDER,
                            "partition lease %s/%" PRIu32 ": the newest epoch is not a lease "
                            "written by ibus (deleted, or another tool's value): the partition "
                            "is not taken",
                            bucket, partition);
    }
    return IB_OK;
}

/* Creates epoch `epoch` = {owner, end}; decides from the write, and when
 * the write fails, from reading the newest epoch back (a lost reply
 * leaves our own write there). */
static ib_status create_epoch(kvStore *kv, jsCtx *js, const char *bucket, uint32_t partition,
                              uint64_t epoch, const char *owner, int64_t end_ms,
                              ib_lease_result *result, ib_lease_state *state, ib_error *err)
{
    char key[SUBJECT_MAX], value[sizeof(VALUE_TAG) + IB_LEASE_OWNER_MAX + 32];
    snprintf(key, sizeof(key), "p.%" PRIu32 ".%" PRIu64, partition, epoch);
    int n = snprintf(value, sizeof(value), VALUE_TAG "%s %" PRId64, owner, end_ms);
    uint64_t rev = 0;
    natsStatus st = kvStore_Create(&rev, kv, key, value, n);
    if (st == NATS_OK) {
        state->epoch = epoch;
        snprintf(state->owner, sizeof(state->owner), "%s", owner);
        state->end_ms = end_ms;
        *result = IB_LEASE_OURS;
        return IB_OK;
    }
    ib_status ist = ib_partition_lease_read(js, bucket, partition, state, err);
    if (ist != IB_OK)
        return ist;
    if (state->epoch < epoch)
        return nats_fail(err, bucket, partition, "write", st);
    bool ours =
        state->epoch == epoch && strcmp(state->owner, owner) == 0 && state->end_ms == end_ms;
    *result = ours ? IB_LEASE_OURS : IB_LEASE_LOST;
    return IB_OK;
}

ib_status ib_partition_lease_take(kvStore *kv, jsCtx *js, const char *bucket, uint32_t partition,
                                  const char *owner, int64_t lease_ms, int64_t now_ms,
                                  ib_lease_result *result, ib_lease_state *state, ib_error *err)
{
    if (!owner_valid(owner, strlen(owner)) || lease_ms <= 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "partition lease: an owner token (printable, no space, at most %d "
                            "bytes) and a lease are needed",
                            IB_LEASE_OWNER_MAX);
    ib_status ist = ib_partition_lease_read(js, bucket, partition, state, err);
    if (ist != IB_OK)
        return ist;
    bool free_now = state->epoch == 0 || state->end_ms == 0 || state->end_ms <= now_ms ||
                    strcmp(state->owner, owner) == 0;
    if (!free_now) {
        *result = IB_LEASE_HELD;
        return IB_OK;
    }
    return create_epoch(kv, js, bucket, partition, state->epoch + 1, owner, now_ms + lease_ms,
                        result, state, err);
}

ib_status ib_partition_lease_renew(kvStore *kv, jsCtx *js, const char *bucket, uint32_t partition,
                                   const ib_lease_state *held, int64_t lease_ms, int64_t now_ms,
                                   ib_lease_result *result, ib_lease_state *state, ib_error *err)
{
    ib_status ist = ib_partition_lease_read(js, bucket, partition, state, err);
    if (ist != IB_OK)
        return ist;
    if (state->epoch != held->epoch || strcmp(state->owner, held->owner) != 0) {
        *result = IB_LEASE_LOST;
        return IB_OK;
    }
    return create_epoch(kv, js, bucket, partition, held->epoch + 1, held->owner,
                        lease_ms > 0 ? now_ms + lease_ms : 0, result, state, err);
}

int64_t ib_partition_lease_stop_at(int64_t sent_mono_ms, int64_t lease_ms)
{
    int64_t margin = lease_ms / 4 > 1000 ? lease_ms / 4 : 1000;
    if (margin >= lease_ms)
        margin = lease_ms / 2;
    return sent_mono_ms + lease_ms - margin;
}
