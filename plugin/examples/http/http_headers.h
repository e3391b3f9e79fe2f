/* SPDX-License-Identifier: Apache-2.0 */
/* The request headers of one http plugin connection (private to the
 * plugin): a libcurl header list built once per connection, whose
 * per-event lines are rewritten in place for each request, so a request
 * costs no allocation and no printf for its headers. */
#ifndef IB_HTTP_HEADERS_H
#define IB_HTTP_HEADERS_H

#include <curl/curl.h>

#include <infinity_bus/plugin.h>

#include "http_parse.h"

/* Content-Type, "Expect:", the six per-event lines, the configured ones. */
#define IB_HTTP_FIXED_LINES 8

/* The list and the lines it points at. Not copyable once built (the list
 * points into the struct); lives as long as the connection. */
typedef struct ib_http_headers {
    struct curl_slist nodes[IB_HTTP_FIXED_LINES + IB_HTTP_MAX_HEADERS];
    char content_type[40];
    char expect[8];
    char key[64];       /* Idempotency-Key: <32 hex> */
    char consumer[320]; /* Ibus-Consumer: <identity> */
    char type[300];     /* Ibus-Event-Type: <type, at most 255 bytes> */
    char count[48];     /* Ibus-Delivery-Count: <n> */
    /* W3C Trace Context of the delivery (ABI 1.4), or "traceparent:" and
     * "tracestate:", which libcurl sends as no header at all */
    char traceparent[72]; /* traceparent: <55 characters> */
    char tracestate[528]; /* tracestate: <at most 512 characters> */
} ib_http_headers;

/* Builds the list in `h` for `cfg` (BORROWED: its header strings are
 * pointed at, not copied, and must outlive `h`). */
void ib_http_headers_init(ib_http_headers *h, const ib_http_config *cfg);

/* Rewrites the per-event lines for `ev` (copied; a value longer than its
 * line is cut, as a longer type or identity cannot occur) and returns the
 * list to hand to CURLOPT_HTTPHEADER. The event's traceparent and
 * tracestate go out as they are, so the receiver's tracing continues the
 * trace; an event without them sends neither. */
const struct curl_slist *ib_http_headers_set(ib_http_headers *h, const ib_raw_event *ev);

#endif
