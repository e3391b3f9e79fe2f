/* SPDX-License-Identifier: Apache-2.0 */
/* Timers on one loop (host_timers.h).
 *
 * A fixed table of at most IB_TIMERS_MAX timers, searched in full: the
 * host arms about ten, and a pass costs less than the system call that
 * sleeps. `lock` guards the table and is held only to read or write it,
 * never across a callback, so a callback may add timers and another thread
 * may add one while the loop sleeps. The sleep is a poll() on a pipe: a
 * write to it (from any thread, or from a signal handler) wakes the loop.
 *
 * A pass takes a snapshot of the due timers, sorted by deadline and id,
 * then runs each that is still armed, not running and not run since the
 * snapshot (a nested pass from a callback may have run it). So every due
 * timer runs at most once a pass, whatever delays the callbacks return. */
#include "host_timers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"

typedef struct timer {
    long long id; /* 0 = free slot */
    int64_t when; /* deadline on the loop's clock */
    ib_timer_fn fn;
    void *ctx;
    bool running;
    uint64_t runs;
} timer;

struct ib_timers {
    pthread_mutex_t lock;
    timer slots[IB_TIMERS_MAX];
    long long next_id;
    ib_timers_clock_fn clock;
    void *clock_ctx;
    int pipe_fd[2]; /* [0] polled by the loop, [1] written to wake it */
    atomic_int quit;
};

static int64_t monotonic(void *ctx)
{
    (void)ctx;
    return ib_clock_monotonic_ms();
}

static int64_t now_of(const ib_timers *t)
{
    return t->clock(t->clock_ctx);
}

int ib__timers_new(ib_timers **out, ib_timers_clock_fn clock, void *clock_ctx)
{
    ib_timers *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (t == NULL)
        return -1;
    if (pipe2(t->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(t);
        return -1;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->next_id = 1;
    t->clock = clock != NULL ? clock : monotonic;
    t->clock_ctx = clock_ctx;
    atomic_init(&t->quit, 0);
    *out = t;
    return 0;
}

void ib__timers_free(ib_timers *t)
{
    if (t == NULL)
        return;
    close(t->pipe_fd[0]);
    close(t->pipe_fd[1]);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

long long ib__timers_add(ib_timers *t, int64_t delay_ms, ib_timer_fn fn, void *ctx)
{
    long long id = -1;
    int64_t now = now_of(t);
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < IB_TIMERS_MAX; i++) {
        if (t->slots[i].id != 0)
            continue;
        id = t->next_id++;
        t->slots[i] =
            (timer){.id = id, .when = now + (delay_ms > 0 ? delay_ms : 0), .fn = fn, .ctx = ctx};
        break;
    }
    pthread_mutex_unlock(&t->lock);
    if (id > 0)
        ib__timers_wake(t);
    return id;
}

int64_t ib__timers_nearest_ms(ib_timers *t, int64_t now_ms)
{
    int64_t nearest = -1;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < IB_TIMERS_MAX; i++) {
        const timer *s = &t->slots[i];
        if (s->id == 0 || s->running)
            continue;
        int64_t left = s->when > now_ms ? s->when - now_ms : 0;
        if (nearest < 0 || left < nearest)
            nearest = left;
    }
    pthread_mutex_unlock(&t->lock);
    return nearest;
}

/* A due timer as the snapshot saw it. */
typedef struct due {
    long long id;
    int64_t when;
    uint64_t runs;
} due;

static bool due_before(const due *a, const due *b)
{
    return a->when != b->when ? a->when < b->when : a->id < b->id;
}

/* The due timers at `now`, earliest first, into d (IB_TIMERS_MAX). */
static size_t snapshot_due(ib_timers *t, int64_t now, due *d)
{
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < IB_TIMERS_MAX; i++) {
        const timer *s = &t->slots[i];
        if (s->id == 0 || s->running || s->when > now)
            continue;
        due x = {.id = s->id, .when = s->when, .runs = s->runs};
        size_t j = n++;
        for (; j > 0 && due_before(&x, &d[j - 1]); j--)
            d[j] = d[j - 1];
        d[j] = x;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}

static timer *find_locked(ib_timers *t, long long id)
{
    for (size_t i = 0; i < IB_TIMERS_MAX; i++)
        if (t->slots[i].id == id)
            return &t->slots[i];
    return NULL;
}

/* Runs the timer `d` saw, if it is still as seen: armed, idle, not run. */
static bool run_one(ib_timers *t, const due *d, int64_t now)
{
    pthread_mutex_lock(&t->lock);
    timer *s = find_locked(t, d->id);
    if (s == NULL || s->running || s->runs != d->runs) {
        pthread_mutex_unlock(&t->lock);
        return false;
    }
    s->running = true;
    ib_timer_fn fn = s->fn;
    void *ctx = s->ctx;
    pthread_mutex_unlock(&t->lock);

    int64_t next = fn(ctx, now);
    int64_t after = now_of(t);

    pthread_mutex_lock(&t->lock);
    s = find_locked(t, d->id); /* the slot cannot move, but says so */
    s->running = false;
    s->runs++;
    if (next < 0)
        s->id = 0;
    else
        s->when = after + next;
    pthread_mutex_unlock(&t->lock);
    return true;
}

size_t ib__timers_run_due(ib_timers *t)
{
    due d[IB_TIMERS_MAX];
    int64_t now = now_of(t);
    size_t n = snapshot_due(t, now, d), ran = 0;
    for (size_t i = 0; i < n && !ib__timers_quitting(t); i++)
        ran += run_one(t, &d[i], now);
    return ran;
}

/* Empties the pipe; true when something had been written to it. */
static bool drain_wakes(ib_timers *t)
{
    char buf[64];
    bool woken = false;
    while (read(t->pipe_fd[0], buf, sizeof(buf)) > 0)
        woken = true;
    return woken;
}

size_t ib__timers_step(ib_timers *t, void (*on_wake)(void *ctx), void *ctx)
{
    int64_t wait = ib__timers_nearest_ms(t, now_of(t));
    struct pollfd p = {.fd = t->pipe_fd[0], .events = POLLIN};
    if (!ib__timers_quitting(t))
        (void)poll(&p, 1, wait < 0 ? -1 : wait > INT32_MAX ? INT32_MAX : (int)wait);
    if (drain_wakes(t) && on_wake != NULL)
        on_wake(ctx);
    return ib__timers_run_due(t);
}

void ib__timers_run(ib_timers *t, void (*on_wake)(void *ctx), void *ctx)
{
    while (!ib__timers_quitting(t))
        ib__timers_step(t, on_wake, ctx);
}

void ib__timers_wake(ib_timers *t)
{
    int saved = errno; /* a signal handler must not change it */
    char one = 1;
    /* a full pipe holds a wake-up already */
    (void)!write(t->pipe_fd[1], &one, 1);
    errno = saved;
}

int ib__timers_wake_fd(const ib_timers *t)
{
    return t->pipe_fd[1];
}

void ib__timers_quit(ib_timers *t)
{
    atomic_store(&t->quit, 1);
    ib__timers_wake(t);
}

bool ib__timers_quitting(ib_timers *t)
{
    return atomic_load(&t->quit) != 0;
}
