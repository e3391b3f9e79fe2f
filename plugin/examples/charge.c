/* SPDX-License-Identifier: Apache-2.0 */
/* charge: a plugin with configuration and state of its own, from init to
 * fini. Copy it to start a handler that talks to another system.
 *
 * Handler "charge" on order.created asks a payment provider to charge the
 * order's amount (the payload: a whole number of cents, as decimal text)
 * and sends the event id as the request's idempotency key. The host runs a
 * handler once per event id, except in the window between a side effect and
 * its marker (a process killed there runs it again); a provider that honours
 * idempotency keys closes that window, since the repeated request carries
 * the same key. The example sends nothing over the network: it writes the
 * request it would send, one line per call, to file=
 *
 *   POST <endpoint> idempotency-key=<event id> amount=<cents> currency=<code>
 *
 * with a single write(2) on an O_APPEND descriptor. A payload that is not an
 * amount never will be: REJECT (dead-lettered). A failed write: RETRY.
 *
 * Config, comma-separated key=value, each key at most once:
 *   endpoint=URL    required: http:// or https://, a host, no user:password@
 *   file=PATH       required: the request log, created 0600, never through a
 *                   symbolic link
 *   currency=CODE   optional: three capital letters (default EUR)
 *   --plugin-config charge=endpoint=https://pay.example/v1/charges,file=charges.log
 * Anything else fails init with a message that names the key and what is
 * wrong, and the host refuses to start (ibus run --check shows it first).
 *
 * The life cycle, as every plugin with state has it:
 *   1. init parses the config into one struct (the per-plugin state), opens
 *      the file, and hands the struct to the host; on failure it frees what
 *      it took, since the host calls no fini after a failed init.
 *   2. handle reads the state; handlers may run on several threads at once
 *      (--concurrency), so the one field it changes, the count, is atomic.
 *   3. fini, after the last handler call, logs the count, closes the file
 *      and frees the struct.
 * Under ibus run --check (IB_HOST_CHECKING) init only checks that the file
 * could be written and creates nothing; fini follows as usual.
 */
/* Built alone with -std=c11 (deploy/Dockerfile.plugin): open(2)'s
 * O_CLOEXEC and O_NOFOLLOW are POSIX.1-2008. */
#define _POSIX_C_SOURCE 200809L

#include <infinity_bus/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHARGE_ENDPOINT_MAX 256
#define CHARGE_PATH_MAX 4096

typedef struct charge {
    char endpoint[CHARGE_ENDPOINT_MAX];
    char currency[4];
    int fd; /* -1 under --check */
    const ib_host_api *host;
    atomic_ulong sent; /* requests written, for fini's line */
} charge;

/* The value of `key` in "k=v,k=v" (its length in *len), or NULL when
 * absent. Sets *repeated when the key appears more than once. */
static const char *config_find(const char *config, const char *key, size_t *len, int *repeated)
{
    size_t kl = strlen(key);
    const char *found = NULL;
    *repeated = 0;
    for (const char *p = config; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            *repeated = *repeated || found != NULL;
            found = p + kl + 1;
            *len = n - kl - 1;
        }
        p += n + (end != NULL);
    }
    return found;
}

/* Every item of the config is key=value with a key this plugin knows. */
static int config_check_keys(const char *config, char *errbuf, size_t errlen)
{
    static const char *const known[] = {"endpoint", "file", "currency"};
    for (const char *p = config; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        size_t kl = eq != NULL ? (size_t)(eq - p) : n;
        int ok = 0;
        for (size_t i = 0; eq != NULL && i < sizeof(known) / sizeof(known[0]); i++)
            ok = ok || (strlen(known[i]) == kl && strncmp(p, known[i], kl) == 0);
        if (!ok) {
            snprintf(errbuf, errlen,
                     "config item \"%.*s\": %s (keys: endpoint=URL, file=PATH, currency=CODE)",
                     (int)(n > 64 ? 64 : n), p, eq == NULL ? "not key=value" : "unknown key");
            return -1;
        }
        p += n + (end != NULL);
    }
    return 0;
}

/* Copies the value of `key` into out (out_len bytes). 1 when found, 0 when
 * absent and not required; -1 with the reason in errbuf otherwise. */
static int config_copy(const char *config, const char *key, int required, char *out, size_t out_len,
                       char *errbuf, size_t errlen)
{
    size_t len = 0;
    int repeated;
    const char *v = config_find(config, key, &len, &repeated);

    if (v == NULL && !required)
        return 0;
    if (v == NULL || len == 0)
        snprintf(errbuf, errlen, "config needs %s= (got \"%s\")", key, config);
    else if (repeated)
        snprintf(errbuf, errlen, "config gives %s= more than once", key);
    else if (len >= out_len)
        snprintf(errbuf, errlen, "config %s=: longer than %zu bytes", key, out_len - 1);
    else {
        memcpy(out, v, len);
        out[len] = '\0';
        return 1;
    }
    return -1;
}

/* An endpoint is an http(s) URL with a host and no credentials in it:
 * they would end up in every log line that names it. */
