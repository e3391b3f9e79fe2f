/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "js_api.h"
#include "log.h"
#include "nkey.h"
#include "redact.h"

struct ib_nats {
    natsConnection *nc;
    jsCtx *js;
    atomic_int connected;
    atomic_int closed;
    atomic_int closing; /* set by ib_nats_close: disconnects are expected */
    atomic_int denied;  /* the server sent a permissions violation */
    atomic_uint_fast64_t reconnects;
    char nkey_public[IB_NKEY_PUBLIC_LEN + 1];
    char api_prefix[IB_JS_API_PREFIX_MAX]; /* the JetStream context's, set before connecting */
    /* why the first connect failed, while nats.c retries it (it keeps no
     * error of its own then) */
    char first_error[200];
};

/* nats.c's last error reads "(conn.c:2088): No server available": the
 * source location means nothing to an operator. Copies `text` without
 * "(file:line): " prefixes into buf. */
static void without_location(char *buf, size_t len, const char *text)
{
    for (;;) {
        const char *close = text[0] == '(' ? strstr(text, "): ") : NULL;
        if (close == NULL || memchr(text, ':', (size_t)(close - text)) == NULL)
            break;
        text = close + 3;
    }
    snprintf(buf, len, "%s", text);
}

const char *ib_nats_strerror(char *buf, size_t len, natsStatus s)
{
    char last[256] = "";
    const char *raw = nats_GetLastError(NULL);
    if (raw != NULL)
        without_location(last, sizeof(last), raw);
    if (last[0] != '\0' && strcmp(last, natsStatus_GetText(s)) != 0)
        snprintf(buf, len, "%s: %s", natsStatus_GetText(s), last);
    else
        snprintf(buf, len, "%s", natsStatus_GetText(s));
    return buf;
}

/* nats.c runs every connection callback on one library-wide thread: these
 * only flip flags and log, never block. */
static void on_disconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    ib_nats *n = closure;
    atomic_store(&n->connected, 0);
    if (!atomic_load(&n->closing))
        ib_log_kv(IB_SEV_WARN, "nats disconnected; reconnecting", NULL);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
    char url[256] = "";
    ib_nats *n = closure;
    char shown[IB_REDACT_MAX];
    natsConnection_GetConnectedUrl(nc, url, sizeof(url));
    atomic_store(&n->connected, 1);
    atomic_fetch_add(&n->reconnects, 1);
    ib_log_kv(IB_SEV_INFO, "nats reconnected", "url", ib_redact_url(shown, sizeof(shown), url),
              NULL);
}

/* The last callback nats.c runs for a connection. Its final store is the
 * last touch of `n`: close_and_wait() frees `n` once it sees it. */
static void on_closed(natsConnection *nc, void *closure)
{
    (void)nc;
    ib_nats *n = closure;
    atomic_store(&n->connected, 0);
    atomic_store(&n->closed, 1);
}

/* natsConnection_Close only queues the closed callback for nats.c's
 * callback thread, which then writes to `n`: freeing `n` before it ran was
 * a use-after-free (seen under ASan at every exit). Waits for it; returns
 * false if it did not come, and then `n` must be leaked, not freed. */
static bool close_and_wait(ib_nats *n)
{
    natsConnection_Close(n->nc);
    for (int waited = 0; !atomic_load(&n->closed); waited++) {
        if (waited >= 5000)
            return false;
        nats_Sleep(1);
    }
    return true;
}

static void on_error(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure)
{
    (void)nc;
    (void)sub;
    ib_nats *n = closure;
    if (s == NATS_NOT_PERMITTED)
        atomic_store(&n->denied, 1);
    ib_log_kv(IB_SEV_WARN, "nats asynchronous error", "error", natsStatus_GetText(s), NULL);
}

/* nats.c calls this once the background retry of a first connect succeeds. */
static void on_connected(natsConnection *nc, void *closure)
{
    (void)nc;
    ib_nats *n = closure;
    atomic_store(&n->connected, 1);
    ib_log_kv(IB_SEV_INFO, "nats connected", NULL);
}

static ib_status nats_fail(ib_error *err, ib_status code, const char *what, natsStatus s)
{
    char detail[200];
    return ib_error_set(err, code, "%s: %s", what, ib_nats_strerror(detail, sizeof(detail), s));
}

/* For a setting that names a file (or a URL): "<what> <value>: <reason>". */
static ib_status nats_fail_file(ib_error *err, const char *what, const char *value, natsStatus s)
{
    char detail[200];
    return ib_error_set(err, IB_ERR_CONFIG, "%s %s: %s", what, value,
                        ib_nats_strerror(detail, sizeof(detail), s));
}

