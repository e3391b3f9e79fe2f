/* Decoding, validation and encoding of the wire Event (rules in event.h). */
#include "event.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.pb-c.h"
#include "utf8.h"
#include "wire.h"

/* Counts what protobuf-c allocates while unpacking and refuses past a
 * budget, because protobuf-c itself has no limit: a message of many tiny
 * fields costs far more memory than its size. The count is cumulative (frees
 * are not subtracted), so it also bounds the peak. */
typedef struct budget_allocator {
    ProtobufCAllocator base;
    size_t used;
    size_t limit;
    bool refused; /* the budget said no */
    bool failed;  /* malloc said no */
} budget_allocator;

/* The event handed out, its unpacked message and the allocator that
 * free_unpacked needs, in one block; `pub` is what callers see. */
typedef struct event_impl {
    ib_event pub;
    budget_allocator alloc;
    InfinityBus__V1__Event *msg;
    ib_event_header headers[]; /* after header de-duplication */
} event_impl;

static void *budget_alloc(void *data, size_t size)
{
    budget_allocator *b = data;
    void *p;

    if (size > b->limit - b->used) {
        b->refused = true;
        return NULL;
    }
    p = malloc(size > 0 ? size : 1);
    if (p == NULL) {
        b->failed = true;
        return NULL;
    }
    b->used += size;
    return p;
}

static void budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

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

/* Copies the headers into `impl->headers`, keeping for each key only its
 * last occurrence (protobuf map semantics), in wire order. */
static bool fill_headers(event_impl *impl)
{
    InfinityBus__V1__Event *msg = impl->msg;
    size_t n = msg->n_headers;
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
            slots[i] = (header_slot){msg->headers[i]->key, i};
        qsort(slots, n, sizeof(*slots), header_slot_cmp);
        for (size_t i = 0; i + 1 < n; i++) {
            if (strcmp(slots[i].key, slots[i + 1].key) == 0)
                dropped[slots[i].index] = true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (dropped != NULL && dropped[i])
            continue;
        impl->headers[out].key = msg->headers[i]->key;
        impl->headers[out].value = msg->headers[i]->value;
        out++;
    }
    impl->pub.headers = out > 0 ? impl->headers : NULL;
    impl->pub.header_count = out;
    free(dropped);
    free(slots);
    return true;
}

/* Unpacks within the budget into `impl` (allocated here). */
static ib_status unpack(event_impl **out, ib_event_reject *reject, const uint8_t *buf, size_t len,
                        size_t budget, const ib__wire_scan *scan, ib_error *err)
{
    event_impl *impl;

    *out = NULL;
    if (scan->header_entries > (SIZE_MAX - sizeof(*impl)) / sizeof(ib_event_header))
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_TOO_LARGE, "too many headers"));
    impl = calloc(1, sizeof(*impl) + scan->header_entries * sizeof(ib_event_header));
    if (impl == NULL)
        goto nomem;
    impl->pub.impl_ = impl;
    impl->alloc.base.alloc = budget_alloc;
    impl->alloc.base.free = budget_free;
    impl->alloc.base.allocator_data = &impl->alloc;
    impl->alloc.limit = budget;
    impl->msg = infinity_bus__v1__event__unpack(&impl->alloc.base, len, buf);
    if (impl->msg == NULL) {
        bool refused = impl->alloc.refused;
        bool failed = impl->alloc.failed;
        free(impl);
        if (failed)
            goto nomem;
        if (refused)
            return refuse(
                reject, IB_EVENT_REJECT_DECODE,
                ib_error_set(err, IB_ERR_TOO_LARGE,
                             "unpacking this %zu-byte message needs more than its memory budget "
                             "of %zu bytes",
                             len, budget));
        return refuse(
            reject, IB_EVENT_REJECT_DECODE,
            ib_error_set(err, IB_ERR_DECODE, "not a protobuf Event: protobuf-c refused it"));
    }
    *out = impl;
    return IB_OK;

nomem:
    return refuse(
        reject, IB_EVENT_NOT_REJECTED,
        ib_error_set(err, IB_ERR_NOMEM, "out of memory while decoding a %zu-byte event", len));
}

/* The scanner and protobuf-c read the same bytes; if they ever disagree on a
 * string the checks above would have judged the wrong bytes, so refuse. */
