/* SPDX-License-Identifier: Apache-2.0 */
/* The completion queue of the dispatch core (dispatch_done.h): what
 * several workers post is taken once each, in each worker's order;
 * requests wake the taker and are taken once, only while a batch runs,
 * and go to the stand-in while the run thread is aside;
 * a wait ends at its deadline; answers reach their asker once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "dispatch_done.h"
#include "ib_test.h"

#define WORKERS 4
#define CALLS 500 /* per worker */

typedef struct poster {
    ib__doneq *q;
    size_t worker;
} poster;

/* A worker: a start and an end per call, as run_call posts them. */
static void *post_main(void *arg)
{
    poster *p = arg;
    for (size_t i = 0; i < CALLS; i++) {
        size_t w = p->worker * CALLS + i;
        ib__doneq_post(p->q, &(ib__done){.kind = IB__DONE_START, .work = w, .at_ms = 1});
        ib__done d = {.kind = IB__DONE_CALL, .work = w, .result = (unsigned char)(w % 7)};
        d.note.retry_after_ms = (int64_t)w;
        ib__doneq_post(p->q, &d);
        /* now and then a pause, so the taker finds the queue empty and
         * sleeps, and each post must wake it */
        if (i % 8 == 0)
            usleep(100);
    }
    return NULL;
}

static void posts_from_several_workers_are_taken_once(void **state)
{
    (void)state;
    static unsigned char starts[WORKERS * CALLS], ends[WORKERS * CALLS];
    ib__doneq *q;
    ib_error e;
    assert_int_equal(ib__doneq_create(&q, &e), IB_OK);
    assert_true(ib__doneq_reserve(q, WORKERS * CALLS));
    ib__doneq_open(q);
    memset(starts, 0, sizeof(starts));
    memset(ends, 0, sizeof(ends));
    poster p[WORKERS];
    pthread_t t[WORKERS];
    for (size_t k = 0; k < WORKERS; k++) {
        p[k] = (poster){q, k};
        assert_int_equal(pthread_create(&t[k], NULL, post_main, &p[k]), 0);
    }
    size_t taken = 0;
    while (taken < 2 * WORKERS * CALLS) {
        ib__done m;
        unsigned asked = 7;
        /* a lost wake-up would leave the wait to its deadline */
        int64_t until = ib_clock_monotonic_ms() + 2000;
        assert_true(ib__doneq_wait(q, &m, &asked, until));
        assert_true(ib_clock_monotonic_ms() < until);
        assert_int_equal(asked, 0);
        assert_true(m.work < WORKERS * CALLS);
        if (m.kind == IB__DONE_START) {
            assert_int_equal(ends[m.work], 0); /* a worker's order is kept */
            starts[m.work]++;
        } else {
            assert_int_equal(m.kind, IB__DONE_CALL);
            assert_int_equal(starts[m.work], 1);
            assert_int_equal(m.result, m.work % 7);
            assert_int_equal(m.note.retry_after_ms, (int64_t)m.work);
            ends[m.work]++;
        }
        taken++;
    }
    for (size_t k = 0; k < WORKERS; k++)
        pthread_join(t[k], NULL);
    for (size_t w = 0; w < WORKERS * CALLS; w++) {
        assert_int_equal(starts[w], 1);
        assert_int_equal(ends[w], 1);
    }
    /* nothing more: the wait ends at its deadline, empty-handed */
    ib__done m;
    unsigned asked = 7;
    int64_t t0 = ib_clock_monotonic_ms();
    assert_false(ib__doneq_wait(q, &m, &asked, t0 + 50));
    assert_true(ib_clock_monotonic_ms() - t0 >= 49);
    assert_int_equal(asked, 0);
    ib__doneq_close(q);
    ib__doneq_free(q);
}

typedef struct asker {
    ib__doneq *q;
    atomic_bool asked;
} asker;

static void *ask_main(void *arg)
{
    asker *a = arg;
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 50 * 1000000L};
    nanosleep(&pause, NULL);
    atomic_store(&a->asked, ib__doneq_request(a->q, IB__DONE_RENEW));
    return NULL;
}

/* Requests wake a waiting run thread and are taken once; several asks
 * before a take are one; nothing is asked of a closed queue; answers add
 * up until their asker takes them, once. */
