/* SPDX-License-Identifier: Apache-2.0 */
/* Protobuf wire-format scanner for the raw bytes of an Event (see wire.h).
 *
 * Every read is guarded by `pos < len` or by comparing a length with what
 * remains (never by computing pos + n first), so no input can make it step
 * outside the buffer or overflow an index. */
#include "wire.h"

#include <string.h>

#include "utf8.h"

enum {
    WT_VARINT = 0,
    WT_I64 = 1,
    WT_LEN = 2,
    WT_SGROUP = 3,
    WT_EGROUP = 4,
    WT_I32 = 5,
};

/* Field numbers of proto/event.proto and of its headers map entry. */
enum {
    F_ID = 1,
    F_TYPE = 2,
    F_PAYLOAD = 3,
    F_CREATED_AT_MS = 4,
    F_SOURCE = 5,
    F_HEADERS = 6,
    F_ENTRY_KEY = 1,
    F_ENTRY_VALUE = 2,
};

/* One field as read from the wire. */
typedef struct wire_field {
    size_t start; /* offset of its key */
    uint32_t number;
    unsigned wire_type;
    const uint8_t *data; /* WT_LEN: the value bytes after the length */
    size_t data_len;
    uint64_t value; /* WT_VARINT: the value */
} wire_field;

/* Reads a varint of at most `max_bytes` bytes at *pos. */
static ib__wire_problem read_varint(uint64_t *out, const uint8_t *buf, size_t len, size_t *pos,
                                    unsigned max_bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < max_bytes; i++) {
        uint8_t b;
        if (*pos >= len)
            return IB__WIRE_TRUNCATED;
        b = buf[(*pos)++];
        /* max_bytes <= 10 keeps the shift below 64; bits beyond 64 (a tenth
         * byte above 1) are dropped, as protobuf does. */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
            *out = v;
            return IB__WIRE_OK;
        }
    }
    return IB__WIRE_VARINT_TOO_LONG;
}

static ib__wire_problem skip_bytes(size_t *pos, size_t len, uint64_t n)
{
    if (n > len - *pos)
        return IB__WIRE_TRUNCATED;
    *pos += (size_t)n;
    return IB__WIRE_OK;
}

/* Reads the key and skips the value of the field at *pos. */
static ib__wire_problem next_field(wire_field *f, const uint8_t *buf, size_t len, size_t *pos)
{
    uint64_t key;
    uint64_t v;
    ib__wire_problem p;

    f->start = *pos;
    f->number = 0;
    f->data = NULL;
    f->data_len = 0;
    f->value = 0;
    p = read_varint(&key, buf, len, pos, 5);
    if (p != IB__WIRE_OK)
        return p;
    f->wire_type = (unsigned)(key & 7);
    if ((key >> 3) == 0 || (key >> 3) > IB__WIRE_MAX_FIELD)
        return IB__WIRE_BAD_FIELD_NUMBER;
    f->number = (uint32_t)(key >> 3);
    switch (f->wire_type) {
    case WT_VARINT:
        return read_varint(&f->value, buf, len, pos, 10);
    case WT_I64:
        return skip_bytes(pos, len, 8);
    case WT_I32:
        return skip_bytes(pos, len, 4);
    case WT_LEN:
        p = read_varint(&v, buf, len, pos, 5);
        if (p != IB__WIRE_OK)
            return p;
        if (v > len - *pos)
            return IB__WIRE_TRUNCATED;
        f->data = buf + *pos;
        f->data_len = (size_t)v;
        *pos += (size_t)v;
        return IB__WIRE_OK;
    case WT_SGROUP:
    case WT_EGROUP:
        return IB__WIRE_GROUP;
    default:
        return IB__WIRE_BAD_WIRE_TYPE;
    }
}

static ib__wire_problem check_string(const wire_field *f, bool allow_nul)
{
    if (!ib__utf8_valid(f->data, f->data_len))
        return IB__WIRE_BAD_UTF8;
    if (!allow_nul && f->data_len > 0 && memchr(f->data, 0, f->data_len) != NULL)
        return IB__WIRE_NUL;
    return IB__WIRE_OK;
}

static ib__wire_problem fail(ib__wire_scan *out, ib__wire_problem p, size_t offset, uint32_t field,
                             uint32_t subfield)
{
    out->problem = p;
    out->offset = offset;
    out->field = field;
    out->subfield = subfield;
    return p;
}

/* Scans one headers map entry (nested key = 1, value = 2, both strings)
 * and adds the lengths of its last key and last value to header_bytes. */
static ib__wire_problem scan_entry(ib__wire_scan *out, const uint8_t *msg, const wire_field *entry)
{
    const uint8_t *buf = entry->data;
    size_t len = entry->data_len;
    size_t base = (size_t)(entry->data - msg);
    size_t pos = 0;
    size_t key_len = 0, value_len = 0;

    while (pos < len) {
        wire_field f;
        ib__wire_problem p = next_field(&f, buf, len, &pos);
        if (p != IB__WIRE_OK)
            return fail(out, p, base + f.start, F_HEADERS, f.number);
        if (f.number != F_ENTRY_KEY && f.number != F_ENTRY_VALUE)
            continue;
        if (f.wire_type != WT_LEN)
            return fail(out, IB__WIRE_WRONG_TYPE, base + f.start, F_HEADERS, f.number);
        p = check_string(&f, false);
        if (p != IB__WIRE_OK)
            return fail(out, p, base + f.start, F_HEADERS, f.number);
        if (f.number == F_ENTRY_KEY)
            key_len = f.data_len;
        else
            value_len = f.data_len;
    }
    /* Both lie inside the message, so the sum never exceeds its length. */
    out->header_bytes += key_len + value_len;
    return IB__WIRE_OK;
}

