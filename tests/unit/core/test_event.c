/* SPDX-License-Identifier: Apache-2.0 */
/* Event decoding and validation: round trips and every class of refusal. */
#include "ib_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_letter.h"
#include "event.h"
#include "pb_builder.h"

#define ID "0f8fad5bd9cb469fa16570867728950e"
#define ID_DASHED_UPPER "0F8FAD5B-D9CB-469F-A165-70867728950E"

/* Result of one decode, with the error text for diagnostics. */
typedef struct decoded {
    ib_status st;
    ib_event_reject reject;
    ib_error err;
    ib_event *ev;
} decoded;

/* Decodes from an exact-size heap copy, so reading past the end is caught
 * by ASan and valgrind, and frees the copy before returning, so an event
 * that kept pointers into the input would be caught too. */
static decoded decode_with(const void *buf, size_t len, const ib_event_limits *limits)
{
    decoded d;
    uint8_t *copy = malloc(len > 0 ? len : 1);

    assert_non_null(copy);
    if (len > 0)
        memcpy(copy, buf, len);
    memset(&d, 0, sizeof(d));
    d.reject = (ib_event_reject)-1;
    d.st = ib_event_decode(&d.ev, &d.reject, copy, len, limits, &d.err);
    memset(copy, 0xee, len);
    free(copy);
    if (d.st == IB_OK) {
        assert_non_null(d.ev);
        assert_int_equal(d.reject, IB_EVENT_NOT_REJECTED);
        assert_int_equal(d.err.status, IB_OK);
    } else {
        assert_null(d.ev);
        assert_int_equal(d.err.status, d.st);
        assert_true(d.err.msg[0] != '\0');
    }
    return d;
}

static decoded decode_pb(const pb *b)
{
    return decode_with(b->buf, b->len, NULL);
}

/* Asserts a refusal: status, class, and that the message says `what`. */
#define assert_refused(d, status, cls, what)                                                       \
    do {                                                                                           \
        if ((d).st != (status) || (d).reject != (cls) || strstr((d).err.msg, (what)) == NULL)      \
            fail_msg("got status %d class %d msg '%s'; want status %d class %d msg with '%s'",     \
                     (int)(d).st, (int)(d).reject, (d).err.msg, (int)(status), (int)(cls),         \
                     (what));                                                                      \
    } while (0)

static const ib_event_header sample_headers[] = {
    {"content-type", "application/json"},
    {"trace-id", "abc123"},
    {"note", "caf\xc3\xa9 \xe2\x98\x95"},
};

static const uint8_t sample_payload[] = {0x00, 0x01, 0xff, 'p', 'a', 'y', 0x00, 0x80};

static ib_event_fields sample_fields(void)
{
    ib_event_fields f = {
        .id = ID,
        .type = "order.created",
        .payload = sample_payload,
        .payload_len = sizeof(sample_payload),
        .created_at_ms = 1700000000123,
        .source = "svc-orders",
        .headers = sample_headers,
        .header_count = 3,
    };
    return f;
}

static void assert_event_equals_fields(const ib_event *ev, const ib_event_fields *f)
{
    assert_string_equal(ev->id, f->id);
    assert_string_equal(ev->type, f->type);
    assert_int_equal(ev->payload_len, f->payload_len);
    if (f->payload_len > 0)
        assert_memory_equal(ev->payload, f->payload, f->payload_len);
    else
        assert_null(ev->payload);
    assert_int_equal(ev->created_at_ms, f->created_at_ms);
    assert_string_equal(ev->source, f->source != NULL ? f->source : "");
    assert_int_equal(ev->header_count, f->header_count);
    for (size_t i = 0; i < f->header_count; i++) {
        assert_string_equal(ev->headers[i].key, f->headers[i].key);
        assert_string_equal(ev->headers[i].value, f->headers[i].value);
    }
}

static void test_round_trip_all_fields(void **state)
{
    (void)state;
    ib_event_fields f = sample_fields();
    uint8_t *buf = NULL;
    size_t len = 0;
    ib_error err;
    decoded d;

    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_OK);
    assert_non_null(buf);
    assert_true(len > 0);
    d = decode_with(buf, len, NULL);
    assert_int_equal(d.st, IB_OK);
    assert_event_equals_fields(d.ev, &f);
    ib_event_free(d.ev);
    free(buf);
}

