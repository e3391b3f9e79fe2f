/* SPDX-License-Identifier: Apache-2.0 */
/* Partitions: FNV-1a-32 exactly (the published test values of the
 * function, which nats-server's mapping computes too), hashing in pieces
 * as the server hashes several tokens, and the modulo's edges. The
 * agreement with a real server is it_partition. */
#include "ib_test.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_values),
        cmocka_unit_test(test_every_byte_counts),
        cmocka_unit_test(test_pieces_are_the_concatenation),
        cmocka_unit_test(test_partition_in_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
