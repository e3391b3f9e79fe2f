/* SPDX-License-Identifier: Apache-2.0 */
/* Strict UTF-8 and the raw wire scanner, below the decoder. */
#include "ib_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_builder.h"
#include "utf8.h"
#include "wire.h"

#define LIT(s) s, sizeof(s) - 1

/* Runs the validator on an exact-size heap copy so over-reads are caught. */
static bool utf8_valid_exact(const char *s, size_t len)
{
    char *copy = malloc(len > 0 ? len : 1);
    bool ok;
    assert_non_null(copy);
    memcpy(copy, s, len);
    ok = ib__utf8_valid(copy, len);
    free(copy);
    return ok;
}

static void test_utf8_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t len;
        bool valid;
    } cases[] = {
        {LIT(""), true},
        {LIT("plain ascii"), true},
        {LIT("\0nul is valid UTF-8"), true},
        {LIT("\x7f"), true},
        {LIT("\xc2\x80"), true},         /* U+0080 */
        {LIT("\xdf\xbf"), true},         /* U+07FF */
        {LIT("\xe0\xa0\x80"), true},     /* U+0800 */
        {LIT("\xed\x9f\xbf"), true},     /* U+D7FF */
        {LIT("\xee\x80\x80"), true},     /* U+E000 */
        {LIT("\xef\xbf\xbf"), true},     /* U+FFFF */
        {LIT("\xf0\x90\x80\x80"), true}, /* U+10000 */
        {LIT("\xf4\x8f\xbf\xbf"), true}, /* U+10FFFF */
        {LIT("caf\xc3\xa9"), true},
        {LIT("\x80"), false}, /* lone continuation */
        {LIT("\xbf"), false},
        {LIT("\xc0\x80"), false},         /* overlong NUL */
        {LIT("\xc1\xbf"), false},         /* overlong */
        {LIT("\xe0\x9f\xbf"), false},     /* overlong 3-byte */
        {LIT("\xf0\x8f\xbf\xbf"), false}, /* overlong 4-byte */
        {LIT("\xed\xa0\x80"), false},     /* U+D800 surrogate */
        {LIT("\xed\xbf\xbf"), false},     /* U+DFFF surrogate */
        {LIT("\xf4\x90\x80\x80"), false}, /* U+110000 */
        {LIT("\xf5\x80\x80\x80"), false},
        {LIT("\xff"), false},
        {LIT("\xfe"), false},
        {LIT("\xc2"), false},         /* truncated */
        {LIT("\xe2\x82"), false},     /* truncated */
        {LIT("\xf0\x9f\x98"), false}, /* truncated */
        {LIT("\xc2\x41"), false},     /* bad continuation */
        {LIT("\xe2\x28\xa1"), false},
        {LIT("\xf0\x9f\x98\x28"), false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (utf8_valid_exact(cases[i].s, cases[i].len) != cases[i].valid)
            fail_msg("utf8 case %zu: expected %s", i, cases[i].valid ? "valid" : "invalid");
    }
    assert_true(ib__utf8_valid(NULL, 0));
}

/* The validator skips ASCII in 8-byte words: a bad byte must be found at
 * every position and alignment, and a good sequence straddling a word
 * boundary must pass. */
static void test_utf8_every_position(void **state)
{
    (void)state;
    char buf[48];
    for (size_t len = 1; len <= sizeof(buf); len++) {
        for (size_t pos = 0; pos < len; pos++) {
            memset(buf, 'a', len);
            buf[pos] = (char)0xff;
            assert_false(utf8_valid_exact(buf, len));
            if (pos + 2 <= len) {
                buf[pos] = (char)0xc3;
                buf[pos + 1] = (char)0xa9;
                assert_true(utf8_valid_exact(buf, len));
            }
        }
    }
}

