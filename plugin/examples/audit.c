/* SPDX-License-Identifier: Apache-2.0 */
/* audit: appends one line per handled event to a file.
 *
 * Handler "audit" on order.created, order.paid and payment.settled writes
 * "<consumer> <event id> <type>\n" with a single write(2) on an O_APPEND
 * descriptor, so lines from several processes sharing the file never
 * interleave; the demo and the integration tests count side effects with it.
 * A failed or short write returns RETRY, so the event is redelivered.
 *
 * Config (comma-separated key=value): file=PATH (required; created 0600).
 *   --plugin-config audit=file=audit.log
 * Under ibus run --check (IB_HOST_CHECKING) it only checks that the file
 * could be written, and creates nothing.
 */
#include <infinity_bus/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "append_file.h"

typedef struct audit {
    int fd;
} audit;

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

static int audit_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                      size_t errlen)
{
    char path[4096];
    audit *a;

    if (config_get(config, "file", path, sizeof(path)) != 1 || path[0] == '\0') {
        snprintf(errbuf, errlen, "config needs file=PATH (got \"%s\")", config);
        return -1;
    }
    a = malloc(sizeof(*a));
    if (a == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    a->fd = example_append_open(path, ib_host_api_checking(api), errbuf, errlen);
    if (a->fd == -1) {
        free(a);
        return -1;
    }
    *state = a;
    return 0;
}

static void audit_fini(void *state)
{
    audit *a = state;
    if (a->fd >= 0)
        close(a->fd);
    free(a);
}

static ib_verdict audit_handle(void *state, const uint8_t *payload, size_t payload_len,
                               ib_bus_proxy *bus, const ib_raw_event *ev)
{
    audit *a = state;
    char line[1024];
    int n;
    (void)payload;
    (void)payload_len;
    (void)bus;

    n = snprintf(line, sizeof(line), "%s %s %s\n", ib_raw_event_consumer(ev), ib_raw_event_id(ev),
                 ib_raw_event_type(ev));
    /* One write, or none: a line cut short would be half a side effect. */
    if (n < 0 || (size_t)n >= sizeof(line))
        return IB_HANDLER_REJECT;
    if (write(a->fd, line, (size_t)n) != n)
        return IB_HANDLER_RETRY;
    return IB_HANDLER_OK;
}

static const char *const audit_types[] = {"order.created", "order.paid", "payment.settled", NULL};

static const ib_handler_desc audit_handlers[] = {
    {.name = "audit", .event_types = audit_types, .handle = audit_handle},
};

static const ib_plugin_desc audit_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "audit",
    .version = "1.0.0",
    .description = "appends consumer, id and type of each event to a file",
    .init = audit_init,
    .fini = audit_fini,
    .handlers = audit_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &audit_desc;
}
