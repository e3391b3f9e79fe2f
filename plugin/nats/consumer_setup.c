/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* nats-server 2.9's "consumer already exists" (a durable of that name with
 * another configuration); nats.c 3.4.1 has no name for it. */
#define JS_CONSUMER_EXISTS_ERR 10148

/* Whether a JetStream API error may go away by itself: no answer at all
 * (jerr 0: a timeout, no responders, a lost connection), a cluster that is
 * electing a leader or is short of peers or resources, JetStream still
 * starting. Any other error code is JetStream refusing the request as
 * asked, which asking again cannot change. */
static bool js_may_heal(jsErrCode jerr)
{
    switch ((int)jerr) {
    case 0:
    case JSClusterIncompleteErr:
    case JSClusterNoPeersErr:
    case JSClusterNotAssignedErr:
    case JSClusterNotAvailErr:
    case JSClusterNotLeaderErr:
    case JSConsumerCreateErr: /* also "consumer assignment not cleaned up yet" */
    case JSInsufficientResourcesErr:
    case JSMemoryResourcesExceededErr:
    case JSStorageResourcesExceededErr:
    case JSNotEnabledForAccountErr:
    case JSNotEnabledErr:
    case JSRaftGeneralErr:
    case JSStreamAssignmentErr:
    case JSStreamCreateErr:
    case JSStreamGeneralError:
    case JSStreamStoreFailedErr:
    case JSConsumerStoreFailedErr:
    case JSStreamOfflineErr:
    case JSConsumerOfflineErr:
        return true;
    default:
        return false;
    }
}

/* What fixes a refusal, as far as the error code tells; short, since the
 * whole message fits IB_ERROR_MSG_MAX. */
static const char *js_refusal_fix(jsErrCode jerr)
{
    switch ((int)jerr) {
    case JSStreamSubjectOverlapErr:
        return "another stream captures some of these subjects: name it with --stream, or give "
               "other --stream-subjects";
    case JSStreamNameExistErr:
        return "a stream of this name exists with another configuration: use it without "
               "--create, or edit it";
    case JSConsumerNameExistErr:
    case JSConsumerReplacementWithDifferentNameErr:
    case JS_CONSUMER_EXISTS_ERR:
        return "a consumer of this name exists with another configuration: choose another "
               "--durable, or edit it";
    default:
        return "JetStream refuses it as asked; waiting cannot change that";
    }
}

/* A failed JetStream API call: IB_ERR_REFUSED, with JetStream's text and
 * a fix, when JetStream refused it as asked; IB_ERR_NATS when it may
 * succeed later. */
static ib_status js_fail(ib_error *err, const char *what, natsStatus s, jsErrCode jerr)
{
    char d[200];
    ib_nats_strerror(d, sizeof(d), s);
    if (js_may_heal(jerr))
        return ib_error_set(err, IB_ERR_NATS, "%s: %s (jetstream error %d)", what, d, (int)jerr);
    return ib_error_set(err, IB_ERR_REFUSED, "%s: %s (jetstream error %d); %s", what, d, (int)jerr,
                        js_refusal_fix(jerr));
}

/* The limits of a stream ensure_stream creates; 0 = none (replicas: 1). */
typedef struct stream_limits {
    int64_t max_age_ms;
    int64_t max_bytes;
    int replicas;
    bool discard_new; /* at max_bytes, refuse new messages instead of dropping old ones */
} stream_limits;

/* An existing stream keeps its settings: say so when they differ from the
 * limits asked for, which apply only when creating it. */
static void warn_limits(const jsStreamInfo *si, const char *name, const stream_limits *lim)
{
    int64_t age_ms = si->Config != NULL ? si->Config->MaxAge / 1000000 : 0;
    int64_t bytes = si->Config != NULL ? si->Config->MaxBytes : 0;
    if ((lim->max_age_ms > 0 && lim->max_age_ms != age_ms) ||
        (lim->max_bytes > 0 && lim->max_bytes != bytes))
        ib_log(IB_SEV_WARN,
               "stream exists with other limits; the stream limits apply only when creating "
               "it (change an existing stream with nats stream edit)",
               IB_LOG_STR("stream", name), IB_LOG_I64("max_age_ms", age_ms),
               IB_LOG_I64("max_bytes", bytes));
}

