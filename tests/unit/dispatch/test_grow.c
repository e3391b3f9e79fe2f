/* SPDX-License-Identifier: Apache-2.0 */
/* A batch that grows while its last calls run (ib_dispatch_run_more):
 * what it takes in is claimed and run like the batch's own, each key once
 * across the whole run (a later delivery of a key whose call is still
 * running follows it), a key taken over from a dead holder runs alone
 * after the others, a delivery the caller should not have given is
 * nak'ed unrun, and nothing grows with one worker. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "ib_test.h"

#define TYPE "order.created"
#define EVENTS 32 /* distinct events of grown_batch_runs_each_key_once */
#define ROOM 40   /* those, and 8 duplicates */
#define FIRST 8   /* deliveries the batch starts with */

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static unsigned id_number(const char *id)
{
    return (unsigned)strtoul((char[9]){id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], 0},
                             NULL, 16);
}

/* A handler that takes `sleep` ms, counts its calls per event number
 * (events 0..63 of fx_event), and notes how many calls ran beside each
 * one as it started and in which order calls started. A call of event
 * `gated` waits until `open` is set. */
typedef struct paced {
    atomic_int calls[64];
    atomic_int order[64]; /* start order of the call of each event, from 1 */
    atomic_int started;
    atomic_int in_flight;
    atomic_int beside[64]; /* other calls running as each started */
    long sleep;
    int gated;
    atomic_bool open;
} paced;

static ib_verdict paced_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                               const ib_raw_event *ev)
{
    (void)payload, (void)len, (void)bus;
    paced *p = state;
    unsigned n = id_number(ev->id) % 64;
    int beside = atomic_fetch_add(&p->in_flight, 1);
    atomic_store(&p->beside[n], beside);
    atomic_store(&p->order[n], atomic_fetch_add(&p->started, 1) + 1);
    atomic_fetch_add(&p->calls[n], 1);
    while ((int)n == p->gated && !atomic_load(&p->open))
        sleep_ms(1);
    sleep_ms(p->sleep);
    atomic_fetch_sub(&p->in_flight, 1);
    return IB_HANDLER_OK;
}

static void paced_add(fx *f, paced *p, long sleep, int gated)
{
    memset(p, 0, sizeof(*p));
    p->sleep = sleep;
    p->gated = gated;
    static const char *const types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = "c/p/h", .event_types = types, .handle = paced_handle, .state = p};
    ib_error e;
    assert_int_equal(ib_dispatch_add(f->d, &hd, &e), IB_OK);
}

/* The caller's side: the deliveries it hands the run a few at a time, as
 * the host hands what the puller has ready. */
typedef struct feeder {
    ib_delivery *all; /* every delivery, the first ones the batch's own */
    size_t given;     /* how many the run has (its own included) */
    size_t count;     /* how many there are */
    size_t step;      /* at most this many per take */
    int takes;
    int takes_beside_calls; /* takes while some call was running */
    paced *p;
} feeder;

static size_t feed(void *ctx, ib_delivery *room, size_t room_len)
{
    feeder *fd = ctx;
    assert_ptr_equal(room, fd->all + fd->given);
    size_t n = fd->count - fd->given;
    if (n > fd->step)
        n = fd->step;
    if (n > room_len)
        n = room_len;
    fd->takes++;
    fd->takes_beside_calls += atomic_load(&fd->p->in_flight) > 0;
    fd->given += n;
    return n;
}

static size_t run_grown(fx *f, feeder *fd, size_t first)
{
    ib_dispatch_more more = {.take = feed, .ctx = fd, .cap = fd->count};
    size_t ran = 0;
    ib_error e = {0};
    fd->given = first;
    assert_int_equal(ib_dispatch_run_more(f->d, fd->all, first, &more, &ran, NULL, &e), IB_OK);
    return ran;
}

/* 32 events and 8 duplicates (of events in earlier takes and of events in
 * the same take), 8 in the batch and 8 per take, 4 workers: every
 * delivery is run and acked, each event's handler once, and the run
 * took in more while calls still ran. */
