/* SPDX-License-Identifier: Apache-2.0 */
/* A partitioned consumer's marker log in a JetStream stream
 * (marker_stream.h). */
#include "marker_stream.h"

#include "partition.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUBJECT_MAX 256
#define MSG_ID_MAX 300
/* The largest record: every name at its longest, every entry. */
#define RECORD_MAX                                                                                 \
    (IB_MARKER_LOG_HEADER + IB_MARKER_LOG_CONSUMERS_MAX * (1 + IB_MARKER_LOG_NAME_MAX) +           \
     IB_MARKER_LOG_ENTRIES_MAX * IB_MARKER_LOG_ENTRY)

struct ib_marker_stream {
    natsConnection *nc; /* BORROWED */
    jsCtx *js;
    char *stream;
    char *subject_base;
    char *durable;
    int64_t timeout_ms;
    int attempts;
    uint8_t *buf;                 /* RECORD_MAX bytes: the record being appended */
    ib_marker_log_entry *entries; /* IB_MARKER_LOG_ENTRIES_MAX: a record replayed */
    ib_marker_log_names names;
    atomic_bool async_failed; /* an async append of the append_all in progress failed */
    int64_t max_age_ms;       /* the stream's MaxAge: how long it keeps a record; 0: for ever */
};

static ib_status nats_fail(ib_error *err, const char *stream, const char *what, natsStatus st,
                           jsErrCode jerr)
{
    return ib_error_set(err, IB_ERR_NATS, "marker log %s: %s: %s (JetStream error %d)", stream,
                        what, natsStatus_GetText(st), (int)jerr);
}

#define DESCRIPTION_PREFIX "ibus marker log, partitions="

/* The N a stream's description records, or 0 when it records none. */
static uint32_t partitions_recorded(const jsStreamInfo *info)
{
    const char *d = info->Config->Description;
    size_t n = strlen(DESCRIPTION_PREFIX);
    if (d == NULL || strncmp(d, DESCRIPTION_PREFIX, n) != 0)
        return 0;
    char *end = NULL;
    unsigned long v = strtoul(d + n, &end, 10);
    return end != d + n && *end == '\0' && v <= IB_PARTITIONS_MAX ? (uint32_t)v : 0;
}

/* Whether `info` describes a stream that takes "<base>.>". */
static bool takes_subjects(const jsStreamInfo *info, const char *wanted)
{
    for (int i = 0; i < info->Config->SubjectsLen; i++)
        if (strcmp(info->Config->Subjects[i], wanted) == 0)
            return true;
    return false;
}

/* The stream, made if missing, or the one there if it is ours. */
static ib_status stream_ensure(ib_marker_stream *s, const ib_marker_stream_options *o,
                               ib_error *err)
{
    char wanted[SUBJECT_MAX];
    snprintf(wanted, sizeof(wanted), "%s.>", s->subject_base);
    jsStreamInfo *info = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetStreamInfo(&info, s->js, s->stream, NULL, &jerr);
    if (st == NATS_OK) {
        bool ours = takes_subjects(info, wanted);
        uint32_t n = partitions_recorded(info);
        s->max_age_ms = info->Config->MaxAge / 1000000;
        jsStreamInfo_Destroy(info);
        if (!ours)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "marker log %s: the stream exists but does not take %s: it "
                                "belongs to something else",
                                s->stream, wanted);
        if (n != o->partitions)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "marker log %s: the stream was made for %" PRIu32
                                " partitions and this process is configured for %" PRIu32
                                "; the number of partitions of a stream is fixed: start it with "
                                "--partitions %" PRIu32,
                                s->stream, n, o->partitions, n);
        return IB_OK;
    }
    if (st != NATS_NOT_FOUND)
        return nats_fail(err, s->stream, "stream info", st, jerr);
    if (o->must_exist)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "marker log %s: the stream does not exist: no partitioned consumer "
                            "of that durable has run yet",
                            s->stream);
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char *subjects[] = {wanted};
    char description[64];
    snprintf(description, sizeof(description), DESCRIPTION_PREFIX "%" PRIu32, o->partitions);
    cfg.Name = s->stream;
    cfg.Description = description;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Retention = js_LimitsPolicy;
    cfg.Replicas = o->replicas > 0 ? o->replicas : 1;
    cfg.MaxAge = o->max_age_ms > 0 ? o->max_age_ms * 1000000 : 0;
    s->max_age_ms = o->max_age_ms > 0 ? o->max_age_ms : 0;
    st = js_AddStream(&info, s->js, &cfg, NULL, &jerr);
    if (st != NATS_OK)
        return nats_fail(err, s->stream, "make the stream", st, jerr);
    jsStreamInfo_Destroy(info);
    return IB_OK;
}

int64_t ib_marker_stream_max_age_ms(const ib_marker_stream *s)
{
    return s->max_age_ms;
}

/* nats.c's thread: an async append came back refused or not at all. */
static void on_async_error(jsCtx *js, jsPubAckErr *pae, void *closure)
{
    (void)js;
    (void)pae; /* nats.c frees it and its message */
    ib_marker_stream *s = closure;
    atomic_store(&s->async_failed, true);
}

