/* The batch flow of the idempotent core: poison rule, duplicates inside the
 * batch, one claim call, handlers (inline or on the pool), one mark call (the
 * group commit), one release call, then an outcome per delivery. The rules
 * are documented in dispatch.h. */
#include "dispatch_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uuid.h"

/* The event's header array is handed to plugins as it is. */
_Static_assert(sizeof(ib_event_header) == sizeof(ib_header), "header layouts differ");
_Static_assert(offsetof(ib_event_header, key) == offsetof(ib_header, key), "header layouts differ");
_Static_assert(offsetof(ib_event_header, value) == offsetof(ib_header, value),
               "header layouts differ");

/* What became of one (delivery, handler) pair. */
enum item_result {
    R_CLAIM = 0,    /* to be claimed */
    R_FOLLOW,       /* same (consumer, id) as an earlier item: follows its result */
    R_CHECK,        /* poison rule: to be checked */
    R_POISON_DONE,  /* poison rule: already marked */
    R_POISON_OPEN,  /* poison rule: not marked */
    R_CHECK_FAILED, /* poison rule: the check call failed */
    R_DONE,         /* claim: already processed */
    R_BUSY,         /* claim: held by another owner */
    R_CLAIM_FAILED, /* claim: the call failed */
    R_RUN,          /* claim: acquired, handler to run */
    R_OK,           /* handler said OK, mark pending */
    R_RETRY,
    R_REJECT,
    R_MARKED,      /* OK and marked */
    R_MARK_FAILED, /* OK but the mark call failed */
};

typedef struct run_item {
    const ib__dhandler *h;
    size_t delivery;
    size_t leader; /* the item whose result an R_FOLLOW item takes */
    double seconds;
    unsigned char result;
} run_item;

/* One ib_dispatch_run() call. */
typedef struct run_ctx {
    ib_dispatch *d;
    ib__dscratch *s;
    ib_delivery *dl;
    size_t n;
    run_item *items;
    size_t total;
    ib_bus_proxy *bus;
    ib_error *err; /* first recorder error goes here */
} run_ctx;

/* ---- scratch buffers ---------------------------------------------------- */

static size_t grown(size_t cap, size_t need)
{
    size_t c = cap != 0 ? cap : 64;
    while (c < need)
        c *= 2;
    return c;
}

/* Replaces each buffer of a group by a bigger one, or none of them. */
static bool regrow(void **bufs[], const size_t sizes[], size_t count, size_t cap)
{
    void *fresh[8];
    for (size_t i = 0; i < count; i++) {
        fresh[i] = malloc(cap * sizes[i]);
        if (fresh[i] == NULL) {
            while (i-- > 0)
                free(fresh[i]);
            return false;
        }
    }
    for (size_t i = 0; i < count; i++) {
        free(*bufs[i]);
        *bufs[i] = fresh[i];
    }
    return true;
}

static bool scratch_reserve(ib__dscratch *s, size_t n, size_t total)
{
    if (n + 1 > s->dcap) {
        size_t cap = grown(s->dcap, n + 1);
        void **bufs[] = {(void **)&s->first, (void **)&s->lists};
        const size_t sizes[] = {sizeof(*s->first), sizeof(*s->lists)};
        if (!regrow(bufs, sizes, 2, cap))
            return false;
        s->dcap = cap;
    }
    if (total > s->icap) {
        size_t cap = grown(s->icap, total);
        void **bufs[] = {&s->items,
                         (void **)&s->keys,
                         (void **)&s->key_items,
                         (void **)&s->states,
                         (void **)&s->processed,
                         (void **)&s->work,
                         (void **)&s->lease_keys};
        const size_t sizes[] = {sizeof(run_item),      sizeof(*s->keys),      sizeof(*s->key_items),
                                sizeof(*s->states),    sizeof(*s->processed), sizeof(*s->work),
                                sizeof(*s->lease_keys)};
        if (!regrow(bufs, sizes, 7, cap))
            return false;
        s->icap = cap;
    }
    /* At most half full, so probes stay short. */
    if (total * 2 > s->seen_cap) {
        size_t cap = grown(s->seen_cap, total * 2);
        void **bufs[] = {(void **)&s->seen};
        const size_t sizes[] = {sizeof(*s->seen)};
        if (!regrow(bufs, sizes, 1, cap))
            return false;
        s->seen_cap = cap;
    }
    return true;
}

