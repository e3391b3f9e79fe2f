/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the W3C Trace Context parsers on arbitrary bytes.
 *
 * The input is a traceparent, a newline and a tracestate (without a
 * newline, all of it is tried as both). An accepted traceparent comes out
 * as a version 00 value of 55 characters that parses back to itself, with
 * non-zero lowercase ids and only the known flags; a refused one leaves
 * nothing. An accepted tracestate is at most IB_TRACESTATE_MAX characters,
 * holds no white space or control byte, and parses back to itself; a
 * refused one leaves "". A child keeps the trace and changes the span. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "trace.h"

static bool lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static void check_traceparent(const char *in, size_t len)
{
    ib_trace t, again, child;
    if (!ib_trace_parse(&t, in, len)) {
        FUZZ_CHECK(t.traceparent[0] == '\0' && t.trace_id[0] == '\0');
        return;
    }
    FUZZ_CHECK(strlen(t.traceparent) == IB_TRACEPARENT_LEN);
    FUZZ_CHECK(memcmp(t.traceparent, "00-", 3) == 0);
    FUZZ_CHECK(strlen(t.trace_id) == IB_TRACE_ID_HEX && lower_hex(t.trace_id, IB_TRACE_ID_HEX));
    FUZZ_CHECK(strlen(t.span_id) == IB_SPAN_ID_HEX && lower_hex(t.span_id, IB_SPAN_ID_HEX));
    FUZZ_CHECK(strspn(t.trace_id, "0") != IB_TRACE_ID_HEX &&
               strspn(t.span_id, "0") != IB_SPAN_ID_HEX);
    FUZZ_CHECK((t.flags & ~(IB_TRACE_FLAG_SAMPLED | IB_TRACE_FLAG_RANDOM)) == 0);
    FUZZ_CHECK(ib_trace_parse(&again, t.traceparent, IB_TRACEPARENT_LEN));
    FUZZ_CHECK(strcmp(again.traceparent, t.traceparent) == 0);
    ib_trace_child(&child, &t);
    FUZZ_CHECK(strcmp(child.trace_id, t.trace_id) == 0);
    FUZZ_CHECK(strcmp(child.span_id, t.span_id) != 0);
    FUZZ_CHECK(child.flags == t.flags);
}

static void check_tracestate(const char *in, size_t len)
{
    ib_trace t, again;
    memset(&t, 0, sizeof(t));
    if (!ib_trace_state_parse(&t, in, len)) {
        FUZZ_CHECK(t.tracestate[0] == '\0');
        return;
    }
    size_t n = strlen(t.tracestate);
    FUZZ_CHECK(n <= IB_TRACESTATE_MAX);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(t.tracestate[i] >= 0x20 && t.tracestate[i] <= 0x7e && t.tracestate[i] != '\t');
    FUZZ_CHECK(n == 0 || (t.tracestate[0] != ' ' && t.tracestate[n - 1] != ' '));
    FUZZ_CHECK(ib_trace_state_parse(&again, t.tracestate, n));
    FUZZ_CHECK(strcmp(again.tracestate, t.tracestate) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    const char *nl = memchr(in, '\n', size);
    if (nl == NULL) {
        check_traceparent(in, size);
        check_tracestate(in, size);
        return 0;
    }
    size_t first = (size_t)(nl - in);
    check_traceparent(in, first);
    check_tracestate(nl + 1, size - first - 1);
    return 0;
}
