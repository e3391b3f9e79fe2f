/* SPDX-License-Identifier: Apache-2.0 */
/* Pipelined reads through the stream leader for the kv: recorder.
 *
 * js_GetLastMsg asks one key per round trip. A batch of claims needs the
 * marker and claim epochs of every key, so the same request (the stream's
 * message API, <api prefix>.STREAM.MSG.GET, which only the leader answers) is
 * sent for all of them at once, each with its own reply subject under one
 * inbox, and the answers are collected as they come. The answer is JSON
 * with the message's headers and data in base64; only the few fields the
 * recorder needs are read. On these reads stands the search for a key's
 * highest claim epoch, which starts from the epoch the key's anchor names
 * (see kv_io.h). */
#include "kv_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 up to the closing quote into `out` (at most cap - 1
 * bytes, NUL-terminated, cut if longer); returns the length. */
static size_t b64_decode(char *out, size_t cap, const char *in)
{
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *in != '\0' && *in != '"'; in++) {
        int v = b64_value(*in);
        if (v < 0)
            continue; /* padding */
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 < cap)
                out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[n] = '\0';
    return n;
}

/* The string value of "name" in `json`, or NULL. */
static const char *json_string(const char *json, const char *name)
{
    char key[16];
    snprintf(key, sizeof(key), "\"%s\":\"", name);
    const char *p = strstr(json, key);
    return p != NULL ? p + strlen(key) : NULL;
}

/* One answer of the message API into `out`. */
static ib_status parse_answer(kv_recorder *k, kv_read *out, const char *json, ib_error *err)
{
    memset(out, 0, sizeof(*out));
    if (strstr(json, "\"error\"") != NULL) {
        /* 404 (no message for the subject) is an answer: not found. */
        const char *code = strstr(json, "\"code\":");
        if (code != NULL && strtol(code + 7, NULL, 10) == 404)
            return IB_OK;
        return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: read refused: %.200s", k->bucket,
                            json);
    }
    const char *seq = strstr(json, "\"seq\":");
    const char *data = json_string(json, "data");
    const char *hdrs = json_string(json, "hdrs");
    if (seq == NULL)
        return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: unexpected read answer",
                            k->bucket);
    out->found = true;
    out->seq = strtoull(seq + 6, NULL, 10);
    if (data != NULL)
        b64_decode(out->value, sizeof(out->value), data);
    if (hdrs != NULL) {
        char h[512];
        b64_decode(h, sizeof(h), hdrs);
        out->deleted = strstr(h, "KV-Operation") != NULL;
    }
    return IB_OK;
}

/* Sends every request, replies to "<inbox>.<i>". */
static natsStatus send_requests(kv_recorder *k, const char *inbox,
                                const char (*subjects)[KV_SUBJECT_MAX], size_t n)
{
    char api[IB_JS_API_PREFIX_MAX + 64 + IB__KV_BUCKET_MAX], reply[96], body[KV_SUBJECT_MAX + 32];
    snprintf(api, sizeof(api), "%s.STREAM.MSG.GET.%s", k->api_prefix, k->stream);
    natsStatus s = NATS_OK;
    for (size_t i = 0; i < n && s == NATS_OK; i++) {
        snprintf(reply, sizeof(reply), "%s.%zu", inbox, i);
        int len = snprintf(body, sizeof(body), "{\"last_by_subj\":\"%s\"}", subjects[i]);
        s = natsConnection_PublishRequest(k->nc, api, reply, body, len);
    }
    return s;
}

