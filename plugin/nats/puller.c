/* SPDX-License-Identifier: Apache-2.0 */
#include "jetstream.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "clock.h"

/* Margin past a request's server-side expiry before we consider it gone
 * (its status lost to a server restart or a dropped connection): as long
 * as the expiry itself, at most this. A fixed 500 ms would idle a consumer
 * that pulls with 10 ms requests for fifty request lifetimes. */
#define LOCAL_EXPIRY_MARGIN_MAX_MS 500

/* Longest wait in ib_puller_next before it looks at the connection's
 * reconnect count again: a reconnect ends the requests in flight, and the
 * next one goes this long after it at most, whatever their expiry. */
#define RECONNECT_CHECK_MS 100

/* Longest wait for the server's PONG after a pull request (on the kicker
 * thread). */
#define REQUEST_FLUSH_TIMEOUT_MS 100

/* After a refused pull request (409 and other errors) the next one waits:
 * 50 ms, doubling to 5 s. A consumer whose limits refuse every request
 * otherwise gets the next one at once: 112,000 requests in 6 s. */
#define REFUSED_BACKOFF_FIRST_MS 50
#define REFUSED_BACKOFF_MAX_MS 5000

/* One log line per distinct refusal (status and text) per interval; the
 * lines left out meanwhile are counted in the next one. */
#define REFUSAL_LOG_INTERVAL_MS 10000
#define REFUSAL_KINDS 8

typedef struct refusal_kind {
    char status[8];
    char text[120];
    int64_t logged_at; /* 0 = slot unused */
    uint64_t suppressed;
} refusal_kind;

/* Flushing threads: while one waits for its PONG, the other can flush a
 * request sent meanwhile (the delivery callback sends one while the
 * pulling thread's is still being flushed). */
#define KICKERS 2

/* nats.c has no flush that does not wait for the server's PONG, and under
 * load that PONG queues behind the messages the server is delivering. The
 * kicker thread does the waiting, so the thread that pulls goes on working
 * on the batch it holds while its next request is on the wire. */
typedef struct kicker {
    pthread_t thread[KICKERS];
    int threads; /* started */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, pending, stop;
    natsConnection *nc;
} kicker;

/* The inbox's messages, queued by nats.c's delivery thread for the one
 * thread that pulls. The subscription is asynchronous because
 * natsSubscription_NextMsg destroys every message with an empty body and a
 * "Status: 503" header, taking it for a "no responders" reply: a delivery
 * that looks like one would be lost unacked, and a real 503 would lose the
 * request it answers. Allocated apart from the puller: if the last
 * callback does not return in time at shutdown, it is left, not freed
 * under it. */
typedef struct queued {
    natsMsg *msg;
    uint64_t request_no; /* the request it was counted against on arrival; 0 = none */
} queued;

typedef struct inbox {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    queued *ring;
    size_t cap, head, count;
    bool done; /* the subscription is closed and its last callback returned */
    /* Requests as the callback sees them, whichever thread sent them: the
     * server answers them in order, so arrivals count against the oldest
     * that has not ended. When `chain` is set (only while `owner` is
     * alive) the callback keeps a second request waiting behind that one,
     * so the server has the next batch's request at hand the moment one
     * is complete instead of a round trip later. */
    struct ib_puller *owner;
    bool chain;
    uint64_t sent_no;      /* the latest request sent */
    int64_t sent_deadline; /* when it ends locally */
    uint64_t arriving_no;  /* the request arrivals count against */
    size_t arrivals_left;  /* messages it may still bring; 0 = ended */
    uint64_t ended_ahead;  /* a request behind it that a status ended early */
    uint64_t chained;      /* requests the callback sent */
    size_t owner_batch;    /* the owner's batch size */
} inbox;

