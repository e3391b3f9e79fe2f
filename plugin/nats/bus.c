/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "partition.h"
#include "uuid.h"
#include "clock.h"

/* The id an event carries: given ids are normalised (or, for test tools,
 * sent as they are), a missing one is a fresh uuid4. */
static ib_status settle_id(char *out, size_t len, const ib_bus_event *ev, ib_error *err)
{
    if (ev->id != NULL && ev->id_as_given) {
        snprintf(out, len, "%s", ev->id);
        return IB_OK;
    }
    if (len < IB_ID_BUF_SIZE)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "event id buffer of %zu bytes", len);
    if (ev->id != NULL) {
        ib_id_reason r = ib_id_normalise(out, ev->id, strlen(ev->id), IB_ID_ANY_VERSION);
        if (r != IB_ID_VALID)
            return ib_error_set(err, IB_ERR_INVALID_ID, "event id %s", ib_id_reason_str(r));
        return IB_OK;
    }
    if (ib_uuid4_generate(out) != IB_OK)
        return ib_error_set(err, IB_ERR_IO, "no randomness for a fresh event id");
    return IB_OK;
}

/* Points f's headers at a new array (`*copy`, the caller frees it): f's
 * own headers, then `t`'s traceparent and, when it has one, tracestate. */
static ib_status with_trace(ib_event_header **copy, ib_event_fields *f, const ib_trace *t,
                            ib_error *err)
{
    *copy = malloc((f->header_count + 2) * sizeof(**copy));
    if (*copy == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "out of memory for an event's headers");
    if (f->header_count > 0)
        memcpy(*copy, f->headers, f->header_count * sizeof(**copy));
    size_t n = f->header_count;
    (*copy)[n++] = (ib_event_header){IB_TRACEPARENT_HEADER, t->traceparent};
    if (t->tracestate[0] != '\0')
        (*copy)[n++] = (ib_event_header){IB_TRACESTATE_HEADER, t->tracestate};
    f->headers = *copy;
    f->header_count = n;
    return IB_OK;
}

/* An event settled and encoded, ready to send or to stage. */
typedef struct encoded {
    char subject[512];
    uint8_t *data; /* owned: free() */
    size_t len;
} encoded;

/* Settles `ev`'s id (into id_out) and subject and encodes it, stamped with
 * the wall clock: everything ib_bus_event_msg does short of a natsMsg, so
 * the staged path sends the very bytes the direct one would. */
static ib_status encode_event(encoded *out, char *id_out, size_t id_len, const ib_bus_event *ev,
                              ib_error *err)
{
    out->data = NULL;
    out->len = 0;
    if (id_len > 0)
        id_out[0] = '\0';
    ib_status st = settle_id(id_out, id_len, ev, err);
    if (st != IB_OK)
        return st;
    if (ev->partitions > 0) {
        const char *base = ev->subject != NULL ? ev->subject : ev->prefix;
        const char *key = ev->partition_key != NULL ? ev->partition_key : id_out;
        st = ib_partition_subject(out->subject, sizeof(out->subject), base, key, ev->partitions,
                                  err);
        if (st != IB_OK)
            return st;
    } else if (ev->subject != NULL) {
        snprintf(out->subject, sizeof(out->subject), "%s", ev->subject);
    } else {
        snprintf(out->subject, sizeof(out->subject), "%s.%s", ev->prefix, ev->type);
    }
    ib_event_fields f = {
        .id = id_out,
        .type = ev->type,
        .payload = ev->payload,
        .payload_len = ev->payload_len,
        .created_at_ms = ib_clock_realtime_ms(),
        .source = ev->source,
        .headers = ev->headers,
        .header_count = ev->headers != NULL ? ev->header_count : 0,
    };
    ib_event_header *traced = NULL;
    if (ev->trace != NULL && (st = with_trace(&traced, &f, ev->trace, err)) != IB_OK)
        return st;
    st = ib_event_encode(&out->data, &out->len, &f, err);
    free(traced);
    return st;
}