/* Collects the n answers (each once) until the wait runs out. */
static ib_status collect(kv_recorder *k, natsSubscription *sub, kv_read *out, size_t n,
                         ib_error *err)
{
    bool *seen = calloc(n, sizeof(*seen));
    if (seen == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to read", k->bucket);
    int64_t deadline = ib_clock_monotonic_ms() + k->wait_ms;
    ib_status st = IB_OK;
    for (size_t got = 0; got < n && st == IB_OK;) {
        int64_t left = deadline - ib_clock_monotonic_ms();
        natsMsg *m = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, sub, left > 0 ? left : 1);
        if (s != NATS_OK) {
            st = ib__kv_fail(k, err, s, "read");
            break;
        }
        const char *dot = strrchr(natsMsg_GetSubject(m), '.');
        size_t i = dot != NULL ? (size_t)strtoull(dot + 1, NULL, 10) : n;
        if (i < n && !seen[i]) {
            char *json = strndup(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
            st = json != NULL
                     ? parse_answer(k, &out[i], json, err)
                     : ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory", k->bucket);
            free(json);
            seen[i] = true;
            got++;
        }
        natsMsg_Destroy(m);
    }
    free(seen);
    return st;
}

ib_status ib__kv_read_many(kv_recorder *k, kv_read *out, const char (*subjects)[KV_SUBJECT_MAX],
                           size_t n, ib_error *err)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    char filter[96];
    if (n == 0)
        return IB_OK;
    /* One key: the JetStream context's request, without an inbox of its
     * own to subscribe and drop. */
    if (n == 1)
        return ib__kv_read_last(k, out, subjects[0], err);
    natsStatus s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
        snprintf(filter, sizeof(filter), "%s.*", inbox);
        s = natsConnection_SubscribeSync(&sub, k->nc, filter);
    }
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(sub, -1, -1);
    if (s == NATS_OK)
        s = send_requests(k, inbox, subjects, n);
    ib_status st = s == NATS_OK ? collect(k, sub, out, n, err) : ib__kv_fail(k, err, s, "read");
    if (sub != NULL)
        natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    return st;
}

/* --- the state of a key ------------------------------------------------------ */

/* The fingerprint after a done marker's time, or 0 (a marker written
 * without one, or by a build before fingerprints). */
static uint64_t done_fingerprint(const char *v)
{
    char *end = NULL;
    (void)strtoll(v, &end, 10);
    if (end == NULL || *end != ' ')
        return 0;
    return strtoull(end + 1, NULL, 10);
}

/* Where the search for a key's highest epoch stands. Epochs are made one
 * after the other, each after its predecessor was read, and the bucket's
 * TTL removes them oldest first: the live ones are a run n0..N. The
 * anchor names one of them (every epoch's writer rewrites it after its
 * Create), so the search starts there and gallops up (n+1, n+3, n+7, ...)
 * to a missing one, then bisects; no epoch below the anchor's is read. A
 * renewal makes an epoch too, so a long handler leaves many. */
typedef struct epoch_search {
    uint32_t lo, hi; /* lo exists (0 = none), hi does not once !gallop */
    uint32_t step;   /* while galloping: the next probe is lo + step */
    bool gallop, finished;
    kv_read best; /* epoch lo's value */
} epoch_search;

/* The epoch to read next for an unfinished search. */
static uint32_t next_probe(const epoch_search *e)
{
    return e->gallop ? e->lo + e->step : e->lo + (e->hi - e->lo) / 2;
}

static ib_status take_probe(kv_recorder *k, epoch_search *e, uint32_t probe, const kv_read *rd,
                            ib_error *err)
{
    if (rd->found) {
        e->lo = probe;
        e->best = *rd;
        if (e->gallop && (e->step > UINT32_MAX / 4 || e->lo > UINT32_MAX / 2))
            return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: too many claim epochs",
                                k->bucket);
        if (e->gallop)
            e->step *= 2;
    } else {
        e->gallop = false;
        e->hi = probe;
    }
    e->finished = !e->gallop && e->hi - e->lo <= 1;
    return IB_OK;
}

typedef struct head_reads {
    char (*subjects)[KV_SUBJECT_MAX];
    kv_read *reads;
    size_t *key; /* reads[j] is for keys[key[j]] */
    epoch_search *search;
} head_reads;

static void head_reads_free(head_reads *hr)
{
    free(hr->subjects);
    free(hr->reads);
    free(hr->key);
    free(hr->search);
}

/* One round: the next epoch of every unfinished search, read together. */
static ib_status search_round(kv_recorder *k, head_reads *hr, const ib_marker_key *keys, size_t n,
                              bool *more, ib_error *err)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (hr->search[i].finished)
            continue;
        ib__kv_subject(k, hr->subjects[m], 'c', &keys[i], next_probe(&hr->search[i]));
        hr->key[m++] = i;
    }
    *more = m > 0;
    ib_status st = ib__kv_read_many(k, hr->reads, hr->subjects, m, err);
    for (size_t j = 0; j < m && st == IB_OK; j++) {
        epoch_search *e = &hr->search[hr->key[j]];
        st = take_probe(k, e, next_probe(e), &hr->reads[j], err);
    }
    return st;
}

