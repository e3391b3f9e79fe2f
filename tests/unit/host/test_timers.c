/* SPDX-License-Identifier: Apache-2.0 */
/* The control loop's timers (host_timers.c), on a clock the test moves:
 * the order due timers run in, re-arming by the delay a callback returns,
 * deletion, one run per pass, nested passes, the nearest deadline the loop
 * sleeps for, and wake-ups from another thread. Assertions are on order
 * and counts; no test measures a duration. */
#include "ib_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "host_timers.h"

typedef struct fake_clock {
    int64_t now;
} fake_clock;

static int64_t read_fake(void *ctx)
{
    return ((fake_clock *)ctx)->now;
}

/* What the timers did, in order: one letter a run. */
static char trail[64];

static void note(char c)
{
    size_t n = strlen(trail);
    if (n + 1 < sizeof(trail))
        trail[n] = c;
}

typedef struct job {
    char name;
    int64_t next; /* what the callback returns */
    int runs;
    ib_timers *loop;
    struct job *nested_add; /* added by the callback, when set */
    bool nested_pass;       /* runs a pass of its own from inside */
    bool quits;
} job;

static int64_t run_job(void *ctx, int64_t now)
{
    (void)now;
    job *j = ctx;
    j->runs++;
    note(j->name);
    if (j->nested_add != NULL)
        ib__timers_add(j->loop, 0, run_job, j->nested_add);
    if (j->nested_pass)
        ib__timers_run_due(j->loop);
    if (j->quits)
        ib__timers_quit(j->loop);
    return j->next;
}

static ib_timers *new_loop(fake_clock *c)
{
    ib_timers *t = NULL;
    memset(trail, 0, sizeof(trail));
    assert_int_equal(ib__timers_new(&t, c != NULL ? read_fake : NULL, c), 0);
    return t;
}

/* Earliest deadline first, ties in the order added; each re-armed by the
 * delay it returns, counted from the clock when it returned; a timer that
 * returns IB_TIMER_NOMORE is gone. */
static void due_timers_run_in_deadline_order_and_rearm(void **state)
{
    (void)state;
    fake_clock c = {0};
    ib_timers *t = new_loop(&c);
    job a = {.name = 'A', .next = 10}, b = {.name = 'B', .next = 20},
        cc = {.name = 'C', .next = IB_TIMER_NOMORE};
    assert_true(ib__timers_add(t, 10, run_job, &a) > 0);
    assert_true(ib__timers_add(t, 5, run_job, &b) > 0);
    assert_true(ib__timers_add(t, 10, run_job, &cc) > 0);

    c.now = 4;
    assert_int_equal(ib__timers_run_due(t), 0);
    c.now = 5;
    assert_int_equal(ib__timers_run_due(t), 1); /* B, re-armed at 25 */
    c.now = 10;
    assert_int_equal(ib__timers_run_due(t), 2); /* A then C (added after A); C gone */
    c.now = 30;
    assert_int_equal(ib__timers_run_due(t), 2); /* A (due 20) before B (due 25) */
    assert_string_equal(trail, "BACAB");
    assert_int_equal(a.runs, 2);
    assert_int_equal(b.runs, 2);
    assert_int_equal(cc.runs, 1);
    /* A at 40, B at 50: C's slot is free and nothing else is due */
    c.now = 39;
    assert_int_equal(ib__timers_run_due(t), 0);
    assert_int_equal(ib__timers_nearest_ms(t, 39), 1);
    ib__timers_free(t);
}

/* The sleep the loop computes: none armed is for ever (-1), a deadline
 * passed is 0, otherwise the time to the nearest. */
static void nearest_deadline_is_what_the_loop_sleeps_for(void **state)
{
    (void)state;
    fake_clock c = {.now = 1000};
    ib_timers *t = new_loop(&c);
    job a = {.name = 'A', .next = 700}, b = {.name = 'B', .next = IB_TIMER_NOMORE};
    assert_int_equal(ib__timers_nearest_ms(t, 1000), -1);
    ib__timers_add(t, 500, run_job, &a);
    ib__timers_add(t, 200, run_job, &b);
    assert_int_equal(ib__timers_nearest_ms(t, 1000), 200);
    assert_int_equal(ib__timers_nearest_ms(t, 1150), 50);
    assert_int_equal(ib__timers_nearest_ms(t, 1300), 0);
    c.now = 1200;
    /* a step with a due timer does not sleep: it runs B at once */
    assert_int_equal(ib__timers_step(t, NULL, NULL), 1);
    assert_int_equal(ib__timers_nearest_ms(t, 1200), 300);
    c.now = 1500;
    assert_int_equal(ib__timers_step(t, NULL, NULL), 1);
    assert_int_equal(ib__timers_nearest_ms(t, 1500), 700);
    assert_string_equal(trail, "BA");
    ib__timers_free(t);
}

