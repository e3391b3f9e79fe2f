/* SPDX-License-Identifier: Apache-2.0 */
/* The recorder API around the kinds: URI grammar (table-driven), option
 * handling, and the wrappers' fallbacks for a kind that offers only the
 * seed's two calls. */
#include "ib_test.h"
#include "recorder_internal.h"
#include "redact.h"
#include "rtest.h"
#include "clock.h"

/* --- URIs -------------------------------------------------------------- */

typedef struct uri_case {
    const char *uri;
    ib_status status;
    /* expected on success */
    ib__recorder_kind kind;
    const char *path;
    size_t capacity;
    ib__sqlite_sync sync;
    int busy_ms;
    unsigned mode;
    /* expected in the message on failure */
    const char *reason;
} uri_case;

#define GOOD(u, k, p, cap, sy, busy, md)                                                           \
    {                                                                                              \
        u, IB_OK, k, p, cap, sy, busy, md, NULL                                                    \
    }
#define BAD(u, why)                                                                                \
    {                                                                                              \
        u, IB_ERR_CONFIG, 0, NULL, 0, 0, 0, 0, why                                                 \
    }
#define MEM IB__RECORDER_MEMORY
#define SQL IB__RECORDER_SQLITE
#define FULL IB__SQLITE_SYNC_FULL /* the default: durable */

