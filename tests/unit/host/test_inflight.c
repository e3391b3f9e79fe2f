/* SPDX-License-Identifier: Apache-2.0 */
/* The batch in flight between the batch thread and the control thread
 * (host_inflight.c): when +WPI is due, that the lease renewal runs with the
 * lock released (a review finding: it ran under the lock, so a store that
 * waited its busy timeout held up the batch thread after every batch), and
 * that ending a batch waits for the +WPI being sent for it. */
#include "ib_test.h"

#include <errno.h>
#include <string.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <time.h>

#include "host_internal.h"

/* Stand-ins for messages: only their addresses are handed around. */
static int fake[3];
#define MSG(i) ((natsMsg *)&fake[i])

/* Generous: reached only when the code under test is wrong. */
#define FAIL_AFTER_S 10

typedef struct probe {
    ib_host_inflight *f;
    natsMsg *sent[8];
    size_t sends, renewals;
    sem_t renewing, batch_done, sending, may_finish;
    bool block_renew, block_send;
    bool renew_saw_batch; /* the batch thread ended and began batches meanwhile */
    bool kept;
} probe;

static struct timespec in_seconds(int s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += s;
    return ts;
}

static void on_send(void *ctx, natsMsg *m)
{
    probe *p = ctx;
    if (p->sends < 8)
        p->sent[p->sends] = m;
    p->sends++;
    if (p->block_send && p->sends == 1) {
        sem_post(&p->sending);
        sem_wait(&p->may_finish);
    }
}

/* A renewal that blocks, as a store waiting out its busy timeout does,
 * until the batch thread has done what it does after every batch. */
static void on_renew(void *ctx)
{
    probe *p = ctx;
    p->renewals++;
    if (!p->block_renew)
        return;
    sem_post(&p->renewing);
    struct timespec until = in_seconds(FAIL_AFTER_S);
    p->renew_saw_batch = sem_timedwait(&p->batch_done, &until) == 0;
}

static const ib_host_inflight_ops ops = {.send = on_send, .renew = on_renew};

static void *control_once(void *arg)
{
    probe *p = arg;
    int64_t last = 0;
    p->kept = ib__host_inflight_keep(p->f, 1000, 500, &last, &ops, p);
    return NULL;
}

static void probe_init(probe *p, ib_host_inflight *f)
{
    memset(p, 0, sizeof(*p));
    p->f = f;
    sem_init(&p->renewing, 0, 0);
    sem_init(&p->batch_done, 0, 0);
    sem_init(&p->sending, 0, 0);
    sem_init(&p->may_finish, 0, 0);
}

static void probe_destroy(probe *p)
{
    sem_destroy(&p->renewing);
    sem_destroy(&p->batch_done);
    sem_destroy(&p->sending);
    sem_destroy(&p->may_finish);
}

/* While the renewal blocks, the batch thread ends its batch and starts
 * and ends another: each takes the lock. Were the renewal made under the
 * lock, end would wait for it, the renewal would give up after
 * FAIL_AFTER_S, and renew_saw_batch would be false. */
static void renewal_runs_without_the_lock(void **state)
{
    (void)state;
    ib_host_inflight f;
    probe p;
    ib__host_inflight_init(&f);
    probe_init(&p, &f);
    p.block_renew = true;
    natsMsg *batch[2] = {MSG(0), MSG(1)};
    ib__host_inflight_begin(&f, batch, 2, 0);

    pthread_t control;
    assert_int_equal(pthread_create(&control, NULL, control_once, &p), 0);
    sem_wait(&p.renewing);
    ib__host_inflight_end(&f); /* the batch thread, after dispatch */
    ib__host_inflight_begin(&f, batch, 1, 2000);
    assert_true(ib__host_inflight_busy(&f));
    ib__host_inflight_end(&f);
    sem_post(&p.batch_done);
    pthread_join(control, NULL);

    assert_true(p.kept);
    assert_true(p.renew_saw_batch);
    assert_int_equal(p.sends, 2);
    assert_ptr_equal(p.sent[0], MSG(0));
    assert_ptr_equal(p.sent[1], MSG(1));
    assert_int_equal(p.renewals, 1);
    probe_destroy(&p);
    ib__host_inflight_destroy(&f);
}