/* A timer that asks to run again at once runs once a pass, not for ever;
 * a timer added by a callback waits for the next pass. */
static void every_timer_runs_at_most_once_a_pass(void **state)
{
    (void)state;
    fake_clock c = {0};
    ib_timers *t = new_loop(&c);
    job added = {.name = 'N', .next = IB_TIMER_NOMORE};
    job eager = {.name = 'E', .next = 0, .loop = t, .nested_add = &added};
    ib__timers_add(t, 0, run_job, &eager);
    assert_int_equal(ib__timers_run_due(t), 1);
    assert_string_equal(trail, "E");
    eager.nested_add = NULL;
    assert_int_equal(ib__timers_run_due(t), 2); /* E, then N (same deadline, added later) */
    assert_string_equal(trail, "EEN");
    assert_int_equal(added.runs, 1);
    ib__timers_free(t);
}

/* A callback that runs a pass of its own (a long step letting the others
 * run between its parts) is not run again from inside, and what ran in
 * the inner pass does not run again in the outer one. */
static void a_nested_pass_skips_the_running_timer(void **state)
{
    (void)state;
    fake_clock c = {0};
    ib_timers *t = new_loop(&c);
    job outer = {.name = 'O', .next = 100, .loop = t, .nested_pass = true};
    job other = {.name = 'X', .next = 100};
    ib__timers_add(t, 0, run_job, &outer);
    ib__timers_add(t, 0, run_job, &other);
    assert_int_equal(ib__timers_run_due(t), 1); /* X ran inside O's pass */
    assert_string_equal(trail, "OX");
    assert_int_equal(outer.runs, 1);
    assert_int_equal(other.runs, 1);
    ib__timers_free(t);
}

/* Once a callback asks the loop to quit, the rest of the pass is left. */
static void quit_ends_the_pass(void **state)
{
    (void)state;
    fake_clock c = {0};
    ib_timers *t = new_loop(&c);
    job first = {.name = 'Q', .next = 10, .loop = t, .quits = true};
    job second = {.name = 'S', .next = 10};
    ib__timers_add(t, 0, run_job, &first);
    ib__timers_add(t, 0, run_job, &second);
    assert_false(ib__timers_quitting(t));
    ib__timers_run(t, NULL, NULL); /* returns: the pass quit */
    assert_true(ib__timers_quitting(t));
    assert_string_equal(trail, "Q");
    assert_int_equal(second.runs, 0);
    ib__timers_free(t);
}

/* Full: no slot is left. */
static void a_full_table_refuses(void **state)
{
    (void)state;
    fake_clock c = {0};
    ib_timers *t = new_loop(&c);
    job j = {.name = 'J', .next = 1};
    for (int i = 0; i < IB_TIMERS_MAX; i++)
        assert_true(ib__timers_add(t, 1000, run_job, &j) > 0);
    assert_int_equal(ib__timers_add(t, 1000, run_job, &j), -1);
    ib__timers_free(t);
    ib__timers_free(NULL);
}

typedef struct waker {
    ib_timers *loop;
    atomic_int wakes;
    bool quit_on_wake;
} waker;

static void on_wake(void *ctx)
{
    waker *w = ctx;
    atomic_fetch_add(&w->wakes, 1);
    if (w->quit_on_wake)
        ib__timers_quit(w->loop);
}

static void *turn_loop(void *arg)
{
    waker *w = arg;
    ib__timers_run(w->loop, on_wake, w);
    return NULL;
}

/* On the real clock, with the only timer an hour away: a wake-up from
 * another thread reaches the sleeping loop (were it not, the test would
 * hang until ctest's timeout), and the timer has not run. */
static void a_wake_up_ends_the_sleep(void **state)
{
    (void)state;
    ib_timers *t = new_loop(NULL);
    waker w = {.loop = t, .quit_on_wake = true};
    atomic_init(&w.wakes, 0);
    job late = {.name = 'L', .next = IB_TIMER_NOMORE};
    ib__timers_add(t, 3600 * 1000, run_job, &late);
    /* the add woke the loop too: this step returns at once, having
     * drained it, so the wake below is the only one the thread sees */
    assert_int_equal(ib__timers_step(t, NULL, NULL), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, turn_loop, &w), 0);
    ib__timers_wake(t);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&w.wakes), 1);
    assert_int_equal(late.runs, 0);
    ib__timers_free(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(due_timers_run_in_deadline_order_and_rearm),
    cmocka_unit_test(nearest_deadline_is_what_the_loop_sleeps_for),
    cmocka_unit_test(every_timer_runs_at_most_once_a_pass),
    cmocka_unit_test(a_nested_pass_skips_the_running_timer),
    cmocka_unit_test(quit_ends_the_pass),
    cmocka_unit_test(a_full_table_refuses),
    cmocka_unit_test(a_wake_up_ends_the_sleep),
};

IB_TEST_MAIN(tests)
