/* SPDX-License-Identifier: Apache-2.0 */
/* NKey seeds: encode a user seed, derive its public key, refuse damage. */
#include "ib_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nkey.h"

static void derive_from_encoded_seed(void **state)
{
    (void)state;
    uint8_t raw[32];
    char seed[59], pub[IB_NKEY_PUBLIC_LEN + 1], pub2[IB_NKEY_PUBLIC_LEN + 1];
    for (int i = 0; i < 32; i++)
        raw[i] = (uint8_t)(i * 7 + 1);
    ib_nkey_encode_user_seed(seed, raw);
    assert_int_equal(strlen(seed), 58);
    assert_memory_equal(seed, "SU", 2);
    assert_int_equal(ib_nkey_public_from_seed(pub, seed, strlen(seed), NULL), IB_OK);
    assert_int_equal(strlen(pub), IB_NKEY_PUBLIC_LEN);
    assert_int_equal(pub[0], 'U');
    /* deterministic, and a different seed gives a different key */
    assert_int_equal(ib_nkey_public_from_seed(pub2, seed, strlen(seed), NULL), IB_OK);
    assert_string_equal(pub, pub2);
    raw[0] ^= 1;
    ib_nkey_encode_user_seed(seed, raw);
    assert_int_equal(ib_nkey_public_from_seed(pub2, seed, strlen(seed), NULL), IB_OK);
    assert_string_not_equal(pub, pub2);
}

static void refuses_damaged_seeds(void **state)
{
    (void)state;
    uint8_t raw[32] = {0};
    char seed[59], pub[IB_NKEY_PUBLIC_LEN + 1];
    ib_error e;
    ib_nkey_encode_user_seed(seed, raw);
    seed[20] = seed[20] == 'A' ? 'B' : 'A'; /* checksum breaks */
    assert_int_equal(ib_nkey_public_from_seed(pub, seed, strlen(seed), &e), IB_ERR_CONFIG);
    assert_string_equal(e.msg, "nkey seed: checksum mismatch");
    assert_int_equal(ib_nkey_public_from_seed(pub, "SUAB", 4, &e), IB_ERR_CONFIG);
    assert_string_equal(e.msg, "nkey seed: not a 58-character base32 seed");
    ib_nkey_encode_user_seed(seed, raw);
    seed[5] = '1'; /* not in the base32 alphabet */
    assert_int_equal(ib_nkey_public_from_seed(pub, seed, strlen(seed), &e), IB_ERR_CONFIG);
}

static void reads_seed_files(void **state)
{
    (void)state;
    uint8_t raw[32];
    char seed[59], pub[IB_NKEY_PUBLIC_LEN + 1], want[IB_NKEY_PUBLIC_LEN + 1];
    char path[] = "/tmp/ib-nkey-XXXXXX";
    ib_error e;
    memset(raw, 0x5a, sizeof(raw));
    ib_nkey_encode_user_seed(seed, raw);
    assert_int_equal(ib_nkey_public_from_seed(want, seed, strlen(seed), NULL), IB_OK);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# user seed\n  %s\n", seed);
    fclose(f);
    assert_int_equal(ib_nkey_public_from_seed_file(pub, path, &e), IB_OK);
    assert_string_equal(pub, want);
    f = fopen(path, "w");
    fprintf(f, "nothing here\n");
    fclose(f);
    assert_int_equal(ib_nkey_public_from_seed_file(pub, path, &e), IB_ERR_CONFIG);
    unlink(path);
    assert_int_equal(ib_nkey_public_from_seed_file(pub, path, &e), IB_ERR_IO);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(derive_from_encoded_seed),
    cmocka_unit_test(refuses_damaged_seeds),
    cmocka_unit_test(reads_seed_files),
};
IB_TEST_MAIN(tests)
