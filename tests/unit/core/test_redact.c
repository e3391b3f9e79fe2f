/* SPDX-License-Identifier: Apache-2.0 */
/* URL redaction (core/redact.h): one table of what users put in
 * --nats-url, recorder URIs and the http plugin's url=, and what may be
 * shown of it. */
#include <string.h>

#include "ib_test.h"
#include "redact.h"

typedef struct redact_case {
    const char *in;
    const char *shown;
} redact_case;

static const redact_case cases[] = {
    /* nothing to hide */
    {"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
    {"127.0.0.1:4222", "127.0.0.1:4222"},
    {"nats://[::1]:4222", "nats://[::1]:4222"},
    {"sqlite:/var/lib/ibus/processed.db", "sqlite:/var/lib/ibus/processed.db"},
    {"sqlite::memory:", "sqlite::memory:"},
    {"memory:", "memory:"},
    {"kv:ibus-markers", "kv:ibus-markers"},
    {"http://127.0.0.1:8080/events", "http://127.0.0.1:8080/events"},
    {"", ""},
    /* userinfo: user and password, a token, with and without a scheme */
    {"nats://user:pass@127.0.0.1:4222", "nats://127.0.0.1:4222"},
    {"nats://s3cret-token@127.0.0.1:4222", "nats://127.0.0.1:4222"},
    {"tls://u:p@nats.example:4443", "tls://nats.example:4443"},
    {"u:p@127.0.0.1:4222", "127.0.0.1:4222"},
    {"https://user:pass@api.example/hooks", "https://api.example/hooks"},
    /* a password holding '@' or '/' is hidden whole */
    {"nats://u:p@ss@h:4222", "nats://h:4222"},
    {"nats://u:pa/ss@h:4222", "nats://h:4222"},
    /* lists: each element on its own */
    {"nats://a:1@h1:4222,nats://h2:4222,u:p@h3", "nats://h1:4222,nats://h2:4222,h3"},
    /* query values, keys kept; an item without '=' is a value */
    {"https://h/p?api_key=SECRET&x=1", "https://h/p?api_key=REDACTED&x=REDACTED"},
    {"https://h/p?SECRET", "https://h/p?REDACTED"},
    {"https://h/p?a=&b;c=d", "https://h/p?a=&REDACTED;c=REDACTED"},
    {"https://h/p?", "https://h/p?"},
    {"https://u:p@h/p?k=v#frag", "https://h/p?k=REDACTED#REDACTED"},
    {"https://h/p#access_token=x", "https://h/p#REDACTED"},
    /* recorder URIs: a comma inside a query value belongs to it */
    {"kv:m?url=nats://u:p@a:4222,nats://u:p@b:4222&creds=/etc/ibus/m.creds&replicas=3",
     "kv:m?url=REDACTED&creds=REDACTED&replicas=REDACTED"},
    {"sqlite:x.db?synchronous=full&mode=0640", "sqlite:x.db?synchronous=REDACTED&mode=REDACTED"},
    {"memory:?capacity=10", "memory:?capacity=REDACTED"},
};

static void table(void **state)
{
    (void)state;
    char out[IB_REDACT_MAX];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ib_redact_url(out, sizeof(out), cases[i].in);
        if (strcmp(out, cases[i].shown) != 0)
            fail_msg("case %zu: '%s' shown as '%s', want '%s'", i, cases[i].in, out,
                     cases[i].shown);
    }
}

/* NULL is "", a small buffer is cut and stays terminated, and a secret
 * never shows up in any prefix of the output. */
static void null_and_short_buffers(void **state)
{
    (void)state;
    char out[64];
    assert_string_equal(ib_redact_url(out, sizeof(out), NULL), "");
    assert_null(ib_redact_url(NULL, 10, "x"));
    out[0] = 'x';
    ib_redact_url(out, 0, "nats://h");
    assert_int_equal(out[0], 'x');
    const char *in = "nats://user:hunter2@h:4222?token=hunter3";
    for (size_t cap = 1; cap <= sizeof(out); cap++) {
        memset(out, 'z', sizeof(out));
        ib_redact_url(out, cap, in);
        assert_true(strlen(out) < cap);
        assert_null(strstr(out, "hunter"));
        assert_null(strstr(out, "user"));
    }
    assert_string_equal(ib_redact_url(out, 12, "nats://h:4222"), "nats://h:42");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(table),
    cmocka_unit_test(null_and_short_buffers),
};

IB_TEST_MAIN(tests)
