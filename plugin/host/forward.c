/* SPDX-License-Identifier: Apache-2.0 */
/* `ibus forward` (forward.h): the life of a source message.
 *
 *  1. The main thread pulls a batch of the durable (the puller, which
 *     never uses nats.c's Fetch: jetstream.h says why).
 *  2. Each message in stream order: its delivery metadata, then the event
 *     decoded and its id normalised as `ibus run` decodes it.
 *  3. Its key: the id, or the business key the producer wrote in token
 *     --key-token of the subject; its subject "<base>.<p>.<key>".
 *  4. The forward (ib_forward_publish, Nats-Msg-Id
 *     "ibus-fwd-<stream>-<seq>") waits for the target's ack; only then is
 *     the source message acked. A crash between the two leaves it unacked:
 *     it comes back after AckWait, and its forward again is dropped by the
 *     target's duplicate window, acked, and counted as already stored.
 *  5. What cannot be forwarded for its own sake (not an Event, an invalid
 *     id, a key token that is not a key) is dead-lettered, as `ibus run`
 *     dead-letters it, and terminated once the dead letter is stored.
 *  6. A forward or a dead letter that fails is nak'ed with the retry
 *     delay, and so is the rest of its batch, untried: the target is
 *     likely down for them too, and they come back in stream order.
 *  7. On SIGTERM or SIGINT the batch in hand is finished, what was pulled
 *     and not started is nak'ed at once (handed back), the connection is
 *     flushed and closed, and the totals are logged.
 * Invariant: a source message is acked only after its forward was
 * acknowledged, and terminated only after its dead letter was: nothing is
 * dropped without a copy stored somewhere. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "forward_internal.h"
#include "host_signal.h"
#include "log.h"
#include "partition.h"

/* How long the hand-back at a stop waits for what is still arriving. */
#define HAND_BACK_WAIT_MS 1500

/* One source message on its way, with what was learnt of it. */
typedef struct fwd_msg {
    natsMsg *msg;
    ib_jsack_meta meta;
    ib_event *event; /* NULL until decoded */
} fwd_msg;

/* The partition key of `m`: the token --key-token of its subject, unless
 * that is missing (the id then) or spells the event's own id (the id in
 * its normalised form, so two spellings of one id share a partition).
 * A token is copied into `buf` (cap bytes); the caller checks it. */
static const char *key_of(const ib_forwarder *f, const fwd_msg *m, char *buf, size_t cap)
{
    const char *t = natsMsg_GetSubject(m->msg);
    for (int64_t i = 1; f->cfg->key_token > 0 && i < f->cfg->key_token && t != NULL; i++)
        if ((t = strchr(t, '.')) != NULL)
            t++;
    if (f->cfg->key_token <= 0 || t == NULL)
        return m->event->id;
    const char *dot = strchr(t, '.');
    size_t len = dot != NULL ? (size_t)(dot - t) : strlen(t);
    char id[IB_ID_BUF_SIZE];
    if (ib_id_normalise(id, t, len, IB_ID_ANY_VERSION) == IB_ID_VALID &&
        strcmp(id, m->event->id) == 0)
        return m->event->id;
    snprintf(buf, cap, "%.*s", (int)len, t);
    return buf;
}

static void nak_later(ib_forwarder *f, fwd_msg *m)
{
    ib_error e;
    if (ib_nak(ib_nats_connection(f->nats), m->msg, f->cfg->retry_delay_ms, &e) != IB_OK)
        ib_log(IB_SEV_WARN, "nak failed; the message comes back after AckWait",
               IB_LOG_STR("error", e.msg));
}

/* Step 5: the dead letter, then +TERM. False when it failed (the
 * original was nak'ed by ib_dead_letter_publish). */
