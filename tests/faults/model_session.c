/* SPDX-License-Identifier: Apache-2.0 */
/* A model test session (model_session.h). */
#include "model_session.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <sqlite3.h>

#define MS 1000000LL
/* A call that runs longer than this has hung (the recorder bounds every
 * wait by its busy timeout; a stop lasts at most a fraction of it). */
#define HANG_MS 120000
#define REAP_MS 30000

model_session *session_new(const model_config *cfg, char *why, size_t why_len)
{
    model_session *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->t_start = model_now_ns();
    s->wall_start_ms = model_wall_ms();
    s->m = model_new(cfg->keys, s->t_start);
    s->rng = cfg->seed * 0x9e3779b97f4a7c15ULL + 1;
    snprintf(s->db, sizeof(s->db), "%s/markers.db", cfg->dir);
    for (unsigned i = 0; i < MODEL_WORKERS_MAX; i++)
        s->slots[i].owner = -1;
    if (s->m == NULL || cfg->workers == 0 || cfg->workers > MODEL_WORKERS_MAX || cfg->keys < 2 ||
        cfg->keys > MODEL_KEYS_MAX) {
        snprintf(why, why_len, "bad session config (workers 1..%d, keys 2..%d)", MODEL_WORKERS_MAX,
                 MODEL_KEYS_MAX);
        session_free(s);
        return NULL;
    }
    s->fig.seeds = 1;
    return s;
}

void session_free(model_session *s)
{
    if (s == NULL)
        return;
    for (unsigned i = 0; i < MODEL_WORKERS_MAX; i++)
        if (s->slots[i].live)
            proc_kill(&s->slots[i].p);
    seed_close(s->seed);
    model_free(s->m);
    free(s);
}

int session_seed_open(model_session *s, char *why, size_t why_len)
{
    if (s->seed != NULL)
        return 0;
    return seed_open(&s->seed, s->db, s->cfg.busy_timeout_ms, why, why_len);
}

/* One line of the trace: the time from the run's start, then `fmt`. */
static void trace(const model_session *s, const char *fmt, ...)
{
    if (s->cfg.trace == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(s->cfg.trace, "%11.3f ", (double)(model_now_ns() - s->t_start) / 1e6);
    vfprintf(s->cfg.trace, fmt, ap);
    fputc('\n', s->cfg.trace);
    va_end(ap);
}

static const char *who(const model_session *s, unsigned slot)
{
    static char text[128];
    snprintf(text, sizeof(text), "seed %llu, worker %u (pid %d, start %u)",
             (unsigned long long)s->cfg.seed, slot, (int)s->slots[slot].p.pid, s->slots[slot].gen);
    return text;
}

int session_spawn(model_session *s, unsigned slot, const char *faults)
{
    model_slot *w = &s->slots[slot];
    char log[4200];
    snprintf(log, sizeof(log), "%s/worker-%u.log", s->cfg.dir, slot);
    if (proc_start(&w->p, s->cfg.worker_exe, s->db, s->cfg.seed, log, faults) != 0)
        return -1;
    w->live = true;
    w->gen++;
    trace(s, "worker %u started: pid %d%s%s", slot, (int)w->p.pid, faults ? " IB_FAULT_VFS=" : "",
          faults ? faults : "");
    w->busy = w->open = w->stopped = false;
    w->owner = -1;
    w->nmine = 0;
    w->since_open = w->since_fault = w->writes_since_open = 0;
    return 0;
}

/* The model's view of the call in flight in `slot`. */
static model_call call_of(const model_session *s, unsigned slot, int64_t t1)
{
    const model_slot *w = &s->slots[slot];
    model_call c = {.kind = (int)w->op.kind,
                    .proc = (int)slot,
                    .owner = w->owner,
                    .t0 = w->t0,
                    .t1 = t1,
                    .real0_ms = w->real0_ms,
                    .lease_ms = w->op.arg,
                    .probe = w->op.probe,
                    .cutoff_ms = w->op.arg,
                    .n = w->op.n,
                    .keys = w->op.keys};
    return c;
}

/* The kind of the (first) fault a command arms; -1 for none. */
static int fault_kind_of(const char *spec)
{
    fault_spec f[FAULT_SPEC_MAX];
    size_t n = 0;
    return fault_vfs_parse(f, FAULT_SPEC_MAX, &n, spec, NULL, 0) == 0 && n > 0 ? (int)f[0].kind
                                                                               : -1;
}

int session_send(model_session *s, unsigned slot, model_op *op)
{
    model_slot *w = &s->slots[slot];
    char line[MODEL_LINE_MAX];
    op->seq = ++s->seq;
    int len = model_op_format(line, sizeof(line), op);
    if (!w->live || w->busy || len < 0)
        return -1;
    w->op = *op;
    w->fault_kind = fault_kind_of(op->fault);
    if (w->fault_kind >= 0)
        s->fig.faults_armed[w->fault_kind]++;
    w->t0 = model_now_ns();
    w->real0_ms = model_wall_ms();
    w->busy = true;
    model_call c = call_of(s, slot, 0);
    model_begin(s->m, &c);
    s->fig.calls_by_op[op->kind]++;
    trace(s, "worker %u > %.*s (wall %+lld ms%s%lld)", slot, len - 1, line,
          (long long)(w->real0_ms - s->wall_start_ms), op->kind == OP_PRUNE ? ", cutoff " : "",
          op->kind == OP_PRUNE ? (long long)(op->arg - s->wall_start_ms) : 0LL);
    if (proc_send(&w->p, line, (size_t)len) != 0)
        return -1; /* it died: session_poll finds it */
    return 0;
}

static void mine_remove(model_slot *w, const uint16_t *keys, size_t n)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < w->nmine; i++) {
        bool drop = false;
        for (size_t j = 0; j < n && !drop; j++)
            drop = w->mine[i] == keys[j];
        if (!drop)
            w->mine[kept++] = w->mine[i];
    }
    w->nmine = kept;
}

