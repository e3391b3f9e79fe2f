#include "puller.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nats_conn.h"

/* Margin past a request's server-side expiry before we consider it gone
 * (its status lost to a server restart or a dropped connection): as long
 * as the expiry itself, at most this. A fixed 500 ms would idle a consumer
 * that pulls with 10 ms requests for fifty request lifetimes. */
#define LOCAL_EXPIRY_MARGIN_MAX_MS 500

/* Longest wait for the server's PONG after a pull request (on the kicker
 * thread). */
#define REQUEST_FLUSH_TIMEOUT_MS 100

/* nats.c has no flush that does not wait for the server's PONG, and under
 * load that PONG queues behind the messages the server is delivering. The
 * kicker thread does the waiting, so the thread that pulls goes on working
 * on the batch it holds while its next request is on the wire. */
typedef struct kicker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, pending, stop;
    natsConnection *nc;
} kicker;

struct ib_puller {
    natsConnection *nc;
    kicker kick;
    natsSubscription *sub;
    char *inbox;        /* request k replies to "<inbox>.<k>" */
    char *next_subject; /* $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable> */
    size_t batch;
    int64_t expires_ms;
    int64_t flush_ms;
    /* the request in flight: its number, messages still expected and when
     * it ends locally; outstanding 0 = none in flight */
    uint64_t request_no;
    size_t outstanding;
    int64_t request_deadline;
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
    /* signals stay with the host's own threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&k->thread, NULL, kicker_main, k);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
        return -1;
    }
    k->started = true;
    return 0;
}

static void kicker_kick(kicker *k)
{
    pthread_mutex_lock(&k->mu);
    k->pending = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

static void kicker_stop(kicker *k)
{
    if (!k->started)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thread, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    k->started = false;
}

ib_status ib_puller_create(ib_puller **out, natsConnection *nc, const ib_puller_options *o,
                           ib_error *err)
{
    natsInbox *inbox = NULL;
    natsStatus s;
    ib_status st = IB_OK;
    ib_puller *p = calloc(1, sizeof(*p));

    *out = NULL;
    if (p == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
    if (o->batch == 0 || o->batch > 4096) {
        st = ib_error_set(err, IB_ERR_CONFIG, "--batch: must be 1..4096, got %zu", o->batch);
        goto fail;
    }
    p->nc = nc;
    p->batch = o->batch;
    p->expires_ms = o->expires_ms > 0 ? o->expires_ms : 1000;
    p->flush_ms = o->flush_ms > 0 ? o->flush_ms : 5;
    if (asprintf(&p->next_subject, "$JS.API.CONSUMER.MSG.NEXT.%s.%s", o->stream, o->durable) < 0) {
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
    if ((s = natsConnection_SubscribeSync(&p->sub, nc, wildcard)) != NATS_OK) {
        char d[200];
        st = ib_error_set(err, IB_ERR_NATS, "puller: subscribe: %s",
                          ib_nats_strerror(d, sizeof(d), s));
        goto fail;
    }
    if (kicker_start(&p->kick, nc) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "puller: cannot start the flush thread");
        goto fail;
    }
    /* A batch never exceeds 4096 messages; the default pending limits
     * (65536 messages, 64 MiB) already bound memory. */
    *out = p;
    return IB_OK;
fail:
    natsInbox_Destroy(inbox);
    ib_puller_free(p);
    return st;
}