static ib_status apply_auth(natsOptions *o, ib_nats *n, const ib_nats_config *c, ib_error *err)
{
    natsStatus s = NATS_OK;
    if (c->creds_file != NULL && c->creds_file[0] != '\0') {
        s = natsOptions_SetUserCredentialsFromFiles(o, c->creds_file, NULL);
        if (s != NATS_OK)
            return nats_fail_file(err, "credentials file", c->creds_file, s);
    }
    if (c->nkey_seed_file != NULL && c->nkey_seed_file[0] != '\0') {
        ib_error e;
        if (ib_nkey_public_from_seed_file(n->nkey_public, c->nkey_seed_file, &e) != IB_OK)
            return ib_error_set(err, IB_ERR_CONFIG, "%s", e.msg);
        s = natsOptions_SetNKeyFromSeed(o, n->nkey_public, c->nkey_seed_file);
        if (s != NATS_OK)
            return nats_fail_file(err, "nkey seed file", c->nkey_seed_file, s);
    }
    if (c->token != NULL && c->token[0] != '\0') {
        s = natsOptions_SetToken(o, c->token);
        if (s != NATS_OK)
            return nats_fail(err, IB_ERR_CONFIG, "authentication token", s);
    }
    if (c->user != NULL && c->user[0] != '\0') {
        s = natsOptions_SetUserInfo(o, c->user, c->password != NULL ? c->password : "");
        if (s != NATS_OK)
            return nats_fail(err, IB_ERR_CONFIG, "user and password", s);
    }
    return IB_OK;
}

static ib_status apply_tls(natsOptions *o, const ib_nats_config *c, ib_error *err)
{
    bool have_ca = c->tls_ca != NULL && c->tls_ca[0] != '\0';
    bool have_cert = c->tls_cert != NULL && c->tls_cert[0] != '\0';
    bool have_key = c->tls_key != NULL && c->tls_key[0] != '\0';
    natsStatus s;

    if (have_cert != have_key)
        return ib_error_set(err, IB_ERR_CONFIG,
                            "TLS client certificate and key: give both or neither");
    if (!have_ca && !have_cert)
        return IB_OK;
    if ((s = natsOptions_SetSecure(o, true)) != NATS_OK)
        return nats_fail(err, IB_ERR_CONFIG, "TLS", s);
    if (have_ca && (s = natsOptions_LoadCATrustedCertificates(o, c->tls_ca)) != NATS_OK)
        return nats_fail_file(err, "TLS CA bundle", c->tls_ca, s);
    if (have_cert &&
        (s = natsOptions_LoadCertificatesChain(o, c->tls_cert, c->tls_key)) != NATS_OK) {
        char detail[200];
        return ib_error_set(err, IB_ERR_CONFIG, "TLS client certificate %s and key %s: %s",
                            c->tls_cert, c->tls_key, ib_nats_strerror(detail, sizeof(detail), s));
    }
    return IB_OK;
}

/* With retry_initial_connect, nats.c keeps retrying whatever made the first
 * attempt fail, and after a refused login it ends up closing the
 * connection with only "no server available". A refused login cannot heal
 * by retrying, so it is a failure now, with the server's reason. */
static bool refused_login(natsConnection *nc, const char *url, ib_error *err)
{
    const char *why = NULL;
    natsStatus ls = natsConnection_GetLastError(nc, &why);
    if (ls != NATS_CONNECTION_AUTH_FAILED && ls != NATS_NOT_PERMITTED)
        return false;
    ib_error_set(err, IB_ERR_NATS,
                 "cannot connect to %s: %s (login refused: check the user and password, token, "
                 "credentials file or nkey seed)",
                 url, why != NULL && why[0] != '\0' ? why : natsStatus_GetText(ls));
    return true;
}

/* Gives nats.c the server list. natsOptions_SetURL takes one URL only
 * (a comma-separated list there fails every connect), so a list is split
 * here and handed to natsOptions_SetServers; spaces around each URL are
 * dropped and empty entries are refused. */
