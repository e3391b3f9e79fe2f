/* SPDX-License-Identifier: Apache-2.0 */
/* Back-off values, handler concurrency and the group commit at scale. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "ib_test.h"

#define TYPE "order.created"

/* ---- back-off ---------------------------------------------------------- */

static void backoff_bounded_growing_capped(void **state)
{
    (void)state;
    ib_dispatch_options o = {.nak_base_delay_ms = 100, .nak_max_delay_ms = 5000};
    int64_t prev_max = 0;
    size_t samples = fx_scale(500, 100);

    for (uint64_t dc = 1; dc <= 12; dc++) {
        int64_t raw = 100;
        for (uint64_t k = 1; k < dc && raw < 5000; k++)
            raw *= 2;
        if (raw > 5000)
            raw = 5000;
        int64_t lo = INT64_MAX, hi = 0;
        for (size_t i = 0; i < samples; i++) {
            int64_t v = ib_dispatch_backoff_ms(&o, dc);
            assert_true(v >= raw * 8 / 10);
            assert_true(v <= raw * 12 / 10);
            assert_true(v <= 5000);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        /* jitter spreads the values */
        assert_true(hi > lo);
        /* growing until the cap: the smallest of one step beats the largest
         * of the step before */
        if (raw < 5000)
            assert_true(lo > prev_max);
        else
            assert_true(hi <= 5000 && lo >= 4000);
        prev_max = hi;
    }
    /* no overflow on absurd counts; 0 is taken as 1 */
    int64_t v = ib_dispatch_backoff_ms(&o, UINT64_MAX);
    assert_true(v >= 4000 && v <= 5000);
    v = ib_dispatch_backoff_ms(&o, 0);
    assert_true(v >= 80 && v <= 120);
}

static void backoff_defaults(void **state)
{
    (void)state;
    int64_t v = ib_dispatch_backoff_ms(NULL, 1);
    assert_true(v >= IB_DISPATCH_DEFAULT_NAK_BASE_MS * 8 / 10);
    assert_true(v <= IB_DISPATCH_DEFAULT_NAK_BASE_MS * 12 / 10);
    v = ib_dispatch_backoff_ms(NULL, 40);
    assert_true(v <= IB_DISPATCH_DEFAULT_NAK_MAX_MS);
    assert_true(v >= IB_DISPATCH_DEFAULT_NAK_MAX_MS * 8 / 10);
    /* a cap below the base is raised to the base */
    ib_dispatch_options o = {.nak_base_delay_ms = 2000, .nak_max_delay_ms = 500};
    v = ib_dispatch_backoff_ms(&o, 3);
    assert_true(v >= 1600 && v <= 2000);
    /* a tiny base never gives 0 (which would be an immediate redelivery) */
    o = (ib_dispatch_options){.nak_base_delay_ms = 1, .nak_max_delay_ms = 1};
    for (int i = 0; i < 100; i++)
        assert_int_equal(ib_dispatch_backoff_ms(&o, 1), 1);
}

typedef struct draw_ctx {
    size_t n;
    int64_t lo, hi;
} draw_ctx;

static void *draw_many(void *arg)
{
    draw_ctx *c = arg;
    ib_dispatch_options o = {.nak_base_delay_ms = 1000, .nak_max_delay_ms = 60000};
    c->lo = INT64_MAX;
    c->hi = 0;
    for (size_t i = 0; i < c->n; i++) {
        int64_t v = ib_dispatch_backoff_ms(&o, 1);
        c->lo = v < c->lo ? v : c->lo;
        c->hi = v > c->hi ? v : c->hi;
    }
    return NULL;
}

/* The PRNG is shared by every thread without a lock. */
static void backoff_thread_safe(void **state)
{
    (void)state;
    pthread_t t[8];
    draw_ctx c[8];
    for (int i = 0; i < 8; i++) {
        c[i].n = fx_scale(20000, 1000);
        assert_int_equal(pthread_create(&t[i], NULL, draw_many, &c[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_true(c[i].lo >= 800);
        assert_true(c[i].hi <= 1200);
        assert_true(c[i].hi > c[i].lo);
    }
}

/* ---- concurrency ------------------------------------------------------- */

/* A barrier with a deadline, so a dispatch that does not run handlers in
 * parallel fails the test instead of hanging it. */
typedef struct meet {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned arrived, expected;
    struct timespec deadline; /* one for all calls: a serial run fails in one wait */
    atomic_int calls;
} meet;

static ib_verdict meet_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                              const ib_raw_event *ev)
{
    meet *m = state;
    bool met = true;
    (void)payload;
    (void)len;
    (void)bus;
    (void)ev;
    atomic_fetch_add(&m->calls, 1);
    pthread_mutex_lock(&m->mu);
    if (++m->arrived >= m->expected)
        pthread_cond_broadcast(&m->cv);
    while (m->arrived < m->expected && met)
        met = pthread_cond_timedwait(&m->cv, &m->mu, &m->deadline) != ETIMEDOUT;
    met = m->arrived >= m->expected;
    pthread_mutex_unlock(&m->mu);
    return met ? IB_HANDLER_OK : IB_HANDLER_RETRY;
}

/* Eight handler calls that can only all finish if all eight run at once. */
static void eight_threads_run_in_parallel(fx *f)
{
    meet m = {.expected = 8};
    ib_event ev[8];
    ib_delivery dl[8];
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 8;
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    atomic_init(&m.calls, 0);
    clock_gettime(CLOCK_REALTIME, &m.deadline);
    m.deadline.tv_sec += 20;
    fx_dispatch(f, &o);
    const char *types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = "c/p/meet", .event_types = types, .handle = meet_handle, .state = &m};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    for (unsigned i = 0; i < 8; i++) {
        fx_event(&ev[i], 100 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }

    assert_int_equal(ib_dispatch_run(f->d, dl, 8, NULL, NULL), IB_OK);
    assert_int_equal(atomic_load(&m.calls), 8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
        assert_int_equal(dl[i].counts.handled, 1);
        assert_true(fx_marked(f, "c/p/meet", ev[i].id));
    }
    assert_int_equal(atomic_load(&f->calls->mark_batch), 1);
    pthread_cond_destroy(&m.cv);
    pthread_mutex_destroy(&m.mu);
}

/* concurrency 0 and 1: every handler call on the caller's thread, with
 * no hand-off to another */
static void one_thread_runs_on_caller(fx *f)
{
    for (unsigned conc = 0; conc <= 1; conc++) {
        fx_handler h;
        ib_event ev[50];
        ib_delivery dl[50];
        ib_dispatch_options o = fx_default_options();
        o.concurrency = conc;
        fx_handler_init(&h, IB_HANDLER_OK);
        fx_dispatch(f, &o);
        fx_add(f, "c/p/h", TYPE, &h);
        for (unsigned i = 0; i < 50; i++) {
            fx_event(&ev[i], 200 + 50 * conc + i, TYPE);
            fx_delivery(&dl[i], &ev[i], 1);
        }
        assert_int_equal(ib_dispatch_run(f->d, dl, 50, NULL, NULL), IB_OK);
        assert_int_equal(atomic_load(&h.calls), 50);
        assert_false(atomic_load(&h.other_thread));
        assert_true(pthread_equal(h.thread, pthread_self()));
        for (int i = 0; i < 50; i++)
            assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
        ib_dispatch_free(f->d);
        f->d = NULL;
        fx_handler_destroy(&h);
    }
}

/* A verdict per event, so one batch mixes every path. */
typedef struct mixed {
    atomic_int calls;
    atomic_int ok_calls;
} mixed;

static unsigned id_number(const char *id)
{
    return (unsigned)strtoul((char[9]){id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7], 0},
                             NULL, 16);
}

static ib_verdict mixed_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                               const ib_raw_event *ev)
{
    mixed *m = state;
    (void)payload;
    (void)len;
    (void)bus;
    atomic_fetch_add(&m->calls, 1);
    switch (id_number(ib_raw_event_id(ev)) % 5) {
    case 0:
        return IB_HANDLER_RETRY;
    case 1:
        return IB_HANDLER_REJECT;
    default:
        atomic_fetch_add(&m->ok_calls, 1);
        return IB_HANDLER_OK;
    }
}

/* Three handlers per event, intra-batch copies and every verdict, on a
 * pool of 4: outcomes and markers are what the serial rules say. */
static void pool_mixed_batch(fx *f)
{
    size_t n = fx_scale(2000, 300);
    ib_event *ev = calloc(n, sizeof(*ev));
    ib_delivery *dl = calloc(n, sizeof(*dl));
    fx_handler plain;
    mixed mx[2];
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 4;
    o.commit_interval_ms = 600000; /* one commit: the count below is exact */
    assert_non_null(ev);
    assert_non_null(dl);
    fx_handler_init(&plain, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/plain", TYPE, &plain);
    const char *types[] = {TYPE, NULL};
    for (int k = 0; k < 2; k++) {
        char consumer[16];
        snprintf(consumer, sizeof(consumer), "c/p/mixed%d", k);
        atomic_init(&mx[k].calls, 0);
        atomic_init(&mx[k].ok_calls, 0);
        ib_dispatch_handler hd = {
            .consumer = consumer, .event_types = types, .handle = mixed_handle, .state = &mx[k]};
        assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    }
    /* every fourth delivery repeats the event before it */
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 4 == 3) {
            ev[i] = ev[i - 1];
        } else {
            fx_event(&ev[i], 1000 + (unsigned)i, TYPE);
            distinct++;
        }
        fx_delivery(&dl[i], &ev[i], 1);
    }

    assert_int_equal(ib_dispatch_run(f->d, dl, n, NULL, NULL), IB_OK);
    assert_int_equal(atomic_load(&plain.calls), (int)distinct);
    assert_int_equal(atomic_load(&mx[0].calls), (int)distinct);
    assert_int_equal(atomic_load(&mx[1].calls), (int)distinct);
    assert_false(pthread_equal(plain.thread, pthread_self()));
    for (size_t i = 0; i < n; i++) {
        unsigned r = id_number(ev[i].id) % 5;
        bool copy = i % 4 == 3;
        const ib_delivery_counts *c = &dl[i].counts;
        assert_true(fx_marked(f, "c/p/plain", ev[i].id));
        if (r == 0) {
            assert_int_equal(dl[i].outcome, IB_OUTCOME_NAK);
            assert_int_equal(copy ? c->coalesced : c->retried, 2);
        } else if (r == 1) {
            assert_int_equal(dl[i].outcome, IB_OUTCOME_DEAD_LETTER);
            assert_string_equal(ib_dead_letter_reason_str(dl[i].dead_letter_reason), "rejected");
            assert_int_equal(copy ? c->coalesced : c->rejected, 2);
        } else {
            assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
            assert_true(fx_marked(f, "c/p/mixed0", ev[i].id));
            assert_true(fx_marked(f, "c/p/mixed1", ev[i].id));
        }
        assert_int_equal(copy ? c->duplicates : c->handled, r <= 1 ? 1 : 3);
        if (r <= 1)
            assert_false(fx_marked(f, "c/p/mixed0", ev[i].id));
    }
    assert_int_equal(atomic_load(&f->calls->claim_batch), 1);
    assert_int_equal(atomic_load(&f->calls->mark_batch), 1);
    assert_int_equal(atomic_load(&f->calls->release_batch), 1);
    fx_handler_destroy(&plain);
    free(ev);
    free(dl);
}

