/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: ib_event_decode on arbitrary bytes.
 *
 * Decodes each input under small limits and three option sets, and checks
 * what a caller relies on: a refusal always has a consistent class and a
 * message that quotes nothing from the input; an accepted event has a
 * normalised id, a non-empty printable type, NUL-free valid UTF-8 strings
 * and unique header keys, and survives encode -> decode unchanged. */
#include <stdint.h>
#include <string.h>

#include "event.h"
#include "fuzz_check.h"
#include "utf8.h"

#define FUZZ_MAX_BYTES (64u * 1024u)

static void check_string(const char *s)
{
    FUZZ_CHECK(s != NULL);
    FUZZ_CHECK(ib__utf8_valid(s, strlen(s)));
}

static void check_refusal(ib_status st, ib_event_reject rej, const ib_error *err)
{
    FUZZ_CHECK(st == IB_ERR_DECODE || st == IB_ERR_TOO_LARGE || st == IB_ERR_INVALID_ID);
    FUZZ_CHECK((st == IB_ERR_INVALID_ID) == (rej == IB_EVENT_REJECT_INVALID_ID));
    FUZZ_CHECK(rej == IB_EVENT_REJECT_DECODE || rej == IB_EVENT_REJECT_INVALID_ID);
    FUZZ_CHECK(err->status == st);
    FUZZ_CHECK(err->msg[0] != '\0');
    /* Messages are built from our own ASCII text and numbers only. */
    for (const char *p = err->msg; *p != '\0'; p++)
        FUZZ_CHECK(*p >= 0x20 && *p <= 0x7e);
}

static void check_event(const ib_event *ev)
{
    FUZZ_CHECK(ib_id_is_normalised(ev->id));
    check_string(ev->type);
    FUZZ_CHECK(ev->type[0] != '\0');
    for (const char *p = ev->type; *p != '\0'; p++)
        FUZZ_CHECK((unsigned char)*p > 0x20 && *p != 0x7f);
    check_string(ev->source);
    FUZZ_CHECK((ev->payload == NULL) == (ev->payload_len == 0));
    FUZZ_CHECK((ev->headers == NULL) == (ev->header_count == 0));
    for (size_t i = 0; i < ev->header_count; i++) {
        check_string(ev->headers[i].key);
        check_string(ev->headers[i].value);
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(ev->headers[i].key, ev->headers[j].key) != 0);
    }
}

static void check_same(const ib_event *a, const ib_event *b)
{
    FUZZ_CHECK(strcmp(a->id, b->id) == 0);
    FUZZ_CHECK(strcmp(a->type, b->type) == 0);
    FUZZ_CHECK(a->payload_len == b->payload_len);
    FUZZ_CHECK(a->payload_len == 0 || memcmp(a->payload, b->payload, a->payload_len) == 0);
    FUZZ_CHECK(a->created_at_ms == b->created_at_ms);
    FUZZ_CHECK(strcmp(a->source, b->source) == 0);
    FUZZ_CHECK(a->header_count == b->header_count);
    for (size_t i = 0; i < a->header_count; i++) {
        FUZZ_CHECK(strcmp(a->headers[i].key, b->headers[i].key) == 0);
        FUZZ_CHECK(strcmp(a->headers[i].value, b->headers[i].value) == 0);
    }
}

/* Encodes `ev` and decodes the result, which must give the same event. */
static void check_round_trip(const ib_event *ev, const ib_event_limits *limits)
{
    ib_event_fields f = {
        .id = ev->id,
        .type = ev->type,
        .payload = ev->payload,
        .payload_len = ev->payload_len,
        .created_at_ms = ev->created_at_ms,
        .source = ev->source,
        .headers = ev->headers,
        .header_count = ev->header_count,
    };
    ib_event_limits relaxed = *limits;
    uint8_t *buf = NULL;
    size_t len = 0;
    ib_event *again = NULL;
    ib_error err;

    FUZZ_CHECK(ib_event_encode(&buf, &len, &f, &err) == IB_OK);
    /* Re-encoding drops unknown fields and duplicates, so it is never longer
     * in a way that matters; the size limit still must not refuse it. */
    relaxed.max_bytes = len > 0 ? len : 1;
    FUZZ_CHECK(ib_event_decode(&again, NULL, buf, len, &relaxed, &err) == IB_OK);
    check_same(ev, again);
    ib_event_free(again);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ib_event_limits strict = {.max_bytes = FUZZ_MAX_BYTES, .id_flags = IB_ID_UUID4_ONLY};
    ib_event_limits any = {.max_bytes = FUZZ_MAX_BYTES, .id_flags = IB_ID_ANY_VERSION};
    ib_event_limits tight = {
        .max_bytes = FUZZ_MAX_BYTES, .id_flags = IB_ID_UUID4_ONLY, .max_alloc = 2048};
    ib_event *ev = NULL;
    ib_event *ev_any = NULL;
    ib_event *ev_tight = NULL;
    ib_event_reject rej = IB_EVENT_NOT_REJECTED;
    ib_event_reject rej_any = IB_EVENT_NOT_REJECTED;
    ib_event_reject rej_tight = IB_EVENT_NOT_REJECTED;
    ib_error err;
    ib_error err_any;
    ib_error err_tight;
    ib_status st;
    ib_status st_any;
    ib_status st_tight;

    st = ib_event_decode(&ev, &rej, data, size, &strict, &err);
    st_any = ib_event_decode(&ev_any, &rej_any, data, size, &any, &err_any);
    st_tight = ib_event_decode(&ev_tight, &rej_tight, data, size, &tight, &err_tight);

    if (st == IB_OK) {
        check_event(ev);
        check_round_trip(ev, &strict);
        /* Opting into any version never refuses what uuid4-only accepts. */
        FUZZ_CHECK(st_any == IB_OK);
        check_same(ev, ev_any);
    } else {
        FUZZ_CHECK(ev == NULL);
        check_refusal(st, rej, &err);
        /* Any-version differs from uuid4-only by the version rule alone. */
        if (st_any == IB_OK)
            FUZZ_CHECK(st == IB_ERR_INVALID_ID &&
                       strstr(err.msg, "not one of the accepted versions") != NULL);
        else
            FUZZ_CHECK(st_any == st && rej_any == rej);
    }
    if (st_any == IB_OK) {
        check_event(ev_any);
        check_round_trip(ev_any, &any);
    } else {
        check_refusal(st_any, rej_any, &err_any);
    }
    /* A smaller memory budget can only add TOO_LARGE refusals. */
    if (st_tight == IB_OK) {
        FUZZ_CHECK(st == IB_OK);
        check_same(ev, ev_tight);
    } else {
        check_refusal(st_tight, rej_tight, &err_tight);
        FUZZ_CHECK(st_tight == st || st_tight == IB_ERR_TOO_LARGE);
    }
    ib_event_free(ev);
    ib_event_free(ev_any);
    ib_event_free(ev_tight);
    return 0;
}
