/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: one key's rows, read and written inside the caller's transaction,
 * and the counts the transaction owes processed_consumers (the tables and
 * their invariants: the top of sqlite.c). */
#include "sqlite_internal.h"

#include <string.h>

#include "uuid.h"

int ib__sq_step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    int rrc = sqlite3_reset(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        return rrc;
    return rc;
}

int ib__sq_read_count(uint64_t *out, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = (uint64_t)sqlite3_column_int64(st, 0);
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(st);
    return rc != SQLITE_DONE ? rc : rrc;
}

/* --- counts ------------------------------------------------------------------ */

static int count_write(sq_recorder *s, int64_t cid, int64_t delta, int64_t oldest, int64_t newest)
{
    sqlite3_stmt *q = s->q[Q_COUNT_ADD];
    int rc = sqlite3_bind_int64(q, 1, cid);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 2, delta);
    if (rc == SQLITE_OK)
        rc = oldest > 0 ? sqlite3_bind_int64(q, 3, oldest) : sqlite3_bind_null(q, 3);
    if (rc == SQLITE_OK)
        rc = newest > 0 ? sqlite3_bind_int64(q, 4, newest) : sqlite3_bind_null(q, 4);
    return rc == SQLITE_OK ? ib__sq_step_done(q) : (sqlite3_reset(q), rc);
}

int ib__sq_tally(sq_recorder *s, int64_t cid, int64_t delta, int64_t ts)
{
    sq_tally *t = &s->tally;
    size_t i = 0;
    while (i < t->n && t->cid[i] != cid)
        i++;
    if (i == IB__SQ_TALLY)
        return count_write(s, cid, delta, ts, ts);
    if (i == t->n) {
        t->n++;
        t->cid[i] = cid;
        t->delta[i] = t->oldest[i] = t->newest[i] = 0;
    }
    t->delta[i] += delta;
    if (ts > 0 && (t->oldest[i] == 0 || ts < t->oldest[i]))
        t->oldest[i] = ts;
    if (ts > t->newest[i])
        t->newest[i] = ts;
    return SQLITE_OK;
}

int ib__sq_tally_flush(sq_recorder *s)
{
    sq_tally *t = &s->tally;
    for (size_t i = 0; i < t->n; i++) {
        int rc = count_write(s, t->cid[i], t->delta[i], t->oldest[i], t->newest[i]);
        if (rc != SQLITE_OK)
            return rc;
    }
    t->n = 0;
    return SQLITE_OK;
}

/* --- consumers and keys ---------------------------------------------------- */

/* Looks `consumer` up (and adds it with `create`); 0 when it has no row. */
static int cid_read(sq_recorder *s, int64_t *cid, const char *consumer, bool create)
{
    sqlite3_stmt *st = s->q[create ? Q_CID_PUT : Q_CID_GET];
    *cid = 0;
    int rc = sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *cid = sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st);
    }
    int rrc = sqlite3_reset(st);
    return rc == SQLITE_DONE ? rrc : rc;
}

int ib__sq_cid(sq_recorder *s, int64_t *cid, const char *consumer, bool create)
{
    sq_cids *c = &s->cids;
    size_t i = 0;
    while (i < c->n && strcmp(c->name[i], consumer) != 0)
        i++;
    if (i < c->n && (c->cid[i] != 0 || !create)) {
        *cid = c->cid[i];
        return SQLITE_OK;
    }
    int rc = cid_read(s, cid, consumer, false);
    if (rc == SQLITE_OK && *cid == 0 && create)
        rc = cid_read(s, cid, consumer, true);
    if (rc != SQLITE_OK)
        return rc;
    if (i == c->n && c->n < IB__SQ_CIDS)
        c->n++;
    if (i < c->n) {
        c->name[i] = consumer;
        c->cid[i] = *cid;
    }
    return SQLITE_OK;
}

static int bind_key(sqlite3_stmt *st, int64_t cid, const char *event_id)
{
    int rc = sqlite3_bind_int64(st, 1, cid);
    return rc == SQLITE_OK ? sqlite3_bind_text(st, 2, event_id, IB_ID_LEN, SQLITE_STATIC) : rc;
}

static void copy_owner(sq_state *out, const unsigned char *owner)
{
    size_t len = owner != NULL ? strnlen((const char *)owner, IB_OWNER_MAX) : 0;
    memcpy(out->owner, owner != NULL ? (const char *)owner : "", len);
    out->owner[len] = '\0';
}

int ib__sq_state_get(sq_recorder *s, sq_state *out, int64_t *cid, const ib_marker_key *key)
{
    memset(out, 0, sizeof(*out));
    int rc = ib__sq_cid(s, cid, key->consumer, false);
    if (rc != SQLITE_OK || *cid == 0)
        return rc;
    sqlite3_stmt *st = s->q[Q_STATE_GET];
    rc = bind_key(st, *cid, key->event_id);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        out->done = sqlite3_column_int(st, 0) != 0;
        out->ts = sqlite3_column_int64(st, 1);
        out->fp = sqlite3_column_int64(st, 2);
        out->claimed = sqlite3_column_int(st, 3) != 0;
        copy_owner(out, sqlite3_column_text(st, 4));
        out->expires = sqlite3_column_int64(st, 5);
        int64_t attempts = sqlite3_column_int64(st, 6);
        /* a row another tool wrote may hold anything */
        out->attempts = attempts <= 0            ? 0
                        : attempts >= UINT32_MAX ? UINT32_MAX
                                                 : (uint32_t)attempts;
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(st);
    return rc == SQLITE_DONE ? rrc : rc;
}