static void test_utf8_decode(void **state)
{
    (void)state;
    uint32_t cp = 7;
    assert_int_equal(ib__utf8_decode(&cp, (const uint8_t *)"A", 1), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(ib__utf8_decode(&cp, (const uint8_t *)"\xe2\x82\xac", 3), 3);
    assert_int_equal(cp, 0x20ac);
    assert_int_equal(ib__utf8_decode(&cp, (const uint8_t *)"\xf4\x8f\xbf\xbf", 4), 4);
    assert_int_equal(cp, 0x10ffff);
    cp = 7;
    /* Available length counts: a full sequence cut by `len` is refused. */
    assert_int_equal(ib__utf8_decode(&cp, (const uint8_t *)"\xe2\x82\xac", 2), 0);
    assert_int_equal(ib__utf8_decode(&cp, (const uint8_t *)"x", 0), 0);
    assert_int_equal(cp, 7);
}

/* Scans an exact-size heap copy of `b`. */
static ib__wire_problem scan_exact(ib__wire_scan *out, const pb *b)
{
    uint8_t *copy = malloc(b->len > 0 ? b->len : 1);
    ib__wire_problem p;
    assert_non_null(copy);
    if (b->len > 0)
        memcpy(copy, b->buf, b->len);
    p = ib__wire_scan_event(out, copy, b->len);
    /* Pointers in `out` point into the copy; only compare offsets after. */
    if (out->has_id)
        out->id = (const uint8_t *)(uintptr_t)(out->id - copy);
    if (out->has_type)
        out->type = (const uint8_t *)(uintptr_t)(out->type - copy);
    free(copy);
    return p;
}

static void test_scan_records_last_id_and_type(void **state)
{
    (void)state;
    pb b = {0};
    ib__wire_scan s;

    pb_str(&b, 1, "first");
    pb_str(&b, 2, "type.one");
    pb_entry(&b, "k", 1, "v", 1);
    pb_str(&b, 1, "second-id"); /* at offset 7 + 10 + 8 = 25 */
    pb_entry(&b, "k2", 2, "v2", 2);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_OK);
    assert_true(s.has_id);
    assert_int_equal((uintptr_t)s.id, 27);
    assert_int_equal(s.id_len, 9);
    assert_true(s.has_type);
    assert_int_equal((uintptr_t)s.type, 9);
    assert_int_equal(s.type_len, 8);
    assert_int_equal(s.header_entries, 2);
    assert_int_equal(s.fields, 5);
    pb_free(&b);

    assert_int_equal(ib__wire_scan_event(&s, NULL, 0), IB__WIRE_OK);
    assert_false(s.has_id);
    assert_false(s.has_type);
    assert_int_equal(s.fields, 0);
}

/* The scan is the decoder's only parse: it keeps the last payload, time
 * and source, and sizes the headers by each entry's last key and value. */
static void test_scan_records_every_field(void **state)
{
    (void)state;
    pb b = {0};
    ib__wire_scan s;

    pb_str(&b, 3, "old payload");
    pb_key(&b, 4, 0);
    pb_varint(&b, 5);
    pb_str(&b, 5, "src-one");
    pb_str(&b, 3, "pay"); /* key at 0 + 13 + 2 + 9 = 24, data at 26 */
    pb_key(&b, 4, 0);
    pb_varint(&b, UINT64_MAX);     /* -1 as int64: ten bytes */
    pb_entry(&b, "k", 1, "vv", 2); /* at 29 + 11 = 40 */
    pb_str(&b, 5, "");
    pb_entry(&b, "", 0, "", 0);
    assert_int_equal(ib__wire_scan_event(&s, b.buf, b.len), IB__WIRE_OK);
    assert_ptr_equal(s.payload, b.buf + 26);
    assert_int_equal(s.payload_len, 3);
    assert_int_equal(s.created_at_ms, UINT64_MAX);
    assert_null(s.source); /* the last source is empty */
    assert_int_equal(s.source_len, 0);
    assert_int_equal(s.header_entries, 2);
    assert_int_equal(s.headers_at, 40);
    assert_int_equal(s.header_bytes, 3);
    pb_free(&b);

    /* Absent fields read as protobuf's defaults. */
    pb_str(&b, 2, "t");
    assert_int_equal(ib__wire_scan_event(&s, b.buf, b.len), IB__WIRE_OK);
    assert_null(s.payload);
    assert_int_equal(s.payload_len, 0);
    assert_int_equal(s.created_at_ms, 0);
    assert_null(s.source);
    assert_int_equal(s.header_entries, 0);
    assert_int_equal(s.header_bytes, 0);
    pb_free(&b);
}

/* ib__wire_next_header on odd entries: a key or value given twice keeps
 * the last, a missing one is empty, unknown fields inside are skipped, and
 * entries between other fields are all found. */