static void test_round_trip_minimal(void **state)
{
    (void)state;
    ib_event_fields f = {.id = ID, .type = "t"};
    uint8_t *buf = NULL;
    size_t len = 0;
    decoded d;

    assert_int_equal(ib_event_encode(&buf, &len, &f, NULL), IB_OK);
    d = decode_with(buf, len, NULL);
    assert_int_equal(d.st, IB_OK);
    assert_event_equals_fields(d.ev, &f);
    assert_null(d.ev->headers);
    assert_string_equal(d.ev->source, "");
    ib_event_free(d.ev);
    free(buf);
}

static void test_created_at_ms_preserved(void **state)
{
    (void)state;
    const int64_t values[] = {0, 1, -1, 1700000000123, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        ib_event_fields f = {.id = ID, .type = "t", .created_at_ms = values[i]};
        uint8_t *buf = NULL;
        size_t len = 0;
        decoded d;
        assert_int_equal(ib_event_encode(&buf, &len, &f, NULL), IB_OK);
        d = decode_with(buf, len, NULL);
        assert_int_equal(d.st, IB_OK);
        assert_true(d.ev->created_at_ms == values[i]);
        ib_event_free(d.ev);
        free(buf);
    }
}

static void test_empty_buffer(void **state)
{
    (void)state;
    decoded d = decode_with("", 0, NULL);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "empty message");

    /* NULL with length 0 is the same empty message. */
    ib_event *ev = (ib_event *)&d;
    ib_event_reject rej;
    ib_error err;
    assert_int_equal(ib_event_decode(&ev, &rej, NULL, 0, NULL, &err), IB_ERR_DECODE);
    assert_null(ev);
    assert_int_equal(rej, IB_EVENT_REJECT_DECODE);
}

/* Builds the sample event field by field, remembering where each field
 * ends, and checks the result is byte-for-byte what ib_event_encode makes
 * (protobuf-c writes fields in number order). */
static void build_sample(pb *b, size_t ends[9])
{
    ib_event_fields f = sample_fields();
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    size_t k = 0;

    pb_str(b, 1, f.id);
    ends[k++] = b->len;
    pb_str(b, 2, f.type);
    ends[k++] = b->len;
    pb_bytes(b, 3, f.payload, f.payload_len);
    ends[k++] = b->len;
    pb_key(b, 4, PB_VARINT);
    pb_varint(b, (uint64_t)f.created_at_ms);
    ends[k++] = b->len;
    pb_str(b, 5, f.source);
    ends[k++] = b->len;
    for (size_t i = 0; i < f.header_count; i++) {
        pb_entry(b, f.headers[i].key, strlen(f.headers[i].key), f.headers[i].value,
                 strlen(f.headers[i].value));
        ends[k++] = b->len;
    }
    assert_int_equal(k, 8);
    assert_int_equal(ib_event_encode(&enc, &enc_len, &f, NULL), IB_OK);
    assert_int_equal(enc_len, b->len);
    assert_memory_equal(enc, b->buf, enc_len);
    free(enc);
}

/* Every prefix of a valid encoding. A prefix that ends inside a field is
 * truncated protobuf: DECODE, "truncated". A prefix that ends between fields
 * is a valid shorter message: with only the id it lacks a type (DECODE,
 * "type is empty"); with the type it is a valid event holding exactly the
 * fields kept, the rest at their defaults. */
static void test_truncated_at_every_offset(void **state)
{
    (void)state;
    ib_event_fields full = sample_fields();
    pb b = {0};
    size_t ends[9];

    build_sample(&b, ends);
    for (size_t cut = 0; cut < b.len; cut++) {
        size_t kept = 0;
        bool boundary = false;
        decoded d;

        for (size_t k = 0; k < 8; k++) {
            if (ends[k] <= cut)
                kept = k + 1;
            if (ends[k] == cut)
                boundary = true;
        }
        d = decode_with(b.buf, cut, NULL);
        if (cut == 0) {
            assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "empty message");
        } else if (!boundary) {
            assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "truncated");
        } else if (kept == 1) {
            assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "type is empty");
        } else {
            ib_event_fields f = {.id = full.id, .type = full.type};
            if (d.st != IB_OK)
                fail_msg("cut at %zu: %s", cut, d.err.msg);
            if (kept >= 3) {
                f.payload = full.payload;
                f.payload_len = full.payload_len;
            }
            if (kept >= 4)
                f.created_at_ms = full.created_at_ms;
            if (kept >= 5)
                f.source = full.source;
            if (kept >= 6) {
                f.headers = full.headers;
                f.header_count = kept - 5;
            }
            assert_event_equals_fields(d.ev, &f);
        }
        ib_event_free(d.ev);
    }
    pb_free(&b);
}