void ib_marker_stream_close(ib_marker_stream *s)
{
    if (s == NULL)
        return;
    jsCtx_Destroy(s->js);
    free(s->stream);
    free(s->subject_base);
    free(s->durable);
    free(s->buf);
    free(s->entries);
    free(s);
}

ib_status ib_marker_stream_open(ib_marker_stream **out, natsConnection *nc,
                                const ib_marker_stream_options *o, ib_error *err)
{
    *out = NULL;
    if (o->stream == NULL || o->stream[0] == '\0' || strpbrk(o->stream, ".*> \t") != NULL ||
        o->subject_base == NULL || o->subject_base[0] == '\0' ||
        strpbrk(o->subject_base, "*> \t") != NULL || strlen(o->subject_base) > SUBJECT_MAX - 16 ||
        o->durable == NULL || o->durable[0] == '\0')
        return ib_error_set(err, IB_ERR_CONFIG,
                            "marker log: a stream name (one token) and a subject without "
                            "wildcards are needed");
    if (o->partitions < 1 || o->partitions > IB_PARTITIONS_MAX)
        return ib_error_set(err, IB_ERR_CONFIG, "marker log: %" PRIu32 " partitions (1 to %u)",
                            o->partitions, IB_PARTITIONS_MAX);
    ib_marker_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "marker log: no memory");
    s->nc = nc;
    s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 5000;
    s->attempts = o->attempts > 0 ? o->attempts : 3;
    s->stream = strdup(o->stream);
    s->subject_base = strdup(o->subject_base);
    s->durable = strdup(o->durable);
    s->buf = malloc(RECORD_MAX);
    s->entries = malloc(IB_MARKER_LOG_ENTRIES_MAX * sizeof(*s->entries));
    if (s->stream == NULL || s->subject_base == NULL || s->durable == NULL || s->buf == NULL ||
        s->entries == NULL) {
        ib_marker_stream_close(s);
        return ib_error_set(err, IB_ERR_NOMEM, "marker log: no memory");
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = s->timeout_ms;
    jo.PublishAsync.ErrHandler = on_async_error;
    jo.PublishAsync.ErrHandlerClosure = s;
    natsStatus st = natsConnection_JetStream(&s->js, nc, &jo);
    ib_status ist = st == NATS_OK ? stream_ensure(s, o, err)
                                  : nats_fail(err, o->stream, "JetStream context", st, 0);
    if (ist != IB_OK) {
        ib_marker_stream_close(s);
        return ist;
    }
    *out = s;
    return IB_OK;
}

/* Encodes `rec` into s->buf (*len bytes) with its subject and message
 * id. Errors: IB_ERR_INVALID_ARG. */
static ib_status prepare(ib_marker_stream *s, const ib_marker_log_record *rec, size_t *len,
                         char subject[SUBJECT_MAX], char msg_id[MSG_ID_MAX], ib_error *err)
{
    ib_status ist = ib_marker_log_encode(rec, s->buf, RECORD_MAX, len, err);
    if (ist != IB_OK)
        return ist;
    snprintf(subject, SUBJECT_MAX, "%s.%" PRIu32, s->subject_base, rec->partition);
    if (!ib_marker_log_msg_id(msg_id, MSG_ID_MAX, s->durable, rec->partition, rec->epoch,
                              rec->sequence))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "marker log %s: message id too long",
                            s->stream);
    return IB_OK;
}

ib_status ib_marker_stream_append(ib_marker_stream *s, const ib_marker_log_record *rec,
                                  uint64_t *seq, ib_error *err)
{
    size_t len = 0;
    char subject[SUBJECT_MAX], msg_id[MSG_ID_MAX];
    ib_status ist = prepare(s, rec, &len, subject, msg_id, err);
    if (ist != IB_OK)
        return ist;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = msg_id;
    po.ExpectStream = s->stream;
    po.MaxWait = s->timeout_ms;
    natsStatus st = NATS_OK;
    jsErrCode jerr = 0;
    for (int attempt = 0; attempt < s->attempts; attempt++) {
        jsPubAck *ack = NULL;
        st = js_Publish(&ack, s->js, subject, s->buf, (int)len, &po, &jerr);
        if (st == NATS_OK) {
            *seq = ack->Sequence;
            jsPubAck_Destroy(ack);
            return IB_OK;
        }
        /* a refusal by the stream will not change; a lost ack may */
        if (st != NATS_TIMEOUT && st != NATS_NO_RESPONDERS)
            break;
    }
    return nats_fail(err, s->stream, "append", st, jerr);
}

/* Sends the records without waiting between them; true when every one
 * was acknowledged as stored (nothing is left pending either way). */
