/* SPDX-License-Identifier: Apache-2.0 */
/* bench_noop: the handler of the consumer benchmark.
 *
 * Handler "noop" on "bench.event" returns OK at once, so a benchmark run
 * measures the host (pull, decode, dispatch, claim/mark, ack) and nothing
 * else. With config sleep_ms=N it sleeps N milliseconds first, standing in
 * for an I/O-bound handler (a database write, an HTTP call) to measure what
 * --concurrency buys.
 *
 *   --plugin bench_noop.so --plugin-config bench_noop=sleep_ms=5
 */
#include <infinity_bus/plugin.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct noop {
    long sleep_ms;
} noop;

static int noop_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                     size_t errlen)
{
    noop *n;
    long ms = 0;
    (void)api;

    if (config[0] != '\0') {
        char *end = NULL;
        if (strncmp(config, "sleep_ms=", 9) != 0) {
            snprintf(errbuf, errlen, "config: expected sleep_ms=N, got \"%s\"", config);
            return -1;
        }
        errno = 0;
        ms = strtol(config + 9, &end, 10);
        if (errno != 0 || end == config + 9 || *end != '\0' || ms < 0 || ms > 60000) {
            snprintf(errbuf, errlen, "config: sleep_ms must be 0..60000, got \"%s\"", config + 9);
            return -1;
        }
    }
    n = malloc(sizeof(*n));
    if (n == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    n->sleep_ms = ms;
    *state = n;
    return 0;
}

static void noop_fini(void *state)
{
    free(state);
}

static ib_verdict noop_handle(void *state, const uint8_t *payload, size_t payload_len,
                              ib_bus_proxy *bus, const ib_raw_event *ev)
{
    const noop *n = state;
    (void)payload;
    (void)payload_len;
    (void)bus;
    (void)ev;

    if (n->sleep_ms > 0) {
        struct timespec ts = {.tv_sec = n->sleep_ms / 1000,
                              .tv_nsec = (n->sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return IB_HANDLER_OK;
}

static const char *const noop_types[] = {"bench.event", NULL};

static const ib_handler_desc noop_handlers[] = {
    {.name = "noop", .event_types = noop_types, .handle = noop_handle},
};

static const ib_plugin_desc noop_desc = {
    IB_PLUGIN_DESC_HEADER,     .name = "bench_noop",
    .version = "1.0.0",        .description = "benchmark handler: OK at once, or after sleep_ms",
    .init = noop_init,         .fini = noop_fini,
    .handlers = noop_handlers, .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &noop_desc;
}
