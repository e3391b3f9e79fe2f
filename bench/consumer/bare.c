/* SPDX-License-Identifier: Apache-2.0 */
/* bench_bare: the limit the consumer benchmark compares `ibus run` with.
 *
 * A JetStream pull consumer written directly on nats.c that does nothing
 * but ack (optionally decoding each event first with ib_event_decode). It
 * pulls the way the host does: a core-NATS subscription on its own inbox
 * and pull requests {"batch":N,"expires":ns} published to
 * $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>, one request in flight,
 * the next sent (and flushed at once) when the last message of the current
 * one has arrived; with --pipeline 2, two in flight, the next sent when
 * the older one has brought its last message (the server then always has
 * a request to deliver to).
 * natsSubscription_Fetch is avoided on purpose (heap overflow in nats.c
 * 3.4.1 with leftovers of an expired pull). Each message is acked ("+ACK"
 * on its reply subject, fire-and-forget) as soon as it arrives.
 *
 *   bench_bare --url URL --stream S --durable D [--batch 64] [--pipeline 1|2]
 *              [--decode]
 *
 * Runs until SIGTERM or SIGINT, then flushes its acks, prints
 * "received=N acked=N decode_failed=N" and exits 0. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "event.h"

#define LOCAL_EXPIRY_MARGIN_MS 500

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct bare_args {
    const char *url, *stream, *durable;
    long batch;
    long expires_ms;
    long pipeline; /* pull requests in flight */
    bool decode;
} bare_args;

static int usage(void)
{
    fprintf(stderr, "usage: bench_bare --url URL --stream NAME --durable NAME [--batch N] "
                    "[--expires-ms MS] [--pipeline 1|2] [--decode]\n");
    return 2;
}

static int parse_args(bare_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof(*a));
    a->batch = 64;
    a->expires_ms = 1000;
    a->pipeline = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--decode") == 0) {
            a->decode = true;
            continue;
        }
        if (v == NULL)
            return -1;
        if (strcmp(argv[i], "--url") == 0)
            a->url = v;
        else if (strcmp(argv[i], "--stream") == 0)
            a->stream = v;
        else if (strcmp(argv[i], "--durable") == 0)
            a->durable = v;
        else if (strcmp(argv[i], "--batch") == 0)
            a->batch = strtol(v, NULL, 10);
        else if (strcmp(argv[i], "--expires-ms") == 0)
            a->expires_ms = strtol(v, NULL, 10);
        else if (strcmp(argv[i], "--pipeline") == 0)
            a->pipeline = strtol(v, NULL, 10);
        else
            return -1;
        i++;
    }
    if (a->url == NULL || a->stream == NULL || a->durable == NULL || a->batch < 1 ||
        a->batch > 4096 || a->expires_ms < 10 || a->pipeline < 1 || a->pipeline > 2)
        return -1;
    return 0;
}

/* A status message (no data, a Status header): 404/408/409 end the
 * request in flight, 100 is a heartbeat. */
static bool is_status(natsMsg *m, bool *ends_request)
{
    const char *status = NULL;
    if (natsMsg_GetDataLength(m) != 0 || natsMsgHeader_Get(m, "Status", &status) != NATS_OK ||
        status == NULL)
        return false;
    *ends_request = strcmp(status, "100") != 0;
    return true;
}

/* The consumer's connection, its pull state and its counters. */
typedef struct bare {
    bare_args a;
    natsConnection *nc;
    natsSubscription *sub;
    natsInbox *inbox;
    char next_subject[512];
    char request[96];
    int request_len;
    long outstanding; /* messages the requests in flight may still bring */
    int64_t request_deadline;
    uint64_t received, acked, decode_failed;
} bare;

/* Sends the next pull request when fewer than --pipeline are in flight or
 * the last one should have expired. */