int ib__sq_claim_save(sq_recorder *s, int64_t cid, const char *event_id, const sq_state *st)
{
    bool keep = st->owner[0] != '\0' || st->attempts > 0;
    sqlite3_stmt *q = s->q[keep ? Q_CLAIM_PUT : Q_CLAIM_DEL];
    int rc = bind_key(q, cid, event_id);
    if (rc == SQLITE_OK && keep)
        rc = sqlite3_bind_text(q, 3, st->owner, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && keep)
        rc = sqlite3_bind_int64(q, 4, st->expires);
    if (rc == SQLITE_OK && keep)
        rc = sqlite3_bind_int64(q, 5, st->attempts);
    return rc == SQLITE_OK ? ib__sq_step_done(q) : (sqlite3_reset(q), rc);
}

int ib__sq_claim_new(sq_recorder *s, bool *taken, const ib_marker_key *key, const char *owner,
                     int64_t expires, uint32_t attempts)
{
    int64_t cid = 0;
    *taken = false;
    int rc = ib__sq_cid(s, &cid, key->consumer, true);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *q = s->q[Q_CLAIM_NEW];
    rc = bind_key(q, cid, key->event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(q, 3, owner, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 4, expires);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 5, attempts);
    rc = rc == SQLITE_OK ? ib__sq_step_done(q) : (sqlite3_reset(q), rc);
    *taken = rc == SQLITE_OK && sqlite3_changes(s->db) > 0;
    return rc;
}

bool ib__sq_foreign_claim(const sq_state *st, const char *owner, int64_t lease_now)
{
    return st->claimed && st->owner[0] != '\0' && strcmp(st->owner, owner) != 0 &&
           st->expires > lease_now;
}

int64_t ib__sq_fp_stored(uint64_t fp)
{
    if (fp == 0)
        return 0;
    int32_t top = (int32_t)(uint32_t)(fp >> 32);
    return top != 0 ? top : 1;
}

/* Ends the claim of a key unless another owner's lease on it still runs
 * (`owner` NULL: whoever holds it); `*foreign` when one does. */
static int end_claim(sq_recorder *s, bool *foreign, int64_t cid, const char *event_id,
                     const char *owner, int64_t lease_now)
{
    sqlite3_stmt *q = s->q[Q_CLAIM_END];
    *foreign = false;
    int rc = bind_key(q, cid, event_id);
    if (rc == SQLITE_OK && owner != NULL)
        rc = sqlite3_bind_text(q, 3, owner, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && owner == NULL)
        rc = sqlite3_bind_null(q, 3);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 4, lease_now);
    rc = rc == SQLITE_OK ? ib__sq_step_done(q) : (sqlite3_reset(q), rc);
    if (rc != SQLITE_OK || owner == NULL || sqlite3_changes(s->db) > 0)
        return rc;
    /* nothing was ended: no claim at all, or another owner's live one */
    q = s->q[Q_CLAIM_HELD];
    rc = bind_key(q, cid, event_id);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        *foreign = true;
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(q);
    return rc == SQLITE_DONE ? rrc : rc;
}

int ib__sq_mark(sq_recorder *s, bool *marked, const ib_marker_key *key, const char *owner,
                int64_t lease_now, int64_t ts, uint64_t fp)
{
    int64_t cid = 0;
    bool foreign = false;
    *marked = false;
    int rc = ib__sq_cid(s, &cid, key->consumer, true);
    if (rc == SQLITE_OK)
        rc = end_claim(s, &foreign, cid, key->event_id, owner, lease_now);
    if (rc != SQLITE_OK)
        return rc;
    if (foreign) {
        /* a marker decides over a claim row left beside it (invariant 3) */
        sq_state st;
        rc = ib__sq_state_get(s, &st, &cid, key);
        *marked = rc == SQLITE_OK && st.done;
        return rc;
    }
    sqlite3_stmt *q = s->q[Q_MARKER_PUT];
    int64_t stored = ib__sq_fp_stored(fp);
    rc = bind_key(q, cid, key->event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 3, ts);
    if (rc == SQLITE_OK)
        rc = stored != 0 ? sqlite3_bind_int64(q, 4, stored) : sqlite3_bind_null(q, 4);
    rc = rc == SQLITE_OK ? ib__sq_step_done(q) : (sqlite3_reset(q), rc);
    if (rc == SQLITE_OK && sqlite3_changes(s->db) > 0)
        rc = ib__sq_tally(s, cid, 1, ts);
    *marked = rc == SQLITE_OK;
    return rc;
}
