/* SPDX-License-Identifier: Apache-2.0 */
/* hello: a plugin as a third party writes it, built out of tree from the
 * installed header alone (tests/unit/loader/test_install.sh). Handler
 * "hello" on greeting.sent answers OK for a payload "hello" and REJECT
 * otherwise, and logs through the host API, so a run proves the handler and
 * the host table both work. */
#include <infinity_bus/plugin.h>

#include <string.h>

static const ib_host_api *host;

static int hello_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                      size_t errlen)
{
    (void)config;
    (void)errbuf;
    (void)errlen;
    host = api;
    *state = NULL;
    return 0;
}

static ib_verdict hello(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                        const ib_raw_event *ev)
{
    (void)state;
    (void)bus;
    if (host != NULL && IB_HOST_API_HAS(host, log))
        host->log(IB_LOG_INFO, "hello", "greeting %s", ib_raw_event_id(ev));
    return len == 5 && memcmp(payload, "hello", 5) == 0 ? IB_HANDLER_OK : IB_HANDLER_REJECT;
}

static const char *const types[] = {"greeting.sent", NULL};
static const ib_handler_desc handlers[] = {
    {.name = "hello", .event_types = types, .handle = hello},
};
static const ib_plugin_desc desc = {
    IB_PLUGIN_DESC_HEADER, .name = "hello",      .version = "1.0.0",
    .init = hello_init,    .handlers = handlers, .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &desc;
}
