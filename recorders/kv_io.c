/* SPDX-License-Identifier: Apache-2.0 */
/* The kv: recorder's traffic: key names and claim values (built and
 * parsed here only), reads through the stream leader, and pipelined
 * conditional writes (see kv_io.h for the layout).
 *
 * Reads use js_GetLastMsg, the stream's own message API, which the leader
 * answers: a direct get (kvStore_Get) may be served by a follower that has
 * not applied the latest writes yet. Writes are publishes to the bucket's
 * subjects with an expected last subject sequence, because only those
 * report jsErrCode 10071 reliably when the key is taken; a batch's are
 * sent together and their acks collected on one inbox. */
#include "kv_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* A write round waits for its acks in slices this long, and between two
 * looks whether the connection reconnected meanwhile. */
#define ACK_SLICE_MS 100
/* Writes still pending after a round that ended early are sent again
 * after a pause that doubles from PAUSE_FIRST_MS to PAUSE_MAX_MS, for at
 * most RIDE_OUT_MS since the first round: longer than a leader election
 * of nats-server 2.9 after a node's loss (4-11 s measured in the
 * rolling-restart chaos test). */
#define PAUSE_FIRST_MS 25
#define PAUSE_MAX_MS 500
#define RIDE_OUT_MS 20000

void ib__kv_consumer_hex(char *out, const char *consumer)
{
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;
    for (const unsigned char *c = (const unsigned char *)consumer;
         *c != '\0' && len < 2 * IB_CONSUMER_MAX; c++) {
        out[len++] = hex[*c >> 4];
        out[len++] = hex[*c & 0xf];
    }
    out[len] = '\0';
}

void ib__kv_subject_hex(const kv_recorder *k, char *out, char type, const char *hex, const char *id,
                        uint32_t n)
{
    /* The consumer is at most IB_CONSUMER_MAX bytes: 2 hex digits each
     * plus the id and the epoch stay below KV_SUBJECT_MAX. */
    if (type == 'c')
        snprintf(out, KV_SUBJECT_MAX, "$KV.%s.c.%s.%s.%u", k->bucket, hex, id, n);
    else
        snprintf(out, KV_SUBJECT_MAX, "$KV.%s.%c.%s.%s", k->bucket, type, hex, id);
}

void ib__kv_subject(const kv_recorder *k, char *out, char type, const ib_marker_key *key,
                    uint32_t n)
{
    char hex[2 * IB_CONSUMER_MAX + 1];
    ib__kv_consumer_hex(hex, key->consumer);
    ib__kv_subject_hex(k, out, type, hex, key->event_id, n);
}

ib_status ib__kv_fail(const kv_recorder *k, ib_error *err, natsStatus st, const char *what)
{
    const char *last = NULL;
    /* The connection's last error says more than the status name (the
     * server's text for a refused request, for instance). */
    if (k->nc != NULL && natsConnection_GetLastError(k->nc, &last) != NATS_OK && last != NULL &&
        last[0] != '\0')
        return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: %s: %s (%s)", k->bucket, what,
                            natsStatus_GetText(st), last);
    return ib_error_set(err, IB_ERR_RECORDER, "recorder kv:%s: %s: %s", k->bucket, what,
                        natsStatus_GetText(st));
}

ib_status ib__kv_read_last(kv_recorder *k, kv_read *out, const char *subject, ib_error *err)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    memset(out, 0, sizeof(*out));
    natsStatus s = js_GetLastMsg(&m, k->js, k->stream, subject, NULL, &jerr);
    /* A deleted bucket would otherwise show only as "Error". */
    if (jerr == JSStreamNotFoundErr)
        return ib_error_set(err, IB_ERR_RECORDER,
                            "recorder kv:%s: read: the bucket (stream %s) does not exist",
                            k->bucket, k->stream);
    if (s == NATS_NOT_FOUND)
        return IB_OK;
    if (s != NATS_OK)
        return ib__kv_fail(k, err, s, "read");
    const char *op = NULL;
    out->found = true;
    out->deleted = natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK;
    out->seq = natsMsg_GetSequence(m);
    int len = natsMsg_GetDataLength(m);
    if (len < 0)
        len = 0;
    if (len >= KV_VALUE_MAX)
        len = KV_VALUE_MAX - 1;
    memcpy(out->value, natsMsg_GetData(m), (size_t)len);
    out->value[len] = '\0';
    natsMsg_Destroy(m);
    return IB_OK;
}

