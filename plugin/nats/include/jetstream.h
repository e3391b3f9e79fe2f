/* SPDX-License-Identifier: Apache-2.0 */
/* The NATS part: everything that talks to the server on behalf of one
 * ibus process. Sections, in the order a message meets them: the
 * connection, binding the stream and durable consumer, pulling batches,
 * reading delivery metadata, acknowledging, dead-lettering, and the bus
 * proxy through which handlers publish. Knows nothing of plugins' handlers
 * or recorders. */
#ifndef IB_JETSTREAM_H
#define IB_JETSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "dead_letter.h"
#include "error.h"
#include "event.h"
#include "infinity_bus/plugin.h"
#include "trace.h"

/* The NATS connection of an ibus process: options, credentials, TLS,
 * reconnect policy and connection-state tracking.
 *
 * nats.c's default reconnect policy gives up after 60 attempts (about two
 * minutes) and then closes the connection for good; a worker must outlive
 * any server restart, so we reconnect forever with jitter, and report a
 * closed connection through ib_nats_closed() so the host can exit non-zero
 * and let its supervisor restart it. */
typedef struct ib_nats_config {
    const char *url;            /* comma-separated server URLs */
    const char *name;           /* connection name shown by the server */
    const char *creds_file;     /* JWT + seed credentials file */
    const char *nkey_seed_file; /* NKey seed file (public key is derived) */
    const char *token;
    const char *user;
    const char *password;
    const char *tls_ca;   /* CA bundle; implies TLS */
    const char *tls_cert; /* client certificate chain; needs tls_key */
    const char *tls_key;
    int64_t connect_timeout_ms; /* per attempt; 0 = 2000 */
    int64_t reconnect_wait_ms;  /* 0 = 250 */
    bool retry_initial_connect; /* keep trying in the background if the server is not up yet */
    /* Where JetStream is reached (js_api.h): the JetStream domain of
     * another server (a leaf node's, a hub's), or the API prefix an account
     * import gives; at most one; NULL or "" = the server's own. */
    const char *js_domain;
    const char *js_api_prefix;
} ib_nats_config;

typedef struct ib_nats ib_nats;

/* Connects (or, with retry_initial_connect, starts connecting) and creates
 * a JetStream context, in the domain or under the API prefix the config
 * names. `*out` is owned by the caller; ib_nats_close()
 * flushes and frees it. Errors: IB_ERR_CONFIG for an unusable URL,
 * JetStream domain or API prefix, credentials or TLS files (the message names the setting and its
 * value, e.g. "credentials file F: ..."), IB_ERR_NATS when the server cannot be reached. */
ib_status ib_nats_connect(ib_nats **out, const ib_nats_config *config, ib_error *err);

/* Borrowed handles, valid until ib_nats_close(). */
natsConnection *ib_nats_connection(ib_nats *n);
jsCtx *ib_nats_jetstream(ib_nats *n);
/* The JetStream API prefix of the context, without a trailing '.':
 * "$JS.API", "$JS.<domain>.API" or the configured prefix. For subjects of
 * the API sent by hand. Valid until ib_nats_close(). */
const char *ib_nats_api_prefix(const ib_nats *n);

/* Connection state, safe from any thread. */
bool ib_nats_is_connected(const ib_nats *n);
bool ib_nats_is_closed(const ib_nats *n);
/* How many times the connection came back after a loss, so far: a caller
 * that must resend something after a reconnect compares it with the count
 * it saw last. */
uint64_t ib_nats_reconnects(const ib_nats *n);

/* Waits until connected, closed, `*stop` becomes true or `timeout_ms`
 * passes (<0 = forever). Returns true when connected. */
bool ib_nats_wait_connected(ib_nats *n, const volatile int *stop, int64_t timeout_ms);

/* Why the connection last failed, in nats.c's words (for example
 * "Authorization Violation") without its source location, copied into
 * `buf`; while a first connect is being retried, why its first attempt
 * failed; "" when there is nothing to report.
 * Meant for the message of a process that gives up because the connection
 * was closed for good. Returns `buf`. */
const char *ib_nats_last_error(ib_nats *n, char *buf, size_t len);

/* Whether the server has refused this connection a permission since it
 * connected (a "Permissions Violation", which nats.c reports only to the
 * error callback: the request that met it just times out). When true,
 * `buf` gets the server's words, as ib_nats_last_error gives them. */
bool ib_nats_denied(ib_nats *n, char *buf, size_t len);

/* Flushes pending publishes (acks) with a timeout, drains and frees.
 * NULL is a no-op. */
void ib_nats_close(ib_nats *n, int64_t flush_timeout_ms);

/* Describes a nats.c status with the library's last error text, for error
 * messages: "<status text>: <detail>". Returns `buf`. */
const char *ib_nats_strerror(char *buf, size_t len, natsStatus s);

