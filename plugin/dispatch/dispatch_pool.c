#include "dispatch_pool.h"
#include "clock.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The loop being run. It lives on the caller's stack: the caller does not
 * return before every worker has left it (pool->active reaches 0). */
typedef struct pool_job {
    ib__pool_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next; /* next index to hand out; lock-free so fast handlers don't
                           serialise on the pool mutex */
} pool_job;

/* `mu` guards everything below it. Workers sleep on `work_cv` until the
 * generation changes (a new job) or `stopping`; the caller sleeps on
 * `done_cv` until `active` (workers not yet finished with the job) is 0. */
struct ib__pool {
    pthread_t *threads;
    unsigned nthreads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pthread_cond_t done_cv;
    uint64_t generation;
    bool stopping;
    pool_job *job;
    unsigned active;
};

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

        size_t i;
        while ((i = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->n)
            job->fn(job->ctx, i);

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

ib_status ib__pool_create(ib__pool **out, unsigned threads, ib_error *err)
{
    ib_status st;
    unsigned started = 0;
    sigset_t all, old;
    int rc = 0;

    *out = NULL;
    ib__pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for the worker pool");
    p->threads = calloc(threads, sizeof(*p->threads));
    if (p->threads == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory for %u worker threads", threads);
        goto fail_threads;
    }
    p->nthreads = threads;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the pool mutex");
        goto fail_mutex;
    }
    if (pthread_cond_init(&p->work_cv, NULL) != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the pool condition");
        goto fail_work_cv;
    }
    /* The caller's timed waits (ib__pool_run_ticking) use the monotonic
     * clock, so a wall-clock step cannot stretch or skip a tick. */
    pthread_condattr_t mono;
    pthread_condattr_init(&mono);
    pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&p->done_cv, &mono);
    pthread_condattr_destroy(&mono);
    if (rc != 0) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot create the pool condition");
        goto fail_done_cv;
    }

    /* Workers inherit the creator's signal mask: block everything so
     * SIGTERM/SIGINT reach the host's own threads, never a handler. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (; started < threads; started++) {
        rc = pthread_create(&p->threads[started], NULL, pool_worker, p);
        if (rc != 0)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < threads) {
        st = ib_error_set(err, IB_ERR_IO, "dispatch: cannot start worker thread %u of %u: %s",
                          started + 1, threads, strerror(rc));
        goto fail_start;
    }
    *out = p;
    return IB_OK;

fail_start:
    pool_stop(p, started);
    pthread_cond_destroy(&p->done_cv);
fail_done_cv:
    pthread_cond_destroy(&p->work_cv);
fail_work_cv:
    pthread_mutex_destroy(&p->mu);
fail_mutex:
    free(p->threads);
fail_threads:
    free(p);
    return st;
}

void ib__pool_free(ib__pool *p)
{
    if (p == NULL)
        return;
    pool_stop(p, p->nthreads);
    pthread_cond_destroy(&p->done_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

void ib__pool_run(ib__pool *p, ib__pool_fn fn, void *ctx, size_t n)
{
    ib__pool_run_ticking(p, fn, ctx, n, 0, NULL);
}

void ib__pool_run_ticking(ib__pool *p, ib__pool_fn fn, void *ctx, size_t n, int64_t tick_ms,
                          ib__pool_tick_fn tick)
{
    pool_job job = {.fn = fn, .ctx = ctx, .n = n};

    if (n == 0)
        return;
    if (tick_ms < 1)
        tick_ms = 1;
    atomic_init(&job.next, 0);
    pthread_mutex_lock(&p->mu);
    p->job = &job;
    p->active = p->nthreads;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    while (p->active > 0 && tick == NULL)
        pthread_cond_wait(&p->done_cv, &p->mu);
    while (p->active > 0) {
        struct timespec until = ib_clock_monotonic_deadline(tick_ms);
        while (p->active > 0 && pthread_cond_timedwait(&p->done_cv, &p->mu, &until) == 0) {
        }
        if (p->active == 0)
            break;
        pthread_mutex_unlock(&p->mu);
        tick(ctx);
        pthread_mutex_lock(&p->mu);
    }
    p->job = NULL;
    pthread_mutex_unlock(&p->mu);
}
