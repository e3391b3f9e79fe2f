/* SPDX-License-Identifier: Apache-2.0 */
/* The circuits of the dispatch part (dispatch_circuit.h). */
#include "dispatch_circuit.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many recent probes a circuit remembers, to move on to other events. */
#define PROBES_KEPT 4

/* One call in a window. */
typedef struct window_call {
    int64_t at_ms;
    uint64_t event; /* hash of the event id */
    bool failed;
} window_call;

/* One handler's circuit. `state` and `next_probe_ms` are written by the
 * run thread and read by any thread (hold time, gauges, /readyz); the
 * rest is the run thread's alone. The window holds every call in the
 * order the run thread saw it finish, successes as well as failures, so
 * its counts are the ones a decision (and its log line) names. */
typedef struct circuit {
    _Atomic int state;                          /* ib_circuit_state */
    _Atomic int64_t next_probe_ms;              /* OPEN: when the next probe is due */
    window_call calls[IB_CIRCUIT_WINDOW_CALLS]; /* a ring, oldest at `head` */
    size_t head, count, failures;
    size_t run;    /* the failures at the window's end, since its last success */
    bool unjudged; /* a failure joined since the last judgement */
    char last_reason[IB_VERDICT_REASON_MAX + 1]; /* of the window's last failure */
    int64_t interval_ms;                         /* the probe interval now */
    int64_t opened_at_ms;                        /* when it last left CLOSED */
    uint64_t probed[PROBES_KEPT];
    size_t probed_next;
} circuit;

struct ib__circuits {
    ib_circuit_options o;
    size_t n;
    circuit c[];
};

ib_circuit_options ib__circuit_options_complete(const ib_circuit_options *o)
{
    ib_circuit_options c = *o;
    if (c.window_ms <= 0)
        c.window_ms = IB_CIRCUIT_DEFAULT_WINDOW_MS;
    if (c.failure_pct == 0 || c.failure_pct > 100)
        c.failure_pct = c.failure_pct == 0 ? IB_CIRCUIT_DEFAULT_FAILURE_PCT : 100;
    if (c.min_events == 0)
        c.min_events = IB_CIRCUIT_DEFAULT_MIN_EVENTS;
    if (c.probe_min_ms <= 0)
        c.probe_min_ms = IB_CIRCUIT_DEFAULT_PROBE_MIN_MS;
    if (c.probe_max_ms <= 0)
        c.probe_max_ms = IB_CIRCUIT_DEFAULT_PROBE_MAX_MS;
    if (c.probe_max_ms < c.probe_min_ms)
        c.probe_max_ms = c.probe_min_ms;
    return c;
}

ib__circuits *ib__circuits_create(size_t n, const ib_circuit_options *o)
{
    ib__circuits *cs = calloc(1, sizeof(*cs) + n * sizeof(circuit));
    if (cs == NULL)
        return NULL;
    cs->o = *o;
    cs->n = n;
    for (size_t h = 0; h < n; h++) {
        atomic_init(&cs->c[h].state, IB_CIRCUIT_CLOSED);
        atomic_init(&cs->c[h].next_probe_ms, 0);
    }
    return cs;
}

void ib__circuits_free(ib__circuits *cs)
{
    free(cs);
}

static int state_of(const circuit *c)
{
    return atomic_load_explicit(&((circuit *)c)->state, memory_order_acquire);
}

bool ib__circuit_blocks(const ib__circuits *cs, size_t h)
{
    return h < cs->n && state_of(&cs->c[h]) != IB_CIRCUIT_CLOSED;
}

bool ib__circuit_probe_due(const ib__circuits *cs, size_t h, int64_t now)
{
    if (h >= cs->n || state_of(&cs->c[h]) != IB_CIRCUIT_OPEN)
        return false;
    circuit *c = (circuit *)&cs->c[h];
    return now >= atomic_load_explicit(&c->next_probe_ms, memory_order_relaxed);
}

bool ib__circuit_probed_lately(const ib__circuits *cs, size_t h, uint64_t event)
{
    for (size_t i = 0; h < cs->n && i < PROBES_KEPT; i++)
        if (cs->c[h].probed[i] == event && event != 0)
            return true;
    return false;
}

/* A duration for a person: "250ms", "4.5s", "2m13s". */
static const char *duration(char *buf, size_t cap, int64_t ms)
{
    if (ms < 1000)
        snprintf(buf, cap, "%" PRId64 "ms", ms);
    else if (ms < 60000 && ms % 1000 == 0)
        snprintf(buf, cap, "%" PRId64 "s", ms / 1000);
    else if (ms < 60000)
        snprintf(buf, cap, "%.1fs", (double)ms / 1000.0);
    else
        snprintf(buf, cap, "%" PRId64 "m%02" PRId64 "s", ms / 60000, ms % 60000 / 1000);
    return buf;
}

