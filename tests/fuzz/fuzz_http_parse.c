/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the http plugin's parsers (plugin/examples/http/
 * http_parse.c). Any bytes, as a configuration string, a header file and a
 * Retry-After value: no crash or leak; a Retry-After that parses is a delay
 * of 0 .. 1 day and parses the same again; an accepted configuration has a
 * URL, a timeout in bounds and only headers without control bytes; the
 * same bytes as an event's source and type still make a JSON body that is
 * valid JSON (invalid UTF-8 replaced); and the plugin's JSON scanner says
 * what jansson says of the bytes (it replaced jansson in the plugin), but
 * for jansson's one quirk with NUL bytes; a status line's phrase is
 * printable ASCII within its buffer. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "http_body.h"
#include "http_json.h"
#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_config(const char *s)
{
    ib_http_config c;
    char err[256];
    if (ib_http_config_parse(&c, s, err, sizeof(err)) != 0) {
        assert(memchr(err, '\0', sizeof(err)) != NULL);
        return;
    }
    assert(c.url != NULL);
    assert(c.timeout_ms >= 1 && c.timeout_ms <= 3600000);
    (void)ib_http_config_add_header_text(&c, s, err, sizeof(err));
    for (size_t i = 0; i < c.header_count; i++)
        for (const char *p = c.headers[i]; *p != '\0'; p++)
            assert((unsigned char)*p >= 0x20 && *p != 0x7f);
    ib_http_config_free(&c);
}

static void check_body(const char *s)
{
    ib_http_buf b = {0};
    ib_raw_event ev = {.size = sizeof(ev),
                       .id = "0123456789abcdef0123456789abcdef",
                       .type = s,
                       .payload = (const uint8_t *)s,
                       .payload_len = strlen(s),
                       .source = s,
                       .consumer = "fuzz/http/http"};
    /* a payload embedded as JSON sits one level deeper in the body: one
     * at the depth limit (2048 brackets at least) may push it over */
    if (ib_http_body_json(&b, &ev))
        assert(ib_http_json_valid(b.p, b.len) || ev.payload_len >= 2048);
    ib_http_buf_free(&b);
}

/* jansson's answer, with the flags the plugin used before its scanner. */
static bool jansson_valid(const uint8_t *data, size_t size)
{
    json_error_t e;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, &e);
    json_decref(v);
    return v != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Equal, except that jansson drops a NUL byte read just after a
     * number or literal ("12\0" passes it): the scanner refuses any NUL,
     * as a JSON text may not hold one. */
    bool mine = ib_http_json_valid(data, size), theirs = jansson_valid(data, size);
    assert(mine == theirs || (!mine && memchr(data, '\0', size) != NULL));
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t a = -1, b = -1;
    if (ib_http_retry_after_ms(&a, s, 1445412480) == 0) {
        assert(a >= 0 && a <= 86400000);
        assert(ib_http_retry_after_ms(&b, s, 1445412480) == 0 && a == b);
    }
    char phrase[16];
    int rc = ib_http_status_phrase(phrase, sizeof(phrase), (const char *)data, size);
    assert(memchr(phrase, '\0', sizeof(phrase)) != NULL);
    for (const char *p = phrase; *p != '\0'; p++)
        assert(*p >= 0x20 && *p < 0x7f);
    assert((rc == 0) == (phrase[0] != '\0'));
    check_config(s);
    check_body(s);
    free(s);
    return 0;
}
