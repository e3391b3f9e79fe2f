/* JetStream delivery metadata, read from a message's ack reply subject.
 *
 * We consume with pull requests sent over core NATS (see puller.h), so
 * nats.c's natsMsg_GetMetaData (which needs a JetStream subscription) is not
 * available: this parser reads the same facts from the reply subject
 *   $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
 * or the newer form with a domain and account hash
 *   $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>...]
 */
#ifndef IB_JSACK_H
#define IB_JSACK_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct ib_jsack_meta {
    const char *stream; /* BORROWED slice of the subject; not NUL-terminated */
    size_t stream_len;
    const char *consumer; /* BORROWED slice; not NUL-terminated */
    size_t consumer_len;
    uint64_t delivered; /* delivery count, 1 on the first delivery */
    uint64_t stream_seq;
    uint64_t consumer_seq;
    int64_t timestamp_ns; /* server time of the original publish */
    uint64_t pending;     /* messages left for the consumer after this one */
} ib_jsack_meta;

/* Parses `len` bytes of `reply` (an ack subject). Returns IB_OK, or
 * IB_ERR_DECODE with a reason in `err` when it is not an ack subject. The
 * slices in `*out` point into `reply`. */
ib_status ib_jsack_parse(ib_jsack_meta *out, const char *reply, size_t len, ib_error *err);

#endif