static void requests_wake_the_taker_once(void **state)
{
    (void)state;
    ib__doneq *q;
    ib_error e = {0};
    ib__done m;
    unsigned asked;
    assert_int_equal(ib__doneq_create(&q, &e), IB_OK);
    assert_true(ib__doneq_reserve(q, 1));
    assert_false(ib__doneq_request(q, IB__DONE_RENEW)); /* closed: no batch */
    ib__doneq_open(q);

    asker a = {.q = q};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, ask_main, &a), 0);
    assert_false(ib__doneq_wait(q, &m, &asked, INT64_MAX)); /* woken by the request */
    pthread_join(t, NULL);
    assert_true(atomic_load(&a.asked));
    assert_int_equal(asked, IB__DONE_RENEW);

    assert_true(ib__doneq_request(q, IB__DONE_FLUSH));
    assert_true(ib__doneq_request(q, IB__DONE_FLUSH));
    assert_true(ib__doneq_request(q, IB__DONE_RENEW));
    assert_false(ib__doneq_wait(q, &m, &asked, 0));
    assert_int_equal(asked, IB__DONE_RENEW | IB__DONE_FLUSH);
    assert_false(ib__doneq_wait(q, &m, &asked, 0));
    assert_int_equal(asked, 0);

    /* what the run thread did, told once */
    size_t extended = 9, lost = 9, marked = 9;
    ib__doneq_answer_renew(q, 3, 1, IB_OK, &e);
    ib__doneq_answer_renew(q, 2, 0, IB_OK, &e);
    ib__doneq_answer_flush(q, 4, IB_OK, &e);
    ib_error failed = {0};
    ib_error_set(&failed, IB_ERR_RECORDER, "store down");
    ib__doneq_answer_flush(q, 0, IB_ERR_RECORDER, &failed);
    ib__doneq_close(q);
    assert_false(ib__doneq_request(q, IB__DONE_RENEW));
    assert_int_equal(ib__doneq_take_renew(q, &extended, &lost, &e), IB_OK);
    assert_int_equal(extended, 5);
    assert_int_equal(lost, 1);
    assert_int_equal(ib__doneq_take_flush(q, &marked, &e), IB_ERR_RECORDER);
    assert_int_equal(marked, 4);
    assert_string_equal(e.msg, "store down");
    assert_int_equal(ib__doneq_take_renew(q, &extended, &lost, NULL), IB_OK);
    assert_int_equal(extended + lost, 0);
    assert_int_equal(ib__doneq_take_flush(q, &marked, NULL), IB_OK);
    assert_int_equal(marked, 0);
    ib__doneq_free(q);
}

/* What the stand-in saw: each call of its serve function takes the
 * requests, as dispatch_run.c's stand_in does when it may. */
typedef struct stand_probe {
    ib__doneq *q;
    atomic_int calls;
    atomic_uint taken;
    pthread_t thread;
} stand_probe;

static void stand_serve(void *ctx)
{
    stand_probe *p = ctx;
    p->thread = pthread_self();
    atomic_fetch_or(&p->taken, ib__doneq_take_requests(p->q));
    atomic_fetch_add(&p->calls, 1);
}

/* Waits up to 10 s for the stand-in's `calls` to reach `want`. */
static bool stand_called(stand_probe *p, int want)
{
    for (int i = 0; i < 10000 && atomic_load(&p->calls) < want; i++)
        usleep(1000);
    return atomic_load(&p->calls) >= want;
}

/* A request made while the run thread is aside wakes the stand-in, on its
 * own thread, and not the run thread; one made before the run thread
 * steps aside and not taken yet wakes it at the step; once the run thread
 * is back, requests are its own again. */
static void requests_go_to_the_stand_in_while_aside(void **state)
{
    (void)state;
    ib__doneq *q;
    ib_error e = {0};
    ib__done m;
    unsigned asked;
    stand_probe p = {0};
    assert_int_equal(ib__doneq_create(&q, &e), IB_OK);
    p.q = q;
    assert_int_equal(ib__doneq_start_stand_in(q, stand_serve, &p, &e), IB_OK);
    assert_true(ib__doneq_reserve(q, 1));
    ib__doneq_open(q);

    /* not aside: the run thread's, the stand-in sleeps */
    assert_true(ib__doneq_request(q, IB__DONE_RENEW));
    usleep(50000);
    assert_int_equal(atomic_load(&p.calls), 0);
    assert_false(ib__doneq_wait(q, &m, &asked, 0));
    assert_int_equal(asked, IB__DONE_RENEW);

    /* aside: the stand-in's */
    ib__doneq_step_aside(q);
    assert_true(ib__doneq_request(q, IB__DONE_FLUSH));
    assert_true(stand_called(&p, 1));
    assert_int_equal(atomic_load(&p.taken), IB__DONE_FLUSH);
    assert_false(pthread_equal(p.thread, pthread_self()));
    ib__doneq_come_back(q);

    /* asked before the step, not taken: the step wakes the stand-in */
    assert_true(ib__doneq_request(q, IB__DONE_RENEW));
    ib__doneq_step_aside(q);
    assert_true(stand_called(&p, 2));
    assert_int_equal(atomic_load(&p.taken), IB__DONE_FLUSH | IB__DONE_RENEW);
    ib__doneq_come_back(q);

    /* back: the run thread's again */
    assert_true(ib__doneq_request(q, IB__DONE_FLUSH));
    usleep(50000);
    assert_int_equal(atomic_load(&p.calls), 2);
    assert_false(ib__doneq_wait(q, &m, &asked, 0));
    assert_int_equal(asked, IB__DONE_FLUSH);
    ib__doneq_close(q);
    ib__doneq_free(q); /* stops and joins the stand-in */
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(posts_from_several_workers_are_taken_once),
    cmocka_unit_test(requests_wake_the_taker_once),
    cmocka_unit_test(requests_go_to_the_stand_in_while_aside),
};

IB_TEST_MAIN(tests)
