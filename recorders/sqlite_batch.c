/* sqlite: the journal row a transaction is writing (sqlite_journal.c).
 *
 * A transaction appends one journal row per consumer, not one per key: a
 * row holds the states of a batch as a JSON array of
 * [event_id, done, ts, fp, owner, expires_ms, attempts] arrays, so a batch
 * of 64 marks costs one INSERT instead of 64, and SQLite's own JSON
 * functions read it back (the catch-up, the processed_log view). The row
 * is built in memory as states are put and inserted just before COMMIT;
 * a rollback drops it. */
#include "sqlite_internal.h"
#include "uuid.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 4096

static bool reserve(sq_pending *p, size_t more)
{
    if (p->len + more <= p->cap)
        return true;
    size_t cap = p->cap == 0 ? FIRST_CAP : p->cap;
    while (cap < p->len + more)
        cap *= 2;
    char *grown = realloc(p->buf, cap);
    if (grown == NULL)
        return false;
    p->buf = grown;
    p->cap = cap;
    return true;
}

/* Appends bytes the caller reserved room for. */
static void put_raw(sq_pending *p, const char *bytes, size_t n)
{
    memcpy(p->buf + p->len, bytes, n);
    p->len += n;
}

static void put_int(sq_pending *p, int64_t v)
{
    char digits[24];
    size_t n = 0;
    /* negate in unsigned arithmetic, so INT64_MIN is safe */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        p->buf[p->len++] = '-';
    while (n > 0)
        p->buf[p->len++] = digits[--n];
}

/* A JSON string: quotes, backslashes and control characters escaped;
 * other bytes as they are (SQLite's JSON functions take UTF-8 text). */
static void put_string(sq_pending *p, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    p->buf[p->len++] = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            p->buf[p->len++] = '\\';
            p->buf[p->len++] = (char)*c;
        } else if (*c < 0x20) {
            put_raw(p, "\\u00", 4);
            p->buf[p->len++] = hex[*c >> 4];
            p->buf[p->len++] = hex[*c & 15];
        } else {
            p->buf[p->len++] = (char)*c;
        }
    }
    p->buf[p->len++] = '"';
}

int ib__sq_pending_add(sq_recorder *s, uint64_t *seq, const ib_marker_key *key, const sq_state *st)
{
    sq_pending *p = &s->pending;
    if (p->count > 0 &&
        (p->count == IB__SQ_ROW_STATES || strcmp(p->consumer, key->consumer) != 0)) {
        int rc = ib__sq_pending_flush(s);
        if (rc != SQLITE_OK)
            return rc;
    }
    /* ids are 32 bytes, owners at most IB_OWNER_MAX escaped to 6 each,
     * seven numbers at most 20 each, and punctuation */
    if (!reserve(p, 64 + 6 * (size_t)IB_OWNER_MAX + 7 * 21))
        return SQLITE_NOMEM;
    if (p->count == 0) {
        p->row = (s->tail.seen >> IB__SQ_SEQ_SHIFT) + 1;
        memcpy(p->consumer, key->consumer, strlen(key->consumer) + 1);
        p->len = 0;
        p->buf[p->len++] = '[';
    } else {
        p->buf[p->len++] = ',';
    }
    p->buf[p->len++] = '[';
    /* a normalised id is 32 hex digits: nothing to escape */
    p->buf[p->len++] = '"';
    put_raw(p, key->event_id, IB_ID_LEN);
    p->buf[p->len++] = '"';
    p->buf[p->len++] = ',';
    put_int(p, st->done);
    p->buf[p->len++] = ',';
    put_int(p, st->done ? st->ts : 0);
    p->buf[p->len++] = ',';
    put_int(p, st->done ? (int64_t)st->fp : 0);
    p->buf[p->len++] = ',';
    put_string(p, st->owner);
    p->buf[p->len++] = ',';
    put_int(p, st->expires);
    p->buf[p->len++] = ',';
    put_int(p, st->attempts);
    p->buf[p->len++] = ']';
    *seq = p->row << IB__SQ_SEQ_SHIFT | p->count;
    p->count++;
    return SQLITE_OK;
}

int ib__sq_pending_flush(sq_recorder *s)
{
    sq_pending *p = &s->pending;
    if (p->count == 0)
        return SQLITE_OK;
    if (!reserve(p, 1))
        return SQLITE_NOMEM;
    p->buf[p->len++] = ']';
    sqlite3_stmt *put = s->q[Q_JOURNAL_PUT];
    int rc = sqlite3_bind_int64(put, 1, (sqlite3_int64)p->row);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(put, 2, p->consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(put, 3, p->buf, (int)p->len, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(put);
    int rrc = sqlite3_reset(put);
    p->count = 0;
    p->len = 0;
    if (rc != SQLITE_DONE)
        return rc == SQLITE_OK || rc == SQLITE_ROW ? SQLITE_INTERNAL : rc;
    if (rrc == SQLITE_OK)
        s->written_row = p->row;
    return rrc;
}

void ib__sq_pending_drop(sq_recorder *s)
{
    s->pending.count = 0;
    s->pending.len = 0;
}

void ib__sq_pending_free(sq_recorder *s)
{
    free(s->pending.buf);
    memset(&s->pending, 0, sizeof(s->pending));
}