/* --- pipelined conditional writes ----------------------------------------- */

/* Sends every pending write once, each a request with its expectation as
 * a header and its own reply subject "<inbox>.<round>.<i>". Not through
 * the JetStream context's async publish: that needs a context (with its
 * reply subscription and its thread) per round and a callback per ack;
 * here the recorder's one ack inbox collects the answers on the calling
 * thread. Each goes to put_prefix + subject: through another JetStream
 * domain, as nats.c's kvStore writes. */
static natsStatus send_writes(kv_recorder *k, kv_write *w, size_t n)
{
    char reply[128], seq[24], subject[sizeof(k->put_prefix) + KV_SUBJECT_MAX];
    natsStatus s = NATS_OK;
    for (size_t i = 0; i < n && s == NATS_OK; i++) {
        if (w[i].result != KV_PENDING)
            continue;
        natsMsg *m = NULL;
        snprintf(reply, sizeof(reply), "%s.%llu.%zu", k->acks_inbox,
                 (unsigned long long)k->acks_round, i);
        snprintf(subject, sizeof(subject), "%s%s", k->put_prefix, w[i].subject);
        s = natsMsg_Create(&m, subject, reply, w[i].value, (int)strlen(w[i].value));
        if (s == NATS_OK && !w[i].put) {
            snprintf(seq, sizeof(seq), "%llu", (unsigned long long)w[i].expect_seq);
            s = natsMsgHeader_Set(m, "Nats-Expected-Last-Subject-Sequence", seq);
        }
        if (s == NATS_OK)
            s = natsConnection_PublishMsg(k->nc, m);
        natsMsg_Destroy(m);
        w[i].tries++;
    }
    return s;
}

/* One answer: a publish ack ("seq") is WRITTEN, jsErrCode 10071 EXISTS,
 * another error FAILED; anything else (an empty "no responders" status)
 * leaves the write pending, to be sent again. */
static void take_answer(kv_write *w, const char *json)
{
    const char *code = strstr(json, "\"err_code\":");
    if (strstr(json, "\"error\"") != NULL) {
        long c = code != NULL ? strtol(code + 11, NULL, 10) : 0;
        w->result = c == JSStreamWrongLastSequenceErr ? KV_EXISTS : KV_FAILED;
        w->st = NATS_ERR;
    } else if (strstr(json, "\"seq\"") != NULL) {
        w->result = KV_WRITTEN;
    }
}

/* The round and the write index of a reply subject "<inbox>.<round>.<i>";
 * false for anything else. */
static bool reply_of(const char *subject, size_t inbox_len, uint64_t *round, size_t *i)
{
    if (strlen(subject) <= inbox_len + 1)
        return false;
    char *end = NULL;
    *round = strtoull(subject + inbox_len + 1, &end, 10);
    if (end == NULL || *end != '.')
        return false;
    *i = (size_t)strtoull(end + 1, NULL, 10);
    return true;
}

/* Takes one reply of this round into its write; false for one of an
 * earlier round (late) or of none. */
static bool take_reply(kv_recorder *k, natsMsg *m, kv_write *w, size_t n, size_t inbox_len)
{
    uint64_t round = 0;
    size_t i = n;
    if (!reply_of(natsMsg_GetSubject(m), inbox_len, &round, &i) || round != k->acks_round ||
        i >= n || w[i].result != KV_PENDING)
        return false;
    char json[512];
    int len = natsMsg_GetDataLength(m);
    len = len < 0 ? 0 : len >= (int)sizeof(json) ? (int)sizeof(json) - 1 : len;
    memcpy(json, natsMsg_GetData(m), (size_t)len);
    json[len] = '\0';
    take_answer(&w[i], json);
    return true;
}

/* How many times the recorder's connection has reconnected; 0 when
 * nats.c cannot say (then no reconnect is ever seen). */
static uint64_t reconnects(natsConnection *nc)
{
    natsStatistics *stats = NULL;
    uint64_t n = 0;
    if (natsStatistics_Create(&stats) == NATS_OK && natsConnection_GetStats(nc, stats) == NATS_OK)
        natsStatistics_GetCounts(stats, NULL, NULL, NULL, NULL, &n);
    natsStatistics_Destroy(stats);
    return n;
}