static void test_garbage_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *bytes;
        size_t len;
        const char *what;
    } cases[] = {
        {"all 0xff", "\xff\xff\xff\xff\xff\xff\xff\xff", 8, "varint too long"},
        {"text", "hello world", 11, "field 13 (unknown) at byte 2: group"},
        {"zeros", "\0\0\0\0", 4, "at byte 0: invalid field number"},
        {"json", "{\"id\":\"x\"}", 10, "field 15 (unknown) at byte 0: group"},
        {"wire type 7", "\x0f", 1, "field 1 (id) at byte 0: invalid wire type"},
        {"lone key", "\x0a", 1, "field 1 (id) at byte 0: truncated"},
        {"length past end",
         "\x0a\x05"
         "ab",
         4, "field 1 (id) at byte 0: truncated"},
        {"unterminated varint", "\x20\x80\x80", 3, "field 4 (created_at_ms) at byte 0: truncated"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        decoded d = decode_with(cases[i].bytes, cases[i].len, NULL);
        if (d.st != IB_ERR_DECODE || d.reject != IB_EVENT_REJECT_DECODE ||
            strstr(d.err.msg, cases[i].what) == NULL)
            fail_msg("case '%s': status %d class %d msg '%s'", cases[i].name, (int)d.st,
                     (int)d.reject, d.err.msg);
        assert_non_null(strstr(d.err.msg, "not a protobuf Event"));
    }

    /* Random bytes never crash, and a refusal always has a class. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int rounds = getenv("IB_UNDER_VALGRIND") != NULL ? 300 : 3000;
    for (int r = 0; r < rounds; r++) {
        uint8_t buf[64];
        size_t len = (size_t)(r % 64) + 1;
        for (size_t j = 0; j < len; j++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[j] = (uint8_t)x;
        }
        decoded d = decode_with(buf, len, NULL);
        if (d.st == IB_OK) {
            assert_true(ib_id_is_normalised(d.ev->id));
            ib_event_free(d.ev);
        } else {
            assert_true(d.reject == IB_EVENT_REJECT_DECODE ||
                        d.reject == IB_EVENT_REJECT_INVALID_ID);
        }
    }
}

static void test_oversized(void **state)
{
    (void)state;
    ib_event_fields f = sample_fields();
    uint8_t *buf = NULL;
    size_t len = 0;
    ib_event_limits limits = {0};
    char want[128];
    decoded d;

    assert_int_equal(ib_event_encode(&buf, &len, &f, NULL), IB_OK);
    limits.max_bytes = len - 1;
    d = decode_with(buf, len, &limits);
    snprintf(want, sizeof(want), "message is %zu bytes, over the limit of %zu bytes", len, len - 1);
    assert_refused(d, IB_ERR_TOO_LARGE, IB_EVENT_REJECT_DECODE, want);
    limits.max_bytes = len;
    d = decode_with(buf, len, &limits);
    assert_int_equal(d.st, IB_OK);
    ib_event_free(d.ev);
    free(buf);

    /* The default limit is NATS' 1 MiB; one byte more is refused unread. */
    size_t big = IB_EVENT_DEFAULT_MAX_BYTES + 1;
    uint8_t *huge = calloc(1, big);
    assert_non_null(huge);
    ib_event *ev = NULL;
    ib_event_reject rej = IB_EVENT_NOT_REJECTED;
    ib_error err;
    assert_int_equal(ib_event_decode(&ev, &rej, huge, big, NULL, &err), IB_ERR_TOO_LARGE);
    assert_int_equal(rej, IB_EVENT_REJECT_DECODE);
    assert_null(ev);
    free(huge);
}

/* Invalid UTF-8 sequences: lone continuation, overlong, surrogate, above
 * U+10FFFF, truncated. */
