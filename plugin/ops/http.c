/* SPDX-License-Identifier: Apache-2.0 */
/* /healthz, /readyz and /metrics over libmicrohttpd (0.9.75: callbacks
 * return enum MHD_Result). We bind the listening socket ourselves so a bind
 * failure can be reported with its errno and port 0 can be read back. */
#include "ops.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "log.h"

/* Kubelet probes and one or two scrapers are the whole expected load; the
 * caps keep a misbehaving client from holding more than a few sockets. */
#define IB_HTTP_MAX_CONNECTIONS 16u
#define IB_HTTP_MAX_PER_IP 8u
#define IB_HTTP_IDLE_TIMEOUT_S 10u
#define IB_HTTP_BACKLOG 16

struct ib_http {
    struct MHD_Daemon *daemon;
    ib_metrics *metrics;
    ib_http_ready_fn ready;
    void *ctx;
    /* set once after start (ib_http_set_live): live_ctx is written before
     * live is published with release */
    _Atomic(ib_http_ready_fn) live;
    void *live_ctx;
    uint16_t port;
};

typedef struct ib_http_addr {
    struct sockaddr_storage sa;
    socklen_t len;
} ib_http_addr;

static ib_status bad_addr(ib_error *err, const char *addr, const char *why)
{
    return ib_error_set(err, IB_ERR_CONFIG,
                        "HTTP address '%s': %s (expected HOST:PORT, e.g. 127.0.0.1:9090)", addr,
                        why);
}

/* HOST:PORT with a numeric IPv4 host, "localhost", an empty host (all IPv4
 * interfaces) or a bracketed IPv6 host. */
static ib_status parse_addr(ib_http_addr *out, const char *addr, ib_error *err)
{
    char host[64];
    const char *port_str;
    memset(out, 0, sizeof(*out));
    if (addr == NULL || addr[0] == '\0')
        return bad_addr(err, addr == NULL ? "" : addr, "empty address");

    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (close == NULL || close[1] != ':')
            return bad_addr(err, addr, "IPv6 address needs the form [ADDR]:PORT");
        size_t n = (size_t)(close - addr - 1);
        if (n == 0 || n >= sizeof(host))
            return bad_addr(err, addr, "bad IPv6 address");
        memcpy(host, addr + 1, n);
        host[n] = '\0';
        port_str = close + 2;
    } else {
        const char *colon = strrchr(addr, ':');
        if (colon == NULL)
            return bad_addr(err, addr, "missing ':PORT'");
        size_t n = (size_t)(colon - addr);
        if (n >= sizeof(host))
            return bad_addr(err, addr, "host too long");
        memcpy(host, addr, n);
        host[n] = '\0';
        if (strchr(host, ':') != NULL)
            return bad_addr(err, addr, "write an IPv6 address in brackets: [ADDR]:PORT");
        port_str = colon + 1;
    }

    unsigned long port = 0;
    size_t digits = 0;
    for (const char *p = port_str; *p != '\0'; p++, digits++) {
        if (*p < '0' || *p > '9' || digits >= 5)
            return bad_addr(err, addr, "port must be a number from 0 to 65535");
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (digits == 0 || port > 65535)
        return bad_addr(err, addr, "port must be a number from 0 to 65535");

    if (addr[0] == '[') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->sa;
        if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
            return bad_addr(err, addr, "not a numeric IPv6 address");
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        out->len = sizeof(*s6);
        return IB_OK;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)&out->sa;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    out->len = sizeof(*s4);
    if (host[0] == '\0') {
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        return IB_OK;
    }
    if (strcmp(host, "localhost") == 0) {
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return IB_OK;
    }
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
        return bad_addr(err, addr, "host is not a numeric IPv4 address, localhost or [IPv6]");
    return IB_OK;
}

static ib_status open_listener(int *fd_out, uint16_t *port_out, const ib_http_addr *a,
                               const char *addr, ib_error *err)
{
    int family = a->sa.ss_family;
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return ib_error_set(err, IB_ERR_IO, "HTTP address '%s': socket: %s", addr, strerror(errno));
    int one = 1;
    /* a restarted process must rebind at once, not wait out TIME_WAIT */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->sa, a->len) != 0) {
        int e = errno;
        close(fd);
        return ib_error_set(err, IB_ERR_IO, "HTTP address '%s': cannot bind: %s", addr,
                            strerror(e));
    }
    if (listen(fd, IB_HTTP_BACKLOG) != 0) {
        int e = errno;
        close(fd);
        return ib_error_set(err, IB_ERR_IO, "HTTP address '%s': listen: %s", addr, strerror(e));
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) {
        int e = errno;
        close(fd);
        return ib_error_set(err, IB_ERR_IO, "HTTP address '%s': getsockname: %s", addr,
                            strerror(e));
    }
    *port_out = family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                   : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    *fd_out = fd;
    return IB_OK;
}