static ib_status send_request(ib_puller *p, ib_error *err)
{
    char body[96], reply[300];
    int len = snprintf(body, sizeof(body), "{\"batch\":%zu,\"expires\":%lld}", p->batch,
                       (long long)p->expires_ms * 1000000LL);
    snprintf(reply, sizeof(reply), "%s.%" PRIu64, p->inbox, p->request_no + 1);
    natsStatus s = natsConnection_PublishRequest(p->nc, p->next_subject, reply, body, len);
    /* nats.c's flusher thread holds a publish back for up to a millisecond
     * to batch writes: a held-back pull request idles the server for that
     * long per batch, which capped a consumer at about 64 messages per
     * 1.3 ms. The kicker flushes it now. */
    if (s == NATS_OK)
        kicker_kick(&p->kick);
    if (s != NATS_OK) {
        char d[200];
        return ib_error_set(err, IB_ERR_NATS, "pull request to %s: %s", p->next_subject,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    int64_t margin =
        p->expires_ms < LOCAL_EXPIRY_MARGIN_MAX_MS ? p->expires_ms : LOCAL_EXPIRY_MARGIN_MAX_MS;
    p->request_no++;
    p->outstanding = p->batch;
    p->request_deadline = now_ms() + p->expires_ms + margin;
    p->stats.requests++;
    return IB_OK;
}

typedef enum status_kind {
    NOT_STATUS,     /* a message to hand out */
    STATUS_ENDED,   /* 404/408/409 of the request in flight: it is over */
    STATUS_IGNORED, /* a heartbeat, or a late status of an earlier request */
} status_kind;

/* Status messages have no payload and a "Status" header, and arrive on the
 * reply subject of the request they answer. */
static status_kind handle_status(ib_puller *p, natsMsg *m)
{
    const char *status = NULL;
    if (natsMsg_GetDataLength(m) != 0 || natsMsgHeader_Get(m, "Status", &status) != NATS_OK ||
        status == NULL)
        return NOT_STATUS;
    p->stats.statuses++;
    if (strcmp(status, "100") == 0)
        return STATUS_IGNORED;
    const char *subject = natsMsg_GetSubject(m);
    size_t il = strlen(p->inbox);
    if (subject == NULL || strncmp(subject, p->inbox, il) != 0 || subject[il] != '.' ||
        strtoull(subject + il + 1, NULL, 10) != p->request_no)
        return STATUS_IGNORED;
    p->outstanding = 0;
    return STATUS_ENDED;
}

/* Hands a message out, counting it against the request in flight, or as a
 * leftover when that request has already ended locally. */
static void take(ib_puller *p, natsMsg **msgs, size_t *n, natsMsg *m)
{
    if (p->outstanding > 0)
        p->outstanding--;
    else
        p->stats.leftovers++;
    p->stats.messages++;
    msgs[(*n)++] = m;
}

/* With no request in flight: takes one message already queued (it answers
 * a request that has ended). Returns false when nothing is queued. */
static bool take_queued(ib_puller *p, natsMsg **msgs, size_t *n)
{
    int queued = 0;
    natsMsg *m = NULL;
    if (natsSubscription_GetPending(p->sub, &queued, NULL) != NATS_OK || queued <= 0 ||
        natsSubscription_NextMsg(&m, p->sub, 1) != NATS_OK)
        return false;
    if (handle_status(p, m) != NOT_STATUS)
        natsMsg_Destroy(m);
    else
        take(p, msgs, n, m);
    return true;
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
        if (p->outstanding > 0 && now >= p->request_deadline)
            p->outstanding = 0; /* expired locally; its status never came */
        if (p->outstanding == 0) {
            /* Hand out what is already queued before asking for more. */
            if (take_queued(p, msgs, n)) {
                if (*n == max)
                    return IB_OK;
                continue;
            }
            ib_status st = send_request(p, err);
            if (st != IB_OK)
                return *n > 0 ? IB_OK : st;
        }
        int64_t timeout;
        if (*n > 0)
            timeout = last_arrival + p->flush_ms - now;
        else
            timeout = start + wait_ms - now;
        if (timeout > p->request_deadline - now)
            timeout = p->request_deadline - now;
        if (timeout <= 0) {
            if (*n > 0 || now - start >= wait_ms)
                return IB_OK;
            continue; /* request deadline hit: send another */
        }
        natsMsg *m = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, p->sub, timeout);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK) {
            char d[200];
            if (*n > 0)
                return IB_OK;
            return ib_error_set(err, IB_ERR_NATS, "pull: %s", ib_nats_strerror(d, sizeof(d), s));
        }
        status_kind k = handle_status(p, m);
        if (k != NOT_STATUS) {
            natsMsg_Destroy(m);
            if (k == STATUS_ENDED && *n > 0)
                return IB_OK;
            continue;
        }
        take(p, msgs, n, m);
        last_arrival = now_ms();
        if (*n == max)
            return IB_OK;
    }
}

ib_status ib_puller_prefetch(ib_puller *p, ib_error *err)
{
    if (p->outstanding > 0 && now_ms() < p->request_deadline)
        return IB_OK;
    return send_request(p, err);
}

ib_status ib_puller_stop(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms)
{
    int64_t give_up = now_ms() + wait_ms;
    *n = 0;
    if (p->sub == NULL)
        return IB_OK;
    while (*n < max) {
        int64_t now = now_ms();
        int64_t until =
            p->outstanding > 0 && p->request_deadline < give_up ? p->request_deadline : give_up;
        if (p->outstanding == 0)
            until = now; /* only take what is already queued */
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, p->sub, until > now ? until - now : 1) != NATS_OK)
            break;
        if (handle_status(p, m) != NOT_STATUS) {
            natsMsg_Destroy(m);
            continue;
        }
        take(p, msgs, n, m);
    }
    natsSubscription_Unsubscribe(p->sub);
    natsSubscription_Destroy(p->sub);
    p->sub = NULL;
    return IB_OK;
}

void ib_puller_stats_get(const ib_puller *p, ib_puller_stats *out)
{
    *out = p->stats;
}

void ib_puller_free(ib_puller *p)
{
    if (p == NULL)
        return;
    kicker_stop(&p->kick);
    if (p->sub != NULL) {
        natsSubscription_Unsubscribe(p->sub);
        natsSubscription_Destroy(p->sub);
    }
    free(p->inbox);
    free(p->next_subject);
    free(p);
}