/* ---- group commit at scale --------------------------------------------- */

/* Two batches of 10,000 events: every event marked, with one claim call and
 * one mark call (one transaction) per ib_dispatch_run() when the commit
 * window is longer than the batch. */
static void one_mark_call_per_batch(fx *f)
{
    ib_dispatch_options o = fx_default_options();
    o.commit_interval_ms = 600000;
    size_t n = fx_scale(10000, 1000);
    ib_event *ev = calloc(n, sizeof(*ev));
    ib_delivery *dl = calloc(n, sizeof(*dl));
    ib_marker_key *keys = calloc(n, sizeof(*keys));
    bool *done = calloc(n, sizeof(*done));
    fx_handler h;
    assert_true(ev != NULL && dl != NULL && keys != NULL && done != NULL);
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);

    for (int batch = 0; batch < 2; batch++) {
        for (size_t i = 0; i < n; i++) {
            fx_event(&ev[i], (unsigned)(batch * n + i), TYPE);
            fx_delivery(&dl[i], &ev[i], 1);
            keys[i] = (ib_marker_key){"c/p/h", ev[i].id};
        }
        assert_int_equal(ib_dispatch_run(f->d, dl, n, NULL, NULL), IB_OK);
        assert_int_equal(atomic_load(&f->calls->mark_batch), batch + 1);
        assert_int_equal(atomic_load(&f->calls->claim_batch), batch + 1);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
        assert_int_equal(ib_recorder_check_batch(f->inner, done, keys, n, NULL), IB_OK);
        for (size_t i = 0; i < n; i++)
            assert_true(done[i]);
    }
    assert_int_equal(atomic_load(&h.calls), (int)(2 * n));
    fx_handler_destroy(&h);
    free(done);
    free(keys);
    free(dl);
    free(ev);
}

