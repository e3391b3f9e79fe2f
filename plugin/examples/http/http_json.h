/* SPDX-License-Identifier: Apache-2.0 */
/* What the http plugin knows of JSON and UTF-8 (private to it): whether a
 * payload can go into the JSON body as it is. http_body.c builds on it;
 * it builds on nothing of the plugin. */
#ifndef IB_HTTP_JSON_H
#define IB_HTTP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether `data` is one valid UTF-8 JSON value (with optional white space
 * around it), as jansson 2.14 reads it; allocates nothing unless a number
 * is 64 bytes or longer. */
bool ib_http_json_valid(const uint8_t *data, size_t len);

/* Length of the well-formed UTF-8 sequence at `s` (1..4 bytes, RFC 3629:
 * no overlong forms, surrogates or code points past U+10FFFF) within the
 * `avail` bytes there, or 0 when they do not start one. */
size_t ib_http_utf8_len(const uint8_t *s, size_t avail);

#endif