static void test_next_header_odd_entries(void **state)
{
    (void)state;
    pb b = {0}, e = {0};
    ib__wire_scan s;
    ib__wire_header h;

    pb_str(&e, 1, "k1");
    pb_str(&e, 2, "v1");
    pb_str(&e, 1, "key");
    pb_key(&e, 9, 0); /* unknown varint field */
    pb_varint(&e, 300);
    pb_str(&e, 2, "value");
    pb_str(&b, 2, "t");
    pb_bytes(&b, 6, e.buf, e.len);
    pb_str(&b, 1, "id");
    pb_bytes(&b, 6, "\x0a\x01x", 3); /* key only */
    pb_bytes(&b, 6, "", 0);          /* neither */
    pb_bytes(&b, 6, "\x12\x01y", 3); /* value only */
    assert_int_equal(ib__wire_scan_event(&s, b.buf, b.len), IB__WIRE_OK);
    assert_int_equal(s.header_entries, 4);
    assert_int_equal(s.header_bytes, 3 + 5 + 1 + 1);

    size_t pos = s.headers_at;
    static const char *const want[4][2] = {{"key", "value"}, {"x", ""}, {"", ""}, {"", "y"}};
    for (size_t i = 0; i < 4; i++) {
        assert_true(ib__wire_next_header(&h, b.buf, b.len, &pos));
        assert_int_equal(h.key_len, strlen(want[i][0]));
        assert_int_equal(h.value_len, strlen(want[i][1]));
        assert_memory_equal(h.key_len > 0 ? (const char *)h.key : "", want[i][0], h.key_len);
        assert_memory_equal(h.value_len > 0 ? (const char *)h.value : "", want[i][1], h.value_len);
    }
    assert_false(ib__wire_next_header(&h, b.buf, b.len, &pos));
    assert_false(ib__wire_next_header(&h, NULL, 0, &pos));
    /* On bytes the scan would refuse it stops, inside the buffer. */
    pos = 0;
    assert_false(ib__wire_next_header(&h, (const uint8_t *)"\x32\x7f", 2, &pos));
    pb_free(&e);
    pb_free(&b);
}

static void test_scan_id_may_hold_nul(void **state)
{
    (void)state;
    pb b = {0};
    ib__wire_scan s;
    pb_bytes(&b, 1, "ab\0cd", 5);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_OK);
    assert_int_equal(s.id_len, 5);
    pb_free(&b);
}

static void test_scan_varint_limits(void **state)
{
    (void)state;
    pb b = {0};
    ib__wire_scan s;

    /* A 10-byte varint (a negative int64) is fine; 11 bytes are not. */
    pb_key(&b, 4, PB_VARINT);
    pb_varint(&b, UINT64_MAX);
    assert_int_equal(b.len, 11);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_OK);
    pb_free(&b);
    pb_key(&b, 4, PB_VARINT);
    pb_raw(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_VARINT_TOO_LONG);
    assert_int_equal(s.field, 4);
    pb_free(&b);

    /* Keys are at most 5 bytes. */
    pb_raw(&b, "\x88\x80\x80\x80\x80\x00", 6);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_VARINT_TOO_LONG);
    pb_free(&b);

    /* The largest field number is accepted (and skipped); one more is not. */
    pb_key(&b, IB__WIRE_MAX_FIELD, PB_I32);
    pb_raw(&b, "abcd", 4);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_OK);
    pb_free(&b);
    pb_varint(&b, ((uint64_t)IB__WIRE_MAX_FIELD + 1) << 3);
    pb_raw(&b, "\x00", 1);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_BAD_FIELD_NUMBER);
    pb_free(&b);

    /* Lengths are at most 5 bytes, and 2^32 is not read as 0 (protobuf-c
     * keeps only 32 bits of a length). */
    pb_key(&b, 3, PB_LEN);
    pb_raw(&b, "\x80\x80\x80\x80\x80\x00", 6);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_VARINT_TOO_LONG);
    pb_free(&b);
    pb_key(&b, 3, PB_LEN);
    pb_raw(&b, "\x80\x80\x80\x80\x10", 5);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_TRUNCATED);
    pb_free(&b);

    /* A non-minimal length encoding still reads the same length. */
    pb_key(&b, 2, PB_LEN);
    pb_raw(&b, "\x83\x00xyz", 5);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_OK);
    assert_int_equal(s.type_len, 3);
    pb_free(&b);
}

