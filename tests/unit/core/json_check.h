/* SPDX-License-Identifier: Apache-2.0 */
/* A tiny strict checker for one-line JSON objects, for the logger's tests:
 * the object must be flat (string or null values), well-formed per RFC 8259
 * (valid UTF-8, no raw control characters, valid escapes, paired surrogates),
 * with no duplicate keys and nothing after the closing brace. String values
 * are decoded so a test can compare them with what it logged. */
#ifndef IB_TEST_JSON_CHECK_H
#define IB_TEST_JSON_CHECK_H

#include <stddef.h>

#define JSON_MAX_FIELDS 32

typedef struct json_field {
    char *key;   /* decoded, malloc'd */
    char *value; /* decoded, malloc'd; NULL for a JSON null */
} json_field;

typedef struct json_flat {
    json_field fields[JSON_MAX_FIELDS];
    size_t count;
} json_flat;

/* Parses `len` bytes at `s` as one object. Returns 0, or -1 with a reason in
 * `why`. Always release with json_flat_free. */
int json_check_object(json_flat *out, const char *s, size_t len, char *why, size_t why_len);
void json_flat_free(json_flat *o);

/* The field named `key`, or NULL. */
const json_field *json_get(const json_flat *o, const char *key);

#endif
