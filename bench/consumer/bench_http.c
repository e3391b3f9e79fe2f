/* SPDX-License-Identifier: Apache-2.0 */
/* The endpoint of the http plugin's row: libmicrohttpd on loopback,
 * answering every request 204 with keep-alive, so the row measures the
 * plugin and the host, not a receiver's work (bench.h). */
#include "bench.h"

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_len, void **req)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    if (*req == NULL) { /* headers only: come back for the body */
        *req = conn;
        return MHD_YES;
    }
    if (*upload_len > 0) { /* the body: read and dropped */
        *upload_len = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(conn, 204, r);
    MHD_destroy_response(r);
    return rc;
}

ib_status ib__bench_http_start(ib__bench_http *h, ib_error *err)
{
    memset(h, 0, sizeof(*h));
    /* port 0: the kernel picks one; two threads, as many as the cores */
    h->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
                                 answer, NULL, MHD_OPTION_THREAD_POOL_SIZE, 2u,
                                 MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_END);
    if (h->daemon == NULL)
        return ib_error_set(err, IB_ERR_IO, "bench http endpoint: cannot start");
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (info == NULL || info->port == 0) {
        ib__bench_http_stop(h);
        return ib_error_set(err, IB_ERR_IO, "bench http endpoint: no port");
    }
    snprintf(h->url, sizeof(h->url), "http://127.0.0.1:%u/events", (unsigned)info->port);
    return IB_OK;
}

void ib__bench_http_stop(ib__bench_http *h)
{
    if (h->daemon != NULL)
        MHD_stop_daemon(h->daemon);
    h->daemon = NULL;
}