static void grown_batch_runs_each_key_once(fx *f)
{
    static const unsigned dups[ROOM - EVENTS] = {2, 5, 9, 12, 17, 20, 25, 30};
    ib_event ev[EVENTS];
    ib_delivery dl[ROOM];
    paced p;
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 4;
    fx_dispatch(f, &o);
    paced_add(f, &p, 5, -1);
    for (unsigned i = 0; i < EVENTS; i++)
        fx_event(&ev[i], i, TYPE);
    /* the events in order, with a duplicate at every fourth place from
     * the first take on (9, 13, ..., 37) */
    size_t n = 0, next_event = 0, next_dup = 0;
    while (n < ROOM) {
        bool dup = n > FIRST && n % 4 == 1 && next_dup < ROOM - EVENTS;
        const ib_event *e = dup ? &ev[dups[next_dup++]] : &ev[next_event++];
        fx_delivery(&dl[n++], e, 1);
    }
    assert_int_equal(next_event, EVENTS);
    assert_int_equal(next_dup, ROOM - EVENTS);
    feeder fd = {.all = dl, .count = ROOM, .step = 8, .p = &p};

    assert_int_equal(run_grown(f, &fd, FIRST), ROOM);
    assert_true(fd.takes >= (ROOM - FIRST) / 8);
    assert_true(fd.takes_beside_calls >= 1);
    for (unsigned i = 0; i < EVENTS; i++) {
        assert_int_equal(atomic_load(&p.calls[i]), 1);
        assert_true(fx_marked(f, "c/p/h", ev[i].id));
    }
    unsigned handled = 0, duplicates = 0;
    for (size_t i = 0; i < ROOM; i++) {
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
        handled += dl[i].counts.handled;
        duplicates += dl[i].counts.duplicates;
    }
    assert_int_equal(handled, EVENTS);
    assert_int_equal(duplicates, ROOM - EVENTS);
}
BOTH_KINDS(grown_batch_runs_each_key_once)

/* Event 0's call is held while the run takes in another delivery of
 * event 0 (and a new event): the copy follows the running call, so the
 * handler runs once, and both deliveries are acked once its mark lands. */
typedef struct opener {
    paced *p;
    feeder *fd;
} opener;

static void *open_after_take(void *arg)
{
    opener *op = arg;
    while (op->fd->given < op->fd->count || atomic_load(&op->p->calls[3]) == 0)
        sleep_ms(1);
    atomic_store(&op->p->open, true);
    return NULL;
}

static void copy_of_a_running_call_follows_it(fx *f)
{
    ib_event ev[4];
    ib_delivery dl[5];
    paced p;
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 2;
    fx_dispatch(f, &o);
    paced_add(f, &p, 2, 0);
    for (unsigned i = 0; i < 4; i++)
        fx_event(&ev[i], i, TYPE);
    fx_delivery(&dl[0], &ev[0], 1);
    fx_delivery(&dl[1], &ev[1], 1);
    fx_delivery(&dl[2], &ev[2], 1);
    fx_delivery(&dl[3], &ev[0], 2); /* taken in while event 0's call is held */
    fx_delivery(&dl[4], &ev[3], 1);
    feeder fd = {.all = dl, .count = 5, .step = 2, .p = &p};
    opener op = {.p = &p, .fd = &fd};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_after_take, &op), 0);

    assert_int_equal(run_grown(f, &fd, 3), 5);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&p.calls[0]), 1);
    assert_int_equal(atomic_load(&p.calls[3]), 1);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
    assert_int_equal(dl[3].counts.handled, 0);
    assert_int_equal(dl[3].counts.duplicates, 1);
    assert_true(fx_marked(f, "c/p/h", ev[0].id));
}
BOTH_KINDS(copy_of_a_running_call_follows_it)

/* A key whose claim a dead holder left runs alone even when it comes in
 * a take: after every other call of the run, with none beside it, and it
 * is handled and marked (sqlite:, where attempts are durable and a claim
 * taken over means the holder may have died in that very call). */
