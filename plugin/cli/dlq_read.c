/* SPDX-License-Identifier: Apache-2.0 */
/* ibus dlq: reading and selecting dead letters (dlq.h). */
#include "dlq.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dead_letter.h"
#include "options.h"
#include <infinity_bus/recorder.h>
#include "uuid.h"
#include "wire.h"

void ib_dlq_entry_clear(ib_dlq_entry *e)
{
    natsMsg_Destroy(e->msg);
    memset(e, 0, sizeof(*e));
}

/* Notes the first refused header. */
static void refuse(ib_dlq_entry *e, const char *key, const char *what)
{
    if (e->invalid[0] == '\0')
        snprintf(e->invalid, sizeof(e->invalid), "%s %s", key, what);
}

/* The header's first value, or NULL when it is absent or holds a control
 * byte (then refused). */
static const char *header(ib_dlq_entry *e, const char *key)
{
    const char *v = NULL;
    if (natsMsgHeader_Get(e->msg, key, &v) != NATS_OK || v == NULL)
        return NULL;
    for (const char *c = v; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            refuse(e, key, "holds a control byte");
            return NULL;
        }
    }
    return v;
}

/* A consumer identity, as the host names handlers: at most IB_CONSUMER_MAX
 * bytes of printable ASCII without spaces (it is shown in a column).
 * Anything else is refused. */
static const char *header_identity(ib_dlq_entry *e, const char *key)
{
    const char *v = header(e, key);
    if (v == NULL)
        return NULL;
    size_t len = strnlen(v, IB_CONSUMER_MAX + 1);
    if (len == 0 || len > IB_CONSUMER_MAX) {
        refuse(e, key, len == 0 ? "is empty" : "is too long");
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
            refuse(e, key, "is not printable ASCII");
            return NULL;
        }
    }
    return v;
}

/* Digits only, and no more than fit: anything else reads as 0, refused. */
static uint64_t header_u64(ib_dlq_entry *e, const char *key)
{
    const char *v = header(e, key);
    uint64_t n = 0;
    if (v == NULL)
        return 0;
    for (const char *c = v; *c != '\0'; c++) {
        unsigned d = (unsigned)(*c - '0');
        if (d > 9 || n > (UINT64_MAX - d) / 10) {
            refuse(e, key, "is not a number");
            return 0;
        }
        n = n * 10 + d;
    }
    if (v[0] == '\0')
        refuse(e, key, "is not a number");
    return n;
}

/* Bytes of a dead letter's message (an id that is not a valid id, a type)
 * escaped for one line of a listing: printable ASCII kept, the rest as
 * \xNN, at most `shown` bytes. */
