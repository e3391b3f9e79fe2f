/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin built against ABI 1.0, before ib_plugin_desc.description was
 * appended: its descriptor is the 1.0 layout, spelled out here so that a
 * host reading past the plugin's own `size` would read past the object
 * (and AddressSanitizer would say so). It must load, with no description. */
#include <infinity_bus/plugin.h>

typedef struct desc_1_0 {
    uint32_t magic;
    uint32_t size;
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t handler_size;
    const char *name;
    const char *version;
    ib_plugin_init_fn init;
    ib_plugin_fini_fn fini;
    const ib_handler_desc *handlers;
    size_t handler_count;
} desc_1_0;

_Static_assert(sizeof(desc_1_0) == IB_PLUGIN_DESC_SIZE_1_0, "1.0 layout");

static ib_verdict old_handle(void *state, const uint8_t *payload, size_t payload_len,
                             ib_bus_proxy *bus, const ib_raw_event *ev)
{
    (void)state;
    (void)payload;
    (void)payload_len;
    (void)bus;
    (void)ev;
    return IB_HANDLER_OK;
}

static const char *const old_types[] = {"test.old", NULL};

static const ib_handler_desc old_handlers[] = {
    {.name = "old", .event_types = old_types, .handle = old_handle},
};

static const desc_1_0 old_desc = {
    .magic = IB_PLUGIN_MAGIC,
    .size = sizeof(desc_1_0),
    .abi_major = 1,
    .abi_minor = 0,
    .handler_size = sizeof(ib_handler_desc),
    .name = "old",
    .version = "1.0.0",
    .handlers = old_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return (const ib_plugin_desc *)(const void *)&old_desc;
}
