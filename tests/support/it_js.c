/* SPDX-License-Identifier: Apache-2.0 */
#include "it_js.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool it_consumer_get(it_consumer_state *out, it_server *s, const char *stream, const char *durable)
{
    jsCtx *js = it_server_js(s);
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    memset(out, 0, sizeof(*out));
    if (js == NULL || js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr) != NATS_OK)
        return false;
    out->pending = ci->NumPending;
    out->ack_pending = (uint64_t)ci->NumAckPending;
    out->redelivered = (uint64_t)ci->NumRedelivered;
    out->delivered = ci->Delivered.Consumer;
    out->ack_floor = ci->AckFloor.Stream;
    out->max_deliver = ci->Config->MaxDeliver;
    out->ack_wait_ms = ci->Config->AckWait / 1000000;
    jsConsumerInfo_Destroy(ci);
    return true;
}

bool it_wait_consumer(it_server *s, const char *stream, const char *durable, int64_t timeout_ms)
{
    it_consumer_state st;
    int64_t deadline = it_now_ms() + timeout_ms;
    while (!it_consumer_get(&st, s, stream, durable)) {
        if (it_now_ms() >= deadline)
            return false;
        it_sleep_ms(50);
    }
    return true;
}

bool it_wait_consumer_idle(it_consumer_state *last, it_server *s, const char *stream,
                           const char *durable, int64_t timeout_ms)
{
    it_consumer_state st;
    int64_t deadline = it_now_ms() + timeout_ms;
    int quiet = 0;
    memset(&st, 0, sizeof(st));
    /* Three idle readings in a row: a single one can fall between a
     * message's ack and the redelivery of a sibling nak'ed without delay. */
    while (quiet < 3) {
        if (it_now_ms() >= deadline) {
            if (last != NULL)
                *last = st;
            return false;
        }
        if (it_consumer_get(&st, s, stream, durable) && st.pending == 0 && st.ack_pending == 0)
            quiet++;
        else
            quiet = 0;
        it_sleep_ms(100);
    }
    if (last != NULL)
        *last = st;
    return true;
}

static bool stream_state(uint64_t *msgs, uint64_t *first, uint64_t *last_seq, it_server *s,
                         const char *stream)
{
    jsCtx *js = it_server_js(s);
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (js == NULL || js_GetStreamInfo(&si, js, stream, NULL, &jerr) != NATS_OK)
        return false;
    *msgs = si->State.Msgs;
    *first = si->State.FirstSeq;
    *last_seq = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    return true;
}

uint64_t it_stream_count(it_server *s, const char *stream)
{
    uint64_t msgs = 0, first = 0, last = 0;
    if (!stream_state(&msgs, &first, &last, s, stream))
        return 0;
    return msgs;
}

uint64_t it_wait_stream_count(it_server *s, const char *stream, uint64_t n, int64_t timeout_ms)
{
    int64_t deadline = it_now_ms() + timeout_ms;
    uint64_t have;
    while ((have = it_stream_count(s, stream)) < n && it_now_ms() < deadline)
        it_sleep_ms(50);
    return have;
}

static bool copy_headers(it_msg *out, natsMsg *m)
{
    const char **keys = NULL;
    int count = 0;
    if (natsMsgHeader_Keys(m, &keys, &count) != NATS_OK || count <= 0)
        return true; /* no headers */
    out->headers = calloc((size_t)count, sizeof(it_header));
    bool ok = out->headers != NULL;
    for (int i = 0; ok && i < count; i++) {
        const char *v = NULL;
        natsMsgHeader_Get(m, keys[i], &v);
        out->headers[i].key = strdup(keys[i]);
        out->headers[i].value = strdup(v != NULL ? v : "");
        out->header_count++;
        ok = out->headers[i].key != NULL && out->headers[i].value != NULL;
    }
    free((void *)keys);
    return ok;
}

bool it_stream_get(it_msg *out, it_server *s, const char *stream, uint64_t seq)
{
    jsCtx *js = it_server_js(s);
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    memset(out, 0, sizeof(*out));
    if (js == NULL || js_GetMsg(&m, js, stream, seq, NULL, &jerr) != NATS_OK)
        return false;
    out->seq = seq;
    out->subject = strdup(natsMsg_GetSubject(m) != NULL ? natsMsg_GetSubject(m) : "");
    out->len = (size_t)natsMsg_GetDataLength(m);
    out->data = malloc(out->len + 1);
    bool ok = out->subject != NULL && out->data != NULL;
    if (ok) {
        if (out->len > 0)
            memcpy(out->data, natsMsg_GetData(m), out->len);
        out->data[out->len] = 0;
        ok = copy_headers(out, m);
    }
    natsMsg_Destroy(m);
    if (!ok)
        it_msg_clear(out);
    return ok;
}

size_t it_stream_read_all(it_msg **out, it_server *s, const char *stream)
{
    uint64_t msgs = 0, first = 0, last = 0;
    size_t n = 0;
    *out = NULL;
    if (!stream_state(&msgs, &first, &last, s, stream) || msgs == 0)
        return 0;
    *out = calloc((size_t)msgs, sizeof(it_msg));
    if (*out == NULL)
        return 0;
    for (uint64_t seq = first; seq <= last && n < msgs; seq++)
        if (it_stream_get(&(*out)[n], s, stream, seq))
            n++;
    return n;
}

const char *it_msg_header(const it_msg *m, const char *key)
{
    for (size_t i = 0; i < m->header_count; i++)
        if (strcmp(m->headers[i].key, key) == 0)
            return m->headers[i].value;
    return NULL;
}

void it_msg_clear(it_msg *m)
{
    for (size_t i = 0; i < m->header_count; i++) {
        free(m->headers[i].key);
        free(m->headers[i].value);
    }
    free(m->headers);
    free(m->subject);
    free(m->data);
    memset(m, 0, sizeof(*m));
}

void it_msgs_free(it_msg *msgs, size_t n)
{
    if (msgs == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        it_msg_clear(&msgs[i]);
    free(msgs);
}

bool it_stream_add(it_server *s, const char *name, const char *subject, int64_t duplicates_ms)
{
    jsCtx *js = it_server_js(s);
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = &subject;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = duplicates_ms * 1000000; /* nanoseconds */
    natsStatus st = js != NULL ? js_AddStream(&si, js, &cfg, NULL, &jerr) : NATS_CONNECTION_CLOSED;
    jsStreamInfo_Destroy(si);
    if (st != NATS_OK)
        fprintf(stderr, "it_stream_add %s: %s (jetstream error %d)\n", name, natsStatus_GetText(st),
                (int)jerr);
    return st == NATS_OK;
}

bool it_js_publish_id(bool *duplicate, it_server *s, const char *subject, const char *msg_id,
                      const void *data, size_t len)
{
    jsCtx *js = it_server_js(s);
    natsMsg *m = NULL;
    jsPubAck *ack = NULL;
    jsErrCode jerr = 0;
    natsStatus st =
        js != NULL ? natsMsg_Create(&m, subject, NULL, data, (int)len) : NATS_CONNECTION_CLOSED;
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Nats-Msg-Id", msg_id);
    if (st == NATS_OK)
        st = js_PublishMsg(&ack, js, m, NULL, &jerr);
    if (st == NATS_OK && duplicate != NULL)
        *duplicate = ack->Duplicate;
    if (st != NATS_OK)
        fprintf(stderr, "it_js_publish_id %s: %s (jetstream error %d)\n", subject,
                natsStatus_GetText(st), (int)jerr);
    jsPubAck_Destroy(ack);
    natsMsg_Destroy(m);
    return st == NATS_OK;
}
