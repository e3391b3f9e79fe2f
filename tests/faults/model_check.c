/* SPDX-License-Identifier: Apache-2.0 */
/* The model of the marker file (model_check.h). Per key it keeps only what
 * the rules need: the latest acknowledged marks, counters of marks and
 * forgets in flight, the latest end of each, and the latest hold of each
 * owner; the recent prunes are kept for all keys. Whatever falls out of
 * these small rings only makes the model know less, never wrongly more. */
#include "model_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define RING 8
#define HOLDS 8
#define HISTORY 12
#define PRUNES 32
#define NEVER INT64_MAX
#define MS 1000000LL
/* Slack for the lease clock's millisecond rounding on either side. */
#define MARGIN_NS (3 * MS)
/* Violations written out in full; the rest are only counted. */
#define LOG_MAX 30

typedef struct mark_rec {
    int64_t t0, t1;
} mark_rec;

typedef struct hold_rec {
    int owner;
    int64_t a0, a1, lease_ns;
    int64_t void_from; /* from here on the hold may have ended; NEVER */
} hold_rec;

typedef struct event_rec {
    int64_t t0, t1;
    int proc, kind;
    char outcome[40];
} event_rec;

typedef struct key_state {
    mark_rec marks[RING];
    unsigned nmarks, next_mark;
    unsigned pending_marks, pending_plain, pending_forgets, pending_takeovers;
    int64_t last_attempt_end, last_plain_end, last_forget_end, last_takeover_end; /* 0: none */
    int64_t ok_forget_t0, ok_forget_t1;
    /* The wall clock of the oldest mark tried since the key was last
     * certainly unmarked: the marker's ts may be that old, since a mark of
     * a marked key keeps the marker it finds (INSERT OR IGNORE). */
    int64_t first_real0;
    hold_rec holds[HOLDS];
    unsigned nholds;
    event_rec history[HISTORY];
    unsigned nhist, next_hist;
} key_state;

typedef struct owner_rec {
    int proc;
    bool visible;
    int64_t gone_at;
    char token[IB_OWNER_MAX + 1];
} owner_rec;

typedef struct prune_rec {
    int64_t t0, t1, cutoff;
} prune_rec;

struct model {
    unsigned nkeys;
    int64_t t_start;
    key_state keys[MODEL_KEYS_MAX];
    owner_rec *owners;
    size_t nowners, cap;
    prune_rec prunes[PRUNES];
    unsigned nprunes, next_prune;
    uint64_t counts[V_KINDS];
    uint64_t logged;
};

static const char *const violation_names[V_KINDS] = {
    "marked id acquired",
    "marked id reported unprocessed",
    "never-marked id reported processed",
    "lease granted over a live lease",
    "holder refused its own lease",
    "inspect hid the holder",
    "error without an injected fault",
    "worker crashed",
    "call hung",
    "file integrity",
};

const char *violation_name(violation_kind kind)
{
    return (unsigned)kind < V_KINDS ? violation_names[kind] : "?";
}

model *model_new(unsigned nkeys, int64_t t_start)
{
    model *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->nkeys = nkeys < MODEL_KEYS_MAX ? nkeys : MODEL_KEYS_MAX;
    m->t_start = t_start;
    for (unsigned k = 0; k < MODEL_KEYS_MAX; k++)
        m->keys[k].first_real0 = NEVER;
    return m;
}

void model_free(model *m)
{
    if (m != NULL)
        free(m->owners);
    free(m);
}

int model_owner_add(model *m, int proc, const char *token, bool visible)
{
    if (m->nowners == m->cap) {
        size_t cap = m->cap == 0 ? 64 : 2 * m->cap;
        owner_rec *o = realloc(m->owners, cap * sizeof(*o));
        if (o == NULL)
            return -1;
        m->owners = o;
        m->cap = cap;
    }
    owner_rec *o = &m->owners[m->nowners];
    o->proc = proc;
    o->visible = visible;
    o->gone_at = NEVER;
    snprintf(o->token, sizeof(o->token), "%s", token);
    return (int)m->nowners++;
}

