/* SPDX-License-Identifier: Apache-2.0 */
/* The host API table plugins receive: the bus part's slots (logging,
 * publishing, ids, the transaction's connection) plus the ABI 1.3 slots
 * that need the dispatch table and the metrics registry, which only the
 * host holds. */
#include "host_internal.h"

#include <string.h>

#include "dispatch.h"
#include "ops.h"

static void api_verdict_detail(ib_bus_proxy *bus, int64_t retry_after_ms, const char *reason)
{
    (void)bus; /* one proxy serves a whole batch: the calling thread says which call */
    ib_dispatch_note_verdict(retry_after_ms, reason);
}

static void api_http_request(ib_bus_proxy *bus, int status, double seconds)
{
    void *ctx;
    size_t handler;
    (void)bus;
    if (!ib_dispatch_current(&ctx, &handler) || ctx == NULL)
        return;
    const ib_host *h = ctx;
    if (handler < h->consumer_metrics_n)
        ib_metrics_consumer_http(h->consumer_metrics[handler], status, seconds);
}

/* The table of a run, and the one of a check (IB_HOST_CHECKING). */
static ib_host_api host_api, check_api;

const ib_host_api *ib__host_api(bool checking)
{
    /* Filled on the main thread before the first plugin's init, and never
     * changed after: plugins and handler threads only read it. The bus
     * part's copy stops at ABI 1.2; the rest is the host's. */
    ib_host_api *api = checking ? &check_api : &host_api;
    if (api->size == 0) {
        memcpy(api, ib_bus_host_api(), offsetof(ib_host_api, verdict_detail));
        api->abi_minor = IB_ABI_MINOR;
        api->verdict_detail = api_verdict_detail;
        api->http_request = api_http_request;
        api->flags = checking ? IB_HOST_CHECKING : 0;
        api->size = sizeof(*api);
    }
    return api;
}

_Static_assert(IB_HTTP_TIMEOUT == IB_METRICS_HTTP_TIMEOUT && IB_HTTP_ERROR == IB_METRICS_HTTP_ERROR,
               "plugin.h and ops.h must number the request failures alike");
