/* SPDX-License-Identifier: Apache-2.0 */
/* scripted: a plugin whose verdicts the test chooses, for integration tests.
 *
 * Handlers (consumer identities "<durable>/scripted/<handler>"):
 *   scripted  on test.scripted  verdict chosen by the payload text
 *   second    on test.scripted  verdict chosen by config second=...
 *   other     on test.other     verdict chosen by the payload text
 *
 * Payload (and second=) text:
 *   ok        OK
 *   retry     RETRY, always
 *   retry:N   RETRY while the delivery count is <= N, then OK
 *   reject    REJECT
 *   reject:WHY  REJECT, giving WHY as its reason (verdict_detail)
 *   crash     abort() the process (after writing its line)
 *   sleep:MS  sleep MS milliseconds, then OK
 *   hang:N    while the delivery count is <= N, write a "hang" line and
 *             never return (the call is stuck until the process dies);
 *             then OK
 *   anything else, or empty: OK
 *
 * Config (comma-separated key=value): file=PATH (optional; created 0600),
 * second=TEXT (default ok). Every call appends, before it returns,
 *   "<consumer> <event id> <type> <delivery count> <ok|retry|reject|crash> <pid>\n"
 * to PATH with one write(2) on an O_APPEND descriptor, so the lines of
 * several processes never interleave; the pid tells which process made
 * the call (the chaos test charges a repeat to what happened to it).
 */
#include <infinity_bus/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct scripted {
    int fd; /* -1 without file= */
    char second[64];
    const ib_host_api *api;
} scripted;

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

/* True if the `len` bytes at `s` start with `word`; *rest gets what follows. */
static int starts(const char *s, size_t len, const char *word, const char **rest, size_t *rest_len)
{
    size_t wl = strlen(word);
    if (len < wl || memcmp(s, word, wl) != 0)
        return 0;
    *rest = s + wl;
    *rest_len = len - wl;
    return 1;
}

static unsigned long number(const char *s, size_t len)
{
    unsigned long n = 0;
    for (size_t i = 0; i < len && s[i] >= '0' && s[i] <= '9' && n < 100000000ul; i++)
        n = n * 10 + (unsigned long)(s[i] - '0');
    return n;
}

static void record(const scripted *s, const ib_raw_event *ev, const char *verdict)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "%s %s %s %llu %s %ld\n", ib_raw_event_consumer(ev),
                     ib_raw_event_id(ev), ib_raw_event_type(ev),
                     (unsigned long long)ib_raw_event_delivery_count(ev), verdict, (long)getpid());
    if (s->fd >= 0 && n > 0 && (size_t)n < sizeof(line) && write(s->fd, line, (size_t)n) != n)
        return;
}

static ib_verdict act(const scripted *s, const char *text, size_t len, ib_bus_proxy *bus,
                      const ib_raw_event *ev)
{
    const char *rest;
    size_t rest_len;
    ib_verdict v = IB_HANDLER_OK;

    if (starts(text, len, "reject:", &rest, &rest_len)) {
        char why[128];
        snprintf(why, sizeof(why), "%.*s", (int)rest_len, rest);
        if (IB_HOST_API_HAS(s->api, verdict_detail))
            s->api->verdict_detail(bus, -1, why);
        v = IB_HANDLER_REJECT;
    } else if (starts(text, len, "retry:", &rest, &rest_len)) {
        if (ib_raw_event_delivery_count(ev) <= number(rest, rest_len))
            v = IB_HANDLER_RETRY;
    } else if (len == 5 && memcmp(text, "retry", 5) == 0) {
        v = IB_HANDLER_RETRY;
    } else if (len == 6 && memcmp(text, "reject", 6) == 0) {
        v = IB_HANDLER_REJECT;
    } else if (len == 5 && memcmp(text, "crash", 5) == 0) {
        record(s, ev, "crash");
        abort();
    } else if (starts(text, len, "hang:", &rest, &rest_len)) {
        if (ib_raw_event_delivery_count(ev) <= number(rest, rest_len)) {
            record(s, ev, "hang");
            for (;;)
                pause();
        }
    } else if (starts(text, len, "sleep:", &rest, &rest_len)) {
        unsigned long ms = number(rest, rest_len);
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                              .tv_nsec = (long)(ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    record(s, ev, v == IB_HANDLER_OK ? "ok" : v == IB_HANDLER_RETRY ? "retry" : "reject");
    return v;
}

static int scripted_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                         size_t errlen)
{
    char path[4096];
    scripted *s;

    s = malloc(sizeof(*s));
    if (s == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    s->fd = -1;
    s->api = api;
    strcpy(s->second, "ok");
    if (config_get(config, "second", s->second, sizeof(s->second)) < 0) {
        snprintf(errbuf, errlen, "second=TEXT is too long");
        free(s);
        return -1;
    }
    if (config_get(config, "file", path, sizeof(path)) == 1) {
        s->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (s->fd < 0) {
            snprintf(errbuf, errlen, "cannot open %s: %s", path, strerror(errno));
            free(s);
            return -1;
        }
    }
    *state = s;
    return 0;
}

static void scripted_fini(void *state)
{
    scripted *s = state;
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

static ib_verdict by_payload(void *state, const uint8_t *payload, size_t payload_len,
                             ib_bus_proxy *bus, const ib_raw_event *ev)
{
    return act(state, payload != NULL ? (const char *)payload : "", payload_len, bus, ev);
}

static ib_verdict by_config(void *state, const uint8_t *payload, size_t payload_len,
                            ib_bus_proxy *bus, const ib_raw_event *ev)
{
    const scripted *s = state;
    (void)payload;
    (void)payload_len;
    return act(s, s->second, strlen(s->second), bus, ev);
}

static const char *const scripted_types[] = {"test.scripted", NULL};
static const char *const other_types[] = {"test.other", NULL};

static const ib_handler_desc scripted_handlers[] = {
    {.name = "scripted", .event_types = scripted_types, .handle = by_payload},
    {.name = "second", .event_types = scripted_types, .handle = by_config},
    {.name = "other", .event_types = other_types, .handle = by_payload},
};

static const ib_plugin_desc scripted_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "scripted",
    .version = "1.0.0",
    .description = "verdicts chosen by the payload, for tests",
    .init = scripted_init,
    .fini = scripted_fini,
    .handlers = scripted_handlers,
    .handler_count = 3,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &scripted_desc;
}