/* A handler that outlives its lease: with ib_dispatch_extend_leases called
 * meanwhile (as the host's control thread does), another owner finds the
 * claim busy once the run thread has renewed it; without it, the other
 * owner takes the claim over. */
typedef struct lease_probe {
    fx *f;
    bool extend;
    size_t extended, lost;
    ib_claim_state other; /* what another owner's claim got mid-handler */
} lease_probe;

static ib_verdict lease_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                               const ib_raw_event *ev)
{
    lease_probe *p = state;
    (void)payload;
    (void)len;
    (void)bus;
    fx_clock_set(fx_clock_now() + 5000); /* the 1 s lease has run out */
    /* a request: the call returns at once, and a later one tells what the
     * run thread did */
    p->extended = 0;
    p->lost = 0;
    for (int i = 0; p->extend && i < 20000 && p->extended + p->lost == 0; i++) {
        size_t extended = 0, lost = 0;
        assert_int_equal(ib_dispatch_extend_leases(p->f->d, &extended, &lost, NULL), IB_OK);
        p->extended += extended;
        p->lost += lost;
        if (p->extended + p->lost == 0)
            usleep(1000);
    }
    assert_int_equal(
        ib_recorder_claim(p->f->rec, &p->other, ev->consumer, ev->id, "other-owner", 60000, NULL),
        IB_OK);
    return IB_HANDLER_OK;
}