/* Names and subjects, checked before they reach the protocol (names.c).
 * Each answers NULL when the text is usable, else why not, as a phrase to
 * follow the option's name ("holds a control byte"); a static string.
 * Callers name the option: "--durable 'a.b': holds '.', '*' or '>' ...". */

/* A stream or consumer (durable) name: 1-255 bytes, no space, no control
 * byte, no '.', '*' or '>'. */
const char *ib_nats_name_problem(const char *name);

/* Flags of ib_nats_subject_problem. */
#define IB_SUBJECT_WILDCARDS 1u  /* a filter: '*' and a last '>' are tokens */
#define IB_SUBJECT_NOT_SYSTEM 2u /* refuse subjects starting with $ or _INBOX */

/* A subject: 1-1024 bytes, no space, no control byte, no empty token, and
 * wildcards only with IB_SUBJECT_WILDCARDS. */
const char *ib_nats_subject_problem(const char *subject, unsigned flags);

/* Offset of the first control byte (below 0x20, or 0x7f) of `s`, or -1;
 * -1 for NULL. For texts that become headers (consumer identities). */
long ib_nats_control_at(const char *s);

/* Whether filter `outer` takes in every subject filter `inner` does ('*'
 * one token, a last '>' one or more; both valid filters): "orders.>"
 * covers "orders.3.*", "orders.*" does not (subject_match.c). */
bool ib_nats_subject_covers(const char *outer, const char *inner);

/* Whether some subject matches both filters `a` and `b`: a stream's
 * subjects and a consumer's filter, two streams' subjects. */
bool ib_nats_subjects_overlap(const char *a, const char *b);

/* Binding to (and on request creating) the stream and durable consumer.
 *
 * A durable created by js_PullSubscribe belongs to that subscription and
 * is deleted when it unsubscribes or drains, for every process. We never
 * let nats.c own the durable: it is created explicitly with js_AddConsumer
 * (only when asked to create it) and otherwise looked up by stream and name, so a
 * subscriber's shutdown never deletes a shared durable. */
typedef struct ib_consumer_setup {
    const char *stream;
    const char *durable;
    const char *filter_subject;      /* may be NULL: the whole stream */
    bool create;                     /* create what is missing */
    const char *stream_subjects;     /* comma-separated subjects for a new stream */
    int stream_replicas;             /* replicas of the streams it creates; <= 0 = 1 */
    const char *dead_letter_subject; /* with create: also ensure a stream captures it */
    const char *dead_letter_owner;   /* the name that stream follows (DLQ_<it>); NULL: durable */
    int64_t ack_wait_ms;
    int64_t max_deliver;       /* informational: a created consumer is unlimited */
    const int64_t *backoff_ms; /* may be NULL */
    size_t backoff_len;
    int64_t max_ack_pending;
    /* How the host will pull, checked against the consumer's limits, which
     * would otherwise refuse every pull request with a 409: */
    size_t batch;             /* messages per pull request; 0 = not checked */
    int64_t pull_expires_ms;  /* lifetime of a pull request; 0 = not checked */
    int64_t waiting_requests; /* pull requests that may wait on the server at once */
    /* With create: MaxAge (ms) and MaxBytes of a new stream; 0 = none. An
     * existing stream keeps its own (a warning says when they differ). */
    int64_t stream_max_age_ms;
    int64_t stream_max_bytes;
    /* With create: the same for a new dead-letter stream, which at
     * MaxBytes refuses new dead letters (DiscardNew) rather than drop old
     * ones: a refused dead letter leaves its original nak'ed, not lost. */
    int64_t dead_letter_max_age_ms;
    int64_t dead_letter_max_bytes;
} ib_consumer_setup;

/* What the host needs to know of the consumer as the server has it. */
typedef struct ib_consumer_facts {
    int64_t ack_wait_ms;
    int64_t max_deliver; /* -1 or 0 = unlimited */
    uint64_t num_pending;
    bool exists; /* ib_consumer_facts_get: false when the server says there is no such
                    consumer (or stream); the other fields are 0 then */
    /* appended: the longest BackOff step in ms (a redelivery wait after an
     * ack timeout), for the redelivery horizon; 0 without BackOff */
    int64_t backoff_max_ms;
    /* appended: messages delivered to some subscriber and not acked yet */
    int64_t num_ack_pending;
    /* appended: the consumer's filter subject; "" for the whole stream
     * (cut when longer than it holds, which a valid subject never is) */
    char filter_subject[1032];
} ib_consumer_facts;

/* Looks the consumer up (creating stream, dead-letter stream and consumer
 * first when `s->create` and they are missing) and reports its facts.
 * Errors: IB_ERR_CONFIG when the consumer does not exist and creation was
 * not asked for, when it is a push consumer or does not use explicit acks,
 * or when its MaxRequestBatch, MaxRequestExpires or MaxWaiting would
 * refuse the pull requests described by `s->batch`, `s->pull_expires_ms`
 * and `s->waiting_requests` (the message names the setting and both
 * values); IB_ERR_NATS for server errors. */