/* Wire type the schema gives each top-level field; -1 for unknown fields. */
static int expected_wire_type(uint32_t field)
{
    switch (field) {
    case F_ID:
    case F_TYPE:
    case F_PAYLOAD:
    case F_SOURCE:
    case F_HEADERS:
        return WT_LEN;
    case F_CREATED_AT_MS:
        return WT_VARINT;
    default:
        return -1;
    }
}

ib__wire_problem ib__wire_scan_event(ib__wire_scan *out, const uint8_t *buf, size_t len)
{
    size_t pos = 0;

    memset(out, 0, sizeof(*out));
    if (buf == NULL)
        len = 0;
    while (pos < len) {
        wire_field f;
        int expected;
        ib__wire_problem p = next_field(&f, buf, len, &pos);
        if (p != IB__WIRE_OK)
            return fail(out, p, f.start, f.number, 0);
        out->fields++;
        expected = expected_wire_type(f.number);
        if (expected < 0)
            continue;
        if ((unsigned)expected != f.wire_type)
            return fail(out, IB__WIRE_WRONG_TYPE, f.start, f.number, 0);
        switch (f.number) {
        case F_ID:
            p = check_string(&f, true);
            out->has_id = true;
            out->id = f.data;
            out->id_len = f.data_len;
            break;
        case F_TYPE:
            p = check_string(&f, false);
            out->has_type = true;
            out->type = f.data;
            out->type_len = f.data_len;
            break;
        case F_PAYLOAD:
            out->payload = f.data_len > 0 ? f.data : NULL;
            out->payload_len = f.data_len;
            break;
        case F_CREATED_AT_MS:
            out->created_at_ms = f.value;
            break;
        case F_SOURCE:
            p = check_string(&f, false);
            out->source = f.data_len > 0 ? f.data : NULL;
            out->source_len = f.data_len;
            break;
        case F_HEADERS:
            if (out->header_entries == 0)
                out->headers_at = f.start;
            out->header_index = out->header_entries++;
            if (scan_entry(out, buf, &f) != IB__WIRE_OK)
                return out->problem;
            break;
        default:
            break;
        }
        if (p != IB__WIRE_OK)
            return fail(out, p, f.start, f.number, 0);
    }
    out->header_index = 0;
    return IB__WIRE_OK;
}

/* Reads the entry in `f` (already checked by scan_entry). */
static void read_entry(ib__wire_header *out, const wire_field *f)
{
    size_t pos = 0;
    *out = (ib__wire_header){0};
    while (pos < f->data_len) {
        wire_field e;
        if (next_field(&e, f->data, f->data_len, &pos) != IB__WIRE_OK)
            return;
        if (e.wire_type != WT_LEN)
            continue;
        if (e.number == F_ENTRY_KEY) {
            out->key = e.data;
            out->key_len = e.data_len;
        } else if (e.number == F_ENTRY_VALUE) {
            out->value = e.data;
            out->value_len = e.data_len;
        }
    }
}

bool ib__wire_next_header(ib__wire_header *out, const uint8_t *buf, size_t len, size_t *pos)
{
    if (buf == NULL)
        return false;
    while (*pos < len) {
        wire_field f;
        if (next_field(&f, buf, len, pos) != IB__WIRE_OK)
            return false;
        if (f.number == F_HEADERS && f.wire_type == WT_LEN) {
            read_entry(out, &f);
            return true;
        }
    }
    return false;
}

const char *ib__wire_problem_str(ib__wire_problem problem)
{
    switch (problem) {
    case IB__WIRE_OK:
        return "ok";
    case IB__WIRE_TRUNCATED:
        return "truncated";
    case IB__WIRE_VARINT_TOO_LONG:
        return "varint too long";
    case IB__WIRE_BAD_FIELD_NUMBER:
        return "invalid field number";
    case IB__WIRE_GROUP:
        return "group wire type (3 or 4)";
    case IB__WIRE_BAD_WIRE_TYPE:
        return "invalid wire type (6 or 7)";
    case IB__WIRE_WRONG_TYPE:
        return "wrong wire type for this field";
    case IB__WIRE_BAD_UTF8:
        return "invalid UTF-8";
    case IB__WIRE_NUL:
        return "embedded NUL byte";
    }
    return "unknown problem";
}

const char *ib__wire_field_name(uint32_t field)
{
    switch (field) {
    case F_ID:
        return "id";
    case F_TYPE:
        return "type";
    case F_PAYLOAD:
        return "payload";
    case F_CREATED_AT_MS:
        return "created_at_ms";
    case F_SOURCE:
        return "source";
    case F_HEADERS:
        return "headers";
    default:
        return "unknown";
    }
}
