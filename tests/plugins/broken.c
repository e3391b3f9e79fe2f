/* SPDX-License-Identifier: Apache-2.0 */
/* Plugins for the loader's error table: one source, one defect per build.
 * tests/plugins/CMakeLists.txt builds it once per BROKEN_* definition; with
 * none it is a valid plugin ("good") the other variants differ from. */
#include <infinity_bus/plugin.h>

#include <stdio.h>

static ib_verdict ok_handle(void *state, const uint8_t *payload, size_t payload_len,
                            ib_bus_proxy *bus, const ib_raw_event *ev)
{
    (void)state;
    (void)payload;
    (void)payload_len;
    (void)bus;
    (void)ev;
    return IB_HANDLER_OK;
}

static int failing_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                        size_t errlen)
{
    (void)state;
    (void)api;
    (void)config;
    /* A newline too: the host must keep its message on one line. */
    snprintf(errbuf, errlen, "cannot reach the ledger\nat ledger.example:5432");
    return 7;
}

static const char *const good_types[] = {"test.good", NULL};

#if defined(BROKEN_EMPTY_TYPES)
static const char *const types[] = {NULL};
#elif defined(BROKEN_EMPTY_TYPE)
static const char *const types[] = {"test.good", "", NULL};
#elif defined(BROKEN_SPACE_TYPE)
static const char *const types[] = {"order created", NULL};
#else
#define types good_types
#endif

#if defined(BROKEN_NULL_HANDLE)
#define SECOND_HANDLE NULL
#else
#define SECOND_HANDLE ok_handle
#endif

#if defined(BROKEN_DUP_NAMES)
#define SECOND_NAME "first"
#elif defined(BROKEN_BAD_HANDLER_NAME)
#define SECOND_NAME "sec/ond"
#else
#define SECOND_NAME "second"
#endif

static const ib_handler_desc handlers[] = {
    {.name = "first", .event_types = good_types, .handle = ok_handle},
    {.name = SECOND_NAME, .event_types = types, .handle = SECOND_HANDLE},
};

#if defined(BROKEN_BAD_MAGIC)
#define MAGIC 0x7f454c46u
#else
#define MAGIC IB_PLUGIN_MAGIC
#endif
#if defined(BROKEN_ABI2)
#define MAJOR 2
#else
#define MAJOR IB_ABI_MAJOR
#endif
#if defined(BROKEN_SMALL_SIZE)
#define SIZE 12
#else
#define SIZE sizeof(ib_plugin_desc)
#endif

/* Spelled out rather than IB_PLUGIN_DESC_HEADER: the defects live here. */
static const ib_plugin_desc desc = {
    .magic = MAGIC,
    .size = SIZE,
    .abi_major = MAJOR,
    .abi_minor = IB_ABI_MINOR,
    .handler_size = sizeof(ib_handler_desc),
#if defined(BROKEN_BAD_NAME)
    .name = "bad name",
#else
    .name = "broken",
#endif
    .version = "0.1.0",
#if defined(BROKEN_INIT_FAIL)
    .init = failing_init,
#endif
#if defined(BROKEN_NO_HANDLERS)
    .handlers = NULL,
    .handler_count = 0,
#else
    .handlers = handlers,
    .handler_count = 2,
#endif
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    (void)failing_init;
    (void)handlers;
#if defined(BROKEN_NULL_DESC)
    (void)&desc;
    return NULL;
#else
    return &desc;
#endif
}