struct ib_puller {
    ib_nats *conn; /* BORROWED: its reconnect count ends requests in flight */
    natsConnection *nc;
    kicker kick;
    natsSubscription *sub;
    bool subscribed; /* nats.c may call into `in` until it says done */
    inbox *in;
    char *inbox;        /* request k replies to "<inbox>.<k>" */
    char *next_subject; /* <api prefix>.CONSUMER.MSG.NEXT.<stream>.<durable> */
    size_t batch;
    int64_t expires_ms;
    int64_t flush_ms;
    /* the request in flight as this thread sees it (the latest it sent or
     * adopted from the callback): its number, messages still expected and
     * when it ends locally; outstanding 0 = none in flight */
    uint64_t request_no;
    size_t outstanding;
    int64_t request_deadline;
    /* back-off after refused requests: no request before next_request_at;
     * backoff_ms 0 = not backing off */
    int64_t backoff_ms;
    int64_t next_request_at;
    /* ib_nats_reconnects() when last looked at, and the latest request
     * sent before the last reconnect or 409 "Server Shutdown" (all ended
     * then: a late status of one of them is stale and ignored) */
    uint64_t reconnects_seen;
    uint64_t ended_before_no;
    ib_puller_condition condition;
    bool stopping; /* ib_puller_stop was called: send nothing more */
    refusal_kind refusals[REFUSAL_KINDS];
    ib_puller_stats stats;
};

static int64_t now_ms(void)
{
    return nats_Now();
}

static void *kicker_main(void *arg)
{
    kicker *k = arg;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->pending && !k->stop)
            pthread_cond_wait(&k->cv, &k->mu);
        if (k->stop)
            break;
        k->pending = false;
        pthread_mutex_unlock(&k->mu);
        /* A timeout or a reconnect leaves the request buffered, as it would
         * have been without the flush. */
        natsConnection_FlushTimeout(k->nc, REQUEST_FLUSH_TIMEOUT_MS);
        pthread_mutex_lock(&k->mu);
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

