/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding, validation and encoding of the wire Event (rules in event.h). */
#include "event.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.pb-c.h"
#include "utf8.h"
#include "wire.h"

/* The event handed out and everything it points to, in one block: the
 * public view, the header array, then the payload and the NUL-terminated
 * strings copied from the wire. One allocation and one free per event. */
typedef struct event_impl {
    ib_event pub;
    ib_event_header headers[]; /* after header de-duplication */
} event_impl;

static size_t default_budget(size_t len)
{
    /* Saturate: a caller may configure max_bytes near SIZE_MAX. */
    if (len > (SIZE_MAX - 64u * 1024u) / 4)
        return SIZE_MAX;
    return IB_EVENT_ALLOC_BUDGET(len);
}

static bool is_invisible_or_space(uint32_t cp)
{
    if (cp <= 0x20 || (cp >= 0x7f && cp <= 0x9f))
        return true; /* C0 controls, space, DEL, C1 controls */
    switch (cp) {
    case 0x00a0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x2060:
    case 0x3000:
    case 0xfeff:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200f; /* spaces, zero-width and marks */
    }
}

/* Returns the byte offset of the first character the type rule refuses, or
 * `len` if there is none. `type` must be valid UTF-8. */
static size_t type_bad_offset(const uint8_t *type, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (type[i] > 0x20 && type[i] < 0x7f) {
            i++; /* printable ASCII, the common case: nothing to decode */
            continue;
        }
        uint32_t cp = 0;
        size_t n = ib__utf8_decode(&cp, type + i, len - i);
        if (n == 0 || is_invisible_or_space(cp))
            return i;
        i += n;
    }
    return len;
}

/* Sets the refusal class and returns `status`, which the caller gets from
 * ib_error_set: `return refuse(reject, cls, ib_error_set(err, ...));`. */
static ib_status refuse(ib_event_reject *reject, ib_event_reject cls, ib_status status)
{
    if (reject != NULL)
        *reject = cls;
    return status;
}

/* Describes a wire-format problem without quoting the input. */
static ib_status refuse_wire(ib_event_reject *reject, ib_error *err, const ib__wire_scan *scan)
{
    const char *what = ib__wire_problem_str(scan->problem);

    if (scan->field == 6 && scan->subfield != 0)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE,
                                   "not a protobuf Event: headers entry %zu, %s, at byte %zu: %s",
                                   scan->header_index,
                                   scan->subfield == 1   ? "key"
                                   : scan->subfield == 2 ? "value"
                                                         : "unknown field",
                                   scan->offset, what));
    if (scan->field != 0)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE,
                                   "not a protobuf Event: field %u (%s) at byte %zu: %s",
                                   (unsigned)scan->field, ib__wire_field_name(scan->field),
                                   scan->offset, what));
    return refuse(reject, IB_EVENT_REJECT_DECODE,
                  ib_error_set(err, IB_ERR_DECODE, "not a protobuf Event: at byte %zu: %s",
                               scan->offset, what));
}

typedef struct header_slot {
    const char *key;
    size_t index;
} header_slot;

static int header_slot_cmp(const void *pa, const void *pb)
{
    const header_slot *a = pa;
    const header_slot *b = pb;
    int c = strcmp(a->key, b->key);
    if (c != 0)
        return c;
    return (a->index > b->index) - (a->index < b->index);
}

/* Keeps, for each key of the `n` headers in `impl->headers`, only its last
 * occurrence (protobuf map semantics), in wire order. */
