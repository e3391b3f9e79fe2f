/* SPDX-License-Identifier: Apache-2.0 */
/* A plain nats.c JetStream consumer that handles each event once, with
 * libinfinity-bus doing the bookkeeping: no `ibus run`, no plugin.
 *
 *   nats_consumer [-s STREAM] [-S SUBJECT] [-c CONSUMER] [-i IDLE_MS] NATS_URL RECORDER_URI
 *   nats_consumer nats://127.0.0.1:4222 sqlite:processed.db
 *
 * Each message's payload starts with its event id (a UUID), then a space
 * and whatever the producer adds: "7d444840-9dc0-41b5-a00b-0ad8c0e1f8a1
 * order #1". Producers retry and replay, so the same id can arrive many
 * times; the handler (here: print a line) must run once per id.
 *
 * The program makes sure the stream and a durable push consumer exist,
 * binds to the consumer, and handles messages until none came for
 * IDLE_MS (default 2000), then prints a summary. Per message:
 *   ib_idempotent_call() HANDLED or DUPLICATE -> ack (after the mark)
 *   FAILED, BUSY, LEASE_LOST, ERROR           -> nak with a delay
 *   EXHAUSTED, or no valid id                 -> term (never redelivered)
 * A crash between the mark and the ack is harmless: the redelivery finds
 * the mark and is acknowledged as a duplicate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infinity_bus/idempotency.h>
#include <nats/nats.h>

#define RETRY_DELAY_MS 200
#define ACK_WAIT_NS (30 * 1000000000LL)

typedef struct settings {
    const char *url;
    const char *recorder_uri;
    const char *stream;
    const char *subject;
    const char *consumer;
    int64_t idle_ms;
} settings;

typedef struct counts {
    unsigned handled, duplicates, retried, dead, invalid;
} counts;

/* What the handler sees of one message. */
typedef struct event {
    const char *id;
    const char *text; /* the payload after the id; not NUL-terminated */
    int text_len;
} event;

/* The application's work. It must be safe to repeat only when it fails
 * (ib_idempotent_call() then releases the claim and the message is
 * redelivered); once it returns IB_OK it never runs again for this id. */
static ib_status handle_event(void *ctx, ib_error *err)
{
    const event *ev = ctx;
    (void)err;
    printf("handled %s %.*s\n", ev->id, ev->text_len, ev->text);
    fflush(stdout);
    return IB_OK;
}

/* Creates the stream and the durable consumer unless they exist. The
 * consumer is made here, not by the subscribe, so that closing the
 * subscription leaves it (and its position) on the server. */
static natsStatus ensure_stream_and_consumer(jsCtx *js, const settings *s)
{
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetStreamInfo(&si, js, s->stream, NULL, &jerr);
    if (st == NATS_NOT_FOUND) {
        jsStreamConfig cfg;
        const char *subjects[] = {s->subject};
        jsStreamConfig_Init(&cfg);
        cfg.Name = s->stream;
        cfg.Subjects = subjects;
        cfg.SubjectsLen = 1;
        cfg.Storage = js_FileStorage;
        st = js_AddStream(&si, js, &cfg, NULL, &jerr);
    }
    jsStreamInfo_Destroy(si);
    if (st != NATS_OK)
        return st;
    st = js_GetConsumerInfo(&ci, js, s->stream, s->consumer, NULL, &jerr);
    if (st == NATS_NOT_FOUND) {
        char deliver[256];
        jsConsumerConfig cc;
        snprintf(deliver, sizeof(deliver), "_deliver.%s.%s", s->stream, s->consumer);
        jsConsumerConfig_Init(&cc);
        cc.Durable = s->consumer;
        cc.DeliverSubject = deliver;
        cc.FilterSubject = s->subject;
        cc.AckPolicy = js_AckExplicit;
        cc.AckWait = ACK_WAIT_NS;
        st = js_AddConsumer(&ci, js, s->stream, &cc, NULL, &jerr);
    }
    jsConsumerInfo_Destroy(ci);
    return st;
}

