/* SPDX-License-Identifier: Apache-2.0 */
/* http: delivers each event once to a web endpoint, so a handler can be
 * written in any language (README: "Handlers in other languages").
 *
 * Handler "http" subscribes to the types of types= (every type,
 * IB_EVENT_TYPE_ANY, by default: its list is filled in by init,
 * IB_HANDLER_TYPES_AFTER_INIT) and POSTs each event to `url`, with
 *   Idempotency-Key: <event id>      the receiver's dedup key
 *   Ibus-Consumer: <consumer identity>, Ibus-Event-Type, Ibus-Delivery-Count
 *   Content-Type: application/json or application/x-protobuf
 *   traceparent, tracestate          the event's W3C Trace Context, when it
 *                                    has one (ABI 1.4), so the receiver's
 *                                    tracing continues the trace
 * and the configured headers. The answer decides the verdict:
 *   2xx                                   OK
 *   408, 425, 429, 5xx, 1xx, 3xx, a timeout or no connection
 *                                         RETRY (Retry-After sets the delay,
 *                                         within the host's bounds), with
 *                                         the status line or libcurl's error
 *                                         as its reason: a dead letter after
 *                                         the last attempt names it
 *   other 4xx                             REJECT: dead-lettered, with the status
 *                                         and the body's first 200 bytes in
 *                                         Ibus-Error
 *
 * Config (comma-separated key=value; --plugin-config http=...):
 *   url=URL            required, http:// or https://
 *   types=A B C        event types to POST, separated by spaces; * (the
 *                      default) for every type. The handler subscribes to
 *                      these only: an event of another type is not this
 *                      handler's (no request, no marker under its identity).
 *   timeout=DURATION   whole request, e.g. 5s or 500ms (default 10s)
 *   concurrency=N      requests in flight at most, across handler threads
 *                      (default: one per handler thread, ibus run --concurrency)
 *   header=Name:Value  an extra request header; repeatable
 *   header_file=PATH   more headers, one "Name: Value" a line (for a secret
 *                      token kept out of the command line and the logs)
 *   format=json|protobuf   body: the JSON envelope (default) or the Event's
 *                      bytes exactly as they were published
 *   ca=PATH cert=PATH key=PATH   TLS: CA bundle to trust, client certificate
 *
 * Threads: one libcurl easy handle per handler thread, kept for the
 * plugin's life, so each thread reuses its connection (keep-alive) and no
 * handle is shared between threads. What its requests share is set up
 * once per handle (options, the parsed URL, the header list whose event
 * lines are rewritten per request), so a request costs libcurl's own work
 * and little else.
 */
#include <infinity_bus/plugin.h>

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_body.h"
#include "http_headers.h"
#include "http_parse.h"
#include "redact.h"

#define PLUGIN "http"
#define REASON_BODY_MAX 200

/* What one request brought back. */
typedef struct http_answer {
    char retry_after[64];
    char phrase[64]; /* the status line's reason phrase ("Service Unavailable"); may be "" */
    char body[REASON_BODY_MAX + 1];
    size_t body_len;
} http_answer;

/* One handler thread's connection and buffers; owned by the plugin's list.
 * Everything a request needs is here, set up once: the handle with the
 * options its requests share, the parsed URL, the header list, the body
 * buffer and the answer the callbacks fill in. */
typedef struct http_conn {
    CURL *curl;
    CURLU *url;
    ib_http_headers headers;
    http_answer answer;
    ib_http_buf body;
    struct http_conn *next;
} http_conn;

typedef struct http_plugin {
    ib_http_config cfg;
    char shown_url[IB_REDACT_MAX]; /* url= as logs may show it (redact.h) */
    const ib_host_api *api;
    bool no_proxy_env;  /* no proxy variable was set at init: none is looked up per request */
    pthread_key_t key;  /* the calling thread's http_conn */
    pthread_mutex_t mu; /* guards conns */
    http_conn *conns;
    sem_t slots; /* concurrency= */
    _Atomic int64_t next_log_ms;
    _Atomic uint64_t suppressed;
} http_plugin;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One log line per failure, at most one a second: a down endpoint would
 * otherwise log once per event. The lines left out are counted in the next. */
