/* SPDX-License-Identifier: Apache-2.0 */
/* Handler flags (ABI 1.2) as the loader meets them, one variant per build:
 *   FLAGS_KNOWN      an ordinary and a transactional handler;
 *   FLAGS_UNKNOWN    a handler with bits no host knows yet: refused;
 *   FLAGS_OLD_STRIDE entries of the 1.0/1.1 layout, spelled out, so that a
 *                    host reading `flags` past the plugin's stride would
 *                    take the next entry's name pointer for them;
 *   FLAGS_AFTER_INIT a handler whose types init() sets from the config
 *                    (IB_HANDLER_TYPES_AFTER_INIT): the config is its one
 *                    type, "" for none. */
#include <infinity_bus/plugin.h>

#include <stdio.h>

static ib_verdict flags_handle(void *state, const uint8_t *payload, size_t payload_len,
                               ib_bus_proxy *bus, const ib_raw_event *ev)
{
    (void)state;
    (void)payload;
    (void)payload_len;
    (void)bus;
    (void)ev;
    return IB_HANDLER_OK;
}

static const char *const flags_types[] = {"test.flags", NULL};

#if defined(FLAGS_AFTER_INIT)
static char late_type[512];
static const char *late_types[2];

static int late_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                     size_t errlen)
{
    (void)state;
    (void)api;
    (void)errbuf;
    (void)errlen;
    snprintf(late_type, sizeof(late_type), "%s", config);
    late_types[0] = late_type[0] != '\0' ? late_type : NULL;
    return 0;
}
#define FLAGS_INIT late_init
#else
#define FLAGS_INIT NULL
#endif

#if defined(FLAGS_OLD_STRIDE)
typedef struct handler_1_1 {
    const char *name;
    const char *const *event_types;
    ib_handle_fn handle;
} handler_1_1;

_Static_assert(sizeof(handler_1_1) == IB_HANDLER_DESC_SIZE_1_0, "1.1 handler layout");

static const handler_1_1 flags_handlers[] = {
    {.name = "first", .event_types = flags_types, .handle = flags_handle},
    {.name = "second", .event_types = flags_types, .handle = flags_handle},
};
#define FLAGS_STRIDE sizeof(handler_1_1)
#define FLAGS_MINOR 1
#else
static const ib_handler_desc flags_handlers[] = {
    {.name = "plain", .event_types = flags_types, .handle = flags_handle},
#if defined(FLAGS_UNKNOWN)
    {.name = "weird",
     .event_types = flags_types,
     .handle = flags_handle,
     .flags = IB_HANDLER_TRANSACTIONAL | 0xcu},
#elif defined(FLAGS_AFTER_INIT)
    {.name = "late",
     .event_types = late_types,
     .handle = flags_handle,
     .flags = IB_HANDLER_TYPES_AFTER_INIT},
#else
    {.name = "txn",
     .event_types = flags_types,
     .handle = flags_handle,
     .flags = IB_HANDLER_TRANSACTIONAL},
#endif
};
#define FLAGS_STRIDE sizeof(ib_handler_desc)
#define FLAGS_MINOR IB_ABI_MINOR
#endif

static const ib_plugin_desc flags_desc = {
    .magic = IB_PLUGIN_MAGIC,
    .size = sizeof(ib_plugin_desc),
    .abi_major = IB_ABI_MAJOR,
    .abi_minor = FLAGS_MINOR,
    .handler_size = FLAGS_STRIDE,
    .name = "flags",
    .version = "1.2.0",
    .init = FLAGS_INIT,
    .handlers = (const ib_handler_desc *)(const void *)flags_handlers,
    .handler_count = 2,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &flags_desc;
}