/* Creates stream `name` capturing `subjects` (comma-separated), with
 * `lim`, unless it exists. */
static ib_status ensure_stream(jsCtx *js, const char *name, const char *subjects,
                               const stream_limits *lim, ib_error *err)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, name, NULL, &jerr);
    if (s == NATS_OK) {
        warn_limits(si, name, lim);
        jsStreamInfo_Destroy(si);
        return IB_OK;
    }
    if (s != NATS_NOT_FOUND && jerr != JSStreamNotFoundErr)
        return js_fail(err, "stream info", s, jerr);

    char *copy = strdup(subjects);
    const char *list[32];
    int n = 0;
    if (copy == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "stream %s: out of memory", name);
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && n < 32; t = strtok_r(NULL, ",", &save))
        list[n++] = t;
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = list;
    cfg.SubjectsLen = n;
    cfg.Storage = js_FileStorage;
    cfg.MaxAge = lim->max_age_ms * 1000000; /* nanoseconds */
    if (lim->max_bytes > 0)
        cfg.MaxBytes = lim->max_bytes;
    cfg.Discard = lim->discard_new ? js_DiscardNew : js_DiscardOld;
    cfg.Replicas = lim->replicas > 0 ? lim->replicas : 1;
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    free(copy);
    if (s != NATS_OK) {
        char what[256];
        snprintf(what, sizeof(what), "create stream %s (%s)", name, subjects);
        return js_fail(err, what, s, jerr);
    }
    jsStreamInfo_Destroy(si);
    ib_log(IB_SEV_INFO, "stream created", IB_LOG_STR("stream", name),
           IB_LOG_STR("subjects", subjects), IB_LOG_I64("max_age_ms", lim->max_age_ms),
           IB_LOG_I64("max_bytes", lim->max_bytes),
           IB_LOG_STR("discard", lim->discard_new ? "new" : "old"));
    return IB_OK;
}

static void facts_from(ib_consumer_facts *out, const jsConsumerInfo *ci)
{
    const jsConsumerConfig *cc = ci->Config;
    out->exists = true;
    out->ack_wait_ms = cc->AckWait / 1000000;
    out->max_deliver = cc->MaxDeliver;
    out->num_pending = ci->NumPending;
    out->num_ack_pending = ci->NumAckPending;
    snprintf(out->filter_subject, sizeof(out->filter_subject), "%s",
             cc->FilterSubject != NULL ? cc->FilterSubject : "");
    out->backoff_max_ms = 0;
    for (int i = 0; cc->BackOff != NULL && i < cc->BackOffLen; i++)
        if (cc->BackOff[i] / 1000000 > out->backoff_max_ms) /* nanoseconds */
            out->backoff_max_ms = cc->BackOff[i] / 1000000;
}

ib_status ib_consumer_facts_get(ib_consumer_facts *out, jsCtx *js, const char *stream,
                                const char *durable, ib_error *err)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    memset(out, 0, sizeof(*out));
    natsStatus s = js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr);
    if (s == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr || jerr == JSStreamNotFoundErr)
        return IB_OK; /* an answer: it does not exist */
    if (s != NATS_OK)
        return js_fail(err, "consumer info", s, jerr);
    facts_from(out, ci);
    jsConsumerInfo_Destroy(ci);
    return IB_OK;
}

ib_status ib_stream_max_age_get(int64_t *max_age_ms, jsCtx *js, const char *stream, ib_error *err)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    *max_age_ms = 0;
    natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr)
        return ib_error_set(err, IB_ERR_CONFIG, "stream %s does not exist", stream);
    if (s != NATS_OK)
        return js_fail(err, "stream info", s, jerr);
    *max_age_ms = si->Config->MaxAge / 1000000; /* nanoseconds */
    jsStreamInfo_Destroy(si);
    return IB_OK;
}

