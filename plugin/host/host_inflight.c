/* SPDX-License-Identifier: Apache-2.0 */
/* The batch in flight, between the batch thread that runs it and the
 * control thread that keeps it in progress (host_internal.h).
 *
 * The lock guards three words (the messages, their count, when the batch
 * started) and one flag, `sending`. Nothing slow runs under it: the
 * control thread decides under the lock whether +WPI is due, raises
 * `sending`, and sends with the lock released; the lease renewal, a
 * request the dispatch carries out (ib_dispatch_extend_leases returns at
 * once), is asked for after `sending` dropped.
 * The batch thread therefore takes the lock for a few instructions at the
 * start and end of every batch, whatever the store or the server do.
 *
 * Why the messages stay valid while they are sent without the lock: the
 * batch thread destroys them only after ib__host_inflight_end returned,
 * and end waits while `sending` is up. It waits for the +WPI publishes
 * alone (nats.c copies them into the connection's buffer), never for the
 * renewal. The wait is needed for more than memory: a +WPI that reached
 * the server after the batch's nak with a delay would restart the
 * message's AckWait and replace the delay asked for. */
#include <string.h>

#include "host_internal.h"

void ib__host_inflight_init(ib_host_inflight *f)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->sent, NULL);
}

void ib__host_inflight_destroy(ib_host_inflight *f)
{
    pthread_cond_destroy(&f->sent);
    pthread_mutex_destroy(&f->lock);
}

void ib__host_inflight_begin(ib_host_inflight *f, natsMsg **msgs, size_t n, int64_t now_ms)
{
    pthread_mutex_lock(&f->lock);
    f->msgs = msgs;
    f->n = n;
    f->since_ms = now_ms;
    pthread_mutex_unlock(&f->lock);
}

void ib__host_inflight_grow(ib_host_inflight *f, size_t n)
{
    pthread_mutex_lock(&f->lock);
    f->n = n;
    pthread_mutex_unlock(&f->lock);
}

void ib__host_inflight_end(ib_host_inflight *f)
{
    pthread_mutex_lock(&f->lock);
    f->msgs = NULL;
    f->n = 0;
    while (f->sending)
        pthread_cond_wait(&f->sent, &f->lock);
    pthread_mutex_unlock(&f->lock);
}

bool ib__host_inflight_busy(ib_host_inflight *f)
{
    pthread_mutex_lock(&f->lock);
    bool busy = f->n > 0;
    pthread_mutex_unlock(&f->lock);
    return busy;
}

/* Under the lock: whether +WPI is due for the batch now in flight; if so,
 * raises `sending` and hands out the messages, which stay valid until
 * sending_done (ib__host_inflight_end waits for it). */
static size_t sending_take(ib_host_inflight *f, int64_t now_ms, int64_t every_ms, int64_t *last,
                           natsMsg ***msgs)
{
    pthread_mutex_lock(&f->lock);
    size_t n = 0;
    int64_t since = f->since_ms > *last ? f->since_ms : *last;
    if (f->n > 0 && now_ms - since >= every_ms) {
        n = f->n;
        *msgs = f->msgs;
        f->sending = true;
        *last = now_ms;
    }
    pthread_mutex_unlock(&f->lock);
    return n;
}

static void sending_done(ib_host_inflight *f)
{
    pthread_mutex_lock(&f->lock);
    f->sending = false;
    pthread_cond_broadcast(&f->sent);
    pthread_mutex_unlock(&f->lock);
}

bool ib__host_inflight_keep(ib_host_inflight *f, int64_t now_ms, int64_t every_ms, int64_t *last,
                            const ib_host_inflight_ops *ops, void *ctx)
{
    natsMsg **msgs = NULL;
    size_t n = sending_take(f, now_ms, every_ms, last, &msgs);
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (msgs[i] != NULL)
            ops->send(ctx, msgs[i]);
    sending_done(f);
    /* Without the lock, and after the batch thread is free to end the
     * batch: the renewal asks the dispatch for the claims it holds now. If
     * the batch ended meanwhile that is none (a no-op); if the next one
     * started, its claims are renewed a little early. Neither can renew a
     * claim the process no longer holds: the store checks the owner. */
    if (ops->renew != NULL)
        ops->renew(ctx);
    return true;
}
