/* SPDX-License-Identifier: Apache-2.0 */
/* ib_event_id_derive (issue 25, item 7): ids for keys that are not UUIDs.
 * The vectors were computed once with Python's hashlib and uuid modules,
 * from the formula idempotency.h documents; they must never change, or a
 * producer upgraded mid-retry would give the same webhook two ids. */
#include <string.h>

#include "ib_test.h"
#include <infinity_bus/idempotency.h>

static void fixed_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *ns, *key;
        size_t len;
        const char *id;
    } v[] = {
        {IB_EVENT_ID_NAMESPACE, "evt_1NbV3Q2eZvKYlo2C", 20, "53237e60d0088c8dba4231d408794e1b"},
        {IB_EVENT_ID_NAMESPACE, "", 0, "70be1fa8a29886e98f821bb0f5d452c1"},
        /* the RFC's URL namespace in its dashed form, which is version 1 */
        {"6ba7b811-9dad-11d1-80b4-00c04fd430c8", "https://example.com/", 20,
         "a7459728b9258c1ca2ce2a533762d110"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[IB_EVENT_ID_SIZE];
        ib_error err;
        assert_int_equal(ib_event_id_derive(out, v[i].ns, v[i].key, v[i].len, &err), IB_OK);
        assert_string_equal(out, v[i].id);
        /* a version 8 id with the RFC variant, which consumers accept by
         * default as they accept any version (issue 33) */
        char norm[IB_EVENT_ID_SIZE];
        assert_int_equal(out[12], '8');
        assert_int_equal(ib_event_id_normalise(norm, out, strlen(out), true, &err), IB_OK);
        assert_int_equal(ib_event_id_normalise(norm, out, strlen(out), false, &err), IB_OK);
        assert_string_equal(norm, out);
    }
}

/* Any bytes, across several SHA-256 blocks: 768 bytes, every value. */
static void binary_key_over_many_blocks(void **state)
{
    (void)state;
    unsigned char key[768];
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (unsigned char)i;
    char out[IB_EVENT_ID_SIZE];
    assert_int_equal(ib_event_id_derive(out, IB_EVENT_ID_NAMESPACE, key, sizeof(key), NULL), IB_OK);
    assert_string_equal(out, "830ae11f713881e4b56d516330f858f0");
}

/* The namespace separates equal keys; the key's every byte counts. */
static void namespace_and_key_both_count(void **state)
{
    (void)state;
    char a[IB_EVENT_ID_SIZE], b[IB_EVENT_ID_SIZE], c[IB_EVENT_ID_SIZE];
    assert_int_equal(ib_event_id_derive(a, IB_EVENT_ID_NAMESPACE, "evt_1", 5, NULL), IB_OK);
    assert_int_equal(
        ib_event_id_derive(b, "6ba7b811-9dad-11d1-80b4-00c04fd430c8", "evt_1", 5, NULL), IB_OK);
    assert_int_equal(ib_event_id_derive(c, IB_EVENT_ID_NAMESPACE, "evt_1\0", 6, NULL), IB_OK);
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, c);
}

static void bad_arguments(void **state)
{
    (void)state;
    char out[IB_EVENT_ID_SIZE];
    ib_error err;
    assert_int_equal(ib_event_id_derive(out, "not-a-uuid", "k", 1, &err), IB_ERR_INVALID_ID);
    assert_string_equal(out, "");
    assert_non_null(strstr(err.msg, "derive id: namespace:"));
    assert_int_equal(ib_event_id_derive(out, NULL, "k", 1, &err), IB_ERR_INVALID_ID);
    assert_int_equal(ib_event_id_derive(out, IB_EVENT_ID_NAMESPACE, NULL, 3, &err),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(ib_event_id_derive(NULL, IB_EVENT_ID_NAMESPACE, "k", 1, &err),
                     IB_ERR_INVALID_ARG);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(fixed_vectors),
    cmocka_unit_test(binary_key_over_many_blocks),
    cmocka_unit_test(namespace_and_key_both_count),
    cmocka_unit_test(bad_arguments),
};

IB_TEST_MAIN(tests)
