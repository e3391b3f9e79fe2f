/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal protobuf wire-format scanner for the Event message.
 *
 * Internal to core (ib__ prefix). protobuf-c 1.4.1 accepts invalid UTF-8 in
 * string fields and cuts a string at an embedded NUL, so the decoder checks
 * the RAW bytes here before unpacking. The scanner walks the top-level
 * fields of proto/event.proto without allocating and refuses:
 *   - truncated keys, varints, fixed-size values and lengths;
 *   - keys over 5 bytes, varints over 10 bytes, lengths over 5 bytes;
 *   - field number 0 or above 2^29-1; groups (wire types 3 and 4) and the
 *     undefined wire types 6 and 7;
 *   - a known field (1..6) with another wire type than the schema's;
 *   - invalid UTF-8 in fields 1 (id), 2 (type), 5 (source) and in the key
 *     (1) and value (2) of each field-6 headers map entry;
 *   - a NUL byte in fields 2, 5 and in header keys and values. A NUL in the
 *     id (field 1) is left to the id check, which refuses it as a malformed
 *     id rather than as undecodable bytes.
 * Unknown fields with wire types 0, 1, 2 and 5 are skipped, as protobuf
 * requires for forward compatibility. It never reads outside [buf, buf+len).
 *
 * The scan is also the decoder's only parse: it records where the last
 * occurrence of every field lies and sizes the headers, so ib_event_decode
 * copies the fields without reading the wire format again (the headers,
 * whose number is only known at the end, are walked once more from their
 * first entry with ib__wire_next_header). */
#ifndef IB_WIRE_H
#define IB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IB__WIRE_MAX_FIELD 0x1fffffffu /* largest field number protobuf allows */

typedef enum ib__wire_problem {
    IB__WIRE_OK = 0,
    IB__WIRE_TRUNCATED,        /* a key, value or length runs past the end */
    IB__WIRE_VARINT_TOO_LONG,  /* key > 5, varint > 10 or length > 5 bytes */
    IB__WIRE_BAD_FIELD_NUMBER, /* field number 0 or above IB__WIRE_MAX_FIELD */
    IB__WIRE_GROUP,            /* wire type 3 or 4 (groups are not used) */
    IB__WIRE_BAD_WIRE_TYPE,    /* wire type 6 or 7 */
    IB__WIRE_WRONG_TYPE,       /* a known field with another wire type */
    IB__WIRE_BAD_UTF8,         /* a string field is not valid UTF-8 */
    IB__WIRE_NUL,              /* a string field (other than the id) has a NUL */
} ib__wire_problem;

/* What the scanner found. Pointers point into the scanned buffer. A field
 * given twice counts by its LAST occurrence, as protobuf reads it. */
typedef struct ib__wire_scan {
    ib__wire_problem problem;
    size_t offset;       /* byte offset of the field (or entry field) at fault */
    uint32_t field;      /* top-level field number at fault; 0 if not known */
    uint32_t subfield;   /* inside a headers entry: its field number, else 0 */
    size_t header_index; /* which headers entry (0-based) when field == 6 */

    bool has_id; /* field 1 seen; id/id_len are its LAST occurrence */
    const uint8_t *id;
    size_t id_len;
    bool has_type; /* field 2 seen; type/type_len are its LAST occurrence */
    const uint8_t *type;
    size_t type_len;
    const uint8_t *payload; /* field 3; NULL and 0 when absent */
    size_t payload_len;
    uint64_t created_at_ms; /* field 4 as its raw varint; 0 when absent */
    const uint8_t *source;  /* field 5; NULL and 0 when absent */
    size_t source_len;
    size_t header_entries; /* occurrences of field 6 */
    size_t header_bytes;   /* sum of each entry's (last) key and value lengths */
    size_t headers_at;     /* offset of the first field 6, when header_entries > 0 */
    size_t fields;         /* top-level fields scanned */
} ib__wire_scan;

/* One headers map entry: its last key and last value (a missing one is
 * empty, as protobuf's default). Pointers point into the scanned buffer. */
typedef struct ib__wire_header {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
} ib__wire_header;

/* Scans `len` bytes at `buf` as an Event and fills `*out` (always, also on
 * failure; it owns nothing). Returns out->problem. `buf` may be NULL when
 * `len` is 0. */
ib__wire_problem ib__wire_scan_event(ib__wire_scan *out, const uint8_t *buf, size_t len);

/* Steps from `*pos` to the next headers entry of a buffer that
 * ib__wire_scan_event accepted and fills `*out` with it; start at
 * scan.headers_at. Returns false when no entry is left. It trusts the scan:
 * on bytes the scan refused it stops early but still never reads outside
 * [buf, buf+len). */
bool ib__wire_next_header(ib__wire_header *out, const uint8_t *buf, size_t len, size_t *pos);

/* Static description of a problem, e.g. "invalid UTF-8". */
const char *ib__wire_problem_str(ib__wire_problem problem);

/* Schema name of a top-level Event field ("id", "type", ...), or "unknown". */
const char *ib__wire_field_name(uint32_t field);

#endif
