/* SPDX-License-Identifier: Apache-2.0 */
/* The randomized model test (model_random.h). */
#include "model_random.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

/* Per parent step: the odds of a kill -9 of a busy worker, of a SIGSTOP of
 * one, and of a seed statement, in 1/1000. */
#define KILL_PERMILLE 7
#define STOP_PERMILLE 9
#define SEED_PERMILLE 70
#define HOSTILE_PERMILLE 30 /* of the seed's INSERTs, when asked for */
#define STOP_MAX_MS 400
/* The odds of a fault on a call, in percent: right after an open (where a
 * fresh recorder builds what it keeps in memory) and otherwise. */
#define FAULT_EARLY_PCT 50
#define FAULT_PCT 12
#define SPAWN_FAULT_PCT 30
/* The odds, in percent per call, that a run of failing writes or syncs
 * starts on a worker, and the most calls one lasts. */
#define EPISODE_PCT 2
#define EPISODE_MAX 4

static uint64_t next(model_session *s)
{
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return x * 0x2545f4914f6cdd1dULL;
}

static unsigned below(model_session *s, unsigned n)
{
    return n == 0 ? 0 : (unsigned)(next(s) % n);
}

static bool chance(model_session *s, unsigned permille)
{
    return below(s, 1000) < permille;
}

/* --- faults --------------------------------------------------------------- */

/* A random fault of `kind` into `out`. */
static void fault_of(model_session *s, fault_kind kind, char *out, size_t len)
{
    static const unsigned nth_max[FAULT_KINDS] = {6, 3, 12, 3, 12, 2, 150};
    fault_code code = FAULT_NOMEM;
    if (kind != FAULT_ALLOC)
        code = below(s, 2) == 0 ? FAULT_FULL : FAULT_IOERR;
    if ((kind == FAULT_LOCK || kind == FAULT_SHMLOCK) && below(s, 4) == 0)
        code = FAULT_BUSY;
    /* count 0: the disk stays full, the device keeps failing. A lock kept
     * busy for good is left out: the recorder retries BUSY for its whole
     * budget while holding its write turn, and everyone waits (a case of
     * its own, not of this mix). */
    unsigned count = below(s, 100) < 60 ? 1 : 0;
    if (code == FAULT_BUSY)
        count = 1 + below(s, 3);
    snprintf(out, len, "%s:%u:%s:%u", fault_kind_name(kind), 1 + below(s, nth_max[kind]),
             fault_code_name(code), count);
}

static void random_fault(model_session *s, char *out, size_t len)
{
    fault_of(s, (fault_kind)below(s, FAULT_KINDS), out, len);
}

/* Where faults hurt most: an open that fails part way (a read, a lock or
 * an allocation, so that it may still return while a transaction of its
 * own failed), then the first calls of a fresh recorder under failing
 * writes, when it builds what it keeps in memory. */
static fault_kind early_kind(model_session *s, const model_op *op)
{
    static const fault_kind opening[] = {FAULT_READ, FAULT_SHMLOCK, FAULT_LOCK, FAULT_ALLOC};
    unsigned r = below(s, 100);
    if (op->kind == OP_OPEN && r < 75)
        return opening[below(s, 4)];
    if (op->kind != OP_OPEN && r < 65)
        return r < 50 ? FAULT_WRITE : FAULT_SYNC;
    return (fault_kind)below(s, FAULT_KINDS);
}

/* A disk that stays full, or a device that keeps failing, for the next
 * few calls of one worker: the same fault on each. */
static void start_episode(model_session *s, model_slot *w)
{
    fault_kind kind = below(s, 2) == 0 ? FAULT_WRITE : FAULT_SYNC;
    fault_code code = below(s, 2) == 0 ? FAULT_FULL : FAULT_IOERR;
    snprintf(w->episode, sizeof(w->episode), "%s:1:%s:0", fault_kind_name(kind),
             fault_code_name(code));
    w->episode_left = 1 + below(s, EPISODE_MAX);
}