static ib_status create_consumer(jsConsumerInfo **ci, jsCtx *js, const ib_consumer_setup *s,
                                 ib_error *err)
{
    jsConsumerConfig cc;
    jsErrCode jerr = 0;
    int64_t backoff_ns[32];
    jsConsumerConfig_Init(&cc);
    cc.Durable = s->durable;
    cc.AckPolicy = js_AckExplicit;
    cc.DeliverPolicy = js_DeliverAll;
    cc.AckWait = s->ack_wait_ms * 1000000LL; /* nanoseconds */
    /* The server may redeliver without limit: ibus enforces its own
     * delivery limit (the poison rule), so a dead-letter publish that fails on the
     * last delivery can nak and be tried again instead of being stranded
     * by a server that will not deliver it any more. */
    cc.MaxDeliver = -1;
    cc.MaxAckPending = s->max_ack_pending;
    if (s->filter_subject != NULL && s->filter_subject[0] != '\0')
        cc.FilterSubject = s->filter_subject;
    if (s->backoff_ms != NULL && s->backoff_len > 0) {
        size_t n = s->backoff_len < 32 ? s->backoff_len : 32;
        for (size_t i = 0; i < n; i++)
            backoff_ns[i] = s->backoff_ms[i] * 1000000LL;
        cc.BackOff = backoff_ns;
        cc.BackOffLen = (int)n;
    }
    natsStatus st = js_AddConsumer(ci, js, s->stream, &cc, NULL, &jerr);
    if (st != NATS_OK) {
        char what[256];
        snprintf(what, sizeof(what), "create consumer %s on stream %s", s->durable, s->stream);
        return js_fail(err, what, st, jerr);
    }
    return IB_OK;
}

/* A consumer refuses pull requests beyond its limits with a 409 each, so
 * a host that asks for more than they allow would consume nothing: fail at
 * bind instead, naming the setting and both values. */
static ib_status check_pull_limits(const jsConsumerConfig *cc, const ib_consumer_setup *s,
                                   ib_error *err)
{
    if (s->batch > 0 && cc->MaxRequestBatch > 0 && (int64_t)s->batch > cc->MaxRequestBatch)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "pull batch size %zu exceeds the consumer's MaxRequestBatch %lld "
                            "(consumer %s on stream %s)",
                            s->batch, (long long)cc->MaxRequestBatch, s->durable, s->stream);
    /* MaxRequestExpires is in nanoseconds; a request may last exactly as
     * long */
    if (s->pull_expires_ms > 0 && cc->MaxRequestExpires > 0 &&
        s->pull_expires_ms * 1000000LL > cc->MaxRequestExpires)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "pull request lifetime %lldms exceeds the consumer's "
                            "MaxRequestExpires %lldms (consumer %s on stream %s)",
                            (long long)s->pull_expires_ms,
                            (long long)(cc->MaxRequestExpires / 1000000), s->durable, s->stream);
    /* One more than this process needs, so a second process, or a request
     * of this one that the server has not yet dropped, is not refused at
     * once. */
    if (s->waiting_requests > 0 && cc->MaxWaiting > 0 && cc->MaxWaiting < s->waiting_requests + 1)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "the consumer's MaxWaiting %lld is too small: ibus keeps "
                            "up to %lld pull requests waiting and needs at least %lld (consumer "
                            "%s on stream %s)",
                            (long long)cc->MaxWaiting, (long long)s->waiting_requests,
                            (long long)s->waiting_requests + 1, s->durable, s->stream);
    return IB_OK;
}

