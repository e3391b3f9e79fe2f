/* SPDX-License-Identifier: Apache-2.0 */
/* puller: JetStream pull consumers served by one thread that owns every
 * pull request, with a queue in and a queue out.
 *
 * This comment is the one description of how the puller asks for
 * messages: what a request and a message go through, which thread owns
 * which state, the invariants and the rule that decides when to ask.
 * jetstream.h says what the caller sees.
 *
 * THE THINGS IT MOVES
 *
 *   A pull request asks one durable for up to `batch` messages within
 *   `expires_ms`. It is published to <api>.CONSUMER.MSG.NEXT.<stream>.
 *   <durable> with the reply subject "<inbox>.<no>", no a number unique in
 *   the puller. Its life:
 *     planned   the owner decides to send it, counts its batch as asked
 *               and keeps a record {no, left = batch, deadline} in the
 *               durable's live list;
 *     sent      published and flushed; the deadline becomes the expiry
 *               plus a margin (as long as the expiry, at most 500 ms);
 *     filling   each delivery of its durable counts against the oldest
 *               live request with messages left (the server answers one
 *               durable's requests in order);
 *     ended     when its last message came, when its status came (404,
 *               408, a 409), at its deadline, at a reconnect, or at a 409
 *               "Server Shutdown" of any request; what it did not bring is
 *               written off and its record dropped. A status naming a
 *               request with no record is stale and changes nothing.
 *
 *   A message reaches the inbox on nats.c's delivery thread and goes:
 *     in        the callback appends it to the in-queue, nothing more;
 *     taken straight
 *               a delivery of a durable pulled from, at the head of the
 *               in-queue, is taken by ib_puller_next as it is while the
 *               owner holds no earlier message and the ready queue is
 *               empty; the caller tells its durable (`taken`), and the
 *               owner counts it against a request on its next turn, before
 *               anything that came after it. Anything else, or while a
 *               remover or stopper collects, goes the owner's way:
 *     sorted    the owner takes the in-queue whole. A status ends its
 *               request and is destroyed. A delivery is told to its
 *               durable by its $JS.ACK reply subject and counted against
 *               a request (a leftover when none has messages left); one
 *               whose subject does not parse belongs to no durable and is
 *               handed out as it is (the host dead-letters what it cannot
 *               decode); one that names a durable the puller no longer
 *               pulls from is nak'ed, so it is redelivered at once;
 *     ready     the owner appends the deliveries to the ready queue;
 *     taken     ib_puller_next takes them in order, or ib_puller_remove
 *               and ib_puller_stop take the ones they hand back. What is
 *               still queued at ib_puller_free is nak'ed.
 *
 * WHO OWNS WHAT
 *
 *   nats.c's delivery thread runs on_inbox_msg: it appends to the in-queue
 *   and wakes the owner for a status (or while a remover or stopper
 *   collects), else the caller if it waits in ib_puller_next. It never
 *   sends. A delivery alone needs no owner: it turns a message owed into
 *   a message ready, which leaves the rule's sum (below) as it was.
 *
 *   The owner thread (owner_main) alone reads the in-queue's messages,
 *   keeps the request records and the counters `asked` and `answered`,
 *   the back-off and the request numbers, and alone publishes pull
 *   requests: one place sends (send_planned). It holds no lock while it
 *   sends, naks or logs.
 *
 *   The flusher threads only flush the connection after the owner
 *   published (WHY A FLUSH below); they never publish.
 *
 *   Every other thread (the caller's) only posts: facts (waiting in
 *   ib_puller_next, how long a batch took, a hold), a new durable, a
 *   removal or a stop, and the counts of what it took straight, each under
 *   the one mutex followed by a wake-up when it changes what the owner
 *   decides; and it takes from the ready queue and the in-queue.
 *
 *   One mutex, inbox.mu, guards the two queues, the list of durables,
 *   the posted facts and what the owner shows (conditions, requests in
 *   flight, stats). The owner's own fields are marked "owner only" and
 *   are read and written without it.
 *
 * INVARIANTS
 *  1. Only the owner thread publishes pull requests, from one function;
 *     nothing is sent from nats.c's callback.
 *  2. For each durable, asked - answered is the number of messages its
 *     live requests may still bring: both counters only grow, asked by a
 *     batch per request planned, answered by one per delivery counted
 *     against a request and by what a request did not bring when it ends.
 *  3. A durable never has more messages ahead of the caller (still owed
 *     by its requests, or ready and not taken) than its window allows at
 *     the moment it asks: window * batch, window being 0, 1 or 2 (the
 *     rule below). So at most two batches wait unseen per durable.
 *  4. Every delivery that reaches the inbox leaves the puller exactly
 *     once: taken by the caller, or nak'ed by the puller.
 *  5. After ib_puller_remove returns with room left, ib_puller_next hands
 *     out nothing of that durable; after ib_puller_stop, no request goes.
 *  6. A reconnect ends every request in flight: nothing is awaited from a
 *     request that went into a closing socket.
 *
 * THE ALGORITHM, one turn of the owner:
 *  1. Under the mutex: take the in-queue whole when it holds a status, a
 *     message the caller left, while someone collects, or when a request
 *     is past its deadline or the connection reconnected (else its
 *     deliveries stay for the caller); take the counts of what the caller
 *     took straight, the head of the list of durables and the facts.
 *  2. Without it: count what the caller took straight against the
 *     requests. If the connection reconnected since the last turn, end
 *     every request (invariant 6). Sort each message (above): statuses
 *     end requests and set back-off and conditions, deliveries are counted
 *     against their requests. End the requests past their deadline.
 *  3. Under the mutex: append the deliveries to the ready queue (those of
 *     a durable its remover gave up on go to be nak'ed), wake the takers
 *     if it had any,
 *     show conditions and stats, unlink the durables their removers are
 *     done with, and plan requests by the keep-ahead rule:
 *       window = 2 while batches take under AckWait/8, 1 under AckWait/4,
 *                else 0; 0 while the caller holds back; at least 1 while
 *                the caller waits in ib_puller_next;
 *       ahead  = (asked - answered) + ready messages of the durable;
 *       ask for another batch while ahead + batch <= window * batch,
 *       unless stopping, removing or backing off.
 *  4. Without it: nak, free the unlinked durables, publish the planned
 *     requests and have a flusher flush once. A request that could not be
 *     published is written off and its durable waits before asking again.
 *  5. Sleep until a status arrives, a fact is posted, or the nearest
 *     deadline, back-off end or reconnect check (at most 100 ms away).
 *
 *   ib_puller_next takes the ready queue, then the in-queue straight, and
 *   returns when it holds `max`, when a request ended by a status or its
 *   deadline while it holds some (nothing more is coming soon), or
 *   flush_ms after the last arrival.
 *
 * WHY A FLUSH. nats.c's flusher holds a publish back for up to a
 * millisecond to batch writes, idling the server for that long per
 * request. natsConnection_FlushTimeout writes the buffer at once and then
 * waits for a PONG, which queues behind the messages being delivered.
 * Nobody the caller waits for may wait for that PONG, so a flusher
 * thread does; while one waits, the other flushes the next requests. */
#include "jetstream.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "clock.h"

