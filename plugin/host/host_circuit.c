/* SPDX-License-Identifier: Apache-2.0 */
/* Circuits as the host shows them (host_internal.h): log lines, the
 * ibus_circuit_* series and the /readyz reason. The circuits themselves
 * live in the dispatch part (dispatch.h, "Circuits"). */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "host_internal.h"
#include "log.h"

/* The dispatch part numbers its states as the metrics render them. */
_Static_assert(IB_CIRCUIT_CLOSED == (int)IB_METRICS_CIRCUIT_CLOSED &&
                   IB_CIRCUIT_HALF_OPEN == (int)IB_METRICS_CIRCUIT_HALF_OPEN &&
                   IB_CIRCUIT_OPEN == (int)IB_METRICS_CIRCUIT_OPEN,
               "dispatch.h and ops.h must number the circuit states alike");

/* While a circuit stays open, a WARN line at most this often says so. */
#define STILL_OPEN_EVERY_MS 60000

/* Logs one change: the opening and the closing always, a failed probe
 * as a reminder at most once a minute, the rest at DEBUG. */
static void log_change(ib_host *h, size_t handler, const char *consumer, ib_circuit_state from,
                       ib_circuit_state to, const char *detail)
{
    int64_t now = ib_clock_monotonic_ms();
    int64_t *warned = handler < h->consumer_metrics_n && h->batch.circuit_warned_ms != NULL
                          ? &h->batch.circuit_warned_ms[handler]
                          : NULL;
    if (from == IB_CIRCUIT_CLOSED && to == IB_CIRCUIT_OPEN) {
        ib_log_kv(IB_SEV_WARN,
                  "circuit open: handler not run, its deliveries wait (no attempt spent, nothing "
                  "dead-lettered for it); one probe at a growing interval",
                  "consumer", consumer, "detail", detail, NULL);
        if (warned != NULL)
            *warned = now;
    } else if (to == IB_CIRCUIT_CLOSED) {
        ib_log_kv(IB_SEV_INFO, "circuit closed: the handler runs again", "consumer", consumer,
                  "detail", detail, NULL);
    } else if (to == IB_CIRCUIT_OPEN && warned != NULL && now - *warned >= STILL_OPEN_EVERY_MS) {
        ib_log_kv(IB_SEV_WARN, "circuit still open: its deliveries keep waiting", "consumer",
                  consumer, "detail", detail, NULL);
        *warned = now;
    } else {
        ib_log_kv(IB_SEV_DEBUG, to == IB_CIRCUIT_HALF_OPEN ? "circuit half-open" : "circuit open",
                  "consumer", consumer, "detail", detail, NULL);
    }
}

void ib__host_on_circuit(void *ctx, size_t handler, const char *consumer, ib_circuit_state from,
                         ib_circuit_state to, const char *detail)
{
    ib_host *h = ctx;
    if (handler < h->consumer_metrics_n)
        ib_metrics_consumer_circuit(h->consumer_metrics[handler], (ib_metrics_circuit)to);
    log_change(h, handler, consumer, from, to, detail);
}

bool ib__host_circuits_why(ib_host *h, char *why, size_t cap)
{
    size_t n = ib_dispatch_handler_count(h->dispatch), used = 0, open = 0;
    for (size_t i = 0; i < n && used + 1 < cap; i++) {
        if (ib_dispatch_circuit_state(h->dispatch, i) == IB_CIRCUIT_CLOSED)
            continue;
        int w = snprintf(why + used, cap - used, "%s%s", open++ == 0 ? "circuit open for " : ", ",
                         ib_dispatch_handler_consumer(h->dispatch, i));
        used += w > 0 ? (size_t)w : 0;
    }
    if (open > 0 && used + 1 < cap)
        snprintf(why + used, cap - used,
                 " (its downstream fails: deliveries wait for a probe to succeed; nothing is "
                 "dead-lettered for it)");
    return open > 0;
}