static void escape_bytes(char *out, size_t cap, const uint8_t *id, size_t len, size_t shown)
{
    size_t o = 0;
    for (size_t i = 0; i < len && i < shown && o + 5 <= cap; i++) {
        if (id[i] > 0x20 && id[i] < 0x7f && id[i] != '\\')
            out[o++] = (char)id[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", id[i]);
    }
    out[o] = '\0';
}

void ib_dlq_entry_from_data(ib_dlq_entry *e, const uint8_t *data, size_t len)
{
    ib__wire_scan scan;
    if ((e->event_id != NULL && e->event_type != NULL) || len == 0 ||
        ib__wire_scan_event(&scan, data, len) != IB__WIRE_OK)
        return;
    if (e->event_type == NULL && scan.has_type && scan.type_len > 0) {
        /* the type is input too: no control byte reaches a terminal */
        escape_bytes(e->type_buf, sizeof(e->type_buf), scan.type, scan.type_len,
                     (sizeof(e->type_buf) - 1) / 4);
        e->event_type = e->type_buf;
    }
    if (e->event_id != NULL || !scan.has_id || scan.id_len == 0)
        return;
    char id[IB_ID_BUF_SIZE];
    if (ib_id_normalise(id, (const char *)scan.id, scan.id_len, IB_ID_ANY_VERSION) == IB_ID_VALID)
        snprintf(e->id_buf, sizeof(e->id_buf), "%s", id);
    else
        escape_bytes(e->id_buf, sizeof(e->id_buf), scan.id, scan.id_len, IB_DLQ_ID_SHOWN);
    e->event_id = e->id_buf;
}

void ib_dlq_entry_read(ib_dlq_entry *e, natsMsg *m)
{
    memset(e, 0, sizeof(*e));
    e->msg = m;
    e->seq = natsMsg_GetSequence(m);
    e->time_ms = natsMsg_GetTime(m) / 1000000;
    e->reason = header(e, "Ibus-Reason");
    e->error = header(e, "Ibus-Error");
    e->subject = header(e, "Ibus-Subject");
    e->stream = header(e, "Ibus-Stream");
    e->consumer = header(e, "Ibus-Consumer");
    e->handler = header_identity(e, "Ibus-Handler");
    e->event_id = header(e, "Ibus-Event-Id");
    e->event_type = header(e, "Ibus-Event-Type");
    e->stream_seq = header_u64(e, "Ibus-Stream-Seq");
    e->deliveries = header_u64(e, "Ibus-Delivery-Count");
    e->trace_id = header(e, "Ibus-Trace-Id");
    e->span_id = header(e, "Ibus-Span-Id");
    ib_dlq_entry_from_data(e, (const uint8_t *)natsMsg_GetData(m),
                           (size_t)natsMsg_GetDataLength(m));
}

int ib_dlq_filter_check(ib_dlq_filter *f, const char *id_text)
{
    if (f->reason != NULL && f->reason[0] != '\0') {
        bool known = false;
        for (int r = 0; r < IB_DLQ_REASON_COUNT && !known; r++)
            known = strcmp(f->reason, ib_dead_letter_reason_str((ib_dead_letter_reason)r)) == 0;
        if (!known) {
            fprintf(stderr,
                    "ibus dlq: --reason: unknown reason '%s' (decode, invalid-id, max-deliver, "
                    "rejected, conflict, other)\n",
                    f->reason);
            return -1;
        }
    }
    f->id[0] = '\0';
    if (id_text == NULL || id_text[0] == '\0')
        return 0;
    char id[IB_ID_BUF_SIZE];
    ib_id_reason r = ib_id_normalise(id, id_text, strlen(id_text), IB_ID_ANY_VERSION);
    if (r != IB_ID_VALID) {
        fprintf(stderr, "ibus dlq: --id: '%s' is not a UUID: %s\n", id_text, ib_id_reason_str(r));
        return -1;
    }
    snprintf(f->id, sizeof(f->id), "%s", id);
    return 0;
}

int ib_dlq_parse_time(int64_t *out_ms, const char *text, int64_t now_ms)
{
    int64_t ago = 0;
    if (ib_parse_duration_ms(&ago, text) == 0) {
        *out_ms = now_ms - ago;
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == NULL) {
        memset(&tm, 0, sizeof(tm));
        end = strptime(text, "%Y-%m-%dT%H:%M", &tm);
    }
    if (end == NULL || (end[0] != '\0' && strcmp(end, "Z") != 0))
        return -1;
    *out_ms = (int64_t)timegm(&tm) * 1000;
    return 0;
}

static bool same(const char *want, const char *have)
{
    return want == NULL || want[0] == '\0' || (have != NULL && strcmp(want, have) == 0);
}

bool ib_dlq_filter_match(const ib_dlq_filter *f, const ib_dlq_entry *e)
{
    if (!same(f->reason, e->reason) || !same(f->consumer, e->consumer) ||
        !same(f->type, e->event_type) || !same(f->id, e->event_id))
        return false;
    if (f->since_ms != 0 && e->time_ms < f->since_ms)
        return false;
    return f->until_ms == 0 || e->time_ms < f->until_ms;
}

/* A message the stream no longer has (deleted or purged) is "not found",
 * an answer: the walk goes on. */
static bool msg_gone(natsStatus s, jsErrCode jerr)
{
    return s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr;
}

static int stream_range(uint64_t *first, uint64_t *last, jsCtx *js, const char *stream)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    char why[200];
    natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
        fprintf(stderr,
                "ibus dlq: there is no dead-letter stream %s; name it with --stream, or give "
                "the --durable of the ibus run processes (their stream is DLQ_<durable> when "
                "they ran with --create)\n",
                stream);
        return 2;
    }
    if (s != NATS_OK) {
        fprintf(stderr, "ibus dlq: stream %s: %s (jetstream error %d)\n", stream,
                ib_nats_strerror(why, sizeof(why), s), (int)jerr);
        return 1;
    }
    *first = si->State.FirstSeq;
    *last = si->State.Msgs > 0 ? si->State.LastSeq : 0;
    jsStreamInfo_Destroy(si);
    return 0;
}

int ib_dlq_read_one(ib_dlq_entry *e, jsCtx *js, const char *stream, uint64_t seq)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    char why[200];
    uint64_t first = 0, last = 0;
    int code = stream_range(&first, &last, js, stream);
    if (code != 0)
        return code;
    natsStatus s = js_GetMsg(&m, js, stream, seq, NULL, &jerr);
    if (msg_gone(s, jerr)) {
        fprintf(stderr, "ibus dlq: stream %s has no dead letter %" PRIu64 "\n", stream, seq);
        return 3;
    }
    if (s != NATS_OK) {
        fprintf(stderr, "ibus dlq: stream %s, sequence %" PRIu64 ": %s\n", stream, seq,
                ib_nats_strerror(why, sizeof(why), s));
        return 1;
    }
    ib_dlq_entry_read(e, m);
    return 0;
}

int ib_dlq_walk(jsCtx *js, const char *stream, const ib_dlq_filter *f, ib_dlq_visit_fn visit,
                void *ctx, uint64_t *visited)
{
    uint64_t first = 0, last = 0;
    char why[200];
    *visited = 0;
    int code = stream_range(&first, &last, js, stream);
    for (uint64_t seq = first; code == 0 && seq != 0 && seq <= last; seq++) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        ib_dlq_entry e;
        natsStatus s = js_GetMsg(&m, js, stream, seq, NULL, &jerr);
        if (msg_gone(s, jerr))
            continue;
        if (s != NATS_OK) {
            fprintf(stderr, "ibus dlq: stream %s, sequence %" PRIu64 ": %s\n", stream, seq,
                    ib_nats_strerror(why, sizeof(why), s));
            return 1;
        }
        ib_dlq_entry_read(&e, m);
        bool stop = false;
        if (ib_dlq_filter_match(f, &e)) {
            (*visited)++;
            stop = visit(ctx, &e) != 0;
        }
        ib_dlq_entry_clear(&e);
        if (stop)
            break;
    }
    return code;
}

char *ib_dlq_format_time(char *buf, size_t cap, int64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t w = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + w, cap - w, ".%03dZ", (int)(ms % 1000));
    return buf;
}

char *ib_dlq_replay_msg_id(char *buf, size_t cap, const char *stream, uint64_t seq)
{
    snprintf(buf, cap, "ibus-replay:%s:%" PRIu64, stream, seq);
    return buf;
}