static const uri_case uri_cases[] = {
    GOOD("memory:", MEM, "", 0, FULL, 10000, 0600),
    GOOD("MEMORY:", MEM, "", 0, FULL, 10000, 0600),
    GOOD("memory:?capacity=10", MEM, "", 10, FULL, 10000, 0600),
    GOOD("memory:?capacity=1073741824", MEM, "", 1073741824, FULL, 10000, 0600),
    GOOD("sqlite:processed.db", SQL, "processed.db", 0, FULL, 10000, 0600),
    GOOD("sqlite::memory:", SQL, ":memory:", 0, FULL, 10000, 0600),
    GOOD("Sqlite:/var/lib/ibus/m.db", SQL, "/var/lib/ibus/m.db", 0, FULL, 10000, 0600),
    GOOD("sqlite:m.db?synchronous=full&busy_timeout_ms=5000&mode=0640", SQL, "m.db", 0,
         IB__SQLITE_SYNC_FULL, 5000, 0640),
    GOOD("sqlite:m.db?synchronous=OFF", SQL, "m.db", 0, IB__SQLITE_SYNC_OFF, 10000, 0600),
    GOOD("sqlite:m.db?synchronous=extra", SQL, "m.db", 0, IB__SQLITE_SYNC_EXTRA, 10000, 0600),
    GOOD("sqlite:m.db?mode=600", SQL, "m.db", 0, FULL, 10000, 0600),
    GOOD("sqlite:m.db?mode=0777", SQL, "m.db", 0, FULL, 10000, 0777),
    GOOD("sqlite:m.db?busy_timeout_ms=1", SQL, "m.db", 0, FULL, 1, 0600),
    GOOD("sqlite:m.db?busy_timeout_ms=86400000", SQL, "m.db", 0, FULL, 86400000, 0600),
    GOOD("sqlite::memory:?synchronous=normal", SQL, ":memory:", 0, IB__SQLITE_SYNC_NORMAL, 10000,
         0600),
    GOOD("sqlite:dir with space/a:b.db", SQL, "dir with space/a:b.db", 0, FULL, 10000, 0600),
    GOOD("kv:markers", IB__RECORDER_KV, "markers", 0, FULL, 10000, 0600),
    GOOD("kv:IB_markers-1", IB__RECORDER_KV, "IB_markers-1", 0, FULL, 10000, 0600),

    BAD(NULL, "recorder URI is empty"),
    BAD("", "recorder URI is empty"),
    BAD("memory", "no scheme"),
    BAD("processed.db", "no scheme"),
    BAD("redis://127.0.0.1", "unknown scheme 'redis:'"),
    BAD(":memory:", "unknown scheme ':'"),
    BAD("memory:foo", "memory: takes no path"),
    BAD("memory:?capacity=0", "capacity '0' is not a number between 1 and 1073741824"),
    BAD("memory:?capacity=abc", "capacity 'abc' is not a number"),
    BAD("memory:?capacity=-1", "capacity '-1' is not a number"),
    BAD("memory:?capacity= 5", "capacity ' 5' is not a number"),
    BAD("memory:?capacity=1073741825", "capacity '1073741825'"),
    BAD("memory:?capacity=99999999999999999999999", "capacity '99999999999999999999999'"),
    BAD("memory:?capacity=18446744073709551617", "capacity '18446744073709551617'"),
    BAD("memory:?capacity=", "parameter 'capacity' has an empty value"),
    BAD("memory:?capacity", "parameter 'capacity' has no value"),
    BAD("memory:?", "'?' without parameters"),
    BAD("memory:?capacity=1&capacity=2", "parameter 'capacity' given twice"),
    BAD("memory:?capacity=5&", "empty parameter"),
    BAD("memory:?&capacity=5", "empty parameter"),
    BAD("memory:?synchronous=full", "unknown parameter 'synchronous' (memory: takes capacity)"),
    BAD("sqlite:", "empty path"),
    BAD("sqlite:?mode=0600", "empty path"),
    BAD("sqlite:m.db?synchronous=fast", "synchronous 'fast' is not one of off, normal, full"),
    BAD("sqlite:m.db?busy_timeout_ms=0", "busy_timeout_ms '0' is not a number between 1 and"),
    BAD("sqlite:m.db?busy_timeout_ms=86400001", "busy_timeout_ms '86400001'"),
    BAD("sqlite:m.db?busy_timeout_ms=1e3", "busy_timeout_ms '1e3'"),
    BAD("sqlite:m.db?mode=0800", "mode '0800' is not octal permission bits"),
    BAD("sqlite:m.db?mode=0400", "giving the owner read and write"),
    BAD("sqlite:m.db?mode=01600", "mode '01600'"),
    BAD("sqlite:m.db?mode=rw", "mode 'rw'"),
    BAD("sqlite:m.db?capacity=3", "unknown parameter 'capacity' (sqlite: takes synchronous"),
    BAD("sqlite:m.db?=x", "parameter without a name"),
    BAD("sqlite:m.db?foo=bar", "unknown parameter 'foo'"),
    BAD("sqlite:m.db?mode=0600?x=1", "mode '0600?x=1'"),
    BAD("kv:", "empty bucket name"),
    BAD("kv:a.b", "bucket name may hold only"),
    BAD("kv:b?capacity=3", "unknown parameter 'capacity' (kv: takes replicas, ttl"),
    BAD("kv:b?replicas=0", "replicas '0' is not a number between 1 and 5"),
    BAD("kv:b?replicas=6", "replicas '6'"),
    BAD("kv:b?ttl=5w", "ttl '5w' is not a duration"),
    BAD("kv:b?ttl=h", "ttl 'h' is not a duration"),
    BAD("kv:b?min_ttl=99999d", "min_ttl '99999d'"),
    BAD("kv:b?max_bytes=0", "max_bytes '0' is not a positive number"),
    BAD("kv:b?create=yes", "create 'yes' is not 0 or 1"),
    BAD("kv:b?create=1&create=1", "parameter 'create' given twice"),
    BAD("kv:b?mode=0600", "unknown parameter 'mode' (kv:"),
    BAD("sqlite:m.db?ttl=1h", "unknown parameter 'ttl' (sqlite:"),
};

