/* SPDX-License-Identifier: Apache-2.0 */
/* Publish-to-ack latency at a paced rate.
 *
 * A consumer acks by publishing "+ACK" to the message's reply subject,
 * $JS.ACK.<stream>.<durable>.<delivered>.<stream seq>.<consumer seq>.<ts>.
 * <pending>, over core NATS; the server hands that ack to JetStream and to
 * any other subscription that matches it. The driver holds such a
 * subscription (the tap) and notes, on its own monotonic clock, when the
 * first ack for each stream sequence passed through the server. The paced
 * publisher notes on the same clock when it published each message, and the
 * stream is empty before, so stream sequence n is message n. Latency is the
 * difference: publish, store, pull, decode, dispatch, claim, handler, mark
 * (durable), ack, all included; nothing is asked of the consumer. */
#include "bench.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLEEP_SLACK_NS 200000 /* publish without sleeping when this close to the slot */
#define TAP_STALL_MS 30000

typedef struct tap {
    int64_t *t_ack; /* per message, 0 until its first ack */
    size_t n;
    size_t prefix_len; /* "$JS.ACK.<stream>.<durable>." */
    atomic_size_t seen;
} tap;

/* Token `k` (0-based) after the prefix, as a number; 0 when absent. */
static uint64_t token_u64(const char *s, int k)
{
    for (; k > 0 && s != NULL; k--) {
        s = strchr(s, '.');
        if (s != NULL)
            s++;
    }
    return s != NULL ? strtoull(s, NULL, 10) : 0;
}

static void on_ack(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    tap *t = closure;
    int64_t now = ib__bench_now_ns();
    (void)nc;
    (void)sub;
    if (natsMsg_GetDataLength(m) == 4 && memcmp(natsMsg_GetData(m), "+ACK", 4) == 0) {
        const char *subject = natsMsg_GetSubject(m);
        /* after the prefix: delivered, stream seq, consumer seq, ts, pending */
        uint64_t seq = token_u64(subject + t->prefix_len, 1);
        if (seq >= 1 && seq <= t->n && t->t_ack[seq - 1] == 0) {
            t->t_ack[seq - 1] = now;
            atomic_fetch_add_explicit(&t->seen, 1, memory_order_release);
        }
    }
    natsMsg_Destroy(m);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Drains the tap and waits until its callback has returned for good, so
 * the arrays may be read and freed. */
static void stop_tap(natsSubscription **sub)
{
    if (*sub == NULL)
        return;
    if (natsSubscription_Drain(*sub) == NATS_OK)
        natsSubscription_WaitForDrainCompletion(*sub, 5000);
    natsSubscription_Destroy(*sub);
    *sub = NULL;
}

static ib_status pace(int64_t *t_pub, natsConnection *nc, const char *subject, ib__bench_gen *gen,
                      size_t messages, double rate, double *achieved, ib_error *err)
{
    int64_t t0 = ib__bench_now_ns();
    for (size_t i = 0; i < messages; i++) {
        int64_t slot = t0 + (int64_t)((double)i * 1e9 / rate);
        int64_t now = ib__bench_now_ns();
        if (slot - now > SLEEP_SLACK_NS) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(slot - now)};
            nanosleep(&ts, NULL);
        }
        uint8_t *buf = NULL;
        size_t len = 0;
        ib_status st = ib__bench_gen_next(&buf, &len, gen, err);
        if (st != IB_OK)
            return st;
        t_pub[i] = ib__bench_now_ns();
        natsStatus s = natsConnection_Publish(nc, subject, buf, (int)len);
        free(buf);
        if (s != NATS_OK)
            return ib_error_set(err, IB_ERR_NATS, "publish to %s: %s", subject,
                                natsStatus_GetText(s));
    }
    natsConnection_FlushTimeout(nc, 10000);
    int64_t spent = t_pub[messages - 1] - t0;
    *achieved = spent > 0 ? (double)(messages - 1) * 1e9 / (double)spent : 0;
    return IB_OK;
}

ib_status ib__bench_latency_run(ib__bench_latency *out, natsConnection *nc, const char *stream,
                                const char *subject, const char *durable, ib__bench_gen *gen,
                                size_t messages, double rate, ib_error *err)
{
    char tap_subject[512];
    natsSubscription *sub = NULL;
    ib_status st = IB_OK;
    tap t = {.n = messages};

    memset(out, 0, sizeof(*out));
    if (messages < 2 || rate <= 0)
        return ib_error_set(err, IB_ERR_INVALID_ARG, "latency: need 2+ messages and a rate");
    int64_t *t_pub = calloc(messages, sizeof(*t_pub));
    t.t_ack = calloc(messages, sizeof(*t.t_ack));
    if (t_pub == NULL || t.t_ack == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "latency: out of memory");
        goto out;
    }
    atomic_init(&t.seen, 0);
    t.prefix_len =
        (size_t)snprintf(tap_subject, sizeof(tap_subject), "$JS.ACK.%s.%s.", stream, durable);
    snprintf(tap_subject + t.prefix_len, sizeof(tap_subject) - t.prefix_len, ">");
    natsStatus s = natsConnection_Subscribe(&sub, nc, tap_subject, on_ack, &t);
    if (s == NATS_OK) /* the tap sees every ack: never drop one as a slow consumer */
        s = natsSubscription_SetPendingLimits(sub, -1, -1);
    if (s == NATS_OK)
        s = natsConnection_FlushTimeout(nc, 5000); /* the tap is in place before the first ack */
    if (s != NATS_OK) {
        st = ib_error_set(err, IB_ERR_NATS, "ack tap %s: %s", tap_subject, natsStatus_GetText(s));
        goto out;
    }
    if ((st = pace(t_pub, nc, subject, gen, messages, rate, &out->rate, err)) != IB_OK)
        goto out;

    size_t last_seen = 0;
    int64_t last_progress = ib__bench_now_ms();
    for (;;) {
        size_t seen = atomic_load_explicit(&t.seen, memory_order_acquire);
        if (seen == messages)
            break;
        if (seen != last_seen) {
            last_seen = seen;
            last_progress = ib__bench_now_ms();
        } else if (ib__bench_now_ms() - last_progress > TAP_STALL_MS) {
            st = ib_error_set(err, IB_ERR_TIMEOUT, "latency: %zu of %zu acks seen on %s", seen,
                              messages, tap_subject);
            goto out;
        }
        ib__bench_sleep_ms(10);
    }
    stop_tap(&sub);
    for (size_t i = 0; i < messages; i++)
        t.t_ack[i] -= t_pub[i];
    qsort(t.t_ack, messages, sizeof(*t.t_ack), cmp_i64);
    out->messages = messages;
    out->p50_ms = (double)t.t_ack[(messages - 1) / 2] / 1e6;
    out->p99_ms = (double)t.t_ack[(size_t)((double)(messages - 1) * 0.99)] / 1e6;
    out->max_ms = (double)t.t_ack[messages - 1] / 1e6;
out:
    stop_tap(&sub);
    free(t_pub);
    free(t.t_ack);
    return st;
}