static bool dedup_headers(event_impl *impl, size_t n)
{
    ib_event_header *h = impl->headers;
    header_slot *slots = NULL;
    bool *dropped = NULL;
    size_t out = 0;

    if (n > 1) {
        slots = malloc(n * sizeof(*slots));
        dropped = calloc(n, sizeof(*dropped));
        if (slots == NULL || dropped == NULL) {
            free(dropped);
            free(slots);
            return false;
        }
        for (size_t i = 0; i < n; i++)
            slots[i] = (header_slot){h[i].key, i};
        qsort(slots, n, sizeof(*slots), header_slot_cmp);
        for (size_t i = 0; i + 1 < n; i++) {
            if (strcmp(slots[i].key, slots[i + 1].key) == 0)
                dropped[slots[i].index] = true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (dropped == NULL || !dropped[i])
            h[out++] = h[i];
    }
    impl->pub.headers = out > 0 ? h : NULL;
    impl->pub.header_count = out;
    free(dropped);
    free(slots);
    return true;
}

/* a + b, or SIZE_MAX when that overflows. */
static size_t add_sat(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* Bytes of the event's block: the struct, the header array, the payload
 * and the strings with their NULs. SIZE_MAX when it cannot be counted. */
static size_t block_size(const ib__wire_scan *scan)
{
    size_t entries = scan->header_entries;
    if (entries > (SIZE_MAX - sizeof(event_impl)) / (sizeof(ib_event_header) + 2))
        return SIZE_MAX;
    /* The copied bytes are disjoint slices of the message: no overflow. */
    size_t n = sizeof(event_impl) + entries * (sizeof(ib_event_header) + 2);
    n = add_sat(n, scan->payload_len);
    n = add_sat(n, scan->type_len + 1);
    n = add_sat(n, scan->source_len + 1);
    return add_sat(n, scan->header_bytes);
}

/* The checks the wire scan does not make: the type is printable, the id a
 * valid one (normalised into `id`). */
static ib_status validate(char id[IB_ID_BUF_SIZE], ib_event_reject *reject,
                          const ib__wire_scan *scan, unsigned id_flags, ib_error *err)
{
    if (scan->type_len == 0)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE, "type is empty"));
    size_t bad = type_bad_offset(scan->type, scan->type_len);
    if (bad != scan->type_len)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE,
                                   "type has a control, space or invisible character at byte %zu",
                                   bad));

    if (scan->id_len == 0)
        return refuse(reject, IB_EVENT_REJECT_INVALID_ID,
                      ib_error_set(err, IB_ERR_INVALID_ID, "id is missing"));
    /* The raw bytes, NULs included: a NUL makes the id malformed. */
    ib_id_reason why = ib_id_normalise(id, (const char *)scan->id, scan->id_len, id_flags);
    if (why == IB_ID_BAD_VERSION) {
        char accepted[64];
        return refuse(reject, IB_EVENT_REJECT_INVALID_ID,
                      ib_error_set(err, IB_ERR_INVALID_ID,
                                   "id is a UUID version %d, not one of the accepted versions %s",
                                   ib_id_version((const char *)scan->id, scan->id_len),
                                   ib_id_versions_str(accepted, sizeof(accepted), id_flags)));
    }
    if (why != IB_ID_VALID)
        return refuse(reject, IB_EVENT_REJECT_INVALID_ID,
                      ib_error_set(err, IB_ERR_INVALID_ID, "id is malformed (%zu bytes): %s",
                                   scan->id_len, ib_id_reason_str(why)));
    return IB_OK;
}

/* Copies `len` bytes to `*at` and a NUL after them; returns the copy. */
static const char *copy_string(char **at, const uint8_t *src, size_t len)
{
    char *s = *at;
    if (len > 0)
        memcpy(s, src, len);
    s[len] = '\0';
    *at = s + len + 1;
    return s;
}

/* Builds the event in one block of `size` bytes from the slices the scan
 * found in `buf`. */
static ib_status build(event_impl **out, ib_event_reject *reject, const uint8_t *buf, size_t len,
                       const ib__wire_scan *scan, size_t size, ib_error *err)
{
    event_impl *impl = malloc(size);
    if (impl == NULL)
        goto nomem;
    size_t n = scan->header_entries;
    char *at = (char *)&impl->headers[n];
    ib_event *ev = &impl->pub;
    ev->impl_ = impl;
    ev->payload = NULL;
    ev->payload_len = scan->payload_len;
    if (scan->payload_len > 0) {
        memcpy(at, scan->payload, scan->payload_len);
        ev->payload = (const uint8_t *)at;
        at += scan->payload_len;
    }
    ev->type = copy_string(&at, scan->type, scan->type_len);
    ev->source = copy_string(&at, scan->source, scan->source_len);
    ev->created_at_ms = (int64_t)scan->created_at_ms; /* protobuf's int64 from a varint */
    size_t pos = scan->headers_at;
    for (size_t i = 0; i < n; i++) {
        ib__wire_header h = {0};
        ib__wire_next_header(&h, buf, len, &pos);
        impl->headers[i].key = copy_string(&at, h.key, h.key_len);
        impl->headers[i].value = copy_string(&at, h.value, h.value_len);
    }
    if (!dedup_headers(impl, n)) {
        free(impl);
        goto nomem;
    }
    *out = impl;
    return IB_OK;

nomem:
    return refuse(
        reject, IB_EVENT_NOT_REJECTED,
        ib_error_set(err, IB_ERR_NOMEM, "out of memory while decoding a %zu-byte event", len));
}

/* Decode is four steps: the limits, the wire scan (the one parse: refuses
 * what a protobuf parser would accept but we must not, and finds every
 * field), the memory budget, then validate and build. */