static void long_handler_keeps_its_lease(fx *f)
{
    lease_probe p = {.f = f, .extend = true};
    ib_event ev[2];
    ib_delivery dl[2];
    size_t extended = 7, lost = 7;
    ib_dispatch_options o = fx_default_options();
    o.lease_ms = 1000;
    fx_dispatch(f, &o);
    const char *types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = "c/p/slow", .event_types = types, .handle = lease_handle, .state = &p};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    /* between batches there is nothing to extend */
    assert_int_equal(ib_dispatch_extend_leases(f->d, &extended, &lost, NULL), IB_OK);
    assert_int_equal(extended, 0);
    assert_int_equal(lost, 0);

    fx_event(&ev[0], 900, TYPE);
    fx_delivery(&dl[0], &ev[0], 1);
    assert_int_equal(ib_dispatch_run(f->d, dl, 1, NULL, NULL), IB_OK);
    /* a request made while the stand-in's answer to the one before was on
     * its way renews again: the one claim may be counted twice */
    assert_true(p.extended >= 1);
    assert_int_equal(p.lost, 0);
    assert_int_equal(p.other, IB_CLAIM_BUSY);
    assert_int_equal(dl[0].outcome, IB_OUTCOME_ACK);

    /* control: without the extension the other owner takes it over */
    p.extend = false;
    fx_event(&ev[1], 901, TYPE);
    fx_delivery(&dl[1], &ev[1], 1);
    assert_int_equal(ib_dispatch_run(f->d, &dl[1], 1, NULL, NULL), IB_OK);
    assert_int_equal(p.other, IB_CLAIM_ACQUIRED);
}

/* A lease renewal that waits for the store (another process's
 * transaction) does not hold up the thread that asked for it: the control
 * thread posts the request and returns, the run thread does the writing
 * while the handler runs, and the asker learns what it did at its next
 * call. */
typedef struct slow_renewal {
    fx *f;
    pthread_t renewer;
    ib_status renewed;
    size_t extended, lost;
    atomic_bool asked;           /* the renewer's call returned */
    bool returned_while_blocked; /* ... while the store held the renewal up */
} slow_renewal;

static void *renew_main(void *arg)
{
    slow_renewal *s = arg;
    s->renewed = ib_dispatch_extend_leases(s->f->d, &s->extended, &s->lost, NULL);
    atomic_store(&s->asked, true);
    return NULL;
}

/* The handler makes the store hold renewals up, asks for one from another
 * thread, and returns OK once that thread's call has returned and the
 * renewal waits in the store; then lets the store go. */
