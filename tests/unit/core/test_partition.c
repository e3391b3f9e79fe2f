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

/* A subject read back: every subject ib_partition_subject writes is in
 * place; the same key under another partition is misplaced and names
 * its own; anything else is not a partition subject of that base. */
static void test_subject_read_back(void **state)
{
    (void)state;
    ib_error e;
    char subject[256];
    uint32_t p = 99, b = 99;
    const char *keys[] = {"account-17", "k", "kunde-\xc3\xbc", "0123456789abcdef0123456789abcdef"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        for (uint32_t n = 1; n <= 1000; n = n * 3 + 1) {
            assert_int_equal(
                ib_partition_subject(subject, sizeof(subject), "orders.p", keys[i], n, &e), IB_OK);
            assert_int_equal(ib_partition_subject_read(subject, "orders.p", n, &p, &b),
                             IB_PARTITION_IN_PLACE);
            assert_int_equal(p, b);
            assert_int_equal(b, ib_partition_of(ib_partition_hash(keys[i], strlen(keys[i])), n));
        }
    /* account-17 among 16 is in partition 7 (the subject test above) */
    uint32_t own = ib_partition_of(ib_partition_hash(BYTES("account-17")), 16);
    snprintf(subject, sizeof(subject), "orders.p.%u.account-17", (own + 1) % 16);
    assert_int_equal(ib_partition_subject_read(subject, "orders.p", 16, &p, &b),
                     IB_PARTITION_MISPLACED);
    assert_int_equal(p, (own + 1) % 16);
    assert_int_equal(b, own);
    static const char *const not_ours[] = {
        "orders.q.1.k",      /* another base */
        "orders.pp.1.k",     /* a base that only starts the same */
        "orders.p",          /* nothing after it */
        "orders.p.1",        /* no key */
        "orders.p.1.",       /* an empty key */
        "orders.p.16.k",     /* past n */
        "orders.p.01.k",     /* a leading zero */
        "orders.p.x.k",      /* not a number */
        "orders.p.123456.k", /* too long a number */
        "orders.p.1.a.b",    /* a key of two tokens */
        "orders.p.1.\xff",   /* not UTF-8 */
        "orders.p..k",
    };
    for (size_t i = 0; i < sizeof(not_ours) / sizeof(not_ours[0]); i++) {
        p = b = 99;
        assert_int_equal(ib_partition_subject_read(not_ours[i], "orders.p", 16, &p, &b),
                         IB_PARTITION_NOT_OURS);
        assert_int_equal(p, 99);
    }
    assert_int_equal(ib_partition_subject_read("orders.p.0.k", "orders.p", 0, &p, &b),
                     IB_PARTITION_NOT_OURS);
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
        cmocka_unit_test(test_subject_read_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