static void taken_over_key_taken_in_runs_alone_last(void **state)
{
    (void)state;
    fx fxt, *f = &fxt;
    fx_open(f, "sqlite");
    ib_event ev[10];
    ib_delivery dl[10];
    paced p;
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 4;
    fx_dispatch(f, &o);
    paced_add(f, &p, 3, -1);
    for (unsigned i = 0; i < 10; i++) {
        fx_event(&ev[i], i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    ib_claim_state cs;
    assert_int_equal(ib_recorder_claim(f->inner, &cs, "c/p/h", ev[7].id, "crashed", 5000, NULL),
                     IB_OK);
    assert_int_equal(cs, IB_CLAIM_ACQUIRED);
    fx_clock_set(fx_clock_now() + 6000);
    feeder fd = {.all = dl, .count = 10, .step = 4, .p = &p};

    assert_int_equal(run_grown(f, &fd, 6), 10);
    for (unsigned i = 0; i < 10; i++) {
        assert_int_equal(atomic_load(&p.calls[i]), 1);
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
    }
    assert_int_equal(atomic_load(&p.order[7]), 10);
    assert_int_equal(atomic_load(&p.beside[7]), 0);
    assert_true(fx_marked(f, "c/p/h", ev[7].id));
    fx_close(f);
}

/* A delivery taken in that ib_dispatch_run would refuse (no event type)
 * is nak'ed and runs nothing; the others run as usual. */
static void refused_delivery_taken_in_is_nakd(fx *f)
{
    ib_event ev[4], bad;
    ib_delivery dl[5];
    paced p;
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 2;
    fx_dispatch(f, &o);
    paced_add(f, &p, 2, -1);
    for (unsigned i = 0; i < 4; i++)
        fx_event(&ev[i], i, TYPE);
    fx_event(&bad, 9, TYPE);
    bad.type = NULL;
    fx_delivery(&dl[0], &ev[0], 1);
    fx_delivery(&dl[1], &ev[1], 1);
    fx_delivery(&dl[2], &ev[2], 1);
    fx_delivery(&dl[3], &bad, 1);
    fx_delivery(&dl[4], &ev[3], 1);
    feeder fd = {.all = dl, .count = 5, .step = 2, .p = &p};

    assert_int_equal(run_grown(f, &fd, 3), 5);
    assert_int_equal(dl[3].outcome, IB_OUTCOME_NAK);
    assert_true(dl[3].nak_delay_ms > 0);
    assert_int_equal(atomic_load(&p.calls[9]), 0);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(atomic_load(&p.calls[i]), 1);
    assert_int_equal(dl[4].outcome, IB_OUTCOME_ACK);
}
BOTH_KINDS(refused_delivery_taken_in_is_nakd)

/* One worker (the caller's thread) never grows a batch; a cap below the
 * batch is refused before anything runs. */
static void one_worker_never_grows(fx *f)
{
    ib_event ev[6];
    ib_delivery dl[6];
    paced p;
    fx_dispatch(f, NULL);
    paced_add(f, &p, 0, -1);
    for (unsigned i = 0; i < 6; i++) {
        fx_event(&ev[i], i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    feeder fd = {.all = dl, .count = 6, .step = 3, .p = &p};
    assert_int_equal(run_grown(f, &fd, 3), 3);
    assert_int_equal(fd.takes, 0);
    assert_int_equal(atomic_load(&p.started), 3);

    ib_dispatch_more more = {.take = feed, .ctx = &fd, .cap = 2};
    size_t ran = 0;
    ib_error e = {0};
    assert_int_equal(ib_dispatch_run_more(f->d, dl + 3, 3, &more, &ran, NULL, &e),
                     IB_ERR_INVALID_ARG);
    assert_int_equal(atomic_load(&p.started), 3);
}
BOTH_KINDS(one_worker_never_grows)

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(grown_batch_runs_each_key_once_memory),
    cmocka_unit_test(grown_batch_runs_each_key_once_sqlite),
    cmocka_unit_test(copy_of_a_running_call_follows_it_memory),
    cmocka_unit_test(copy_of_a_running_call_follows_it_sqlite),
    cmocka_unit_test(taken_over_key_taken_in_runs_alone_last),
    cmocka_unit_test(refused_delivery_taken_in_is_nakd_memory),
    cmocka_unit_test(refused_delivery_taken_in_is_nakd_sqlite),
    cmocka_unit_test(one_worker_never_grows_memory),
    cmocka_unit_test(one_worker_never_grows_sqlite),
};

IB_TEST_MAIN(tests)
