/* The kv: recorder's traffic: key names, reads through the stream leader,
 * and pipelined conditional writes (see kv_internal.h for the layout).
 *
 * Reads use js_GetLastMsg, the stream's own message API, which the leader
 * answers: a direct get (kvStore_Get) may be served by a follower that has
 * not applied the latest writes yet. Writes are publishes to the bucket's
 * subjects with an expected last subject sequence, because only those
 * report jsErrCode 10071 reliably when the key is taken. */
#include "kv_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ib__kv_subject(const kv_recorder *k, char *out, char type, const ib_marker_key *key,
                    uint32_t n)
{
    static const char hex[] = "0123456789abcdef";
    int len = snprintf(out, KV_SUBJECT_MAX, "$KV.%s.%c.", k->bucket, type);
    /* The consumer is at most IB_CONSUMER_MAX bytes: 2 hex digits each
     * plus the id and the epoch stay below KV_SUBJECT_MAX. */
    for (const unsigned char *c = (const unsigned char *)key->consumer; *c != '\0'; c++) {
        out[len++] = hex[*c >> 4];
        out[len++] = hex[*c & 0xf];
    }
    if (n == 0)
        snprintf(out + len, (size_t)(KV_SUBJECT_MAX - len), ".%s", key->event_id);
    else
        snprintf(out + len, (size_t)(KV_SUBJECT_MAX - len), ".%s.%u", key->event_id, n);
}

ib_status ib__kv_fail(const kv_recorder *k, ib_error *err, natsStatus st, const char *what)
{
    const char *last = NULL;
    /* The connection's last error says more than the status name (the
     * server's text for a refused request, for instance). */
    if (k->nc != NULL && natsConnection_GetLastError(k->nc, &last) != NATS_OK && last != NULL &&
        last[0] != '\0')
        return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: %s: %s (%s)", k->bucket, what,
                            natsStatus_GetText(st), last);
    return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: %s: %s", k->bucket, what,
                        natsStatus_GetText(st));
}

ib_status ib__kv_read_last(kv_recorder *k, kv_read *out, const char *subject, ib_error *err)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    memset(out, 0, sizeof(*out));
    natsStatus s = js_GetLastMsg(&m, k->js, k->stream, subject, NULL, &jerr);
    /* A deleted bucket would otherwise show only as "Error". */
    if (jerr == JSStreamNotFoundErr)
        return ib_error_set(err, IB_ERR_RECORDER,
                            "recorder kv:%s: read: the bucket (stream %s) does not exist",
                            k->bucket, k->stream);
    if (s == NATS_NOT_FOUND)
        return IB_OK;
    if (s != NATS_OK)
        return ib__kv_fail(k, err, s, "read");
    const char *op = NULL;
    out->found = true;
    out->deleted = natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK;
    out->seq = natsMsg_GetSequence(m);
    int len = natsMsg_GetDataLength(m);
    if (len < 0)
        len = 0;
    if (len >= KV_VALUE_MAX)
        len = KV_VALUE_MAX - 1;
    memcpy(out->value, natsMsg_GetData(m), (size_t)len);
    out->value[len] = '\0';
    natsMsg_Destroy(m);
    return IB_OK;
}

/* --- pipelined conditional writes ----------------------------------------- */

typedef struct ack_ctx {
    pthread_mutex_t mu;
    kv_write *w;
    size_t n;
} ack_ctx;

/* Runs on the library's thread for every answer. The message is the one
 * published, so its address finds the write (cleared here, before the
 * message is freed, so a later message at the same address cannot match a
 * stale entry). A timeout or "no responders" leaves the write pending: its
 * outcome is unknown or nil, and it is sent again. */
static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    ack_ctx *a = closure;
    (void)js;
    (void)pa;
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n; i++) {
        kv_write *w = &a->w[i];
        if (w->inflight != msg)
            continue;
        w->inflight = NULL;
        if (pae == NULL)
            w->result = KV_WRITTEN;
        else if (pae->ErrCode == JSStreamWrongLastSequenceErr)
            w->result = KV_EXISTS;
        else if (pae->Err != NATS_TIMEOUT && pae->Err != NATS_NO_RESPONDERS) {
            w->result = KV_FAILED;
            w->st = pae->Err;
        }
        break;
    }
    pthread_mutex_unlock(&a->mu);
    /* With an ack handler the message is ours again. */
    natsMsg_Destroy(msg);
}

