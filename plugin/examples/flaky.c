/* SPDX-License-Identifier: Apache-2.0 */
/* flaky: fails a fixed fraction of first deliveries, to show redelivery.
 *
 * Handler "flaky" on order.created, order.paid and payment.settled returns
 * RETRY on the first delivery of an event whose id hashes below the
 * configured fraction, and OK otherwise (so every event succeeds on its
 * second delivery). The choice depends on the id alone (FNV-1a), so every
 * process agrees on which events fail. With every=N it instead returns
 * RETRY on every Nth call the process makes, whatever the event and its
 * delivery: the transient errors of an ordinary downstream (every=5 is a
 * payment gateway failing 20 % of its calls). On OK it can append the
 * same line as the audit plugin, "<consumer> <event id> <type>\n", to a
 * file.
 *
 * Config (comma-separated key=value):
 *   fraction=F  share of events failed on first delivery, 0..1 (default 0.3)
 *   every=N     RETRY on calls N, 2N, 3N... of the process instead, 1..10^6
 *   sleep=MS    each call first waits MS milliseconds (a downstream's
 *               latency), 0..60000 (default 0)
 *   file=PATH   optional audit line per success (created 0600)
 *   --plugin-config flaky=fraction=0.5,file=flaky.log
 *   --plugin-config flaky=every=5,sleep=4
 * Under ibus run --check (IB_HOST_CHECKING) it only checks that the file
 * could be written, and creates nothing.
 */
#include <infinity_bus/plugin.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "append_file.h"

typedef struct flaky {
    uint64_t threshold;  /* ids hashing below it fail their first delivery */
    int all;             /* fraction 1: 2^64 does not fit in the threshold */
    int fd;              /* -1 without file= */
    unsigned long every; /* 0: the fraction rule */
    atomic_ulong calls;  /* the process's calls so far (handler threads share it) */
    unsigned long sleep_ms;
} flaky;

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

/* Reads "key=N" from config into *out when present: 0 absent or read, -1
 * (with errbuf filled) when not a whole number within lo..hi. */
static int config_number(const char *config, const char *key, unsigned long lo, unsigned long hi,
                         unsigned long *out, char *errbuf, size_t errlen)
{
    char value[32], *end = value;
    unsigned long n = 0;
    int got = config_get(config, key, value, sizeof(value));
    if (got == 0)
        return 0;
    errno = 0;
    if (got == 1 && value[0] >= '0' && value[0] <= '9')
        n = strtoul(value, &end, 10);
    if (got < 0 || end == value || *end != '\0' || errno != 0 || n < lo || n > hi) {
        snprintf(errbuf, errlen, "%s=%s: expected a whole number from %lu to %lu", key,
                 got < 0 ? "(too long)" : value, lo, hi);
        return -1;
    }
    *out = n;
    return 0;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static int flaky_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                      size_t errlen)
{
    char value[4096], *end;
    double fraction = 0.3;
    flaky *f;

    if (config_get(config, "fraction", value, sizeof(value)) == 1) {
        fraction = strtod(value, &end);
        if (end == value || *end != '\0' || !(fraction >= 0.0 && fraction <= 1.0)) {
            snprintf(errbuf, errlen, "fraction=%s: expected a number from 0 to 1", value);
            return -1;
        }
    }
    f = malloc(sizeof(*f));
    if (f == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    f->all = fraction >= 1.0;
    f->threshold = f->all ? 0 : (uint64_t)(fraction * 18446744073709551616.0);
    f->fd = -1;
    f->every = 0;
    f->sleep_ms = 0;
    atomic_init(&f->calls, 0);
    if (config_number(config, "every", 1, 1000000, &f->every, errbuf, errlen) != 0 ||
        config_number(config, "sleep", 0, 60000, &f->sleep_ms, errbuf, errlen) != 0) {
        free(f);
        return -1;
    }
    if (config_get(config, "file", value, sizeof(value)) == 1) {
        f->fd = example_append_open(value, ib_host_api_checking(api), errbuf, errlen);
        if (f->fd == -1) {
            free(f);
            return -1;
        }
    }
    *state = f;
    return 0;
}

static void flaky_fini(void *state)
{
    flaky *f = state;
    if (f->fd >= 0)
        close(f->fd);
    free(f);
}

static ib_verdict flaky_handle(void *state, const uint8_t *payload, size_t payload_len,
                               ib_bus_proxy *bus, const ib_raw_event *ev)
{
    flaky *f = state;
    char line[1024];
    int n;
    (void)payload;
    (void)payload_len;
    (void)bus;

    if (f->sleep_ms > 0) {
        struct timespec ts = {.tv_sec = (time_t)(f->sleep_ms / 1000),
                              .tv_nsec = (long)(f->sleep_ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (f->every > 0) {
        if ((atomic_fetch_add(&f->calls, 1) + 1) % f->every == 0)
            return IB_HANDLER_RETRY;
    } else if (ib_raw_event_delivery_count(ev) <= 1 &&
               (f->all || fnv1a(ib_raw_event_id(ev)) < f->threshold)) {
        return IB_HANDLER_RETRY;
    }
    if (f->fd < 0)
        return IB_HANDLER_OK;
    n = snprintf(line, sizeof(line), "%s %s %s\n", ib_raw_event_consumer(ev), ib_raw_event_id(ev),
                 ib_raw_event_type(ev));
    if (n < 0 || (size_t)n >= sizeof(line) || write(f->fd, line, (size_t)n) != n)
        return IB_HANDLER_RETRY;
    return IB_HANDLER_OK;
}

static const char *const flaky_types[] = {"order.created", "order.paid", "payment.settled", NULL};

static const ib_handler_desc flaky_handlers[] = {
    {.name = "flaky", .event_types = flaky_types, .handle = flaky_handle},
};

static const ib_plugin_desc flaky_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "flaky",
    .version = "1.0.0",
    .description = "returns RETRY for a fixed fraction of first deliveries",
    .init = flaky_init,
    .fini = flaky_fini,
    .handlers = flaky_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &flaky_desc;
}