static ib_verdict renewing_handle(void *state, const uint8_t *payload, size_t len,
                                  ib_bus_proxy *bus, const ib_raw_event *ev)
{
    slow_renewal *s = state;
    (void)payload;
    (void)len;
    (void)bus;
    (void)ev;
    atomic_store(&s->f->calls->block_renew, true);
    assert_int_equal(pthread_create(&s->renewer, NULL, renew_main, s), 0);
    /* 20 s is far beyond what one request takes */
    for (int i = 0;
         i < 20000 && !(atomic_load(&s->asked) && atomic_load(&s->f->calls->renew_blocked)); i++)
        usleep(1000);
    s->returned_while_blocked = atomic_load(&s->asked) && atomic_load(&s->f->calls->renew_blocked);
    atomic_store(&s->f->calls->block_renew, false);
    return IB_HANDLER_OK;
}

static void renewal_request_returns_at_once(fx *f)
{
    slow_renewal s = {.f = f};
    ib_event ev;
    ib_delivery dl;
    fx_dispatch(f, NULL);
    const char *types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = "c/p/renew", .event_types = types, .handle = renewing_handle, .state = &s};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    fx_event(&ev, 950, TYPE);
    fx_delivery(&dl, &ev, 1);
    assert_int_equal(ib_dispatch_run(f->d, &dl, 1, NULL, NULL), IB_OK);
    pthread_join(s.renewer, NULL);
    assert_true(s.returned_while_blocked);
    assert_true(atomic_load(&f->calls->renew_blocked));
    assert_int_equal(s.renewed, IB_OK);
    /* asked before anything was done: nothing to tell yet */
    assert_int_equal(s.extended, 0);
    assert_int_equal(s.lost, 0);
    /* the run thread's answer waits for the next call */
    size_t extended = 0, lost = 0;
    assert_int_equal(ib_dispatch_extend_leases(f->d, &extended, &lost, NULL), IB_OK);
    assert_int_equal(extended, 1);
    assert_int_equal(lost, 0);
    assert_int_equal(dl.outcome, IB_OUTCOME_ACK);
    assert_true(fx_marked(f, "c/p/renew", ev.id));
}

/* ---- the completion queue, seen from a batch ------------------------------ */

/* A handler call held until the test lets it go: the test sees it enter,
 * and knows the thread it runs on. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    atomic_int entered;
    atomic_int returned;
    const char *fast_id; /* this event's call does not wait (NULL: none) */
    pthread_t thread;    /* of the last call that waited */
} gate;

static void gate_init(gate *g)
{
    memset(g, 0, sizeof(*g));
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_destroy(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static ib_verdict gate_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                              const ib_raw_event *ev)
{
    gate *g = state;
    (void)payload;
    (void)len;
    (void)bus;
    if (g->fast_id != NULL && strcmp(ev->id, g->fast_id) == 0) {
        atomic_fetch_add(&g->returned, 1);
        return IB_HANDLER_OK;
    }
    pthread_mutex_lock(&g->mu);
    g->thread = pthread_self();
    atomic_fetch_add(&g->entered, 1);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->returned, 1);
    return IB_HANDLER_OK;
}

typedef struct run_args {
    fx *f;
    ib_delivery *dl;
    size_t n;
    atomic_bool done;
} run_args;

static void *run_main(void *arg)
{
    run_args *a = arg;
    assert_int_equal(ib_dispatch_run(a->f->d, a->dl, a->n, NULL, NULL), IB_OK);
    atomic_store(&a->done, true);
    return NULL;
}

/* Waits up to 10 s for `*v` to reach `want`. */
static bool wait_for(atomic_int *v, int want)
{
    for (int i = 0; i < 10000 && atomic_load(v) < want; i++)
        usleep(1000);
    return atomic_load(v) >= want;
}

/* A batch of two calls of the gated handler, run by its own thread: the
 * first event's call returns at once, the second waits at the gate. */
typedef struct gated_pair {
    gate g;
    ib_event ev[2];
    ib_delivery dl[2];
    run_args a;
    pthread_t batch;
} gated_pair;

/* Makes the dispatcher with `o`, starts the batch (ids from `base`) and
 * returns once the first call has returned and the second waits. */
static void gated_pair_start(fx *f, gated_pair *p, const ib_dispatch_options *o, unsigned base)
{
    gate_init(&p->g);
    fx_dispatch(f, o);
    const char *types[] = {TYPE, NULL};
    ib_dispatch_handler hd = {
        .consumer = "c/p/gate", .event_types = types, .handle = gate_handle, .state = &p->g};
    assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
    for (unsigned i = 0; i < 2; i++) {
        fx_event(&p->ev[i], base + i, TYPE);
        fx_delivery(&p->dl[i], &p->ev[i], 1);
    }
    p->g.fast_id = p->ev[0].id;
    p->a = (run_args){.f = f, .dl = p->dl, .n = 2};
    assert_int_equal(pthread_create(&p->batch, NULL, run_main, &p->a), 0);
    assert_true(wait_for(&p->g.entered, 1));
    assert_true(wait_for(&p->g.returned, 1));
}