static bool agrees(const char *unpacked, bool present, const uint8_t *raw, size_t raw_len)
{
    if (!present)
        return unpacked[0] == '\0';
    return strlen(unpacked) == raw_len && memcmp(unpacked, raw, raw_len) == 0;
}

/* The checks protobuf-c does not make: the scanner and protobuf-c agree on
 * the strings, the type is printable, the id is a valid one (normalised
 * into `impl->pub.id`). */
static ib_status validate(event_impl *impl, ib_event_reject *reject, const ib__wire_scan *scan,
                          unsigned id_flags, ib_error *err)
{
    const InfinityBus__V1__Event *msg = impl->msg;

    /* A NUL in the id legitimately cuts protobuf-c's copy; the id check
     * below refuses it from the raw bytes. */
    bool id_has_nul = scan->id_len > 0 && memchr(scan->id, 0, scan->id_len) != NULL;
    if ((!id_has_nul && !agrees(msg->id, scan->has_id, scan->id, scan->id_len)) ||
        !agrees(msg->type, scan->has_type, scan->type, scan->type_len))
        return refuse(
            reject, IB_EVENT_REJECT_DECODE,
            ib_error_set(err, IB_ERR_DECODE,
                         "not a protobuf Event: its string fields could not be read consistently"));
    if (scan->type_len == 0)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE, "type is empty"));
    size_t bad = type_bad_offset((const uint8_t *)msg->type, scan->type_len);
    if (bad != scan->type_len)
        return refuse(reject, IB_EVENT_REJECT_DECODE,
                      ib_error_set(err, IB_ERR_DECODE,
                                   "type has a control, space or invisible character at byte %zu",
                                   bad));

    if (scan->id_len == 0)
        return refuse(reject, IB_EVENT_REJECT_INVALID_ID,
                      ib_error_set(err, IB_ERR_INVALID_ID, "id is missing"));
    /* Judge the raw bytes: protobuf-c's copy stops at a NUL. */
    ib_id_reason why =
        ib_id_normalise(impl->pub.id, (const char *)scan->id, scan->id_len, id_flags);
    if (why != IB_ID_VALID)
        return refuse(reject, IB_EVENT_REJECT_INVALID_ID,
                      ib_error_set(err, IB_ERR_INVALID_ID, "id is malformed (%zu bytes): %s",
                                   scan->id_len, ib_id_reason_str(why)));
    return IB_OK;
}

/* Fills the public view of a validated event. */
static ib_status publish(event_impl *impl, ib_event_reject *reject, size_t len, ib_error *err)
{
    const InfinityBus__V1__Event *msg = impl->msg;

    if (!fill_headers(impl))
        return refuse(
            reject, IB_EVENT_NOT_REJECTED,
            ib_error_set(err, IB_ERR_NOMEM, "out of memory while decoding a %zu-byte event", len));
    impl->pub.type = msg->type;
    impl->pub.payload = msg->payload.len > 0 ? msg->payload.data : NULL;
    impl->pub.payload_len = msg->payload.len;
    impl->pub.created_at_ms = msg->created_at_ms;
    impl->pub.source = msg->source;
    return IB_OK;
}

/* Decode is four steps: the limits, the wire scan (refuses what protobuf-c
 * would accept but we must not), unpacking within the memory budget, then
 * validate and publish. */
ib_status ib_event_decode(ib_event **out, ib_event_reject *reject, const void *buf, size_t len,
                          const ib_event_limits *limits, ib_error *err)
{
    size_t max_bytes = IB_EVENT_DEFAULT_MAX_BYTES;
    unsigned id_flags = IB_ID_UUID4_ONLY;
    ib__wire_scan scan;
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
    ib_status st = unpack(&impl, reject, buf, len, budget, &scan, err);
    if (st != IB_OK)
        return st;
    st = validate(impl, reject, &scan, id_flags, err);
    if (st == IB_OK)
        st = publish(impl, reject, len, err);
    if (st != IB_OK) {
        infinity_bus__v1__event__free_unpacked(impl->msg, &impl->alloc.base);
        free(impl);
        return st;
    }
    *out = &impl->pub;
    return IB_OK;
}

void ib_event_free(ib_event *event)
{
    event_impl *impl;

    if (event == NULL)
        return;
    impl = event->impl_;
    infinity_bus__v1__event__free_unpacked(impl->msg, &impl->alloc.base);
    free(impl);
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