/* Margin past a request's server-side expiry before we consider it gone
 * (its status lost to a server restart or a dropped connection): as long
 * as the expiry itself, at most this. A fixed 500 ms would idle a consumer
 * that pulls with 10 ms requests for fifty request lifetimes. */
#define LOCAL_EXPIRY_MARGIN_MAX_MS 500

/* Longest sleep of the owner before it looks at the connection's
 * reconnect count again: a reconnect ends the requests in flight, and the
 * next one goes this long after it at most, whatever their expiry. */
#define RECONNECT_CHECK_MS 100

/* Longest wait of a flusher thread for the server's PONG after it has
 * put the owner's requests on the wire (see WHY A FLUSH). */
#define REQUEST_FLUSH_WAIT_MS 100

/* Flusher threads: while one waits for its PONG, the other can put a
 * request planned meanwhile on the wire. */
#define FLUSHERS 2

/* After a refused pull request (409 and other errors) the durable's next
 * one waits: 50 ms, doubling to 5 s. A consumer whose limits refuse every
 * request otherwise gets the next one at once: 112,000 requests in 6 s. */
#define REFUSED_BACKOFF_FIRST_MS 50
#define REFUSED_BACKOFF_MAX_MS 5000

/* One log line per distinct refusal (status and text) per interval; the
 * lines left out meanwhile are counted in the next one. */
#define REFUSAL_LOG_INTERVAL_MS 10000
#define REFUSAL_KINDS 8

/* Live requests per durable: the rule allows two (invariant 3); the room
 * beyond is never used but keeps a bound that needs no proof. */
#define LIVE_MAX 4

typedef struct refusal_kind {
    char status[8];
    char text[120];
    int64_t logged_at; /* 0 = slot unused */
    uint64_t suppressed;
} refusal_kind;

typedef struct request {
    uint64_t no;      /* its reply subject is "<inbox>.<no>" */
    size_t left;      /* messages it may still bring */
    int64_t deadline; /* when it ends locally; 0 = not sent yet */
} request;

typedef struct durable {
    struct durable *next; /* the puller's list: linked under the mutex */
    /* set by ib_puller_add, read-only after */
    char *stream, *name;
    char *next_subject; /* <api prefix>.CONSUMER.MSG.NEXT.<stream>.<durable> */
    char *ack_prefix;   /* "$JS.ACK.<stream>.<durable>.": how its deliveries' replies start */
    size_t ack_prefix_len;
    int64_t ack_wait_ms;
    /* owner only */
    size_t to_count;        /* `taken` as the owner collected it in step 1 */
    request live[LIVE_MAX]; /* oldest first */
    size_t nlive;
    uint64_t asked, answered; /* invariant 2 */
    int64_t backoff_ms;       /* 0 = not backing off */
    int64_t next_request_at;
    ib_puller_condition cond;
    refusal_kind refusals[REFUSAL_KINDS];
    /* under the mutex */
    size_t queued;                  /* in the ready queue */
    size_t taken;                   /* taken from the in-queue by the caller, not counted yet */
    size_t shown_live;              /* nlive as the owner last showed it */
    ib_puller_condition shown_cond; /* cond as the owner last showed it */
    bool removing;                  /* a remover collects its messages: ask no more */
    int64_t ask_until;              /* monotonic ms: no request that could still deliver
                                       then (ib_puller_ask_until); 0 = no limit */
    bool gone;                      /* its remover is done: the owner unlinks and frees it */
} durable;

/* A formatted string, malloc'd (the caller frees it); NULL when out of
 * memory. */
__attribute__((format(printf, 1, 2))) static char *text_of(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

/* Frees a durable and what it holds (strings not made yet are NULL);
 * NULL is a no-op. */
static void durable_free(durable *d)
{
    if (d == NULL)
        return;
    free(d->stream);
    free(d->name);
    free(d->next_subject);
    free(d->ack_prefix);
    free(d);
}

/* A queued message; `d` is its durable (NULL: a delivery whose reply
 * subject names none, or a message in the in-queue not sorted yet). */
typedef struct entry {
    natsMsg *msg;
    durable *d;
} entry;

typedef struct fifo {
    entry *ring;
    size_t cap, head, count;
} fifo;

/* The part nats.c's callback reaches. Allocated apart from the puller: if
 * the last callback does not return in time at shutdown, it is left, not
 * freed under it. */
typedef struct inbox {
    pthread_mutex_t mu;
    pthread_cond_t wake;  /* the owner sleeps on it; CLOCK_MONOTONIC */
    pthread_cond_t ready; /* takers sleep on it; CLOCK_MONOTONIC */
    fifo q;               /* the in-queue */
    size_t others;        /* messages in q that are no delivery: the owner sorts them */
    int collectors;       /* ib_puller_remove or _stop collect: the owner sorts everything */
    bool taker_waits;     /* ib_puller_next waits for what comes into q */
    bool done;            /* the subscription is closed and its last callback returned */
} inbox;

/* Threads that flush the connection for the owner, so that neither it
 * nor the caller waits for a PONG (see WHY A FLUSH). They flush; they
 * never publish. */
typedef struct flusher {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    natsConnection *nc;
    bool pending, stop;
    int threads; /* started; mu and cv exist while > 0 */
    pthread_t thread[FLUSHERS];
} flusher;

/* What one turn of the owner carries from step to step; its arrays are
 * kept from turn to turn. */
typedef struct turn {
    fifo arrivals;  /* swapped with the in-queue */
    fifo sorted;    /* deliveries for the ready queue */
    fifo naks;      /* deliveries to nak */
    durable *freed; /* unlinked durables, to free */
} turn;

struct ib_puller {
    ib_nats *conn; /* BORROWED: its reconnect count ends requests in flight */
    natsConnection *nc;
    natsSubscription *sub;
    bool subscribed; /* nats.c may call into `in` until it says done */
    inbox *in;
    char *inbox;  /* request k replies to "<inbox>.<k>" */
    char *prefix; /* the API prefix of the request subjects */
    size_t batch;
    int64_t expires_ms;
    int64_t flush_ms;
    pthread_t owner;
    bool owner_started;
    flusher fl;
    /* owner only */
    uint64_t last_no; /* the latest request number planned */
    uint64_t reconnects_seen;
    ib_puller_stats stats; /* all but messages */
    turn t;
    uint64_t ends; /* requests ended by a status, their deadline or a reconnect */
    /* under in->mu */
    fifo ready;
    durable *durables;
    bool waiting; /* the caller waits in ib_puller_next */
    bool holding; /* ib_puller_hold since the last ib_puller_batch_took */
    int64_t batch_ms;
    bool stopping;          /* ib_puller_stop was called */
    bool quit;              /* ib_puller_free: the owner returns */
    bool poked;             /* something was posted since the owner last looked */
    bool sort_all;          /* the caller left a delivery in the in-queue to the owner */
    bool busy;              /* the owner holds arrivals it has not shown yet */
    uint64_t shown_ends;    /* ends as the owner last showed it */
    natsStatus send_failed; /* a request could not be published since the last next */
    ib_puller_stats shown;  /* the owner's stats as last shown; messages counted by takers */
};

static int64_t now_ms(void)
{
    return nats_Now();
}

/* ---- the queues ---- */

static bool fifo_push(fifo *f, entry e)
{
    if (f->count == f->cap) {
        size_t cap = f->cap == 0 ? 64 : f->cap * 2;
        entry *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL)
            return false;
        for (size_t i = 0; i < f->count; i++)
            ring[i] = f->ring[(f->head + i) % f->cap];
        free(f->ring);
        f->ring = ring;
        f->cap = cap;
        f->head = 0;
    }
    f->ring[(f->head + f->count) % f->cap] = e;
    f->count++;
    return true;
}