static void maybe_fault(model_session *s, model_slot *w, model_op *op)
{
    bool early = op->kind == OP_OPEN || (model_op_writes(op->kind) && w->writes_since_open < 2);
    unsigned pct = early ? FAULT_EARLY_PCT : FAULT_PCT;
    op->fault[0] = '\0';
    if (op->kind == OP_OWNER)
        return; /* no SQLite in it */
    if (w->episode_left == 0 && below(s, 100) < EPISODE_PCT)
        start_episode(s, w);
    if (w->episode_left > 0) {
        w->episode_left--;
        snprintf(op->fault, sizeof(op->fault), "%s", w->episode);
    } else if (below(s, 100) < pct) {
        fault_kind kind =
            pct == FAULT_EARLY_PCT ? early_kind(s, op) : (fault_kind)below(s, FAULT_KINDS);
        fault_of(s, kind, op->fault, sizeof(op->fault));
    }
}

/* --- keys and leases ---------------------------------------------------- */

static void random_keys(model_session *s, model_op *op, unsigned most)
{
    unsigned want = 1 + below(s, most);
    op->n = 0;
    while (op->n < want) {
        uint16_t k = (uint16_t)below(s, s->cfg.keys);
        bool dup = false;
        for (size_t i = 0; i < op->n && !dup; i++)
            dup = op->keys[i] == k;
        if (!dup)
            op->keys[op->n++] = k;
    }
}

/* Some of the keys the worker holds (any, when it holds none). */
static void my_keys(model_session *s, const model_slot *w, model_op *op, unsigned most)
{
    if (w->nmine == 0 || below(s, 100) < 10) {
        random_keys(s, op, 3);
        return;
    }
    unsigned start = below(s, w->nmine);
    op->n = 0;
    for (unsigned i = 0; i < w->nmine && op->n < most; i++)
        op->keys[op->n++] = w->mine[(start + i) % w->nmine];
}

static int64_t random_lease(model_session *s)
{
    static const int64_t leases[] = {20, 60, 150, 400, 1500, 5000};
    return leases[below(s, sizeof(leases) / sizeof(leases[0]))];
}

/* --- the calls ---------------------------------------------------------- */

/* The mix of calls, in percent. */
static const struct {
    model_op_kind kind;
    unsigned pct;
} mix[] = {
    {OP_ACQUIRE, 24}, {OP_MARK, 18},         {OP_RELEASE, 6}, {OP_RENEW, 5},
    {OP_CHECK, 12},   {OP_IS_PROCESSED, 3},  {OP_LOOKUP, 2},  {OP_INSPECT, 5},
    {OP_LIST, 1},     {OP_FORGET, 2},        {OP_PRUNE, 2},   {OP_END_ATTEMPTS, 2},
    {OP_STATS, 1},    {OP_ATTEMPT_STATS, 2}, {OP_UPKEEP, 3},  {OP_MARK_PLAIN, 2},
    {OP_OWNER, 2},    {OP_CLOSE, 1},         {OP_EXIT, 1},
};

static model_op_kind random_kind(model_session *s)
{
    unsigned r = below(s, 100), at = 0;
    for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
        at += mix[i].pct;
        if (r < at)
            return mix[i].kind;
    }
    return OP_CHECK;
}

static void fill_args(model_session *s, const model_slot *w, model_op *op)
{
    switch (op->kind) {
    case OP_ACQUIRE:
        random_keys(s, op, 6);
        op->arg = random_lease(s);
        op->probe = below(s, 2) == 0;
        op->max_attempts = below(s, 4) == 0 ? 1 + below(s, 4) : 0;
        break;
    case OP_MARK:
    case OP_RELEASE:
        my_keys(s, w, op, 6);
        break;
    case OP_RENEW:
        my_keys(s, w, op, MODEL_MINE_MAX);
        op->arg = random_lease(s);
        break;
    case OP_CHECK:
        if (below(s, 4) == 0)
            session_sweep_op(s, op);
        else
            random_keys(s, op, 8);
        break;
    case OP_IS_PROCESSED:
    case OP_LOOKUP:
    case OP_INSPECT:
    case OP_FORGET:
        random_keys(s, op, 1);
        break;
    case OP_END_ATTEMPTS:
    case OP_MARK_PLAIN:
        random_keys(s, op, 4);
        break;
    case OP_LIST:
        session_sweep_op(s, op);
        op->kind = OP_LIST;
        break;
    case OP_PRUNE: /* mostly a merge that ends claims; sometimes the last seconds too */
        op->arg = below(s, 4) == 0 ? model_wall_ms() - below(s, 4000) : 1;
        break;
    case OP_OWNER:
        op->arg = below(s, 5) == 0; /* an opaque token the probe cannot read */
        break;
    case OP_ATTEMPT_STATS:
        op->arg = 1 + below(s, 5);
        break;
    default:
        break;
    }
}