static const char *const bad_utf8[] = {"a\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                       "ok\xe2\x82"};

static void test_invalid_utf8_in_id(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
        pb b = {0};
        char id[40];
        /* A 32-byte id of hex digits with the bad sequence at its end. */
        size_t n = strlen(bad_utf8[i]);
        memcpy(id, ID, 32 - n);
        memcpy(id + 32 - n, bad_utf8[i], n);
        pb_bytes(&b, 1, id, 32);
        pb_str(&b, 2, "t");
        decoded d = decode_pb(&b);
        assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                       "field 1 (id) at byte 0: invalid UTF-8");
        pb_free(&b);
    }
}

static void test_invalid_utf8_in_type(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(bad_utf8[0]); i++) {
        pb b = {0};
        pb_str(&b, 1, ID);
        pb_str(&b, 2, bad_utf8[i]);
        decoded d = decode_pb(&b);
        assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                       "field 2 (type) at byte 34: invalid UTF-8");
        pb_free(&b);
    }
}

static void test_invalid_utf8_in_source(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_str(&b, 5, "svc\xff");
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "field 5 (source) at byte 37: invalid UTF-8");
    pb_free(&b);
}

static void test_invalid_utf8_in_header_key_and_value(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_entry(&b, "k", 1, "v", 1);
    pb_entry(&b, "k\xc3", 2, "v", 1);
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "headers entry 1, key, at byte 47: invalid UTF-8");
    pb_free(&b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_entry(&b, "k", 1, "\xed\xbf\xbf", 3);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "headers entry 0, value, at byte 42: invalid UTF-8");
    pb_free(&b);
}

/* protobuf-c would cut the id at the NUL and see a valid uuid. */
static void test_nul_in_id(void **state)
{
    (void)state;
    pb b = {0};
    pb_bytes(&b, 1, ID "\0junk", 37);
    pb_str(&b, 2, "t");
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID,
                   "id is malformed (37 bytes): length is neither 32 nor 36 characters");
    pb_free(&b);

    char id[32];
    memcpy(id, ID, 32);
    id[20] = '\0';
    pb_bytes(&b, 1, id, 32);
    pb_str(&b, 2, "t");
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID,
                   "id is malformed (32 bytes): contains a byte that is not a hex digit");
    pb_free(&b);
}

static void test_nul_in_type_source_and_headers(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, ID);
    pb_bytes(&b, 2, "order\0created", 13);
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "field 2 (type) at byte 34: embedded NUL byte");
    pb_free(&b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_bytes(&b, 5, "a\0", 2);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "field 5 (source) at byte 37: embedded NUL byte");
    pb_free(&b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_entry(&b, "\0", 1, "v", 1);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "headers entry 0, key, at byte 39: embedded NUL byte");
    pb_free(&b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_entry(&b, "k", 1, "v\0", 2);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "headers entry 0, value, at byte 42: embedded NUL byte");
    pb_free(&b);
}

static void test_missing_id(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 2, "order.created");
    pb_bytes(&b, 3, "payload", 7);
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID, "id is missing");
    pb_free(&b);

    /* An explicitly empty id is missing too. */
    pb_bytes(&b, 1, "", 0);
    pb_str(&b, 2, "order.created");
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID, "id is missing");
    pb_free(&b);
}

static void test_malformed_id_message(void **state)
{
    (void)state;
    pb b = {0};
    /* Also checks the message quotes nothing from the input. */
    pb_str(&b, 1, "secret-0f8fad5bd9cb469fa165708677");
    pb_str(&b, 2, "t");
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID,
                   "id is malformed (33 bytes): length is neither 32 nor 36 characters");
    assert_null(strstr(d.err.msg, "secret"));
    pb_free(&b);

    pb_str(&b, 1, "0f8fad5bd9cb569fa16570867728950e");
    pb_str(&b, 2, "t");
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID,
                   "id is a UUID version 5, not one of the accepted versions 4,8");
    pb_free(&b);

    pb_str(&b, 1, "0f8fad5bd9cb469fc16570867728950e");
    pb_str(&b, 2, "t");
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID,
                   "id is malformed (32 bytes): variant is not RFC 4122");
    pb_free(&b);
}

static void test_id_normalised_on_decode(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, ID_DASHED_UPPER);
    pb_str(&b, 2, "t");
    decoded d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_string_equal(d.ev->id, ID);
    ib_event_free(d.ev);
    pb_free(&b);
}