static void set_state(circuit *c, ib_circuit_state to, ib__circuit_change *ch)
{
    ch->changed = true;
    ch->from = (ib_circuit_state)state_of(c);
    ch->to = to;
    atomic_store_explicit(&c->state, to, memory_order_release);
}

static const char *or_retry(const char *reason)
{
    return reason != NULL && reason[0] != '\0' ? reason : "RETRY (no reason given)";
}

void ib__circuit_probe_start(ib__circuits *cs, size_t h, uint64_t event, ib__circuit_change *ch)
{
    circuit *c = &cs->c[h];
    c->probed[c->probed_next] = event;
    c->probed_next = (c->probed_next + 1) % PROBES_KEPT;
    set_state(c, IB_CIRCUIT_HALF_OPEN, ch);
    snprintf(ch->detail, sizeof(ch->detail), "probing with one delivery");
}

/* Drops the calls that left the window by age (or to make room). */
static void window_trim(circuit *c, int64_t now, int64_t window_ms, size_t room)
{
    while (c->count > 0) {
        const window_call *w = &c->calls[c->head];
        if (c->count + room <= IB_CIRCUIT_WINDOW_CALLS && now - w->at_ms < window_ms)
            break;
        c->failures -= w->failed;
        c->head = (c->head + 1) % IB_CIRCUIT_WINDOW_CALLS;
        c->count--;
    }
    if (c->run > c->count)
        c->run = c->count;
}

/* A call joins the window at its end. Times never go back in the ring: a
 * call told with an earlier time than the last one takes the last one's,
 * so trimming by age from the oldest stays right. */
static void window_add(circuit *c, uint64_t event, bool failed, int64_t now)
{
    size_t tail = (c->head + c->count) % IB_CIRCUIT_WINDOW_CALLS;
    if (c->count > 0) {
        const window_call *last = &c->calls[(c->head + c->count - 1) % IB_CIRCUIT_WINDOW_CALLS];
        if (now < last->at_ms)
            now = last->at_ms;
    }
    c->calls[tail] = (window_call){.at_ms = now, .event = event, .failed = failed};
    c->count++;
    c->failures += failed;
    c->run = failed ? c->run + 1 : 0;
}

/* Distinct events among the failures of the window's calls from the
 * `from`-th (0: the oldest) on, counted up to `enough`. */
static size_t failing_events(const circuit *c, size_t from, size_t enough)
{
    size_t distinct = 0;
    for (size_t i = from; i < c->count && distinct < enough; i++) {
        const window_call *w = &c->calls[(c->head + i) % IB_CIRCUIT_WINDOW_CALLS];
        bool seen = false;
        for (size_t j = from; j < i && w->failed && !seen; j++) {
            const window_call *v = &c->calls[(c->head + j) % IB_CIRCUIT_WINDOW_CALLS];
            seen = v->failed && v->event == w->event;
        }
        distinct += w->failed && !seen;
    }
    return distinct;
}

static void open_at(circuit *c, int64_t now, int64_t interval)
{
    c->interval_ms = interval;
    atomic_store_explicit(&c->next_probe_ms, now + interval, memory_order_relaxed);
}

/* Whether the window says outage: its failure rate, once it holds
 * IB_CIRCUIT_RATE_MIN_CALLS calls (a young window's few calls reach the
 * rate by chance), or a run of IB_CIRCUIT_RUN_CALLS failures at its end
 * (an outage in a young window, or after a busy spell whose successes
 * would dilute the rate for a while), each from at least min_events
 * distinct events. Writes why into `detail`. */
static bool outage(const ib__circuits *cs, const circuit *c, char *detail, size_t cap)
{
    unsigned min = cs->o.min_events;
    char w[32];
    duration(w, sizeof(w), cs->o.window_ms);
    if (c->count >= IB_CIRCUIT_RATE_MIN_CALLS && c->failures >= min &&
        c->failures * 100 >= (size_t)cs->o.failure_pct * c->count &&
        failing_events(c, 0, min) >= min) {
        snprintf(detail, cap, "%zu of %zu calls failed within %s, from %zu events", c->failures,
                 c->count, w, failing_events(c, 0, SIZE_MAX));
        return true;
    }
    if (c->run >= IB_CIRCUIT_RUN_CALLS && failing_events(c, c->count - c->run, min) >= min) {
        snprintf(detail, cap, "the last %zu calls failed (within %s, from %zu events)", c->run, w,
                 failing_events(c, c->count - c->run, SIZE_MAX));
        return true;
    }
    return false;
}

/* A closed circuit's new call joins its window; ib__circuit_judge()
 * decides once the calls seen with it have joined too. A success that
 * brings the window to IB_CIRCUIT_RATE_MIN_CALLS calls is judged as well:
 * the rate it lets count may be met already. */
