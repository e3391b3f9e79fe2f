/* Decoding and validation of the wire Event (proto/event.proto).
 *
 * Decoding refuses oversized input before unpacking, unpacks with an
 * allocator that caps memory, checks the raw bytes of the string fields
 * (protobuf-c accepts invalid UTF-8 and cuts strings at an embedded NUL),
 * refuses an empty buffer (which protobuf-c takes as a valid all-default
 * message) and normalises the id (uuid.h). */
#ifndef IB_EVENT_H
#define IB_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "uuid.h"

#define IB_EVENT_DEFAULT_MAX_BYTES (1024u * 1024u) /* NATS' default max payload */

/* Why a message was refused; the host maps these to dead-letter reasons. */
typedef enum ib_event_reject {
    IB_EVENT_OK = 0,
    IB_EVENT_REJECT_DECODE,     /* dead-letter reason "decode" */
    IB_EVENT_REJECT_INVALID_ID, /* dead-letter reason "invalid-id" */
} ib_event_reject;

typedef struct ib_event_limits {
    size_t max_bytes;  /* refuse input larger than this; 0 = IB_EVENT_DEFAULT_MAX_BYTES */
    unsigned id_flags; /* IB_ID_UUID4_ONLY or IB_ID_ANY_VERSION */
} ib_event_limits;

typedef struct ib_event_header {
    const char *key;
    const char *value;
} ib_event_header;

/* A decoded, validated event. All pointers are owned by the event and live
 * until ib_event_free(); strings are NUL-terminated valid UTF-8 with no
 * embedded NUL. */
typedef struct ib_event {
    char id[IB_ID_BUF_SIZE]; /* normalised: 32 lowercase hex */
    const char *type;        /* non-empty */
    const uint8_t *payload;  /* may be NULL when payload_len is 0 */
    size_t payload_len;
    int64_t created_at_ms; /* 0 = unknown */
    const char *source;    /* "" when absent */
    const ib_event_header *headers;
    size_t header_count;
    void *impl_; /* the unpacked message and its allocator; private */
} ib_event;

/* Decodes `len` bytes at `buf` into a new event stored in `*out` (owned by the
 * caller, freed with ib_event_free). On refusal returns IB_ERR_DECODE,
 * IB_ERR_TOO_LARGE or IB_ERR_INVALID_ID, sets `*reject` (if non-NULL) to the
 * dead-letter class, and fills `err` with what was wrong (never payload
 * bytes). `limits` may be NULL for defaults. */
ib_status ib_event_decode(ib_event **out, ib_event_reject *reject, const void *buf, size_t len,
                          const ib_event_limits *limits, ib_error *err);

/* Frees an event from ib_event_decode. NULL is a no-op. */
void ib_event_free(ib_event *event);

/* Fields for ib_event_encode(). Strings must be NUL-terminated; `id` is
 * written as given (callers pass a normalised id). */
typedef struct ib_event_fields {
    const char *id;
    const char *type;
    const void *payload;
    size_t payload_len;
    int64_t created_at_ms;
    const char *source;               /* NULL = empty */
    const ib_event_header *headers;   /* may be NULL */
    size_t header_count;
} ib_event_fields;

/* Encodes `fields` as protobuf into a new malloc'd buffer stored in `*out`
 * with its length in `*out_len`; the caller frees it with free(). */
ib_status ib_event_encode(uint8_t **out, size_t *out_len, const ib_event_fields *fields,
                          ib_error *err);

/* Dead-letter reason name of a refusal: "decode" or "invalid-id". */
const char *ib_event_reject_str(ib_event_reject reject);

#endif
