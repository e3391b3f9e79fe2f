/* The bus proxy handed to handlers, and the host API table plugins get.
 *
 * A handler publishes derived events through ib_host_api.publish with the
 * ib_bus_proxy it was given. Events are encoded as protobuf Events and
 * published to JetStream with Nats-Msg-Id set to the event id, so a
 * republish with the same id inside the stream's duplicate window is
 * dropped by the server, and any later one by the consumer's recorder. */
#ifndef IB_BUS_H
#define IB_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>

#include "error.h"
#include "event.h"
#include "infinity_bus/plugin.h"

struct ib_bus_proxy {
    jsCtx *js;                  /* BORROWED */
    const char *subject_prefix; /* default subject: "<prefix>.<type>" */
    const char *source;         /* Event.source of published events */
    int64_t timeout_ms;         /* wait for JetStream's ack */
};

/* The host's API table (static storage; valid for the process lifetime). */
const ib_host_api *ib_bus_host_api(void);

/* Builds a NATS message carrying `fields` encoded as an Event on `subject`.
 * With `set_msg_id`, the Nats-Msg-Id header is the event id. `*out` is
 * owned by the caller (natsMsg_Destroy). */
ib_status ib_bus_build_msg(natsMsg **out, const char *subject, const ib_event_fields *fields,
                           bool set_msg_id, ib_error *err);

/* Publishes one event through `bus` and waits for the ack; `id` NULL means
 * a fresh uuid4. `id_out` receives the id used. This is what the API
 * table's publish slot calls. */
ib_status ib_bus_publish(ib_bus_proxy *bus, const ib_publish_request *req,
                         char id_out[IB_ID_BUF_SIZE], ib_error *err);

#endif