/* Handles one message and settles it with JetStream. */
static void on_message(natsMsg *msg, ib_recorder *r, const settings *s, counts *n)
{
    const char *data = natsMsg_GetData(msg);
    int len = natsMsg_GetDataLength(msg);
    int id_len = 0;
    while (id_len < len && data[id_len] != ' ')
        id_len++;
    char id[IB_EVENT_ID_SIZE];
    ib_error err = {0};
    if (ib_event_id_normalise(id, data, (size_t)id_len, false, &err) != IB_OK) {
        fprintf(stderr, "nats_consumer: message dropped: %s\n", err.msg);
        n->invalid++;
        natsMsg_Term(msg, NULL);
        return;
    }
    event ev = {.id = id, .text = data + id_len, .text_len = len - id_len};
    if (ev.text_len > 0) {
        ev.text++; /* the space */
        ev.text_len--;
    }
    ib_idempotent_result res;
    ib_status st = ib_idempotent_call(r, &res, s->consumer, id, handle_event, &ev, NULL, &err);
    switch (res.outcome) {
    case IB_IDEMPOTENT_HANDLED:
    case IB_IDEMPOTENT_DUPLICATE:
        if (res.outcome == IB_IDEMPOTENT_HANDLED)
            n->handled++;
        else
            n->duplicates++;
        natsMsg_Ack(msg, NULL);
        return;
    case IB_IDEMPOTENT_EXHAUSTED:
        n->dead++;
        natsMsg_Term(msg, NULL);
        return;
    default:
        if (st != IB_OK)
            fprintf(stderr, "nats_consumer: %s: %s\n", id, err.msg);
        n->retried++;
        natsMsg_NakWithDelay(msg, RETRY_DELAY_MS, NULL);
        return;
    }
}

/* Binds to the consumer and handles messages until IDLE_MS pass quietly. */
static natsStatus consume(natsConnection *nc, ib_recorder *r, const settings *s, counts *n)
{
    jsCtx *js = NULL;
    natsSubscription *sub = NULL;
    jsSubOptions so;
    jsErrCode jerr = 0;
    natsStatus st = natsConnection_JetStream(&js, nc, NULL);
    if (st == NATS_OK)
        st = ensure_stream_and_consumer(js, s);
    if (st == NATS_OK) {
        jsSubOptions_Init(&so);
        so.Stream = s->stream;
        so.Consumer = s->consumer;
        so.ManualAck = true;
        st = js_SubscribeSync(&sub, js, s->subject, NULL, &so, &jerr);
    }
    while (st == NATS_OK) {
        natsMsg *msg = NULL;
        st = natsSubscription_NextMsg(&msg, sub, s->idle_ms);
        if (st == NATS_OK) {
            on_message(msg, r, s, n);
            natsMsg_Destroy(msg);
        }
    }
    if (st == NATS_TIMEOUT)
        st = natsConnection_Flush(nc); /* acks are fire-and-forget: send them now */
    natsSubscription_Destroy(sub);     /* the consumer itself stays */
    jsCtx_Destroy(js);
    return st;
}

static int usage(void)
{
    fprintf(stderr, "usage: nats_consumer [-s STREAM] [-S SUBJECT] [-c CONSUMER] [-i IDLE_MS] "
                    "NATS_URL RECORDER_URI\n");
    return 2;
}

int main(int argc, char **argv)
{
    settings s = {
        .stream = "ORDERS", .subject = "orders.>", .consumer = "example", .idle_ms = 2000};
    int opt;
    while ((opt = getopt(argc, argv, "s:S:c:i:")) != -1) {
        switch (opt) {
        case 's':
            s.stream = optarg;
            break;
        case 'S':
            s.subject = optarg;
            break;
        case 'c':
            s.consumer = optarg;
            break;
        case 'i':
            s.idle_ms = atoll(optarg);
            break;
        default:
            return usage();
        }
    }
    if (argc - optind != 2 || s.idle_ms <= 0)
        return usage();
    s.url = argv[optind];
    s.recorder_uri = argv[optind + 1];

    ib_recorder *r = NULL;
    ib_error err = {0};
    if (ib_recorder_open(&r, s.recorder_uri, NULL, &err) != IB_OK) {
        fprintf(stderr, "nats_consumer: %s\n", err.msg);
        return 1;
    }
    natsConnection *nc = NULL;
    counts n = {0};
    natsStatus st = natsConnection_ConnectTo(&nc, s.url);
    if (st == NATS_OK)
        st = consume(nc, r, &s, &n);
    if (st != NATS_OK)
        fprintf(stderr, "nats_consumer: %s: %s\n", s.url, natsStatus_GetText(st));
    printf("summary: handled %u, duplicates %u, retried %u, dead %u, invalid %u\n", n.handled,
           n.duplicates, n.retried, n.dead, n.invalid);
    natsConnection_Destroy(nc);
    nats_Close();
    ib_recorder_close(r);
    return st == NATS_OK ? 0 : 1;
}