void model_proc_gone(model *m, int proc, int64_t t)
{
    for (size_t i = 0; i < m->nowners; i++)
        if (m->owners[i].proc == proc && m->owners[i].gone_at > t)
            m->owners[i].gone_at = t;
}

/* --- marks ------------------------------------------------------------ */

static bool is_mark(int kind)
{
    return kind == OP_MARK || kind == OP_MARK_PLAIN || kind == MODEL_SEED_INSERT;
}

/* A mark that ignores claims: it ends every hold of the key. */
static bool is_plain_mark(int kind)
{
    return kind == OP_MARK_PLAIN || kind == MODEL_SEED_INSERT;
}

/* Rule 1: marked for certain before c0, and nothing since that may have
 * unmarked it (forgets and prunes remove what they may undo as they
 * start, so the ring holds only marks still certain). */
static bool certainly_marked(const key_state *k, int64_t c0)
{
    for (unsigned i = 0; i < k->nmarks; i++)
        if (k->marks[i].t1 < c0)
            return true;
    return false;
}

/* Rule 2. */
static bool possibly_marked(const key_state *k, int64_t c0)
{
    if (k->pending_marks > 0)
        return true;
    if (k->last_attempt_end == 0)
        return false;
    return !(k->ok_forget_t0 > k->last_attempt_end && k->ok_forget_t1 < c0);
}

/* May a prune running in [.., t1] with cutoff have removed a marker
 * stamped at wall clock real0 or later, once a mark sent at t0 found it? */
static bool pruned_since(const model *m, int64_t t0, int64_t real0)
{
    for (unsigned i = 0; i < m->nprunes; i++)
        if (m->prunes[i].t1 > t0 && m->prunes[i].cutoff > real0)
            return true;
    return false;
}

static void add_certain_mark(model *m, key_state *k, const model_call *c)
{
    if (k->pending_forgets > 0 || k->last_forget_end > c->t0 ||
        pruned_since(m, c->t0, k->first_real0))
        return;
    k->marks[k->next_mark] = (mark_rec){c->t0, c->t1};
    k->next_mark = (k->next_mark + 1) % RING;
    if (k->nmarks < RING)
        k->nmarks++;
}

/* A prune with this cutoff starts: the key's marker may go if it may be
 * older than the cutoff. */
static void drop_marks_before(key_state *k, int64_t cutoff)
{
    if (k->first_real0 < cutoff)
        k->nmarks = k->next_mark = 0;
}

/* --- holds ------------------------------------------------------------ */

static void void_holds(key_state *k, int owner, int64_t t)
{
    for (unsigned i = 0; i < k->nholds; i++)
        if ((owner < 0 || k->holds[i].owner == owner) && k->holds[i].void_from > t)
            k->holds[i].void_from = t;
}

/* A call that may end a hold once its lease has run out, whatever the
 * probe would say (an ACQUIRED or a fenced mark of another owner, a prune
 * of ended claims) started at t: from then, or from the lease's end if
 * later, the hold is certain no more. */
static void cap_hold(hold_rec *h, int64_t t)
{
    int64_t end = h->a0 + h->lease_ns - MARGIN_NS;
    int64_t from = t > end ? t : end;
    if (h->void_from > from)
        h->void_from = from;
}

static bool is_takeover(int kind)
{
    return kind == OP_ACQUIRE || kind == OP_MARK;
}

static void add_hold(key_state *k, const model_call *c, const model *m)
{
    hold_rec h = {c->owner, c->t0, c->t1, c->lease_ms * MS, NEVER};
    /* a fence-less mark in flight or ended after a0 may have ended it */
    if (k->pending_plain > 0 || k->last_plain_end > c->t0)
        h.void_from = c->t0;
    /* a takeover in flight, or ended after the lease, may end it then */
    unsigned self = is_takeover(c->kind) ? 1 : 0; /* this call is still in flight */
    if (k->pending_takeovers > self || k->last_takeover_end > h.a0 + h.lease_ns - MARGIN_NS ||
        pruned_since(m, h.a0 + h.lease_ns - MARGIN_NS, INT64_MIN))
        cap_hold(&h, h.a0);
    unsigned slot = k->nholds, oldest = 0;
    for (unsigned i = 0; i < k->nholds; i++) {
        if (k->holds[i].owner == c->owner)
            slot = i;
        if (k->holds[i].a0 + k->holds[i].lease_ns < k->holds[oldest].a0 + k->holds[oldest].lease_ns)
            oldest = i;
    }
    if (slot == HOLDS)
        slot = oldest;
    else if (slot == k->nholds)
        k->nholds++;
    k->holds[slot] = h;
}

