/* SPDX-License-Identifier: Apache-2.0 */
/* The http plugin's parsers (private to the plugin): its configuration
 * string, the Retry-After header, and the checks that decide how a payload
 * travels in the JSON body. Pure functions of their input, no libcurl, so
 * the fuzz targets and unit tests call them directly. */
#ifndef IB_HTTP_PARSE_H
#define IB_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IB_HTTP_DEFAULT_TIMEOUT_MS 10000
#define IB_HTTP_MAX_HEADERS 32
#define IB_HTTP_MAX_TYPES 64

typedef enum ib_http_format { IB_HTTP_JSON = 0, IB_HTTP_PROTOBUF = 1 } ib_http_format;

/* The plugin's configuration. Every string is owned by the struct. */
typedef struct ib_http_config {
    char *url;                      /* required: http:// or https:// */
    char *types[IB_HTTP_MAX_TYPES]; /* event types to POST; type_count 0 = every type */
    size_t type_count;
    int64_t timeout_ms;                 /* whole request; IB_HTTP_DEFAULT_TIMEOUT_MS by default */
    unsigned concurrency;               /* requests in flight at most; 0 = one per handler thread */
    char *headers[IB_HTTP_MAX_HEADERS]; /* "Name: Value", from header= and header_file= */
    size_t header_count;
    char *header_file; /* as given; its headers are in `headers` once read */
    ib_http_format format;
    char *ca, *cert, *key; /* TLS files; NULL = the system's defaults / none */
} ib_http_config;

/* Parses "key=value,key=value" (the keys of http.c's header comment) into
 * `out` (zeroed first). header= may repeat; every other key counted once.
 * Does not read header_file (ib_http_config_read_headers does). Returns 0,
 * or -1 with a one-line reason in errbuf (which never quotes a header's
 * value: it may be a secret); `out` then holds nothing to free. */
int ib_http_config_parse(ib_http_config *out, const char *config, char *errbuf, size_t errlen);

/* Adds the headers of `text` (the header file's contents: one
 * "Name: Value" per line, blank lines and lines starting with '#'
 * skipped) to `cfg`. Returns 0, or -1 with a reason in errbuf. */
int ib_http_config_add_header_text(ib_http_config *cfg, const char *text, char *errbuf,
                                   size_t errlen);

/* Frees every string of `cfg` and zeroes it. NULL is a no-op. */
void ib_http_config_free(ib_http_config *cfg);

/* Whether `type` is one the configuration POSTs (every type when none is
 * listed). */
bool ib_http_config_wants(const ib_http_config *cfg, const char *type);

/* Parses a Retry-After value: delay-seconds ("120") or an HTTP-date
 * ("Wed, 21 Oct 2015 07:28:00 GMT", the IMF-fixdate form), given the
 * current time `now_s` (unix seconds). Stores the delay in milliseconds
 * in *out_ms (0 for a date in the past; at most a day, longer ones are
 * cut) and returns 0; -1 for anything else. */
int ib_http_retry_after_ms(int64_t *out_ms, const char *value, int64_t now_s);

/* Reads the reason phrase of a status line ("HTTP/1.1 503 Service
 * Unavailable\r\n": "Service Unavailable") from `len` bytes at `line`
 * (not NUL-terminated) into `out` (cap > 0 bytes, always NUL-terminated,
 * cut when too small), keeping printable ASCII only: it ends in a dead
 * letter's header and a log line. Returns 0; -1, with `out` "", when the
 * line is not a status line ("HTTP/" and a three-digit code) or has no
 * phrase (HTTP/2). */
int ib_http_status_phrase(char *out, size_t cap, const char *line, size_t len);

#endif