/* Opens the gate and waits for the batch to end. */
static void gated_pair_finish(gated_pair *p)
{
    gate_open(&p->g);
    pthread_join(p->batch, NULL);
}

/* Frees the dispatcher and the gate. */
static void gated_pair_free(fx *f, gated_pair *p)
{
    ib_dispatch_free(f->d);
    f->d = NULL;
    gate_destroy(&p->g);
}

/* A renewal asked for while a handler call runs (one that only the test
 * can end) is done before that call returns, never by the asker: with
 * several workers by the run thread (the call runs on a worker); with one
 * (the call runs on the run thread) by the stand-in. */
static void renewal_done_during_a_long_call(fx *f)
{
    const unsigned conc[] = {1, 4};
    for (unsigned k = 0; k < 2; k++) {
        gated_pair p;
        ib_dispatch_options o = fx_default_options();
        o.concurrency = conc[k]; /* two calls, so that four workers share them */
        gated_pair_start(f, &p, &o, 1000 + 2 * k);

        int renewals = atomic_load(&f->calls->renew_batch);
        size_t extended = 0, lost = 0;
        for (int i = 0; i < 10000 && extended == 0; i++) {
            size_t e = 0, l = 0;
            assert_int_equal(ib_dispatch_extend_leases(f->d, &e, &l, NULL), IB_OK);
            extended += e;
            lost += l;
            if (extended == 0)
                usleep(1000);
        }
        /* still in the call: the renewal did not wait for it (a request made
         * while the answer to the one before was on its way renews again:
         * the one claim may be counted twice) */
        assert_int_equal(atomic_load(&p.g.returned), 1);
        assert_true(extended >= 1);
        assert_int_equal(lost, 0);
        assert_true(atomic_load(&f->calls->renew_batch) > renewals);
        assert_false(pthread_equal(atomic_load(&f->calls->renew_thread), pthread_self()));
        if (conc[k] == 1) {
            assert_true(pthread_equal(p.g.thread, p.batch));
            assert_false(pthread_equal(atomic_load(&f->calls->renew_thread), p.batch));
        } else {
            assert_false(pthread_equal(p.g.thread, p.batch));
            assert_true(pthread_equal(atomic_load(&f->calls->renew_thread), p.batch));
        }

        gated_pair_finish(&p);
        for (unsigned i = 0; i < 2; i++) {
            assert_int_equal(p.dl[i].outcome, IB_OUTCOME_ACK);
            assert_true(fx_marked(f, "c/p/gate", p.ev[i].id));
        }
        gated_pair_free(f, &p);
    }
}

/* A flush asked for while one call of the batch runs on makes the marks
 * of the calls that returned durable at once, although the commit window
 * (ten minutes) is far from over. */
static void flush_during_a_long_call(fx *f, unsigned concurrency, unsigned base)
{
    gated_pair p;
    ib_dispatch_options o = fx_default_options();
    o.concurrency = concurrency;
    gated_pair_start(f, &p, &o, base);
    assert_false(fx_marked(f, "c/p/gate", p.ev[0].id));

    size_t marked = 0;
    for (int i = 0; i < 10000 && marked == 0; i++) {
        size_t m = 0;
        assert_int_equal(ib_dispatch_flush_marks(f->d, &m, NULL), IB_OK);
        marked += m;
        if (marked == 0)
            usleep(1000);
    }
    assert_int_equal(marked, 1);
    assert_true(fx_marked(f, "c/p/gate", p.ev[0].id));
    assert_false(fx_marked(f, "c/p/gate", p.ev[1].id));
    assert_int_equal(atomic_load(&p.g.returned), 1); /* the other call runs on */

    gated_pair_finish(&p);
    for (unsigned i = 0; i < 2; i++)
        assert_int_equal(p.dl[i].outcome, IB_OUTCOME_ACK);
    assert_true(fx_marked(f, "c/p/gate", p.ev[1].id));
    gated_pair_free(f, &p);
}

/* With two workers the run thread flushes while a worker is in the
 * call; with one, the call runs on the run thread (the first event's
 * quick call made the handler quick, so the second call is not preceded
 * by a commit) and the stand-in flushes. */