ib_status ib_consumer_ensure(ib_consumer_facts *out, jsCtx *js, const ib_consumer_setup *s,
                             ib_error *err);

/* Reads the consumer's current facts (pending counts), for metrics, and
 * whether it still exists. A consumer or stream that is not found is an
 * answer: IB_OK with `out->exists` false. Errors: IB_ERR_NATS when the
 * server cannot be asked (disconnected, timeout): existence unknown. */
ib_status ib_consumer_facts_get(ib_consumer_facts *out, jsCtx *js, const char *stream,
                                const char *durable, ib_error *err);

/* Makes `durable` deliver again, in stream order, everything after its
 * ack floor, when something it delivered is not acked (a partition's
 * previous owner died holding it, or nak'ed it to come back later): the
 * consumer is deleted
 * and made again with its own settings, starting at the floor's next
 * sequence (*from; 0 when nothing waited and nothing changed). Those
 * messages are then redelivered at once and before any later one,
 * instead of after AckWait behind later ones; messages acked above the
 * floor come again, and their markers drop them. Only for a consumer
 * that one process at a time pulls (a partition's, under its lease).
 * Errors: as ib_consumer_ensure's. */
ib_status ib_consumer_rewind(uint64_t *from, jsCtx *js, const char *stream, const char *durable,
                             ib_error *err);

/* Reads the stream's MaxAge, in ms, into `*max_age_ms`: how long the
 * stream keeps a message, hence how long it can still deliver it (0: no
 * age limit). Errors: IB_ERR_CONFIG when the stream does not exist (the
 * message names it), IB_ERR_NATS when the server cannot be asked. */
ib_status ib_stream_max_age_get(int64_t *max_age_ms, jsCtx *js, const char *stream, ib_error *err);

/* Pulling messages from JetStream durable pull consumers in batches.
 *
 * One puller serves any number of durables (of one or several streams),
 * added and removed while it runs, over one inbox subscription. Debian's
 * nats.c 3.4.1 overflows a heap buffer in natsSubscription_Fetch /
 * _FetchRequest when messages left over from an expired pull exceed half of
 * the next batch (fixed upstream in 3.9.0). We therefore do not use Fetch:
 * the puller subscribes to "<inbox>.*" with a plain core-NATS subscription
 * (asynchronous, queueing into the puller: natsSubscription_NextMsg would
 * destroy any empty message with a "Status: 503" header) and publishes pull
 * requests ({"batch":N,"expires":ns}) to
 * <api prefix>.CONSUMER.MSG.NEXT.<stream>.<durable>, request number k with
 * the reply subject "<inbox>.<k>". Every message that reaches the inbox is
 * handed out, whichever request it answers, so leftovers from an expired
 * request are simply the next messages; nothing is copied into a
 * fixed-size array sized by the request. A delivery is told to its durable
 * by its $JS.ACK reply subject, a status by its request number. Status
 * messages (404 no messages, 408 request expired, 409 conflicts, 100
 * heartbeats) are never handed out. A status is a message WITHOUT a
 * $JS.ACK reply subject: a delivery that looks like one (an empty body
 * with a Status header, published by anyone) is handed out like any
 * other, so the host can dead-letter it.
 *
 * How far ahead of the caller the puller asks is its own decision, made by
 * one rule from facts the caller gives (ib_puller_batch_took,
 * ib_puller_hold) and each durable's AckWait: messages pulled ahead wait
 * unseen by the caller's +WPI, so they are pulled ahead only while batches
 * take a small part of AckWait. puller.c's opening comment describes the
 * rule, the threads and the invariants.
 *
 * A refused request (409 such as "Exceeded MaxRequestBatch of 8", or any
 * status other than 100, 404 and 408) is logged with the server's text,
 * at most once per 10 s for each distinct text, and that durable's next
 * request waits 50 ms, doubling up to 5 s, until a message or a normal
 * 404/408 arrives. ib_puller_condition_get() tells the host whether a
 * consumer may be gone.
 *
 * A request ends locally when its batch has arrived, when its status
 * arrives, or at its expiry plus a margin (as long as the expiry, at most
 * 500 ms) in case the status was lost. Messages still arriving after that
 * are leftovers, counted in the stats and handed out like any other.
 *
 * A reconnect of the connection, or a 409 "Server Shutdown", ends every
 * request in flight at once: a request sent into a closing socket, or to
 * a server on its way out, is never answered, and waiting for its expiry
 * would idle the consumer for up to the whole expiry. The next request
 * goes within 100 ms of the reconnect, whatever the expiry and any
 * back-off.
 *
 * Acks go to each message's reply subject over core NATS (see acknowledging
 * below). One thread calls ib_puller_next; ib_puller_add, _remove,
 * _batch_took, _hold, _condition_get and _stats_get may be called from any
 * thread; ib_puller_free from one, once nothing else uses the puller. */
