/* Structured logging for the host and its plugins.
 *
 * One line per record on stderr (or a configured stream), as JSON
 * ({"ts":"...","level":"warn","msg":"...","key":"value",...}) or as text
 * (`2026-01-01T00:00:00.000Z WARN msg key=value ...`). Thread-safe: a record
 * is written with one call, so lines never interleave. Payload bytes must
 * never be logged. */
#ifndef IB_LOG_H
#define IB_LOG_H

#include <stdarg.h>
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
 *             "reason", "rejected", NULL); */
void ib_log_kv(ib_log_sev sev, const char *msg, ...);

/* Writes one record whose message is printf-formatted, with a "component"
 * field (may be NULL). */
void ib_logf(ib_log_sev sev, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* va_list form of ib_logf, for the plugin host API's log slot. */
void ib_logv(ib_log_sev sev, const char *component, const char *fmt, va_list ap);

/* True if records of `sev` would be written (to skip building them). */
int ib_log_enabled(ib_log_sev sev);

#endif