/* Collects the answers of this round until every write sent has one or
 * the wait runs out (then the rest stay pending: unknown). A "no
 * responders" status (nats.c gives it as NATS_NO_RESPONDERS, without the
 * message: no stream leader took the write) counts as an answer whose
 * write stays pending, to be sent again. Late answers of earlier rounds
 * are dropped; so may a late "no responders" of theirs count here, which
 * only ends this round early (its writes still pending are sent again).
 * A reconnect after `before` (the count when the round was sent) ends the
 * wait too: the answers of writes sent on the lost connection will never
 * come, and waiting out the round's wait for them stopped the whole batch for
 * that long when a node went away (the rolling-restart chaos test). The
 * writes still pending are sent again at once; one that finds its key
 * taken is then recognised as the recorder's own by its value. */
static void collect_acks(kv_recorder *k, kv_write *w, size_t n, size_t sent, uint64_t before)
{
    int64_t deadline = ib_clock_monotonic_ms() + k->write_wait_ms;
    size_t inbox_len = strlen(k->acks_inbox);
    for (size_t got = 0; got < sent;) {
        int64_t left = deadline - ib_clock_monotonic_ms();
        natsMsg *m = NULL;
        natsStatus s =
            left > 0
                ? natsSubscription_NextMsg(&m, k->acks, left < ACK_SLICE_MS ? left : ACK_SLICE_MS)
                : NATS_TIMEOUT;
        if (s == NATS_TIMEOUT && left > ACK_SLICE_MS && reconnects(k->nc) == before)
            continue;
        if (s == NATS_NO_RESPONDERS) {
            got++;
            continue;
        }
        if (s != NATS_OK)
            break;
        got += take_reply(k, m, w, n, inbox_len);
        natsMsg_Destroy(m);
    }
}

/* The recorder's ack inbox, made on first use and kept until close: a
 * subscription per round, made and dropped while the connection
 * reconnects, crashed nats.c 3.4.1's reader thread. */
static natsStatus ack_inbox(kv_recorder *k)
{
    if (k->acks != NULL)
        return NATS_OK;
    natsInbox *inbox = NULL;
    natsStatus s = natsInbox_Create(&inbox);
    char filter[96];
    if (s == NATS_OK) {
        snprintf(k->acks_inbox, sizeof(k->acks_inbox), "%s", inbox);
        snprintf(filter, sizeof(filter), "%s.>", inbox);
        s = natsConnection_SubscribeSync(&k->acks, k->nc, filter);
    }
    natsInbox_Destroy(inbox);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(k->acks, -1, -1);
    return s;
}

/* Sends every pending write once and waits for the answers; one round at
 * a time per recorder (they share the ack inbox). */
static ib_status publish_round(kv_recorder *k, kv_write *w, size_t n, ib_error *err)
{
    size_t sent = 0;
    for (size_t i = 0; i < n; i++)
        sent += w[i].result == KV_PENDING;
    pthread_mutex_lock(&k->acks_mu);
    k->acks_round++;
    natsStatus s = ack_inbox(k);
    uint64_t before = reconnects(k->nc);
    if (s == NATS_OK)
        s = send_writes(k, w, n);
    if (s == NATS_OK)
        collect_acks(k, w, n, sent, before);
    pthread_mutex_unlock(&k->acks_mu);
    return s == NATS_OK ? IB_OK : ib__kv_fail(k, err, s, "publish");
}

/* A write sent more than once that then found its key taken may have
 * taken it itself the first time: the value tells. */
static ib_status recognise_own(kv_recorder *k, kv_write *w, ib_error *err)
{
    kv_read rd;
    ib_status st = ib__kv_read_last(k, &rd, w->subject, err);
    if (st == IB_OK && rd.found && !rd.deleted && strcmp(rd.value, w->value) == 0)
        w->result = KV_WRITTEN;
    return st;
}

static bool round_left_pending(const kv_write *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i].result == KV_PENDING)
            return true;
    return false;
}