static natsStatus set_server_urls(natsOptions *o, const char *list)
{
    if (strchr(list, ',') == NULL)
        return natsOptions_SetURL(o, list);
    char *copy = strdup(list);
    size_t max = 1;
    for (const char *p = list; *p != '\0'; p++)
        max += *p == ',';
    const char **urls = calloc(max, sizeof(*urls));
    natsStatus s = copy != NULL && urls != NULL ? NATS_OK : NATS_NO_MEMORY;
    int n = 0;
    char *save = NULL;
    for (char *t = s == NATS_OK ? strtok_r(copy, ",", &save) : NULL; t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        size_t len = strlen(t);
        while (len > 0 && t[len - 1] == ' ')
            t[--len] = '\0';
        if (len == 0)
            break;
        urls[n++] = t;
    }
    if (s == NATS_OK)
        s = n == (int)max ? natsOptions_SetServers(o, urls, n) : NATS_INVALID_ARG;
    free(urls);
    free(copy);
    return s;
}

/* Connects `n->nc` (`url`: the server list as messages show it, redacted).
 * With retry_initial_connect the first attempt is still
 * made without retry: its refusal is then ours to read. Once nats.c's
 * reconnect thread runs, it may replace a refused login's reason with "no
 * server available" before anyone looks (seen on a loaded machine). Only
 * a failure that may heal (no server yet) goes on to the retrying
 * connect. Returns IB_OK when connected or retrying in the background. */
static ib_status connect_first(ib_nats *n, natsOptions *o, const ib_nats_config *c, const char *url,
                               ib_error *err)
{
    char detail[200];
    natsStatus s = natsConnection_Connect(&n->nc, o);
    if (s != NATS_OK && c->retry_initial_connect) {
        const char *last = nats_GetLastError(NULL);
        if (s == NATS_CONNECTION_AUTH_FAILED || s == NATS_NOT_PERMITTED ||
            (last != NULL && strcasestr(last, "authorization") != NULL))
            return ib_error_set(err, IB_ERR_NATS,
                                "cannot connect to %s: %s (login refused: check the user and "
                                "password, token, credentials file or nkey seed)",
                                url, ib_nats_strerror(detail, sizeof(detail), s));
        /* A URL nats.c cannot parse never heals by retrying. */
        if (s == NATS_INVALID_ARG)
            return ib_error_set(err, IB_ERR_CONFIG, "server URL %s: %s", url,
                                ib_nats_strerror(detail, sizeof(detail), s));
        /* Said at once: nats.c now retries quietly in the background. */
        ib_nats_strerror(n->first_error, sizeof(n->first_error), s);
        ib_log_kv(IB_SEV_WARN, "cannot connect to NATS; retrying", "url", url, "error",
                  n->first_error, NULL);
        natsOptions_SetRetryOnFailedConnect(o, true, on_connected, n);
        s = natsConnection_Connect(&n->nc, o);
    }
    if (s == NATS_OK) {
        atomic_store(&n->connected, 1);
        return IB_OK;
    }
    if (!(s == NATS_NOT_YET_CONNECTED && c->retry_initial_connect))
        return ib_error_set(err, IB_ERR_NATS, "cannot connect to %s: %s", url,
                            ib_nats_strerror(detail, sizeof(detail), s));
    return refused_login(n->nc, url, err) ? IB_ERR_NATS : IB_OK;
}

/* n->api_prefix from the config's domain or prefix; IB_ERR_CONFIG naming
 * the one that cannot be used. */
static ib_status set_api_prefix(ib_nats *n, const ib_nats_config *c, ib_error *err)
{
    const char *domain = c->js_domain != NULL ? c->js_domain : "";
    const char *prefix = c->js_api_prefix != NULL ? c->js_api_prefix : "";
    const char *why = ib_js_api_prefix(n->api_prefix, domain, prefix);
    if (why == NULL)
        return IB_OK;
    if (domain[0] != '\0' && prefix[0] != '\0')
        return ib_error_set(err, IB_ERR_CONFIG,
                            "JetStream domain '%s' and API prefix '%s': give one, not both", domain,
                            prefix);
    return ib_error_set(err, IB_ERR_CONFIG, "JetStream %s '%s': %s",
                        domain[0] != '\0' ? "domain" : "API prefix",
                        domain[0] != '\0' ? domain : prefix, why);
}