static void test_any_version_opt_in(void **state)
{
    (void)state;
    ib_event_limits limits = {.id_flags = IB_ID_ANY_VERSION};
    pb b = {0};
    pb_str(&b, 1, "018F3C5E7D2A7B3C8D4E5F60718293A4"); /* a uuid7 */
    pb_str(&b, 2, "t");
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID,
                   "id is a UUID version 7, not one of the accepted versions 4,8");
    d = decode_with(b.buf, b.len, &limits);
    assert_int_equal(d.st, IB_OK);
    assert_string_equal(d.ev->id, "018f3c5e7d2a7b3c8d4e5f60718293a4");
    ib_event_free(d.ev);
    pb_free(&b);
}

static void test_wrong_wire_types(void **state)
{
    (void)state;
    static const struct {
        uint32_t field;
        unsigned wire_type;
        const char *what;
    } cases[] = {
        {1, PB_VARINT, "field 1 (id) at byte 34: wrong wire type"},
        {2, PB_I32, "field 2 (type) at byte 34: wrong wire type"},
        {3, PB_I64, "field 3 (payload) at byte 34: wrong wire type"},
        {4, PB_LEN, "field 4 (created_at_ms) at byte 34: wrong wire type"},
        {5, PB_VARINT, "field 5 (source) at byte 34: wrong wire type"},
        {6, PB_I32, "field 6 (headers) at byte 34: wrong wire type"},
        {9, PB_SGROUP, "field 9 (unknown) at byte 34: group"},
        {9, PB_EGROUP, "field 9 (unknown) at byte 34: group"},
        {9, 6, "field 9 (unknown) at byte 34: invalid wire type"},
        {9, 7, "field 9 (unknown) at byte 34: invalid wire type"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pb b = {0};
        pb_str(&b, 1, ID);
        pb_key(&b, cases[i].field, cases[i].wire_type);
        /* Enough well-formed bytes after the key for any wire type. */
        pb_raw(&b, "\x01\x00\x00\x00\x00\x00\x00\x00", 8);
        pb_str(&b, 2, "t");
        decoded d = decode_pb(&b);
        if (d.st != IB_ERR_DECODE || d.reject != IB_EVENT_REJECT_DECODE ||
            strstr(d.err.msg, cases[i].what) == NULL)
            fail_msg("field %u wire type %u: status %d msg '%s'", (unsigned)cases[i].field,
                     cases[i].wire_type, (int)d.st, d.err.msg);
        pb_free(&b);
    }

    /* Inside a headers entry, the key must be a string too. */
    pb b = {0};
    pb inner = {0};
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_key(&inner, 1, PB_VARINT);
    pb_varint(&inner, 5);
    pb_bytes(&b, 6, inner.buf, inner.len);
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE,
                   "headers entry 0, key, at byte 39: wrong wire type");
    pb_free(&inner);
    pb_free(&b);

    /* Field number 0 is never valid. */
    pb_str(&b, 1, ID);
    pb_key(&b, 0, PB_VARINT);
    pb_varint(&b, 1);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "at byte 34: invalid field number");
    pb_free(&b);
}

static void test_unknown_fields_skipped(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, ID);
    pb_str(&b, 7, "a newer producer's field");
    pb_key(&b, 100, PB_I64);
    pb_raw(&b, "12345678", 8);
    pb_key(&b, 101, PB_I32);
    pb_raw(&b, "1234", 4);
    pb_key(&b, 0x1fffffffu, PB_VARINT);
    pb_varint(&b, UINT64_MAX);
    pb_str(&b, 2, "t");
    decoded d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_string_equal(d.ev->id, ID);
    assert_string_equal(d.ev->type, "t");
    ib_event_free(d.ev);
    pb_free(&b);
}

/* A repeated singular field keeps its last value, as protobuf says. */
static void test_last_occurrence_wins(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, "not-an-id");
    pb_str(&b, 2, "first.type");
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "second.type");
    decoded d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_string_equal(d.ev->id, ID);
    assert_string_equal(d.ev->type, "second.type");
    ib_event_free(d.ev);
    pb_free(&b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_str(&b, 1, "not-an-id");
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_INVALID_ID, IB_EVENT_REJECT_INVALID_ID, "id is malformed (9 bytes)");
    pb_free(&b);
}