/* Sends every pending write once and waits for the answers. */
static ib_status publish_round(kv_recorder *k, ack_ctx *a, ib_error *err)
{
    jsCtx *js = NULL;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = k->wait_ms;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.AckHandlerClosure = a;
    natsStatus s = natsConnection_JetStream(&js, k->nc, &jo);
    if (s != NATS_OK)
        return ib__kv_fail(k, err, s, "JetStream context");
    for (size_t i = 0; i < a->n && s == NATS_OK; i++) {
        kv_write *w = &a->w[i];
        if (w->result != KV_PENDING)
            continue;
        natsMsg *m = NULL;
        jsPubOptions po;
        jsPubOptions_Init(&po);
        if (w->put)
            ; /* a plain put: nothing expected */
        else if (w->expect_seq == 0)
            po.ExpectNoMessage = true;
        else
            po.ExpectLastSubjectSeq = w->expect_seq;
        s = natsMsg_Create(&m, w->subject, NULL, w->value, (int)strlen(w->value));
        if (s != NATS_OK)
            break;
        pthread_mutex_lock(&a->mu);
        w->inflight = m;
        w->tries++;
        pthread_mutex_unlock(&a->mu);
        s = js_PublishMsgAsync(js, &m, &po);
        if (s != NATS_OK) {
            /* Not taken by the library: still ours to free. */
            pthread_mutex_lock(&a->mu);
            w->inflight = NULL;
            pthread_mutex_unlock(&a->mu);
            natsMsg_Destroy(m);
        }
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = k->wait_ms;
    natsStatus ws = js_PublishAsyncComplete(js, &po);
    jsCtx_Destroy(js);
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n; i++)
        a->w[i].inflight = NULL;
    pthread_mutex_unlock(&a->mu);
    if (s != NATS_OK)
        return ib__kv_fail(k, err, s, "publish");
    return ws == NATS_OK || ws == NATS_TIMEOUT ? IB_OK : ib__kv_fail(k, err, ws, "publish");
}

/* A write sent more than once that then found its key taken may have
 * taken it itself the first time: the value tells. */
static ib_status recognise_own(kv_recorder *k, kv_write *w, ib_error *err)
{
    kv_read rd;
    ib_status st = ib__kv_read_last(k, &rd, w->subject, err);
    if (st == IB_OK && rd.found && !rd.deleted && strcmp(rd.value, w->value) == 0)
        w->result = KV_WRITTEN;
    return st;
}

ib_status ib__kv_publish(kv_recorder *k, kv_write *w, size_t n, ib_error *err)
{
    ack_ctx a = {.w = w, .n = n};
    ib_status st = IB_OK;
    for (size_t i = 0; i < n; i++) {
        w[i].result = KV_PENDING;
        w[i].inflight = NULL;
        w[i].tries = 0;
    }
    pthread_mutex_init(&a.mu, NULL);
    for (int round = 0; round <= KV_RETRIES && st == IB_OK; round++) {
        size_t pending = 0;
        for (size_t i = 0; i < n; i++)
            pending += w[i].result == KV_PENDING;
        if (pending == 0)
            break;
        st = publish_round(k, &a, err);
    }
    pthread_mutex_destroy(&a.mu);
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        if (w[i].result == KV_EXISTS && w[i].tries > 1)
            st = recognise_own(k, &w[i], err);
        else if (w[i].result == KV_PENDING)
            st = ib__kv_fail(k, err, NATS_TIMEOUT, "write not acknowledged");
        else if (w[i].result == KV_FAILED)
            st = ib__kv_fail(k, err, w[i].st, "write refused");
    }
    return st;
}

void ib__kv_prepare_epoch(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                          uint32_t attempts, int64_t end, const char *owner)
{
    ib__kv_subject(k, w->subject, 'c', key, epoch);
    snprintf(w->value, sizeof(w->value), "%u %lld %s", attempts, (long long)end, owner);
    w->expect_seq = 0;
    w->put = false;
    w->epoch = epoch;
    w->attempts = attempts;
    w->end = end;
}