static void test_scan_truncated_fixed(void **state)
{
    (void)state;
    pb b = {0};
    ib__wire_scan s;
    pb_key(&b, 9, PB_I64);
    pb_raw(&b, "1234567", 7);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_TRUNCATED);
    assert_int_equal(s.field, 9);
    pb_free(&b);
    pb_key(&b, 9, PB_I32);
    pb_raw(&b, "123", 3);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_TRUNCATED);
    pb_free(&b);
}

static void test_scan_header_entry_problems(void **state)
{
    (void)state;
    pb b = {0};
    pb inner = {0};
    ib__wire_scan s;

    /* An entry whose own key runs past the entry's end. */
    pb_raw(&inner,
           "\x0a\x05"
           "ab",
           4);
    pb_bytes(&b, 6, inner.buf, inner.len);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_TRUNCATED);
    assert_int_equal(s.field, 6);
    assert_int_equal(s.subfield, 1);
    assert_int_equal(s.offset, 2);
    pb_free(&inner);
    pb_free(&b);

    /* Unknown fields inside an entry are skipped; groups are not. */
    pb_key(&inner, 3, PB_VARINT);
    pb_varint(&inner, 1);
    pb_bytes(&inner, 1, "k", 1);
    pb_bytes(&b, 6, inner.buf, inner.len);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_OK);
    pb_free(&inner);
    pb_free(&b);
    pb_key(&inner, 3, PB_SGROUP);
    pb_bytes(&b, 6, inner.buf, inner.len);
    assert_int_equal(scan_exact(&s, &b), IB__WIRE_GROUP);
    pb_free(&inner);
    pb_free(&b);
}

static void test_scan_problem_strings(void **state)
{
    (void)state;
    for (int p = IB__WIRE_OK; p <= IB__WIRE_NUL; p++)
        assert_string_not_equal(ib__wire_problem_str((ib__wire_problem)p), "unknown problem");
    assert_string_equal(ib__wire_problem_str((ib__wire_problem)99), "unknown problem");
    assert_string_equal(ib__wire_field_name(5), "source");
    assert_string_equal(ib__wire_field_name(77), "unknown");
}

/* Every prefix and every single-byte corruption of a rich message is
 * scanned without reading outside the buffer (checked by ASan/valgrind on
 * the exact-size copies) and gives a consistent answer. */
static void test_scan_prefixes_and_corruptions(void **state)
{
    (void)state;
    pb b = {0};
    ib__wire_scan s;

    pb_str(&b, 1, "0f8fad5bd9cb469fa16570867728950e");
    pb_str(&b, 2, "t");
    pb_bytes(&b, 3, "\x01\x02\x03", 3);
    pb_key(&b, 4, PB_VARINT);
    pb_varint(&b, 1ull << 40);
    pb_entry(&b, "key", 3, "value", 5);
    for (size_t cut = 0; cut <= b.len; cut++) {
        pb p = {0};
        pb_raw(&p, b.buf, cut);
        ib__wire_problem r = scan_exact(&s, &p);
        assert_true(r == IB__WIRE_OK || r == IB__WIRE_TRUNCATED);
        assert_int_equal(r, s.problem);
        pb_free(&p);
        for (size_t pos = 0; pos < cut; pos++) {
            static const uint8_t values[] = {0x00, 0x7f, 0x80, 0xff};
            for (size_t v = 0; v < sizeof(values); v++) {
                pb q = {0};
                pb_raw(&q, b.buf, cut);
                q.buf[pos] = values[v];
                r = scan_exact(&s, &q);
                assert_int_equal(r, s.problem);
                if (r != IB__WIRE_OK)
                    assert_true(s.offset < cut);
                pb_free(&q);
            }
        }
    }
    pb_free(&b);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_utf8_table),
    cmocka_unit_test(test_utf8_every_position),
    cmocka_unit_test(test_utf8_decode),
    cmocka_unit_test(test_scan_records_last_id_and_type),
    cmocka_unit_test(test_scan_records_every_field),
    cmocka_unit_test(test_next_header_odd_entries),
    cmocka_unit_test(test_scan_id_may_hold_nul),
    cmocka_unit_test(test_scan_varint_limits),
    cmocka_unit_test(test_scan_truncated_fixed),
    cmocka_unit_test(test_scan_header_entry_problems),
    cmocka_unit_test(test_scan_problem_strings),
    cmocka_unit_test(test_scan_prefixes_and_corruptions),
};

IB_TEST_MAIN(tests)
