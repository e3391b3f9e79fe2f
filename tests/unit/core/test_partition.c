/* SPDX-License-Identifier: Apache-2.0 */
/* Partitions: FNV-1a-32 exactly (the published test values of the
 * function, which nats-server's mapping computes too), hashing in pieces
 * as the server hashes several tokens, the modulo's edges, which keys are
 * one subject token, and the subject "<base>.<p>.<key>". The agreement
 * with a real server is it_partition. */
#include "ib_test.h"

#include <stdio.h>
#include <string.h>

#include "partition.h"

#define BYTES(s) (s), sizeof(s) - 1

static void test_published_values(void **state)
{
    (void)state;
    assert_int_equal(ib_partition_hash(NULL, 0), 0x811c9dc5u);
    assert_int_equal(ib_partition_hash(BYTES("a")), 0xe40c292cu);
    assert_int_equal(ib_partition_hash(BYTES("foobar")), 0xbf9cf968u);
}

/* Every byte counts, the high ones too (a key in UTF-8), and a NUL. */
static void test_every_byte_counts(void **state)
{
    (void)state;
    assert_true(ib_partition_hash(BYTES("kunde-\xc3\xbc")) !=
                ib_partition_hash(BYTES("kunde-\xc3\xbd")));
    assert_true(ib_partition_hash(BYTES("a\0")) != ib_partition_hash(BYTES("a")));
}

/* Two tokens hashed one after the other are their concatenation: the
 * server puts nothing between them, so "ab"+"c" and "a"+"bc" agree. */
static void test_pieces_are_the_concatenation(void **state)
{
    (void)state;
    uint32_t whole = ib_partition_hash(BYTES("account-17order-9"));
    assert_int_equal(
        ib_partition_hash_more(ib_partition_hash(BYTES("account-17")), BYTES("order-9")), whole);
    assert_int_equal(
        ib_partition_hash_more(ib_partition_hash(BYTES("account-")), BYTES("17order-9")), whole);
    assert_int_equal(ib_partition_hash_more(whole, NULL, 0), whole);
}

static void test_partition_in_range(void **state)
{
    (void)state;
    assert_int_equal(ib_partition_of(0xbf9cf968u, 16), 0xbf9cf968u % 16);
    assert_int_equal(ib_partition_of(0xffffffffu, 1), 0);
    assert_int_equal(ib_partition_of(0xffffffffu, 0xffffffffu), 0);
    assert_int_equal(ib_partition_of(0xfffffffeu, 0xffffffffu), 0xfffffffeu);
    assert_int_equal(ib_partition_of(12345, 0), 0); /* as the server: no division */
    for (uint32_t n = 1; n < 300; n++)
        assert_true(ib_partition_of(ib_partition_hash(&n, sizeof(n)), n) < n);
}

/* A key is one subject token of valid UTF-8: what the server's mapping
 * reads and the subject shows. The reason names the byte, never the key. */
static void test_keys_that_are_one_token(void **state)
{
    (void)state;
    ib_error e;
    assert_int_equal(ib_partition_key_check("account-17", &e), IB_OK);
    assert_int_equal(ib_partition_key_check("0123456789abcdef0123456789abcdef", &e), IB_OK);
    assert_int_equal(ib_partition_key_check("kunde-\xc3\xbc:7/\xe6\x9d\xb1", &e), IB_OK);
    const char *bad[] = {"",          "a.b",    "*",       "a>",   "two words",
                         "tab\there", "bell\a", "del\x7f", "\xc3", "\xff\xfe"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        e.msg[0] = '\0';
        assert_int_equal(ib_partition_key_check(bad[i], &e), IB_ERR_INVALID_ARG);
        assert_true(e.msg[0] != '\0');
    }
    assert_int_equal(ib_partition_key_check("x\x1b[31mred", &e), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(e.msg, "byte 2 of this one is 0x1b"));
    assert_null(strstr(e.msg, "red"));
    char longest[IB_PARTITION_KEY_MAX + 2];
    memset(longest, 'k', sizeof(longest));
    longest[IB_PARTITION_KEY_MAX] = '\0';
    assert_int_equal(ib_partition_key_check(longest, &e), IB_OK);
    longest[IB_PARTITION_KEY_MAX] = 'k';
    longest[IB_PARTITION_KEY_MAX + 1] = '\0';
    assert_int_equal(ib_partition_key_check(longest, &e), IB_ERR_INVALID_ARG);
    assert_non_null(strstr(e.msg, "at most 128 bytes"));
}

static void test_subject_is_base_partition_key(void **state)
{
    (void)state;
    char subject[64], want[64];
    ib_error e;
    assert_int_equal(ib_partition_subject(subject, sizeof(subject), "orders", "account-17", 16, &e),
                     IB_OK);
    snprintf(want, sizeof(want), "orders.%u.account-17",
             ib_partition_of(ib_partition_hash(BYTES("account-17")), 16));
    assert_string_equal(subject, want);
    assert_int_equal(ib_partition_subject(subject, sizeof(subject), "a.b", "k", 1, &e), IB_OK);
    assert_string_equal(subject, "a.b.0.k");
    /* out of range, a bad key, no room: an error and an empty subject */
    assert_int_equal(ib_partition_subject(subject, sizeof(subject), "o", "k", 0, &e),
                     IB_ERR_INVALID_ARG);
    assert_string_equal(subject, "");
    assert_int_equal(
        ib_partition_subject(subject, sizeof(subject), "o", "k", IB_PARTITIONS_MAX + 1, &e),
        IB_ERR_INVALID_ARG);
    assert_int_equal(ib_partition_subject(subject, sizeof(subject), "o", "a b", 4, &e),
                     IB_ERR_INVALID_ARG);
    assert_string_equal(subject, "");
    assert_int_equal(ib_partition_subject(subject, 8, "orders", "account-17", 4, &e),
                     IB_ERR_INVALID_ARG);
    assert_string_equal(subject, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_values),
        cmocka_unit_test(test_every_byte_counts),
        cmocka_unit_test(test_pieces_are_the_concatenation),
        cmocka_unit_test(test_partition_in_range),
        cmocka_unit_test(test_keys_that_are_one_token),
        cmocka_unit_test(test_subject_is_base_partition_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