typedef struct ib_puller ib_puller;

/* Lifetime of a pull request when the options give none. */
#define IB_PULLER_DEFAULT_EXPIRES_MS 1000

/* The most pull requests of one durable that can wait on the server at
 * once: the two the keep-ahead rule allows at most (see puller.c), and
 * one that ended locally (at its deadline, or at a reconnect) but reached
 * the server late (buffered across the reconnect). A consumer's
 * MaxWaiting must leave room for them. */
#define IB_PULLER_MAX_WAITING 3

/* The largest batch a puller asks for; a caller that takes the size from
 * a user checks it against this first and names its own option. */
#define IB_PULLER_MAX_BATCH 4096

/* A durable to pull from. The strings are copied. */
typedef struct ib_puller_durable {
    const char *stream;
    const char *durable;
    /* The consumer's AckWait: messages are pulled ahead of the caller only
     * while its batches take a small part of it. 0 = unknown: nothing is
     * pulled ahead of a caller that is working on a batch. */
    int64_t ack_wait_ms;
} ib_puller_durable;

typedef struct ib_puller_options {
    /* The first durable, as ib_puller_add would take it; NULL `durable` =
     * none (add durables later). */
    const char *stream;
    const char *durable;
    int64_t ack_wait_ms;
    size_t batch;       /* messages per pull request, 1..IB_PULLER_MAX_BATCH */
    int64_t expires_ms; /* lifetime of one pull request on the server; 0 = default */
    int64_t flush_ms;   /* once a message arrived, wait at most this for more; 0 = 5 */
} ib_puller_options;

/* Subscribes to a new inbox on `conn`'s connection (BORROWED; must outlive
 * the puller), whose reconnect count it follows, starts the puller's
 * thread and adds the options' durable, if any. `*out` is freed with
 * ib_puller_free(). Errors: IB_ERR_INVALID_ARG for a batch outside
 * 1..IB_PULLER_MAX_BATCH (checked before `conn` is used), IB_ERR_NOMEM,
 * IB_ERR_NATS, IB_ERR_IO (the thread could not start). */
ib_status ib_puller_create(ib_puller **out, ib_nats *conn, const ib_puller_options *options,
                           ib_error *err);

/* Starts pulling from a durable; its messages come from ib_puller_next
 * with the others'. The puller does not create the consumer: it must
 * exist (a pull request to a missing one is refused or goes unanswered,
 * and ib_puller_condition_get says so). Errors: IB_ERR_INVALID_ARG when a
 * name is missing or this stream's durable is already pulled,
 * IB_ERR_CLOSED after ib_puller_stop, IB_ERR_NOMEM. */
ib_status ib_puller_add(ib_puller *p, const ib_puller_durable *durable, ib_error *err);

/* Stops pulling from `stream`'s `durable` and hands back, in `msgs` (up
 * to `max`), its messages the puller holds and those still arriving for
 * its requests in flight, until they end or `wait_ms` passes; the caller
 * owns them and naks them (ib_nak) so they are redelivered at once. When
 * `*n` == `max` more may be waiting: call again (with the time left). Once
 * it returns with `*n` < `max` the durable is gone: nothing of it comes
 * from ib_puller_next any more, and a message that still arrives for it
 * (a request that outlived `wait_ms`) is nak'ed by the puller. A durable
 * the puller does not pull from: `*n` = 0, nothing happens. Returns
 * IB_OK. */
ib_status ib_puller_remove(ib_puller *p, const char *stream, const char *durable, natsMsg **msgs,
                           size_t *n, size_t max, int64_t wait_ms);

/* Sends no pull request for `stream`'s `durable` whose expiry would reach
 * `until_ms` (monotonic ms; 0 = no limit), so nothing the server delivers
 * for this process's requests can arrive after it: for a partition whose
 * lease this process must not act on past that moment (the requests sent
 * before it end by then). A later limit lets it ask again. A durable not
 * pulled: nothing happens. Any thread. */
void ib_puller_ask_until(ib_puller *p, const char *stream, const char *durable, int64_t until_ms);

/* Collects up to `max` (<= batch) messages of any durable into `msgs`,
 * waiting up to `wait_ms` for the first one and then at most flush_ms for
 * each further one. `*n` is the count (0 after a quiet wait). Each
 * message's reply subject names its stream and durable (ib_jsack_parse),
 * where its ack goes. The caller owns the messages and destroys them with
 * natsMsg_Destroy after acking. Errors, only when no message came:
 * IB_ERR_NATS when a pull request could not be published since the last
 * call (the puller retries; the caller waits and calls again: the
 * connection may be reconnecting) or when the subscription was closed
 * with the connection. */
ib_status ib_puller_next(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms,
                         ib_error *err);

