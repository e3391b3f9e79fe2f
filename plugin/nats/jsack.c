/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <string.h>

#define PREFIX "$JS.ACK."
#define MAX_TOKENS 16

/* Strict decimal without sign or leading '+'; refuses overflow. Up to 19
 * digits cannot overflow 64 bits, so only a 20-digit token pays for the
 * check; the subject arrives with every message, so this is hot. */
static int parse_u64(uint64_t *out, const char *s, size_t len)
{
    uint64_t v = 0;
    if (len == 0 || len > 20)
        return -1;
    size_t quick = len < 19 ? len : 19;
    for (size_t i = 0; i < quick; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9)
            return -1;
        v = v * 10 + d;
    }
    if (len == 20) {
        unsigned d = (unsigned)(unsigned char)s[19] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* One pass over the subject: each token is cut where its dot is found, with
 * no call per token; the numbers are read once the form is known. */
ib_status ib_jsack_parse(ib_jsack_meta *out, const char *reply, size_t len, ib_error *err)
{
    const size_t plen = sizeof(PREFIX) - 1;
    const char *tok[MAX_TOKENS];
    size_t tlen[MAX_TOKENS];
    size_t n = 0;

    if (reply == NULL || len < plen || memcmp(reply, PREFIX, plen) != 0)
        return ib_error_set(err, IB_ERR_DECODE, "reply subject is not a JetStream ack subject");
    const char *start = reply + plen, *end = reply + len;
    for (const char *q = start;; q++) {
        if (q < end && *q != '.')
            continue;
        if (n == MAX_TOKENS)
            return ib_error_set(err, IB_ERR_DECODE, "ack subject has too many tokens");
        if (q == start)
            return ib_error_set(err, IB_ERR_DECODE, "ack subject has an empty token");
        tok[n] = start;
        tlen[n] = (size_t)(q - start);
        n++;
        if (q == end)
            break;
        start = q + 1;
    }
    /* Seven tokens after the prefix in the first form; nine or more in the
     * form with domain and account hash. */
    size_t base;
    if (n == 7)
        base = 0;
    else if (n >= 9)
        base = 2;
    else
        return ib_error_set(err, IB_ERR_DECODE, "ack subject has %zu tokens, expected 7 or 9+", n);

    uint64_t ts = 0;
    out->stream = tok[base];
    out->stream_len = tlen[base];
    out->consumer = tok[base + 1];
    out->consumer_len = tlen[base + 1];
    if (parse_u64(&out->delivered, tok[base + 2], tlen[base + 2]) != 0 ||
        parse_u64(&out->stream_seq, tok[base + 3], tlen[base + 3]) != 0 ||
        parse_u64(&out->consumer_seq, tok[base + 4], tlen[base + 4]) != 0 ||
        parse_u64(&ts, tok[base + 5], tlen[base + 5]) != 0 ||
        parse_u64(&out->pending, tok[base + 6], tlen[base + 6]) != 0)
        return ib_error_set(err, IB_ERR_DECODE, "ack subject has a non-numeric sequence field");
    if (ts > (uint64_t)INT64_MAX)
        return ib_error_set(err, IB_ERR_DECODE, "ack subject timestamp out of range");
    out->timestamp_ns = (int64_t)ts;
    return IB_OK;
}
