/* SPDX-License-Identifier: Apache-2.0 */
/* Structured logging for the host and its plugins.
 *
 * One line per record on stderr (or a configured stream), as JSON
 * ({"ts":"...","level":"warn","msg":"...","key":"value","count":3,...}) or
 * as text (`2026-01-01T00:00:00.000Z WARN msg key=value count=3 ...`).
 * Thread-safe: a record is written with one call, so lines never
 * interleave. Payload bytes must never be logged.
 *
 * Field values are typed (ib_log below): numbers are JSON numbers and
 * booleans JSON booleans, so a log pipeline indexes them as such. Names of
 * durations end in the unit and carry an integer: `ack_wait_ms`. */
#ifndef IB_LOG_H
#define IB_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ib_log_format {
    IB_LOG_FORMAT_AUTO = 0, /* json unless the stream is a terminal */
    IB_LOG_FORMAT_JSON = 1,
    IB_LOG_FORMAT_TEXT = 2,
} ib_log_format;

/* Same values as ib_log_level in infinity_bus/plugin.h. */
typedef enum ib_log_sev {
    IB_SEV_DEBUG = 0,
    IB_SEV_INFO = 1,
    IB_SEV_WARN = 2,
    IB_SEV_ERROR = 3,
} ib_log_sev;

/* Sets the format, the lowest severity written and the stream (NULL =
 * stderr; BORROWED, must stay open). AUTO is resolved here, once, from
 * isatty() of the stream. Before the first call: AUTO, info, stderr. Call
 * it at startup, before other threads log: a record racing with it may
 * still be written to the previous stream, which must then be open. */
void ib_log_configure(ib_log_format format, ib_log_sev min_sev, FILE *stream);

/* Parses "json"/"text"/"auto" and "debug"/"info"/"warn"/"error"; return 0
 * on success, -1 for an unknown name. */
int ib_log_format_parse(ib_log_format *out, const char *name);
int ib_log_sev_parse(ib_log_sev *out, const char *name);

/* Writes one record: `msg` plus key/value string pairs, terminated by a
 * NULL key. Values may be NULL (written as null / "-"). Any bytes are safe:
 * JSON escapes control characters and replaces invalid UTF-8 with U+FFFD;
 * text shows them as \xNN and quotes values holding spaces, quotes or '='.
 * Strings longer than 8 KiB are cut with "...(truncated)". A key named ts,
 * level or msg is written as _ts, _level, _msg. Example:
 *   ib_log_kv(IB_SEV_WARN, "dead-lettered", "consumer", c, "event_id", id,
 *             "reason", "rejected", NULL);
 * Strings only: a record with a number in it uses ib_log. */
void ib_log_kv(ib_log_sev sev, const char *msg, ...);

/* Typed fields.
 *
 * A field is built with one of the IB_LOG_* constructors below, each of
 * which initialises the union member of its type: handing one a value of
 * the wrong kind (a string to IB_LOG_U64, a number to IB_LOG_STR) is a
 * conversion the compiler refuses under -Wall -Werror, and a bare string
 * where a field belongs initialises `kind` and is refused the same way.
 * Keys and string values are BORROWED for the call only. */
typedef enum ib_log_kind {
    IB_LOG_KIND_STR = 1,  /* string, or null for NULL */
    IB_LOG_KIND_I64 = 2,  /* JSON integer */
    IB_LOG_KIND_U64 = 3,  /* JSON integer, up to 18446744073709551615 */
    IB_LOG_KIND_F64 = 4,  /* JSON number with a fraction or exponent; NaN, inf: null */
    IB_LOG_KIND_BOOL = 5, /* true / false */
} ib_log_kind;

typedef struct ib_log_field {
    ib_log_kind kind; /* first, so a bare string in a field list does not compile */
    const char *key;
    union {
        const char *s;
        int64_t i;
        uint64_t u;
        double f;
        bool b;
    } v;
} ib_log_field;

#define IB_LOG_STR(key_, value_)                                                                   \
    ((ib_log_field){.kind = IB_LOG_KIND_STR, .key = (key_), .v.s = (value_)})
#define IB_LOG_I64(key_, value_)                                                                   \
    ((ib_log_field){.kind = IB_LOG_KIND_I64, .key = (key_), .v.i = (value_)})
#define IB_LOG_U64(key_, value_)                                                                   \
    ((ib_log_field){.kind = IB_LOG_KIND_U64, .key = (key_), .v.u = (value_)})
#define IB_LOG_F64(key_, value_)                                                                   \
    ((ib_log_field){.kind = IB_LOG_KIND_F64, .key = (key_), .v.f = (value_)})
#define IB_LOG_BOOL(key_, value_)                                                                  \
    ((ib_log_field){.kind = IB_LOG_KIND_BOOL, .key = (key_), .v.b = (value_)})

/* Writes one record: `msg` plus the `n` fields at `fields` (BORROWED),
 * with every guarantee of ib_log_kv (escaping, truncation, reserved keys,
 * one write per record). In JSON, numbers and booleans are bare; a double
 * always shows a fraction or an exponent (3.0, not 3), so an index that
 * guesses a field's type from its first value does not make it an
 * integer; a NaN or infinite double is null. Text shows the same digits
 * (NaN, +Inf, -Inf for the non-finite), booleans as true/false. A field of
 * an unknown kind is written as null. */
void ib_log_fields(ib_log_sev sev, const char *msg, const ib_log_field *fields, size_t n);

/* Writes one record with one or more IB_LOG_* fields (use ib_log_kv for a
 * record with none). The fields become one array, so their types are
 * checked where they are written; sizeof does not evaluate its operand, so
 * each argument is evaluated once. Example:
 *   ib_log(IB_SEV_INFO, "consumer bound", IB_LOG_STR("durable", d),
 *          IB_LOG_I64("ack_wait_ms", aw), IB_LOG_U64("max_deliver", md)); */
#define ib_log(sev, msg, ...)                                                                      \
    ib_log_fields((sev), (msg), (const ib_log_field[]){__VA_ARGS__},                               \
                  sizeof((const ib_log_field[]){__VA_ARGS__}) / sizeof(ib_log_field))

/* Writes one record whose message is printf-formatted, with a "component"
 * field (may be NULL). */
void ib_logf(ib_log_sev sev, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* va_list form of ib_logf, for the plugin host API's log slot. */
void ib_logv(ib_log_sev sev, const char *component, const char *fmt, va_list ap);

/* True if records of `sev` would be written (to skip building them). */
int ib_log_enabled(ib_log_sev sev);

#endif