/* What ib_puller_next would hand out now, without waiting: up to `max`
 * (<= batch) messages that have arrived, into `msgs`; returns how many (0
 * when none is there). For the caller of ib_puller_next, on its thread:
 * a batch that takes in more while its last calls run. */
size_t ib_puller_take(ib_puller *p, natsMsg **msgs, size_t max);

/* Tells the puller how long the caller took over its last batch (from
 * ib_puller_next's return until it was done with the messages), and ends
 * a hold. From this and each durable's AckWait the puller decides how far
 * to pull ahead while the caller works: two batches while a batch takes
 * less than AckWait/8, one while less than AckWait/4, none beyond that.
 * Before the first call it assumes quick batches. */
void ib_puller_batch_took(ib_puller *p, int64_t batch_ms);

/* Tells the puller the caller holds back (every handler's circuit is
 * open): nothing is pulled ahead while it works, until the next
 * ib_puller_batch_took. A caller waiting in ib_puller_next still gets a
 * batch. */
void ib_puller_hold(ib_puller *p);

/* Sends no further request for any durable and collects, in `msgs` (up to
 * `max`), the messages the puller holds or that still arrive for the
 * requests in flight, until they end (a status message or their expiry) or
 * `wait_ms` passes. When `*n` < `max` it has unsubscribed: nothing more
 * will come. When `*n` == `max` more may be waiting: call again (with the
 * time left). The caller naks what it gets back, so those messages are
 * redelivered to another process at once instead of after AckWait. */
ib_status ib_puller_stop(ib_puller *p, natsMsg **msgs, size_t *n, size_t max, int64_t wait_ms);

/* ib_puller_stop until nothing more comes or `wait_ms` passes, naking on
 * `nc` (BORROWED) and destroying every message it gives back, with `buf`
 * (room for `cap`; its slots are left NULL) as scratch: what was pulled
 * and not started goes to another process at once. Returns how many
 * messages were handed back. */
size_t ib_puller_hand_back(ib_puller *p, natsConnection *nc, natsMsg **buf, size_t cap,
                           int64_t wait_ms);

/* What the latest answers said about a consumer. */
typedef enum ib_puller_condition {
    IB_PULLER_OK = 0,        /* messages, or a request that ended normally (404/408) */
    IB_PULLER_REFUSED,       /* the last request was refused (409...); backing off */
    IB_PULLER_CONSUMER_GONE, /* 409 "Consumer Deleted", or 503 (nobody answers the request
                                subject): the consumer may be gone; backing off */
} ib_puller_condition;

/* The worst condition among the durables pulled from, each since its last
 * message or status of a request in flight. */
ib_puller_condition ib_puller_condition_get(const ib_puller *p);

/* Counters for metrics and tests, over every durable. */
typedef struct ib_puller_stats {
    uint64_t requests;  /* pull requests sent */
    uint64_t messages;  /* messages handed out by ib_puller_next, _remove and _stop */
    uint64_t statuses;  /* status messages seen */
    uint64_t leftovers; /* messages that came after their request had ended locally */
    uint64_t refusals;  /* requests the server refused (409 and other errors) */
    uint64_t abandoned; /* times the requests in flight were ended by a reconnect or a 409
                           "Server Shutdown" */
    uint64_t nak_late;  /* messages of a removed durable that came late, nak'ed by the puller */
} ib_puller_stats;
void ib_puller_stats_get(const ib_puller *p, ib_puller_stats *out);

/* Stops the puller's thread, unsubscribes, naks the messages it still
 * holds and frees. NULL is a no-op. */
void ib_puller_free(ib_puller *p);

/* JetStream delivery metadata, read from a message's ack reply subject.
 *
 * We consume with pull requests sent over core NATS (see pulling above), so
 * nats.c's natsMsg_GetMetaData (which needs a JetStream subscription) is not
 * available: this parser reads the same facts from the reply subject
 *   $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
 * or the newer form with a domain and account hash
 *   $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>...]
 */
typedef struct ib_jsack_meta {
    const char *stream; /* BORROWED slice of the subject; not NUL-terminated */
    size_t stream_len;
    const char *consumer; /* BORROWED slice; not NUL-terminated */
    size_t consumer_len;
    uint64_t delivered; /* delivery count, 1 on the first delivery */
    uint64_t stream_seq;
    uint64_t consumer_seq;
    int64_t timestamp_ns; /* server time of the original publish */
    uint64_t pending;     /* messages left for the consumer after this one */
} ib_jsack_meta;

/* Parses `len` bytes of `reply` (an ack subject). Returns IB_OK, or
 * IB_ERR_DECODE with a reason in `err` when it is not an ack subject. The
 * slices in `*out` point into `reply`. */
ib_status ib_jsack_parse(ib_jsack_meta *out, const char *reply, size_t len, ib_error *err);