/* Builds the NATS message of `len` bytes of `data`, with Nats-Msg-Id =
 * `msg_id` unless that is NULL, and the trace headers of `trace` unless
 * that is NULL. */
static ib_status make_msg(natsMsg **out, const char *subject, const void *data, size_t len,
                          const char *msg_id, const ib_trace *trace, ib_error *err)
{
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, subject, NULL, (const char *)data, (int)len);

    *out = NULL;
    if (s == NATS_OK && msg_id != NULL)
        s = natsMsgHeader_Set(m, "Nats-Msg-Id", msg_id);
    if (s == NATS_OK && trace != NULL)
        s = ib_msg_trace_set(m, trace);
    if (s != NATS_OK) {
        char d[200];
        natsMsg_Destroy(m);
        return ib_error_set(err, IB_ERR_NATS, "publish to %s: %s", subject,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    *out = m;
    return IB_OK;
}

ib_status ib_bus_event_msg(natsMsg **out, char *id_out, size_t id_len, const ib_bus_event *ev,
                           ib_error *err)
{
    encoded enc;

    *out = NULL;
    ib_status st = encode_event(&enc, id_out, id_len, ev, err);
    if (st != IB_OK)
        return st;
    st = make_msg(out, enc.subject, enc.data, enc.len, ev->set_msg_id ? id_out : NULL, ev->trace,
                  err);
    free(enc.data);
    return st;
}

/* Publishes `m` (destroyed here) through `bus->js` and waits for the ack. */
static ib_status send_msg(ib_bus_proxy *bus, natsMsg *m, ib_error *err)
{
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    ib_status st = IB_OK;

    jsPubOptions_Init(&po);
    po.MaxWait = bus->timeout_ms > 0 ? bus->timeout_ms : 5000;
    natsStatus s = js_PublishMsg(&pa, bus->js, m, &po, &jerr);
    jsPubAck_Destroy(pa);
    if (s != NATS_OK) {
        char d[200];
        st = ib_error_set(err, IB_ERR_NATS, "publish to %s: %s", natsMsg_GetSubject(m),
                          ib_nats_strerror(d, sizeof(d), s));
    }
    natsMsg_Destroy(m);
    return st;
}

/* The transactional path: the same encoding, handed to the stager. */
static ib_status stage_event(ib_bus_proxy *bus, char *id, size_t id_len, const ib_bus_event *ev,
                             ib_error *err)
{
    encoded enc;
    ib_status st = encode_event(&enc, id, id_len, ev, err);

    if (st == IB_OK)
        st = bus->stage(bus->stage_ctx, enc.subject, id, enc.data, enc.len, err);
    free(enc.data);
    return st;
}

ib_status ib_bus_publish(ib_bus_proxy *bus, const ib_publish_request *req,
                         char id_out[IB_ID_BUF_SIZE], ib_error *err)
{
    char id[IB_ID_BUF_SIZE];
    natsMsg *m = NULL;

    id_out[0] = '\0';
    if (req == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "publish: no request");
    /* Like the loader's check of a descriptor's size: a smaller request
     * was not built from plugin.h, and reading its fields would read past
     * what the plugin gave. */
    if (req->size < IB_PUBLISH_REQUEST_SIZE_1_0)
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "publish: request size %" PRIu32
                            " is below the %zu bytes of ABI 1.0 (set .size = sizeof(req))",
                            req->size, (size_t)IB_PUBLISH_REQUEST_SIZE_1_0);
    if (bus == NULL || (bus->js == NULL && bus->stage == NULL) || req->type == NULL ||
        req->type[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "publish: no bus or no event type");
    ib_bus_event ev = {
        .type = req->type,
        .id = req->id,
        .subject = req->subject,
        .prefix = bus->subject_prefix,
        .source = bus->source,
        .payload = req->payload,
        .payload_len = req->payload_len,
        /* ib_header and ib_event_header have the same layout by design */
        .headers = (const ib_event_header *)req->headers,
        .header_count = req->header_count,
        .set_msg_id = true,
        /* the event being handled goes on in what its handler publishes,
         * unless the handler names a traceparent of its own */
        .trace = ib_trace_headers_name_one((const ib_event_header *)req->headers, req->header_count)
                     ? NULL
                     : ib_trace_current(),
    };
    ib_status st;
    if (bus->stage != NULL)
        st = stage_event(bus, id, sizeof(id), &ev, err);
    else if ((st = ib_bus_event_msg(&m, id, sizeof(id), &ev, err)) == IB_OK)
        st = send_msg(bus, m, err);
    if (st != IB_OK)
        return st;
    memcpy(id_out, id, IB_ID_BUF_SIZE);
    return IB_OK;
}

ib_status ib_bus_publish_staged(ib_bus_proxy *bus, const char *subject, const char *msg_id,
                                const void *data, size_t len, ib_error *err)
{
    natsMsg *m = NULL;

    if (bus == NULL || bus->js == NULL || subject == NULL || subject[0] == '\0' || msg_id == NULL ||
        msg_id[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "publish staged: no bus, subject or message id");
    ib_status st = make_msg(&m, subject, data, len, msg_id, NULL, err);
    if (st != IB_OK)
        return st;
    return send_msg(bus, m, err);
}

/* The ABI's levels are passed to the logger as they are. */
_Static_assert(IB_LOG_DEBUG == (int)IB_SEV_DEBUG && IB_LOG_INFO == (int)IB_SEV_INFO &&
                   IB_LOG_WARN == (int)IB_SEV_WARN && IB_LOG_ERROR == (int)IB_SEV_ERROR,
               "ib_log_level and ib_log_sev must number the levels alike");

static void api_log(ib_log_level level, const char *plugin, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ib_logv((ib_log_sev)level, plugin, fmt, ap);
    va_end(ap);
}

/* The ABI's id buffer is the core's: ids are copied between them whole. */
_Static_assert(IB_EVENT_ID_BUF_SIZE == IB_ID_BUF_SIZE,
               "plugin.h and uuid.h must agree on the id buffer size");

static int api_publish(ib_bus_proxy *bus, const ib_publish_request *req,
                       char id_out[IB_EVENT_ID_BUF_SIZE])
{
    char id[IB_ID_BUF_SIZE];
    ib_error e;
    if (ib_bus_publish(bus, req, id, &e) != IB_OK) {
        if (id_out != NULL)
            id_out[0] = '\0';
        ib_log_kv(IB_SEV_WARN, "plugin publish failed", "error", e.msg, NULL);
        return -1;
    }
    if (id_out != NULL)
        memcpy(id_out, id, IB_ID_BUF_SIZE);
    return 0;
}

static void api_derive_id(char out[IB_EVENT_ID_BUF_SIZE], const char *parent_id, const char *name)
{
    ib_uuid_derive(out, parent_id, name);
}

/* The proxy knows whether its call is transactional: only the host's
 * transactional proxy carries a connection. */
static struct sqlite3 *api_transaction_db(ib_bus_proxy *bus)
{
    return bus != NULL ? bus->db : NULL;
}

/* The ABI 1.2 table: the 1.3 slots need dispatch and metrics, which the
 * host adds in its own copy, so this one's size stops before them and a
 * plugin's IB_HOST_API_HAS check never finds them NULL. */
static const ib_host_api host_api = {
    .size = offsetof(ib_host_api, verdict_detail),
    .abi_major = IB_ABI_MAJOR,
    .abi_minor = 2,
    .log = api_log,
    .publish = api_publish,
    .derive_id = api_derive_id,
    .transaction_db = api_transaction_db,
};

const ib_host_api *ib_bus_host_api(void)
{
    return &host_api;
}

_Static_assert(sizeof(ib_header) == sizeof(ib_event_header) &&
                   offsetof(ib_header, value) == offsetof(ib_event_header, value),
               "ib_header and ib_event_header must share a layout");
