/* SPDX-License-Identifier: Apache-2.0 */
/* Event ids: table-driven validation, generation, derivation, packing. */
#include "ib_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uuid.h"

/* A literal with its exact length, so cases may hold NUL bytes. */
#define LIT(s) s, sizeof(s) - 1

#define V4 "0f8fad5bd9cb469fa16570867728950e"
#define V4_DASHED "0f8fad5b-d9cb-469f-a165-70867728950e"

typedef struct id_case {
    const char *name;
    const char *in;
    size_t len;
    unsigned flags;
    ib_id_reason want;
    const char *out; /* normalised output when valid */
} id_case;

static const id_case id_cases[] = {
    /* accepted forms */
    {"plain lowercase", LIT(V4), 0, IB_ID_VALID, V4},
    {"plain uppercase", LIT("0F8FAD5BD9CB469FA16570867728950E"), 0, IB_ID_VALID, V4},
    {"plain mixed case", LIT("0f8FAD5bd9CB469Fa16570867728950E"), 0, IB_ID_VALID, V4},
    {"dashed lowercase", LIT(V4_DASHED), 0, IB_ID_VALID, V4},
    {"dashed uppercase", LIT("0F8FAD5B-D9CB-469F-A165-70867728950E"), 0, IB_ID_VALID, V4},
    {"dashed mixed case", LIT("0f8Fad5B-d9Cb-469F-a165-70867728950e"), 0, IB_ID_VALID, V4},
    {"variant 8", LIT("0f8fad5bd9cb469f816570867728950e"), 0, IB_ID_VALID,
     "0f8fad5bd9cb469f816570867728950e"},
    {"variant 9", LIT("0f8fad5bd9cb469f916570867728950e"), 0, IB_ID_VALID,
     "0f8fad5bd9cb469f916570867728950e"},
    {"variant B upper", LIT("0f8fad5bd9cb469fB16570867728950e"), 0, IB_ID_VALID,
     "0f8fad5bd9cb469fb16570867728950e"},
    {"all zero but version and variant", LIT("00000000000040008000000000000000"), 0, IB_ID_VALID,
     "00000000000040008000000000000000"},
    /* wrong version */
    {"version 0", LIT("0f8fad5bd9cb069fa16570867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"version 1", LIT("0f8fad5bd9cb169fa16570867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"version 3", LIT("0f8fad5bd9cb369fa16570867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"version 5", LIT("0f8fad5bd9cb569fa16570867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"version 7", LIT("0f8fad5bd9cb769fa16570867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"version f", LIT("0f8fad5bd9cbf69fa16570867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"version 5 dashed", LIT("0f8fad5b-d9cb-569f-a165-70867728950e"), 0, IB_ID_BAD_VERSION, ""},
    {"nil uuid", LIT("00000000000000000000000000000000"), 0, IB_ID_BAD_VERSION, ""},
    /* the default set: uuid4 and the uuid8 ids ib_event_id_derive makes */
    {"uuid8 accepted by default", LIT("53237e60d0088c8dba4231d408794e1b"), 0, IB_ID_VALID,
     "53237e60d0088c8dba4231d408794e1b"},
    {"uuid8 dashed accepted by default", LIT("53237E60-D008-8C8D-BA42-31D408794E1B"), 0,
     IB_ID_VALID, "53237e60d0088c8dba4231d408794e1b"},
    {"uuid8 refused by uuid4 only", LIT("53237e60d0088c8dba4231d408794e1b"), IB_ID_UUID4_ONLY,
     IB_ID_BAD_VERSION, ""},
    {"uuid4 accepted by uuid4 only", LIT(V4), IB_ID_UUID4_ONLY, IB_ID_VALID, V4},
    {"uuid7 accepted by 4,7,8", LIT("018f3c5e7d2a7b3c8d4e5f60718293a4"),
     IB_ID_VERSION(4) | IB_ID_VERSION(7) | IB_ID_VERSION(8), IB_ID_VALID,
     "018f3c5e7d2a7b3c8d4e5f60718293a4"},
    {"uuid4 refused by 7 only", LIT(V4), IB_ID_VERSION(7), IB_ID_BAD_VERSION, ""},
    /* any version opt-in */
    {"uuid7 refused by default", LIT("018f3c5e7d2a7b3c8d4e5f60718293a4"), 0, IB_ID_BAD_VERSION, ""},
    {"uuid7 with any version", LIT("018f3c5e7d2a7b3c8d4e5f60718293a4"), IB_ID_ANY_VERSION,
     IB_ID_VALID, "018f3c5e7d2a7b3c8d4e5f60718293a4"},
    {"uuid7 dashed upper with any version", LIT("018F3C5E-7D2A-7B3C-8D4E-5F60718293A4"),
     IB_ID_ANY_VERSION, IB_ID_VALID, "018f3c5e7d2a7b3c8d4e5f60718293a4"},
    {"uuid1 with any version", LIT("0f8fad5bd9cb169fa16570867728950e"), IB_ID_ANY_VERSION,
     IB_ID_VALID, "0f8fad5bd9cb169fa16570867728950e"},
    {"uuid4 with any version", LIT(V4), IB_ID_ANY_VERSION, IB_ID_VALID, V4},
    {"nil uuid with any version", LIT("00000000000000000000000000000000"), IB_ID_ANY_VERSION,
     IB_ID_BAD_VARIANT, ""},
    /* wrong variant */
    {"variant 0 (0xxx)", LIT("0f8fad5bd9cb469f016570867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant 7 (0xxx)", LIT("0f8fad5bd9cb469f716570867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant c (110x)", LIT("0f8fad5bd9cb469fc16570867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant d (110x)", LIT("0f8fad5bd9cb469fd16570867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant e (111x)", LIT("0f8fad5bd9cb469fe16570867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant F (111x)", LIT("0f8fad5bd9cb469fF16570867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant c dashed", LIT("0f8fad5b-d9cb-469f-c165-70867728950e"), 0, IB_ID_BAD_VARIANT, ""},
    {"variant e with any version", LIT("018f3c5e7d2a7b3ced4e5f60718293a4"), IB_ID_ANY_VERSION,
     IB_ID_BAD_VARIANT, ""},
    {"variant 0 with any version", LIT("018f3c5e7d2a7b3c0d4e5f60718293a4"), IB_ID_ANY_VERSION,
     IB_ID_BAD_VARIANT, ""},
    /* lengths */
    {"empty", "", 0, 0, IB_ID_EMPTY, ""},
    {"NULL input", NULL, 0, 0, IB_ID_EMPTY, ""},
    {"NULL input with a length", NULL, 32, 0, IB_ID_EMPTY, ""},
    {"1 char", LIT("4"), 0, IB_ID_BAD_LENGTH, ""},
    {"31 chars", LIT("0f8fad5bd9cb469fa16570867728950"), 0, IB_ID_BAD_LENGTH, ""},
    {"33 chars", LIT("0f8fad5bd9cb469fa16570867728950e0"), 0, IB_ID_BAD_LENGTH, ""},
    {"35 chars dashed", LIT("0f8fad5b-d9cb-469f-a165-70867728950"), 0, IB_ID_BAD_LENGTH, ""},
    {"37 chars dashed", LIT("0f8fad5b-d9cb-469f-a165-70867728950e0"), 0, IB_ID_BAD_LENGTH, ""},
    {"braced", LIT("{0f8fad5b-d9cb-469f-a165-70867728950e}"), 0, IB_ID_BAD_LENGTH, ""},
    {"urn prefix", LIT("urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e"), 0, IB_ID_BAD_LENGTH, ""},
    {"64 chars", LIT(V4 V4), 0, IB_ID_BAD_LENGTH, ""},
    /* characters */
    {"non-hex g at 0", LIT("gf8fad5bd9cb469fa16570867728950e"), 0, IB_ID_BAD_CHAR, ""},
    {"non-hex G at 31", LIT("0f8fad5bd9cb469fa16570867728950G"), 0, IB_ID_BAD_CHAR, ""},
    {"non-hex z at version", LIT("0f8fad5bd9cbz69fa16570867728950e"), 0, IB_ID_BAD_CHAR, ""},
    {"non-hex + at variant", LIT("0f8fad5bd9cb469f+16570867728950e"), 0, IB_ID_BAD_CHAR, ""},
    {"non-hex in dashed", LIT("0f8fad5b-d9cb-469f-a165-7086772895xe"), 0, IB_ID_BAD_CHAR, ""},
    {"dashes in 32 chars", LIT("0f8fad5b-d9cb-469f-a165-70867728"), 0, IB_ID_BAD_CHAR, ""},
    {"extra dash in dashed", LIT("0f8fad5b--9cb-469f-a165-70867728950e"), 0, IB_ID_BAD_CHAR, ""},
    /* dashes */
    {"dash one early", LIT("0f8fad5-bd9cb-469f-a165-70867728950e"), 0, IB_ID_BAD_DASHES, ""},
    {"dash one late", LIT("0f8fad5bd-9cb-469f-a165-70867728950e"), 0, IB_ID_BAD_DASHES, ""},
    {"last dash misplaced", LIT("0f8fad5b-d9cb-469f-a1657-0867728950e"), 0, IB_ID_BAD_DASHES, ""},
    {"36 hex no dashes", LIT("0f8fad5bd9cb469fa16570867728950e0f8f"), 0, IB_ID_BAD_DASHES, ""},
    {"underscores for dashes", LIT("0f8fad5b_d9cb_469f_a165_70867728950e"), 0, IB_ID_BAD_DASHES,
     ""},
    /* embedded NUL */
    {"NUL inside plain",
     LIT("0f8fad\0"
         "bd9cb469fa16570867728950e"),
     0, IB_ID_BAD_CHAR, ""},
    {"NUL at end of plain", LIT("0f8fad5bd9cb469fa16570867728950\0"), 0, IB_ID_BAD_CHAR, ""},
    {"NUL inside dashed",
     LIT("0f8fad5b-d9cb-469f-a165-708677\0"
         "8950e"),
     0, IB_ID_BAD_CHAR, ""},
    {"NUL for a dash",
     LIT("0f8fad5b\0"
         "d9cb-469f-a165-70867728950e"),
     0, IB_ID_BAD_DASHES, ""},
    {"valid id then NUL and junk", LIT(V4 "\0junk"), 0, IB_ID_BAD_LENGTH, ""},
    {"valid id then NUL", LIT(V4 "\0"), 0, IB_ID_BAD_LENGTH, ""},
    /* spaces */
    {"leading space", LIT(" " V4), 0, IB_ID_BAD_LENGTH, ""},
    {"trailing space", LIT(V4 " "), 0, IB_ID_BAD_LENGTH, ""},
    {"leading space within 32", LIT(" f8fad5bd9cb469fa16570867728950e"), 0, IB_ID_BAD_CHAR, ""},
    {"trailing newline within 32", LIT("0f8fad5bd9cb469fa16570867728950\n"), 0, IB_ID_BAD_CHAR, ""},
    {"tab within dashed", LIT("0f8fad5b-d9cb-469f-a165-70867728950\t"), 0, IB_ID_BAD_CHAR, ""},
    /* UTF-8 multi-byte characters */
    {"e-acute in 32 bytes",
     LIT("0f8fad5bd9cb469fa16570867728\xc3\xa9"
         "0e"),
     0, IB_ID_BAD_CHAR, ""},
    {"fullwidth digit in 32 bytes",
     LIT("\xef\xbc\x90"
         "f8fad5bd9cb469fa1657086772895"),
     0, IB_ID_BAD_CHAR, ""},
    {"e-acute in dashed 36 bytes", LIT("0f8fad5b-d9cb-469f-a165-7086772895\xc3\xa9"), 0,
     IB_ID_BAD_CHAR, ""},
    {"e-acute making 33 bytes", LIT("0f8fad5bd9cb469fa16570867728950\xc3\xa9"), 0, IB_ID_BAD_LENGTH,
     ""},
};

static void test_id_table(void **state)
{
    (void)state;
    size_t failures = 0;
    size_t n = sizeof(id_cases) / sizeof(id_cases[0]);

    assert_true(n >= 40);
    for (size_t i = 0; i < n; i++) {
        const id_case *c = &id_cases[i];
        char out[IB_ID_BUF_SIZE];
        ib_id_reason got;

        memset(out, 'x', sizeof(out));
        got = ib_id_normalise(out, c->in, c->len, c->flags);
        if (got != c->want || strcmp(out, c->out) != 0) {
            print_error("case '%s': got reason %d (%s) out '%s', want %d (%s) out '%s'\n", c->name,
                        (int)got, ib_id_reason_str(got), out, (int)c->want,
                        ib_id_reason_str(c->want), c->out);
            failures++;
            continue;
        }
        if (got == IB_ID_VALID) {
            char again[IB_ID_BUF_SIZE];
            /* Normalising is idempotent and the output is what recorders accept. */
            if (!ib_id_is_normalised(out) ||
                ib_id_normalise(again, out, strlen(out), c->flags) != IB_ID_VALID ||
                strcmp(again, out) != 0) {
                print_error("case '%s': output '%s' is not stable\n", c->name, out);
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
}

static void test_id_is_normalised(void **state)
{
    (void)state;
    assert_true(ib_id_is_normalised(V4));
    assert_true(ib_id_is_normalised("018f3c5e7d2a7b3c8d4e5f60718293a4")); /* any version */
    assert_false(ib_id_is_normalised(NULL));
    assert_false(ib_id_is_normalised(""));
    assert_false(ib_id_is_normalised("0F8FAD5BD9CB469FA16570867728950E"));
    assert_false(ib_id_is_normalised(V4_DASHED));
    assert_false(ib_id_is_normalised("0f8fad5bd9cb469fa16570867728950"));
    assert_false(ib_id_is_normalised(V4 "0"));
    assert_false(ib_id_is_normalised("0f8fad5bd9cb469fa16570867728950g"));
}

static void test_id_reason_strings(void **state)
{
    (void)state;
    const ib_id_reason all[] = {IB_ID_VALID,      IB_ID_EMPTY,      IB_ID_BAD_LENGTH,
                                IB_ID_BAD_CHAR,   IB_ID_BAD_DASHES, IB_ID_BAD_VERSION,
                                IB_ID_BAD_VARIANT};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(ib_id_reason_str(all[i]), ib_id_reason_str(all[j]));
    }
    assert_string_equal(ib_id_reason_str(IB_ID_BAD_VERSION), "UUID version not accepted");
    assert_string_equal(ib_id_reason_str((ib_id_reason)99), "unknown reason");
}

/* The version sets as an operator writes them (ibus run --uuid-versions). */
static void test_id_versions_parse(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc;
        unsigned set;
        const char *printed;
    } cases[] = {
        {"4,8", 0, IB_ID_VERSION(4) | IB_ID_VERSION(8), "4,8"},
        {"4", 0, IB_ID_VERSION(4), "4"},
        {"8,4", 0, IB_ID_VERSION(4) | IB_ID_VERSION(8), "4,8"},
        {"4,7,8", 0, IB_ID_VERSION(4) | IB_ID_VERSION(7) | IB_ID_VERSION(8), "4,7,8"},
        {"1,2,3,4,5,6,7,8", 0, 0x1feu, "1,2,3,4,5,6,7,8"},
        {"4,4", 0, IB_ID_VERSION(4), "4"},
        {"any", 0, IB_ID_ANY_VERSION, "any"},
        {"", -1, 0, NULL},
        {"0", -1, 0, NULL},
        {"9", -1, 0, NULL},
        {"4,", -1, 0, NULL},
        {",4", -1, 0, NULL},
        {"4 8", -1, 0, NULL},
        {"4,,8", -1, 0, NULL},
        {"48", -1, 0, NULL},
        {"ANY", -1, 0, NULL},
        {"any,4", -1, 0, NULL},
        {"v4", -1, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned set = 99;
        char buf[64];
        int rc = ib_id_versions_parse(&set, cases[i].text);
        if (rc != cases[i].rc || set != cases[i].set)
            fail_msg("'%s': rc %d set %#x", cases[i].text, rc, set);
        if (rc == 0)
            assert_string_equal(ib_id_versions_str(buf, sizeof(buf), set), cases[i].printed);
    }
    unsigned set = 1;
    assert_int_equal(ib_id_versions_parse(&set, NULL), -1);
    char buf[64];
    assert_string_equal(ib_id_versions_str(buf, sizeof(buf), IB_ID_VERSIONS_DEFAULT), "4,8");
    assert_int_equal(ib_id_version(LIT("018f3c5e7d2a7b3c8d4e5f60718293a4")), 7);
    assert_int_equal(ib_id_version(LIT("018F3C5E-7D2A-7B3C-8D4E-5F60718293A4")), 7);
    assert_int_equal(ib_id_version(LIT(V4)), 4);
    assert_int_equal(ib_id_version(LIT("0f8fad5bd9cbx69fa16570867728950e")), -1);
    assert_int_equal(ib_id_version(LIT("0f8f")), -1);
    assert_int_equal(ib_id_version(NULL, 32), -1);
}

static int cmp_ids(const void *a, const void *b)
{
    return memcmp(a, b, IB_ID_BUF_SIZE);
}

static void test_uuid4_generate_valid_and_distinct(void **state)
{
    (void)state;
    size_t n = getenv("IB_UNDER_VALGRIND") != NULL ? 2000 : 10000;
    char(*ids)[IB_ID_BUF_SIZE] = malloc(n * IB_ID_BUF_SIZE);
    unsigned seen[IB_ID_LEN] = {0}; /* bit set of hex values seen per position */

    assert_non_null(ids);
    for (size_t i = 0; i < n; i++) {
        char norm[IB_ID_BUF_SIZE];
        assert_int_equal(ib_uuid4_generate(ids[i]), IB_OK);
        assert_true(ib_id_is_normalised(ids[i]));
        assert_int_equal(ib_id_normalise(norm, ids[i], IB_ID_LEN, IB_ID_UUID4_ONLY), IB_ID_VALID);
        assert_string_equal(norm, ids[i]);
        for (size_t p = 0; p < IB_ID_LEN; p++) {
            char c = ids[i][p];
            seen[p] |= 1u << (c <= '9' ? c - '0' : c - 'a' + 10);
        }
    }
    qsort(ids, n, IB_ID_BUF_SIZE, cmp_ids);
    for (size_t i = 1; i < n; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    /* Random positions take every hex value; version and variant do not. */
    for (size_t p = 0; p < IB_ID_LEN; p++) {
        if (p == 12)
            assert_int_equal(seen[p], 1u << 4);
        else if (p == 16)
            assert_int_equal(seen[p], 0xfu << 8);
        else
            assert_int_equal(seen[p], 0xffffu);
    }
    free(ids);
}

static void test_uuid_derive_deterministic(void **state)
{
    (void)state;
    char a[IB_ID_BUF_SIZE];
    char b[IB_ID_BUF_SIZE];
    char norm[IB_ID_BUF_SIZE];

    ib_uuid_derive(a, V4, "order.shipped");
    ib_uuid_derive(b, V4, "order.shipped");
    assert_string_equal(a, b);
    assert_int_equal(ib_id_normalise(norm, a, strlen(a), IB_ID_UUID4_ONLY), IB_ID_VALID);
    assert_string_equal(norm, a);
    /* Pinned: a replay after an upgrade must derive the same id. */
    assert_string_equal(a, "8f294a14702344578176eb58bc631d3f");
}

static void test_uuid_derive_sensitive_to_inputs(void **state)
{
    (void)state;
    char base[IB_ID_BUF_SIZE];
    char other[IB_ID_BUF_SIZE];
    char empty[IB_ID_BUF_SIZE];

    ib_uuid_derive(base, V4, "order.shipped");
    ib_uuid_derive(other, "0f8fad5bd9cb469fa16570867728950f", "order.shipped");
    assert_string_not_equal(base, other);
    ib_uuid_derive(other, V4, "order.shippee");
    assert_string_not_equal(base, other);
    ib_uuid_derive(other, "order.shipped", V4); /* swapped */
    assert_string_not_equal(base, other);
    /* Framing: moving bytes between the parts changes the id. */
    ib_uuid_derive(base, "ab", "c");
    ib_uuid_derive(other, "a", "bc");
    assert_string_not_equal(base, other);
    ib_uuid_derive(base, "", "");
    ib_uuid_derive(empty, NULL, NULL);
    assert_string_equal(base, empty);
    assert_true(ib_id_is_normalised(empty));
    ib_uuid_derive(other, "", "x");
    assert_string_not_equal(empty, other);
}

static unsigned popcount8(uint8_t x)
{
    unsigned n = 0;
    for (; x != 0; x &= (uint8_t)(x - 1))
        n++;
    return n;
}

/* One changed input byte must change about half of the 122 free bits; a
 * weak mix would leave most of them alone. Inputs are fixed, so this is
 * deterministic. */
static void test_uuid_derive_avalanche(void **state)
{
    (void)state;
    char parent[IB_ID_BUF_SIZE] = V4;
    char name[] = "type.with.some.length";
    uint8_t base[16];
    unsigned total = 0;
    unsigned trials = 0;
    char id[IB_ID_BUF_SIZE];

    ib_uuid_derive(id, parent, name);
    assert_true(ib_id_pack(base, id));
    for (size_t pos = 0; pos < IB_ID_LEN; pos++) {
        for (int delta = 1; delta <= 4; delta++) {
            uint8_t got[16];
            char saved = parent[pos];
            parent[pos] = (char)(saved ^ delta);
            ib_uuid_derive(id, parent, name);
            parent[pos] = saved;
            assert_true(ib_id_pack(got, id));
            for (int i = 0; i < 16; i++)
                total += popcount8(got[i] ^ base[i]);
            trials++;
        }
    }
    /* 122 random bits: expect a mean of 61 changed bits. */
    assert_in_range(total / trials, 54, 68);
}

static void test_id_pack_round_trip(void **state)
{
    (void)state;
    const uint8_t want[16] = {0x0f, 0x8f, 0xad, 0x5b, 0xd9, 0xcb, 0x46, 0x9f,
                              0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e};
    uint8_t packed[16];
    char id[IB_ID_BUF_SIZE];

    assert_true(ib_id_pack(packed, V4));
    assert_memory_equal(packed, want, 16);
    ib_id_unpack(id, packed);
    assert_string_equal(id, V4);
    for (int i = 0; i < 100; i++) {
        char gen[IB_ID_BUF_SIZE];
        assert_int_equal(ib_uuid4_generate(gen), IB_OK);
        assert_true(ib_id_pack(packed, gen));
        ib_id_unpack(id, packed);
        assert_string_equal(id, gen);
    }
    assert_false(ib_id_pack(packed, "0F8FAD5BD9CB469FA16570867728950E"));
    assert_false(ib_id_pack(packed, V4_DASHED));
    assert_false(ib_id_pack(packed, "0f8fad5b"));
    assert_false(ib_id_pack(packed, NULL));
}

/* ib_id_pack is the recorders' key check: it must accept exactly what
 * ib_id_is_normalised accepts, and pack what it accepts losslessly. */
static void test_id_pack_agrees_with_is_normalised(void **state)
{
    (void)state;
    static const char *const fixed[] = {
        "0123456789abcdef0123456789abcdef",
        "0123456789ABCDEF0123456789abcdef",
        "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0",
        "0123456789abcdef0123456789abcdeg",
        "g123456789abcdef0123456789abcdef",
        "01234567-89ab-cdef-0123-456789abcdef",
        "",
        "/:@`GFgf",
        " 0123456789abcdef0123456789abcde",
    };
    uint8_t packed[16];
    char back[IB_ID_BUF_SIZE];
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        bool want = ib_id_is_normalised(fixed[i]);
        assert_int_equal(ib_id_pack(packed, fixed[i]), want);
        if (want) {
            ib_id_unpack(back, packed);
            assert_string_equal(back, fixed[i]);
        }
    }
    /* Every byte value at every position of a valid id, and in place of
     * its terminating NUL. */
    char id[IB_ID_BUF_SIZE + 1];
    for (int pos = 0; pos <= IB_ID_LEN; pos++) {
        for (int c = 1; c < 256; c++) {
            memcpy(id, V4, IB_ID_BUF_SIZE);
            id[IB_ID_LEN + 1] = '\0';
            id[pos] = (char)c;
            bool want = ib_id_is_normalised(id);
            if (ib_id_pack(packed, id) != want)
                fail_msg("byte 0x%02x at %d: ib_id_is_normalised says %d", c, pos, want);
            if (want) {
                ib_id_unpack(back, packed);
                assert_memory_equal(back, id, IB_ID_LEN);
            }
        }
    }
}

/* A plain per-byte oracle for one digit: its lower-case form, or 0. */
static char oracle_digit(int c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))
        return (char)c;
    if (c >= 'A' && c <= 'F')
        return (char)(c - 'A' + 'a');
    return 0;
}

/* The digits are checked eight at a time, one byte a lane: every byte
 * value at every digit position (each lane of each word, in both forms)
 * must give what a per-byte check gives, high-bit bytes and the bytes
 * next to each range included. */
static void test_id_every_byte_in_every_lane(void **state)
{
    (void)state;
    char id[IB_ID_BUF_SIZE], out[IB_ID_BUF_SIZE], dashed[37];
    uint8_t packed[16];
    for (int pos = 0; pos < IB_ID_LEN; pos++) {
        for (int c = 1; c < 256; c++) {
            memcpy(id, V4, IB_ID_BUF_SIZE);
            id[pos] = (char)c;
            char d = oracle_digit(c);
            ib_id_reason want = IB_ID_VALID;
            if (d == 0)
                want = IB_ID_BAD_CHAR;
            else if (pos == 12 && d != '4')
                want = IB_ID_BAD_VERSION;
            else if (pos == 16 && strchr("89ab", d) == NULL)
                want = IB_ID_BAD_VARIANT;
            ib_id_reason got = ib_id_normalise(out, id, IB_ID_LEN, IB_ID_UUID4_ONLY);
            if (got != want)
                fail_msg("byte 0x%02x at %d: reason %d, want %d", c, pos, got, want);
            if (want == IB_ID_VALID) {
                assert_int_equal(out[pos], d);
                assert_memory_equal(out, V4, (size_t)pos);
                assert_string_equal(out + pos + 1, V4 + pos + 1);
            }
            bool lower = d != 0 && d == (char)c;
            assert_int_equal(ib_id_is_normalised(id), lower);
            assert_int_equal(ib_id_pack(packed, id), lower);
            /* the same digit in the dashed form */
            memcpy(dashed, V4_DASHED, sizeof(dashed));
            int dpos = pos + (pos >= 8) + (pos >= 12) + (pos >= 16) + (pos >= 20);
            dashed[dpos] = (char)c;
            assert_int_equal(ib_id_normalise(out, dashed, 36, IB_ID_UUID4_ONLY), want);
        }
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_id_table),
    cmocka_unit_test(test_id_is_normalised),
    cmocka_unit_test(test_id_reason_strings),
    cmocka_unit_test(test_id_versions_parse),
    cmocka_unit_test(test_uuid4_generate_valid_and_distinct),
    cmocka_unit_test(test_uuid_derive_deterministic),
    cmocka_unit_test(test_uuid_derive_sensitive_to_inputs),
    cmocka_unit_test(test_uuid_derive_avalanche),
    cmocka_unit_test(test_id_pack_round_trip),
    cmocka_unit_test(test_id_pack_agrees_with_is_normalised),
    cmocka_unit_test(test_id_every_byte_in_every_lane),
};

IB_TEST_MAIN(tests)