/* Trace context (trace.h) in NATS messages.
 *
 * A message continues a trace when it carries a valid W3C traceparent: in
 * a NATS header "traceparent" (also read as "Traceparent", Go's canonical
 * spelling; nats.c matches names exactly), else in a header of its Event
 * (any case). A header given twice, or malformed, is not used. The
 * tracestate is read beside the traceparent it came with (several lines
 * joined by ","); a malformed one is dropped and the traceparent kept. */
#define IB_TRACEPARENT_HEADER "traceparent"
#define IB_TRACESTATE_HEADER "tracestate"

/* Reads the trace `msg` carries (its headers, then `event`'s; either may
 * be NULL) into `out`: the sender's context, to be continued with
 * ib_trace_child. Returns false, with `out` zeroed, when neither carries a
 * valid traceparent. Reads only. */
bool ib_msg_trace_read(ib_trace *out, natsMsg *msg, const ib_event *event);

/* Adds to `dst` every header of `src` (each with all its values) whose
 * name `dropped` (NULL: none) does not refuse: what a message made from
 * another (a dead letter, a replay, a forward) keeps of the producer's
 * own headers. Returns nats.c's status; NATS_OK when `src` has none. */
natsStatus ib_msg_copy_headers(natsMsg *dst, natsMsg *src, bool (*dropped)(const char *key));

/* Sets `t`'s traceparent (and tracestate, when it has one) as headers of
 * `msg`, replacing any. Returns nats.c's status. */
natsStatus ib_msg_trace_set(natsMsg *msg, const ib_trace *t);

/* True when one of the `n` headers is a traceparent (any case): an event
 * that names its own trace keeps it. */
bool ib_trace_headers_name_one(const ib_event_header *headers, size_t n);

/* Acknowledging JetStream messages over core NATS.
 *
 * The puller receives messages on a plain subscription, so nats.c's
 * natsMsg_Ack family (which needs a JetStream subscription) does not apply;
 * these publish the JetStream ack protocol to the message's reply subject.
 * Acks are fire-and-forget like nats.c's natsMsg_Ack: a lost ack means a
 * redelivery, which the recorder turns into a dropped duplicate. Flush the
 * connection before exit so the last acks are not left in a buffer.
 * Thread-safe (nats.c publishes are). */
/* "+ACK": done. */
ib_status ib_ack(natsConnection *nc, natsMsg *msg, ib_error *err);

/* "-NAK": redeliver after `delay_ms` (0 = at once). A plain nak ignores the
 * consumer's BackOff, hence the explicit delay. */
ib_status ib_nak(natsConnection *nc, natsMsg *msg, int64_t delay_ms, ib_error *err);

/* "+TERM": never redeliver (after a successful dead-letter publish). */
ib_status ib_term(natsConnection *nc, natsMsg *msg, ib_error *err);

/* "+WPI": still working; restarts the AckWait timer. */
ib_status ib_in_progress(natsConnection *nc, natsMsg *msg, ib_error *err);

/* Dead-lettering: moving a message that can never succeed to the
 * dead-letter subject without losing it.
 *
 * The message is published to the dead-letter subject with its original
 * bytes untouched, the original's own headers (except Nats-Msg-Id,
 * Nats-Expected-*, Nats-Rollup and Nats-TTL, which JetStream would act on
 * when the dead letter is published, and any Ibus-* ones), and headers
 * that give the reason and where it came from:
 *   Ibus-Reason          decode | invalid-id | max-deliver | rejected
 *                        (ib_dead_letter_reason_str of the reason)
 *   Ibus-Error           a one-line description (never payload bytes)
 *   Ibus-Subject         the subject it was published on
 *   Ibus-Stream          the stream it was read from
 *   Ibus-Consumer        the durable consumer that read it
 *   Ibus-Handler         the consumer identity of the handler whose verdict
 *                        it was ("<durable>/<plugin>/<handler>"), when one
 *                        rejected it or used its attempts; Ibus-Error then
 *                        gives that handler's reason
 *   Ibus-Stream-Seq      its stream sequence
 *   Ibus-Delivery-Count  the delivery on which it was dead-lettered
 *   Ibus-Event-Id, Ibus-Event-Type   when the event could be decoded
 *   Ibus-Trace-Id, Ibus-Span-Id      when the delivery continued a trace
 *                        (trace.h): the trace and the host's span, as the
 *                        log lines of that delivery name them
 * Only once JetStream acknowledges that publish may the original be
 * terminated (+TERM), and the caller terminates it only after what must
 * follow a dead letter is done (the host ends the event's attempts): a
 * crash between the publish and the +TERM leaves the original to come
 * back, be dead-lettered again and finish then. If the publish fails (no
 * stream captures the subject, timeout, disconnection) the original is
 * nak'ed with a delay and comes back later: nothing is lost. The publish
 * carries Nats-Msg-Id
 * "<stream>:<durable>:<seq>", so a repeat after a lost +TERM is dropped by
 * the dead-letter stream's duplicate window, while two durables that
 * dead-letter the same message into one stream both keep theirs. */