/* Rule 3: does h certainly hold through all of [c0, c1]? `probe_ns` > 0:
 * the asker probes, so a holder the probe can see keeps it that much
 * longer. */
static bool hold_certain(const model *m, const hold_rec *h, int64_t c0, int64_t c1,
                         int64_t probe_ns)
{
    const owner_rec *o = &m->owners[h->owner];
    if (o->gone_at <= c1 || h->a1 >= c0 || h->void_from <= c1)
        return false;
    return c1 + MARGIN_NS < h->a0 + h->lease_ns + (o->visible ? probe_ns : 0);
}

/* The owner other than `asker` (-1: any) that certainly holds the key
 * through [c0, c1], or -1. */
static int certain_holder(const model *m, const key_state *k, int asker, int64_t c0, int64_t c1,
                          int64_t probe_ns)
{
    for (unsigned i = 0; i < k->nholds; i++)
        if (k->holds[i].owner != asker && hold_certain(m, &k->holds[i], c0, c1, probe_ns))
            return k->holds[i].owner;
    return -1;
}

/* Does `owner` itself certainly hold the key through [c0, c1]? */
static bool holds_own(const model *m, const key_state *k, int owner, int64_t c0, int64_t c1)
{
    for (unsigned i = 0; i < k->nholds; i++)
        if (k->holds[i].owner == owner && hold_certain(m, &k->holds[i], c0, c1, 0))
            return true;
    return false;
}

static const hold_rec *hold_of(const key_state *k, int owner)
{
    for (unsigned i = 0; i < k->nholds; i++)
        if (k->holds[i].owner == owner)
            return &k->holds[i];
    return NULL;
}

/* --- reporting -------------------------------------------------------- */

static double rel_ms(const model *m, int64_t t)
{
    return t == NEVER ? -1.0 : (double)(t - m->t_start) / 1e6;
}

static void note(key_state *k, const model_call *c, const char *outcome)
{
    event_rec *e = &k->history[k->next_hist];
    *e = (event_rec){.t0 = c->t0, .t1 = c->t1, .proc = c->proc, .kind = c->kind};
    snprintf(e->outcome, sizeof(e->outcome), "%s", outcome);
    k->next_hist = (k->next_hist + 1) % HISTORY;
    if (k->nhist < HISTORY)
        k->nhist++;
}

static const char *kind_name(int kind)
{
    if (kind == MODEL_SEED_INSERT)
        return "seed-insert";
    if (kind == MODEL_SEED_SELECT)
        return "seed-select";
    return model_op_name((model_op_kind)kind);
}

static void print_history(const model *m, const key_state *k, FILE *log)
{
    for (unsigned i = 0; i < k->nhist; i++) {
        const event_rec *e = &k->history[(k->next_hist + HISTORY - k->nhist + i) % HISTORY];
        char by[16];
        snprintf(by, sizeof(by), e->proc < 0 ? "parent" : "worker %d", e->proc);
        fprintf(log, "      %10.3f..%10.3f ms  %-9s %-12s -> %s\n", rel_ms(m, e->t0),
                rel_ms(m, e->t1), by, kind_name(e->kind), e->outcome);
    }
}

static void violation(model *m, violation_kind v, const model_call *c, unsigned key,
                      const char *what, const char *who, FILE *log)
{
    m->counts[v]++;
    if (log == NULL || m->logged++ >= LOG_MAX)
        return;
    fprintf(log, "VIOLATION [%s] %s: %s %.3f..%.3f ms, key %u (%s): %s\n", violation_name(v), who,
            kind_name(c->kind), rel_ms(m, c->t0), rel_ms(m, c->t1), key, model_key_consumer(key),
            what);
    fprintf(log, "    the key's last calls (times from the run's start):\n");
    print_history(m, &m->keys[key], log);
}