/* The next call of an idle worker: open, an owner and the sweeps it owes
 * first, then the mix. */
static void next_op(model_session *s, unsigned slot, model_op *op)
{
    model_slot *w = &s->slots[slot];
    memset(op, 0, sizeof(*op));
    if (!w->open) {
        op->kind = OP_OPEN;
        op->arg = s->cfg.busy_timeout_ms;
        op->probe = below(s, 2) == 0; /* synchronous=full: every commit syncs */
    } else if (w->owner < 0) {
        op->kind = OP_OWNER;
    } else if (w->sweeps_due > 0) {
        w->sweeps_due--;
        session_sweep_op(s, op);
    } else {
        op->kind = random_kind(s);
        fill_args(s, w, op);
    }
    if (op->kind != OP_EXIT && op->kind != OP_CLOSE)
        maybe_fault(s, w, op);
}

/* --- the parent's moves ---------------------------------------------------- */

static void spawn(model_session *s, unsigned slot)
{
    char faults[MODEL_FAULT_MAX] = "";
    if (below(s, 100) < SPAWN_FAULT_PCT)
        random_fault(s, faults, sizeof(faults));
    if (session_spawn(s, slot, faults[0] != '\0' ? faults : NULL) == 0)
        s->slots[slot].sweeps_due = 1;
}

/* A random worker with a call in flight, or -1. */
static int busy_worker(model_session *s, bool may_be_stopped)
{
    unsigned start = below(s, s->cfg.workers);
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        unsigned j = (start + i) % s->cfg.workers;
        const model_slot *w = &s->slots[j];
        if (w->live && w->busy && (may_be_stopped || !w->stopped))
            return (int)j;
    }
    return -1;
}

static void seed_move(model_session *s)
{
    unsigned key = below(s, s->cfg.keys);
    if (below(s, 10) < 3) {
        session_seed_select(s, key);
        return;
    }
    char faults[MODEL_FAULT_MAX] = "";
    if (below(s, 10) == 0)
        random_fault(s, faults, sizeof(faults));
    bool hostile = s->cfg.hostile_rows && chance(s, HOSTILE_PERMILLE);
    session_seed_insert(s, key, faults, hostile);
}

/* Kill, stop or seed: at most one per step, and only under load. */
static void parent_move(model_session *s)
{
    unsigned r = below(s, 1000);
    int victim;
    if (r < KILL_PERMILLE && (victim = busy_worker(s, true)) >= 0) {
        session_kill(s, (unsigned)victim);
        for (unsigned i = 0; i < s->cfg.workers; i++)
            if (s->slots[i].live)
                s->slots[i].sweeps_due++; /* nothing acknowledged may be lost */
        spawn(s, (unsigned)victim);
    } else if (r < KILL_PERMILLE + STOP_PERMILLE && s->stopped == 0 &&
               (victim = busy_worker(s, false)) >= 0) {
        session_stop(s, (unsigned)victim, 5 + below(s, STOP_MAX_MS));
    } else if (r < KILL_PERMILLE + STOP_PERMILLE + SEED_PERMILLE && s->stopped == 0 &&
               s->seed != NULL) {
        seed_move(s);
    }
}

/* Starts a call on every idle worker; replaces workers that exited or
 * died. */
static void feed(model_session *s)
{
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        model_slot *w = &s->slots[i];
        if (!w->live)
            spawn(s, i);
        if (!w->live || w->busy || w->stopped)
            continue;
        model_op op;
        next_op(s, i, &op);
        session_send(s, i, &op);
    }
}