typedef struct ib_dead_letter_info {
    ib_dead_letter_reason reason;
    const char *detail; /* may be NULL */
    const char *stream; /* required */
    const char *consumer;
    uint64_t stream_seq;
    uint64_t delivery_count;
    const char *event_id;   /* may be NULL */
    const char *event_type; /* may be NULL */
    /* appended: the trace of the delivery that dead-lettered it (its
     * trace_id and span_id, as its log lines name them); NULL = none */
    const ib_trace *trace;
    /* appended: the handler whose verdict dead-lettered it (its consumer
     * identity); NULL = none (decode, invalid-id, conflict) */
    const char *handler;
} ib_dead_letter_info;

/* Publishes `msg`'s bytes to `subject` as its dead letter and waits for
 * JetStream's ack. IB_OK: published, and `msg` is NOT settled: the caller
 * terminates it (ib_term) once it has done what must follow, or naks it if
 * that failed. On failure `msg` is nak'ed with `retry_delay_ms` and the
 * error is returned (IB_ERR_NATS). `msg` stays owned by the caller. */
ib_status ib_dead_letter_publish(natsConnection *nc, jsCtx *js, const char *subject, natsMsg *msg,
                                 const ib_dead_letter_info *info, int64_t retry_delay_ms,
                                 int64_t publish_timeout_ms, ib_error *err);

/* Forwarding: publishing a message that arrived on one subject to
 * another, exactly once (forward.c). The copy carries the message's bytes
 * untouched and its headers, less those JetStream acts on (Nats-*, the
 * original's own Nats-Msg-Id among them) and ours (Ibus-*). Its
 * Nats-Msg-Id is "ibus-fwd-<stream>-<stream seq>" of the message it comes
 * from, so a forward tried again (a publish whose ack was lost, a process
 * killed before it acked the original) is stored once, as long as the
 * target stream's duplicate window reaches from the first try to the
 * last. The caller acks the original only once this returned IB_OK. */

/* Writes the Nats-Msg-Id of the forward of `stream`'s message
 * `stream_seq` into buf (cap bytes, cut when too small); returns buf. */
char *ib_forward_msg_id(char *buf, size_t cap, const char *stream, uint64_t stream_seq);

/* Publishes a copy of `msg` (BORROWED; it stays the caller's, unsettled)
 * to subject `to` with the message id of `stream`'s `stream_seq`, and
 * waits up to `timeout_ms` for JetStream's ack. `*duplicate` (may be
 * NULL) tells whether the stream already had it (an earlier try was
 * stored). Errors: IB_ERR_NATS when nothing acknowledged it (no stream
 * captures `to`, a timeout, no connection): it may or may not be stored,
 * and trying again with the same arguments is safe. */
ib_status ib_forward_publish(jsCtx *js, natsMsg *msg, const char *to, const char *stream,
                             uint64_t stream_seq, int64_t timeout_ms, bool *duplicate,
                             ib_error *err);

/* The stream that captures the partition subjects "<base>.<p>.*" of
 * every p below `n` (partition_stream.c): a forward's target. */
typedef struct ib_partition_stream {
    bool found;                  /* one stream captures every partition subject */
    char name[256];              /* that stream, or one that captures only some of them */
    bool partial;                /* `name` captures some partition subjects, not all */
    int64_t duplicate_window_ms; /* the found stream's duplicate window */
} ib_partition_stream;

/* Looks through the streams the server lists for the one that captures
 * "<base>.<p>.*" for every p in [0, n). Not finding it is an answer
 * (IB_OK, `found` false; `partial` and `name` say when a stream captures
 * some of them). Errors: IB_ERR_NATS when the server cannot be asked. */
ib_status ib_partition_stream_find(ib_partition_stream *out, jsCtx *js, const char *base,
                                   uint32_t n, ib_error *err);

/* The bus proxy handed to handlers, and the host API table plugins get.
 *
 * A handler publishes derived events through ib_host_api.publish with the
 * ib_bus_proxy it was given. Events are encoded as protobuf Events and
 * published to JetStream with Nats-Msg-Id set to the event id, so a
 * republish with the same id inside the stream's duplicate window is
 * dropped by the server, and any later one by the consumer's recorder.
 *
 * A transactional handler's proxy (ib_dispatch_options.transactional_bus)
 * sends nothing itself: it has `stage` set, and publish hands the encoded
 * event to it, to be written to the outbox inside the handler's
 * transaction; after the commit the host sends each staged message with
 * ib_bus_publish_staged(). */