static void flush_done_during_a_long_call(fx *f)
{
    flush_during_a_long_call(f, 2, 1010);
    flush_during_a_long_call(f, 1, 1020);
}

/* What the health callback heard, and on which thread. */
typedef struct health_probe {
    atomic_int down, up;
    pthread_t thread;
} health_probe;

static void note_recorder(void *ctx, bool healthy, const ib_error *e)
{
    health_probe *h = ctx;
    (void)e;
    h->thread = pthread_self();
    atomic_fetch_add(healthy ? &h->up : &h->down, 1);
}

/* With one worker the stand-in flushes while the run thread is in a
 * call; when that commit fails, the asker hears of it at once, and the
 * health callback on the batch's thread once it is back (never on the
 * stand-in's); the marks land when the store does. */
static void stand_in_failure_told_on_the_batch_thread(fx *f)
{
    gated_pair p;
    health_probe h = {0};
    ib_dispatch_options o = fx_default_options();
    o.concurrency = 1;
    o.observer_ctx = &h;
    o.on_recorder = note_recorder;
    gated_pair_start(f, &p, &o, 1030);

    atomic_store(&f->calls->fail_mark, true);
    ib_status st = IB_OK;
    for (int i = 0; i < 10000 && st == IB_OK; i++) {
        size_t m = 0;
        st = ib_dispatch_flush_marks(f->d, &m, NULL);
        assert_int_equal(m, 0);
        if (st == IB_OK)
            usleep(1000);
    }
    assert_int_equal(st, IB_ERR_RECORDER);
    assert_int_equal(atomic_load(&h.down), 0); /* the batch thread is in the call */
    assert_false(fx_marked(f, "c/p/gate", p.ev[0].id));

    atomic_store(&f->calls->fail_mark, false);
    gated_pair_finish(&p);
    assert_true(atomic_load(&h.down) >= 1);
    assert_int_equal(atomic_load(&h.up), 1);
    assert_true(pthread_equal(h.thread, p.batch));
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(p.dl[i].outcome, IB_OUTCOME_ACK);
        assert_true(fx_marked(f, "c/p/gate", p.ev[i].id));
    }
    gated_pair_free(f, &p);
}

/* Calls that take a few ms each, counted as they start. */
static atomic_int paced_started;

static ib_verdict paced_handle(void *state, const uint8_t *payload, size_t len, ib_bus_proxy *bus,
                               const ib_raw_event *ev)
{
    (void)state;
    (void)payload;
    (void)len;
    (void)bus;
    (void)ev;
    atomic_fetch_add(&paced_started, 1);
    usleep(5000);
    return IB_HANDLER_OK;
}

#define PACED 16

/* While a commit fails, no call starts (the pool is held, or the next
 * call made alone waits), and the run thread does not spin: it tries the
 * commit again when its back-off ends. Once the store takes the marks
 * again, the rest of the batch runs and every event is acked. */
static void failing_commit_holds_the_calls(fx *f)
{
    const unsigned conc[] = {1, 2};
    for (unsigned k = 0; k < 2; k++) {
        ib_event ev[PACED];
        ib_delivery dl[PACED];
        ib_dispatch_options o = fx_default_options();
        o.concurrency = conc[k];
        o.commit_interval_ms = 1;
        fx_dispatch(f, &o);
        const char *types[] = {TYPE, NULL};
        ib_dispatch_handler hd = {
            .consumer = "c/p/paced", .event_types = types, .handle = paced_handle};
        assert_int_equal(ib_dispatch_add(f->d, &hd, NULL), IB_OK);
        for (unsigned i = 0; i < PACED; i++) {
            fx_event(&ev[i], 1100 + PACED * k + i, TYPE);
            fx_delivery(&dl[i], &ev[i], 1);
        }
        atomic_store(&paced_started, 0);
        atomic_store(&f->calls->mark_batch, 0);
        atomic_store(&f->calls->fail_mark, true);
        run_args a = {.f = f, .dl = dl, .n = PACED};
        pthread_t batch;
        assert_int_equal(pthread_create(&batch, NULL, run_main, &a), 0);
        assert_true(wait_for(&f->calls->mark_batch, 1)); /* a commit failed */
        usleep(50000); /* the calls under way at the failure end */
        int held_at = atomic_load(&paced_started);
        int tries = atomic_load(&f->calls->mark_batch);
        usleep(300000);
        assert_int_equal(atomic_load(&paced_started), held_at);
        assert_true(held_at < PACED);
        /* back-off, not a spin: 50, 100, 200 ms... */
        assert_true(atomic_load(&f->calls->mark_batch) - tries <= 4);
        assert_false(atomic_load(&a.done));

        atomic_store(&f->calls->fail_mark, false);
        pthread_join(batch, NULL);
        assert_int_equal(atomic_load(&paced_started), PACED);
        for (unsigned i = 0; i < PACED; i++) {
            assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
            assert_true(fx_marked(f, "c/p/paced", ev[i].id));
        }
        ib_dispatch_free(f->d);
        f->d = NULL;
    }
}