ib_status ib_nats_connect(ib_nats **out, const ib_nats_config *c, ib_error *err)
{
    natsOptions *o = NULL;
    natsStatus s;
    ib_status st;
    ib_nats *n = calloc(1, sizeof(*n));

    *out = NULL;
    if (n == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "nats: out of memory");
    if ((s = natsOptions_Create(&o)) != NATS_OK) {
        st = nats_fail(err, IB_ERR_NOMEM, "nats options", s);
        goto fail;
    }
    if ((st = set_api_prefix(n, c, err)) != IB_OK)
        goto fail;
    const char *url = c->url != NULL && c->url[0] != '\0' ? c->url : "nats://127.0.0.1:4222";
    char shown[IB_REDACT_MAX]; /* what messages say of it */
    ib_redact_url(shown, sizeof(shown), url);
    if ((s = set_server_urls(o, url)) != NATS_OK) {
        st = nats_fail_file(err, "server URL", shown, s);
        goto fail;
    }
    if (c->name != NULL)
        natsOptions_SetName(o, c->name);
    natsOptions_SetTimeout(o, c->connect_timeout_ms > 0 ? c->connect_timeout_ms : 2000);
    /* Reconnect forever, with jitter so a fleet does not stampede a
     * restarted server; keep acks published while disconnected. */
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, c->reconnect_wait_ms > 0 ? c->reconnect_wait_ms : 250);
    natsOptions_SetReconnectJitter(o, 100, 1000);
    natsOptions_SetReconnectBufSize(o, 32 * 1024 * 1024);
    natsOptions_SetPingInterval(o, 5000);
    natsOptions_SetMaxPingsOut(o, 3);
    natsOptions_SetDisconnectedCB(o, on_disconnected, n);
    natsOptions_SetReconnectedCB(o, on_reconnected, n);
    natsOptions_SetClosedCB(o, on_closed, n);
    natsOptions_SetErrorHandler(o, on_error, n);
    if ((st = apply_auth(o, n, c, err)) != IB_OK || (st = apply_tls(o, c, err)) != IB_OK)
        goto fail;

    if ((st = connect_first(n, o, c, shown, err)) != IB_OK)
        goto fail;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Prefix = n->api_prefix;
    if ((s = natsConnection_JetStream(&n->js, n->nc, &jo)) != NATS_OK) {
        st = nats_fail(err, IB_ERR_NATS, "jetstream context", s);
        goto fail;
    }
    natsOptions_Destroy(o);
    *out = n;
    return IB_OK;

fail:
    natsOptions_Destroy(o);
    if (n->nc != NULL) {
        bool closed = close_and_wait(n);
        natsConnection_Destroy(n->nc);
        if (!closed)
            return st;
    }
    free(n);
    return st;
}

natsConnection *ib_nats_connection(ib_nats *n)
{
    return n->nc;
}

jsCtx *ib_nats_jetstream(ib_nats *n)
{
    return n->js;
}

const char *ib_nats_api_prefix(const ib_nats *n)
{
    return n->api_prefix;
}

bool ib_nats_is_connected(const ib_nats *n)
{
    return atomic_load(&((ib_nats *)n)->connected) != 0;
}

bool ib_nats_is_closed(const ib_nats *n)
{
    return atomic_load(&((ib_nats *)n)->closed) != 0;
}

bool ib_nats_wait_connected(ib_nats *n, const volatile int *stop, int64_t timeout_ms)
{
    int64_t waited = 0;
    while (!ib_nats_is_connected(n)) {
        if (ib_nats_is_closed(n) || (stop != NULL && *stop) ||
            (timeout_ms >= 0 && waited >= timeout_ms))
            return false;
        nats_Sleep(20);
        waited += 20;
    }
    return true;
}

const char *ib_nats_last_error(ib_nats *n, char *buf, size_t len)
{
    const char *text = NULL;
    buf[0] = '\0';
    if (n == NULL || n->nc == NULL)
        return buf;
    natsStatus s = natsConnection_GetLastError(n->nc, &text);
    if (text != NULL && text[0] != '\0')
        without_location(buf, len, text);
    else if (s != NATS_OK)
        snprintf(buf, len, "%s", natsStatus_GetText(s));
    else if (!ib_nats_is_connected(n))
        snprintf(buf, len, "%s", n->first_error);
    return buf;
}

bool ib_nats_denied(ib_nats *n, char *buf, size_t len)
{
    buf[0] = '\0';
    if (n == NULL || !atomic_load(&n->denied))
        return false;
    ib_nats_last_error(n, buf, len);
    return true;
}

void ib_nats_close(ib_nats *n, int64_t flush_timeout_ms)
{
    if (n == NULL)
        return;
    atomic_store(&n->closing, 1);
    bool closed = true;
    if (n->nc != NULL) {
        if (ib_nats_is_connected(n) && flush_timeout_ms > 0)
            natsConnection_FlushTimeout(n->nc, flush_timeout_ms);
        closed = close_and_wait(n);
    }
    jsCtx_Destroy(n->js);
    natsConnection_Destroy(n->nc);
    if (closed)
        free(n);
}

uint64_t ib_nats_reconnects(const ib_nats *n)
{
    return atomic_load(&((ib_nats *)n)->reconnects);
}
