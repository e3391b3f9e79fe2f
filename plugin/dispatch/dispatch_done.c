/* SPDX-License-Identifier: Apache-2.0 */
/* The completion queue of a batch: dispatch_done.h says who posts what. */
#include "dispatch_done.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

/* `mu` guards every field. The ring holds `count` messages from `head`;
 * its room (`cap`) is two per call of the open batch, so posts never wait.
 * The run thread alone sleeps on `cv` (monotonic clock, for deadlines). */
struct ib__doneq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ib__done *ring;
    size_t cap, head, count;
    bool open;
    bool waiting; /* the run thread sleeps on cv: a post wakes it */
    unsigned requests;
    /* answers, kept until taken */
    size_t extended, lost, marked;
    ib_error renew_err, flush_err;
};

ib_status ib__doneq_create(ib__doneq **out, ib_error *err)
{
    pthread_condattr_t mono;

    *out = NULL;
    ib__doneq *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the completion queue");
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto free_q;
    pthread_condattr_init(&mono);
    pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&q->cv, &mono);
    pthread_condattr_destroy(&mono);
    if (rc != 0)
        goto destroy_mu;
    *out = q;
    return IB_OK;

destroy_mu:
    pthread_mutex_destroy(&q->mu);
free_q:
    free(q);
    return ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the completion queue's lock");
}

void ib__doneq_free(ib__doneq *q)
{
    if (q == NULL)
        return;
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    free(q);
}

bool ib__doneq_reserve(ib__doneq *q, size_t calls)
{
    size_t need = 2 * calls + 2;
    /* closed: nobody posts, so the ring may be replaced without the lock */
    if (need > q->cap) {
        ib__done *ring = malloc(need * sizeof(*ring));
        if (ring == NULL)
            return false;
        free(q->ring);
        q->ring = ring;
        q->cap = need;
    }
    return true;
}

void ib__doneq_open(ib__doneq *q)
{
    pthread_mutex_lock(&q->mu);
    q->head = 0;
    q->count = 0;
    q->requests = 0;
    q->open = true;
    pthread_mutex_unlock(&q->mu);
}

void ib__doneq_close(ib__doneq *q)
{
    pthread_mutex_lock(&q->mu);
    q->open = false;
    q->count = 0;
    q->requests = 0;
    pthread_mutex_unlock(&q->mu);
}

void ib__doneq_post(ib__doneq *q, const ib__done *m)
{
    ib__doneq_post_quiet(q, m, true);
}

void ib__doneq_post_quiet(ib__doneq *q, const ib__done *m, bool wake)
{
    pthread_mutex_lock(&q->mu);
    /* room for two messages per call: a full ring is a caller's bug, and
     * dropping would lose a verdict, so the oldest is never overwritten */
    if (q->count < q->cap) {
        q->ring[(q->head + q->count) % q->cap] = *m;
        q->count++;
    }
    /* a run thread that is not asleep takes it on its next look */
    if (wake && q->waiting)
        pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

bool ib__doneq_request(ib__doneq *q, unsigned what)
{
    pthread_mutex_lock(&q->mu);
    bool open = q->open;
    if (open) {
        q->requests |= what;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return open;
}

bool ib__doneq_wait(ib__doneq *q, ib__done *out, unsigned *requests, int64_t deadline_ms)
{
    struct timespec until = {.tv_sec = (time_t)(deadline_ms / 1000),
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && q->requests == 0) {
        int rc = 0;
        q->waiting = true;
        if (deadline_ms == INT64_MAX)
            pthread_cond_wait(&q->cv, &q->mu);
        else if (ib_clock_monotonic_ms() >= deadline_ms)
            rc = -1;
        else
            rc = pthread_cond_timedwait(&q->cv, &q->mu, &until);
        q->waiting = false;
        if (rc != 0)
            break;
    }
    *requests = q->requests;
    q->requests = 0;
    bool got = q->count > 0;
    if (got) {
        *out = q->ring[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
    pthread_mutex_unlock(&q->mu);
    return got;
}

void ib__doneq_answer_renew(ib__doneq *q, size_t extended, size_t lost, ib_status st,
                            const ib_error *e)
{
    pthread_mutex_lock(&q->mu);
    q->extended += extended;
    q->lost += lost;
    if (st != IB_OK && q->renew_err.status == IB_OK) {
        q->renew_err = *e;
        if (q->renew_err.status == IB_OK)
            q->renew_err.status = st;
    }
    pthread_mutex_unlock(&q->mu);
}

void ib__doneq_answer_flush(ib__doneq *q, size_t marked, ib_status st, const ib_error *e)
{
    pthread_mutex_lock(&q->mu);
    q->marked += marked;
    if (st != IB_OK && q->flush_err.status == IB_OK) {
        q->flush_err = *e;
        if (q->flush_err.status == IB_OK)
            q->flush_err.status = st;
    }
    pthread_mutex_unlock(&q->mu);
}

/* Hands a kept error over (and forgets it). */
static ib_status take_error(ib_error *kept, ib_error *err)
{
    ib_status st = kept->status;
    if (st != IB_OK && err != NULL)
        *err = *kept;
    memset(kept, 0, sizeof(*kept));
    return st;
}

ib_status ib__doneq_take_renew(ib__doneq *q, size_t *extended, size_t *lost, ib_error *err)
{
    pthread_mutex_lock(&q->mu);
    *extended = q->extended;
    *lost = q->lost;
    q->extended = 0;
    q->lost = 0;
    ib_status st = take_error(&q->renew_err, err);
    pthread_mutex_unlock(&q->mu);
    return st;
}

ib_status ib__doneq_take_flush(ib__doneq *q, size_t *marked, ib_error *err)
{
    pthread_mutex_lock(&q->mu);
    *marked = q->marked;
    q->marked = 0;
    ib_status st = take_error(&q->flush_err, err);
    pthread_mutex_unlock(&q->mu);
    return st;
}