static void test_uri_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(uri_cases) / sizeof(uri_cases[0]); i++) {
        const uri_case *c = &uri_cases[i];
        ib__recorder_config cfg;
        ib_error err;
        ib_error_clear(&err);
        ib_status st = ib__recorder_config_parse(&cfg, c->uri, NULL, &err);
        if (st != c->status)
            fail_msg("'%s': got %s (%s), want %s", c->uri ? c->uri : "(null)", ib_status_str(st),
                     err.msg, ib_status_str(c->status));
        if (st != IB_OK) {
            if (strstr(err.msg, c->reason) == NULL)
                fail_msg("'%s': message '%s' lacks '%s'", c->uri, err.msg, c->reason);
            assert_int_equal(err.status, st);
            /* The message names the URI, as it may be shown (issue 32:
             * no query values). */
            if (c->uri != NULL && c->uri[0] != '\0') {
                char shown[IB_REDACT_MAX], named[IB_REDACT_MAX + 32];
                ib_redact_url(shown, sizeof(shown), c->uri);
                snprintf(named, sizeof(named), "recorder URI '%s'", shown);
                if (strstr(err.msg, named) == NULL)
                    fail_msg("'%s': message '%s' lacks %s", c->uri, err.msg, named);
            }
            continue;
        }
        assert_int_equal(cfg.kind, c->kind);
        assert_string_equal(cfg.path, c->path);
        assert_int_equal(cfg.memory_capacity, c->capacity);
        assert_int_equal(cfg.synchronous, c->sync);
        assert_int_equal(cfg.busy_timeout_ms, c->busy_ms);
        assert_int_equal(cfg.file_mode, c->mode);
        assert_ptr_equal(cfg.now_ms, ib_clock_realtime_ms);
    }
}

