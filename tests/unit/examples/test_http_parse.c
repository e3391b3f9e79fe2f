/* SPDX-License-Identifier: Apache-2.0 */
/* The http plugin's parsers and bodies (plugin/examples/http/http_parse.c,
 * http_body.c), table-driven: its configuration string, Retry-After, and
 * the JSON and protobuf bodies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_body.h"
#include "http_headers.h"
#include "http_json.h"
#include "http_parse.h"
#include "ib_test.h"

static void config_accepts_every_key(void **state)
{
    (void)state;
    ib_http_config c;
    char err[256];
    assert_int_equal(
        ib_http_config_parse(&c,
                             "url=https://127.0.0.1:8443/e,types=a.b c.d,timeout=1500ms,"
                             "concurrency=8,header=X-A: 1,header=X-B:two,"
                             "header_file=/h,format=protobuf,ca=/ca,cert=/c,key=/k",
                             err, sizeof(err)),
        0);
    assert_string_equal(c.url, "https://127.0.0.1:8443/e");
    assert_int_equal(c.type_count, 2);
    assert_true(ib_http_config_wants(&c, "c.d"));
    assert_false(ib_http_config_wants(&c, "a"));
    assert_int_equal(c.timeout_ms, 1500);
    assert_int_equal(c.concurrency, 8);
    assert_int_equal(c.header_count, 2);
    assert_string_equal(c.headers[0], "X-A: 1");
    assert_string_equal(c.headers[1], "X-B: two");
    assert_int_equal(c.format, IB_HTTP_PROTOBUF);
    assert_string_equal(c.key, "/k");
    assert_int_equal(ib_http_config_add_header_text(&c, "# token\r\n\nAuthorization: Bearer s\r\n",
                                                    err, sizeof(err)),
                     0);
    assert_string_equal(c.headers[2], "Authorization: Bearer s");
    ib_http_config_free(&c);

    assert_int_equal(ib_http_config_parse(&c, "url=http://x/", err, sizeof(err)), 0);
    assert_int_equal(c.timeout_ms, IB_HTTP_DEFAULT_TIMEOUT_MS);
    assert_true(ib_http_config_wants(&c, "anything"));
    assert_int_equal(c.format, IB_HTTP_JSON);
    ib_http_config_free(&c);
    ib_http_config_free(NULL);
}

static void config_refuses_with_a_reason(void **state)
{
    (void)state;
    static const struct {
        const char *config, *why;
    } bad[] = {
        {"", "url= is required"},
        {"url=ftp://x/", "expected an http:// or https:// URL"},
        {"url=http://x/,url=http://y/", "url= given twice"},
        {"url=http://x/,timeout=0", "timeout=0"},
        {"url=http://x/,timeout=5m", "timeout=5m"},
        {"url=http://x/,concurrency=0", "concurrency=0"},
        {"url=http://x/,format=xml", "format=xml"},
        {"url=http://x/,header=NoColon", "expected Name:Value"},
        {"url=http://x/,header=Bad Name:v", "expected Name:Value"},
        {"url=http://x/,header=Idempotency-Key:x", "sets this header itself"},
        {"url=http://x/,cert=/c", "go together"},
        {"url=http://x/,nope=1", "unknown key 'nope'"},
        {"url=http://x/,types=", "types: expected"},
        {"url=http://x/,plain", "expected key=value"},
        /* issue 32: a control byte in a value that reaches the request */
        {"url=http://x/\r\nX-Injected: 1", "url=: a control byte"},
        {"url=http://x/\001", "url=: a control byte"},
        {"url=http://x/,ca=/etc/ca\n.pem", "ca=: a control byte"},
        {"url=http://x/,header_file=/etc/t\r", "header_file=: a control byte"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ib_http_config c;
        char err[256] = "";
        if (ib_http_config_parse(&c, bad[i].config, err, sizeof(err)) != -1 ||
            strstr(err, bad[i].why) == NULL)
            fail_msg("'%s': got '%s', expected '%s'", bad[i].config, err, bad[i].why);
    }
    /* a header's value (often a token) is never echoed back */
    ib_http_config c;
    char err[256] = "";
    assert_int_equal(ib_http_config_parse(&c, "url=http://x/", err, sizeof(err)), 0);
    assert_int_equal(ib_http_config_add_header_text(&c, "X-T: secret\001", err, sizeof(err)), -1);
    assert_null(strstr(err, "secret"));
    ib_http_config_free(&c);
    /* a refused url= is shown without its userinfo and query values */
    assert_int_equal(
        ib_http_config_parse(&c, "url=ftp://user:pw-9c1@x/p?api_key=k-7f3", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "ftp://x/p?api_key=REDACTED"));
    assert_null(strstr(err, "pw-9c1"));
    assert_null(strstr(err, "k-7f3"));
}