/* What protobuf-c's unpack settled before the scan became the only parse:
 * the last payload, time and source win; a ten-byte varint time is a
 * negative int64; inside a headers entry the last key and value win and
 * unknown fields are skipped. */
static void test_single_parse_semantics(void **state)
{
    (void)state;
    pb b = {0}, e = {0};
    pb_str(&b, 3, "first payload");
    pb_key(&b, 4, 0);
    pb_varint(&b, 1700000000000u);
    pb_str(&b, 5, "first source");
    pb_str(&e, 1, "k-old");
    pb_key(&e, 7, 5); /* unknown fixed32 inside the entry */
    pb_raw(&e, "\x01\x02\x03\x04", 4);
    pb_str(&e, 2, "v-old");
    pb_str(&e, 1, "k");
    pb_str(&e, 2, "v");
    pb_bytes(&b, 6, e.buf, e.len);
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_bytes(&b, 3, "\x00p\x00", 3);
    pb_key(&b, 4, 0);
    pb_varint(&b, (uint64_t)-42);
    pb_str(&b, 5, "src");
    decoded d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_int_equal(d.ev->payload_len, 3);
    assert_memory_equal(d.ev->payload, "\x00p\x00", 3);
    assert_int_equal(d.ev->created_at_ms, -42);
    assert_string_equal(d.ev->source, "src");
    assert_int_equal(d.ev->header_count, 1);
    assert_string_equal(d.ev->headers[0].key, "k");
    assert_string_equal(d.ev->headers[0].value, "v");
    ib_event_free(d.ev);
    pb_free(&b);

    /* An empty last payload clears an earlier one. */
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_str(&b, 3, "x");
    pb_bytes(&b, 3, "", 0);
    d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_null(d.ev->payload);
    assert_int_equal(d.ev->payload_len, 0);
    assert_string_equal(d.ev->source, "");
    assert_null(d.ev->headers);
    ib_event_free(d.ev);
    pb_free(&b);
    pb_free(&e);
}

/* The budget counts the event's one block: a large payload fits the
 * default budget, and the smallest budget that takes an event is a sharp
 * line (one byte less refuses it). */
static void test_budget_counts_the_block(void **state)
{
    (void)state;
    pb b = {0};
    static uint8_t big[512 * 1024];
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_bytes(&b, 3, big, sizeof(big));
    decoded d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_int_equal(d.ev->payload_len, sizeof(big));
    ib_event_free(d.ev);
    pb_free(&b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    size_t lo = 1, hi = 4096;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        ib_event_limits l = {.max_alloc = mid};
        d = decode_with(b.buf, b.len, &l);
        ib_event_free(d.ev);
        if (d.st == IB_OK)
            hi = mid;
        else
            lo = mid + 1;
    }
    ib_event_limits at = {.max_alloc = lo}, below = {.max_alloc = lo - 1};
    d = decode_with(b.buf, b.len, &at);
    assert_int_equal(d.st, IB_OK);
    ib_event_free(d.ev);
    d = decode_with(b.buf, b.len, &below);
    assert_refused(d, IB_ERR_TOO_LARGE, IB_EVENT_REJECT_DECODE, "memory budget");
    assert_true(lo > sizeof(ib_event));
    pb_free(&b);
}

static void test_duplicate_header_keys(void **state)
{
    (void)state;
    pb b = {0};
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_entry(&b, "a", 1, "1", 1);
    pb_entry(&b, "b", 1, "2", 1);
    pb_entry(&b, "a", 1, "3", 1);
    pb_entry(&b, "c", 1, "4", 1);
    pb_entry(&b, "b", 1, "5", 1);
    decoded d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_int_equal(d.ev->header_count, 3);
    assert_string_equal(d.ev->headers[0].key, "a");
    assert_string_equal(d.ev->headers[0].value, "3");
    assert_string_equal(d.ev->headers[1].key, "c");
    assert_string_equal(d.ev->headers[1].value, "4");
    assert_string_equal(d.ev->headers[2].key, "b");
    assert_string_equal(d.ev->headers[2].value, "5");
    ib_event_free(d.ev);
    pb_free(&b);

    /* An entry without key or value gives "" for the missing part. */
    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_bytes(&b, 6, "", 0);
    d = decode_pb(&b);
    assert_int_equal(d.st, IB_OK);
    assert_int_equal(d.ev->header_count, 1);
    assert_string_equal(d.ev->headers[0].key, "");
    assert_string_equal(d.ev->headers[0].value, "");
    ib_event_free(d.ev);
    pb_free(&b);
}