static void log_failure(http_plugin *p, const ib_raw_event *ev, const char *what)
{
    int64_t now = now_ms(), next = atomic_load(&p->next_log_ms);
    if (now < next || !atomic_compare_exchange_strong(&p->next_log_ms, &next, now + 1000)) {
        atomic_fetch_add(&p->suppressed, 1);
        return;
    }
    uint64_t skipped = atomic_exchange(&p->suppressed, 0);
    p->api->log(IB_LOG_WARN, PLUGIN,
                "POST %s for event %s (%s, delivery %llu): %s (%llu more failures not logged)",
                p->shown_url, ib_raw_event_id(ev), ib_raw_event_consumer(ev),
                (unsigned long long)ib_raw_event_delivery_count(ev), what,
                (unsigned long long)skipped);
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    http_answer *a = ctx;
    size_t len = size * n;
    if (len > 5 && strncmp(data, "HTTP/", 5) == 0)
        (void)ib_http_status_phrase(a->phrase, sizeof(a->phrase), data, len);
    if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        size_t vl = len - 12 < sizeof(a->retry_after) - 1 ? len - 12 : sizeof(a->retry_after) - 1;
        memcpy(a->retry_after, data + 12, vl);
        a->retry_after[vl] = '\0';
    }
    return len;
}

/* Keeps the body's first bytes for a dead letter's reason; drops the rest. */
static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    http_answer *a = ctx;
    size_t len = size * n, room = REASON_BODY_MAX - a->body_len;
    size_t take = len < room ? len : room;
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char)data[i];
        a->body[a->body_len++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    a->body[a->body_len] = '\0';
    return len;
}

/* The options every request of a connection shares, set once when the
 * thread's handle is made: libcurl then parses the URL and the TLS files
 * once, not per event. */
static void set_fixed_options(const http_plugin *p, http_conn *c)
{
    CURL *e = c->curl;
    /* a parsed URL: libcurl copies it per request instead of parsing the
     * string again */
    if (c->url != NULL && curl_url_set(c->url, CURLUPART_URL, p->cfg.url, 0) == CURLUE_OK)
        curl_easy_setopt(e, CURLOPT_CURLU, c->url);
    else
        curl_easy_setopt(e, CURLOPT_URL, p->cfg.url);
    if (p->no_proxy_env) { /* else libcurl reads five variables per request */
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    }
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)p->cfg.timeout_ms);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &c->answer);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &c->answer);
    ib_http_headers_init(&c->headers, &p->cfg);
    if (p->cfg.ca != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, p->cfg.ca);
    if (p->cfg.cert != NULL) {
        curl_easy_setopt(e, CURLOPT_SSLCERT, p->cfg.cert);
        curl_easy_setopt(e, CURLOPT_SSLKEY, p->cfg.key);
    }
}

/* What changes per request: the body and the per-event header lines. */
static void set_options(http_conn *c, const uint8_t *body, size_t len, const ib_raw_event *ev)
{
    CURL *e = c->curl;
    c->answer.retry_after[0] = '\0';
    c->answer.phrase[0] = '\0';
    c->answer.body[0] = '\0';
    c->answer.body_len = 0;
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, ib_http_headers_set(&c->headers, ev));
}

/* The calling thread's connection, made on its first request. */
static http_conn *thread_conn(http_plugin *p)
{
    http_conn *c = pthread_getspecific(p->key);
    if (c != NULL)
        return c;
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->curl = curl_easy_init()) == NULL) {
        free(c);
        return NULL;
    }
    c->url = curl_url();
    set_fixed_options(p, c);
    pthread_mutex_lock(&p->mu);
    c->next = p->conns;
    p->conns = c;
    pthread_mutex_unlock(&p->mu);
    pthread_setspecific(p->key, c);
    return c;
}

/* Maps a status to a verdict; a retry may carry the server's delay. The
 * reason is the status (with its phrase, for a retry) and the body's
 * first bytes: a rejection's dead letter names it, and so does a retry's
 * once the attempts run out. */
