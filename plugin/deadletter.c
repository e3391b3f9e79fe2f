#include "deadletter.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ack.h"
#include "nats_conn.h"

/* Header values must be one line: replace CR/LF so a detail string can
 * never inject a header. */
static void one_line(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src != NULL && src[i] != '\0' && i + 1 < cap; i++)
        dst[i] = (src[i] == '\r' || src[i] == '\n') ? ' ' : src[i];
    dst[i] = '\0';
}

static natsStatus set_headers(natsMsg *dl, const ib_dead_letter_info *info,
                              const char *orig_subject)
{
    char num[32], line[256];
    natsStatus s = natsMsgHeader_Set(dl, "Ibus-Reason", info->reason);
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
    return s;
}

ib_status ib_dead_letter(natsConnection *nc, jsCtx *js, const char *subject, natsMsg *msg,
                         const ib_dead_letter_info *info, int64_t retry_delay_ms,
                         int64_t publish_timeout_ms, ib_error *err)
{
    natsMsg *dl = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    char msg_id[320], detail[200];
    ib_status st = IB_OK;

    natsStatus s =
        natsMsg_Create(&dl, subject, NULL, natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
    if (s == NATS_OK)
        s = set_headers(dl, info, natsMsg_GetSubject(msg));
    if (s == NATS_OK) {
        jsPubOptions_Init(&po);
        snprintf(msg_id, sizeof(msg_id), "%s:%" PRIu64, info->stream, info->stream_seq);
        po.MsgId = msg_id;
        po.MaxWait = publish_timeout_ms > 0 ? publish_timeout_ms : 5000;
        s = js_PublishMsg(&pa, js, dl, &po, &jerr);
    }
    if (s != NATS_OK) {
        st = ib_error_set(err, IB_ERR_NATS, "dead-letter publish to %s failed (%s); message nak'ed",
                          subject, ib_nats_strerror(detail, sizeof(detail), s));
        ib_nak(nc, msg, retry_delay_ms, NULL);
        goto out;
    }
    st = ib_term(nc, msg, err);
out:
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(dl);
    return st;
}
