/* SPDX-License-Identifier: Apache-2.0 */
/* Payload fingerprints: exact values (they are stored in marker files, so
 * a change of the function turns every stored one into a false
 * conflict), and inputs that must not collide. */
#include "ib_test.h"

#include <string.h>

#include "fingerprint.h"

#define BYTES(s) (const uint8_t *)(s), sizeof(s) - 1

/* Pinned when the format was set (schema 3, word-at-a-time hash); never
 * edit one to make the test pass. */
static void test_exact_values(void **state)
{
    (void)state;
    assert_int_equal(ib_fingerprint("", NULL, 0), 0xc3b4840e1f52da29ull);
    assert_int_equal(ib_fingerprint("order.created", BYTES("{}")), 0xcff028578270a430ull);
    assert_int_equal(ib_fingerprint("a", BYTES("bc")), 0xe795853e6925e376ull);
    assert_int_equal(ib_fingerprint("ab", BYTES("c")), 0x2b85d5f775b731c8ull);
    assert_int_equal(ib_fingerprint("t", BYTES("\0\0\0")), 0xc91bd05c8bb6c202ull);
}

/* The type ends where the payload starts: moving bytes across the
 * boundary, or from the type into the payload, changes the value. */
static void test_boundary_between_type_and_payload(void **state)
{
    (void)state;
    assert_true(ib_fingerprint("a", BYTES("bc")) != ib_fingerprint("ab", BYTES("c")));
    assert_true(ib_fingerprint("abc", NULL, 0) != ib_fingerprint("ab", BYTES("c")));
    assert_true(ib_fingerprint("", BYTES("abc")) != ib_fingerprint("abc", NULL, 0));
    /* A payload of NULs is not an empty one, nor a shorter one. */
    assert_true(ib_fingerprint("t", NULL, 0) != ib_fingerprint("t", BYTES("\0")));
    assert_true(ib_fingerprint("t", BYTES("\0")) != ib_fingerprint("t", BYTES("\0\0")));
}

static void test_same_input_same_value_never_zero(void **state)
{
    (void)state;
    uint8_t payload[64];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 7);
    uint64_t a = ib_fingerprint("order.created", payload, sizeof(payload));
    assert_int_equal(a, ib_fingerprint("order.created", payload, sizeof(payload)));
    /* One bit anywhere in the payload or the type changes it. */
    for (size_t i = 0; i < sizeof(payload) * 8; i++) {
        payload[i / 8] ^= (uint8_t)(1u << (i % 8));
        uint64_t b = ib_fingerprint("order.created", payload, sizeof(payload));
        payload[i / 8] ^= (uint8_t)(1u << (i % 8));
        assert_true(b != a);
        assert_true(b != 0);
    }
    assert_true(ib_fingerprint("order.createe", payload, sizeof(payload)) != a);
    /* A NULL payload with length 0 is the empty payload. */
    assert_int_equal(ib_fingerprint("x", NULL, 0), ib_fingerprint("x", payload, 0));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_exact_values),
    cmocka_unit_test(test_boundary_between_type_and_payload),
    cmocka_unit_test(test_same_input_same_value_never_zero),
};

IB_TEST_MAIN(tests)
