/* SPDX-License-Identifier: Apache-2.0 */
/* relay: republishes each order.created as a derived event.
 *
 * Handler "relay" on order.created publishes the same payload as a new
 * event of type TO through the bus proxy, with header relayed-from set to
 * the original id. The new id is derive_id(original id, TO): a replay or a
 * redelivery derives the same id, so JetStream's duplicate window and the
 * downstream consumers' markers both drop the copy. A failed publish
 * returns RETRY.
 *
 * Config (comma-separated key=value): to=TYPE (default order.relayed).
 *   --plugin-config relay=to=order.mirrored
 */
#include <infinity_bus/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct relay {
    const ib_host_api *api;
    char to[IB_EVENT_TYPE_MAX + 1];
} relay;

/* Finds `key` in "k=v,k=v" and copies its value into out; 1 found, 0 absent,
 * -1 too long. */
static int config_get(const char *config, const char *key, char *out, size_t out_len)
{
    size_t kl = strlen(key);
    for (const char *p = config; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            if (len - kl - 1 >= out_len)
                return -1;
            memcpy(out, p + kl + 1, len - kl - 1);
            out[len - kl - 1] = '\0';
            return 1;
        }
        p += len + (end != NULL);
    }
    return 0;
}

static int relay_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                      size_t errlen)
{
    relay *r;

    if (!IB_HOST_API_HAS(api, derive_id) || api->log == NULL || api->publish == NULL ||
        api->derive_id == NULL) {
        snprintf(errbuf, errlen, "the host offers no log, publish or derive_id");
        return -1;
    }
    r = malloc(sizeof(*r));
    if (r == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    r->api = api;
    switch (config_get(config, "to", r->to, sizeof(r->to))) {
    case 0:
        strcpy(r->to, "order.relayed");
        break;
    case 1:
        /* Relaying order.created to itself would feed on its own output. */
        if (r->to[0] != '\0' && strpbrk(r->to, " \t\r\n") == NULL &&
            strcmp(r->to, "order.created") != 0)
            break;
        /* fall through */
    default:
        snprintf(errbuf, errlen,
                 "to=TYPE needs 1-%d bytes without spaces, other than order.created",
                 IB_EVENT_TYPE_MAX);
        free(r);
        return -1;
    }
    *state = r;
    return 0;
}

static void relay_fini(void *state)
{
    free(state);
}

static ib_verdict relay_handle(void *state, const uint8_t *payload, size_t payload_len,
                               ib_bus_proxy *bus, const ib_raw_event *ev)
{
    relay *r = state;
    char id[IB_EVENT_ID_BUF_SIZE];
    ib_header from = {.key = "relayed-from", .value = ib_raw_event_id(ev)};
    ib_publish_request req = {
        .size = sizeof(req),
        .subject = NULL,
        .type = r->to,
        .payload = payload,
        .payload_len = payload_len,
        .id = id,
        .headers = &from,
        .header_count = 1,
    };

    r->api->derive_id(id, ib_raw_event_id(ev), r->to);
    if (r->api->publish(bus, &req, NULL) != 0) {
        r->api->log(IB_LOG_WARN, "relay", "publish of %s (from %s) failed; will retry", id,
                    ib_raw_event_id(ev));
        return IB_HANDLER_RETRY;
    }
    return IB_HANDLER_OK;
}

static const char *const relay_types[] = {"order.created", NULL};

static const ib_handler_desc relay_handlers[] = {
    {.name = "relay", .event_types = relay_types, .handle = relay_handle},
};

static const ib_plugin_desc relay_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "relay",
    .version = "1.0.0",
    .description = "republishes order.created under a derived, replay-stable id",
    .init = relay_init,
    .fini = relay_fini,
    .handlers = relay_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &relay_desc;
}