static void test_uri_message_is_bounded_and_printable(void **state)
{
    (void)state;
    char uri[6000];
    ib__recorder_config cfg;
    ib_error err;
    /* A path longer than any file system allows. */
    memcpy(uri, "sqlite:", 7);
    memset(uri + 7, 'a', 5000);
    uri[5007] = '\0';
    assert_int_equal(ib__recorder_config_parse(&cfg, uri, NULL, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "path is longer than 4095 bytes"));
    assert_non_null(strstr(err.msg, "aaa...'"));
    /* Control bytes never reach a log line. */
    assert_int_equal(ib__recorder_config_parse(&cfg, "memory:\n\x1b[31m", NULL, &err),
                     IB_ERR_CONFIG);
    for (const char *p = err.msg; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
    assert_non_null(strstr(err.msg, "memory:??[31m"));
}

static int64_t fixed_clock(void)
{
    return 42;
}

static void test_options_and_uri_precedence(void **state)
{
    (void)state;
    ib__recorder_config cfg;
    ib_error err;
    ib_recorder_options o = {.size = sizeof(o),
                             .memory_capacity = 77,
                             .sqlite_busy_timeout_ms = 2000,
                             .sqlite_synchronous = "full",
                             .sqlite_file_mode = 0640,
                             .now_ms = fixed_clock};
    assert_int_equal(ib__recorder_config_parse(&cfg, "sqlite:x.db", &o, &err), IB_OK);
    assert_int_equal(cfg.busy_timeout_ms, 2000);
    assert_int_equal(cfg.synchronous, IB__SQLITE_SYNC_FULL);
    assert_int_equal(cfg.file_mode, 0640);
    assert_ptr_equal(cfg.now_ms, fixed_clock);
    /* The URI wins over options. */
    assert_int_equal(
        ib__recorder_config_parse(
            &cfg, "sqlite:x.db?busy_timeout_ms=3000&synchronous=off&mode=0600", &o, &err),
        IB_OK);
    assert_int_equal(cfg.busy_timeout_ms, 3000);
    assert_int_equal(cfg.synchronous, IB__SQLITE_SYNC_OFF);
    assert_int_equal(cfg.file_mode, 0600);
    assert_int_equal(ib__recorder_config_parse(&cfg, "memory:", &o, &err), IB_OK);
    assert_int_equal(cfg.memory_capacity, 77);
    assert_int_equal(ib__recorder_config_parse(&cfg, "memory:?capacity=5", &o, &err), IB_OK);
    assert_int_equal(cfg.memory_capacity, 5);

    /* A caller built against a shorter struct: fields past its size are
     * not read. */
    ib_recorder_options old = o;
    old.size = offsetof(ib_recorder_options, now_ms);
    assert_int_equal(ib__recorder_config_parse(&cfg, "memory:", &old, &err), IB_OK);
    assert_ptr_equal(cfg.now_ms, ib_clock_realtime_ms);
    assert_int_equal(cfg.memory_capacity, 77);

    /* Bad options are configuration errors too. */
    ib_recorder_options bad = {.size = sizeof(bad), .sqlite_synchronous = "sometimes"};
    assert_int_equal(ib__recorder_config_parse(&cfg, "sqlite:x.db", &bad, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "option sqlite_synchronous"));
    bad = (ib_recorder_options){.size = sizeof(bad), .sqlite_file_mode = 0200};
    assert_int_equal(ib__recorder_config_parse(&cfg, "sqlite:x.db", &bad, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "option sqlite_file_mode"));
    bad = (ib_recorder_options){.size = sizeof(bad), .sqlite_busy_timeout_ms = -1};
    assert_int_equal(ib__recorder_config_parse(&cfg, "sqlite:x.db", &bad, &err), IB_ERR_CONFIG);
    bad = (ib_recorder_options){.size = sizeof(bad), .memory_capacity = (size_t)1 << 31};
    assert_int_equal(ib__recorder_config_parse(&cfg, "memory:", &bad, &err), IB_ERR_CONFIG);
}

#define CHECK_PARSE(cfg, uri)                                                                      \
    do {                                                                                           \
        if (ib__recorder_config_parse((cfg), (uri), NULL, &err) != IB_OK)                          \
            fail_msg("'%s': %s", (uri), err.msg);                                                  \
    } while (0)

static void test_kv_parameters(void **state)
{
    (void)state;
    ib__recorder_config cfg;
    ib_error err;
    CHECK_PARSE(&cfg, "kv:markers");
    assert_int_equal(cfg.kv_replicas, 0);
    assert_int_equal(cfg.kv_ttl_ms, -1);
    assert_int_equal(cfg.kv_min_ttl_ms, 0);
    assert_false(cfg.kv_create);
    assert_string_equal(cfg.kv_url, "");
    CHECK_PARSE(&cfg, "kv:m?replicas=3&ttl=2h&min_ttl=90m&max_bytes=1000000&create=1"
                      "&url=nats://a:4222,nats://b:4222&creds=/etc/ibus/m.creds");
    assert_int_equal(cfg.kv_replicas, 3);
    assert_int_equal(cfg.kv_ttl_ms, 2 * 3600000);
    assert_int_equal(cfg.kv_min_ttl_ms, 90 * 60000);
    assert_int_equal(cfg.kv_max_bytes, 1000000);
    assert_true(cfg.kv_create);
    assert_string_equal(cfg.kv_url, "nats://a:4222,nats://b:4222");
    assert_string_equal(cfg.kv_creds, "/etc/ibus/m.creds");
    /* units: none = seconds; 0 = keep forever */
    CHECK_PARSE(&cfg, "kv:m?ttl=30&min_ttl=1500ms");
    assert_int_equal(cfg.kv_ttl_ms, 30000);
    assert_int_equal(cfg.kv_min_ttl_ms, 1500);
    CHECK_PARSE(&cfg, "kv:m?ttl=0&create=0");
    assert_int_equal(cfg.kv_ttl_ms, 0);
    assert_false(cfg.kv_create);
}

/* domain= and api_prefix= (issue 45): the bucket's JetStream API prefix,
 * else the caller's for a bucket on the caller's connection, never the
 * caller's for a url= of its own. */
static void test_kv_domain(void **state)
{
    (void)state;
    static const struct {
        const char *uri, *caller, *want;
    } ok[] = {
        {"kv:m", NULL, "$JS.API"},
        {"kv:m", "", "$JS.API"},
        {"kv:m", "$JS.edge.API", "$JS.edge.API"},
        {"kv:m?domain=edge", NULL, "$JS.edge.API"},
        {"kv:m?domain=hub", "$JS.edge.API", "$JS.hub.API"},
        {"kv:m?api_prefix=imp.JS.API", NULL, "imp.JS.API"},
        {"kv:m?api_prefix=imp.JS.API.", NULL, "imp.JS.API"},
        {"kv:m?url=nats://a:4222", "$JS.edge.API", "$JS.API"},
        {"kv:m?url=nats://a:4222&domain=edge", NULL, "$JS.edge.API"},
    };
    static const struct {
        const char *uri, *why;
    } bad[] = {
        {"kv:m?domain=a.b", "domain 'a.b' holds '.'"},
        {"kv:m?domain=a*", "domain 'a*' holds '.'"},
        {"kv:m?api_prefix=a..b", "api_prefix 'a..b' has an empty token"},
        {"kv:m?api_prefix=$JS.>", "holds a wildcard"},
        {"kv:m?domain=edge&api_prefix=x", "domain and api_prefix exclude each other"},
        {"sqlite:x.db?domain=edge", "unknown parameter 'domain'"},
    };
    ib__recorder_config cfg;
    ib_error err;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ib_recorder_options o = {.size = sizeof(o), .kv_js_api_prefix = ok[i].caller};
        if (ib__recorder_config_parse(&cfg, ok[i].uri, &o, &err) != IB_OK)
            fail_msg("'%s': %s", ok[i].uri, err.msg);
        if (strcmp(cfg.kv_api_prefix, ok[i].want) != 0)
            fail_msg("'%s' with '%s': %s, not %s", ok[i].uri, ok[i].caller ? ok[i].caller : "",
                     cfg.kv_api_prefix, ok[i].want);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(ib__recorder_config_parse(&cfg, bad[i].uri, NULL, &err), IB_ERR_CONFIG);
        if (strstr(err.msg, bad[i].why) == NULL)
            fail_msg("'%s': %s", bad[i].uri, err.msg);
    }
    /* a caller's prefix that is no prefix is the caller's mistake, named */
    ib_recorder_options o = {.size = sizeof(o), .kv_js_api_prefix = "a b"};
    assert_int_equal(ib__recorder_config_parse(&cfg, "kv:m", &o, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "kv_js_api_prefix"));
}