void model_flag(model *m, violation_kind kind, const char *what, FILE *log)
{
    m->counts[kind]++;
    if (log != NULL && m->logged++ < LOG_MAX)
        fprintf(log, "VIOLATION [%s] %s\n", violation_name(kind), what);
}

uint64_t model_violations(const model *m, violation_kind kind)
{
    return (unsigned)kind < V_KINDS ? m->counts[kind] : 0;
}

uint64_t model_violations_total(const model *m)
{
    uint64_t n = 0;
    for (int v = 0; v < V_KINDS; v++)
        n += m->counts[v];
    return n;
}

unsigned model_certainly_marked(const model *m, uint16_t *keys, unsigned cap, int64_t now)
{
    unsigned n = 0;
    for (unsigned k = 0; k < m->nkeys && n < cap; k++)
        if (certainly_marked(&m->keys[k], now))
            keys[n++] = (uint16_t)k;
    return n;
}

/* --- a call begins ------------------------------------------------------ */

static void begin_prune(model *m, const model_call *c)
{
    m->prunes[m->next_prune] = (prune_rec){c->t0, NEVER, c->cutoff_ms};
    m->next_prune = (m->next_prune + 1) % PRUNES;
    if (m->nprunes < PRUNES)
        m->nprunes++;
    for (unsigned k = 0; k < m->nkeys; k++) {
        key_state *ks = &m->keys[k];
        drop_marks_before(ks, c->cutoff_ms);
        for (unsigned i = 0; i < ks->nholds; i++)
            cap_hold(&ks->holds[i], c->t0); /* it removes ended claims */
    }
}

void model_begin(model *m, const model_call *c)
{
    if (c->kind == OP_PRUNE)
        begin_prune(m, c);
    for (size_t i = 0; i < c->n; i++) {
        key_state *k = &m->keys[c->keys[i]];
        if (is_mark(c->kind)) {
            k->pending_marks++;
            if (c->real0_ms < k->first_real0)
                k->first_real0 = c->real0_ms;
        }
        if (is_plain_mark(c->kind)) {
            k->pending_plain++;
            void_holds(k, -1, c->t0);
        }
        if ((c->kind == OP_MARK || c->kind == OP_RELEASE) && c->owner >= 0)
            void_holds(k, c->owner, c->t0);
        if (is_takeover(c->kind)) {
            k->pending_takeovers++;
            for (unsigned h = 0; h < k->nholds; h++)
                if (k->holds[h].owner != c->owner)
                    cap_hold(&k->holds[h], c->t0);
        }
        if (c->kind == OP_FORGET) {
            k->pending_forgets++;
            k->nmarks = k->next_mark = 0;
        }
    }
}

/* --- a call ends: its answers against the rules ----------------------- */

typedef struct check_ctx {
    model *m;
    const model_call *c;
    const char *who;
    FILE *log;
} check_ctx;

static void flag(check_ctx *x, violation_kind v, unsigned key, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    violation(x->m, v, x->c, key, what, x->who, x->log);
}

/* The acknowledged mark that makes the key certainly marked at c0. */
static const mark_rec *proof_of_mark(const key_state *k, int64_t c0)
{
    for (unsigned i = 0; i < k->nmarks; i++)
        if (k->marks[i].t1 < c0)
            return &k->marks[i];
    return NULL;
}

/* An answer that the key is processed, or not (`as` names the answer;
 * `v` is the violation a marked key answered so would be). */