static entry fifo_pop(fifo *f)
{
    entry e = f->ring[f->head];
    f->head = (f->head + 1) % f->cap;
    f->count--;
    return e;
}

static void fifo_swap(fifo *a, fifo *b)
{
    fifo t = *a;
    *a = *b;
    *b = t;
}

/* True for a reply subject of a JetStream delivery. */
static bool is_delivery(const natsMsg *m)
{
    const char *reply = natsMsg_GetReply((natsMsg *)m);
    return reply != NULL && strncmp(reply, "$JS.ACK.", 8) == 0;
}

/* Naks the deliveries of `f` (so they are redelivered at once) and
 * destroys every message in it. */
static void fifo_nak_all(fifo *f, natsConnection *nc)
{
    while (f->count > 0) {
        natsMsg *m = fifo_pop(f).msg;
        if (is_delivery(m))
            ib_nak(nc, m, 0, NULL);
        natsMsg_Destroy(m);
    }
}

/* ---- nats.c's side: the callback only queues ---- */

/* Wakes whoever takes the message next: the owner for a status (it ends
 * a request) and while a remover or a stopper collects; otherwise the
 * caller if it waits in ib_puller_next, which takes deliveries straight
 * from the in-queue. A delivery alone changes nothing the owner decides:
 * it moves a message from owed to ready (invariant 3). */
static void on_inbox_msg(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc;
    (void)sub;
    inbox *in = closure;
    bool delivery = is_delivery(m);
    pthread_mutex_lock(&in->mu);
    bool queued = fifo_push(&in->q, (entry){m, NULL});
    if (queued && !delivery)
        in->others++;
    if (!delivery || in->collectors > 0)
        pthread_cond_signal(&in->wake);
    else if (in->taker_waits)
        pthread_cond_signal(&in->ready);
    pthread_mutex_unlock(&in->mu);
    if (!queued) {
        /* not acked: it comes back after AckWait */
        ib_log_kv(IB_SEV_ERROR, "puller: out of memory; a message is dropped", NULL);
        natsMsg_Destroy(m);
    }
}

static void on_inbox_complete(void *closure)
{
    inbox *in = closure;
    pthread_mutex_lock(&in->mu);
    in->done = true;
    /* the owner and close_subscription may both wait */
    pthread_cond_broadcast(&in->wake);
    pthread_mutex_unlock(&in->mu);
}

static pthread_cond_t *cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc == 0 ? cv : NULL;
}

static inbox *inbox_new(void)
{
    inbox *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return NULL;
    pthread_mutex_init(&in->mu, NULL);
    cond_init_monotonic(&in->wake);
    cond_init_monotonic(&in->ready);
    return in;
}

/* Frees the in-queue; its deliveries are nak'ed first. */
static void inbox_free(inbox *in, natsConnection *nc)
{
    if (in == NULL)
        return;
    fifo_nak_all(&in->q, nc);
    free(in->q.ring);
    pthread_cond_destroy(&in->ready);
    pthread_cond_destroy(&in->wake);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

/* Wakes the owner after something was posted (in->mu held). */
static void poke_locked(ib_puller *p)
{
    p->poked = true;
    pthread_cond_signal(&p->in->wake);
}

/* ---- the flushers ---- */

static void *flusher_main(void *arg)
{
    flusher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->pending && !f->stop)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->stop)
            break;
        f->pending = false;
        pthread_mutex_unlock(&f->mu);
        /* A timeout or a reconnect leaves the requests buffered, as they
         * would have been without the flush. */
        natsConnection_FlushTimeout(f->nc, REQUEST_FLUSH_WAIT_MS);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Starts the flushers (signals blocked by the caller); false when not
 * every one could start (those that did run until flusher_stop). */
static bool flusher_start(flusher *f, natsConnection *nc)
{
    f->nc = nc;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->threads = 0;
    while (f->threads < FLUSHERS) {
        if (pthread_create(&f->thread[f->threads], NULL, flusher_main, f) != 0)
            break;
        f->threads++;
    }
    if (f->threads == 0) {
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
    }
    return f->threads == FLUSHERS;
}