void ib__kv_prepare_anchor(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                           uint32_t attempts, int64_t end, const char *owner)
{
    ib__kv_subject(k, w->subject, 'c', key, 1);
    snprintf(w->value, sizeof(w->value), "@%u %u %lld %s", epoch, attempts, (long long)end, owner);
    w->expect_seq = 0;
    w->put = true;
    w->epoch = 0;
}

ib_status ib__kv_refresh_anchors(kv_recorder *k, const kv_write *w, size_t n,
                                 const ib_marker_key *keys, const size_t *index, ib_error *err)
{
    kv_write *a = calloc(n > 0 ? n : 1, sizeof(*a));
    if (a == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory for %zu anchors",
                            k->bucket, n);
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        if (w[j].result != KV_WRITTEN || w[j].epoch < 2)
            continue;
        /* The owner is what follows "<attempts> <end> " in the value. */
        const char *sp = strchr(w[j].value, ' ');
        sp = sp != NULL ? strchr(sp + 1, ' ') : NULL;
        ib__kv_prepare_anchor(k, &a[m++], &keys[index != NULL ? index[j] : j], w[j].epoch,
                              w[j].attempts, w[j].end, sp != NULL ? sp + 1 : "");
    }
    ib_status st = m > 0 ? ib__kv_publish(k, a, m, err) : IB_OK;
    free(a);
    return st;
}

ib_status ib__kv_mark_keys(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                           const uint64_t *fps, size_t n, int64_t ts, ib_error *err)
{
    return ib__kv_mark_keys_with(k, keys, want, fps, n, ts, NULL, 0, err);
}

/* Fills w[0..) with the markers to write; returns how many. */
static size_t prepare_marks(kv_recorder *k, kv_write *w, const ib_marker_key *keys,
                            const bool *want, const uint64_t *fps, size_t n, int64_t ts)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (want != NULL && !want[i])
            continue;
        ib__kv_subject(k, w[m].subject, 'd', &keys[i], 0);
        uint64_t fp = fps != NULL ? fps[i] : 0;
        if (fp != 0)
            snprintf(w[m].value, sizeof(w[m].value), "%lld %llu", (long long)ts,
                     (unsigned long long)fp);
        else
            snprintf(w[m].value, sizeof(w[m].value), "%lld", (long long)ts);
        w[m].put = false;
        w[m].epoch = 0;
        w[m++].expect_seq = 0;
    }
    return m;
}

ib_status ib__kv_mark_keys_with(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                                const uint64_t *fps, size_t n, int64_t ts, const kv_write *extra,
                                size_t nextra, ib_error *err)
{
    kv_write *w = calloc(n + nextra > 0 ? n + nextra : 1, sizeof(*w));
    if (w == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to mark %zu keys",
                            k->bucket, n);
    size_t m = prepare_marks(k, w, keys, want, fps, n, ts);
    if (nextra > 0)
        memcpy(&w[m], extra, nextra * sizeof(*w));
    ib_status st = IB_OK;
    /* Taken means marked already, unless what is there is a forget's
     * tombstone: then the marker is written over it, by its sequence. The
     * extra writes go with the first round only. */
    for (int round = 0; round <= KV_RETRIES && m + (round == 0 ? nextra : 0) > 0 && st == IB_OK;
         round++) {
        st = ib__kv_publish(k, w, m + (round == 0 ? nextra : 0), err);
        size_t again = 0;
        for (size_t i = 0; i < m && st == IB_OK; i++) {
            kv_read rd;
            if (w[i].result != KV_EXISTS)
                continue;
            st = ib__kv_read_last(k, &rd, w[i].subject, err);
            if (st == IB_OK && rd.found && rd.deleted) {
                w[i].expect_seq = rd.seq;
                if (again != i)
                    w[again] = w[i];
                again++;
            }
        }
        m = again;
    }
    free(w);
    if (st == IB_OK && m > 0)
        return ib_error_set(err, IB_ERR_RECORDER,
                            "recorder kv:%s: a marker kept losing races with forgets", k->bucket);
    return st;
}