static void mine_add(model_slot *w, uint16_t key)
{
    for (unsigned i = 0; i < w->nmine; i++)
        if (w->mine[i] == key)
            return;
    if (w->nmine < MODEL_MINE_MAX)
        w->mine[w->nmine++] = key;
}

/* What an answer tells the driver about its worker. */
static void note_answer(model_session *s, unsigned slot, const model_reply *r)
{
    model_slot *w = &s->slots[slot];
    const model_op *op = &w->op;
    bool ok = r->status == 0;
    w->since_open++;
    w->writes_since_open += model_op_writes(op->kind);
    w->since_fault = r->fired > 0 ? 0 : w->since_fault + 1;
    if (op->kind == OP_OPEN)
        w->open = ok, w->since_open = w->writes_since_open = 0;
    if (op->kind == OP_CLOSE || op->kind == OP_EXIT)
        w->open = false;
    if (op->kind == OP_OWNER && ok) {
        w->owner = model_owner_add(s->m, (int)slot, r->text, op->arg == 0);
        w->nmine = 0;
    }
    if (op->kind == OP_MARK || op->kind == OP_RELEASE)
        mine_remove(w, op->keys, op->n);
    for (size_t i = 0; ok && op->kind == OP_ACQUIRE && i < op->n; i++)
        if (r->a[i].state == IB_CLAIM_ACQUIRED)
            mine_add(w, op->keys[i]);
    if (r->fired > 0)
        w->sweeps_due++; /* what it acknowledged must still hold after the fault */
}

/* A failed call with no fault injected into it: the recorder failed on
 * its own (or could not recover from an earlier fault). */
static void check_cause(model_session *s, unsigned slot, const model_reply *r, int64_t t1)
{
    model_slot *w = &s->slots[slot];
    char what[600];
    if (r->status == 0 || r->fired > 0)
        return;
    snprintf(what, sizeof(what),
             "%s: %s (%.3f..%.3f ms) failed with status %d and no fault injected (%u calls "
             "since its last injected fault, %u since its open; %s neighbour stopped): %s",
             who(s, slot), model_op_name(w->op.kind), (double)(w->t0 - s->t_start) / 1e6,
             (double)(t1 - s->t_start) / 1e6, r->status, w->since_fault, w->since_open,
             s->stopped > 0 || s->last_cont > w->t0 ? "a" : "no", r->text);
    model_flag(s->m, V_ERROR_NO_CAUSE, what, s->cfg.log);
}