/* Wakes stopped workers whose time is up; the poll timeout until the next. */
static int wake_stopped(model_session *s)
{
    int64_t now = model_now_ns(), wait_ms = 50;
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        model_slot *w = &s->slots[i];
        if (w->stopped && w->cont_at <= now)
            session_cont(s, i);
        else if (w->stopped && (w->cont_at - now) / 1000000 < wait_ms)
            wait_ms = (w->cont_at - now) / 1000000;
    }
    return (int)(wait_ms > 0 ? wait_ms : 1);
}

/* An odd seed lets the seed's recorder create the file, with a few marks,
 * before any worker opens it (the recorder migrates it); an even one
 * opens the seed's connection once the workers made the file. */
static int start(model_session *s, char *why, size_t why_len)
{
    if (s->cfg.seed % 2 == 1) {
        if (session_seed_open(s, why, why_len) != 0)
            return -1;
        for (unsigned i = 0; i < 3; i++)
            session_seed_insert(s, below(s, s->cfg.keys), "", false);
    }
    for (unsigned i = 0; i < s->cfg.workers; i++)
        spawn(s, i);
    return 0;
}

int model_run_random(const model_config *cfg, model_figures *fig, char *why, size_t why_len)
{
    model_session *s = session_new(cfg, why, why_len);
    if (s == NULL || start(s, why, why_len) != 0) {
        session_free(s);
        return -1;
    }
    bool seed_tried = s->seed != NULL;
    while (s->fig.steps < cfg->steps) {
        feed(s);
        parent_move(s);
        if (!seed_tried && s->fig.calls > 4 * cfg->workers) {
            seed_tried = true;
            if (session_seed_open(s, why, why_len) != 0)
                fprintf(cfg->log, "model: seed %llu: %s\n", (unsigned long long)cfg->seed, why);
        }
        /* the parent moves once per answer: its odds are per step */
        for (int taken = session_poll(s, wake_stopped(s)); taken > 1; taken--)
            parent_move(s);
    }
    session_finish(s);
    session_figures(s, fig);
    session_free(s);
    return 0;
}

/* Every field before longest_call_ms is a uint64_t count. */
_Static_assert(offsetof(model_figures, longest_call_ms) % sizeof(uint64_t) == 0,
               "model_figures: counts first");

void model_figures_add(model_figures *sum, const model_figures *one)
{
    uint64_t *a = (uint64_t *)sum;
    const uint64_t *b = (const uint64_t *)one;
    for (size_t i = 0; i < offsetof(model_figures, longest_call_ms) / sizeof(uint64_t); i++)
        a[i] += b[i];
    if (one->longest_call_ms > sum->longest_call_ms)
        sum->longest_call_ms = one->longest_call_ms;
    sum->seconds += one->seconds;
}

void model_figures_print(FILE *out, const model_figures *f)
{
    fprintf(out,
            "seeds %" PRIu64 ", steps %" PRIu64 ", calls %" PRIu64 " (%" PRIu64 " failed), "
            "kills %" PRIu64 ", stops %" PRIu64 ", clean exits %" PRIu64 ", %.1f s\n",
            f->seeds, f->steps, f->calls, f->calls_failed, f->kills, f->stops, f->exits,
            f->seconds);
    fprintf(out,
            "seed SQL: %" PRIu64 " inserts, %" PRIu64 " selects, %" PRIu64 " failed; hostile "
            "rows %" PRIu64 " (%" PRIu64 " committed); longest call %" PRId64 " ms\n",
            f->seed_inserts, f->seed_selects, f->seed_failed, f->hostile_rows, f->hostile_committed,
            f->longest_call_ms);
    fprintf(out, "faults (armed/injected):");
    for (int k = 0; k < FAULT_KINDS; k++)
        fprintf(out, " %s %" PRIu64 "/%" PRIu64, fault_kind_name((fault_kind)k), f->faults_armed[k],
                f->faults_fired[k]);
    fprintf(out, "\ncalls:");
    for (int k = 0; k < OP_KINDS; k++)
        fprintf(out, " %s %" PRIu64, model_op_name((model_op_kind)k), f->calls_by_op[k]);
    fprintf(out, "\nviolations:");
    for (int v = 0; v < V_KINDS; v++)
        fprintf(out, " %s %" PRIu64 ";", violation_name((violation_kind)v), f->violations[v]);
    fprintf(out, "\n");
}