static bool append_pipelined(ib_marker_stream *s, const ib_marker_log_record *recs, size_t n)
{
    atomic_store(&s->async_failed, false);
    bool sent = true;
    for (size_t i = 0; i < n && sent; i++) {
        size_t len = 0;
        char subject[SUBJECT_MAX], msg_id[MSG_ID_MAX];
        ib_error ignored;
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = msg_id;
        po.ExpectStream = s->stream;
        sent = prepare(s, &recs[i], &len, subject, msg_id, &ignored) == IB_OK &&
               js_PublishAsync(s->js, subject, s->buf, (int)len, &po) == NATS_OK;
    }
    jsPubOptions wait;
    jsPubOptions_Init(&wait);
    wait.MaxWait = s->timeout_ms;
    natsStatus st = js_PublishAsyncComplete(s->js, &wait);
    if (st != NATS_OK) {
        /* forget what is still unanswered: the caller appends it again */
        natsMsgList pending = {0};
        if (js_PublishAsyncGetPendingList(&pending, s->js) == NATS_OK)
            natsMsgList_Destroy(&pending);
    }
    return sent && st == NATS_OK && !atomic_load(&s->async_failed);
}

ib_status ib_marker_stream_append_all(ib_marker_stream *s, const ib_marker_log_record *recs,
                                      size_t n, ib_error *err)
{
    if (n > 1 && append_pipelined(s, recs, n))
        return IB_OK;
    /* One at a time, each waited for and retried: a record the pipelined
     * pass stored already is dropped by the stream as a duplicate of its
     * message id; an error is the first that stays. */
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = 0;
        ib_status st = ib_marker_stream_append(s, &recs[i], &seq, err);
        if (st != IB_OK)
            return st;
    }
    return IB_OK;
}

/* The stream sequence of the last record of `subject`, 0 when none. */
static ib_status last_seq(ib_marker_stream *s, const char *subject, uint64_t *out, ib_error *err)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    *out = 0;
    natsStatus st = js_GetLastMsg(&m, s->js, s->stream, subject, NULL, &jerr);
    if (st == NATS_NOT_FOUND)
        return IB_OK;
    if (st != NATS_OK)
        return nats_fail(err, s->stream, "last record", st, jerr);
    *out = natsMsg_GetSequence(m);
    natsMsg_Destroy(m);
    return IB_OK;
}

/* One replayed message: decoded, checked against its subject's
 * partition, applied. */
static ib_status replay_one(ib_marker_stream *s, natsMsg *m, uint32_t partition, uint64_t seq,
                            ib_marker_table *t, ib_error *err)
{
    ib_marker_log_record rec;
    ib_error why = {0};
    int len = natsMsg_GetDataLength(m);
    if (ib_marker_log_decode(&rec, (const uint8_t *)natsMsg_GetData(m), len > 0 ? (size_t)len : 0,
                             &s->names, s->entries, IB_MARKER_LOG_ENTRIES_MAX, &why) != IB_OK)
        return ib_error_set(err, IB_ERR_RECORDER,
                            "marker log %s: record %" PRIu64 " of partition %" PRIu32
                            " is not valid (%s); the partition is not taken",
                            s->stream, seq, partition, why.msg);
    if (rec.partition != partition)
        return ib_error_set(err, IB_ERR_RECORDER,
                            "marker log %s: record %" PRIu64 " on the subject of partition "
                            "%" PRIu32 " says partition %" PRIu32 "; the partition is not taken",
                            s->stream, seq, partition, rec.partition);
    return ib_marker_table_apply(t, &rec, err);
}

ib_status ib_marker_stream_replay(ib_marker_stream *s, uint32_t partition, ib_marker_table *t,
                                  uint64_t *records, ib_error *err)
{
    char subject[SUBJECT_MAX];
    uint64_t end = 0, n = 0;
    snprintf(subject, sizeof(subject), "%s.%" PRIu32, s->subject_base, partition);
    if (records != NULL)
        *records = 0;
    ib_status ist = last_seq(s, subject, &end, err);
    if (ist != IB_OK || end == 0)
        return ist;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = s->stream;
    so.Ordered = true;
    so.Config.DeliverPolicy = js_DeliverAll;
    natsSubscription *sub = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_SubscribeSync(&sub, s->js, subject, NULL, &so, &jerr);
    if (st != NATS_OK)
        return nats_fail(err, s->stream, "replay", st, jerr);
    for (;;) {
        natsMsg *m = NULL;
        st = natsSubscription_NextMsg(&m, sub, s->timeout_ms);
        if (st != NATS_OK) {
            ist = nats_fail(err, s->stream, "replay (waiting for a record)", st, 0);
            break;
        }
        jsMsgMetaData *meta = NULL;
        uint64_t seq = 0;
        if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
            seq = meta->Sequence.Stream;
            jsMsgMetaData_Destroy(meta);
        }
        ist = seq == 0 ? ib_error_set(err, IB_ERR_NATS,
                                      "marker log %s: replay: a message "
                                      "without its stream sequence",
                                      s->stream)
                       : replay_one(s, m, partition, seq, t, err);
        natsMsg_Destroy(m);
        if (ist != IB_OK)
            break;
        n++;
        if (seq >= end)
            break;
    }
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    if (records != NULL)
        *records = n;
    return ist;
}