/* After its answer to OP_EXIT the worker must exit, with status 0. */
static void reap_exited(model_session *s, unsigned slot)
{
    model_slot *w = &s->slots[slot];
    bool in_time = false;
    char name[160];
    snprintf(name, sizeof(name), "%s", who(s, slot));
    /* its close may wait for a neighbour this process stopped */
    for (unsigned i = 0; i < s->cfg.workers; i++)
        session_cont(s, i);
    int status = proc_reap(&w->p, REAP_MS, &in_time);
    w->live = w->open = false;
    model_proc_gone(s->m, (int)slot, model_now_ns());
    s->fig.exits++;
    if (in_time && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    char tail[1200], what[1600];
    proc_log_tail(&w->p, tail, sizeof(tail));
    snprintf(what, sizeof(what),
             "%s did not exit cleanly when asked (wait status 0x%x%s); its log ends:\n%s", name,
             status, in_time ? "" : ", killed after 30 s", tail);
    model_flag(s->m, V_CRASH, what, s->cfg.log);
    s->fig.crashes++;
}

/* Ends the call in flight in `slot`: with its answer, or (r NULL) none. */
static void finish_call(model_session *s, unsigned slot, const model_reply *r, int64_t t1)
{
    model_slot *w = &s->slots[slot];
    model_call c = call_of(s, slot, t1);
    w->busy = false;
    model_end(s->m, &c, r, who(s, slot), s->cfg.log);
    int64_t ms = (t1 - w->t0) / MS;
    if (ms > s->fig.longest_call_ms)
        s->fig.longest_call_ms = ms;
    if (r == NULL)
        return;
    s->fig.calls++;
    s->fig.steps++;
    s->fig.calls_failed += r->status != 0;
    if (w->fault_kind >= 0)
        s->fig.faults_fired[w->fault_kind] += r->fired;
    check_cause(s, slot, r, t1);
    note_answer(s, slot, r);
    w->last_reply = t1;
    w->last = *r;
    if (w->op.kind == OP_EXIT)
        reap_exited(s, slot);
}

/* The worker of `slot` is dead and reaped (at t): its call in flight, if
 * any, ends without an answer, and its owners hold nothing from t on. */
static void slot_gone(model_session *s, unsigned slot, int64_t t)
{
    model_slot *w = &s->slots[slot];
    if (w->busy)
        finish_call(s, slot, NULL, t);
    if (w->stopped)
        s->stopped--;
    w->live = w->busy = w->stopped = w->open = false;
    model_proc_gone(s->m, (int)slot, t);
}

/* A worker that ended without being asked to. */
static void worker_died(model_session *s, unsigned slot, const char *how)
{
    model_slot *w = &s->slots[slot];
    char tail[1200], what[1600];
    int64_t t = model_now_ns();
    snprintf(what, sizeof(what), "%s %s", who(s, slot), how);
    int status = proc_kill(&w->p);
    proc_log_tail(&w->p, tail, sizeof(tail));
    snprintf(what + strlen(what), sizeof(what) - strlen(what),
             " (wait status 0x%x); its log ends:\n%s", status, tail);
    model_flag(s->m, V_CRASH, what, s->cfg.log);
    s->fig.crashes++;
    slot_gone(s, slot, t);
}

static void take_answer(model_session *s, unsigned slot, const char *line)
{
    model_slot *w = &s->slots[slot];
    model_reply r;
    int64_t t1 = model_now_ns();
    trace(s, "worker %u < %s", slot, line);
    if (!w->busy || model_reply_parse(&r, &w->op, line) != 0) {
        fprintf(s->cfg.log, "model: %s: unexpected line: %s\n", who(s, slot), line);
        worker_died(s, slot, "answered out of turn");
        return;
    }
    finish_call(s, slot, &r, t1);
}

/* Reads what `slot` has sent; the number of answers taken. */
static int drain_slot(model_session *s, unsigned slot)
{
    char line[MODEL_LINE_MAX];
    int taken = 0, got;
    while (s->slots[slot].live &&
           (got = proc_read_line(&s->slots[slot].p, line, sizeof(line))) != 0) {
        if (got < 0) {
            worker_died(s, slot, "closed its pipe (died)");
            break;
        }
        take_answer(s, slot, line);
        taken++;
    }
    return taken;
}

/* A call running past HANG_MS: reported, and its worker killed. */
static void check_hangs(model_session *s)
{
    int64_t now = model_now_ns();
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        model_slot *w = &s->slots[i];
        if (!w->live || !w->busy || w->stopped || now - w->t0 < HANG_MS * MS)
            continue;
        char what[300];
        snprintf(what, sizeof(what), "%s: %s has not returned after %d s", who(s, i),
                 model_op_name(w->op.kind), HANG_MS / 1000);
        model_flag(s->m, V_HANG, what, s->cfg.log);
        proc_backtrace(&w->p);
        session_kill(s, i);
    }
}

