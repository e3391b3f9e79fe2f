/* SPDX-License-Identifier: Apache-2.0 */
/* probe: records its own lifecycle, for the loader's unit tests.
 *
 * Handler "probe" on test.scripted and test.probe. With config file=PATH
 * (the first key; the rest of the string is free) it appends to PATH:
 *   "init abi=<major>.<minor> config=<whole config string>\n"  from init()
 *   "<consumer> <id> <type>\n"                                  per event
 *   "fini\n"                                                    from fini()
 * A config ending in ",fail" (or just "fail") makes init fail (after its line) with the
 * reason "asked to fail", to show that fini() then never runs.
 */
#include <infinity_bus/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct probe {
    int fd;
} probe;

static void put(int fd, const char *line)
{
    if (fd >= 0 && write(fd, line, strlen(line)) < 0)
        return;
}

static int probe_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                      size_t errlen)
{
    char path[1024], line[2048];
    size_t n = strcspn(config, ",");
    probe *p = malloc(sizeof(*p));

    if (p == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    p->fd = -1;
    if (strncmp(config, "file=", 5) == 0 && n - 5 < sizeof(path)) {
        memcpy(path, config + 5, n - 5);
        path[n - 5] = '\0';
        p->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (p->fd < 0) {
            snprintf(errbuf, errlen, "cannot open %s: %s", path, strerror(errno));
            free(p);
            return -1;
        }
    }
    snprintf(line, sizeof(line), "init abi=%u.%u config=%s\n", (unsigned)api->abi_major,
             (unsigned)api->abi_minor, config);
    put(p->fd, line);
    if (strcmp(config, "fail") == 0 ||
        (strlen(config) > 5 && strcmp(config + strlen(config) - 5, ",fail") == 0)) {
        snprintf(errbuf, errlen, "asked to fail");
        if (p->fd >= 0)
            close(p->fd);
        free(p);
        return -1;
    }
    *state = p;
    return 0;
}

static void probe_fini(void *state)
{
    probe *p = state;
    put(p->fd, "fini\n");
    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

static ib_verdict probe_handle(void *state, const uint8_t *payload, size_t payload_len,
                               ib_bus_proxy *bus, const ib_raw_event *ev)
{
    probe *p = state;
    char line[1024];
    (void)payload;
    (void)payload_len;
    (void)bus;

    snprintf(line, sizeof(line), "%s %s %s\n", ib_raw_event_consumer(ev), ib_raw_event_id(ev),
             ib_raw_event_type(ev));
    put(p->fd, line);
    return IB_HANDLER_OK;
}

static const char *const probe_types[] = {"test.scripted", "test.probe", NULL};

static const ib_handler_desc probe_handlers[] = {
    {.name = "probe", .event_types = probe_types, .handle = probe_handle},
};

static const ib_plugin_desc probe_desc = {
    IB_PLUGIN_DESC_HEADER, .name = "probe",    .version = "1.0.0",
    .init = probe_init,    .fini = probe_fini, .handlers = probe_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &probe_desc;
}
