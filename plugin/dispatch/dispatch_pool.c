/* SPDX-License-Identifier: Apache-2.0 */
#include "dispatch_pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The loop being run. It lives in the pool: a loop is not started before
 * every worker has left the last one (pool->active reaches 0). */
typedef struct pool_job {
    ib__pool_fn fn;
    void *ctx;
    atomic_size_t n;    /* indices [0, n) are to run; grows (ib__pool_extend) */
    atomic_size_t next; /* next index to hand out; lock-free so fast handlers don't
                           serialise on the pool mutex; never passes n */
    bool closed;        /* ib__pool_finish was called: no index will be added
                           (under mu) */
} pool_job;

/* `mu` guards everything below it but `held`. Workers sleep on `work_cv`
 * until the generation changes (a new job) or `stopping`, between two
 * calls while `held`, and, once every index is handed out, until the loop
 * grows or is closed; the caller sleeps on `done_cv` until `active`
 * (workers not yet finished with the job) is 0. `held` is written under
 * `mu` and read without it first, so an unheld loop takes no lock. */
struct ib__pool {
    pthread_t *threads;
    unsigned nthreads;
    atomic_bool held;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pthread_cond_t done_cv;
    uint64_t generation;
    bool stopping;
    pool_job *job;
    pool_job current; /* what job points to while a loop runs */
    unsigned active;
};

/* Sleeps while the loop is held (ib__pool_hold). */
static void wait_while_held(ib__pool *p)
{
    if (!atomic_load_explicit(&p->held, memory_order_acquire))
        return;
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->held, memory_order_relaxed))
        pthread_cond_wait(&p->work_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* Hands out the next index of the loop, or returns false when every
 * index up to the current end is out. A compare-and-swap, not an add:
 * `next` never passes `n`, so an index added later is not skipped. */
static bool take_index(pool_job *job, size_t *out)
{
    size_t i = atomic_load_explicit(&job->next, memory_order_relaxed);
    while (i < atomic_load_explicit(&job->n, memory_order_acquire)) {
        if (atomic_compare_exchange_weak_explicit(&job->next, &i, i + 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *out = i;
            return true;
        }
    }
    return false;
}

/* A worker with nothing to hand out: sleeps until the loop grows (true:
 * take again) or is closed (false: leave it). */
static bool wait_for_more(ib__pool *p, pool_job *job)
{
    pthread_mutex_lock(&p->mu);
    while (!job->closed && atomic_load_explicit(&job->next, memory_order_relaxed) >=
                               atomic_load_explicit(&job->n, memory_order_relaxed))
        pthread_cond_wait(&p->work_cv, &p->mu);
    bool more = atomic_load_explicit(&job->next, memory_order_relaxed) <
                atomic_load_explicit(&job->n, memory_order_relaxed);
    pthread_mutex_unlock(&p->mu);
    return more;
}

static void *pool_worker(void *arg)
{
    ib__pool *p = arg;
    uint64_t seen = 0;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stopping && p->generation == seen)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stopping)
            break;
        seen = p->generation;
        pool_job *job = p->job;
        pthread_mutex_unlock(&p->mu);

        for (;;) {
            wait_while_held(p);
            size_t i;
            if (take_index(job, &i))
                job->fn(job->ctx, i);
            else if (!wait_for_more(p, job))
                break;
        }

        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_stop(ib__pool *p, unsigned started)
{
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < started; i++)
        pthread_join(p->threads[i], NULL);
}

/* The pool's lock and its two conditions; all or none. */
static ib_status pool_sync_init(ib__pool *p, ib_error *err)
{
    pthread_condattr_t mono;

    if (pthread_mutex_init(&p->mu, NULL) != 0)
        return ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the pool mutex");
    if (pthread_cond_init(&p->work_cv, NULL) != 0)
        goto destroy_mu;
    /* Monotonic, should a caller ever wait with a deadline: a wall-clock
     * step then cannot stretch or cut its wait. */
    pthread_condattr_init(&mono);
    pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&p->done_cv, &mono);
    pthread_condattr_destroy(&mono);
    if (rc != 0)
        goto destroy_work_cv;
    return IB_OK;

destroy_work_cv:
    pthread_cond_destroy(&p->work_cv);
destroy_mu:
    pthread_mutex_destroy(&p->mu);
    return ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the pool condition");
}

static void pool_sync_destroy(ib__pool *p)
{
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->mu);
}

/* Starts the workers; returns how many started, and in *rc why the next
 * one did not. Workers inherit the creator's signal mask: block everything
 * so SIGTERM/SIGINT reach the host's own threads, never a handler. */
static unsigned pool_start(ib__pool *p, int *rc)
{
    sigset_t all, old;
    unsigned started = 0;

    *rc = 0;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (; started < p->nthreads; started++) {
        *rc = pthread_create(&p->threads[started], NULL, pool_worker, p);
        if (*rc != 0)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return started;
}

ib_status ib__pool_create(ib__pool **out, unsigned threads, ib_error *err)
{
    ib_status st;
    int rc;

    *out = NULL;
    ib__pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the worker pool");
    atomic_init(&p->held, false);
    p->threads = calloc(threads, sizeof(*p->threads));
    if (p->threads == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for %u worker threads", threads);
        goto free_pool;
    }
    p->nthreads = threads;
    st = pool_sync_init(p, err);
    if (st != IB_OK)
        goto free_threads;
    unsigned started = pool_start(p, &rc);
    if (started < threads) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot start worker thread %u of %u: %s",
                          started + 1, threads, strerror(rc));
        p->nthreads = started; /* the ones to stop and join */
        ib__pool_free(p);
        return st;
    }
    *out = p;
    return IB_OK;

free_threads:
    free(p->threads);
free_pool:
    free(p);
    return st;
}

void ib__pool_free(ib__pool *p)
{
    if (p == NULL)
        return;
    pool_stop(p, p->nthreads);
    pool_sync_destroy(p);
    free(p->threads);
    free(p);
}

void ib__pool_run(ib__pool *p, ib__pool_fn fn, void *ctx, size_t n)
{
    ib__pool_start(p, fn, ctx, n);
    ib__pool_finish(p);
}

void ib__pool_start(ib__pool *p, ib__pool_fn fn, void *ctx, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&p->mu);
    p->current.fn = fn;
    p->current.ctx = ctx;
    p->current.closed = false;
    atomic_store_explicit(&p->current.n, n, memory_order_relaxed);
    atomic_store_explicit(&p->current.next, 0, memory_order_relaxed);
    p->job = &p->current;
    p->active = p->nthreads;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
}

void ib__pool_extend(ib__pool *p, size_t n)
{
    pthread_mutex_lock(&p->mu);
    pool_job *job = p->job;
    if (job != NULL && !job->closed && n > atomic_load_explicit(&job->n, memory_order_relaxed)) {
        atomic_store_explicit(&job->n, n, memory_order_release);
        pthread_cond_broadcast(&p->work_cv);
    }
    pthread_mutex_unlock(&p->mu);
}

void ib__pool_finish(ib__pool *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->job != NULL) {
        p->job->closed = true;
        pthread_cond_broadcast(&p->work_cv);
    }
    while (p->active > 0)
        pthread_cond_wait(&p->done_cv, &p->mu);
    p->job = NULL;
    pthread_mutex_unlock(&p->mu);
}

void ib__pool_hold(ib__pool *p, bool hold)
{
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->held, hold, memory_order_release);
    if (!hold)
        pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
}