/* libmicrohttpd's own diagnostics go through our logger, one record each. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    ib_log_kv(IB_SEV_WARN, "http server", "component", "http", "detail", msg, NULL);
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned int status, struct MHD_Response *r,
                             const char *content_type)
{
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    /* probes and scrapes must see the live value, never a cached one */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result queue_static(struct MHD_Connection *c, unsigned int status, const char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    return queue(c, status, r, "text/plain; charset=utf-8");
}

/* /readyz's answer, shared with ibus_ready so the two cannot drift.
 * `why` (cap bytes) gets the reason when not ready. */
static int is_ready(const ib_http *h, char *why, size_t cap)
{
    why[0] = '\0';
    return h->ready == NULL || h->ready(h->ctx, why, cap) != 0;
}

/* 503 with the callback's reason: "not ready: <why>", or "not ready"
 * when it gave none. */
static enum MHD_Result queue_not_ready(struct MHD_Connection *c, const char *why)
{
    char body[320];
    snprintf(body, sizeof(body), "not ready%s%s\n", why[0] != '\0' ? ": " : "", why);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    return queue(c, MHD_HTTP_SERVICE_UNAVAILABLE, r, "text/plain; charset=utf-8");
}

/* /healthz: 200 "ok", or 503 with the liveness callback's reason. */
static enum MHD_Result serve_health(struct MHD_Connection *c, ib_http *h)
{
    char why[256], body[320];
    ib_http_ready_fn live = atomic_load_explicit(&h->live, memory_order_acquire);
    why[0] = '\0';
    if (live == NULL || live(h->live_ctx, why, sizeof(why)) != 0)
        return queue_static(c, MHD_HTTP_OK, "ok\n");
    snprintf(body, sizeof(body), "not healthy%s%s\n", why[0] != '\0' ? ": " : "", why);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    return queue(c, MHD_HTTP_SERVICE_UNAVAILABLE, r, "text/plain; charset=utf-8");
}

static enum MHD_Result serve_metrics(struct MHD_Connection *c, const ib_http *h)
{
    if (h->metrics == NULL)
        return queue_static(c, MHD_HTTP_SERVICE_UNAVAILABLE, "metrics disabled\n");
    char why[256];
    ib_metrics_gauge_set(h->metrics, IB_METRIC_READY, is_ready(h, why, sizeof(why)));
    char *text = NULL;
    size_t len = 0;
    ib_error err;
    if (ib_metrics_render(&text, &len, h->metrics, &err) != IB_OK)
        return queue_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics unavailable\n");
    /* MUST_FREE: libmicrohttpd releases the rendered text with free() */
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    return queue(c, MHD_HTTP_OK, r, "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    (void)upload_data;
    (void)req_cls;
    ib_http *h = cls;
    /* a request body is never wanted: swallow it so the connection stays sane */
    if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(
            strlen("method not allowed\n"), (void *)"method not allowed\n", MHD_RESPMEM_PERSISTENT);
        if (r == NULL)
            return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        return queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, r, "text/plain; charset=utf-8");
    }
    if (strcmp(url, "/healthz") == 0)
        return serve_health(c, h);
    if (strcmp(url, "/readyz") == 0) {
        char why[256];
        return is_ready(h, why, sizeof(why)) ? queue_static(c, MHD_HTTP_OK, "ready\n")
                                             : queue_not_ready(c, why);
    }
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(c, h);
    return queue_static(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

ib_status ib_http_start(ib_http **out, const char *addr, ib_metrics *m, ib_http_ready_fn ready,
                        void *ctx, ib_error *err)
{
    ib_http_addr a;
    ib_status st;
    int fd = -1;
    if (out == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "http start: NULL output");
    *out = NULL;
    st = parse_addr(&a, addr, err);
    if (st != IB_OK)
        return st;

    ib_http *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "HTTP address '%s': out of memory", addr);
    h->metrics = m;
    h->ready = ready;
    h->ctx = ctx;
    atomic_init(&h->live, NULL);

    st = open_listener(&fd, &h->port, &a, addr, err);
    if (st != IB_OK)
        goto fail_free;

    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (a.sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, IB_HTTP_MAX_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, IB_HTTP_MAX_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
        IB_HTTP_IDLE_TIMEOUT_S, MHD_OPTION_END);
    if (h->daemon == NULL) {
        st = ib_error_set(err, IB_ERR_IO, "HTTP address '%s': cannot start the HTTP server", addr);
        goto fail_close;
    }
    *out = h;
    return IB_OK;

fail_close:
    close(fd);
fail_free:
    free(h);
    return st;
}

uint16_t ib_http_port(const ib_http *h)
{
    return h != NULL ? h->port : 0;
}

void ib_http_set_live(ib_http *h, ib_http_ready_fn live, void *ctx)
{
    if (h == NULL)
        return;
    h->live_ctx = ctx;
    atomic_store_explicit(&h->live, live, memory_order_release);
}

void ib_http_stop(ib_http *h)
{
    if (h == NULL)
        return;
    /* MHD_stop_daemon joins its thread and closes the listening socket */
    MHD_stop_daemon(h->daemon);
    free(h);
}
