/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <stdio.h>
#include <string.h>

static ib_status reply_with(natsConnection *nc, natsMsg *msg, const char *body, ib_error *err)
{
    const char *reply = natsMsg_GetReply(msg);
    if (reply == NULL || reply[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "message has no reply subject to ack");
    natsStatus s = natsConnection_Publish(nc, reply, body, (int)strlen(body));
    if (s != NATS_OK) {
        char d[200];
        return ib_error_set(err, IB_ERR_NATS, "ack %.5s: %s", body,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    return IB_OK;
}

ib_status ib_ack(natsConnection *nc, natsMsg *msg, ib_error *err)
{
    return reply_with(nc, msg, "+ACK", err);
}

ib_status ib_nak(natsConnection *nc, natsMsg *msg, int64_t delay_ms, ib_error *err)
{
    char body[64];
    if (delay_ms <= 0)
        return reply_with(nc, msg, "-NAK", err);
    snprintf(body, sizeof(body), "-NAK {\"delay\":%lld}", (long long)delay_ms * 1000000LL);
    return reply_with(nc, msg, body, err);
}

ib_status ib_term(natsConnection *nc, natsMsg *msg, ib_error *err)
{
    return reply_with(nc, msg, "+TERM", err);
}

ib_status ib_in_progress(natsConnection *nc, natsMsg *msg, ib_error *err)
{
    return reply_with(nc, msg, "+WPI", err);
}