static void test_type_rule(void **state)
{
    (void)state;
    static const struct {
        const char *type;
        size_t bad_at; /* SIZE_MAX = accepted */
    } cases[] = {
        {"order.created", SIZE_MAX},
        {"Order_Created-v2:x/y", SIZE_MAX},
        {"\xe8\xae\xa2\xe5\x8d\x95.\xe5\x88\x9b\xe5\xbb\xba", SIZE_MAX}, /* CJK is fine */
        {"order created", 5},
        {" order", 0},
        {"order\t", 5},
        {"order\n", 5},
        {"a\x7f", 1},
        {"a\xc2\x85", 1},  /* U+0085 next line */
        {"ab\xc2\xa0", 2}, /* U+00A0 no-break space */
        {"a\xe2\x80\x8b"
         "b",
         1},                  /* U+200B zero-width space */
        {"a\xe2\x80\xa8", 1}, /* U+2028 line separator */
        {"\xef\xbb\xbf"
         "a",
         0},                  /* U+FEFF byte order mark */
        {"x\xe3\x80\x80", 1}, /* U+3000 ideographic space */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pb b = {0};
        char want[96];
        pb_str(&b, 1, ID);
        pb_str(&b, 2, cases[i].type);
        decoded d = decode_pb(&b);
        if (cases[i].bad_at == SIZE_MAX) {
            if (d.st != IB_OK)
                fail_msg("type case %zu refused: %s", i, d.err.msg);
            assert_string_equal(d.ev->type, cases[i].type);
            ib_event_free(d.ev);
        } else {
            snprintf(want, sizeof(want),
                     "type has a control, space or invisible character at byte %zu",
                     cases[i].bad_at);
            assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, want);
        }
        pb_free(&b);
    }

    /* Missing and empty types. */
    pb b = {0};
    pb_str(&b, 1, ID);
    decoded d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "type is empty");
    pb_bytes(&b, 2, "", 0);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "type is empty");
    pb_free(&b);

    /* A message with neither type nor id is undecodable before it is
     * an id problem. */
    pb_bytes(&b, 3, "x", 1);
    d = decode_pb(&b);
    assert_refused(d, IB_ERR_DECODE, IB_EVENT_REJECT_DECODE, "type is empty");
    pb_free(&b);
}

/* Many empty header entries are cheap on the wire (2 bytes each) and dear
 * to unpack (a struct, a pointer and a scan slot each). The default budget
 * refuses such a message although it is within the size limit; a larger
 * budget accepts the same bytes, so the refusal is the budget's doing. */
static void test_allocation_budget(void **state)
{
    (void)state;
    const size_t entries = 20000;
    ib_event_limits generous = {.max_alloc = 64u * 1024u * 1024u};
    ib_event_limits tiny = {.max_alloc = 64};
    char want[128];
    pb b = {0};
    decoded d;

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    for (size_t i = 0; i < entries; i++)
        pb_bytes(&b, 6, "", 0);
    assert_true(b.len < IB_EVENT_DEFAULT_MAX_BYTES);
    d = decode_pb(&b);
    snprintf(want, sizeof(want),
             "unpacking this %zu-byte message needs more than its memory budget of %zu bytes",
             b.len, IB_EVENT_ALLOC_BUDGET(b.len));
    assert_refused(d, IB_ERR_TOO_LARGE, IB_EVENT_REJECT_DECODE, want);

    d = decode_with(b.buf, b.len, &generous);
    assert_int_equal(d.st, IB_OK);
    assert_int_equal(d.ev->header_count, 1); /* all keys were "" */
    ib_event_free(d.ev);
    pb_free(&b);

    /* A tiny budget refuses even a small, ordinary event. */
    ib_event_fields f = sample_fields();
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(ib_event_encode(&buf, &len, &f, NULL), IB_OK);
    d = decode_with(buf, len, &tiny);
    assert_refused(d, IB_ERR_TOO_LARGE, IB_EVENT_REJECT_DECODE, "memory budget of 64 bytes");
    d = decode_with(buf, len, NULL);
    assert_int_equal(d.st, IB_OK);
    ib_event_free(d.ev);
    free(buf);
}

