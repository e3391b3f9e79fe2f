#include "puller.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nats_conn.h"

/* Margin past a request's server-side expiry before we consider it gone
 * (lost to a server restart or a dropped status message). */
#define LOCAL_EXPIRY_MARGIN_MS 500

struct ib_puller {
    natsConnection *nc;
    natsSubscription *sub;
    char *inbox;
    char *next_subject; /* $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable> */
    size_t batch;
    int64_t expires_ms;
    int64_t flush_ms;
    /* the request in flight: messages still expected and when it ends */
    size_t outstanding;
    int64_t request_deadline;
    ib_puller_stats stats;
};

static int64_t now_ms(void)
{
    return nats_Now();
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
    if ((s = natsConnection_SubscribeSync(&p->sub, nc, p->inbox)) != NATS_OK) {
        char d[200];
        st = ib_error_set(err, IB_ERR_NATS, "puller: subscribe: %s",
                          ib_nats_strerror(d, sizeof(d), s));
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
    char body[96];
    int len = snprintf(body, sizeof(body), "{\"batch\":%zu,\"expires\":%lld}", p->batch,
                       (long long)p->expires_ms * 1000000LL);
    natsStatus s = natsConnection_PublishRequest(p->nc, p->next_subject, p->inbox, body, len);
    if (s != NATS_OK) {
        char d[200];
        return ib_error_set(err, IB_ERR_NATS, "pull request to %s: %s", p->next_subject,
                            ib_nats_strerror(d, sizeof(d), s));
    }
    p->outstanding = p->batch;
    p->request_deadline = now_ms() + p->expires_ms + LOCAL_EXPIRY_MARGIN_MS;
    p->stats.requests++;
    return IB_OK;
}

/* Returns true for a status message (no payload, a "Status" header):
 * 404/408/409 end the request in flight; 100 is a heartbeat. */
static bool handle_status(ib_puller *p, natsMsg *m)
{
    const char *status = NULL;
    if (natsMsg_GetDataLength(m) != 0 || natsMsgHeader_Get(m, "Status", &status) != NATS_OK ||
        status == NULL)
        return false;
    p->stats.statuses++;
    if (strcmp(status, "100") != 0)
        p->outstanding = 0;
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
        if (p->outstanding == 0 || now >= p->request_deadline) {
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
        if (handle_status(p, m)) {
            natsMsg_Destroy(m);
            if (*n > 0)
                return IB_OK;
            continue;
        }
        if (p->outstanding > 0)
            p->outstanding--;
        else
            p->stats.leftovers++;
        p->stats.messages++;
        msgs[(*n)++] = m;
        last_arrival = now_ms();
        if (*n == max)
            return IB_OK;
    }
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
        if (handle_status(p, m)) {
            natsMsg_Destroy(m);
            continue;
        }
        if (p->outstanding > 0)
            p->outstanding--;
        msgs[(*n)++] = m;
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
    if (p->sub != NULL) {
        natsSubscription_Unsubscribe(p->sub);
        natsSubscription_Destroy(p->sub);
    }
    free(p->inbox);
    free(p->next_subject);
    free(p);
}