ib_status ib__kv_publish(kv_recorder *k, kv_write *w, size_t n, ib_error *err)
{
    ib_status st = IB_OK;
    for (size_t i = 0; i < n; i++) {
        w[i].result = KV_PENDING;
        w[i].tries = 0;
    }
    /* Pending writes are sent again until RIDE_OUT_MS have passed: after a
     * round the wait ran out on (a write lost with a leader that stepped
     * down is never answered) at once, after one that ended early (every
     * answer a "no responders", or a reconnect) after a pause. During a
     * leader election such rounds come back within milliseconds; counted
     * as retries they were used up at once, and the host became a failing
     * recorder until its next probe, 2 s later, for an election of a
     * fraction of a second. */
    int64_t start = ib_clock_monotonic_ms(), pause = PAUSE_FIRST_MS;
    for (int round = 0; st == IB_OK && round_left_pending(w, n); round++) {
        int64_t t0 = ib_clock_monotonic_ms();
        if (t0 - start >= RIDE_OUT_MS)
            break;
        if (round > 0 && k->unanswered_round != NULL)
            k->unanswered_round(k->unanswered_round_ctx, round);
        st = publish_round(k, w, n, err);
        if (ib_clock_monotonic_ms() - t0 < k->write_wait_ms && round_left_pending(w, n)) {
            nats_Sleep(pause);
            pause = pause * 2 < PAUSE_MAX_MS ? pause * 2 : PAUSE_MAX_MS;
        }
    }
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        if (w[i].result == KV_EXISTS && w[i].tries > 1)
            st = recognise_own(k, &w[i], err);
        else if (w[i].result == KV_PENDING)
            st = ib__kv_fail(k, err, NATS_TIMEOUT, "write not acknowledged");
        else if (w[i].result == KV_FAILED)
            st = ib__kv_fail(k, err, w[i].st, "write refused");
    }
    return st;
}

void ib__kv_prepare_epoch(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                          uint32_t attempts, int64_t end, const char *owner)
{
    ib__kv_subject(k, w->subject, 'c', key, epoch);
    snprintf(w->value, sizeof(w->value), "%u %lld %s", attempts, (long long)end, owner);
    w->expect_seq = 0;
    w->put = false;
    w->epoch = epoch;
    w->attempts = attempts;
    w->end = end;
}

uint32_t ib__kv_parse_claim(kv_head *h, const char *v)
{
    uint32_t named = 0;
    char *end = NULL;
    if (v[0] == '@') {
        unsigned long n = strtoul(v + 1, &end, 10);
        if (*end == ' ' && n > 0 && n <= UINT32_MAX / 2) {
            named = (uint32_t)n;
            v = end + 1;
        }
    }
    unsigned long long attempts = strtoull(v, &end, 10);
    h->attempts = attempts > UINT32_MAX ? UINT32_MAX : (uint32_t)attempts;
    h->end = 0;
    h->owner[0] = '\0';
    if (*end != ' ')
        return named;
    h->end = strtoll(end + 1, &end, 10);
    if (*end == ' ')
        snprintf(h->owner, sizeof(h->owner), "%s", end + 1);
    return named;
}

void ib__kv_prepare_anchor(kv_recorder *k, kv_write *w, const ib_marker_key *key, uint32_t epoch,
                           uint32_t attempts, int64_t end, const char *owner)
{
    ib__kv_subject(k, w->subject, 'c', key, 1);
    snprintf(w->value, sizeof(w->value), "@%u %u %lld %s", epoch, attempts, (long long)end, owner);
    w->expect_seq = 0;
    w->put = true;
    w->epoch = 0;
}

ib_status ib__kv_refresh_anchors(kv_recorder *k, const kv_write *w, size_t n,
                                 const ib_marker_key *keys, const size_t *index, ib_error *err)
{
    kv_write *a = calloc(n > 0 ? n : 1, sizeof(*a));
    if (a == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory for %zu anchors",
                            k->bucket, n);
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        if (w[j].result != KV_WRITTEN || w[j].epoch < 2)
            continue;
        /* The owner is what follows "<attempts> <end> " in the value. */
        const char *sp = strchr(w[j].value, ' ');
        sp = sp != NULL ? strchr(sp + 1, ' ') : NULL;
        ib__kv_prepare_anchor(k, &a[m++], &keys[index != NULL ? index[j] : j], w[j].epoch,
                              w[j].attempts, w[j].end, sp != NULL ? sp + 1 : "");
    }
    ib_status st = m > 0 ? ib__kv_publish(k, a, m, err) : IB_OK;
    free(a);
    return st;
}

ib_status ib__kv_mark_keys(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                           const uint64_t *fps, size_t n, int64_t ts, ib_error *err)
{
    return ib__kv_mark_keys_with(k, keys, want, fps, n, ts, NULL, 0, err);
}

