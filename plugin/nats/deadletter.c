/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Header values must be one line: replace CR/LF so a detail string can
 * never inject a header. */
static void one_line(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src != NULL && src[i] != '\0' && i + 1 < cap; i++)
        dst[i] = (src[i] == '\r' || src[i] == '\n') ? ' ' : src[i];
    dst[i] = '\0';
}

/* Original headers that are not copied: ours (Ibus-*, set below, so an
 * original one can never vouch for what we did not check), and those
 * JetStream acts on when the dead letter is published. Nats-Msg-Id would
 * make the DLQ stream drop the dead letter as a duplicate of the original;
 * Nats-Expected-* would fail the publish (wrong stream, wrong last
 * sequence); Nats-Rollup would purge the DLQ stream or fail where rollups
 * are not allowed; Nats-TTL fails where per-message TTLs are not. */
static bool header_dropped(const char *key)
{
    static const char *const prefixes[] = {"Ibus-", "Nats-Expected-"};
    static const char *const names[] = {"Nats-Msg-Id", "Nats-Rollup", "Nats-TTL"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncasecmp(key, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcasecmp(key, names[i]) == 0)
            return true;
    return false;
}

static natsStatus set_headers(natsMsg *dl, const ib_dead_letter_info *info,
                              const char *orig_subject)
{
    char num[32], line[512];
    natsStatus s = natsMsgHeader_Set(dl, "Ibus-Reason", ib_dead_letter_reason_str(info->reason));
    if (s == NATS_OK && info->detail != NULL) {
        one_line(line, sizeof(line), info->detail);
        s = natsMsgHeader_Set(dl, "Ibus-Error", line);
    }
    if (s == NATS_OK && orig_subject != NULL)
        s = natsMsgHeader_Set(dl, "Ibus-Subject", orig_subject);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(dl, "Ibus-Stream", info->stream);
    if (s == NATS_OK && info->consumer != NULL)
        s = natsMsgHeader_Set(dl, "Ibus-Consumer", info->consumer);
    if (s == NATS_OK && info->handler != NULL) {
        one_line(line, sizeof(line), info->handler);
        s = natsMsgHeader_Set(dl, "Ibus-Handler", line);
    }
    snprintf(num, sizeof(num), "%" PRIu64, info->stream_seq);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(dl, "Ibus-Stream-Seq", num);
    snprintf(num, sizeof(num), "%" PRIu64, info->delivery_count);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(dl, "Ibus-Delivery-Count", num);
    if (s == NATS_OK && info->event_id != NULL)
        s = natsMsgHeader_Set(dl, "Ibus-Event-Id", info->event_id);
    if (s == NATS_OK && info->event_type != NULL) {
        one_line(line, sizeof(line), info->event_type);
        s = natsMsgHeader_Set(dl, "Ibus-Event-Type", line);
    }
    if (s == NATS_OK && info->trace != NULL)
        s = natsMsgHeader_Set(dl, "Ibus-Trace-Id", info->trace->trace_id);
    if (s == NATS_OK && info->trace != NULL)
        s = natsMsgHeader_Set(dl, "Ibus-Span-Id", info->trace->span_id);
    return s;
}

ib_status ib_dead_letter_publish(natsConnection *nc, jsCtx *js, const char *subject, natsMsg *msg,
                                 const ib_dead_letter_info *info, int64_t retry_delay_ms,
                                 int64_t publish_timeout_ms, ib_error *err)
{
    natsMsg *dl = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    char msg_id[640], detail[200];
    ib_status st = IB_OK;

    natsStatus s =
        natsMsg_Create(&dl, subject, NULL, natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
    if (s == NATS_OK)
        s = ib_msg_copy_headers(dl, msg, header_dropped);
    if (s == NATS_OK)
        s = set_headers(dl, info, natsMsg_GetSubject(msg));
    if (s == NATS_OK) {
        jsPubOptions_Init(&po);
        /* The durable is part of the id: two durables on one stream that
         * dead-letter the same message into one DLQ stream must not lose
         * the second dead letter to the duplicate window. */
        snprintf(msg_id, sizeof(msg_id), "%s:%s:%" PRIu64, info->stream,
                 info->consumer != NULL ? info->consumer : "", info->stream_seq);
        po.MsgId = msg_id;
        po.MaxWait = publish_timeout_ms > 0 ? publish_timeout_ms : 5000;
        s = js_PublishMsg(&pa, js, dl, &po, &jerr);
    }
    if (s != NATS_OK) {
        st = ib_error_set(err, IB_ERR_NATS, "dead-letter publish to %s failed (%s); message nak'ed",
                          subject, ib_nats_strerror(detail, sizeof(detail), s));
        ib_nak(nc, msg, retry_delay_ms, NULL);
    }
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(dl);
    return st;
}
