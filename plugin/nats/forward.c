/* SPDX-License-Identifier: Apache-2.0 */
/* Forwarding a message to another subject once (jetstream.h): what a
 * partitioned consumer does with a misplaced message and `ibus forward`
 * with every message of an unpartitioned stream. */
#include "jetstream.h"

#include <inttypes.h>
#include <stdio.h>
#include <strings.h>

/* What a forward does not carry: the headers JetStream acts on (the
 * original's own Nats-Msg-Id among them) and ours. */
static bool forward_drops(const char *key)
{
    return strncasecmp(key, "Nats-", 5) == 0 || strncasecmp(key, "Ibus-", 5) == 0;
}

char *ib_forward_msg_id(char *buf, size_t cap, const char *stream, uint64_t stream_seq)
{
    snprintf(buf, cap, "ibus-fwd-%s-%" PRIu64, stream, stream_seq);
    return buf;
}

ib_status ib_forward_publish(jsCtx *js, natsMsg *msg, const char *to, const char *stream,
                             uint64_t stream_seq, int64_t timeout_ms, bool *duplicate,
                             ib_error *err)
{
    char msg_id[300];
    ib_forward_msg_id(msg_id, sizeof(msg_id), stream, stream_seq);
    natsMsg *m = NULL;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = msg_id;
    po.MaxWait = timeout_ms;
    jsErrCode jerr = 0;
    jsPubAck *pa = NULL;
    natsStatus s = natsMsg_Create(&m, to, NULL, natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
    if (s == NATS_OK)
        s = ib_msg_copy_headers(m, msg, forward_drops);
    if (s == NATS_OK)
        s = js_PublishMsg(&pa, js, m, &po, &jerr);
    if (duplicate != NULL)
        *duplicate = s == NATS_OK && pa != NULL && pa->Duplicate;
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
    if (s == NATS_OK)
        return IB_OK;
    char why[256];
    return ib_error_set(err, IB_ERR_NATS, "forward to %s: %s", to,
                        ib_nats_strerror(why, sizeof(why), s));
}