static natsStatus pull_if_due(bare *b)
{
    if (nats_Now() >= b->request_deadline)
        b->outstanding = 0; /* lost or expired: ask again */
    if (b->outstanding > (b->a.pipeline - 1) * b->a.batch)
        return NATS_OK;
    natsStatus s =
        natsConnection_PublishRequest(b->nc, b->next_subject, b->inbox, b->request, b->request_len);
    /* nats.c's flusher holds a publish back for up to 1 ms to batch
     * writes; a pull request held back is a millisecond per batch in
     * which the server has nothing to deliver. A flush sends it now
     * (and waits for the server's PONG). */
    if (s == NATS_OK)
        s = natsConnection_FlushTimeout(b->nc, 1000);
    if (s != NATS_OK)
        return s;
    b->outstanding += b->a.batch;
    b->request_deadline = nats_Now() + b->a.expires_ms + LOCAL_EXPIRY_MARGIN_MS;
    return NATS_OK;
}

/* Decodes (if asked) and acks one delivered message; takes `m`. */
static void handle(bare *b, natsMsg *m)
{
    bool ends = false;
    if (is_status(m, &ends)) {
        if (ends)
            b->outstanding = b->outstanding > b->a.batch ? b->outstanding - b->a.batch : 0;
        natsMsg_Destroy(m);
        return;
    }
    b->received++;
    if (b->outstanding > 0)
        b->outstanding--;
    if (b->a.decode) {
        ib_event *ev = NULL;
        ib_event_reject why = IB_EVENT_NOT_REJECTED;
        if (ib_event_decode(&ev, &why, natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), NULL,
                            NULL) != IB_OK)
            b->decode_failed++;
        ib_event_free(ev);
    }
    const char *reply = natsMsg_GetReply(m);
    if (reply != NULL && natsConnection_PublishString(b->nc, reply, "+ACK") == NATS_OK)
        b->acked++;
    natsMsg_Destroy(m);
}

/* Pulls and acks until a signal; 0, or 1 after printing the error. */
static int consume(bare *b)
{
    while (!stop_requested) {
        natsStatus s = pull_if_due(b);
        if (s != NATS_OK) {
            fprintf(stderr, "bench_bare: pull request: %s\n", natsStatus_GetText(s));
            return 1;
        }
        natsMsg *m = NULL;
        s = natsSubscription_NextMsg(&m, b->sub, 100);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK) {
            fprintf(stderr, "bench_bare: next message: %s\n", natsStatus_GetText(s));
            return 1;
        }
        handle(b, m);
    }
    return 0;
}

int main(int argc, char **argv)
{
    bare b = {0};
    natsStatus s;
    int code = 1;

    if (parse_args(&b.a, argc, argv) != 0)
        return usage();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    snprintf(b.next_subject, sizeof(b.next_subject), "$JS.API.CONSUMER.MSG.NEXT.%s.%s", b.a.stream,
             b.a.durable);
    b.request_len = snprintf(b.request, sizeof(b.request), "{\"batch\":%ld,\"expires\":%lld}",
                             b.a.batch, (long long)b.a.expires_ms * 1000000LL);
    if ((s = natsConnection_ConnectTo(&b.nc, b.a.url)) != NATS_OK ||
        (s = natsInbox_Create(&b.inbox)) != NATS_OK ||
        (s = natsConnection_SubscribeSync(&b.sub, b.nc, b.inbox)) != NATS_OK)
        fprintf(stderr, "bench_bare: %s: %s\n", b.a.url, natsStatus_GetText(s));
    else
        code = consume(&b);
    if (b.nc != NULL)
        natsConnection_FlushTimeout(b.nc, 5000);
    natsSubscription_Destroy(b.sub);
    natsInbox_Destroy(b.inbox);
    natsConnection_Destroy(b.nc);
    nats_Close();
    printf("received=%llu acked=%llu decode_failed=%llu\n", (unsigned long long)b.received,
           (unsigned long long)b.acked, (unsigned long long)b.decode_failed);
    return code;
}