struct ib_bus_proxy {
    jsCtx *js;                  /* BORROWED; may be NULL when `stage` is set */
    const char *subject_prefix; /* default subject: "<prefix>.<type>" */
    const char *source;         /* Event.source of published events */
    int64_t timeout_ms;         /* wait for JetStream's ack */
    /* appended: the transactional path; all NULL on an ordinary proxy */
    /* Stages one encoded event (subject, id for Nats-Msg-Id, Event bytes;
     * all BORROWED for the call) instead of sending it, e.g. with
     * ib__txn_outbox_put. A non-OK status fails the publish. */
    ib_status (*stage)(void *stage_ctx, const char *subject, const char *msg_id,
                       const uint8_t *data, size_t len, ib_error *err);
    void *stage_ctx;
    struct sqlite3 *db; /* BORROWED: what ib_host_api.transaction_db answers (the
                           transaction's connection); NULL outside transactions */
};

/* The bus part's API table (static storage; valid for the process
 * lifetime): the ABI 1.2 slots, its size set to match. The host extends a
 * copy with the 1.3 slots (verdict_detail, http_request). */
const ib_host_api *ib_bus_host_api(void);

/* One event to publish, before its id and subject are settled: what the
 * bus proxy and `ibus publish` have in common. Every pointer is BORROWED
 * for the call. */
typedef struct ib_bus_event {
    const char *type;    /* required */
    const char *id;      /* NULL: a fresh uuid4; else normalised (must be a UUID) */
    bool id_as_given;    /* send `id` as it is, checked for nothing (test tools) */
    const char *subject; /* NULL: "<prefix>.<type>" */
    const char *prefix;
    const char *source; /* Event.source; may be NULL */
    const void *payload;
    size_t payload_len;
    const ib_event_header *headers;
    size_t header_count;
    bool set_msg_id; /* Nats-Msg-Id = the event id, so JetStream drops republishes */
    /* appended: the trace the event continues (BORROWED; NULL = none): its
     * traceparent and tracestate become headers of the Event and of the
     * NATS message (ib_msg_trace_set) */
    const ib_trace *trace;
    /* appended (issue 47): with `partitions` > 0 the subject is
     * "<subject or prefix>.<p>.<key>" (core/partition.h), the key
     * `partition_key`, or the settled id when that is NULL */
    uint32_t partitions;
    const char *partition_key;
} ib_bus_event;

/* Settles `ev`'s id and subject, encodes it as an Event stamped with the
 * wall clock, and builds the NATS message (its subject is
 * natsMsg_GetSubject's). `id_out` (`id_len` bytes, at least IB_ID_BUF_SIZE
 * unless the id is sent as given, then truncated to fit) receives the id.
 * `*out` is owned by the caller (natsMsg_Destroy, or a publish that takes
 * it). Errors: IB_ERR_INVALID_ID when `id` is not a UUID (the message says
 * why), IB_ERR_IO without randomness for a fresh id, the encoder's errors,
 * IB_ERR_NATS when nats.c cannot build the message. */
ib_status ib_bus_event_msg(natsMsg **out, char *id_out, size_t id_len, const ib_bus_event *ev,
                           ib_error *err);

/* Publishes one event through `bus` (with ib_bus_event_msg, Nats-Msg-Id
 * set) and waits for the ack; `id` NULL means a fresh uuid4. `id_out`
 * receives the id used ("" on error). This is what the API table's publish
 * slot calls. When `bus->stage` is set, the id, subject and encoding are
 * settled exactly the same way, and the encoded event goes to stage()
 * instead of JetStream: success then means staged, and the id is final.
 * Errors: IB_ERR_INVALID_ARG when `req` is NULL, its `size` is below
 * IB_PUBLISH_REQUEST_SIZE_1_0, it has no type, or `bus` has neither `js`
 * nor `stage`; those of ib_bus_event_msg; IB_ERR_NATS when JetStream does
 * not acknowledge; stage()'s own. */
ib_status ib_bus_publish(ib_bus_proxy *bus, const ib_publish_request *req,
                         char id_out[IB_ID_BUF_SIZE], ib_error *err);

/* Sends one message staged in the outbox (by a transactional handler's
 * publish) through `bus->js`: `data` (`len` bytes, the encoded Event) to
 * `subject` with Nats-Msg-Id = `msg_id`, and waits up to `bus->timeout_ms`
 * for JetStream's ack. Sending the same message again (a flush interrupted
 * by a crash or a lost connection) is harmless within the stream's
 * duplicate window: the server keeps one copy. All arguments are BORROWED
 * for the call. For the host's outbox flush: delete the entry only after
 * IB_OK. Errors: IB_ERR_INVALID_ARG (no bus, js, subject or msg_id),
 * IB_ERR_NATS when the message cannot be built or JetStream does not
 * acknowledge (the entry stays; send it again later). */
ib_status ib_bus_publish_staged(ib_bus_proxy *bus, const char *subject, const char *msg_id,
                                const void *data, size_t len, ib_error *err);

#endif