static int endpoint_check(const char *url, char *errbuf, size_t errlen)
{
    const char *rest = strncmp(url, "https://", 8) == 0  ? url + 8
                       : strncmp(url, "http://", 7) == 0 ? url + 7
                                                         : NULL;
    size_t host_len = rest != NULL ? strcspn(rest, "/?#") : 0;

    if (rest == NULL)
        snprintf(errbuf, errlen, "endpoint=%s: not an http:// or https:// URL", url);
    else if (host_len == 0)
        snprintf(errbuf, errlen, "endpoint=%s: no host", url);
    else if (memchr(rest, '@', host_len) != NULL)
        snprintf(errbuf, errlen,
                 "endpoint=: user and password do not belong in the URL (it is logged)");
    else if (strpbrk(url, " \t\r\n") != NULL)
        snprintf(errbuf, errlen, "endpoint=%s: contains white space", url);
    else
        return 0;
    return -1;
}

static int currency_check(const char *code, char *errbuf, size_t errlen)
{
    if (strlen(code) == 3 && strspn(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == 3)
        return 0;
    snprintf(errbuf, errlen, "currency=%s: not three capital letters (ISO 4217, e.g. EUR)", code);
    return -1;
}

/* Opens the request log for appending, or (checking) proves it could be
 * opened without creating it: then returns -1 with errbuf empty. */
static int log_open(const char *path, int checking, char *errbuf, size_t errlen)
{
    int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (checking ? 0 : O_CREAT);
    int fd = open(path, flags, 0600);
    char dir[CHARGE_PATH_MAX];
    const char *slash;

    errbuf[0] = '\0';
    if (fd >= 0 && !checking)
        return fd;
    if (fd >= 0) {
        close(fd);
        return -1;
    }
    if (!checking || errno != ENOENT) {
        snprintf(errbuf, errlen, "file=%s: %s", path,
                 errno == ELOOP ? "a symbolic link, not followed" : strerror(errno));
        return -1;
    }
    slash = strrchr(path, '/');
    snprintf(dir, sizeof(dir), "%.*s",
             slash == NULL   ? 1
             : slash == path ? 1
                             : (int)(slash - path),
             slash == NULL ? "." : path);
    if (access(dir, W_OK | X_OK) != 0)
        snprintf(errbuf, errlen, "file=%s: cannot be created in %s: %s", path, dir,
                 strerror(errno));
    return -1;
}

static int charge_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                       size_t errlen)
{
    char path[CHARGE_PATH_MAX], currency[16] = "EUR";
    charge *c;

    if (config_check_keys(config, errbuf, errlen) != 0)
        return -1;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    if (config_copy(config, "endpoint", 1, c->endpoint, sizeof(c->endpoint), errbuf, errlen) < 0 ||
        endpoint_check(c->endpoint, errbuf, errlen) != 0 ||
        config_copy(config, "currency", 0, currency, sizeof(currency), errbuf, errlen) < 0 ||
        currency_check(currency, errbuf, errlen) != 0 ||
        config_copy(config, "file", 1, path, sizeof(path), errbuf, errlen) < 0)
        goto fail;
    memcpy(c->currency, currency, sizeof(c->currency));
    c->fd = log_open(path, ib_host_api_checking(api), errbuf, errlen);
    if (c->fd < 0 && errbuf[0] != '\0')
        goto fail;
    c->host = api;
    atomic_init(&c->sent, 0);
    *state = c;
    return 0;

fail:
    free(c);
    return -1;
}

static void charge_fini(void *state)
{
    charge *c = state;
    if (c->host != NULL && IB_HOST_API_HAS(c->host, log))
        c->host->log(IB_LOG_INFO, "charge", "fini: %lu charge request(s) sent to %s",
                     atomic_load(&c->sent), c->endpoint);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

/* The amount in cents: 1 to 18 decimal digits, not all zero. */
static int amount_parse(const uint8_t *payload, size_t len, unsigned long long *cents)
{
    *cents = 0;
    if (len == 0 || len > 18)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (payload[i] < '0' || payload[i] > '9')
            return -1;
        *cents = *cents * 10 + (unsigned)(payload[i] - '0');
    }
    return *cents > 0 ? 0 : -1;
}

static ib_verdict charge_handle(void *state, const uint8_t *payload, size_t payload_len,
                                ib_bus_proxy *bus, const ib_raw_event *ev)
{
    charge *c = state;
    unsigned long long cents;
    char line[512];
    int n;
    (void)bus;

    if (amount_parse(payload, payload_len, &cents) != 0) {
        if (IB_HOST_API_HAS(c->host, log))
            c->host->log(IB_LOG_WARN, "charge", "event %s: payload is no amount in cents",
                         ib_raw_event_id(ev));
        return IB_HANDLER_REJECT;
    }
    n = snprintf(line, sizeof(line), "POST %s idempotency-key=%s amount=%llu currency=%s\n",
                 c->endpoint, ib_raw_event_id(ev), cents, c->currency);
    if (n < 0 || (size_t)n >= sizeof(line))
        return IB_HANDLER_REJECT;
    /* A real client sends here, and on a timeout returns RETRY: the
     * provider sees the same key again and answers with the first result. */
    if (write(c->fd, line, (size_t)n) != n)
        return IB_HANDLER_RETRY;
    atomic_fetch_add(&c->sent, 1);
    return IB_HANDLER_OK;
}

static const char *const charge_types[] = {"order.created", NULL};

static const ib_handler_desc charge_handlers[] = {
    {.name = "charge", .event_types = charge_types, .handle = charge_handle},
};

static const ib_plugin_desc charge_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "charge",
    .version = "1.0.0",
    .description = "charges each order once, the event id as the idempotency key",
    .init = charge_init,
    .fini = charge_fini,
    .handlers = charge_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &charge_desc;
}