static void check_processed(check_ctx *x, unsigned key, bool processed, const char *as,
                            violation_kind v)
{
    key_state *k = &x->m->keys[key];
    const mark_rec *proof = proof_of_mark(k, x->c->t0);
    if (processed && !possibly_marked(k, x->c->t0))
        flag(x, V_PHANTOM, key, "answered %s, but no mark of it was tried%s", as,
             k->last_attempt_end != 0 ? " since a forget that succeeded" : " ever");
    else if (!processed && proof != NULL)
        flag(x, v, key,
             "answered %s, but a mark of it was acknowledged at %.3f..%.3f ms and nothing may "
             "have unmarked it since",
             as, rel_ms(x->m, proof->t0), rel_ms(x->m, proof->t1));
}

static void flag_holder(check_ctx *x, violation_kind v, unsigned key, int holder, const char *as)
{
    const hold_rec *h = hold_of(&x->m->keys[key], holder);
    flag(x, v, key,
         "answered %s while owner %s (worker %d) holds a lease taken at %.3f..%.3f ms for %lld ms",
         as, x->m->owners[holder].token, x->m->owners[holder].proc, rel_ms(x->m, h->a0),
         rel_ms(x->m, h->a1), (long long)(h->lease_ns / MS));
}

static const char *claim_name(int state)
{
    static const char *const names[] = {"ACQUIRED", "DONE", "BUSY", "EXHAUSTED", "CONFLICT"};
    return state >= 0 && state <= IB_CLAIM_CONFLICT ? names[state] : "?";
}

static void check_claim(check_ctx *x, unsigned key, const model_answer *a)
{
    key_state *k = &x->m->keys[key];
    const model_call *c = x->c;
    bool done = a->state == IB_CLAIM_DONE || a->state == IB_CLAIM_CONFLICT;
    bool acquired = a->state == IB_CLAIM_ACQUIRED;
    check_processed(x, key, done, claim_name(a->state),
                    acquired ? V_MARKED_ACQUIRED : V_MARKED_UNPROCESSED);
    int64_t probe_ns = c->probe ? c->lease_ms * MS : 0;
    int holder = acquired ? certain_holder(x->m, k, c->owner, c->t0, c->t1, probe_ns) : -1;
    if (holder >= 0)
        flag_holder(x, V_DOUBLE_HOLD, key, holder, "ACQUIRED");
    if (a->state == IB_CLAIM_BUSY && holds_own(x->m, k, c->owner, c->t0, c->t1))
        flag(x, V_LOST_OWN_LEASE, key, "answered BUSY to the owner of an unexpired lease");
    if (acquired)
        add_hold(k, c, x->m);
}

static void check_renewed(check_ctx *x, unsigned key, bool held)
{
    key_state *k = &x->m->keys[key];
    const model_call *c = x->c;
    if (held && certainly_marked(k, c->t0))
        check_processed(x, key, false, "held (a renewed lease)", V_MARKED_UNPROCESSED);
    int holder = held ? certain_holder(x->m, k, c->owner, c->t0, c->t1, 0) : -1;
    if (holder >= 0)
        flag_holder(x, V_DOUBLE_HOLD, key, holder, "held (a renewed lease)");
    if (!held && holds_own(x->m, k, c->owner, c->t0, c->t1))
        flag(x, V_LOST_OWN_LEASE, key,
             "renewal answered not held to the owner of an unexpired "
             "lease");
    if (held)
        add_hold(k, c, x->m);
}

static void check_marked_owned(check_ctx *x, unsigned key, bool marked)
{
    key_state *k = &x->m->keys[key];
    const model_call *c = x->c;
    int holder = marked ? certain_holder(x->m, k, c->owner, c->t0, c->t1, 0) : -1;
    if (holder >= 0)
        flag_holder(x, V_DOUBLE_HOLD, key, holder, "marked (a fenced mark)");
    if (!marked)
        check_processed(x, key, false, "not marked (a fenced mark refused)", V_MARKED_UNPROCESSED);
    if (marked)
        add_certain_mark(x->m, k, c);
}

static void check_inspect(check_ctx *x, unsigned key, const model_reply *r)
{
    key_state *k = &x->m->keys[key];
    check_processed(x, key, r->a[0].state != 0, r->a[0].state ? "marked" : "not marked",
                    V_MARKED_UNPROCESSED);
    int holder = certain_holder(x->m, k, -1, x->c->t0, x->c->t1, 0);
    if (holder >= 0 && (strcmp(r->text, x->m->owners[holder].token) != 0 || r->value <= 0))
        flag_holder(x, V_INSPECT_HOLDER, key, holder, r->text[0] != '\0' ? r->text : "no holder");
}

