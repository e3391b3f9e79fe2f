/* SPDX-License-Identifier: Apache-2.0 */
/* JetStream state seen from the test: consumer counters, and the messages
 * of a stream (the dead-letter stream, or the original events to compare
 * with) read back by sequence with their headers. */
#ifndef IB_IT_JS_H
#define IB_IT_JS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "it_server.h"

typedef struct it_consumer_state {
    uint64_t pending;     /* messages not delivered yet */
    uint64_t ack_pending; /* delivered, neither acked nor terminated */
    uint64_t redelivered;
    uint64_t delivered; /* consumer sequence of the last delivery */
    uint64_t ack_floor; /* stream sequence below which everything is acked */
    int64_t max_deliver;
    int64_t ack_wait_ms;
} it_consumer_state;

/* Reads the consumer's info; false if it does not exist (or the server
 * cannot be asked). */
bool it_consumer_get(it_consumer_state *out, it_server *s, const char *stream, const char *durable);

/* Polls until the consumer exists. */
bool it_wait_consumer(it_server *s, const char *stream, const char *durable, int64_t timeout_ms);

/* Polls until the consumer has nothing pending and nothing awaiting an
 * ack, several readings in a row (a nak'ed message with a delay counts as
 * awaiting an ack). `last` (may be NULL) gets the last reading. */
bool it_wait_consumer_idle(it_consumer_state *last, it_server *s, const char *stream,
                           const char *durable, int64_t timeout_ms);

/* Makes a file stream `name` on the subjects `subject` (one pattern) whose
 * duplicate window (Nats-Msg-Id) is `duplicates_ms`; 0 keeps the server's
 * default of two minutes. False, with the reason on stderr, on failure. */
bool it_stream_add(it_server *s, const char *name, const char *subject, int64_t duplicates_ms);

/* Publishes `len` bytes to `subject` through JetStream with Nats-Msg-Id
 * `msg_id` and waits for the stream's ack; `*duplicate` (may be NULL) says
 * whether the stream dropped it as a repeat within its window. */
bool it_js_publish_id(bool *duplicate, it_server *s, const char *subject, const char *msg_id,
                      const void *data, size_t len);

/* Number of messages in a stream; 0 if it does not exist. */
uint64_t it_stream_count(it_server *s, const char *stream);

/* Polls until the stream holds at least n messages; returns the count. */
uint64_t it_wait_stream_count(it_server *s, const char *stream, uint64_t n, int64_t timeout_ms);

typedef struct it_header {
    char *key;
    char *value;
} it_header;

typedef struct it_msg {
    uint64_t seq;
    char *subject;
    uint8_t *data;
    size_t len;
    it_header *headers;
    size_t header_count;
} it_msg;

/* Reads message `seq` of `stream` into `*out` (free with it_msg_clear). */
bool it_stream_get(it_msg *out, it_server *s, const char *stream, uint64_t seq);

/* Reads every message of `stream`, in sequence order, into a malloc'd
 * array (free with it_msgs_free). Returns the count. */
size_t it_stream_read_all(it_msg **out, it_server *s, const char *stream);

/* First value of header `key`, or NULL. */
const char *it_msg_header(const it_msg *m, const char *key);

void it_msg_clear(it_msg *m);
void it_msgs_free(it_msg *msgs, size_t n);

#endif