ib_status ib_event_decode(ib_event **out, ib_event_reject *reject, const void *buf, size_t len,
                          const ib_event_limits *limits, ib_error *err)
{
    size_t max_bytes = IB_EVENT_DEFAULT_MAX_BYTES;
    unsigned id_flags = IB_ID_VERSIONS_DEFAULT;
    ib__wire_scan scan;
    char id[IB_ID_BUF_SIZE];
    event_impl *impl = NULL;

    if (reject != NULL)
        *reject = IB_EVENT_NOT_REJECTED;
    ib_error_clear(err);
    if (out == NULL || (buf == NULL && len > 0))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "ib_event_decode: no output or no input");
    *out = NULL;
    if (limits != NULL) {
        if (limits->max_bytes != 0)
            max_bytes = limits->max_bytes;
        id_flags = limits->id_flags;
    }
    if (len > max_bytes)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_TOO_LARGE,
                                   "message is %zu bytes, over the limit of %zu bytes", len,
                                   max_bytes));
    if (len == 0)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE, "empty message (0 bytes)"));

    if (ib__wire_scan_event(&scan, buf, len) != IB__WIRE_OK)
        return refuse_wire(reject, err, &scan);

    size_t budget =
        limits != NULL && limits->max_alloc != 0 ? limits->max_alloc : default_budget(len);
    size_t size = block_size(&scan);
    if (size > budget)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_TOO_LARGE,
                                   "unpacking this %zu-byte message needs more than its memory "
                                   "budget of %zu bytes",
                                   len, budget));
    ib_status st = validate(id, reject, &scan, id_flags, err);
    if (st == IB_OK)
        st = build(&impl, reject, buf, len, &scan, size, err);
    if (st != IB_OK)
        return st;
    memcpy(impl->pub.id, id, sizeof(id));
    *out = &impl->pub;
    return IB_OK;
}

void ib_event_free(ib_event *event)
{
    if (event != NULL)
        free(event->impl_);
}

/* Checks one string for ib_event_encode: present and valid UTF-8. */
static bool encodable(const char *s)
{
    return s != NULL && ib__utf8_valid(s, strlen(s));
}

ib_status ib_event_encode(uint8_t **out, size_t *out_len, const ib_event_fields *fields,
                          ib_error *err)
{
    InfinityBus__V1__Event msg = INFINITY_BUS__V1__EVENT__INIT;
    InfinityBus__V1__Event__HeadersEntry *entries = NULL;
    InfinityBus__V1__Event__HeadersEntry **entry_ptrs = NULL;
    size_t n = 0;
    size_t size;
    uint8_t *buf;
    ib_status st = IB_OK;

    ib_error_clear(err);
    if (out == NULL || out_len == NULL || fields == NULL)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "ib_event_encode: missing argument");
    *out = NULL;
    *out_len = 0;
    if (!encodable(fields->id))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "event id is missing or not valid UTF-8");
    if (!encodable(fields->type) || fields->type[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "event type is empty or not valid UTF-8");
    if (type_bad_offset((const uint8_t *)fields->type, strlen(fields->type)) !=
        strlen(fields->type))
        return ib_error_set(err, IB_ERR_INVALID_ARG,
                            "event type has a control, space or invisible character");
    if (fields->source != NULL && !encodable(fields->source))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "event source is not valid UTF-8");
    if (fields->payload == NULL && fields->payload_len > 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "event payload is NULL with a length");
    if (fields->header_count > 0) {
        if (fields->headers == NULL)
            return ib_error_set(err, IB_ERR_INVALID_ARG, "event headers are NULL with a count");
        for (size_t i = 0; i < fields->header_count; i++) {
            if (!encodable(fields->headers[i].key) || !encodable(fields->headers[i].value))
                return ib_error_set(err, IB_ERR_INVALID_ARG,
                                    "event header %zu: key or value missing or not valid UTF-8", i);
        }
        n = fields->header_count;
        if (n > SIZE_MAX / sizeof(*entries))
            return ib_error_set(err, IB_ERR_INVALID_ARG, "too many event headers");
        entries = malloc(n * sizeof(*entries));
        entry_ptrs = malloc(n * sizeof(*entry_ptrs));
        if (entries == NULL || entry_ptrs == NULL) {
            st = ib_error_set(err, IB_ERR_NOMEM, "out of memory encoding an event");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            infinity_bus__v1__event__headers_entry__init(&entries[i]);
            /* protobuf-c's fields are not const; packing only reads them. */
            entries[i].key = (char *)fields->headers[i].key;
            entries[i].value = (char *)fields->headers[i].value;
            entry_ptrs[i] = &entries[i];
        }
    }
    msg.id = (char *)fields->id;
    msg.type = (char *)fields->type;
    msg.payload.data = (uint8_t *)fields->payload;
    msg.payload.len = fields->payload_len;
    msg.created_at_ms = fields->created_at_ms;
    if (fields->source != NULL)
        msg.source = (char *)fields->source;
    msg.n_headers = n;
    msg.headers = entry_ptrs;

    size = infinity_bus__v1__event__get_packed_size(&msg);
    buf = malloc(size > 0 ? size : 1);
    if (buf == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "out of memory encoding an event");
        goto done;
    }
    infinity_bus__v1__event__pack(&msg, buf);
    *out = buf;
    *out_len = size;

done:
    free(entry_ptrs);
    free(entries);
    return st;
}