/* +WPI goes out every `every_ms` after the batch started and after the
 * last send, for every message but the ones already destroyed (NULL), and
 * never once the batch ended. */
static void sends_when_due_and_only_while_in_flight(void **state)
{
    (void)state;
    ib_host_inflight f;
    probe p;
    ib__host_inflight_init(&f);
    probe_init(&p, &f);
    natsMsg *batch[3] = {MSG(0), NULL, MSG(2)};
    int64_t last = 0;

    assert_false(ib__host_inflight_keep(&f, 5000, 500, &last, &ops, &p)); /* none in flight */
    ib__host_inflight_begin(&f, batch, 3, 1000);
    assert_false(ib__host_inflight_keep(&f, 1499, 500, &last, &ops, &p));
    assert_true(ib__host_inflight_keep(&f, 1500, 500, &last, &ops, &p));
    assert_int_equal(last, 1500);
    assert_int_equal(p.sends, 2);
    assert_ptr_equal(p.sent[0], MSG(0));
    assert_ptr_equal(p.sent[1], MSG(2));
    assert_int_equal(p.renewals, 1);
    assert_false(ib__host_inflight_keep(&f, 1999, 500, &last, &ops, &p));
    assert_true(ib__host_inflight_keep(&f, 2000, 500, &last, &ops, &p));
    assert_int_equal(p.sends, 4);
    assert_int_equal(p.renewals, 2);
    ib__host_inflight_end(&f);
    assert_false(ib__host_inflight_busy(&f));
    assert_false(ib__host_inflight_keep(&f, 9000, 500, &last, &ops, &p));
    assert_int_equal(p.sends, 4);

    /* a renewal is optional */
    static const ib_host_inflight_ops send_only = {.send = on_send};
    ib__host_inflight_begin(&f, batch, 1, 10000);
    assert_true(ib__host_inflight_keep(&f, 10500, 500, &last, &send_only, &p));
    assert_int_equal(p.sends, 5);
    assert_int_equal(p.renewals, 2);
    ib__host_inflight_end(&f);
    probe_destroy(&p);
    ib__host_inflight_destroy(&f);
}

typedef struct ender {
    ib_host_inflight *f;
    atomic_int ended;
    sem_t done;
} ender;

static void *end_batch(void *arg)
{
    ender *e = arg;
    ib__host_inflight_end(e->f);
    atomic_store(&e->ended, 1);
    sem_post(&e->done);
    return NULL;
}

/* The batch thread's end waits while +WPI is being sent for its messages
 * (it destroys them next, and a +WPI after its nak would replace the
 * nak's delay). The check that end has not returned while the send is
 * held waits 200 ms: a wrong end could pass on a machine too slow to run
 * it in that time, a right one never fails. */
static void end_waits_for_the_send_in_progress(void **state)
{
    (void)state;
    ib_host_inflight f;
    probe p;
    ender e = {.f = &f};
    ib__host_inflight_init(&f);
    probe_init(&p, &f);
    sem_init(&e.done, 0, 0);
    atomic_init(&e.ended, 0);
    p.block_send = true;
    natsMsg *batch[1] = {MSG(0)};
    ib__host_inflight_begin(&f, batch, 1, 0);

    pthread_t control, batcher;
    assert_int_equal(pthread_create(&control, NULL, control_once, &p), 0);
    sem_wait(&p.sending);
    assert_int_equal(pthread_create(&batcher, NULL, end_batch, &e), 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc;
    while ((rc = sem_timedwait(&e.done, &ts)) != 0 && errno == EINTR)
        ;
    assert_int_not_equal(rc, 0);
    assert_int_equal(atomic_load(&e.ended), 0);
    sem_post(&p.may_finish);
    pthread_join(control, NULL);
    pthread_join(batcher, NULL);
    assert_int_equal(atomic_load(&e.ended), 1);
    assert_int_equal(p.sends, 1);
    assert_int_equal(p.renewals, 1);
    sem_destroy(&e.done);
    probe_destroy(&p);
    ib__host_inflight_destroy(&f);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(renewal_runs_without_the_lock),
    cmocka_unit_test(sends_when_due_and_only_while_in_flight),
    cmocka_unit_test(end_waits_for_the_send_in_progress),
};

IB_TEST_MAIN(tests)