static void retry_after_reads_seconds_and_dates(void **state)
{
    (void)state;
    /* 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT */
    static const struct {
        const char *value;
        int rc;
        int64_t ms;
    } cases[] = {
        {"120", 0, 120000},
        {" 2 ", 0, 2000},
        {"0", 0, 0},
        {"99999999999999999999", 0, 86400000},
        {"Wed, 21 Oct 2015 07:28:00 GMT", 0, 30000},
        {"Wed, 21 Oct 2015 07:27:00 GMT", 0, 0},
        {"Wed, 21 Oct 2015 07:28:00 UTC", -1, 0},
        {"Wed, 21 Foo 2015 07:28:00 GMT", -1, 0},
        {"-1", -1, 0},
        {"1.5", -1, 0},
        {"", -1, 0},
        {"soon", -1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ms = -7;
        int rc = ib_http_retry_after_ms(&ms, cases[i].value, 1445412480 - 30);
        if (rc != cases[i].rc || (rc == 0 && ms != cases[i].ms))
            fail_msg("'%s': rc %d ms %lld", cases[i].value, rc, (long long)ms);
    }
}

/* Issue 31: the reason phrase of a status line, for a RETRY's reason. */
static void status_phrase_of_a_status_line(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        int rc;
        const char *phrase;
    } cases[] = {
        {"HTTP/1.1 503 Service Unavailable\r\n", 0, "Service Unavailable"},
        {"HTTP/1.0 500 Internal Server Error\r\n", 0, "Internal Server Error"},
        {"HTTP/1.1 429 Too\x01 Many\xff Requests  \r\n", 0, "Too Many Requests"},
        {"HTTP/2 503 \r\n", -1, ""},
        {"HTTP/2 503\r\n", -1, ""},
        {"HTTP/1.1 5x3 Nope\r\n", -1, ""},
        {"Retry-After: 2\r\n", -1, ""},
        {"HTTP/", -1, ""},
    };
    char out[64], small[6];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = ib_http_status_phrase(out, sizeof(out), cases[i].line, strlen(cases[i].line));
        if (rc != cases[i].rc || strcmp(out, cases[i].phrase) != 0)
            fail_msg("'%s': rc %d phrase '%s'", cases[i].line, rc, out);
    }
    const char *line = "HTTP/1.1 503 Service Unavailable";
    assert_int_equal(ib_http_status_phrase(small, sizeof(small), line, strlen(line)), 0);
    assert_string_equal(small, "Servi");
}

static ib_raw_event raw(const char *payload, int64_t created)
{
    static const ib_header hs[] = {{.key = "k", .value = "v"}};
    return (ib_raw_event){.size = sizeof(ib_raw_event),
                          .id = "0123456789abcdef0123456789abcdef",
                          .type = "order.created",
                          .payload = (const uint8_t *)payload,
                          .payload_len = strlen(payload),
                          .created_at_ms = created,
                          .source = "svc\"a\"",
                          .headers = hs,
                          .header_count = 1,
                          .consumer = "c/http/http"};
}

