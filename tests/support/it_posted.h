/* SPDX-License-Identifier: Apache-2.0 */
/* Events that handlers published, read back from the stream that captured
 * them and matched with the events expected, for the tests of the
 * transactional outbox (exactly once per expected id). */
#ifndef IB_IT_POSTED_H
#define IB_IT_POSTED_H

#include <stdbool.h>
#include <stddef.h>

#include "it_server.h"

typedef struct it_posted {
    size_t messages;   /* messages in the stream */
    size_t missing;    /* expected ids without a message */
    size_t duplicated; /* messages beyond the first per expected id */
    size_t unexpected; /* decoded events whose id was not expected */
    size_t bad;        /* undecodable, Nats-Msg-Id not the event's id, or payload not as expected */
} it_posted;

/* Reads every message of `stream`, decodes each as an Event and counts it
 * against `ids` (n expected event ids). A message is bad when it does not
 * decode, when its Nats-Msg-Id header differs from its event id, or, if
 * `prefixes` is non-NULL, when its payload does not start with
 * prefixes[i] for the id ids[i] it carries. Both arrays stay the caller's.
 * False when the stream cannot be read. */
bool it_posted_tally(it_posted *out, it_server *s, const char *stream, char *const *ids,
                     char *const *prefixes, size_t n);

#endif