/* One key's answer of a call that returned OK. */
static void check_key(check_ctx *x, size_t i, const model_reply *r)
{
    unsigned key = x->c->keys[i];
    key_state *k = &x->m->keys[key];
    bool yes = r->a[i].state != 0;
    switch (x->c->kind) {
    case OP_ACQUIRE:
        check_claim(x, key, &r->a[i]);
        break;
    case OP_RENEW:
        check_renewed(x, key, yes);
        break;
    case OP_MARK:
        check_marked_owned(x, key, yes);
        break;
    case OP_MARK_PLAIN:
    case MODEL_SEED_INSERT:
        add_certain_mark(x->m, k, x->c);
        break;
    case OP_FORGET:
        if (!yes)
            check_processed(x, key, false, "no marker to forget", V_MARKED_UNPROCESSED);
        k->ok_forget_t0 = x->c->t0;
        k->ok_forget_t1 = x->c->t1;
        if (k->pending_marks == 0 && x->c->t0 > k->last_attempt_end)
            k->first_real0 = NEVER; /* no marker left, none on its way */
        break;
    case OP_INSPECT:
        check_inspect(x, key, r);
        break;
    case OP_CHECK:
    case OP_IS_PROCESSED:
    case OP_LOOKUP:
    case OP_LIST:
    case MODEL_SEED_SELECT:
        check_processed(x, key, yes, yes ? "processed" : "not processed", V_MARKED_UNPROCESSED);
        break;
    default:
        break;
    }
}

static int64_t later(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* The call is over, whatever its outcome: it is no longer in flight. */
static void end_pending(key_state *k, const model_call *c)
{
    if (is_mark(c->kind)) {
        k->pending_marks--;
        k->last_attempt_end = later(k->last_attempt_end, c->t1);
    }
    if (is_plain_mark(c->kind)) {
        k->pending_plain--;
        k->last_plain_end = later(k->last_plain_end, c->t1);
    }
    if (c->kind == OP_FORGET) {
        k->pending_forgets--;
        k->last_forget_end = later(k->last_forget_end, c->t1);
    }
    if (is_takeover(c->kind)) {
        k->pending_takeovers--;
        k->last_takeover_end = later(k->last_takeover_end, c->t1);
    }
}

static void outcome_text(char *out, size_t len, const model_call *c, const model_reply *r, size_t i)
{
    if (r == NULL)
        snprintf(out, len, "no answer (killed)");
    else if (r->status != 0)
        snprintf(out, len, "error %d (%u faults)", r->status, r->fired);
    else if (c->kind == OP_ACQUIRE)
        snprintf(out, len, "%s", claim_name(r->a[i].state));
    else if (i < r->n && c->kind != OP_RELEASE && c->kind != OP_END_ATTEMPTS)
        snprintf(out, len, "%s%s", r->a[i].state ? "yes" : "no",
                 c->kind == OP_INSPECT && r->text[0] != '\0' ? ", held" : "");
    else
        snprintf(out, len, "ok");
}

void model_end(model *m, const model_call *c, const model_reply *r, const char *who, FILE *log)
{
    check_ctx x = {m, c, who, log};
    bool ok = r != NULL && r->status == 0;
    for (size_t i = 0; i < c->n; i++) {
        char outcome[40];
        if (ok)
            check_key(&x, i, r);
        end_pending(&m->keys[c->keys[i]], c);
        outcome_text(outcome, sizeof(outcome), c, r, i);
        note(&m->keys[c->keys[i]], c, outcome);
    }
    for (unsigned i = 0; c->kind == OP_PRUNE && i < m->nprunes; i++)
        if (m->prunes[i].t0 == c->t0 && m->prunes[i].t1 == NEVER)
            m->prunes[i].t1 = c->t1;
}