int session_poll(model_session *s, int timeout_ms)
{
    struct pollfd fds[MODEL_WORKERS_MAX];
    unsigned of[MODEL_WORKERS_MAX], n = 0;
    for (unsigned i = 0; i < s->cfg.workers; i++)
        if (s->slots[i].live) {
            fds[n] = (struct pollfd){.fd = s->slots[i].p.from, .events = POLLIN};
            of[n++] = i;
        }
    int ready = poll(fds, n, timeout_ms);
    int taken = 0;
    for (unsigned j = 0; ready > 0 && j < n; j++)
        if (fds[j].revents != 0)
            taken += drain_slot(s, of[j]);
    check_hangs(s);
    return taken;
}

int session_call(model_session *s, unsigned slot, model_op *op, model_reply *out)
{
    model_slot *w = &s->slots[slot];
    if (session_send(s, slot, op) != 0 && !w->busy)
        return -1;
    unsigned gen = w->gen;
    while (w->live && w->gen == gen && w->busy && w->op.seq == op->seq)
        session_poll(s, 100);
    if (!w->live || w->gen != gen)
        return -1;
    if (out != NULL)
        *out = w->last; /* checked already; a scripted case may look again */
    return 0;
}

void session_kill(model_session *s, unsigned slot)
{
    model_slot *w = &s->slots[slot];
    if (!w->live)
        return;
    proc_kill(&w->p);
    slot_gone(s, slot, model_now_ns());
    s->fig.kills++;
    trace(s, "worker %u killed", slot);
    s->fig.steps++;
}

void session_stop(model_session *s, unsigned slot, int64_t for_ms)
{
    model_slot *w = &s->slots[slot];
    if (!w->live || w->stopped || kill(w->p.pid, SIGSTOP) != 0)
        return;
    w->stopped = true;
    w->cont_at = model_now_ns() + for_ms * MS;
    s->stopped++;
    s->fig.stops++;
    trace(s, "worker %u stopped for %lld ms", slot, (long long)for_ms);
    s->fig.steps++;
}

void session_cont(model_session *s, unsigned slot)
{
    model_slot *w = &s->slots[slot];
    if (!w->live || !w->stopped)
        return;
    kill(w->p.pid, SIGCONT);
    w->stopped = false;
    s->stopped--;
    s->last_cont = model_now_ns();
    trace(s, "worker %u continued", slot);
}

/* --- the seed's SQL ------------------------------------------------------ */

/* The parent's seed statement as a call of the model. */
static model_call seed_call(const model_session *s, int kind, const uint16_t *key)
{
    model_call c = {.kind = kind,
                    .proc = -1,
                    .owner = -1,
                    .t0 = model_now_ns(),
                    .real0_ms = model_wall_ms(),
                    .n = key != NULL ? 1 : 0,
                    .keys = key};
    (void)s;
    return c;
}

int session_seed_insert(model_session *s, unsigned key, const char *faults, bool hostile)
{
    char id[IB_ID_BUF_SIZE + 8];
    uint16_t k = (uint16_t)key;
    model_key_id(id, key, s->cfg.seed);
    size_t len = strlen(id);
    if (hostile) {
        memcpy(id + len, "\0junk", 5); /* the seed's Python str with '\x00' */
        len += 5;
    }
    model_call c = seed_call(s, MODEL_SEED_INSERT, hostile ? NULL : &k);
    model_begin(s->m, &c);
    int kind = fault_kind_of(faults);
    if (kind >= 0 && fault_vfs_arm_text(faults, NULL, 0) == 0)
        s->fig.faults_armed[kind]++;
    uint64_t fired = fault_vfs_fired_total();
    int rc = seed_insert(s->seed, model_key_consumer(key), id, len, (double)c.real0_ms / 1000.0);
    fault_vfs_disarm();
    if (kind >= 0)
        s->fig.faults_fired[kind] += fault_vfs_fired_total() - fired;
    model_reply r = {.status = rc == SQLITE_OK ? 0 : rc, .n = 1};
    snprintf(r.text, sizeof(r.text), "%s", rc == SQLITE_OK ? "" : seed_errmsg(s->seed));
    if (!seed_end_transaction(s->seed)) {
        /* still inside it with no fault armed: start again on a new one */
        seed_close(s->seed);
        s->seed = NULL;
    }
    c.t1 = model_now_ns();
    model_end(s->m, &c, &r, "the parent's seed SQL", s->cfg.log);
    trace(s, "seed insert key %u%s%s%s -> %d", key, hostile ? " (hostile)" : "",
          kind >= 0 ? " faults " : "", kind >= 0 ? faults : "", rc);
    s->fig.seed_inserts++;
    s->fig.seed_failed += rc != SQLITE_OK;
    s->fig.hostile_rows += hostile;
    s->fig.hostile_committed += hostile && rc == SQLITE_OK;
    s->fig.steps++;
    return rc;
}

