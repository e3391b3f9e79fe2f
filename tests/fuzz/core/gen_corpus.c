/* SPDX-License-Identifier: Apache-2.0 */
/* Writes the seed corpora of the core fuzz targets (tests/fuzz/corpus/event
 * and tests/fuzz/corpus/id). The seeds are committed; run this only to
 * regenerate them:
 *   cmake --build <build> --target fuzz_core_gen_corpus
 *   <build>/tests/fuzz/fuzz_core_gen_corpus <source>/tests/fuzz/corpus */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../unit/core/pb_builder.h"
#include "event.h"

#define ID "0f8fad5bd9cb469fa16570867728950e"

static const char *root;

static void write_seed(const char *dir, const char *name, const void *data, size_t len)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s/%s", root, dir, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void write_pb(const char *name, pb *b)
{
    write_seed("event", name, b->buf, b->len);
    pb_free(b);
}

static void write_event(const char *name, const ib_event_fields *f)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ib_event_encode(&buf, &len, f, NULL) != IB_OK) {
        fprintf(stderr, "cannot encode seed %s\n", name);
        exit(1);
    }
    write_seed("event", name, buf, len);
    free(buf);
}

static void event_seeds(void)
{
    static const ib_event_header headers[] = {
        {"content-type", "application/json"},
        {"trace-id", "4bf92f3577b34da6a3ce929d0e0e4736"},
        {"note", "caf\xc3\xa9"},
    };
    static const uint8_t payload[] = {'{', '"', 'n', '"', ':', '1', '}', 0x00, 0xff};
    ib_event_fields full = {
        .id = ID,
        .type = "order.created",
        .payload = payload,
        .payload_len = sizeof(payload),
        .created_at_ms = 1700000000123,
        .source = "svc-orders",
        .headers = headers,
        .header_count = 3,
    };
    ib_event_fields minimal = {.id = ID, .type = "t"};
    ib_event_fields dashed = {.id = "0F8FAD5B-D9CB-469F-A165-70867728950E", .type = "x.y"};
    ib_event_fields uuid7 = {.id = "018f3c5e7d2a7b3c8d4e5f60718293a4", .type = "v7.event"};
    ib_event_fields negative = {.id = ID, .type = "t", .created_at_ms = INT64_MIN};
    ib_event_header many[24];
    char keys[24][8];
    ib_event_fields lots = {.id = ID, .type = "h", .headers = many, .header_count = 24};
    pb b = {0};

    write_event("full", &full);
    write_event("minimal", &minimal);
    write_event("dashed-upper-id", &dashed);
    write_event("uuid7-id", &uuid7);
    write_event("negative-created-at", &negative);
    for (int i = 0; i < 24; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
        many[i].key = keys[i];
        many[i].value = i % 2 ? "odd" : "";
    }
    write_event("many-headers", &lots);

    write_seed("event", "empty", "", 0);
    write_seed("event", "lone-key", "\x0a", 1);

    pb_str(&b, 1, ID);
    pb_str(&b, 7, "future field");
    pb_key(&b, 99, PB_I64);
    pb_raw(&b, "12345678", 8);
    pb_key(&b, 100, PB_I32);
    pb_raw(&b, "1234", 4);
    pb_str(&b, 2, "with.unknown");
    write_pb("unknown-fields", &b);

    pb_bytes(&b, 1, ID "\0junk", 37);
    pb_str(&b, 2, "t");
    write_pb("nul-in-id", &b);

    pb_str(&b, 1, ID);
    pb_bytes(&b, 2, "bad\xc3", 4);
    write_pb("bad-utf8-type", &b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    pb_entry(&b, "a", 1, "1", 1);
    pb_entry(&b, "a", 1, "2", 1);
    pb_bytes(&b, 6, "", 0);
    write_pb("duplicate-and-empty-headers", &b);

    pb_str(&b, 1, ID);
    pb_key(&b, 4, PB_LEN);
    pb_varint(&b, 1);
    pb_raw(&b, "x", 1);
    pb_str(&b, 2, "t");
    write_pb("wrong-wire-type", &b);

    pb_str(&b, 1, ID);
    pb_key(&b, 9, PB_SGROUP);
    pb_key(&b, 9, PB_EGROUP);
    pb_str(&b, 2, "t");
    write_pb("group", &b);

    pb_key(&b, 2, PB_LEN);
    pb_raw(&b, "\x81\x80\x80\x80\x00t", 6);
    pb_str(&b, 1, ID);
    write_pb("long-length-prefix", &b);

    pb_str(&b, 1, ID);
    pb_str(&b, 2, "t");
    for (int i = 0; i < 200; i++)
        pb_bytes(&b, 6, "", 0);
    write_pb("empty-header-flood", &b);
}

static void id_seeds(void)
{
    static const struct {
        const char *name;
        const char *bytes;
        size_t len;
    } seeds[] = {
        {"plain", ID, 32},
        {"upper", "0F8FAD5BD9CB469FA16570867728950E", 32},
        {"dashed", "0f8fad5b-d9cb-469f-a165-70867728950e", 36},
        {"uuid7", "018f3c5e-7d2a-7b3c-8d4e-5f60718293a4", 36},
        {"bad-variant", "0f8fad5bd9cb469fc16570867728950e", 32},
        {"nul-inside",
         "0f8fad5bd9cb469f\0"
         "16570867728950e",
         32},
        {"short", "0f8fad5bd9cb469fa16570867728950", 31},
        {"utf8",
         "0f8fad5bd9cb469fa16570867728\xc3\xa9"
         "0e",
         32},
        {"empty", "", 0},
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        write_seed("id", seeds[i].name, seeds[i].bytes, seeds[i].len);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
        return 2;
    }
    root = argv[1];
    event_seeds();
    id_seeds();
    return 0;
}