static void json_body_embeds_json_else_base64(void **state)
{
    (void)state;
    ib_http_buf b = {0};
    ib_raw_event ev = raw("{\"amount\": 12.50}", 1733101323456);
    assert_true(ib_http_body_json(&b, &ev));
    char *s = strndup((const char *)b.p, b.len);
    assert_string_equal(s,
                        "{\"id\":\"0123456789abcdef0123456789abcdef\",\"type\":\"order.created\","
                        "\"source\":\"svc\\\"a\\\"\",\"created_at\":\"2024-12-02T01:02:03.456Z\","
                        "\"payload_encoding\":\"json\",\"payload\":{\"amount\": 12.50}}");
    free(s);
    ev = raw("not json", 0);
    assert_true(ib_http_body_json(&b, &ev));
    s = strndup((const char *)b.p, b.len);
    assert_non_null(strstr(s, "\"created_at\":null,\"payload_encoding\":\"base64\","
                              "\"payload\":\"bm90IGpzb24=\"}"));
    free(s);
    assert_true(ib_http_json_valid((const uint8_t *)"[1,2]", 5));
    assert_true(ib_http_json_valid((const uint8_t *)" 123456789012345678901234567890 ", 32));
    assert_false(ib_http_json_valid((const uint8_t *)"{\"a\":\xff}", 7));
    assert_false(ib_http_json_valid((const uint8_t *)"{} {}", 5));
    ib_http_buf_free(&b);
}

/* Invalid UTF-8 in the source or type becomes U+FFFD; valid sequences
 * (2 and 4 bytes here) are kept; the body stays valid JSON. */
static void json_body_replaces_invalid_utf8(void **state)
{
    (void)state;
    ib_http_buf b = {0};
    ib_raw_event ev = raw("{}", 0);
    ev.source = "a\xff\xc3\xa9"
                "b\xc3";                               /* stray byte, é, a cut sequence */
    ev.type = "t\xed\xa0\x80\xc0\xaf\xf0\x9f\x98\x80"; /* surrogate, overlong, U+1F600 */
    assert_true(ib_http_body_json(&b, &ev));
    assert_true(ib_http_json_valid(b.p, b.len));
    char *s = strndup((const char *)b.p, b.len);
    assert_non_null(strstr(s, "\"source\":\"a\\ufffd\xc3\xa9"
                              "b\\ufffd\""));
    assert_non_null(strstr(s, "\"type\":\"t\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\xf0\x9f\x98\x80\""));
    free(s);
    ib_http_buf_free(&b);
}

/* The header list is built once; each request rewrites its event lines. */
static void headers_are_rewritten_per_event(void **state)
{
    (void)state;
    ib_http_config cfg;
    char err[256];
    assert_int_equal(
        ib_http_config_parse(&cfg, "url=http://127.0.0.1:1/,header=X-Team:pay", err, sizeof(err)),
        0);
    static ib_http_headers h; /* large; the list points into it */
    ib_http_headers_init(&h, &cfg);
    const char *want[] = {"Content-Type: application/json",
                          "Expect:",
                          "Idempotency-Key: 0123456789abcdef0123456789abcdef",
                          "Ibus-Consumer: c/http/http",
                          "Ibus-Event-Type: order.created",
                          "Ibus-Delivery-Count: 1",
                          "traceparent:",
                          "tracestate:",
                          "X-Team: pay",
                          NULL};
    for (int round = 0; round < 3; round++) {
        ib_raw_event ev = raw("{}", 0);
        ev.delivery_count = round == 0 ? 1 : 18446744073709551615u;
        want[5] =
            round == 0 ? "Ibus-Delivery-Count: 1" : "Ibus-Delivery-Count: 18446744073709551615";
        /* a traced event sends its context; the next one, without, sends none */
        if (round == 1) {
            ev.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            ev.tracestate = "rojo=1,congo=2";
        }
        want[6] = round == 1
                      ? "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                      : "traceparent:";
        want[7] = round == 1 ? "tracestate: rojo=1,congo=2" : "tracestate:";
        const struct curl_slist *l = ib_http_headers_set(&h, &ev);
        for (size_t i = 0; want[i] != NULL; i++, l = l->next) {
            assert_non_null(l);
            assert_string_equal(l->data, want[i]);
        }
        assert_null(l);
    }
    ib_http_config_free(&cfg);
}

/* Issue 32: a consumer identity with CR/LF must not become a header line of
 * its own (libcurl sends every byte of a list entry as it is). The host
 * refuses such identities; the plugin drops control bytes as well. */