/* Fills w[0..) with the markers to write; returns how many. */
static size_t prepare_marks(kv_recorder *k, kv_write *w, const ib_marker_key *keys,
                            const bool *want, const uint64_t *fps, size_t n, int64_t ts)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (want != NULL && !want[i])
            continue;
        ib__kv_subject(k, w[m].subject, 'd', &keys[i], 0);
        uint64_t fp = fps != NULL ? fps[i] : 0;
        if (fp != 0)
            snprintf(w[m].value, sizeof(w[m].value), "%lld %llu", (long long)ts,
                     (unsigned long long)fp);
        else
            snprintf(w[m].value, sizeof(w[m].value), "%lld", (long long)ts);
        w[m].put = false;
        w[m].epoch = 0;
        w[m++].expect_seq = 0;
    }
    return m;
}

/* Publishes the markers w[0..m) with the anchors w[m..m+nextra) in the
 * first round, behind them: one connection, one stream, so the server
 * stores each anchor after its marker and its TTL removes it later. A
 * marker that finds a forget's tombstone is written over it in further
 * rounds. `*late` says whether some marker may have been stored after its
 * anchor (sent more than once, or after a tombstone). On return w[m..)
 * still holds the anchors with their results. */
static ib_status mark_rounds(kv_recorder *k, kv_write *w, size_t m, size_t nextra, bool *late,
                             ib_error *err)
{
    ib_status st = IB_OK;
    *late = false;
    for (int round = 0; round <= KV_RETRIES && m + (round == 0 ? nextra : 0) > 0 && st == IB_OK;
         round++) {
        st = ib__kv_publish(k, w, m + (round == 0 ? nextra : 0), err);
        size_t again = 0;
        for (size_t i = 0; i < m && st == IB_OK; i++) {
            kv_read rd;
            *late |= w[i].tries > 1 || round > 0;
            if (w[i].result != KV_EXISTS)
                continue;
            st = ib__kv_read_last(k, &rd, w[i].subject, err);
            if (st == IB_OK && rd.found && rd.deleted) {
                w[i].expect_seq = rd.seq;
                if (again != i)
                    w[again] = w[i];
                again++;
            }
        }
        m = again;
    }
    if (st == IB_OK && m > 0)
        return ib_error_set(err, IB_ERR_RECORDER,
                            "recorder kv:%s: a marker kept losing races with forgets", k->bucket);
    return st;
}

/* Makes every anchor of a[0..n) younger than its marker, where the first
 * round may not have: an anchor whose Create found its key claimed
 * (a plain mark of a claimed key) is read and put back with the value it
 * has (one read each: plain marks of claimed keys are rare), and after a
 * late marker every anchor written is put again. A Create of epoch 1 that
 * finds no anchor left creates one. Outcomes are not looked at: a rewrite
 * decides nothing. */
static ib_status anchors_after_marks(kv_recorder *k, kv_write *a, size_t n, bool late,
                                     ib_error *err)
{
    size_t m = 0;
    ib_status st = IB_OK;
    for (size_t i = 0; i < n && st == IB_OK; i++) {
        kv_write x = a[i];
        if (!a[i].put && a[i].result == KV_EXISTS) {
            kv_read rd;
            st = ib__kv_read_last(k, &rd, a[i].subject, err);
            if (st == IB_OK && rd.found && !rd.deleted) {
                snprintf(x.value, sizeof(x.value), "%s", rd.value);
                x.put = true;
            }
        } else if (late && (a[i].put || a[i].result == KV_WRITTEN)) {
            x.put = true;
        } else {
            continue;
        }
        a[m++] = x;
    }
    return st == IB_OK && m > 0 ? ib__kv_publish(k, a, m, err) : st;
}

ib_status ib__kv_mark_keys_with(kv_recorder *k, const ib_marker_key *keys, const bool *want,
                                const uint64_t *fps, size_t n, int64_t ts, const kv_write *extra,
                                size_t nextra, ib_error *err)
{
    kv_write *w = calloc(n + nextra > 0 ? n + nextra : 1, sizeof(*w));
    if (w == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder kv:%s: no memory to mark %zu keys",
                            k->bucket, n);
    size_t m = prepare_marks(k, w, keys, want, fps, n, ts);
    if (nextra > 0)
        memcpy(&w[m], extra, nextra * sizeof(*w));
    bool late = false;
    ib_status st = mark_rounds(k, w, m, nextra, &late, err);
    if (st == IB_OK && nextra > 0)
        st = anchors_after_marks(k, &w[m], nextra, late, err);
    free(w);
    return st;
}
