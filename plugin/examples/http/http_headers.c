/* SPDX-License-Identifier: Apache-2.0 */
/* The http plugin's request headers (http_headers.h). */
#include "http_headers.h"

#include <string.h>

/* Writes "<name><value>" into `line` (cap bytes), cut to fit, NUL-ended.
 * Control bytes of the value are left out: libcurl sends a list entry as
 * it is, so a CR/LF would start a header line of its own. The host refuses
 * such values (consumer identities; event types are checked at decode):
 * this is the last line of defence, not the rule. */
static void put_line(char *line, size_t cap, const char *name, const char *value)
{
    size_t nl = strlen(name), at = nl;
    memcpy(line, name, nl);
    for (const char *v = value; *v != '\0' && at + 1 < cap; v++)
        if ((unsigned char)*v >= 0x20 && *v != 0x7f)
            line[at++] = *v;
    line[at] = '\0';
}

void ib_http_headers_init(ib_http_headers *h, const ib_http_config *cfg)
{
    char *lines[IB_HTTP_FIXED_LINES] = {h->content_type, h->expect, h->key,         h->consumer,
                                        h->type,         h->count,  h->traceparent, h->tracestate};
    size_t n = 0;
    memset(h, 0, sizeof(*h));
    put_line(h->content_type, sizeof(h->content_type), "Content-Type: ",
             cfg->format == IB_HTTP_PROTOBUF ? "application/x-protobuf" : "application/json");
    /* no "Expect: 100-continue" round trip before a large body */
    put_line(h->expect, sizeof(h->expect), "Expect:", "");
    for (; n < IB_HTTP_FIXED_LINES; n++)
        h->nodes[n].data = lines[n];
    for (size_t i = 0; i < cfg->header_count && i < IB_HTTP_MAX_HEADERS; i++)
        h->nodes[n++].data = cfg->headers[i];
    for (size_t i = 0; i + 1 < n; i++)
        h->nodes[i].next = &h->nodes[i + 1];
}

const struct curl_slist *ib_http_headers_set(ib_http_headers *h, const ib_raw_event *ev)
{
    char digits[24];
    size_t d = sizeof(digits) - 1;
    uint64_t v = ib_raw_event_delivery_count(ev);
    digits[d] = '\0';
    do {
        digits[--d] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put_line(h->key, sizeof(h->key), "Idempotency-Key: ", ib_raw_event_id(ev));
    put_line(h->consumer, sizeof(h->consumer), "Ibus-Consumer: ", ib_raw_event_consumer(ev));
    put_line(h->type, sizeof(h->type), "Ibus-Event-Type: ", ib_raw_event_type(ev));
    put_line(h->count, sizeof(h->count), "Ibus-Delivery-Count: ", digits + d);
    /* "name:" with no value: libcurl sends no such header */
    const char *tp = ib_raw_event_traceparent(ev), *ts = ib_raw_event_tracestate(ev);
    put_line(h->traceparent, sizeof(h->traceparent),
             tp != NULL ? "traceparent: " : "traceparent:", tp != NULL ? tp : "");
    put_line(h->tracestate, sizeof(h->tracestate),
             ts != NULL ? "tracestate: " : "tracestate:", ts != NULL ? ts : "");
    return h->nodes;
}