/* Asks a flusher to put what the connection buffers on the wire. */
static void flusher_kick(flusher *f)
{
    pthread_mutex_lock(&f->mu);
    f->pending = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void flusher_stop(flusher *f)
{
    if (f->threads == 0)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    for (int i = 0; i < f->threads; i++)
        pthread_join(f->thread[i], NULL);
    f->threads = 0;
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

/* Unsubscribes and waits (a bounded time) for the last callback; then the
 * in-queue may be freed. Messages already queued stay queued. */
static void close_subscription(ib_puller *p)
{
    if (p->sub == NULL)
        return;
    natsSubscription_Unsubscribe(p->sub);
    struct timespec until = ib_clock_monotonic_deadline(2000);
    pthread_mutex_lock(&p->in->mu);
    while (!p->in->done)
        if (pthread_cond_timedwait(&p->in->wake, &p->in->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&p->in->mu);
    natsSubscription_Destroy(p->sub);
    p->sub = NULL;
}

/* ---- the owner: sorting what arrived ---- */

/* The request number in a status's subject "<inbox>.<k>"; 0 for any other
 * message. */
static uint64_t status_request_no(natsMsg *m, const char *inbox_prefix)
{
    const char *subject = natsMsg_GetSubject(m);
    size_t il = strlen(inbox_prefix);
    if (subject == NULL || strncmp(subject, inbox_prefix, il) != 0 || subject[il] != '.')
        return 0;
    return strtoull(subject + il + 1, NULL, 10);
}

/* Ends live request `i` of `d`: what it did not bring is written off
 * (invariant 2). */
static void end_request(durable *d, size_t i)
{
    d->answered += d->live[i].left;
    memmove(&d->live[i], &d->live[i + 1], (d->nlive - i - 1) * sizeof(d->live[0]));
    d->nlive--;
}

/* Ends every request of every durable in `list`: none will be answered. */
static void end_all_requests(ib_puller *p, durable *list)
{
    for (durable *d = list; d != NULL; d = d->next)
        while (d->nlive > 0)
            end_request(d, 0);
    p->stats.abandoned++;
    p->ends++;
}

/* Logs a refusal at most once per REFUSAL_LOG_INTERVAL_MS for each distinct
 * status and text; the table keeps the first REFUSAL_KINDS kinds and
 * lets any further kind share the least recently logged slot. */
static void log_refusal(durable *d, const char *status, const char *text)
{
    int64_t now = now_ms();
    refusal_kind *slot = NULL, *oldest = &d->refusals[0];
    for (size_t i = 0; i < REFUSAL_KINDS && slot == NULL; i++) {
        refusal_kind *r = &d->refusals[i];
        if (r->logged_at != 0 && strcmp(r->status, status) == 0 && strcmp(r->text, text) == 0)
            slot = r;
        else if (r->logged_at < oldest->logged_at)
            oldest = r;
    }
    if (slot != NULL && now - slot->logged_at < REFUSAL_LOG_INTERVAL_MS) {
        slot->suppressed++;
        return;
    }
    if (slot == NULL) {
        slot = oldest;
        memset(slot, 0, sizeof(*slot));
        snprintf(slot->status, sizeof(slot->status), "%s", status);
        snprintf(slot->text, sizeof(slot->text), "%s", text);
    }
    ib_log(d->cond == IB_PULLER_CONSUMER_GONE ? IB_SEV_ERROR : IB_SEV_WARN,
           "pull request refused by the server; backing off", IB_LOG_STR("status", status),
           IB_LOG_STR("description", text), IB_LOG_STR("subject", d->next_subject),
           IB_LOG_I64("next_request_in_ms", d->backoff_ms),
           IB_LOG_U64("suppressed_since_last_line", slot->suppressed));
    slot->logged_at = now;
    slot->suppressed = 0;
}

static void back_off(durable *d)
{
    d->backoff_ms = d->backoff_ms == 0 ? REFUSED_BACKOFF_FIRST_MS : d->backoff_ms * 2;
    if (d->backoff_ms > REFUSED_BACKOFF_MAX_MS)
        d->backoff_ms = REFUSED_BACKOFF_MAX_MS;
    d->next_request_at = now_ms() + d->backoff_ms;
}

/* A request of `d` was refused: back off before the next one and say
 * what the server said. 409 "Consumer Deleted" and 503 (no responders: no
 * consumer listens on the request subject any more) mean the consumer may
 * be gone; the host confirms with a consumer info lookup. */
static void refused(ib_puller *p, durable *d, const char *status, const char *text)
{
    back_off(d);
    p->stats.refusals++;
    if (strcmp(status, "503") == 0 || strcasestr(text, "consumer deleted") != NULL)
        d->cond = IB_PULLER_CONSUMER_GONE;
    else
        d->cond = IB_PULLER_REFUSED;
    log_refusal(d, status, text);
}

/* The consumer answers normally again: end any back-off. */
static void answered_ok(durable *d)
{
    d->backoff_ms = 0;
    d->next_request_at = 0;
    d->cond = IB_PULLER_OK;
}

/* A request sent before a reconnect is never answered when it went into
 * the closing socket (or to a server that had already said 409 "Server
 * Shutdown"), and nothing tells it apart from one the reconnect buffer
 * replayed. Waiting for its local expiry would idle the consumer for the
 * whole --pull-expires, so after a reconnect every request in flight ends
 * and the next one goes at once, back-off or not (invariant 6). nats.c's
 * reconnected callback only counts (it must not block its thread); the
 * owner looks at the count. */
static void after_reconnect(ib_puller *p, durable *list)
{
    uint64_t r = ib_nats_reconnects(p->conn);
    if (r == p->reconnects_seen)
        return;
    p->reconnects_seen = r;
    size_t in_flight = 0, durables = 0;
    for (durable *d = list; d != NULL; d = d->next, durables++) {
        in_flight += d->nlive;
        d->backoff_ms = 0;
        d->next_request_at = 0;
    }
    end_all_requests(p, list);
    ib_log(IB_SEV_INFO, "reconnected: pull requests in flight ended; asking again",
           IB_LOG_U64("durables", durables), IB_LOG_U64("requests_in_flight", in_flight));
}

/* 409 "Server Shutdown": the server is going away with every request of
 * ours it holds. */
static bool server_shutdown(const char *status, const char *text)
{
    return strcmp(status, "409") == 0 && strcasestr(text, "server shutdown") != NULL;
}

/* A status (not a heartbeat) ends the live request it names; one that
 * names none is stale (the request ended already) and changes nothing. */
static void sort_status(ib_puller *p, durable *list, natsMsg *m, const char *status)
{
    const char *text = NULL;
    if (strcmp(status, "100") == 0)
        return;
    uint64_t no = status_request_no(m, p->inbox);
    durable *d = list;
    size_t i = 0;
    for (; d != NULL; d = d->next) {
        for (i = 0; i < d->nlive && d->live[i].no != no; i++)
            ;
        if (i < d->nlive)
            break;
    }
    if (d == NULL || no == 0)
        return;
    p->ends++;
    if (natsMsgHeader_Get(m, "Description", &text) != NATS_OK || text == NULL)
        text = "";
    if (server_shutdown(status, text)) {
        /* the requests behind it would wait for an answer that never
         * comes; the other durables' go to the same server */
        end_all_requests(p, list);
        for (durable *o = list; o != NULL; o = o->next)
            if (o != d)
                back_off(o);
        refused(p, d, status, text);
        return;
    }
    end_request(d, i);
    /* 404 (no messages) and 408 (request expired) end a request that the
     * consumer accepted; anything else refused it. */
    if (strcmp(status, "404") == 0 || strcmp(status, "408") == 0)
        answered_ok(d);
    else
        refused(p, d, status, text);
}

/* The durable a delivery's reply subject names; NULL when it names none
 * of `list`. `*parsed` says whether the subject could be read at all. */
static durable *delivery_durable(durable *list, natsMsg *m, bool *parsed)
{
    const char *reply = natsMsg_GetReply(m);
    /* The server's usual form first: the reply starts with a durable's
     * "$JS.ACK.<stream>.<durable>." (the host parses the whole subject
     * later, and dead-letters one whose tail does not parse). Any other
     * form (with a domain, of a durable not pulled from, or none) is
     * parsed here. */
    for (durable *d = list; d != NULL; d = d->next)
        if (strncmp(reply, d->ack_prefix, d->ack_prefix_len) == 0) {
            *parsed = true;
            return d;
        }
    ib_jsack_meta meta;
    *parsed = ib_jsack_parse(&meta, reply, strlen(reply), NULL) == IB_OK;
    if (!*parsed)
        return NULL;
    for (durable *d = list; d != NULL; d = d->next)
        if (strlen(d->name) == meta.consumer_len &&
            memcmp(d->name, meta.consumer, meta.consumer_len) == 0 &&
            strlen(d->stream) == meta.stream_len &&
            memcmp(d->stream, meta.stream, meta.stream_len) == 0)
            return d;
    return NULL;
}

/* Counts a delivery of `d` against its oldest request with messages left
 * (a leftover when none has any). */
static void count_delivery(ib_puller *p, durable *d)
{
    size_t i = 0;
    while (i < d->nlive && d->live[i].left == 0)
        i++;
    if (i == d->nlive) {
        p->stats.leftovers++;
    } else {
        d->live[i].left--;
        d->answered++;
        if (d->live[i].left == 0)
            end_request(d, i);
    }
    answered_ok(d);
}

/* Step 2: counts the deliveries the caller took straight from the
 * in-queue since the last turn. They came before this turn's arrivals,
 * so they are counted first, in the order the server answers. */
static void count_taken(ib_puller *p, durable *list)
{
    for (durable *d = list; d != NULL; d = d->next)
        for (; d->to_count > 0; d->to_count--)
            count_delivery(p, d);
}

/* Step 2: sorts the arrivals into statuses (consumed), deliveries for the
 * ready queue and deliveries to nak. A status is a message without a
 * $JS.ACK reply subject, with a "Status" header (and, from the server, no
 * payload); it arrives on the reply subject of the request it answers. A
 * message WITH a $JS.ACK reply is a delivery whatever it looks like: a
 * producer may publish an empty body with a Status header, and swallowing
 * it would leave it unacked forever. */
static void sort_arrivals(ib_puller *p, durable *list)
{
    turn *t = &p->t;
    while (t->arrivals.count > 0) {
        entry e = fifo_pop(&t->arrivals);
        const char *status = NULL;
        bool parsed = false;
        if (!is_delivery(e.msg) && natsMsgHeader_Get(e.msg, "Status", &status) == NATS_OK &&
            status != NULL) {
            p->stats.statuses++;
            sort_status(p, list, e.msg, status);
            natsMsg_Destroy(e.msg);
            continue;
        }
        e.d = is_delivery(e.msg) ? delivery_durable(list, e.msg, &parsed) : NULL;
        if (e.d != NULL)
            count_delivery(p, e.d);
        bool nak = e.d == NULL && is_delivery(e.msg) && parsed;
        if (!fifo_push(nak ? &t->naks : &t->sorted, e)) {
            /* not acked: it comes back after AckWait */
            ib_log_kv(IB_SEV_ERROR, "puller: out of memory; a message is dropped", NULL);
            natsMsg_Destroy(e.msg);
        }
    }
}

/* True when a request of `list` is past its deadline (the owner's
 * thread, with in->mu held so that `list` is the current one). */
static bool any_due(const durable *list, int64_t now)
{
    for (const durable *d = list; d != NULL; d = d->next)
        for (size_t i = 0; i < d->nlive; i++)
            if (d->live[i].deadline != 0 && now >= d->live[i].deadline)
                return true;
    return false;
}

/* Step 2: ends the requests past their deadline (their status never
 * came). */
static void expire_requests(ib_puller *p, durable *list, int64_t now)
{
    for (durable *d = list; d != NULL; d = d->next)
        for (size_t i = d->nlive; i > 0; i--)
            if (d->live[i - 1].deadline != 0 && now >= d->live[i - 1].deadline) {
                end_request(d, i - 1);
                p->ends++;
            }
}

/* ---- the owner: showing, planning, sending ---- */

/* Step 3 (in->mu held): the sorted deliveries join the ready queue, those
 * of a durable its remover gave up on go to be nak'ed; conditions, live
 * counts and stats are shown; the durables whose removers are done are
 * unlinked for step 4 to free. */
static void show_locked(ib_puller *p)
{
    turn *t = &p->t;
    while (t->sorted.count > 0) {
        entry e = fifo_pop(&t->sorted);
        if (e.d != NULL && e.d->gone) {
            e.d = NULL;
            if (fifo_push(&t->naks, e))
                continue;
        } else if (fifo_push(&p->ready, e)) {
            if (e.d != NULL)
                e.d->queued++;
            continue;
        }
        ib_log_kv(IB_SEV_ERROR, "puller: out of memory; a message is dropped", NULL);
        natsMsg_Destroy(e.msg);
    }
    for (durable **link = &p->durables; *link != NULL;) {
        durable *d = *link;
        if (d->gone) {
            *link = d->next;
            d->next = t->freed;
            t->freed = d;
            continue;
        }
        d->shown_live = d->nlive;
        d->shown_cond = d->cond;
        link = &d->next;
    }
    uint64_t messages = p->shown.messages;
    p->shown = p->stats;
    p->shown.messages = messages;
    p->shown_ends = p->ends;
    /* takers wait for arrivals shown, collectors also for requests ended */
    if (p->busy || p->in->collectors > 0)
        pthread_cond_broadcast(&p->in->ready);
    p->busy = false;
}

/* The keep-ahead window, in batches, of a durable with AckWait
 * `ack_wait_ms` whose caller's batches take `batch_ms`: messages pulled
 * ahead wait unseen by the caller's +WPI. */
static uint64_t band(int64_t batch_ms, int64_t ack_wait_ms)
{
    if (ack_wait_ms <= 0)
        return 0;
    return batch_ms < ack_wait_ms / 8 ? 2 : batch_ms < ack_wait_ms / 4 ? 1 : 0;
}

/* The keep-ahead window of `d`, in batches (in->mu held): none while the
 * caller holds back; a caller that waits takes at least one batch. */
static uint64_t window_of(const ib_puller *p, const durable *d, bool waiting)
{
    uint64_t w = p->holding ? 0 : band(p->batch_ms, d->ack_wait_ms);
    return waiting && w < 1 ? 1 : w;
}

static uint64_t window_locked(const ib_puller *p, const durable *d)
{
    return window_of(p, d, p->waiting);
}

/* True when a caller that starts to wait in ib_puller_next widens what
 * the rule allows (in->mu held): only then is the owner woken for it. */
static bool waiting_widens_locked(const ib_puller *p)
{
    for (const durable *d = p->durables; d != NULL; d = d->next)
        if (!d->removing && window_of(p, d, false) == 0)
            return true;
    return false;
}

/* True when batches that take `batch_ms`, and the end of a hold, change
 * what the rule allows for some durable (in->mu held). */
static bool took_changes_locked(const ib_puller *p, int64_t batch_ms)
{
    if (p->holding)
        return true;
    for (const durable *d = p->durables; d != NULL; d = d->next)
        if (band(p->batch_ms, d->ack_wait_ms) != band(batch_ms, d->ack_wait_ms))
            return true;
    return false;
}

/* Step 3 (in->mu held): the keep-ahead rule (invariant 3). Plans the
 * requests each durable may send now, counting them as asked (a planned
 * request is a live one with no deadline yet), and returns how long the
 * owner may sleep. */
static int64_t plan_locked(ib_puller *p, int64_t now)
{
    int64_t sleep = RECONNECT_CHECK_MS;
    for (durable *d = p->durables; d != NULL; d = d->next) {
        for (size_t i = 0; i < d->nlive; i++)
            if (d->live[i].deadline - now < sleep)
                sleep = d->live[i].deadline - now;
        if (p->stopping || d->removing)
            continue;
        if (d->ask_until != 0 && ib_clock_monotonic_ms() + p->expires_ms >= d->ask_until)
            continue; /* its owner may not be this process by then */
        if (now < d->next_request_at) {
            sleep = d->next_request_at - now < sleep ? d->next_request_at - now : sleep;
            continue;
        }
        uint64_t room = window_locked(p, d) * p->batch;
        while (d->nlive < LIVE_MAX && d->asked - d->answered + d->queued + p->batch <= room) {
            d->live[d->nlive++] = (request){.no = ++p->last_no, .left = p->batch};
            d->asked += p->batch;
        }
        d->shown_live = d->nlive;
    }
    return sleep > 0 ? sleep : 0;
}

/* Publishes request `r` of `d`. */
static natsStatus publish_request(ib_puller *p, durable *d, request *r)
{
    char body[96], reply[300];
    int len = snprintf(body, sizeof(body), "{\"batch\":%zu,\"expires\":%lld}", p->batch,
                       (long long)p->expires_ms * 1000000LL);
    snprintf(reply, sizeof(reply), "%s.%" PRIu64, p->inbox, r->no);
    return natsConnection_PublishRequest(p->nc, d->next_subject, reply, body, len);
}

/* Step 4: the one place that sends pull requests (invariant 1). Each
 * planned request of the durables of `list` is published; one flush, on a
 * flusher thread, puts them all on the wire. A request that could not be published is written
 * off, and its durable waits RECONNECT_CHECK_MS before asking again.
 * Returns whether it sent or tried to. */
static bool send_planned(ib_puller *p, durable *list)
{
    natsStatus failed = NATS_OK;
    bool sent = false;
    int64_t margin =
        p->expires_ms < LOCAL_EXPIRY_MARGIN_MAX_MS ? p->expires_ms : LOCAL_EXPIRY_MARGIN_MAX_MS;
    for (durable *d = list; d != NULL; d = d->next) {
        for (size_t i = 0; i < d->nlive; i++) {
            if (d->live[i].deadline != 0)
                continue;
            natsStatus s = publish_request(p, d, &d->live[i]);
            sent = true;
            if (s == NATS_OK) {
                d->live[i].deadline = now_ms() + p->expires_ms + margin;
                p->stats.requests++;
                continue;
            }
            failed = s;
            end_request(d, i--);
            d->next_request_at = now_ms() + RECONNECT_CHECK_MS;
        }
    }
    if (!sent)
        return false;
    flusher_kick(&p->fl);
    if (failed == NATS_OK)
        return true;
    char why[200];
    ib_log(IB_SEV_WARN, "pull request not published; asking again shortly",
           IB_LOG_STR("error", ib_nats_strerror(why, sizeof(why), failed)));
    pthread_mutex_lock(&p->in->mu);
    for (durable *d = list; d != NULL; d = d->next)
        d->shown_live = d->nlive;
    p->send_failed = failed;
    pthread_mutex_unlock(&p->in->mu);
    return true;
}

/* Step 4: naks what belongs to no durable any more and frees the
 * durables unlinked in step 3. */
static void settle_turn(ib_puller *p)
{
    turn *t = &p->t;
    while (t->naks.count > 0) {
        natsMsg *m = fifo_pop(&t->naks).msg;
        ib_nak(p->nc, m, 0, NULL);
        natsMsg_Destroy(m);
        p->stats.nak_late++;
    }
    while (t->freed != NULL) {
        durable *d = t->freed;
        t->freed = d->next;
        durable_free(d);
    }
}

/* Step 1 (in->mu held): takes the in-queue whole when something in it
 * needs the owner: a status, a delivery the caller left to it, a remover
 * or stopper collecting, a request past its deadline or a reconnect.
 * Otherwise the deliveries stay for the caller to take straight. Takes
 * the counts of those the caller took meanwhile. */
static void take_arrivals_locked(ib_puller *p, bool due)
{
    inbox *in = p->in;
    if (in->others > 0 || in->collectors > 0 || p->sort_all || due) {
        fifo_swap(&p->t.arrivals, &in->q);
        in->others = 0;
        p->sort_all = false;
    }
    p->busy = p->t.arrivals.count > 0;
    for (durable *d = p->durables; d != NULL; d = d->next) {
        d->to_count += d->taken;
        d->taken = 0;
    }
}

/* Step 5 (in->mu held): whether anything waits for the owner now. */
static bool owner_wanted_locked(const ib_puller *p)
{
    const inbox *in = p->in;
    return p->poked || p->quit || in->others > 0 ||
           (in->q.count > 0 && (in->collectors > 0 || p->sort_all));
}

static void *owner_main(void *arg)
{
    ib_puller *p = arg;
    inbox *in = p->in;
    pthread_mutex_lock(&in->mu);
    while (!p->quit) {
        /* step 1 */
        int64_t now = now_ms();
        bool due = any_due(p->durables, now) || ib_nats_reconnects(p->conn) != p->reconnects_seen;
        take_arrivals_locked(p, due);
        p->poked = false;
        durable *list = p->durables;
        pthread_mutex_unlock(&in->mu);
        /* step 2 */
        count_taken(p, list);
        after_reconnect(p, list);
        sort_arrivals(p, list);
        expire_requests(p, list, now);
        /* step 3 */
        pthread_mutex_lock(&in->mu);
        show_locked(p);
        int64_t sleep = plan_locked(p, now);
        list = p->durables; /* those planned for; one added later waits a turn */
        pthread_mutex_unlock(&in->mu);
        /* step 4 */
        settle_turn(p);
        bool sent = send_planned(p, list);
        /* step 5 */
        pthread_mutex_lock(&in->mu);
        if (!owner_wanted_locked(p) && !sent) {
            struct timespec until = ib_clock_monotonic_deadline(sleep);
            pthread_cond_timedwait(&in->wake, &in->mu, &until);
        }
    }
    pthread_mutex_unlock(&in->mu);
    return NULL;
}

/* ---- the caller's side ---- */

/* Moves up to `max` ready messages into `msgs`, in order, keeping the
 * others in order (in->mu held): those of `only`, or with `only` NULL
 * those of every durable not being removed (`all`: of every durable). */
static size_t take_ready_locked(ib_puller *p, const durable *only, bool all, natsMsg **msgs,
                                size_t max)
{
    size_t n = 0, count = p->ready.count;
    for (size_t k = 0; k < count; k++) {
        entry e = fifo_pop(&p->ready);
        bool want = only != NULL ? e.d == only : all || e.d == NULL || !e.d->removing;
        if (want && n < max) {
            msgs[n++] = e.msg;
            if (e.d != NULL)
                e.d->queued--;
        } else {
            fifo_push(&p->ready, e); /* fits: one was just taken out */
        }
    }
    p->shown.messages += n;
    if (n > 0)
        poke_locked(p);
    return n;
}

/* Moves up to `max` deliveries straight from the in-queue into `msgs`
 * (in->mu held), sparing them a turn of the owner: only while the owner
 * holds none it has not shown and the ready queue is empty, so they leave
 * in the order they came, and only from its head up to the first message
 * that is not a delivery of a durable pulled from (a status, a delivery
 * to nak or to hand out as it is), which it leaves to the owner. Each is
 * counted by its durable's `taken` for the owner, who counts it against
 * its request on its next turn (invariant 2). */
static size_t take_arrived_locked(ib_puller *p, natsMsg **msgs, size_t max)
{
    fifo *q = &p->in->q;
    size_t n = 0;
    if (p->busy || p->ready.count > 0 || p->in->collectors > 0)
        return 0;
    while (n < max && q->count > 0) {
        natsMsg *m = q->ring[q->head].msg;
        bool parsed = false;
        durable *d = is_delivery(m) ? delivery_durable(p->durables, m, &parsed) : NULL;
        if (d == NULL || d->removing || d->gone) {
            p->sort_all = true;
            break;
        }
        fifo_pop(q);
        d->taken++;
        msgs[n++] = m;
    }
    p->shown.messages += n;
    if (n > 0 || p->sort_all)
        poke_locked(p);
    return n;
}

/* True when nothing more can arrive for `only` (NULL: any durable), as far
 * as the owner has shown (in->mu held). */
static bool quiet_locked(const ib_puller *p, const durable *only)
{
    if (p->busy || p->in->q.count > 0)
        return false;
    for (const durable *d = p->durables; d != NULL; d = d->next)
        if ((only == NULL || d == only) && d->shown_live > 0)
            return false;
    return true;
}

/* Collects, for ib_puller_remove and _stop (in->mu held), the ready
 * messages of `only` (NULL: all) until nothing more can come for it or
 * `give_up` passes; false when `msgs` filled up first. */
static bool collect_locked(ib_puller *p, const durable *only, natsMsg **msgs, size_t *n, size_t max,
                           int64_t give_up)
{
    bool all = false;
    p->in->collectors++; /* the owner sorts every arrival meanwhile */
    poke_locked(p);
    for (;;) {
        *n += take_ready_locked(p, only, only == NULL, msgs + *n, max - *n);
        if (*n == max)
            break;
        if (quiet_locked(p, only) || (p->in->done && !p->busy && p->in->q.count == 0)) {
            all = true;
            break;
        }
        int64_t left = give_up - now_ms();
        if (left <= 0) {
            all = true;
            break;
        }
        struct timespec until =
            ib_clock_monotonic_deadline(left < RECONNECT_CHECK_MS ? left : RECONNECT_CHECK_MS);
        pthread_cond_timedwait(&p->in->ready, &p->in->mu, &until);
    }
    p->in->collectors--;
    return all;
}

/* Waits on in->ready (in->mu held) until `until_ms`, as the taker the
 * delivery callback wakes. */
static void wait_for_arrivals_locked(ib_puller *p, int64_t until_ms, int64_t now)
{
    struct timespec ts = ib_clock_monotonic_deadline(until_ms - now);
    p->in->taker_waits = true;
    pthread_cond_timedwait(&p->in->ready, &p->in->mu, &ts);
    p->in->taker_waits = false;
}

/* True when nothing more comes to ib_puller_next (in->mu held). */
static bool closed_locked(const ib_puller *p)
{
    return p->in->done && p->ready.count == 0 && p->in->q.count == 0 && !p->busy;
}

ib_status ib_puller_next(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms,
                         ib_error *err)
{
    int64_t start = now_ms(), last_arrival = 0;
    char d[200];

    *n = 0;
    if (max > p->batch)
        max = p->batch;
    pthread_mutex_lock(&p->in->mu);
    uint64_t ends = p->shown_ends;
    p->waiting = true;
    if (waiting_widens_locked(p))
        poke_locked(p);
    for (;;) {
        size_t got = take_ready_locked(p, NULL, false, msgs + *n, max - *n);
        got += take_arrived_locked(p, msgs + *n + got, max - *n - got);
        int64_t now = now_ms();
        if (got > 0)
            last_arrival = now;
        *n += got;
        /* a request ended by a status or its deadline brings no more: what
         * is held goes at once, as a full batch does */
        if (*n == max || (*n > 0 && p->shown_ends != ends) || closed_locked(p))
            break;
        int64_t until = *n > 0 ? last_arrival + p->flush_ms : start + wait_ms;
        if (now >= until)
            break;
        wait_for_arrivals_locked(p, until, now);
    }
    p->waiting = false;
    natsStatus failed = p->send_failed;
    p->send_failed = NATS_OK;
    bool closed = closed_locked(p);
    pthread_mutex_unlock(&p->in->mu);
    if (*n > 0)
        return IB_OK;
    if (failed != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "pull request: %s",
                            ib_nats_strerror(d, sizeof(d), failed));
    if (closed)
        return ib_error_set(err, IB_ERR_NATS, "pull: %s",
                            ib_nats_strerror(d, sizeof(d), NATS_CONNECTION_CLOSED));
    return IB_OK;
}

size_t ib_puller_take(ib_puller *p, natsMsg **msgs, size_t max)
{
    if (max > p->batch)
        max = p->batch;
    pthread_mutex_lock(&p->in->mu);
    size_t n = take_ready_locked(p, NULL, false, msgs, max);
    n += take_arrived_locked(p, msgs + n, max - n);
    pthread_mutex_unlock(&p->in->mu);
    return n;
}

void ib_puller_batch_took(ib_puller *p, int64_t batch_ms)
{
    pthread_mutex_lock(&p->in->mu);
    bool changes = took_changes_locked(p, batch_ms);
    p->batch_ms = batch_ms;
    p->holding = false;
    if (changes)
        poke_locked(p);
    pthread_mutex_unlock(&p->in->mu);
}

void ib_puller_hold(ib_puller *p)
{
    pthread_mutex_lock(&p->in->mu);
    p->holding = true;
    poke_locked(p);
    pthread_mutex_unlock(&p->in->mu);
}

static durable *find_locked(ib_puller *p, const char *stream, const char *name)
{
    for (durable *d = p->durables; d != NULL; d = d->next)
        if (!d->gone && strcmp(d->stream, stream) == 0 && strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

ib_status ib_puller_add(ib_puller *p, const ib_puller_durable *o, ib_error *err)
{
    if (o->stream == NULL || o->stream[0] == '\0' || o->durable == NULL || o->durable[0] == '\0')
        return ib_error_set(err, IB_ERR_INVALID_ARG, "puller: a durable needs a stream and a name");
    durable *d = calloc(1, sizeof(*d));
    if (d == NULL || (d->stream = strdup(o->stream)) == NULL ||
        (d->name = strdup(o->durable)) == NULL ||
        (d->next_subject =
             text_of("%s.CONSUMER.MSG.NEXT.%s.%s", p->prefix, o->stream, o->durable)) == NULL ||
        (d->ack_prefix = text_of("$JS.ACK.%s.%s.", o->stream, o->durable)) == NULL) {
        durable_free(d);
        return ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
    }
    d->ack_prefix_len = strlen(d->ack_prefix);
    d->ack_wait_ms = o->ack_wait_ms;
    ib_status st = IB_OK;
    pthread_mutex_lock(&p->in->mu);
    if (p->stopping)
        st = ib_error_set(err, IB_ERR_CLOSED, "puller: stopped; cannot add durable %s", d->name);
    else if (find_locked(p, d->stream, d->name) != NULL)
        st = ib_error_set(err, IB_ERR_INVALID_ARG,
                          "puller: durable %s of stream %s is pulled already", d->name, d->stream);
    if (st == IB_OK) {
        d->next = p->durables;
        p->durables = d;
        poke_locked(p);
    }
    pthread_mutex_unlock(&p->in->mu);
    if (st != IB_OK)
        durable_free(d);
    return st;
}

ib_status ib_puller_remove(ib_puller *p, const char *stream, const char *name, natsMsg **msgs,
                           size_t *n, size_t max, int64_t wait_ms)
{
    int64_t give_up = now_ms() + wait_ms;
    *n = 0;
    pthread_mutex_lock(&p->in->mu);
    durable *d = find_locked(p, stream, name);
    if (d != NULL) {
        d->removing = true; /* no request after this */
        poke_locked(p);
        if (collect_locked(p, d, msgs, n, max, give_up)) {
            /* from now on the owner naks what still comes for it */
            d->gone = true;
            poke_locked(p);
        }
    }
    pthread_mutex_unlock(&p->in->mu);
    return IB_OK;
}

void ib_puller_ask_until(ib_puller *p, const char *stream, const char *name, int64_t until_ms)
{
    pthread_mutex_lock(&p->in->mu);
    durable *d = find_locked(p, stream, name);
    if (d != NULL) {
        d->ask_until = until_ms;
        poke_locked(p); /* a later limit lets it ask again */
    }
    pthread_mutex_unlock(&p->in->mu);
}

ib_status ib_puller_stop(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms)
{
    int64_t give_up = now_ms() + wait_ms;
    *n = 0;
    pthread_mutex_lock(&p->in->mu);
    p->stopping = true; /* no request after this */
    poke_locked(p);
    bool subscribed = p->sub != NULL;
    bool all = subscribed ? collect_locked(p, NULL, msgs, n, max, give_up) : true;
    if (!subscribed)
        *n = take_ready_locked(p, NULL, true, msgs, max);
    pthread_mutex_unlock(&p->in->mu);
    /* A full `msgs` may leave more behind: the caller calls again. */
    if (all && *n < max)
        close_subscription(p);
    return IB_OK;
}

size_t ib_puller_hand_back(ib_puller *p, natsConnection *nc, natsMsg **buf, size_t cap,
                           int64_t wait_ms)
{
    const int64_t deadline = now_ms() + wait_ms;
    size_t n = 0, total = 0;
    do {
        int64_t left = deadline - now_ms();
        n = 0;
        ib_puller_stop(p, buf, &n, cap, left > 0 ? left : 0);
        for (size_t i = 0; i < n; i++) {
            ib_nak(nc, buf[i], 0, NULL);
            natsMsg_Destroy(buf[i]);
            buf[i] = NULL;
        }
        total += n;
    } while (n == cap);
    return total;
}

ib_puller_condition ib_puller_condition_get(const ib_puller *p)
{
    ib_puller_condition c = IB_PULLER_OK;
    pthread_mutex_lock(&p->in->mu);
    for (const durable *d = p->durables; d != NULL; d = d->next)
        if (!d->gone && d->shown_cond > c)
            c = d->shown_cond;
    pthread_mutex_unlock(&p->in->mu);
    return c;
}

void ib_puller_stats_get(const ib_puller *p, ib_puller_stats *out)
{
    pthread_mutex_lock(&p->in->mu);
    *out = p->shown;
    pthread_mutex_unlock(&p->in->mu);
}

/* ---- creating and freeing ---- */

/* Subscribes to "<inbox>.*" and starts the flushers and the owner, with
 * signals blocked, so nats.c's delivery thread for it and ours leave them
 * to the host's own threads. */
static ib_status start(ib_puller *p, ib_error *err)
{
    char wildcard[256], d[200];
    sigset_t all, old;
    snprintf(wildcard, sizeof(wildcard), "%s.*", p->inbox);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    natsStatus s = natsConnection_Subscribe(&p->sub, p->nc, wildcard, on_inbox_msg, p->in);
    if (s == NATS_OK) {
        p->subscribed = true;
        s = natsSubscription_SetOnCompleteCB(p->sub, on_inbox_complete, p->in);
    }
    bool flushers = s == NATS_OK && flusher_start(&p->fl, p->nc);
    int rc = flushers ? pthread_create(&p->owner, NULL, owner_main, p) : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (s != NATS_OK)
        return ib_error_set(err, IB_ERR_NATS, "puller: subscribe: %s",
                            ib_nats_strerror(d, sizeof(d), s));
    if (!flushers || rc != 0)
        return ib_error_set(err, IB_ERR_IO, "puller: cannot start its threads");
    p->owner_started = true;
    return IB_OK;
}

ib_status ib_puller_create(ib_puller **out, ib_nats *conn, const ib_puller_options *o,
                           ib_error *err)
{
    natsInbox *inbox = NULL;
    ib_status st = IB_OK;
    ib_puller *p = calloc(1, sizeof(*p));

    *out = NULL;
    if (p == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
    if (o->batch == 0 || o->batch > IB_PULLER_MAX_BATCH) {
        free(p);
        return ib_error_set(err, IB_ERR_INVALID_ARG, "pull batch size %zu is out of range 1..%d",
                            o->batch, IB_PULLER_MAX_BATCH);
    }
    p->conn = conn;
    p->nc = ib_nats_connection(conn);
    p->reconnects_seen = ib_nats_reconnects(conn);
    p->batch = o->batch;
    p->expires_ms = o->expires_ms > 0 ? o->expires_ms : IB_PULLER_DEFAULT_EXPIRES_MS;
    p->flush_ms = o->flush_ms > 0 ? o->flush_ms : 5;
    if ((p->in = inbox_new()) == NULL) {
        free(p);
        return ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
    }
    if ((p->prefix = strdup(ib_nats_api_prefix(conn))) == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "puller: out of memory");
        goto fail;
    }
    if (natsInbox_Create(&inbox) != NATS_OK || (p->inbox = strdup(inbox)) == NULL) {
        st = ib_error_set(err, IB_ERR_NOMEM, "puller: cannot create an inbox");
        goto fail;
    }
    natsInbox_Destroy(inbox);
    inbox = NULL;
    if ((st = start(p, err)) != IB_OK)
        goto fail;
    if (o->durable != NULL) {
        ib_puller_durable first = {
            .stream = o->stream, .durable = o->durable, .ack_wait_ms = o->ack_wait_ms};
        if ((st = ib_puller_add(p, &first, err)) != IB_OK)
            goto fail;
    }
    /* A batch never exceeds IB_PULLER_MAX_BATCH messages; the default pending limits
     * (65536 messages, 64 MiB) already bound memory. */
    *out = p;
    return IB_OK;
fail:
    natsInbox_Destroy(inbox);
    ib_puller_free(p);
    return st;
}

void ib_puller_free(ib_puller *p)
{
    if (p == NULL)
        return;
    if (p->owner_started) {
        pthread_mutex_lock(&p->in->mu);
        p->quit = true;
        poke_locked(p);
        pthread_mutex_unlock(&p->in->mu);
        pthread_join(p->owner, NULL);
    }
    flusher_stop(&p->fl);
    close_subscription(p);
    /* what the owner sorted and never showed, and the ready queue */
    fifo_nak_all(&p->t.sorted, p->nc);
    fifo_nak_all(&p->t.naks, p->nc);
    fifo_nak_all(&p->t.arrivals, p->nc);
    fifo_nak_all(&p->ready, p->nc);
    free(p->t.sorted.ring);
    free(p->t.naks.ring);
    free(p->t.arrivals.ring);
    free(p->ready.ring);
    pthread_mutex_lock(&p->in->mu);
    bool done = p->in->done || !p->subscribed;
    pthread_mutex_unlock(&p->in->mu);
    if (done)
        inbox_free(p->in, p->nc);
    else
        ib_log_kv(IB_SEV_WARN,
                  "puller: the inbox's last callback did not return; its queue is left in place",
                  NULL);
    for (durable *d = p->durables; d != NULL;) {
        durable *next = d->next;
        d->next = p->t.freed;
        p->t.freed = d;
        d = next;
    }
    p->durables = NULL;
    settle_turn(p);
    free(p->inbox);
    free(p->prefix);
    free(p);
}