int session_seed_select(model_session *s, unsigned key)
{
    char id[IB_ID_BUF_SIZE];
    uint16_t k = (uint16_t)key;
    bool found = false;
    model_key_id(id, key, s->cfg.seed);
    model_call c = seed_call(s, MODEL_SEED_SELECT, &k);
    int rc = seed_select(s->seed, &found, model_key_consumer(key), id);
    c.t1 = model_now_ns();
    model_reply r = {.status = rc == SQLITE_OK ? 0 : rc, .n = 1};
    r.a[0].state = found;
    model_end(s->m, &c, &r, "the parent's seed SQL", s->cfg.log);
    trace(s, "seed select key %u -> %d %s", key, rc, found ? "found" : "not found");
    s->fig.seed_selects++;
    s->fig.seed_failed += rc != SQLITE_OK;
    s->fig.steps++;
    return rc;
}

/* --- the end of a run ----------------------------------------------------- */

void session_sweep_op(const model_session *s, model_op *op)
{
    memset(op, 0, sizeof(*op));
    op->kind = OP_CHECK;
    op->n = s->cfg.keys;
    for (unsigned k = 0; k < s->cfg.keys; k++)
        op->keys[k] = (uint16_t)k;
}

static bool any_busy(const model_session *s)
{
    for (unsigned i = 0; i < s->cfg.workers; i++)
        if (s->slots[i].live && s->slots[i].busy)
            return true;
    return false;
}

/* Asks the worker to exit (finish_call reaps it). */
static void exit_worker(model_session *s, unsigned slot)
{
    model_op op = {.kind = OP_EXIT};
    session_call(s, slot, &op, NULL);
}

/* A new worker on the file as it is: it must see every mark. */
static void fresh_sweep(model_session *s)
{
    model_op open = {.kind = OP_OPEN, .arg = s->cfg.busy_timeout_ms}, sweep;
    session_sweep_op(s, &sweep);
    if (session_spawn(s, 0, NULL) != 0 || session_call(s, 0, &open, NULL) != 0)
        return;
    if (s->slots[0].open)
        session_call(s, 0, &sweep, NULL);
    exit_worker(s, 0);
}

static void check_integrity(model_session *s)
{
    char why[512], what[700];
    if (session_seed_open(s, why, sizeof(why)) != 0 ||
        seed_integrity(s->seed, why, sizeof(why)) != 0) {
        snprintf(what, sizeof(what), "seed %llu: integrity_check: %s",
                 (unsigned long long)s->cfg.seed, why);
        model_flag(s->m, V_INTEGRITY, what, s->cfg.log);
    }
}

void session_finish(model_session *s)
{
    for (unsigned i = 0; i < s->cfg.workers; i++)
        session_cont(s, i);
    while (any_busy(s))
        session_poll(s, 100);
    for (unsigned i = 0; i < s->cfg.workers; i++) {
        model_op sweep;
        session_sweep_op(s, &sweep);
        if (s->slots[i].live && s->slots[i].open)
            session_call(s, i, &sweep, NULL);
    }
    for (unsigned k = 0; s->seed != NULL && k < s->cfg.keys; k++)
        session_seed_select(s, k);
    for (unsigned i = 0; i < s->cfg.workers; i++)
        if (s->slots[i].live)
            exit_worker(s, i);
    fresh_sweep(s);
    check_integrity(s);
}

void session_figures(const model_session *s, model_figures *out)
{
    *out = s->fig;
    for (int v = 0; v < V_KINDS; v++)
        out->violations[v] = model_violations(s->m, (violation_kind)v);
    out->seconds = (double)(model_now_ns() - s->t_start) / 1e9;
}
