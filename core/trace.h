/* SPDX-License-Identifier: Apache-2.0 */
/* W3C Trace Context: the traceparent and tracestate an event carries, and
 * the span ibus continues it with.
 *
 * ibus records no spans of its own; it carries a trace through. For each
 * delivery of an event that arrives with a valid traceparent, the host
 * keeps the trace id and flags and makes a span id of its own for that
 * delivery (ib_trace_child): handlers read the result as the event's
 * traceparent, the http plugin sends it, the events a handler publishes
 * carry it, and every log line about the delivery names its trace_id and
 * span_id (ib_trace_current_set). The span id is new at each hop, the trace
 * id never changes.
 *
 * Malformed input follows the W3C rules (Trace Context, "traceparent
 * header" and "tracestate header"): a traceparent that does not parse is
 * dropped whole (the event goes on without a trace); a tracestate is only
 * read beside a valid traceparent, and one that does not parse is dropped
 * whole, keeping the traceparent. A bad header never fails an event.
 *
 *   traceparent  version "-" trace-id "-" parent-id "-" trace-flags
 *                lowercase hex of 2, 32, 16 and 2 digits; version ff is
 *                invalid; version 00 is exactly 55 characters; a higher
 *                version is read as 00 when its first 55 characters parse
 *                and are followed by the end or a "-"; an all-zero trace-id
 *                or parent-id is invalid. Spaces and tabs around the value
 *                (HTTP's optional white space) are ignored.
 *   tracestate   at most 32 list-members "key=value" separated by ","
 *                with optional spaces and tabs around each; empty members
 *                are allowed and skipped; a key is lower case letters, digits and
 *                "_", "-", "*", "/", starting with a letter (at most 256
 *                characters), or "tenant@system" (at most 241 and 14); a value is 1..256 printable
 * ASCII characters other than "," and "=", not ending in a space; a key given twice makes the whole
 * header invalid.
 *
 * What is propagated is always written as version 00, with the flags ibus
 * knows (sampled 0x01 and random 0x02; other bits are reserved and sent as
 * zero), and the tracestate's members joined by "," (no white space). A
 * tracestate longer than IB_TRACESTATE_MAX is cut as the W3C advises:
 * members longer than 128 characters go first, then members from the end. */
#ifndef IB_TRACE_H
#define IB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define IB_TRACE_ID_HEX 32    /* hex digits of a trace id */
#define IB_SPAN_ID_HEX 16     /* hex digits of a span (parent) id */
#define IB_TRACEPARENT_LEN 55 /* a version 00 traceparent */
#define IB_TRACESTATE_MAX 512 /* longest tracestate kept and sent */
#define IB_TRACESTATE_MEMBERS 32

#define IB_TRACE_FLAG_SAMPLED 0x01u
#define IB_TRACE_FLAG_RANDOM 0x02u /* the trace id is random (Trace Context level 2) */

/* One trace context: a trace id, the span it names and its flags, kept both
 * as fields and as the headers to send. */
typedef struct ib_trace {
    char trace_id[IB_TRACE_ID_HEX + 1];       /* 32 lowercase hex, not all zero */
    char span_id[IB_SPAN_ID_HEX + 1];         /* 16 lowercase hex, not all zero: the
                                                 traceparent's parent-id field */
    uint8_t flags;                            /* IB_TRACE_FLAG_* bits */
    char traceparent[IB_TRACEPARENT_LEN + 1]; /* "00-<trace_id>-<span_id>-<flags>" */
    char tracestate[IB_TRACESTATE_MAX + 1];   /* members joined by ","; "" = none */
} ib_trace;

/* Parses `len` bytes of a traceparent header value into `out` (its
 * tracestate ""). Returns false, leaving `out` zeroed, when the value
 * breaks a rule above: the caller drops it. Never reads past `len`. */
bool ib_trace_parse(ib_trace *out, const char *value, size_t len);

/* Parses `len` bytes of a tracestate header value (several header lines
 * joined by "," first) into t->tracestate, cut to IB_TRACESTATE_MAX as
 * above. Returns false and leaves t->tracestate "" when the value breaks a
 * rule (the whole header is dropped). An empty or blank value is valid and
 * gives "". */
bool ib_trace_state_parse(ib_trace *t, const char *value, size_t len);

/* Continues `parent` with a new span: the same trace id, flags and
 * tracestate, a fresh random span id (never all zero, never the parent's).
 * `out` may be `parent`. Cannot fail. */
void ib_trace_child(ib_trace *out, const ib_trace *parent);

/* Starts a new trace in `out`: a random trace id and span id, flags
 * sampled and random, no tracestate. Errors: IB_ERR_IO when the system
 * gives no randomness. */
ib_status ib_trace_start(ib_trace *out, ib_error *err);

/* The trace of the work the calling thread does now, NULL for none. While
 * one is set, every log record the thread writes carries its trace_id and
 * span_id (log.h), and events published through the bus proxy continue it.
 * `t` is BORROWED until it is replaced or cleared with NULL: clear it
 * before `t` goes away. Per thread; never shared. */
void ib_trace_current_set(const ib_trace *t);
const ib_trace *ib_trace_current(void);

#endif