static void kicker_stop(kicker *k)
{
    if (!k->started)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    for (int i = 0; i < k->threads; i++)
        pthread_join(k->thread[i], NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    k->started = false;
}

static int kicker_start(kicker *k, natsConnection *nc)
{
    sigset_t all, old;
    k->nc = nc;
    if (pthread_mutex_init(&k->mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&k->cv, NULL) != 0) {
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    k->started = true;
    /* signals stay with the host's own threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    while (k->threads < KICKERS && rc == 0)
        if ((rc = pthread_create(&k->thread[k->threads], NULL, kicker_main, k)) == 0)
            k->threads++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        kicker_stop(k);
        return -1;
    }
    return 0;
}

static void kicker_kick(kicker *k)
{
    pthread_mutex_lock(&k->mu);
    k->pending = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

/* True for a reply subject of a JetStream delivery. */
static bool is_delivery(const natsMsg *m)
{
    const char *reply = natsMsg_GetReply((natsMsg *)m);
    return reply != NULL && strncmp(reply, "$JS.ACK.", 8) == 0;
}

/* The request number in a status's subject "<inbox>.<k>"; 0 for any other
 * message. */
static uint64_t status_request_no(natsMsg *m, const char *inbox_prefix)
{
    const char *subject = natsMsg_GetSubject(m);
    size_t il = strlen(inbox_prefix);
    if (subject == NULL || strncmp(subject, inbox_prefix, il) != 0 || subject[il] != '.')
        return 0;
    return strtoull(subject + il + 1, NULL, 10);
}

/* Publishes pull request number in->sent_no + 1 and makes it the latest;
 * arrivals count against it once the one before has ended, or at once
 * when `fresh` (the pulling thread holds no earlier request in flight any
 * more). Called with p->in->mu held, by the pulling thread or, while
 * `chain` is set, by the delivery callback. */
static natsStatus publish_request_locked(ib_puller *p, bool fresh)
{
    inbox *in = p->in;
    char body[96], reply[300];
    int len = snprintf(body, sizeof(body), "{\"batch\":%zu,\"expires\":%lld}", p->batch,
                       (long long)p->expires_ms * 1000000LL);
    snprintf(reply, sizeof(reply), "%s.%" PRIu64, p->inbox, in->sent_no + 1);
    natsStatus s = natsConnection_PublishRequest(p->nc, p->next_subject, reply, body, len);
    if (s != NATS_OK)
        return s;
    /* nats.c's flusher thread holds a publish back for up to a millisecond
     * to batch writes: a held-back pull request idles the server for that
     * long per batch, which capped a consumer at about 64 messages per
     * 1.3 ms. The kicker flushes it now. */
    kicker_kick(&p->kick);
    int64_t margin =
        p->expires_ms < LOCAL_EXPIRY_MARGIN_MAX_MS ? p->expires_ms : LOCAL_EXPIRY_MARGIN_MAX_MS;
    in->sent_no++;
    in->sent_deadline = now_ms() + p->expires_ms + margin;
    if (fresh || in->arrivals_left == 0) {
        in->arriving_no = in->sent_no;
        in->arrivals_left = p->batch;
    }
    return NATS_OK;
}

/* Once the request arrivals count against has ended, moves past one
 * behind it that a status has already ended (in->mu held). */
static void skip_ended(inbox *in)
{
    while (in->arrivals_left == 0 && in->arriving_no < in->sent_no &&
           in->arriving_no + 1 == in->ended_ahead)
        in->arriving_no++;
}

/* A status of a request other than a heartbeat ends it (in->mu held):
 * the one arrivals count against, or one waiting behind it. */
static void count_status(inbox *in, natsMsg *m, const char *status)
{
    if (strcmp(status, "100") == 0 || in->owner == NULL)
        return;
    uint64_t no = status_request_no(m, in->owner->inbox);
    if (no == in->arriving_no)
        in->arrivals_left = 0;
    else if (no > in->arriving_no && no <= in->sent_no)
        in->ended_ahead = no;
    skip_ended(in);
}

/* Counts a new arrival (in->mu held) and returns the request it counted
 * against (0: none, a leftover or a status). With chaining on and no
 * request waiting behind that one, sends the next, as long as the queue
 * and what the request may still bring stay within one batch: at most two
 * batches then wait unseen, and a host that falls behind stops asking. */
static uint64_t count_arrival(inbox *in, natsMsg *m)
{
    const char *status = NULL;
    if (!is_delivery(m) && natsMsgHeader_Get(m, "Status", &status) == NATS_OK && status != NULL) {
        count_status(in, m, status);
        return 0;
    }
    if (in->arrivals_left == 0 && in->arriving_no < in->sent_no) {
        in->arriving_no++;
        in->arrivals_left = in->owner_batch;
    }
    if (in->arrivals_left == 0)
        return 0;
    uint64_t no = in->arriving_no;
    if (--in->arrivals_left == 0)
        skip_ended(in);
    if (in->chain && in->sent_no == in->arriving_no &&
        in->count + in->arrivals_left <= in->owner_batch &&
        publish_request_locked(in->owner, false) == NATS_OK)
        in->chained++;
    return no;
}

static void on_inbox_msg(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc;
    (void)sub;
    inbox *in = closure;
    pthread_mutex_lock(&in->mu);
    if (in->count == in->cap) {
        size_t cap = in->cap * 2;
        queued *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL) {
            /* not acked: it comes back after AckWait */
            pthread_mutex_unlock(&in->mu);
            ib_log_kv(IB_SEV_ERROR, "puller: out of memory; a message is dropped", NULL);
            natsMsg_Destroy(m);
            return;
        }
        for (size_t i = 0; i < in->count; i++)
            ring[i] = in->ring[(in->head + i) % in->cap];
        free(in->ring);
        in->ring = ring;
        in->cap = cap;
        in->head = 0;
    }
    queued *slot = &in->ring[(in->head + in->count) % in->cap];
    in->count++;
    slot->msg = m;
    slot->request_no = count_arrival(in, m);
    pthread_cond_signal(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static void on_inbox_complete(void *closure)
{
    inbox *in = closure;
    pthread_mutex_lock(&in->mu);
    in->done = true;
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static inbox *inbox_new(void)
{
    inbox *in = calloc(1, sizeof(*in));
    pthread_condattr_t ca;
    if (in == NULL)
        return NULL;
    in->cap = 64;
    if ((in->ring = calloc(in->cap, sizeof(*in->ring))) == NULL) {
        free(in);
        return NULL;
    }
    pthread_mutex_init(&in->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&in->cv, &ca);
    pthread_condattr_destroy(&ca);
    return in;
}

/* Frees the queue and the messages left in it. */
static void inbox_free(inbox *in)
{
    if (in == NULL)
        return;
    for (size_t i = 0; i < in->count; i++)
        natsMsg_Destroy(in->ring[(in->head + i) % in->cap].msg);
    free(in->ring);
    pthread_cond_destroy(&in->cv);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

/* Takes the oldest message, waiting up to timeout_ms (0: only what is
 * queued). NATS_TIMEOUT when none came; NATS_CONNECTION_CLOSED once the
 * subscription is closed (the connection closed) and the queue is empty. */
static natsStatus inbox_next(queued *out, inbox *in, int64_t timeout_ms)
{
    struct timespec until = ib_clock_monotonic_deadline(timeout_ms);
    out->msg = NULL;
    pthread_mutex_lock(&in->mu);
    while (in->count == 0 && !in->done && timeout_ms > 0)
        if (pthread_cond_timedwait(&in->cv, &in->mu, &until) != 0)
            break;
    natsStatus s = NATS_TIMEOUT;
    if (in->count > 0) {
        *out = in->ring[in->head];
        in->head = (in->head + 1) % in->cap;
        in->count--;
        s = NATS_OK;
    } else if (in->done) {
        s = NATS_CONNECTION_CLOSED;
    }
    pthread_mutex_unlock(&in->mu);
    return s;
}

/* Unsubscribes and waits (a bounded time) for the last callback; then the
 * queue may be freed. Messages already queued stay queued. */
static void close_subscription(ib_puller *p)
{
    if (p->sub == NULL)
        return;
    natsSubscription_Unsubscribe(p->sub);
    struct timespec until = ib_clock_monotonic_deadline(2000);
    pthread_mutex_lock(&p->in->mu);
    while (!p->in->done)
        if (pthread_cond_timedwait(&p->in->cv, &p->in->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&p->in->mu);
    natsSubscription_Destroy(p->sub);
    p->sub = NULL;
}

/* Subscribes to "<inbox>.*" with signals blocked, so nats.c's delivery
 * thread for it leaves them to the host's own threads. */
static natsStatus subscribe_inbox(ib_puller *p, const char *wildcard)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    natsStatus s = natsConnection_Subscribe(&p->sub, p->nc, wildcard, on_inbox_msg, p->in);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (s != NATS_OK)
        return s;
    p->subscribed = true;
    return natsSubscription_SetOnCompleteCB(p->sub, on_inbox_complete, p->in);
}

ib_status ib_puller_create(ib_puller **out, ib_nats *conn, const ib_puller_options *o,
                           ib_error *err)
{
    natsInbox *inbox = NULL;
    natsStatus s;
    ib_status st = IB_OK;
    ib_puller *p = calloc(1, sizeof(*p));

    *out = NULL;
    if (p == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
    if (o->batch == 0 || o->batch > IB_PULLER_MAX_BATCH) {
        st = ib_error_set(err, IB_ERR_INVALID_ARG, "pull batch size %zu is out of range 1..%d",
                          o->batch, IB_PULLER_MAX_BATCH);
        goto fail;
    }
    p->conn = conn;
    p->nc = ib_nats_connection(conn);
    p->reconnects_seen = ib_nats_reconnects(conn);
    p->batch = o->batch;
    p->expires_ms = o->expires_ms > 0 ? o->expires_ms : IB_PULLER_DEFAULT_EXPIRES_MS;
    p->flush_ms = o->flush_ms > 0 ? o->flush_ms : 5;
    if (asprintf(&p->next_subject, "%s.CONSUMER.MSG.NEXT.%s.%s", ib_nats_api_prefix(conn),
                 o->stream, o->durable) < 0) {
        p->next_subject = NULL;
        st = ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
        goto fail;
    }
    if ((s = natsInbox_Create(&inbox)) != NATS_OK || (p->inbox = strdup(inbox)) == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "puller: cannot create an inbox");
        goto fail;
    }
    natsInbox_Destroy(inbox);
    inbox = NULL;
    char wildcard[256];
    snprintf(wildcard, sizeof(wildcard), "%s.*", p->inbox);
    if ((p->in = inbox_new()) == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
        goto fail;
    }
    p->in->owner = p;
    p->in->owner_batch = p->batch;
    if ((s = subscribe_inbox(p, wildcard)) != NATS_OK) {
        char d[200];
        st = ib_error_set(err, IB_ERR_NATS, "puller: subscribe: %s",
                          ib_nats_strerror(d, sizeof(d), s));
        goto fail;
    }
    if (kicker_start(&p->kick, p->nc) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "puller: cannot start the flush thread");
        goto fail;
    }
    /* A batch never exceeds IB_PULLER_MAX_BATCH messages; the default pending limits
     * (65536 messages, 64 MiB) already bound memory. */
    *out = p;
    return IB_OK;
fail:
    natsInbox_Destroy(inbox);
    ib_puller_free(p);
    return st;
}

/* Makes request `no`, sent by the delivery callback, the one in flight
 * for the pulling thread (in->mu held); its messages are about to be
 * taken, or it has a status. */
static void adopt_locked(ib_puller *p, uint64_t no)
{
    if (no <= p->request_no)
        return;
    p->request_no = no;
    p->outstanding = p->batch;
    p->request_deadline = p->in->sent_deadline;
}

static void adopt(ib_puller *p, uint64_t no)
{
    pthread_mutex_lock(&p->in->mu);
    adopt_locked(p, no);
    pthread_mutex_unlock(&p->in->mu);
}

/* Sends the next request, or adopts the one the delivery callback has
 * already sent and nothing of which has been taken yet. */
static ib_status send_request(ib_puller *p, ib_error *err)
{
    natsStatus s = NATS_OK;
    pthread_mutex_lock(&p->in->mu);
    if (p->in->sent_no > p->request_no) {
        adopt_locked(p, p->in->sent_no);
    } else if ((s = publish_request_locked(p, true)) == NATS_OK) {
        adopt_locked(p, p->in->sent_no);
        p->stats.requests++;
    }
    pthread_mutex_unlock(&p->in->mu);
    if (s != NATS_OK) {
        char d[200];
        return ib_error_set(err, IB_ERR_NATS, "pull request to %s: %s", p->next_subject,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    return IB_OK;
}

typedef enum status_kind {
    NOT_STATUS,     /* a message to hand out */
    STATUS_ENDED,   /* 404/408/409... of the request in flight: it is over */
    STATUS_IGNORED, /* a heartbeat, or a late status of an earlier request */
} status_kind;

/* Logs a refusal at most once per REFUSAL_LOG_INTERVAL_MS for each distinct
 * status and text; the table keeps the first REFUSAL_KINDS kinds and
 * lets any further kind share the least recently logged slot. */
static void log_refusal(ib_puller *p, const char *status, const char *text)
{
    int64_t now = now_ms();
    refusal_kind *slot = NULL, *oldest = &p->refusals[0];
    for (size_t i = 0; i < REFUSAL_KINDS && slot == NULL; i++) {
        refusal_kind *r = &p->refusals[i];
        if (r->logged_at != 0 && strcmp(r->status, status) == 0 && strcmp(r->text, text) == 0)
            slot = r;
        else if (r->logged_at < oldest->logged_at)
            oldest = r;
    }
    if (slot != NULL && now - slot->logged_at < REFUSAL_LOG_INTERVAL_MS) {
        slot->suppressed++;
        return;
    }
    if (slot == NULL) {
        slot = oldest;
        memset(slot, 0, sizeof(*slot));
        snprintf(slot->status, sizeof(slot->status), "%s", status);
        snprintf(slot->text, sizeof(slot->text), "%s", text);
    }
    ib_log(p->condition == IB_PULLER_CONSUMER_GONE ? IB_SEV_ERROR : IB_SEV_WARN,
           "pull request refused by the server; backing off", IB_LOG_STR("status", status),
           IB_LOG_STR("description", text), IB_LOG_STR("subject", p->next_subject),
           IB_LOG_I64("next_request_in_ms", p->backoff_ms),
           IB_LOG_U64("suppressed_since_last_line", slot->suppressed));
    slot->logged_at = now;
    slot->suppressed = 0;
}

/* The request in flight was refused: back off before the next one and say
 * what the server said. 409 "Consumer Deleted" and 503 (no responders: no
 * consumer listens on the request subject any more) mean the consumer may
 * be gone; the host confirms with a consumer info lookup. */
static void refused(ib_puller *p, const char *status, const char *text)
{
    p->backoff_ms = p->backoff_ms == 0 ? REFUSED_BACKOFF_FIRST_MS : p->backoff_ms * 2;
    if (p->backoff_ms > REFUSED_BACKOFF_MAX_MS)
        p->backoff_ms = REFUSED_BACKOFF_MAX_MS;
    p->next_request_at = now_ms() + p->backoff_ms;
    p->stats.refusals++;
    if (strcmp(status, "503") == 0 || strcasestr(text, "consumer deleted") != NULL)
        p->condition = IB_PULLER_CONSUMER_GONE;
    else
        p->condition = IB_PULLER_REFUSED;
    log_refusal(p, status, text);
}

/* The consumer answers normally again: end any back-off. */
static void answered(ib_puller *p)
{
    p->backoff_ms = 0;
    p->next_request_at = 0;
    p->condition = IB_PULLER_OK;
}

/* Ends every request sent so far, for this thread and for the delivery
 * callback alike: none of them will be answered. Messages that still come
 * for one (it was buffered across the reconnect after all) are leftovers. */
static void end_all_requests(ib_puller *p)
{
    pthread_mutex_lock(&p->in->mu);
    p->in->arriving_no = p->in->sent_no;
    p->in->arrivals_left = 0;
    p->request_no = p->in->sent_no;
    p->ended_before_no = p->in->sent_no;
    pthread_mutex_unlock(&p->in->mu);
    p->outstanding = 0;
    p->stats.abandoned++;
}

/* A request sent before a reconnect is never answered when it went into
 * the closing socket (or to a server that had already said 409 "Server
 * Shutdown"), and nothing tells it apart from one the reconnect buffer
 * replayed. Waiting for its local expiry would idle the consumer for the
 * whole --pull-expires, so after a reconnect every request in flight ends
 * and the next one goes at once, back-off or not. nats.c's reconnected
 * callback only counts (it must not block its thread); this thread looks
 * at the count. Returns true after a reconnect. */
static bool after_reconnect(ib_puller *p)
{
    uint64_t r = ib_nats_reconnects(p->conn);
    if (r == p->reconnects_seen)
        return false;
    p->reconnects_seen = r;
    bool in_flight = p->outstanding > 0;
    end_all_requests(p);
    p->backoff_ms = 0;
    p->next_request_at = 0;
    ib_log(IB_SEV_INFO, "reconnected: pull requests in flight ended; asking again",
           IB_LOG_STR("subject", p->next_subject), IB_LOG_BOOL("request_in_flight", in_flight));
    return true;
}

/* 409 "Server Shutdown": the server is going away with every request of
 * ours it holds. */
static bool server_shutdown(const char *status, const char *text)
{
    return strcmp(status, "409") == 0 && strcasestr(text, "server shutdown") != NULL;
}

/* A status is a message without a $JS.ACK reply subject, with a "Status"
 * header (and, from the server, no payload); it arrives on the reply
 * subject of the request it answers. A message WITH a $JS.ACK reply is a
 * delivery whatever it looks like: a producer may publish an empty body
 * with a Status header, and swallowing it would leave it unacked forever.
 * It goes to the host, which dead-letters it (decode). */
static status_kind handle_status(ib_puller *p, natsMsg *m)
{
    const char *status = NULL, *text = NULL;
    if (is_delivery(m) || natsMsgHeader_Get(m, "Status", &status) != NATS_OK || status == NULL)
        return NOT_STATUS;
    p->stats.statuses++;
    if (strcmp(status, "100") == 0)
        return STATUS_IGNORED;
    uint64_t no = status_request_no(m, p->inbox);
    if (no <= p->ended_before_no)
        return STATUS_IGNORED; /* ended by a reconnect or a shutdown already */
    if (natsMsgHeader_Get(m, "Description", &text) != NATS_OK || text == NULL)
        text = "";
    if (server_shutdown(status, text)) {
        /* the chained request behind it, or the next one sent before the
         * connection drops, would wait for an answer that never comes */
        end_all_requests(p);
        refused(p, status, text);
        return STATUS_ENDED;
    }
    adopt(p, no);
    if (no != p->request_no)
        return STATUS_IGNORED;
    p->outstanding = 0;
    /* 404 (no messages) and 408 (request expired) end a request that the
     * consumer accepted; anything else refused it. */
    if (strcmp(status, "404") == 0 || strcmp(status, "408") == 0) {
        answered(p);
        return STATUS_ENDED;
    }
    refused(p, status, text);
    return STATUS_ENDED;
}

/* Hands a message out, counting it against the request in flight, or as a
 * leftover when that request has already ended locally. */
static void take(ib_puller *p, natsMsg **msgs, size_t *n, queued q)
{
    if (q.request_no > p->request_no)
        adopt(p, q.request_no);
    if (p->outstanding > 0)
        p->outstanding--;
    else
        p->stats.leftovers++;
    p->stats.messages++;
    answered(p);
    msgs[(*n)++] = q.msg;
}

/* With no request in flight: takes one message already queued (it answers
 * a request that has ended). Returns false when nothing is queued. */
static bool take_queued(ib_puller *p, natsMsg **msgs, size_t *n)
{
    queued q;
    if (inbox_next(&q, p->in, 0) != NATS_OK)
        return false;
    if (handle_status(p, q.msg) != NOT_STATUS)
        natsMsg_Destroy(q.msg);
    else
        take(p, msgs, n, q);
    return true;
}

/* How long ib_puller_next may wait for a message now: for the first one
 * until `wait_ms` after `start`, for a further one flush_ms after the last
 * arrival; never past the end of the request in flight or, backing off
 * with none in flight, the moment the next one may go. */
static int64_t wait_budget(const ib_puller *p, int64_t now, int64_t start, int64_t wait_ms,
                           size_t n, int64_t last_arrival)
{
    int64_t timeout = n > 0 ? last_arrival + p->flush_ms - now : start + wait_ms - now;
    int64_t until = p->outstanding > 0 ? p->request_deadline : p->next_request_at;
    return timeout < until - now ? timeout : until - now;
}

ib_status ib_puller_next(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms,
                         ib_error *err)
{
    int64_t start = now_ms();
    int64_t last_arrival = 0;

    *n = 0;
    if (max > p->batch)
        max = p->batch;
    for (;;) {
        int64_t now = now_ms();
        after_reconnect(p);
        if (p->outstanding > 0 && now >= p->request_deadline)
            p->outstanding = 0; /* expired locally; its status never came */
        if (p->outstanding == 0) {
            /* Hand out what is already queued before asking for more. */
            if (take_queued(p, msgs, n)) {
                if (*n == max)
                    return IB_OK;
                continue;
            }
            if (now >= p->next_request_at) {
                ib_status st = send_request(p, err);
                if (st != IB_OK)
                    return *n > 0 ? IB_OK : st;
            }
        }
        int64_t timeout = wait_budget(p, now, start, wait_ms, *n, last_arrival);
        if (timeout <= 0) {
            if (*n > 0 || now - start >= wait_ms)
                return IB_OK;
            continue; /* request deadline or back-off over: send another */
        }
        queued q;
        natsStatus s =
            inbox_next(&q, p->in, timeout < RECONNECT_CHECK_MS ? timeout : RECONNECT_CHECK_MS);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK) {
            char d[200];
            if (*n > 0)
                return IB_OK;
            return ib_error_set(err, IB_ERR_NATS, "pull: %s", ib_nats_strerror(d, sizeof(d), s));
        }
        status_kind k = handle_status(p, q.msg);
        if (k != NOT_STATUS) {
            natsMsg_Destroy(q.msg);
            if (k == STATUS_ENDED && *n > 0)
                return IB_OK;
            continue;
        }
        take(p, msgs, n, q);
        last_arrival = now_ms();
        if (*n == max)
            return IB_OK;
    }
}

ib_status ib_puller_prefetch(ib_puller *p, ib_error *err)
{
    after_reconnect(p);
    int64_t now = now_ms();
    if (p->stopping || (p->outstanding > 0 && now < p->request_deadline) ||
        now < p->next_request_at)
        return IB_OK;
    return send_request(p, err);
}

/* True while a request sent may still bring messages, as counted in
 * arrival order, with `*deadline` the latest local end of one. */
static bool awaiting(ib_puller *p, int64_t *deadline)
{
    pthread_mutex_lock(&p->in->mu);
    bool r = p->in->arrivals_left > 0 || p->in->arriving_no < p->in->sent_no;
    *deadline = p->in->sent_deadline;
    pthread_mutex_unlock(&p->in->mu);
    return r;
}

void ib_puller_chain(ib_puller *p, bool on)
{
    pthread_mutex_lock(&p->in->mu);
    p->in->chain = on && !p->stopping;
    pthread_mutex_unlock(&p->in->mu);
}

ib_status ib_puller_stop(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms)
{
    int64_t give_up = now_ms() + wait_ms;
    *n = 0;
    p->stopping = true;
    if (p->sub == NULL)
        return IB_OK;
    /* no request after this, from either thread */
    ib_puller_chain(p, false);
    after_reconnect(p); /* nothing more comes for what was sent before one */
    while (*n < max) {
        int64_t now = now_ms(), deadline = 0;
        int64_t until = now; /* only take what is already queued */
        if (awaiting(p, &deadline))
            until = deadline < give_up ? deadline : give_up;
        queued q;
        if (inbox_next(&q, p->in, until > now ? until - now : 0) != NATS_OK)
            break;
        if (handle_status(p, q.msg) != NOT_STATUS) {
            natsMsg_Destroy(q.msg);
            continue;
        }
        take(p, msgs, n, q);
    }
    /* A full `msgs` may leave more behind: the caller calls again. */
    if (*n < max)
        close_subscription(p);
    return IB_OK;
}

ib_puller_condition ib_puller_condition_get(const ib_puller *p)
{
    return p->condition;
}

void ib_puller_stats_get(const ib_puller *p, ib_puller_stats *out)
{
    *out = p->stats;
    pthread_mutex_lock(&p->in->mu);
    out->requests += p->in->chained;
    pthread_mutex_unlock(&p->in->mu);
}

void ib_puller_free(ib_puller *p)
{
    if (p == NULL)
        return;
    if (p->in != NULL) {
        /* the callback may outlive the puller: it must not reach it */
        pthread_mutex_lock(&p->in->mu);
        p->in->chain = false;
        p->in->owner = NULL;
        pthread_mutex_unlock(&p->in->mu);
    }
    kicker_stop(&p->kick);
    close_subscription(p);
    if (p->in != NULL) {
        pthread_mutex_lock(&p->in->mu);
        bool done = p->in->done || !p->subscribed;
        pthread_mutex_unlock(&p->in->mu);
        if (done)
            inbox_free(p->in);
        else
            ib_log_kv(IB_SEV_WARN,
                      "puller: the inbox's last callback did not return; its queue is left in "
                      "place",
                      NULL);
    }
    free(p->inbox);
    free(p->next_subject);
    free(p);
}
