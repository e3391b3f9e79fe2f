/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's event streams: a deterministic generator (ids, payloads,
 * duplicates) and the JetStream setup every row shares.
 *
 * A duplicate is a new message that repeats the id (and so the payload) of
 * one of the last 4096 unique events, picked at random: what a producer that retried a publish,
 * or a replay, puts in a stream. Some land in the same pull batch as their
 * original, most in a later one. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "event.h"

#define RECENT_IDS 4096
#define FLUSH_EVERY 1024

/* Settings of every benchmark consumer: what `ibus run --create` would
 * make with its defaults. */
#define CONSUMER_ACK_WAIT_NS (30LL * 1000 * 1000 * 1000)
#define CONSUMER_MAX_DELIVER (-1) /* ibus enforces its own --max-deliver */
#define CONSUMER_MAX_ACK_PENDING 1000

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void make_uuid4(char out[33], uint64_t *s)
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[16];
    uint64_t a = splitmix(s), c = splitmix(s);
    memcpy(b, &a, 8);
    memcpy(b + 8, &c, 8);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
}

ib_status ib__bench_gen_init(ib__bench_gen *g, double duplicates, uint64_t seed, ib_error *err)
{
    memset(g, 0, sizeof(*g));
    g->state = seed;
    g->duplicates = duplicates;
    g->recent_cap = RECENT_IDS;
    g->recent = calloc(g->recent_cap, sizeof(*g->recent));
    if (g->recent == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "generator: out of memory");
    return IB_OK;
}

void ib__bench_gen_free(ib__bench_gen *g)
{
    free(g->recent);
    g->recent = NULL;
}

ib_status ib__bench_gen_next(uint8_t **buf, size_t *len, ib__bench_gen *g, ib_error *err)
{
    char id[33];
    uint8_t payload[IB__BENCH_PAYLOAD_BYTES];
    double u = (double)(splitmix(&g->state) >> 11) / 9007199254740992.0;

    if (g->recent_len > 0 && u < g->duplicates) {
        size_t k = (size_t)(splitmix(&g->state) % g->recent_len);
        memcpy(id, g->recent[k], sizeof(id));
    } else {
        make_uuid4(id, &g->state);
        memcpy(g->recent[g->recent_next], id, sizeof(id));
        g->recent_next = (g->recent_next + 1) % g->recent_cap;
        if (g->recent_len < g->recent_cap)
            g->recent_len++;
        g->unique++;
    }
    /* The payload follows from the id, so a duplicate carries its
     * original's: a reused id with other content is a conflict, which the
     * host dead-letters, not a duplicate. */
    uint64_t ps = 0;
    for (size_t i = 0; i < 32; i++)
        ps = ps * 31 + (uint8_t)id[i];
    for (size_t i = 0; i < sizeof(payload); i += 8) {
        uint64_t r = splitmix(&ps);
        memcpy(payload + i, &r, 8);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ib_event_fields f = {
        .id = id,
        .type = IB__BENCH_EVENT_TYPE,
        .payload = payload,
        .payload_len = sizeof(payload),
        .created_at_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
        .source = "consumer_bench",
    };
    g->made++;
    return ib_event_encode(buf, len, &f, err);
}

ib_status ib__bench_stream_create(jsCtx *js, const char *name, const char *subject, ib_error *err)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {subject};

    js_DeleteStream(js, name, NULL, NULL); /* a leftover of an earlier run, if any */
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    natsStatus s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    if (s != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "create stream %s: %s (jetstream error %d)", name,
                            natsStatus_GetText(s), (int)jerr);
    jsStreamInfo_Destroy(si);
    return IB_OK;
}

static ib_status wait_stream_count(jsCtx *js, const char *name, uint64_t want, ib_error *err)
{
    int64_t deadline = ib__bench_now_ms() + 60000;
    uint64_t have = 0;
    while (ib__bench_now_ms() < deadline) {
        jsStreamInfo *si = NULL;
        if (js_GetStreamInfo(&si, js, name, NULL, NULL) == NATS_OK) {
            have = si->State.Msgs;
            jsStreamInfo_Destroy(si);
            if (have == want)
                return IB_OK;
            if (have > want)
                break;
        }
        ib__bench_sleep_ms(20);
    }
    return ib_error_set(err, IB_ERR_NATS, "stream %s holds %llu messages, expected %llu", name,
                        (unsigned long long)have, (unsigned long long)want);
}

ib_status ib__bench_stream_fill(natsConnection *nc, jsCtx *js, const ib__bench_stream_spec *spec,
                                ib_error *err)
{
    ib__bench_gen g;
    ib_status st = ib__bench_stream_create(js, spec->name, spec->subject, err);
    if (st != IB_OK)
        return st;
    if ((st = ib__bench_gen_init(&g, spec->duplicates, spec->seed, err)) != IB_OK)
        return st;
    /* Plain publishes, flushed in blocks: the stream count at the end
     * proves every message was stored. */
    for (size_t i = 0; i < spec->messages; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if ((st = ib__bench_gen_next(&buf, &len, &g, err)) != IB_OK)
            goto out;
        natsStatus s = natsConnection_Publish(nc, spec->subject, buf, (int)len);
        free(buf);
        if (s == NATS_OK && (i + 1) % FLUSH_EVERY == 0)
            s = natsConnection_FlushTimeout(nc, 30000);
        if (s != NATS_OK) {
            st = ib_error_set(err, IB_ERR_NATS, "publish to %s: %s", spec->subject,
                              natsStatus_GetText(s));
            goto out;
        }
    }
    natsConnection_FlushTimeout(nc, 30000);
    st = wait_stream_count(js, spec->name, spec->messages, err);
out:
    ib__bench_gen_free(&g);
    return st;
}

ib_status ib__bench_consumer_create(jsCtx *js, const char *stream, const char *durable,
                                    ib_error *err)
{
    jsConsumerConfig cc;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;

    js_DeleteConsumer(js, stream, durable, NULL, NULL);
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable;
    cc.AckPolicy = js_AckExplicit;
    cc.DeliverPolicy = js_DeliverAll;
    cc.AckWait = CONSUMER_ACK_WAIT_NS;
    cc.MaxDeliver = CONSUMER_MAX_DELIVER;
    cc.MaxAckPending = CONSUMER_MAX_ACK_PENDING;
    natsStatus s = js_AddConsumer(&ci, js, stream, &cc, NULL, &jerr);
    if (s != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "create consumer %s on %s: %s (jetstream error %d)",
                            durable, stream, natsStatus_GetText(s), (int)jerr);
    jsConsumerInfo_Destroy(ci);
    return IB_OK;
}