static bool dead_letter(ib_forwarder *f, fwd_msg *m, ib_dead_letter_reason why, const char *detail)
{
    ib_error e = {0};
    ib_dead_letter_info info = {
        .reason = why,
        .detail = detail,
        .stream = f->cfg->stream,
        .consumer = f->cfg->durable,
        .stream_seq = m->meta.stream_seq,
        .delivery_count = m->meta.delivered,
        .event_id = m->event != NULL ? m->event->id : NULL,
        .event_type = m->event != NULL ? m->event->type : NULL,
    };
    if (ib_dead_letter_publish(ib_nats_connection(f->nats), ib_nats_jetstream(f->nats),
                               f->dead_letter, m->msg, &info, f->cfg->retry_delay_ms,
                               f->cfg->publish_timeout_ms, &e) != IB_OK) {
        f->totals.failed++;
        ib_log(IB_SEV_ERROR, "dead-letter failed; message nak'ed",
               IB_LOG_U64("stream_seq", m->meta.stream_seq),
               IB_LOG_STR("reason", ib_dead_letter_reason_str(why)), IB_LOG_STR("error", e.msg));
        return false;
    }
    if (ib_term(ib_nats_connection(f->nats), m->msg, &e) != IB_OK)
        ib_log(IB_SEV_WARN,
               "dead-lettered, but +TERM failed; its copy is dropped when it comes back",
               IB_LOG_STR("error", e.msg));
    f->totals.dead_lettered++;
    ib_log(IB_SEV_WARN, "dead-lettered", IB_LOG_STR("durable", f->cfg->durable),
           IB_LOG_STR("event_id", info.event_id),
           IB_LOG_STR("reason", ib_dead_letter_reason_str(why)),
           IB_LOG_U64("stream_seq", m->meta.stream_seq), IB_LOG_STR("subject", f->dead_letter),
           IB_LOG_STR("detail", detail));
    return true;
}

/* Tests kill the forwarder here (IB_TEST_FORWARD_KILL_AFTER=N): once its
 * Nth forward was acknowledged, before the source message's ack: the
 * crash window the message id closes. The acks sent before are flushed
 * first, so the kill loses that one ack alone. */
static void test_kill_before_ack(ib_forwarder *f)
{
    const char *v = getenv("IB_TEST_FORWARD_KILL_AFTER");
    if (v != NULL && v[0] != '\0' && f->totals.forwarded + 1 >= strtoull(v, NULL, 10)) {
        natsConnection_FlushTimeout(ib_nats_connection(f->nats), 2000);
        raise(SIGKILL);
    }
}

/* Step 4: the forward to `to`, then the ack. False when it failed. */
static bool forward(ib_forwarder *f, fwd_msg *m, const char *to)
{
    ib_error e = {0};
    bool already = false;
    if (ib_forward_publish(ib_nats_jetstream(f->nats), m->msg, to, f->cfg->stream,
                           m->meta.stream_seq, f->cfg->publish_timeout_ms, &already, &e) != IB_OK) {
        f->totals.failed++;
        ib_log(IB_SEV_ERROR, "forward failed; message nak'ed", IB_LOG_STR("event_id", m->event->id),
               IB_LOG_U64("stream_seq", m->meta.stream_seq), IB_LOG_STR("error", e.msg));
        nak_later(f, m);
        return false;
    }
    test_kill_before_ack(f);
    if (ib_ack(ib_nats_connection(f->nats), m->msg, &e) != IB_OK)
        ib_log(IB_SEV_WARN, "ack failed; the message comes back and its forward is dropped",
               IB_LOG_STR("error", e.msg));
    f->totals.forwarded++;
    f->totals.already += already;
    return true;
}

/* Steps 2 and 3 for a delivery: decode, key, subject. Returns what to do
 * next through forward() or dead_letter(); false when that failed. */
static bool route(ib_forwarder *f, fwd_msg *m)
{
    ib_error e = {0};
    ib_event_reject why = IB_EVENT_NOT_REJECTED;
    if (ib_event_decode(&m->event, &why, natsMsg_GetData(m->msg),
                        (size_t)natsMsg_GetDataLength(m->msg), &f->limits, &e) != IB_OK) {
        m->event = NULL;
        if (why == IB_EVENT_NOT_REJECTED) { /* out of memory: not the message's fault */
            f->totals.failed++;
            nak_later(f, m);
            return false;
        }
        return dead_letter(
            f, m, why == IB_EVENT_REJECT_INVALID_ID ? IB_DLQ_INVALID_ID : IB_DLQ_DECODE, e.msg);
    }
    char keybuf[1100], to[1200], detail[IB_ERROR_MSG_MAX + 64];
    const char *key = key_of(f, m, keybuf, sizeof(keybuf));
    if (ib_partition_subject(to, sizeof(to), f->cfg->subject, key, f->cfg->partitions, &e) !=
        IB_OK) {
        snprintf(detail, sizeof(detail), "subject token %lld: %s", (long long)f->cfg->key_token,
                 e.msg);
        return dead_letter(f, m, IB_DLQ_DECODE, detail);
    }
    return forward(f, m, to);
}