BOTH_KINDS(eight_threads_run_in_parallel)
BOTH_KINDS(one_thread_runs_on_caller)
BOTH_KINDS(pool_mixed_batch)
/* A claim that waits longer than the commit interval (for the file's
 * turn) makes no mark wait: the interval counts from the claim's write, so
 * fast inline calls still share one mark transaction. Counted from before
 * the claim, the first call's mark was committed alone. */
static void slow_claim_keeps_one_mark_call(fx *f)
{
    ib_dispatch_options o = fx_default_options();
    o.commit_interval_ms = 100;
    ib_event ev[4];
    ib_delivery dl[4];
    fx_handler h;
    fx_handler_init(&h, IB_HANDLER_OK);
    fx_dispatch(f, &o);
    fx_add(f, "c/p/h", TYPE, &h);
    for (unsigned i = 0; i < 4; i++) {
        fx_event(&ev[i], 970 + i, TYPE);
        fx_delivery(&dl[i], &ev[i], 1);
    }
    atomic_store(&f->calls->claim_delay_ms, 300);
    assert_int_equal(ib_dispatch_run(f->d, dl, 4, NULL, NULL), IB_OK);
    assert_int_equal(atomic_load(&f->calls->claim_batch), 1);
    assert_int_equal(atomic_load(&f->calls->mark_batch), 1);
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(dl[i].outcome, IB_OUTCOME_ACK);
    assert_int_equal(atomic_load(&h.calls), 4);
}

BOTH_KINDS(one_mark_call_per_batch)
BOTH_KINDS(long_handler_keeps_its_lease)
BOTH_KINDS(renewal_request_returns_at_once)
BOTH_KINDS(slow_claim_keeps_one_mark_call)
BOTH_KINDS(renewal_done_during_a_long_call)
BOTH_KINDS(flush_done_during_a_long_call)
BOTH_KINDS(failing_commit_holds_the_calls)
BOTH_KINDS(stand_in_failure_told_on_the_batch_thread)

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(backoff_bounded_growing_capped),
    cmocka_unit_test(backoff_defaults),
    cmocka_unit_test(backoff_thread_safe),
    cmocka_unit_test(eight_threads_run_in_parallel_memory),
    cmocka_unit_test(eight_threads_run_in_parallel_sqlite),
    cmocka_unit_test(one_thread_runs_on_caller_memory),
    cmocka_unit_test(one_thread_runs_on_caller_sqlite),
    cmocka_unit_test(pool_mixed_batch_memory),
    cmocka_unit_test(pool_mixed_batch_sqlite),
    cmocka_unit_test(one_mark_call_per_batch_memory),
    cmocka_unit_test(one_mark_call_per_batch_sqlite),
    cmocka_unit_test(long_handler_keeps_its_lease_memory),
    cmocka_unit_test(long_handler_keeps_its_lease_sqlite),
    cmocka_unit_test(renewal_request_returns_at_once_memory),
    cmocka_unit_test(renewal_request_returns_at_once_sqlite),
    cmocka_unit_test(slow_claim_keeps_one_mark_call_memory),
    cmocka_unit_test(slow_claim_keeps_one_mark_call_sqlite),
    cmocka_unit_test(renewal_done_during_a_long_call_memory),
    cmocka_unit_test(renewal_done_during_a_long_call_sqlite),
    cmocka_unit_test(flush_done_during_a_long_call_memory),
    cmocka_unit_test(flush_done_during_a_long_call_sqlite),
    cmocka_unit_test(failing_commit_holds_the_calls_memory),
    cmocka_unit_test(failing_commit_holds_the_calls_sqlite),
    cmocka_unit_test(stand_in_failure_told_on_the_batch_thread_memory),
    cmocka_unit_test(stand_in_failure_told_on_the_batch_thread_sqlite),
};

IB_TEST_MAIN(tests)