static ib_verdict judge(http_plugin *p, const ib_raw_event *ev, long status, const http_answer *a,
                        ib_bus_proxy *bus)
{
    char what[REASON_BODY_MAX + 128];
    if (status >= 200 && status <= 299)
        return IB_HANDLER_OK;
    bool retry = status == 408 || status == 425 || status == 429 || status >= 500 || status < 400;
    bool phrase = retry && a->phrase[0] != '\0';
    snprintf(what, sizeof(what), "HTTP %ld%s%s%s%s", status, phrase ? " " : "",
             phrase ? a->phrase : "", a->body_len > 0 ? ": " : "", a->body);
    log_failure(p, ev, what);
    if (!IB_HOST_API_HAS(p->api, verdict_detail)) /* a host before ABI 1.3 */
        return retry ? IB_HANDLER_RETRY : IB_HANDLER_REJECT;
    if (!retry) {
        p->api->verdict_detail(bus, -1, what);
        return IB_HANDLER_REJECT;
    }
    int64_t delay;
    if (a->retry_after[0] == '\0' ||
        ib_http_retry_after_ms(&delay, a->retry_after, (int64_t)time(NULL)) != 0)
        delay = -1;
    p->api->verdict_detail(bus, delay, what);
    return IB_HANDLER_RETRY;
}

/* A request that got no answer: RETRY, with libcurl's reason. */
static ib_verdict no_answer(http_plugin *p, const ib_raw_event *ev, CURLcode rc, ib_bus_proxy *bus)
{
    char what[128];
    if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(what, sizeof(what), "no answer within timeout=%lldms",
                 (long long)p->cfg.timeout_ms);
    else
        snprintf(what, sizeof(what), "%s", curl_easy_strerror(rc));
    log_failure(p, ev, what);
    if (IB_HOST_API_HAS(p->api, verdict_detail))
        p->api->verdict_detail(bus, -1, what);
    return IB_HANDLER_RETRY;
}

static void count_request(const http_plugin *p, ib_bus_proxy *bus, int status, double seconds)
{
    if (IB_HOST_API_HAS(p->api, http_request))
        p->api->http_request(bus, status, seconds);
}

/* One POST of `body` (BORROWED for the call) on the calling thread's
 * connection. */
static ib_verdict post(http_plugin *p, http_conn *c, const uint8_t *body, size_t len,
                       ib_bus_proxy *bus, const ib_raw_event *ev)
{
    set_options(c, body, len, ev);
    if (p->cfg.concurrency > 0)
        while (sem_wait(&p->slots) != 0 && errno == EINTR)
            ;
    CURLcode rc = curl_easy_perform(c->curl);
    if (p->cfg.concurrency > 0)
        sem_post(&p->slots);
    double seconds = 0;
    curl_easy_getinfo(c->curl, CURLINFO_TOTAL_TIME, &seconds);
    if (rc != CURLE_OK) {
        int st = rc == CURLE_OPERATION_TIMEDOUT ? IB_HTTP_TIMEOUT : IB_HTTP_ERROR;
        count_request(p, bus, st, seconds);
        return no_answer(p, ev, rc, bus);
    }
    long status = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    count_request(p, bus, (int)status, seconds);
    return judge(p, ev, status, &c->answer, bus);
}

static ib_verdict http_handle(void *state, const uint8_t *payload, size_t payload_len,
                              ib_bus_proxy *bus, const ib_raw_event *ev)
{
    http_plugin *p = state;
    (void)payload;
    (void)payload_len;
    http_conn *c = thread_conn(p);
    if (c == NULL)
        return IB_HANDLER_RETRY;
    size_t len = 0;
    const uint8_t *body = NULL;
    /* protobuf: the Event's bytes as they came, unknown fields and all;
     * re-encoded from the decoded fields only on a host before ABI 1.3 */
    if (p->cfg.format == IB_HTTP_PROTOBUF)
        body = ib_raw_event_message(ev, &len);
    if (body == NULL) {
        bool built = p->cfg.format == IB_HTTP_PROTOBUF ? ib_http_body_protobuf(&c->body, ev)
                                                       : ib_http_body_json(&c->body, ev);
        if (!built)
            return IB_HANDLER_RETRY;
        body = c->body.p;
        len = c->body.len;
    }
    return post(p, c, body, len, bus, ev);
}