/* One message of a batch; false when its forward or dead letter failed. */
static bool forward_one(ib_forwarder *f, natsMsg *msg)
{
    fwd_msg m = {.msg = msg};
    ib_error e;
    const char *reply = natsMsg_GetReply(msg);
    if (reply == NULL || ib_jsack_parse(&m.meta, reply, strlen(reply), &e) != IB_OK) {
        ib_log(IB_SEV_WARN, "ignoring a message that is not a JetStream delivery",
               IB_LOG_STR("subject", natsMsg_GetSubject(msg)));
        return true;
    }
    f->totals.received++;
    bool ok = route(f, &m);
    ib_event_free(m.event);
    return ok;
}

/* Steps 2 to 6 for a batch, in stream order. True when all went well. */
static bool forward_batch(ib_forwarder *f, natsMsg **msgs, size_t n)
{
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        if (ok) {
            ok = forward_one(f, msgs[i]);
        } else {
            fwd_msg held = {.msg = msgs[i]};
            nak_later(f, &held); /* untried: behind the one that failed */
        }
        natsMsg_Destroy(msgs[i]);
        msgs[i] = NULL;
    }
    return ok;
}

/* Step 7: what was pulled and not started goes back at once. */
static void hand_back(ib_forwarder *f, natsMsg **buf, size_t cap)
{
    size_t total =
        ib_puller_hand_back(f->puller, ib_nats_connection(f->nats), buf, cap, HAND_BACK_WAIT_MS);
    if (total > 0)
        ib_log(IB_SEV_INFO, "handed back undelivered messages", IB_LOG_U64("count", total));
}

/* Steps 1 to 6 until a stop. Returns the exit code. */
static int run_loop(ib_forwarder *f, natsMsg **buf)
{
    const ib_forward_config *c = f->cfg;
    int64_t quiet_from = ib_clock_monotonic_ms();
    while (!ib__host_signal_received()) {
        if (ib_nats_is_closed(f->nats)) {
            ib_log_kv(IB_SEV_ERROR, "nats connection closed for good; exiting 1", NULL);
            return 1;
        }
        size_t n = 0;
        ib_error e;
        if (ib_puller_next(f->puller, buf, &n, (size_t)c->batch, 250, &e) != IB_OK) {
            ib_log(IB_SEV_WARN, "pull failed; retrying", IB_LOG_STR("error", e.msg));
            nats_Sleep(250);
            continue;
        }
        int64_t now = ib_clock_monotonic_ms();
        if (n == 0) {
            if (c->idle_exit_ms > 0 && now - quiet_from >= c->idle_exit_ms) {
                ib_log_kv(IB_SEV_INFO, "idle; exiting", NULL);
                return 0;
            }
            continue;
        }
        bool ok = forward_batch(f, buf, n);
        int64_t done = ib_clock_monotonic_ms();
        ib_puller_batch_took(f->puller, done - now);
        /* what was nak'ed comes back after the retry delay: not idle before */
        quiet_from = ok ? done : done + c->retry_delay_ms;
    }
    return 0;
}

/* The summary line, on stderr with the other log lines. */
static void summary(const ib_forwarder *f, int code)
{
    const ib_forward_totals *t = &f->totals;
    ib_log(IB_SEV_INFO, "stopped", IB_LOG_I64("exit_code", code),
           IB_LOG_U64("received", t->received), IB_LOG_U64("forwarded", t->forwarded),
           IB_LOG_U64("already_stored", t->already), IB_LOG_U64("dead_lettered", t->dead_lettered),
           IB_LOG_U64("failed", t->failed));
}

int ib_forward_run(const ib_forward_config *cfg)
{
    ib_forwarder f;
    memset(&f, 0, sizeof(f));
    f.cfg = cfg;
    ib__host_signal_install();
    natsMsg **buf = calloc((size_t)cfg->batch, sizeof(*buf));
    if (buf == NULL) {
        ib_log_kv(IB_SEV_ERROR, "out of memory", NULL);
        return 1;
    }
    int code = ib__forward_open(&f);
    if (code == 0) {
        code = run_loop(&f, buf);
        if (!ib_nats_is_closed(f.nats))
            hand_back(&f, buf, (size_t)cfg->batch);
    }
    if (f.pulling)
        summary(&f, code);
    ib__forward_close(&f);
    free(buf);
    return code;
}
