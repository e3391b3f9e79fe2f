/* sqlite: the journal row a transaction is writing (sqlite_journal.c).
 *
 * A transaction appends one journal row per consumer, not one per key: a
 * row holds the states of a batch as a JSON array (sqlite_states.h), so a
 * batch of 64 marks costs one INSERT instead of 64; the catch-up reads it
 * with sqlite_states.c, the views with SQLite's JSON functions. The row
 * is built in memory as states are put and inserted just before COMMIT;
 * a rollback drops it. */
#include "sqlite_internal.h"
#include "sqlite_states.h"

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

int ib__sq_pending_add(sq_recorder *s, uint64_t *seq, const ib_marker_key *key, const sq_state *st)
{
    sq_pending *p = &s->pending;
    if (p->count > 0 &&
        (p->count == IB__SQ_ROW_STATES || strcmp(p->consumer, key->consumer) != 0)) {
        int rc = ib__sq_pending_flush(s);
        if (rc != SQLITE_OK)
            return rc;
    }
    if (!reserve(p, IB__SQ_STATE_TEXT_MAX + 1))
        return SQLITE_NOMEM;
    if (p->count == 0) {
        p->row = (s->tail.seen >> IB__SQ_SEQ_SHIFT) + 1;
        memcpy(p->consumer, key->consumer, strlen(key->consumer) + 1);
        p->len = 0;
        p->buf[p->len++] = '[';
    } else {
        p->buf[p->len++] = ',';
    }
    p->len += ib__sq_state_encode(p->buf + p->len, key->event_id, st);
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
        rc = sqlite3_bind_int64(put, 4, p->marked);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(put, 5, p->ts);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(put);
    int rrc = sqlite3_reset(put);
    p->count = 0;
    p->len = 0;
    p->marked = 0;
    p->ts = 0;
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
    s->pending.marked = 0;
    s->pending.ts = 0;
}

void ib__sq_pending_free(sq_recorder *s)
{
    free(s->pending.buf);
    memset(&s->pending, 0, sizeof(s->pending));
}
