/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal blocking HTTP/1.1 client over a raw loopback socket, for tests:
 * one request per connection ("Connection: close"), reads until EOF. */
#ifndef IB_TEST_HTTP_CLIENT_H
#define IB_TEST_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct http_reply {
    int status;    /* 0 when the exchange failed */
    char *headers; /* raw header block, malloc'd */
    char *body;    /* malloc'd, NUL-terminated */
    size_t body_len;
} http_reply;

/* Sends `method path` to 127.0.0.1:port with an optional body. Returns 0 on
 * a complete reply. Free with http_reply_free (also after a failure). */
int http_request(http_reply *out, uint16_t port, const char *method, const char *path,
                 const char *body);
/* Same, to a numeric loopback address ("127.0.0.1" or "::1"). */
int http_request_at(http_reply *out, const char *ip, uint16_t port, const char *method,
                    const char *path, const char *body);
void http_reply_free(http_reply *r);

/* Value of header `name` (case-insensitive) copied into buf, or NULL. */
const char *http_header(const http_reply *r, const char *name, char *buf, size_t len);

#endif
