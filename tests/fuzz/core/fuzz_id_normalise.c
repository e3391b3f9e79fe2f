/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: ib_id_normalise (and ib_uuid_derive) on arbitrary bytes.
 *
 * An accepted id comes out normalised, normalising it again gives the same
 * id, it packs and unpacks to itself, its version is in the set asked
 * for, and the uuid4-only, default (4 and 8) and any-version answers
 * differ only by the version rule. A refused id leaves "". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "uuid.h"

static void check_accepted(const char *out, size_t in_len, unsigned flags)
{
    char again[IB_ID_BUF_SIZE];
    uint8_t packed[16];
    char unpacked[IB_ID_BUF_SIZE];

    FUZZ_CHECK(in_len == 32 || in_len == 36);
    FUZZ_CHECK(ib_id_is_normalised(out));
    FUZZ_CHECK(ib_id_normalise(again, out, IB_ID_LEN, flags) == IB_ID_VALID);
    FUZZ_CHECK(strcmp(again, out) == 0);
    FUZZ_CHECK(ib_id_pack(packed, out));
    ib_id_unpack(unpacked, packed);
    FUZZ_CHECK(strcmp(unpacked, out) == 0);
    FUZZ_CHECK((packed[8] & 0xc0) == 0x80);
    unsigned set = flags == IB_ID_VERSIONS_DEFAULT ? IB_ID_VERSIONS_DEFAULT_SET : flags;
    FUZZ_CHECK((set & IB_ID_VERSION(packed[6] >> 4)) != 0);
    FUZZ_CHECK(ib_id_version(out, IB_ID_LEN) == packed[6] >> 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    char strict[IB_ID_BUF_SIZE];
    char any[IB_ID_BUF_SIZE];
    ib_id_reason r_strict = ib_id_normalise(strict, in, size, IB_ID_UUID4_ONLY);
    ib_id_reason r_any = ib_id_normalise(any, in, size, IB_ID_ANY_VERSION);

    FUZZ_CHECK(r_strict >= IB_ID_VALID && r_strict <= IB_ID_BAD_VARIANT);
    FUZZ_CHECK(r_any >= IB_ID_VALID && r_any <= IB_ID_BAD_VARIANT);
    if (r_strict == IB_ID_VALID) {
        check_accepted(strict, size, IB_ID_UUID4_ONLY);
        FUZZ_CHECK(r_any == IB_ID_VALID && strcmp(strict, any) == 0);
    } else {
        FUZZ_CHECK(strict[0] == '\0');
        FUZZ_CHECK(r_any == r_strict || (r_strict == IB_ID_BAD_VERSION &&
                                         (r_any == IB_ID_VALID || r_any == IB_ID_BAD_VARIANT)));
    }
    if (r_any == IB_ID_VALID)
        check_accepted(any, size, IB_ID_ANY_VERSION);
    else
        FUZZ_CHECK(any[0] == '\0');
    char dflt[IB_ID_BUF_SIZE];
    ib_id_reason r_default = ib_id_normalise(dflt, in, size, IB_ID_VERSIONS_DEFAULT);
    if (r_default == IB_ID_VALID) {
        check_accepted(dflt, size, IB_ID_VERSIONS_DEFAULT);
        FUZZ_CHECK(r_any == IB_ID_VALID && strcmp(dflt, any) == 0);
    } else {
        /* the default set holds 4: it refuses nothing uuid4-only accepts */
        FUZZ_CHECK(r_strict != IB_ID_VALID);
        FUZZ_CHECK(r_default == r_strict ||
                   (r_strict == IB_ID_BAD_VERSION && r_default == IB_ID_BAD_VARIANT));
    }

    /* Derivation: split the input at its middle into two C strings. */
    char *copy = malloc(size + 2);
    if (copy != NULL) {
        char d1[IB_ID_BUF_SIZE];
        char d2[IB_ID_BUF_SIZE];
        size_t half = size / 2;
        memcpy(copy, data, half);
        copy[half] = '\0';
        memcpy(copy + half + 1, data + half, size - half);
        copy[size + 1] = '\0';
        ib_uuid_derive(d1, copy, copy + half + 1);
        ib_uuid_derive(d2, copy, copy + half + 1);
        FUZZ_CHECK(strcmp(d1, d2) == 0);
        FUZZ_CHECK(ib_id_normalise(d2, d1, IB_ID_LEN, IB_ID_UUID4_ONLY) == IB_ID_VALID);
        free(copy);
    }
    return 0;
}