/* Reads header_file= into the configuration's headers. */
static int read_header_file(ib_http_config *cfg, char *errbuf, size_t errlen)
{
    char text[16384];
    int fd = open(cfg->header_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errbuf, errlen, "header_file=%s: %s", cfg->header_file, strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n < 0 || (size_t)n == sizeof(text) - 1) {
        snprintf(errbuf, errlen, "header_file=%s: %s", cfg->header_file,
                 n < 0 ? strerror(errno) : "larger than 16 KiB");
        return -1;
    }
    text[n] = '\0';
    int rc = ib_http_config_add_header_text(cfg, text, errbuf, errlen);
    memset(text, 0, sizeof(text)); /* a token does not linger on the stack */
    return rc;
}

/* The handler's subscription, filled in by init from types= (the host
 * reads it after init: IB_HANDLER_TYPES_AFTER_INIT). The strings are the
 * configuration's, freed by fini. */
static const char *http_types[IB_HTTP_MAX_TYPES + 1];

static void set_subscription(const ib_http_config *cfg)
{
    size_t n = 0;
    if (cfg->type_count == 0)
        http_types[n++] = IB_EVENT_TYPE_ANY;
    for (size_t i = 0; i < cfg->type_count; i++)
        http_types[n++] = cfg->types[i];
    http_types[n] = NULL;
}

/* Whether none of the variables libcurl reads for a proxy is set. */
static bool no_proxy_variables(void)
{
    static const char *const names[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy",
                                        "ALL_PROXY",  "no_proxy",    "NO_PROXY"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (getenv(names[i]) != NULL)
            return false;
    return true;
}

static int http_init(void **state, const ib_host_api *api, const char *config, char *errbuf,
                     size_t errlen)
{
    http_plugin *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    p->api = api;
    p->no_proxy_env = no_proxy_variables();
    if (ib_http_config_parse(&p->cfg, config, errbuf, errlen) != 0)
        goto fail_parse;
    ib_redact_url(p->shown_url, sizeof(p->shown_url), p->cfg.url);
    if (p->cfg.header_file != NULL && read_header_file(&p->cfg, errbuf, errlen) != 0)
        goto fail_config;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(errbuf, errlen, "libcurl could not be initialised");
        goto fail_config;
    }
    if (pthread_key_create(&p->key, NULL) != 0) {
        snprintf(errbuf, errlen, "no thread key");
        goto fail_curl;
    }
    pthread_mutex_init(&p->mu, NULL);
    sem_init(&p->slots, 0, p->cfg.concurrency > 0 ? p->cfg.concurrency : 1);
    set_subscription(&p->cfg);
    *state = p;
    return 0;
fail_curl:
    curl_global_cleanup();
fail_config:
    ib_http_config_free(&p->cfg);
fail_parse:
    free(p);
    return -1;
}

/* The host calls fini after the last handler call returned and its
 * threads are joined: every connection is ours to close. */
static void http_fini(void *state)
{
    http_plugin *p = state;
    for (http_conn *c = p->conns, *next; c != NULL; c = next) {
        next = c->next;
        curl_easy_cleanup(c->curl);
        curl_url_cleanup(c->url);
        ib_http_buf_free(&c->body);
        free(c);
    }
    pthread_key_delete(p->key);
    pthread_mutex_destroy(&p->mu);
    sem_destroy(&p->slots);
    memset(http_types, 0, sizeof(http_types));
    ib_http_config_free(&p->cfg);
    curl_global_cleanup();
    free(p);
}

static const ib_handler_desc http_handlers[] = {
    {.name = "http",
     .event_types = http_types,
     .handle = http_handle,
     .flags = IB_HANDLER_TYPES_AFTER_INIT},
};

static const ib_plugin_desc http_desc = {
    IB_PLUGIN_DESC_HEADER,
    .name = "http",
    .version = "1.0.0",
    .description = "POSTs each event to a web endpoint with an Idempotency-Key",
    .init = http_init,
    .fini = http_fini,
    .handlers = http_handlers,
    .handler_count = 1,
};

IB_PLUGIN_EXPORT const ib_plugin_desc *ib_plugin_entry(void)
{
    return &http_desc;
}
