/* SPDX-License-Identifier: Apache-2.0 */
/* The completion queue of a batch: dispatch_done.h says who posts what. */
#include "dispatch_done.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

/* `mu` guards every field but the two atomics. The ring holds `count`
 * messages from `head`; its room (`cap`) is two per call of the open
 * batch, so posts never wait. The run thread alone sleeps on `cv`
 * (monotonic clock, for deadlines); the stand-in alone on `stand_cv`.
 *
 * `requests` and `aside` are atomics so that the run thread steps aside
 * and comes back, once per call of its own, without taking `mu`. An asker
 * sets its bit and then reads `aside`; the run thread sets `aside` and
 * then reads `requests` (both sequentially consistent), so at least one
 * of them sees the other and the request wakes someone: the stand-in when
 * the run thread is aside, else the run thread. Bits are set under `mu`
 * (so a sleeper checking them under it misses no wake-up) and taken by
 * exchange. */
struct ib__doneq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ib__done *ring;
    size_t cap, head, count;
    bool open;
    bool waiting; /* the run thread sleeps on cv: a post wakes it */
    atomic_uint requests;
    /* the stand-in: serves requests while the run thread is aside */
    pthread_cond_t stand_cv;
    pthread_t stand;
    bool stand_started, stand_stopping;
    atomic_bool aside; /* the run thread is inside a handler call of its own */
    ib__doneq_serve_fn serve;
    void *serve_ctx;
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
    if (pthread_cond_init(&q->stand_cv, NULL) != 0)
        goto destroy_cv;
    *out = q;
    return IB_OK;

destroy_cv:
    pthread_cond_destroy(&q->cv);
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
    if (q->stand_started) {
        pthread_mutex_lock(&q->mu);
        q->stand_stopping = true;
        pthread_cond_signal(&q->stand_cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->stand, NULL);
    }
    pthread_cond_destroy(&q->stand_cv);
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
    atomic_store(&q->requests, 0);
    q->open = true;
    pthread_mutex_unlock(&q->mu);
}

void ib__doneq_close(ib__doneq *q)
{
    pthread_mutex_lock(&q->mu);
    q->open = false;
    q->count = 0;
    atomic_store(&q->requests, 0);
    pthread_mutex_unlock(&q->mu);
}

void ib__doneq_post(ib__doneq *q, const ib__done *m)
{
    pthread_mutex_lock(&q->mu);
    /* room for two messages per call: a full ring is a caller's bug, and
     * dropping would lose a verdict, so the oldest is never overwritten */
    if (q->count < q->cap) {
        q->ring[(q->head + q->count) % q->cap] = *m;
        q->count++;
    }
    /* a run thread that is not asleep takes it on its next look */
    if (q->waiting)
        pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

unsigned ib__doneq_take_requests(ib__doneq *q)
{
    return atomic_load(&q->requests) != 0 ? atomic_exchange(&q->requests, 0) : 0;
}

bool ib__doneq_request(ib__doneq *q, unsigned what)
{
    pthread_mutex_lock(&q->mu);
    bool open = q->open;
    if (open) {
        atomic_fetch_or(&q->requests, what);
        pthread_cond_signal(atomic_load(&q->aside) ? &q->stand_cv : &q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return open;
}

/* The stand-in's life: asleep until a request comes while the run thread
 * is aside, then serve() (which finds out whether it may serve: the run
 * thread may be back already, and then serves the request itself). */
static void *stand_main(void *arg)
{
    ib__doneq *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->stand_stopping) {
        if (!(atomic_load(&q->aside) && atomic_load(&q->requests) != 0)) {
            pthread_cond_wait(&q->stand_cv, &q->mu);
            continue;
        }
        pthread_mutex_unlock(&q->mu);
        q->serve(q->serve_ctx);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

ib_status ib__doneq_start_stand_in(ib__doneq *q, ib__doneq_serve_fn serve, void *ctx, ib_error *err)
{
    sigset_t all, old;
    q->serve = serve;
    q->serve_ctx = ctx;
    /* no signal for it: SIGTERM/SIGINT reach the host's own threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&q->stand, NULL, stand_main, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return ib_error_set(err, IB_ERR_IO, "dispatch: cannot start the stand-in thread");
    q->stand_started = true;
    return IB_OK;
}

void ib__doneq_step_aside(ib__doneq *q)
{
    atomic_store(&q->aside, true);
    if (atomic_load(&q->requests) == 0)
        return;
    /* made since the run thread last looked, or the asker saw it back */
    pthread_mutex_lock(&q->mu);
    pthread_cond_signal(&q->stand_cv);
    pthread_mutex_unlock(&q->mu);
}

void ib__doneq_come_back(ib__doneq *q)
{
    atomic_store(&q->aside, false);
}

bool ib__doneq_wait(ib__doneq *q, ib__done *out, unsigned *requests, int64_t deadline_ms)
{
    struct timespec until = {.tv_sec = (time_t)(deadline_ms / 1000),
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && atomic_load(&q->requests) == 0) {
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
    *requests = atomic_exchange(&q->requests, 0);
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