static void record_closed(ib__circuits *cs, circuit *c, uint64_t event, bool failed,
                          const char *reason, int64_t now)
{
    window_trim(c, now, cs->o.window_ms, 1);
    window_add(c, event, failed, now);
    if (c->count == IB_CIRCUIT_RATE_MIN_CALLS)
        c->unjudged = true;
    if (!failed)
        return;
    c->unjudged = true;
    snprintf(c->last_reason, sizeof(c->last_reason), "%s", or_retry(reason));
}

void ib__circuit_judge(ib__circuits *cs, size_t h, int64_t now, ib__circuit_change *ch)
{
    char why[128];
    ch->changed = false;
    if (h >= cs->n || state_of(&cs->c[h]) != IB_CIRCUIT_CLOSED || !cs->c[h].unjudged)
        return;
    circuit *c = &cs->c[h];
    c->unjudged = false;
    /* the calls that aged out since the last one joined leave first */
    window_trim(c, now, cs->o.window_ms, 0);
    if (!outage(cs, c, why, sizeof(why)))
        return;
    c->opened_at_ms = now;
    open_at(c, now, cs->o.probe_min_ms);
    set_state(c, IB_CIRCUIT_OPEN, ch);
    snprintf(ch->detail, sizeof(ch->detail), "%s; last: %s", why, c->last_reason);
}

/* The probe's outcome. */
static void record_probe(ib__circuits *cs, circuit *c, uint64_t event, bool failed,
                         const char *reason, int64_t now, ib__circuit_change *ch)
{
    char a[32], b[32];
    if (failed) {
        int64_t next = c->interval_ms * 2;
        open_at(c, now, next < cs->o.probe_max_ms ? next : cs->o.probe_max_ms);
        set_state(c, IB_CIRCUIT_OPEN, ch);
        snprintf(ch->detail, sizeof(ch->detail),
                 "probe failed, open for %s, next probe in %s; "
                 "last: %s",
                 duration(a, sizeof(a), now - c->opened_at_ms),
                 duration(b, sizeof(b), c->interval_ms), or_retry(reason));
        return;
    }
    c->head = c->count = c->failures = c->run = 0;
    c->unjudged = false;
    window_add(c, event, false, now);
    set_state(c, IB_CIRCUIT_CLOSED, ch);
    snprintf(ch->detail, sizeof(ch->detail), "probe succeeded after %s open",
             duration(a, sizeof(a), now - c->opened_at_ms));
}

void ib__circuit_record(ib__circuits *cs, size_t h, uint64_t event, bool failed, const char *reason,
                        int64_t now, ib__circuit_change *ch)
{
    ch->changed = false;
    if (h >= cs->n)
        return;
    circuit *c = &cs->c[h];
    switch (state_of(c)) {
    case IB_CIRCUIT_CLOSED:
        record_closed(cs, c, event, failed, reason, now);
        break;
    case IB_CIRCUIT_HALF_OPEN:
        record_probe(cs, c, event, failed, reason, now, ch);
        break;
    default:
        break; /* opened earlier in this batch: the state does not change */
    }
}

void ib__circuit_probe_missed(ib__circuits *cs, size_t h, int64_t now, ib__circuit_change *ch)
{
    ch->changed = false;
    if (h >= cs->n || state_of(&cs->c[h]) != IB_CIRCUIT_HALF_OPEN)
        return;
    circuit *c = &cs->c[h];
    atomic_store_explicit(&c->next_probe_ms, now, memory_order_relaxed);
    set_state(c, IB_CIRCUIT_OPEN, ch);
    snprintf(ch->detail, sizeof(ch->detail),
             "the probe's event needed no call (done, or held elsewhere); the next batch probes");
}

int64_t ib__circuit_wait_ms(const ib__circuits *cs, size_t h, int64_t now)
{
    if (h >= cs->n || state_of(&cs->c[h]) == IB_CIRCUIT_CLOSED)
        return 0;
    circuit *c = (circuit *)&cs->c[h];
    int64_t left = atomic_load_explicit(&c->next_probe_ms, memory_order_relaxed) - now;
    return left > 1 ? left : 1;
}

ib_circuit_state ib__circuit_state(const ib__circuits *cs, size_t h)
{
    return h < cs->n ? (ib_circuit_state)state_of(&cs->c[h]) : IB_CIRCUIT_CLOSED;
}

int64_t ib__circuits_hold_ms(const ib__circuits *cs, int64_t now)
{
    int64_t hold = INT64_MAX;
    for (size_t h = 0; h < cs->n; h++) {
        circuit *c = (circuit *)&cs->c[h];
        if (state_of(c) != IB_CIRCUIT_OPEN)
            return 0;
        int64_t left = atomic_load_explicit(&c->next_probe_ms, memory_order_relaxed) - now;
        if (left < hold)
            hold = left;
    }
    return cs->n == 0 || hold <= 0 ? 0 : hold;
}