static void test_open_refusals(void **state)
{
    (void)state;
    ib_recorder *r = (ib_recorder *)&r;
    ib_error err;
    /* kv: needs a connection: its own (url=) or the caller's */
    assert_int_equal(ib_recorder_open(&r, "kv:markers", NULL, &err), IB_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "kv:markers"));
    assert_non_null(strstr(err.msg, "no NATS connection"));
    assert_null(r);
    r = (ib_recorder *)&r;
    assert_int_equal(ib_recorder_open(&r, "mongo:x", NULL, &err), IB_ERR_CONFIG);
    assert_null(r);
    assert_int_equal(ib_recorder_open(NULL, "memory:", NULL, &err), IB_ERR_INVALID_ARG);
    /* A NULL error pointer is allowed everywhere. */
    assert_int_equal(ib_recorder_open(&r, "bogus", NULL, NULL), IB_ERR_CONFIG);
    ib_recorder_close(NULL);
    assert_string_equal(ib_recorder_kind(NULL), "none");
}

/* --- a kind with only the seed's two calls ---------------------------- */

#define SEED_MAX 64

typedef struct seed_recorder {
    ib_recorder base;
    char keys[SEED_MAX][IB_CONSUMER_MAX + IB_ID_BUF_SIZE + 2];
    unsigned n;
    unsigned is_calls, mark_calls;
} seed_recorder;

static void key_of(char *out, size_t len, const char *consumer, const char *id)
{
    snprintf(out, len, "%s|%s", consumer, id);
}

static ib_status seed_is(ib_recorder *r, bool *processed, const char *consumer, const char *id,
                         ib_error *err)
{
    seed_recorder *s = (seed_recorder *)r;
    char k[sizeof(s->keys[0])];
    (void)err;
    key_of(k, sizeof(k), consumer, id);
    s->is_calls++;
    *processed = false;
    for (unsigned i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], k) == 0)
            *processed = true;
    return IB_OK;
}

static ib_status seed_mark(ib_recorder *r, const char *consumer, const char *id, ib_error *err)
{
    seed_recorder *s = (seed_recorder *)r;
    bool p;
    seed_is(r, &p, consumer, id, err);
    s->is_calls--;
    s->mark_calls++;
    if (!p && s->n < SEED_MAX)
        key_of(s->keys[s->n++], sizeof(s->keys[0]), consumer, id);
    return IB_OK;
}

static void seed_close(ib_recorder *r)
{
    (void)r;
}

static ib_status must_not_be_called(ib_recorder *r, const ib_marker_key *keys, size_t n,
                                    ib_error *err)
{
    (void)r;
    (void)keys;
    (void)n;
    (void)err;
    fail_msg("a slot past ops->size was called");
    return IB_OK;
}

/* The table is built with every slot, but says it is only as large as the
 * required calls: a kind built against an older header. The wrappers must
 * not read the slots past its size. */
