/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin from a future minor of ABI 1: its descriptor and its handler
 * entries carry fields this host does not know. It must load, with the
 * host walking the handler list by the plugin's stride and ignoring the
 * unknown fields. */
#include <infinity_bus/plugin.h>

typedef struct future_handler {
    ib_handler_desc base;
    const char *future_hint;
    uint64_t future_flags;
} future_handler;

typedef struct future_desc {
    ib_plugin_desc base;
    const char *future_field;
} future_desc;

static ib_verdict future_handle(void *state, const uint8_t *payload, size_t payload_len,
                                ib_bus_proxy *bus, const ib_raw_event *ev)
{
    (void)state;
    (void)payload;
    (void)payload_len;
    (void)bus;
    (void)ev;
    return IB_HANDLER_OK;
}

static const char *const alpha_types[] = {"test.alpha", NULL};
static const char *const beta_types[] = {"test.beta", "test.gamma", NULL};

static const future_handler future_handlers[] = {
    {{.name = "alpha", .event_types = alpha_types, .handle = future_handle}, "hint", 1},
    {{.name = "beta", .event_types = beta_types, .handle = future_handle}, "hint", 2},
};

static const future_desc desc = {
    .base =
        {
            .magic = IB_PLUGIN_MAGIC,
            .size = sizeof(future_desc),
            .abi_major = IB_ABI_MAJOR,
            .abi_minor = IB_ABI_MINOR + 1,
            .handler_size = sizeof(future_handler),
            .name = "future",
            .version = "9.9.9",
            .handlers = &future_handlers[0].base,
            .handler_count = 2,
            .description = "from the future",
        },
    .future_field = "ignored",
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &desc.base;
}