ib_status ib_consumer_ensure(ib_consumer_facts *out, jsCtx *js, const ib_consumer_setup *s,
                             ib_error *err)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    ib_status st;

    memset(out, 0, sizeof(*out));
    if (s->create) {
        const char *subjects = s->stream_subjects;
        char fallback[300];
        if (subjects == NULL || subjects[0] == '\0') {
            snprintf(fallback, sizeof(fallback), "%s",
                     s->filter_subject != NULL && s->filter_subject[0] != '\0' ? s->filter_subject
                                                                               : "events.>");
            subjects = fallback;
        }
        const stream_limits lim = {s->stream_max_age_ms, s->stream_max_bytes, s->stream_replicas,
                                   false};
        if ((st = ensure_stream(js, s->stream, subjects, &lim, err)) != IB_OK)
            return st;
        if (s->dead_letter_subject != NULL && s->dead_letter_subject[0] != '\0') {
            char dlq[300];
            /* stream names may not hold '.', '*', '>' or spaces */
            snprintf(dlq, sizeof(dlq), "DLQ_%s",
                     s->dead_letter_owner != NULL ? s->dead_letter_owner : s->durable);
            for (char *c = dlq; *c != '\0'; c++)
                if (*c == '.' || *c == '*' || *c == '>' || *c == ' ')
                    *c = '_';
            ib_error e;
            const stream_limits dl = {s->dead_letter_max_age_ms, s->dead_letter_max_bytes,
                                      s->stream_replicas, true};
            if (ensure_stream(js, dlq, s->dead_letter_subject, &dl, &e) != IB_OK)
                ib_log_kv(IB_SEV_WARN, "dead-letter stream not created", "error", e.msg, NULL);
        }
    }
    natsStatus ns = js_GetConsumerInfo(&ci, js, s->stream, s->durable, NULL, &jerr);
    if (ns != NATS_OK &&
        (ns == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr || jerr == JSStreamNotFoundErr)) {
        if (!s->create && jerr == JSStreamNotFoundErr)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "stream %s does not exist: create it, or start ibus run with "
                                "--create (which also sets up consumer %s)",
                                s->stream, s->durable);
        if (!s->create)
            return ib_error_set(err, IB_ERR_CONFIG,
                                "consumer %s on stream %s does not exist: create it, or start "
                                "ibus run with --create",
                                s->durable, s->stream);
        if ((st = create_consumer(&ci, js, s, err)) != IB_OK)
            return st;
        ib_log_kv(IB_SEV_INFO, "consumer created", "stream", s->stream, "durable", s->durable,
                  NULL);
    } else if (ns != NATS_OK) {
        return js_fail(err, "consumer info", ns, jerr);
    }
    if (ci->Config->DeliverSubject != NULL && ci->Config->DeliverSubject[0] != '\0') {
        jsConsumerInfo_Destroy(ci);
        return ib_error_set(err, IB_ERR_CONFIG,
                            "consumer %s on stream %s is a push consumer; ibus needs a "
                            "pull consumer",
                            s->durable, s->stream);
    }
    if (ci->Config->AckPolicy != js_AckExplicit) {
        jsConsumerInfo_Destroy(ci);
        return ib_error_set(err, IB_ERR_CONFIG, "consumer %s must use explicit acks", s->durable);
    }
    if ((st = check_pull_limits(ci->Config, s, err)) != IB_OK) {
        jsConsumerInfo_Destroy(ci);
        return st;
    }
    facts_from(out, ci);
    jsConsumerInfo_Destroy(ci);
    return IB_OK;
}

ib_status ib_consumer_rewind(uint64_t *from, jsCtx *js, const char *stream, const char *durable,
                             ib_error *err)
{
    jsConsumerInfo *ci = NULL, *made = NULL;
    jsErrCode jerr = 0;
    char what[256];
    *from = 0;
    snprintf(what, sizeof(what), "rewind consumer %s on stream %s", durable, stream);
    natsStatus st = js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr);
    if (st != NATS_OK)
        return js_fail(err, what, st, jerr);
    if (ci->Delivered.Stream <= ci->AckFloor.Stream) {
        jsConsumerInfo_Destroy(ci);
        return IB_OK; /* everything delivered was acked: nothing waits */
    }
    jsConsumerConfig cc = *ci->Config; /* its strings stay in ci until it is destroyed */
    cc.DeliverPolicy = js_DeliverByStartSequence;
    cc.OptStartSeq = ci->AckFloor.Stream + 1;
    cc.OptStartTime = 0;
    st = js_DeleteConsumer(js, stream, durable, NULL, &jerr);
    if (st == NATS_OK || st == NATS_NOT_FOUND)
        st = js_AddConsumer(&made, js, stream, &cc, NULL, &jerr);
    if (st == NATS_OK)
        *from = cc.OptStartSeq;
    jsConsumerInfo_Destroy(made);
    jsConsumerInfo_Destroy(ci);
    return st == NATS_OK ? IB_OK : js_fail(err, what, st, jerr);
}
