/* SPDX-License-Identifier: Apache-2.0 */
/* The live processes of a partitioned consumer (fleet_members.h). */
#include "fleet_members.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define VALUE_TAG "ibus-member v1 "
#define SUBJECT_MAX 320
#define READ_WAIT_MS 5000

static bool token_valid(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > IB_FLEET_MEMBER_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '.' || ch == '*' || ch == '>')
            return false;
    }
    return true;
}

/* "m." and the token in hex: a key of a bucket takes letters, digits and
 * "-/_=." only, and tokens hold '@'. */
static void member_key(char *out, size_t cap, const char *owner)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    out[n++] = 'm';
    out[n++] = '.';
    for (const unsigned char *p = (const unsigned char *)owner; *p != '\0' && n + 3 < cap; p++) {
        out[n++] = hex[*p >> 4];
        out[n++] = hex[*p & 15];
    }
    out[n] = '\0';
}

ib_status ib_fleet_announce(kvStore *kv, const char *owner, int64_t now_ms, ib_error *err)
{
    if (!token_valid(owner))
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "fleet: an owner token is printable, with no space, '.', '*' or "
                            "'>', and at most %d bytes",
                            IB_FLEET_MEMBER_MAX);
    char key[SUBJECT_MAX], value[IB_FLEET_MEMBER_MAX + 64];
    member_key(key, sizeof(key), owner);
    snprintf(value, sizeof(value), VALUE_TAG "%" PRId64 " %s", now_ms, owner);
    uint64_t rev = 0;
    natsStatus st = kvStore_PutString(&rev, kv, key, value);
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "fleet: announce: %s", natsStatus_GetText(st));
    return IB_OK;
}

ib_status ib_fleet_leave(kvStore *kv, const char *owner, ib_error *err)
{
    char key[SUBJECT_MAX];
    member_key(key, sizeof(key), owner);
    natsStatus st = kvStore_Delete(kv, key);
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "fleet: leave: %s", natsStatus_GetText(st));
    return IB_OK;
}

int64_t ib__fleet_announcement_parse(const char *v, int len, char *token)
{
    int tag = (int)strlen(VALUE_TAG), i = tag;
    if (len <= tag || len > tag + 20 + IB_FLEET_MEMBER_MAX ||
        memcmp(v, VALUE_TAG, (size_t)tag) != 0)
        return -1;
    int64_t ms = 0;
    for (; i < len && v[i] != ' '; i++) {
        if (v[i] < '0' || v[i] > '9' || i - tag >= 18)
            return -1;
        ms = ms * 10 + (v[i] - '0');
    }
    int n = len - i - 1;
    if (i == tag || n < 1 || n > IB_FLEET_MEMBER_MAX)
        return -1;
    memcpy(token, v + i + 1, (size_t)n);
    token[n] = '\0';
    return token_valid(token) ? ms : -1;
}

/* Takes one key's last message into the list. */
static ib_status take_member(ib_fleet_list *out, natsMsg *m, size_t prefix_len, int64_t now_ms,
                             int64_t lease_ms, ib_error *err)
{
    const char *op = NULL;
    if (natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK)
        return IB_OK; /* left, or purged */
    char token[IB_FLEET_MEMBER_MAX + 1], key[SUBJECT_MAX];
    int64_t at = ib__fleet_announcement_parse(natsMsg_GetData(m), natsMsg_GetDataLength(m), token);
    /* the key must be the token's own: a copied value is another's */
    if (at >= 0)
        member_key(key, sizeof(key), token);
    if (at < 0 || strcmp(natsMsg_GetSubject(m) + prefix_len, key + 2) != 0) {
        out->foreign++;
        return IB_OK;
    }
    if (now_ms - at > lease_ms) {
        out->stale++;
        return IB_OK;
    }
    if (out->count == IB_FLEET_MEMBERS_MAX)
        return ib_error_set(err, IB_ERR_RECORDER, "fleet: more than %d live members",
                            IB_FLEET_MEMBERS_MAX);
    snprintf(out->names[out->count], sizeof(out->names[0]), "%s", token);
    out->at[out->count] = out->names[out->count];
    out->count++;
    return IB_OK;
}

ib_status ib_fleet_members(jsCtx *js, const char *bucket, int64_t now_ms, int64_t lease_ms,
                           ib_fleet_list *out, ib_error *err)
{
    char stream[SUBJECT_MAX], subject[SUBJECT_MAX];
    out->count = out->stale = out->foreign = 0;
    snprintf(stream, sizeof(stream), "KV_%s", bucket);
    snprintf(subject, sizeof(subject), "$KV.%s.m.*", bucket);
    size_t prefix_len = strlen(subject) - 1;
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetLastMsg(&m, js, stream, subject, NULL, &jerr);
    if (st == NATS_NOT_FOUND)
        return IB_OK; /* nobody ever announced */
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "fleet: list: %s", natsStatus_GetText(st));
    /* read up to the newest announcement when the read began: those made
     * meanwhile (every member's, every second) must not keep it going */
    uint64_t end = natsMsg_GetSequence(m);
    natsMsg_Destroy(m);
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream;
    so.Ordered = true;
    so.Config.DeliverPolicy = js_DeliverLastPerSubject;
    natsSubscription *sub = NULL;
    st = js_SubscribeSync(&sub, js, subject, NULL, &so, &jerr);
    if (st != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "fleet: list: %s", natsStatus_GetText(st));
    ib_status ist = IB_OK;
    for (;;) {
        st = natsSubscription_NextMsg(&m, sub, READ_WAIT_MS);
        if (st != NATS_OK) {
            ist = ib_error_set(err, IB_ERR_NATS, "fleet: list: %s", natsStatus_GetText(st));
            break;
        }
        jsMsgMetaData *meta = NULL;
        uint64_t pending = 0, seq = 0;
        if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
            pending = meta->NumPending;
            seq = meta->Sequence.Stream;
            jsMsgMetaData_Destroy(meta);
        }
        ist = take_member(out, m, prefix_len, now_ms, lease_ms, err);
        natsMsg_Destroy(m);
        if (ist != IB_OK || pending == 0 || seq >= end)
            break;
    }
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    return ist;
}
