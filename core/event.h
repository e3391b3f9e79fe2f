/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding and validation of the wire Event (proto/event.proto).
 *
 * Decoding refuses oversized input before reading it, parses the wire
 * format once (core/wire.h: it checks the raw bytes of the string fields,
 * which protobuf-c would accept as invalid UTF-8 or cut at an embedded NUL,
 * and finds every field), refuses an empty buffer (which a protobuf parser
 * takes as a valid all-default message), copies the fields into one block
 * within a memory budget and normalises the id (uuid.h). protobuf-c is only
 * used to encode.
 *
 * Rules, checked in this order (the first that fails decides):
 *   1. size: more than max_bytes -> IB_ERR_TOO_LARGE, class DECODE;
 *      0 bytes -> IB_ERR_DECODE "empty message".
 *   2. wire format (core/wire.h): truncation, bad keys, groups, a known
 *      field with the wrong wire type, invalid UTF-8 in any string field
 *      (id, type, source, header key or value), a NUL byte in type, source
 *      or a header -> IB_ERR_DECODE. A proto3 string must be UTF-8, so other
 *      languages' parsers refuse these bytes too.
 *   3. the memory budget (ib_event_limits.max_alloc): an event whose block
 *      (struct, header array, payload, strings and their NULs) is larger
 *      -> IB_ERR_TOO_LARGE, class DECODE.
 *   4. type: empty or missing -> IB_ERR_DECODE "type is empty"; a control
 *      character (U+0000..U+001F, U+007F..U+009F), a Unicode space
 *      (U+0020, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
 *      U+205F, U+3000) or an invisible format character (U+200B..U+200F,
 *      U+2060, U+FEFF) -> IB_ERR_DECODE. Types name routes in configuration
 *      and logs, where such characters would be invisible or ambiguous.
 *   5. id: missing or empty -> IB_ERR_INVALID_ID "id is missing"; anything
 *      ib_id_normalise() refuses (including a NUL byte) -> IB_ERR_INVALID_ID.
 * Unknown fields are skipped (forward compatibility). A field given twice
 * keeps its last value; a header key given twice keeps its last value (map
 * semantics), at the position of that last occurrence. */
#ifndef IB_EVENT_H
#define IB_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "uuid.h"

#define IB_EVENT_DEFAULT_MAX_BYTES (1024u * 1024u) /* NATS' default max payload */

/* Why a message was refused; the host maps these to dead-letter reasons. */
typedef enum ib_event_reject {
    IB_EVENT_NOT_REJECTED = 0,  /* decoded, or failed through no fault of the message */
    IB_EVENT_REJECT_DECODE,     /* dead-letter reason IB_DLQ_DECODE */
    IB_EVENT_REJECT_INVALID_ID, /* dead-letter reason IB_DLQ_INVALID_ID */
} ib_event_reject;

/* Default memory budget for a message of `len` bytes: four times its size
 * (a payload is copied once; each header entry costs an array slot and two
 * NULs, so many tiny entries cost far more than their bytes) plus 64 KiB
 * for fixed overheads. */
#define IB_EVENT_ALLOC_BUDGET(len) (4 * (size_t)(len) + 64u * 1024u)

typedef struct ib_event_limits {
    size_t max_bytes;  /* refuse input larger than this; 0 = IB_EVENT_DEFAULT_MAX_BYTES */
    unsigned id_flags; /* the UUID versions accepted (IB_ID_VERSION bits, uuid.h); 0 = the
                          default set, uuid4 and uuid8 */
    size_t max_alloc;  /* bytes the decoded event may take (its one block);
                          0 = IB_EVENT_ALLOC_BUDGET(len) */
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
    const uint8_t *payload;  /* NULL exactly when payload_len is 0 */
    size_t payload_len;
    int64_t created_at_ms;          /* 0 = unknown */
    const char *source;             /* "" when absent */
    const ib_event_header *headers; /* unique keys, wire order; NULL when header_count is 0 */
    size_t header_count;
    void *impl_; /* the block holding the event; private */
} ib_event;

/* Decodes `len` bytes at `buf` into a new event stored in `*out` (owned by the
 * caller, freed with ib_event_free). `buf` is only read during the call.
 * On refusal returns IB_ERR_DECODE, IB_ERR_TOO_LARGE or IB_ERR_INVALID_ID,
 * sets `*out` to NULL and `*reject` (if non-NULL) to the dead-letter class,
 * and fills `err` with what was wrong; messages quote nothing from the input.
 * Two other failures are not the message's fault and leave `*reject` at
 * IB_EVENT_NOT_REJECTED, so the caller retries rather than dead-letters:
 * IB_ERR_NOMEM (the system is out of memory) and IB_ERR_INVALID_ARG (`out`
 * NULL, or `buf` NULL with `len` > 0). `limits` may be NULL for defaults. */
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
    const char *source;             /* NULL = empty */
    const ib_event_header *headers; /* may be NULL */
    size_t header_count;
} ib_event_fields;

/* Encodes `fields` as protobuf into a new malloc'd buffer stored in `*out`
 * with its length in `*out_len`; the caller frees it with free(). Refuses
 * with IB_ERR_INVALID_ARG what ib_event_decode would refuse as undecodable:
 * a NULL id, type, header key or value, a NULL payload with a length,
 * strings that are not valid UTF-8 and a type that breaks the type rule
 * above. The id itself is not checked (a producer may choose any id; the
 * consumer's ib_event_decode judges it). IB_ERR_NOMEM if allocation fails. */
ib_status ib_event_encode(uint8_t **out, size_t *out_len, const ib_event_fields *fields,
                          ib_error *err);

#endif