void ib__dispatch_scratch_free(ib__dscratch *s)
{
    free(s->first);
    free(s->lists);
    free(s->items);
    free(s->keys);
    free(s->key_items);
    free(s->states);
    free(s->processed);
    free(s->work);
    free(s->lease_keys);
    free(s->seen);
    memset(s, 0, sizeof(*s));
}

/* ---- planning ----------------------------------------------------------- */

/* Ids are 32 hex digits; uuid7 ids share their leading timestamp digits
 * within a batch, so every digit takes part. */
static uint64_t pair_hash(const char *id, size_t handler)
{
    uint64_t w[4];
    memcpy(w, id, sizeof(w));
    uint64_t h = (uint64_t)handler * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++) {
        h ^= w[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static const char *item_id(const run_ctx *c, const run_item *it)
{
    return c->dl[it->delivery].event->id;
}

/* The earlier item with the same (consumer, id) as item `i`, or `i` itself
 * (then remembered). Consumers are unique per handler, so the handler stands
 * for the consumer. */
static size_t first_occurrence(run_ctx *c, size_t seen_cap, size_t i)
{
    const run_item *it = &c->items[i];
    const char *id = item_id(c, it);
    size_t mask = seen_cap - 1;
    for (size_t k = (size_t)pair_hash(id, it->h->index) & mask;; k = (k + 1) & mask) {
        uint32_t v = c->s->seen[k];
        if (v == 0) {
            c->s->seen[k] = (uint32_t)(i + 1);
            return i;
        }
        const run_item *o = &c->items[v - 1];
        if (o->h == it->h && memcmp(item_id(c, o), id, IB_ID_LEN) == 0)
            return v - 1;
    }
}

/* One item per (delivery, subscribed handler), in batch order. */
static void plan(run_ctx *c)
{
    ib__dscratch *s = c->s;
    uint64_t max_deliver = c->d->opts.max_deliver;
    size_t seen_cap = 16;
    size_t total = 0;

    while (seen_cap < s->first[c->n] * 2)
        seen_cap *= 2;
    memset(s->seen, 0, seen_cap * sizeof(*s->seen));
    for (size_t i = 0; i < c->n; i++) {
        size_t count = s->first[i + 1] - s->first[i];
        bool poison = max_deliver != 0 && c->dl[i].delivery_count >= max_deliver;
        for (size_t k = 0; k < count; k++, total++) {
            run_item *it = &c->items[total];
            it->h = s->lists[i][k];
            it->delivery = i;
            it->leader = total;
            it->seconds = 0;
            if (poison) {
                /* Poisoned items neither lead nor follow: they never run. */
                it->result = R_CHECK;
                continue;
            }
            it->leader = first_occurrence(c, seen_cap, total);
            it->result = it->leader == total ? R_CLAIM : R_FOLLOW;
        }
    }
    c->total = total;
}

/* ---- recorder calls ----------------------------------------------------- */

static void keep_first_error(run_ctx *c, const ib_error *e, ib_status st)
{
    if (c->err == NULL || c->err->status != IB_OK)
        return;
    if (e->status != IB_OK)
        *c->err = *e;
    else
        ib_error_set(c->err, st, "recorder %s: %s", ib_recorder_kind(c->d->recorder),
                     ib_status_str(st));
}

/* Gathers the keys of every item in state `want`; returns how many. */
static size_t gather(run_ctx *c, unsigned char want, unsigned char want2)
{
    ib__dscratch *s = c->s;
    size_t nk = 0;
    for (size_t i = 0; i < c->total; i++) {
        const run_item *it = &c->items[i];
        if (it->result != want && it->result != want2)
            continue;
        s->keys[nk] = (ib_marker_key){it->h->consumer, item_id(c, it)};
        s->key_items[nk++] = i;
    }
    return nk;
}

/* Poison rule: one check call for every item on its last delivery. */
static void check_poisoned(run_ctx *c)
{
    ib__dscratch *s = c->s;
    ib_error e = {0};
    size_t nk = gather(c, R_CHECK, R_CHECK);
    if (nk == 0)
        return;
    ib_status st = ib_recorder_check_batch(c->d->recorder, s->processed, s->keys, nk, &e);
    for (size_t k = 0; k < nk; k++) {
        run_item *it = &c->items[s->key_items[k]];
        if (st != IB_OK)
            it->result = R_CHECK_FAILED;
        else
            it->result = s->processed[k] ? R_POISON_DONE : R_POISON_OPEN;
    }
    if (st != IB_OK)
        keep_first_error(c, &e, st);
}

/* One claim call for every first occurrence; returns how many to run (their
 * items are listed in s->work). */
static size_t claim(run_ctx *c)
{
    ib__dscratch *s = c->s;
    ib_dispatch *d = c->d;
    ib_error e = {0};
    size_t nwork = 0;
    size_t nk = gather(c, R_CLAIM, R_CLAIM);
    if (nk == 0)
        return 0;
    ib_status st = ib_recorder_claim_batch(d->recorder, s->states, s->keys, nk, d->owner,
                                           d->opts.lease_ms, &e);
    for (size_t k = 0; k < nk; k++) {
        size_t i = s->key_items[k];
        run_item *it = &c->items[i];
        if (st != IB_OK) {
            it->result = R_CLAIM_FAILED;
            continue;
        }
        switch (s->states[k]) {
        case IB_CLAIM_ACQUIRED:
            it->result = R_RUN;
            s->work[nwork++] = i;
            break;
        case IB_CLAIM_DONE:
            it->result = R_DONE;
            break;
        default:
            it->result = R_BUSY;
            break;
        }
    }
    if (st != IB_OK)
        keep_first_error(c, &e, st);
    for (size_t w = 0; w < nwork; w++) {
        const run_item *it = &c->items[s->work[w]];
        s->lease_keys[w] = (ib_marker_key){it->h->consumer, item_id(c, it)};
    }
    pthread_mutex_lock(&d->lease_mu);
    d->lease_keys = s->lease_keys;
    d->lease_n = nwork;
    pthread_mutex_unlock(&d->lease_mu);
    return nwork;
}

/* The handlers have returned: their claims are about to be marked or
 * released, so nobody may extend them any more. */
static void leases_done(ib_dispatch *d)
{
    pthread_mutex_lock(&d->lease_mu);
    d->lease_keys = NULL;
    d->lease_n = 0;
    pthread_mutex_unlock(&d->lease_mu);
}

double ib_dispatch_recorder_seconds(const ib_dispatch *d)
{
    return d->last_recorder_seconds;
}

ib_status ib_dispatch_extend_leases(ib_dispatch *d, size_t *extended, size_t *lost, ib_error *err)
{
    ib_status st = IB_OK;
    *extended = 0;
    *lost = 0;
    pthread_mutex_lock(&d->lease_mu);
    size_t n = d->lease_n;
    if (n > 0) {
        ib_claim_state *states = malloc(n * sizeof(*states));
        if (states == NULL) {
            st = ib_error_set(err, IB_ERR_NOMEM, "dispatch: no memory to extend %zu leases", n);
        } else {
            /* the same owner claiming again restarts its lease */
            st = ib_recorder_claim_batch(d->recorder, states, d->lease_keys, n, d->owner,
                                         d->opts.lease_ms, err);
            for (size_t k = 0; st == IB_OK && k < n; k++) {
                if (states[k] == IB_CLAIM_ACQUIRED)
                    (*extended)++;
                else if (states[k] == IB_CLAIM_BUSY)
                    (*lost)++;
            }
            free(states);
        }
    }
    pthread_mutex_unlock(&d->lease_mu);
    return st;
}

/* The group commit: one mark call for every OK handler of the batch. */
static void mark(run_ctx *c)
{
    ib__dscratch *s = c->s;
    ib_error e = {0};
    size_t nk = gather(c, R_OK, R_OK);
    if (nk == 0)
        return;
    ib_status st = ib_recorder_mark_batch(c->d->recorder, s->keys, nk, &e);
    /* Partial success is possible with kinds that mark one by one: treat
     * all as failed; a redelivery finds the ones that did land as done. */
    for (size_t k = 0; k < nk; k++)
        c->items[s->key_items[k]].result = st == IB_OK ? R_MARKED : R_MARK_FAILED;
    if (st != IB_OK)
        keep_first_error(c, &e, st);
}

/* Frees the claims this batch holds but did not turn into marks, so a
 * redelivery (here or in another process) can take them at once rather than
 * after the lease. Best effort: a claim left behind only expires. */
static void release(run_ctx *c)
{
    ib__dscratch *s = c->s;
    ib_dispatch *d = c->d;
    ib_error e = {0};
    size_t nk = gather(c, R_RETRY, R_REJECT);
    size_t more = 0;
    for (size_t i = 0; i < c->total; i++) {
        const run_item *it = &c->items[i];
        if (it->result == R_MARK_FAILED || it->result == R_CLAIM_FAILED) {
            s->keys[nk + more] = (ib_marker_key){it->h->consumer, item_id(c, it)};
            s->key_items[nk + more] = i;
            more++;
        }
    }
    nk += more;
    if (nk == 0)
        return;
    ib_status st = ib_recorder_release_batch(d->recorder, s->keys, nk, d->owner, &e);
    if (st != IB_OK)
        keep_first_error(c, &e, st);
}

/* ---- handlers ----------------------------------------------------------- */

static double elapsed(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

/* Runs the handler of work entry `w`; on the caller's thread or a worker.
 * Each call writes only its own item. */
static void run_one(void *arg, size_t w)
{
    static const uint8_t no_payload[1];
    run_ctx *c = arg;
    run_item *it = &c->items[c->s->work[w]];
    const ib_delivery *dl = &c->dl[it->delivery];
    const ib_event *ev = dl->event;
    /* Never a NULL payload pointer, so memcpy(dst, payload, 0) is safe. */
    const uint8_t *payload = ev->payload != NULL ? ev->payload : no_payload;
    ib_raw_event raw = {
        .size = sizeof(raw),
        .id = ev->id,
        .type = ev->type,
        .payload = payload,
        .payload_len = ev->payload_len,
        .created_at_ms = ev->created_at_ms,
        .source = ev->source != NULL ? ev->source : "",
        .headers = (const ib_header *)ev->headers,
        .header_count = ev->header_count,
        .subject = dl->subject != NULL ? dl->subject : "",
        .stream_seq = dl->stream_seq,
        .delivery_count = dl->delivery_count != 0 ? dl->delivery_count : 1,
        .consumer = it->h->consumer,
    };
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    ib_verdict v = it->h->handle(it->h->state, payload, ev->payload_len, c->bus, &raw);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    it->seconds = elapsed(&t0, &t1);
    /* An unknown verdict is a plugin bug: take it as transient, so the event
     * is neither marked nor lost (the poison rule ends the loop). */
    it->result = v == IB_HANDLER_OK ? R_OK : v == IB_HANDLER_REJECT ? R_REJECT : R_RETRY;
}

static void run_handlers(run_ctx *c, size_t nwork)
{
    /* A single call is not worth two thread hand-offs. */
    if (c->d->pool != NULL && nwork > 1) {
        ib__pool_run(c->d->pool, run_one, c, nwork);
        return;
    }
    for (size_t w = 0; w < nwork; w++)
        run_one(c, w);
}

/* ---- outcomes ----------------------------------------------------------- */

/* Reports one leader item's result to the observer, if it ran or failed
 * to start for a recorder error. */
static void observe(run_ctx *c, const ib_delivery *dl, const run_item *it, unsigned char r)
{
    const ib_dispatch_options *o = &c->d->opts;
    ib_handler_result res;
    switch (r) {
    case R_MARKED:
        res = IB_RESULT_HANDLED;
        break;
    case R_RETRY:
        res = IB_RESULT_RETRY;
        break;
    case R_REJECT:
        res = IB_RESULT_REJECT;
        break;
    case R_MARK_FAILED:
        res = IB_RESULT_MARK_FAILED;
        break;
    case R_CHECK_FAILED:
    case R_CLAIM_FAILED:
        res = IB_RESULT_RECORDER_FAILED;
        break;
    default:
        return; /* duplicate, busy, poisoned: no handler call to report */
    }
    o->observer(o->observer_ctx, dl, it->h->consumer, res, it->seconds);
}

static void decide(run_ctx *c, size_t i)
{
    ib_delivery *dl = &c->dl[i];
    ib_delivery_counts *n = &dl->counts;
    const ib_dispatch_options *o = &c->d->opts;
    size_t first = c->s->first[i], end = c->s->first[i + 1];
    bool reject = false, retry = false, busy = false, open = false;

    if (first == end) {
        n->unhandled = true;
        dl->outcome = IB_OUTCOME_ACK;
        return;
    }
    for (size_t j = first; j < end; j++) {
        const run_item *it = &c->items[j];
        bool follower = it->result == R_FOLLOW;
        unsigned char r = follower ? c->items[it->leader].result : it->result;
        dl->handle_seconds += it->seconds;
        if (!follower && o->observer != NULL)
            observe(c, dl, it, r);
        switch (r) {
        case R_POISON_DONE:
        case R_DONE:
            n->duplicates++;
            break;
        case R_MARKED:
            if (follower)
                n->duplicates++;
            else
                n->handled++;
            break;
        case R_POISON_OPEN:
            open = true;
            break;
        case R_BUSY:
            busy = true;
            if (follower)
                n->coalesced++;
            else
                n->busy++;
            break;
        case R_REJECT:
            reject = true;
            if (follower)
                n->coalesced++;
            else
                n->rejected++;
            break;
        case R_MARK_FAILED:
            retry = true;
            if (follower)
                n->coalesced++;
            else
                n->mark_failed++;
            break;
        case R_CHECK_FAILED:
        case R_CLAIM_FAILED:
            retry = true;
            if (follower)
                n->coalesced++;
            else
                n->recorder_failed++;
            break;
        default: /* R_RETRY; nothing else is left after the flow */
            retry = true;
            if (follower)
                n->coalesced++;
            else
                n->retried++;
            break;
        }
    }
    if (reject) {
        dl->outcome = IB_OUTCOME_DEAD_LETTER;
        dl->dead_letter_reason = "rejected";
    } else if (retry) {
        dl->outcome = IB_OUTCOME_NAK;
        dl->nak_delay_ms = ib_dispatch_backoff_ms(o, dl->delivery_count);
    } else if (open) {
        dl->outcome = IB_OUTCOME_DEAD_LETTER;
        dl->dead_letter_reason = "max-deliver";
    } else if (busy) {
        dl->outcome = IB_OUTCOME_NAK;
        dl->nak_delay_ms = o->busy_delay_ms;
    } else {
        dl->outcome = IB_OUTCOME_ACK;
    }
}

/* ---- entry -------------------------------------------------------------- */

static ib_status check_deliveries(const ib_delivery *dl, size_t n, ib_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const ib_event *ev = dl[i].event;
        if (ev == NULL || ev->type == NULL)
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "dispatch run: delivery %zu has no decoded event", i);
        if (!ib_id_is_normalised(ev->id))
            return ib_error_set(err, IB_ERR_INVALID_ARG,
                                "dispatch run: delivery %zu has an id that is not normalised", i);
    }
    return IB_OK;
}

static ib_status run_locked(run_ctx *c)
{
    ib__dscratch *s = c->s;
    size_t total = 0;

    /* Handler lists first: they size the buffers. */
    if (!scratch_reserve(s, c->n, 0))
        return ib_error_set(c->err, IB_ERR_NOMEM, "dispatch run: no memory for %zu deliveries",
                            c->n);
    for (size_t i = 0; i < c->n; i++) {
        size_t count;
        s->first[i] = total;
        s->lists[i] = ib__dispatch_lookup(c->d, c->dl[i].event->type, &count);
        total += count;
    }
    s->first[c->n] = total;
    if (total >= UINT32_MAX / 2)
        return ib_error_set(c->err, IB_ERR_INVALID_ARG,
                            "dispatch run: %zu handler calls in one batch is too many", total);
    if (!scratch_reserve(s, c->n, total))
        return ib_error_set(c->err, IB_ERR_NOMEM, "dispatch run: no memory for %zu handler calls",
                            total);
    c->items = s->items;

    for (size_t i = 0; i < c->n; i++) {
        ib_delivery *dl = &c->dl[i];
        dl->outcome = IB_OUTCOME_ACK;
        dl->dead_letter_reason = NULL;
        dl->nak_delay_ms = 0;
        memset(&dl->counts, 0, sizeof(dl->counts));
        dl->handle_seconds = 0;
    }
    c->d->last_recorder_seconds = 0;
    if (total > 0) {
        struct timespec t0, t1, t2, t3;
        plan(c);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        check_poisoned(c);
        size_t nwork = claim(c);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        run_handlers(c, nwork);
        leases_done(c->d);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        mark(c);
        release(c);
        clock_gettime(CLOCK_MONOTONIC, &t3);
        c->d->last_recorder_seconds = elapsed(&t0, &t1) + elapsed(&t2, &t3);
    }
    for (size_t i = 0; i < c->n; i++)
        decide(c, i);
    return IB_OK;
}

ib_status ib_dispatch_run(ib_dispatch *d, ib_delivery *deliveries, size_t n, ib_bus_proxy *bus,
                          ib_error *err)
{
    if (d == NULL || (deliveries == NULL && n > 0))
        return ib_error_set(err, IB_ERR_INVALID_ARG, "dispatch run: no table or no deliveries");
    ib_status st = check_deliveries(deliveries, n, err);
    if (st != IB_OK)
        return st;
    ib_error_clear(err);

    run_ctx c = {.d = d, .s = &d->scratch, .dl = deliveries, .n = n, .bus = bus, .err = err};
    pthread_mutex_lock(&d->run_mu);
    st = run_locked(&c);
    pthread_mutex_unlock(&d->run_mu);
    return st;
}
