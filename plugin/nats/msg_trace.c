/* SPDX-License-Identifier: Apache-2.0 */
/* The trace context a message carries, and the one a published message
 * gets (jetstream.h, "Trace context"). */
#include "jetstream.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Longest tracestate read from headers, all lines joined: beyond it the
 * header is dropped rather than parsed (ibus keeps IB_TRACESTATE_MAX). */
#define STATE_READ_MAX 8192
/* Values of one header read at most (more than one traceparent is
 * invalid anyway). */
#define VALUES_MAX 8

/* Collects the values of header `name` under its two spellings: lower case
 * (W3C, OpenTelemetry) and Go's canonical form ("Traceparent"). nats.c
 * matches header names exactly. Returns how many were found (at most
 * `cap`); they point into `msg`. */
static int nats_values(natsMsg *msg, const char *lower, const char *canonical, const char **out,
                       int cap)
{
    const char *names[] = {lower, canonical};
    int n = 0;
    for (int k = 0; k < 2; k++) {
        const char **values = NULL;
        int count = 0;
        if (natsMsgHeader_Values(msg, names[k], &values, &count) != NATS_OK)
            continue;
        for (int i = 0; i < count && n < cap; i++)
            out[n++] = values[i];
        free((void *)values);
    }
    return n;
}

/* Joins `n` header lines into one tracestate and parses it into t. */
static void state_from(ib_trace *t, const char *const *values, int n)
{
    char joined[STATE_READ_MAX + 1];
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t vl = strlen(values[i]);
        if (len + vl + 1 > STATE_READ_MAX)
            return; /* too long to be worth parsing: dropped */
        if (i > 0)
            joined[len++] = ',';
        memcpy(joined + len, values[i], vl);
        len += vl;
    }
    ib_trace_state_parse(t, joined, len);
}

/* The Event's own headers, matched without regard to case: a map may hold
 * "traceparent" and "Traceparent" both, which is two values (invalid). */
static bool event_trace(ib_trace *out, const ib_event *ev)
{
    const char *tp[VALUES_MAX], *ts[VALUES_MAX];
    int ntp = 0, nts = 0;
    for (size_t i = 0; i < ev->header_count; i++) {
        const ib_event_header *h = &ev->headers[i];
        if (strcasecmp(h->key, IB_TRACEPARENT_HEADER) == 0 && ntp < VALUES_MAX)
            tp[ntp++] = h->value;
        else if (strcasecmp(h->key, IB_TRACESTATE_HEADER) == 0 && nts < VALUES_MAX)
            ts[nts++] = h->value;
    }
    if (ntp != 1 || !ib_trace_parse(out, tp[0], strlen(tp[0])))
        return false;
    state_from(out, ts, nts);
    return true;
}

bool ib_msg_trace_read(ib_trace *out, natsMsg *msg, const ib_event *event)
{
    const char *v[VALUES_MAX];
    int n = msg != NULL ? nats_values(msg, IB_TRACEPARENT_HEADER, "Traceparent", v, VALUES_MAX) : 0;
    if (n == 1 && ib_trace_parse(out, v[0], strlen(v[0]))) {
        n = nats_values(msg, IB_TRACESTATE_HEADER, "Tracestate", v, VALUES_MAX);
        state_from(out, v, n);
        return true;
    }
    if (event != NULL && event_trace(out, event))
        return true;
    memset(out, 0, sizeof(*out));
    return false;
}

bool ib_trace_headers_name_one(const ib_event_header *headers, size_t n)
{
    for (size_t i = 0; headers != NULL && i < n; i++)
        if (headers[i].key != NULL && strcasecmp(headers[i].key, IB_TRACEPARENT_HEADER) == 0)
            return true;
    return false;
}

natsStatus ib_msg_trace_set(natsMsg *msg, const ib_trace *t)
{
    natsStatus s = natsMsgHeader_Set(msg, IB_TRACEPARENT_HEADER, t->traceparent);
    if (s == NATS_OK && t->tracestate[0] != '\0')
        s = natsMsgHeader_Set(msg, IB_TRACESTATE_HEADER, t->tracestate);
    return s;
}