static void header_lines_hold_no_control_bytes(void **state)
{
    (void)state;
    ib_http_config cfg;
    char err[256];
    assert_int_equal(ib_http_config_parse(&cfg, "url=http://127.0.0.1:1/", err, sizeof(err)), 0);
    static ib_http_headers h;
    ib_http_headers_init(&h, &cfg);
    ib_raw_event ev = raw("{}", 0);
    ev.consumer = "c/http/http\r\nX-Injected: 1\x7f\t";
    for (const struct curl_slist *l = ib_http_headers_set(&h, &ev); l != NULL; l = l->next)
        for (const char *c = l->data; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                fail_msg("header line '%s' holds byte 0x%02x", l->data, (unsigned char)*c);
    const struct curl_slist *l = ib_http_headers_set(&h, &ev);
    assert_string_equal(l->next->next->next->data, "Ibus-Consumer: c/http/httpX-Injected: 1");
    ib_http_config_free(&cfg);
}

/* The trace accessors (ABI 1.4) answer only what the host's struct holds:
 * an older host's reads as NULL. */
static void trace_accessors_check_the_size(void **state)
{
    (void)state;
    ib_raw_event ev = raw("hi", 0);
    assert_null(ib_raw_event_traceparent(&ev));
    assert_null(ib_raw_event_tracestate(&ev));
    ev.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    ev.tracestate = "rojo=1";
    assert_ptr_equal(ib_raw_event_traceparent(&ev), ev.traceparent);
    assert_ptr_equal(ib_raw_event_tracestate(&ev), ev.tracestate);
    ev.size = (uint32_t)offsetof(ib_raw_event, traceparent); /* built by a 1.3 host */
    assert_null(ib_raw_event_traceparent(&ev));
    assert_null(ib_raw_event_tracestate(&ev));
}

/* ib_raw_event_message (ABI 1.3) answers the delivered bytes only when the
 * host's struct holds the field: an older host's reads as NULL/0, and the
 * plugin re-encodes then. */
static void message_accessor_checks_the_size(void **state)
{
    (void)state;
    static const uint8_t bytes[] = {0x0a, 1, 'x'};
    ib_raw_event ev = raw("hi", 0);
    size_t len = 99;
    assert_null(ib_raw_event_message(&ev, &len)); /* a 1.3 host without the bytes */
    assert_int_equal(len, 0);
    ev.message = bytes;
    ev.message_len = sizeof(bytes);
    assert_ptr_equal(ib_raw_event_message(&ev, &len), bytes);
    assert_int_equal(len, sizeof(bytes));
    ev.size = (uint32_t)offsetof(ib_raw_event, message); /* built by a 1.2 host */
    assert_null(ib_raw_event_message(&ev, &len));
    assert_int_equal(len, 0);
}

static void protobuf_body_encodes_the_event(void **state)
{
    (void)state;
    ib_http_buf b = {0};
    ib_raw_event ev = raw("hi", 300);
    assert_true(ib_http_body_protobuf(&b, &ev));
    static const uint8_t want_head[] = {0x0a, 32};
    assert_memory_equal(b.p, want_head, 2);
    assert_memory_equal(b.p + 2, ev.id, 32);
    const uint8_t *p = b.p + 34;
    static const uint8_t rest[] = {0x12, 13,   'o',  'r', 'd', 'e',  'r', '.', 'c', 'r',
                                   'e',  'a',  't',  'e', 'd', 0x1a, 2,   'h', 'i', 0x20,
                                   0xac, 0x02, 0x2a, 6,   's', 'v',  'c', '"', 'a', '"',
                                   0x32, 6,    0x0a, 1,   'k', 0x12, 1,   'v'};
    assert_int_equal(b.len, 34 + sizeof(rest));
    assert_memory_equal(p, rest, sizeof(rest));
    ib_http_buf_free(&b);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(config_accepts_every_key),
    cmocka_unit_test(config_refuses_with_a_reason),
    cmocka_unit_test(retry_after_reads_seconds_and_dates),
    cmocka_unit_test(status_phrase_of_a_status_line),
    cmocka_unit_test(json_body_embeds_json_else_base64),
    cmocka_unit_test(json_body_replaces_invalid_utf8),
    cmocka_unit_test(headers_are_rewritten_per_event),
    cmocka_unit_test(header_lines_hold_no_control_bytes),
    cmocka_unit_test(message_accessor_checks_the_size),
    cmocka_unit_test(trace_accessors_check_the_size),
    cmocka_unit_test(protobuf_body_encodes_the_event),
};

IB_TEST_MAIN(tests)