static void test_reject_names_and_free_null(void **state)
{
    (void)state;
    /* The names are the Ibus-Reason header and metric label values. */
    assert_string_equal(ib_dead_letter_reason_str(IB_DLQ_DECODE), "decode");
    assert_string_equal(ib_dead_letter_reason_str(IB_DLQ_INVALID_ID), "invalid-id");
    assert_string_equal(ib_dead_letter_reason_str(IB_DLQ_MAX_DELIVER), "max-deliver");
    assert_string_equal(ib_dead_letter_reason_str(IB_DLQ_REJECTED), "rejected");
    assert_string_equal(ib_dead_letter_reason_str(IB_DLQ_OTHER), "other");
    assert_string_equal(ib_dead_letter_reason_str((ib_dead_letter_reason)42), "other");
    ib_event_free(NULL);
}

static void test_decode_bad_arguments(void **state)
{
    (void)state;
    ib_event_reject rej = IB_EVENT_REJECT_DECODE;
    ib_event *ev = NULL;
    ib_error err;
    assert_int_equal(ib_event_decode(NULL, &rej, "x", 1, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(rej, IB_EVENT_NOT_REJECTED);
    assert_int_equal(ib_event_decode(&ev, &rej, NULL, 5, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(rej, IB_EVENT_NOT_REJECTED);
    assert_null(ev);
    /* reject and err are optional. */
    assert_int_equal(ib_event_decode(&ev, NULL, "", 0, NULL, NULL), IB_ERR_DECODE);
}

static void test_encode_refusals(void **state)
{
    (void)state;
    static const ib_event_header bad_value[] = {{"k", "\xff"}};
    static const ib_event_header null_value[] = {{"k", NULL}};
    ib_event_fields base = {.id = ID, .type = "t"};
    ib_event_fields f;
    uint8_t *buf = (uint8_t *)"sentinel";
    size_t len = 99;
    ib_error err;

    f = base;
    f.type = NULL;
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    assert_null(buf);
    assert_int_equal(len, 0);
    f = base;
    f.type = "";
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    f = base;
    f.type = "has space";
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "type"));
    f = base;
    f.id = NULL;
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    f = base;
    f.source = "\xc0\x80";
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    f = base;
    f.payload_len = 3;
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    f = base;
    f.headers = bad_value;
    f.header_count = 1;
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "header 0"));
    f.headers = null_value;
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    f.headers = NULL;
    assert_int_equal(ib_event_encode(&buf, &len, &f, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_event_encode(&buf, &len, NULL, &err), IB_ERR_INVALID_ARG);
    assert_int_equal(ib_event_encode(NULL, &len, &base, &err), IB_ERR_INVALID_ARG);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_round_trip_all_fields),
    cmocka_unit_test(test_round_trip_minimal),
    cmocka_unit_test(test_created_at_ms_preserved),
    cmocka_unit_test(test_empty_buffer),
    cmocka_unit_test(test_truncated_at_every_offset),
    cmocka_unit_test(test_garbage_bytes),
    cmocka_unit_test(test_oversized),
    cmocka_unit_test(test_invalid_utf8_in_id),
    cmocka_unit_test(test_invalid_utf8_in_type),
    cmocka_unit_test(test_invalid_utf8_in_source),
    cmocka_unit_test(test_invalid_utf8_in_header_key_and_value),
    cmocka_unit_test(test_nul_in_id),
    cmocka_unit_test(test_nul_in_type_source_and_headers),
    cmocka_unit_test(test_missing_id),
    cmocka_unit_test(test_malformed_id_message),
    cmocka_unit_test(test_id_normalised_on_decode),
    cmocka_unit_test(test_any_version_opt_in),
    cmocka_unit_test(test_wrong_wire_types),
    cmocka_unit_test(test_unknown_fields_skipped),
    cmocka_unit_test(test_last_occurrence_wins),
    cmocka_unit_test(test_single_parse_semantics),
    cmocka_unit_test(test_budget_counts_the_block),
    cmocka_unit_test(test_duplicate_header_keys),
    cmocka_unit_test(test_type_rule),
    cmocka_unit_test(test_allocation_budget),
    cmocka_unit_test(test_reject_names_and_free_null),
    cmocka_unit_test(test_decode_bad_arguments),
    cmocka_unit_test(test_encode_refusals),
};

IB_TEST_MAIN(tests)