static const ib_recorder_ops seed_ops = {
    .size = offsetof(ib_recorder_ops, check_batch),
    .kind = "seed",
    .is_processed = seed_is,
    .mark_processed = seed_mark,
    .close = seed_close,
    .mark_batch = must_not_be_called,
};

static void test_fallbacks_for_minimal_kind(void **state)
{
    (void)state;
    seed_recorder s = {.base = {.ops = &seed_ops, .now_ms = ib_clock_realtime_ms}};
    ib_recorder *r = &s.base;
    ib_error err;
    char a[IB_ID_BUF_SIZE], b[IB_ID_BUF_SIZE];
    rt_id(a, 1);
    rt_id(b, 2);
    ib_marker_key keys[2] = {{"c", a}, {"c", b}};
    bool out[2] = {true, true};
    ib_claim_state states[2];

    assert_string_equal(ib_recorder_kind(r), "seed");
    /* Batches become loops over the single calls. */
    assert_int_equal(ib_recorder_check_batch(r, out, keys, 2, &err), IB_OK);
    assert_false(out[0]);
    assert_false(out[1]);
    assert_int_equal(s.is_calls, 2);
    assert_int_equal(ib_recorder_mark_batch(r, keys, 1, &err), IB_OK);
    assert_int_equal(s.mark_calls, 1);
    /* A claim without support: DONE if marked, else ACQUIRED for anyone. */
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(r, &cs, "c", a, "A", 1000, &err), IB_OK);
    assert_int_equal(cs, IB_CLAIM_DONE);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", b, "A", 1000, &err), IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    assert_int_equal(ib_recorder_claim(r, &cs, "c", b, "B", 1000, &err), IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    assert_int_equal(ib_recorder_claim_batch(r, states, keys, 2, "A", 1000, &err), IB_OK);
    assert_int_equal(states[0], IB_CLAIM_DONE);
    assert_int_equal(states[1], IB_CLAIM_ACQUIRED);
    /* Release is a no-op; arguments are still checked. */
    assert_int_equal(ib_recorder_release(r, "c", b, "A", &err), IB_OK);
    assert_int_equal(ib_recorder_release_batch(r, keys, 2, "A", &err), IB_OK);
    assert_int_equal(ib_recorder_release(r, "c", "bad", "A", &err), IB_ERR_INVALID_ARG);
    /* Admin calls are unsupported, and say so. */
    bool found;
    int64_t ts;
    uint64_t removed;
    ib_recorder_stats st;
    assert_int_equal(ib_recorder_lookup(r, &found, &ts, "c", a, &err), IB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "recorder seed: lookup is not supported"));
    assert_int_equal(ib_recorder_forget(r, &found, "c", a, &err), IB_ERR_UNSUPPORTED);
    assert_int_equal(ib_recorder_prune(r, &removed, 0, &err), IB_ERR_UNSUPPORTED);
    assert_int_equal(ib_recorder_stats_get(r, &st, &err), IB_ERR_UNSUPPORTED);
    assert_int_equal(ib_recorder_list(r, NULL, 0, NULL, NULL, &err), IB_ERR_INVALID_ARG);
    /* The seed protocol itself. */
    assert_int_equal(ib_recorder_mark(r, "c", b, &err), IB_OK);
    assert_int_equal(ib_recorder_is_processed(r, &found, "c", b, &err), IB_OK);
    assert_true(found);
    ib_recorder_close(r);
}

static void test_realtime_clock(void **state)
{
    (void)state;
    int64_t now = ib_clock_realtime_ms();
    /* After 2020-01-01 and before 2100-01-01, in ms. */
    assert_true(now > 1577836800000LL);
    assert_true(now < 4102444800000LL);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_uri_table),
    cmocka_unit_test(test_uri_message_is_bounded_and_printable),
    cmocka_unit_test(test_options_and_uri_precedence),
    cmocka_unit_test(test_kv_parameters),
    cmocka_unit_test(test_kv_domain),
    cmocka_unit_test(test_open_refusals),
    cmocka_unit_test(test_fallbacks_for_minimal_kind),
    cmocka_unit_test(test_realtime_clock),
};

IB_TEST_MAIN(tests)