/* Starts the search of key i from its marker (reads[i]) and its anchor
 * (reads[n + i]). */
static void start_search(kv_head *h, epoch_search *e, const kv_read *marker, const kv_read *anchor)
{
    memset(h, 0, sizeof(*h));
    h->done = marker->found && !marker->deleted;
    h->fp = h->done ? done_fingerprint(marker->value) : 0;
    *e = (epoch_search){.step = 1, .gallop = true, .finished = h->done || !anchor->found};
    if (h->done || !anchor->found)
        return;
    /* a value Created as epoch 1 is epoch 1; a rewrite names its epoch */
    uint32_t named = ib__kv_parse_claim(h, anchor->value);
    e->lo = named > 0 ? named : 1;
    e->best = *anchor;
}

/* The markers of the keys found claimed and not done, read again once
 * their epochs are known. A mark stores its marker before it rewrites the
 * anchor as released, and the first round read the marker before the
 * anchor: a mark that landed between the two would show a released claim
 * and no marker, and the key would be taken over and run again. Read
 * after the claim was seen, the marker of such a mark is there. */
static ib_status reread_markers(kv_recorder *k, kv_head *h, head_reads *hr,
                                const ib_marker_key *keys, size_t n, ib_error *err)
{
    size_t t = 0;
    for (size_t i = 0; i < n; i++)
        if (!h[i].done && h[i].epoch > 0) {
            ib__kv_subject(k, hr->subjects[t], 'd', &keys[i], 0);
            hr->key[t++] = i;
        }
    ib_status st = t > 0 ? ib__kv_read_many(k, hr->reads, hr->subjects, t, err) : IB_OK;
    for (size_t j = 0; j < t && st == IB_OK; j++) {
        kv_head *x = &h[hr->key[j]];
        if (hr->reads[j].found && !hr->reads[j].deleted) {
            x->done = true;
            x->fp = done_fingerprint(hr->reads[j].value);
        }
    }
    return st;
}

ib_status ib__kv_read_heads(kv_recorder *k, kv_head *h, const ib_marker_key *keys, size_t n,
                            ib_error *err)
{
    head_reads hr = {calloc(2 * n, sizeof(*hr.subjects)), calloc(2 * n, sizeof(kv_read)),
                     calloc(n, sizeof(size_t)), calloc(n, sizeof(epoch_search))};
    if (hr.subjects == NULL || hr.reads == NULL || hr.key == NULL || hr.search == NULL) {
        head_reads_free(&hr);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to read %zu keys",
                            k->bucket, n);
    }
    /* The markers and the anchors first, in one round: a done key needs no
     * epochs, and the anchor says where the live ones are. */
    for (size_t i = 0; i < n; i++) {
        ib__kv_subject(k, hr.subjects[i], 'd', &keys[i], 0);
        ib__kv_subject(k, hr.subjects[n + i], 'c', &keys[i], 1);
    }
    ib_status st = ib__kv_read_many(k, hr.reads, hr.subjects, 2 * n, err);
    for (size_t i = 0; i < n && st == IB_OK; i++)
        start_search(&h[i], &hr.search[i], &hr.reads[i], &hr.reads[n + i]);
    for (bool more = true; more && st == IB_OK;)
        st = search_round(k, &hr, keys, n, &more, err);
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        h[i].epoch = hr.search[i].lo;
        if (h[i].epoch > 0)
            ib__kv_parse_claim(&h[i], hr.search[i].best.value);
    }
    if (st == IB_OK && k->heads_read != NULL)
        k->heads_read(k->heads_read_ctx);
    if (st == IB_OK)
        st = reread_markers(k, h, &hr, keys, n, err);
    head_reads_free(&hr);
    return st;
}

ib_status ib__kv_read_head(kv_recorder *k, kv_head *h, const ib_marker_key *key, ib_error *err)
{
    return ib__kv_read_heads(k, h, key, 1, err);
}
