/* SPDX-License-Identifier: Apache-2.0 */
/* The request bodies of the http plugin (private to it): the JSON envelope
 * and the protobuf Event, built from the event the host hands a handler. */
#ifndef IB_HTTP_BODY_H
#define IB_HTTP_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infinity_bus/plugin.h>

/* A growing byte buffer; `oom` is set once an append failed. */
typedef struct ib_http_buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} ib_http_buf;

/* Empties `b` for reuse, keeping its memory. */
void ib_http_buf_reset(ib_http_buf *b);
/* Frees the buffer's memory. */
void ib_http_buf_free(ib_http_buf *b);

/* Writes the JSON body into `b` (reset first):
 *   {"id":"..","type":"..","source":"..","created_at":"2026-12-02T01:02:03.456Z",
 *    "payload_encoding":"json"|"base64","payload":...}
 * created_at is null when the producer gave no time. The payload is
 * embedded as it is when it is one valid UTF-8 JSON value, else as a
 * base64 string (ib_http_json_valid, http_json.h). Returns false when
 * out of memory. */
bool ib_http_body_json(ib_http_buf *b, const ib_raw_event *ev);

/* Writes the event as a protobuf infinity_bus.v1.Event (proto/event.proto)
 * into `b` (reset first), fields in number order, empty ones left out as
 * proto3 does: the fallback on a host before ABI 1.3, which does not hand
 * over the message's own bytes (fields it did not decode are lost).
 * Returns false when out of memory. */
bool ib_http_body_protobuf(ib_http_buf *b, const ib_raw_event *ev);

#endif
