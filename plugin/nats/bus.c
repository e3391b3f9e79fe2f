#include "jetstream.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "uuid.h"
#include "clock.h"

ib_status ib_bus_build_msg(natsMsg **out, const char *subject, const ib_event_fields *fields,
                           bool set_msg_id, ib_error *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    natsMsg *m = NULL;

    *out = NULL;
    ib_status st = ib_event_encode(&buf, &len, fields, err);
    if (st != IB_OK)
        return st;
    natsStatus s = natsMsg_Create(&m, subject, NULL, (const char *)buf, (int)len);
    free(buf);
    if (s == NATS_OK && set_msg_id)
        s = natsMsgHeader_Set(m, "Nats-Msg-Id", fields->id);
    if (s != NATS_OK) {
        char d[200];
        natsMsg_Destroy(m);
        return ib_error_set(err, IB_ERR_NATS, "publish to %s: %s", subject,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    *out = m;
    return IB_OK;
}

ib_status ib_bus_publish(ib_bus_proxy *bus, const ib_publish_request *req,
                         char id_out[IB_ID_BUF_SIZE], ib_error *err)
{
    char id[IB_ID_BUF_SIZE];
    char subject[512];
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;

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
    if (bus == NULL || bus->js == NULL || req->type == NULL || req->type[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "publish: no bus or no event type");
    if (req->id != NULL) {
        ib_id_reason r = ib_id_normalise(id, req->id, strlen(req->id), IB_ID_ANY_VERSION);
        if (r != IB_ID_VALID)
            return ib_error_set(err, IB_ERR_INVALID_ID, "publish: id %s", ib_id_reason_str(r));
    } else if (ib_uuid4_generate(id) != IB_OK) {
        return ib_error_set(err, IB_ERR_IO, "publish: no randomness for a fresh id");
    }
    if (req->subject != NULL)
        snprintf(subject, sizeof(subject), "%s", req->subject);
    else
        snprintf(subject, sizeof(subject), "%s.%s", bus->subject_prefix, req->type);

    ib_event_fields f = {
        .id = id,
        .type = req->type,
        .payload = req->payload,
        .payload_len = req->payload_len,
        .created_at_ms = ib_clock_realtime_ms(),
        .source = bus->source,
        /* ib_header and ib_event_header have the same layout by design */
        .headers = (const ib_event_header *)req->headers,
        .header_count = req->headers != NULL ? req->header_count : 0,
    };
    ib_status st = ib_bus_build_msg(&m, subject, &f, true, err);
    if (st != IB_OK)
        return st;
    jsPubOptions_Init(&po);
    po.MaxWait = bus->timeout_ms > 0 ? bus->timeout_ms : 5000;
    natsStatus s = js_PublishMsg(&pa, bus->js, m, &po, &jerr);
    natsMsg_Destroy(m);
    jsPubAck_Destroy(pa);
    if (s != NATS_OK) {
        char d[200];
        return ib_error_set(err, IB_ERR_NATS, "publish to %s: %s", subject,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    memcpy(id_out, id, IB_ID_BUF_SIZE);
    return IB_OK;
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

static const ib_host_api host_api = {
    .size = sizeof(ib_host_api),
    .abi_major = IB_ABI_MAJOR,
    .abi_minor = IB_ABI_MINOR,
    .log = api_log,
    .publish = api_publish,
    .derive_id = api_derive_id,
};

const ib_host_api *ib_bus_host_api(void)
{
    return &host_api;
}

_Static_assert(sizeof(ib_header) == sizeof(ib_event_header) &&
                   offsetof(ib_header, value) == offsetof(ib_event_header, value),
               "ib_header and ib_event_header must share a layout");
