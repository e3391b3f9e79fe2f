/* sqlite: one key's rows, read and written inside the caller's transaction
 * (the tables and their invariants: the top of sqlite.c). */
#include "sqlite_internal.h"

#include <string.h>

#include "uuid.h"

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

int ib__sq_claim_put(sq_recorder *s, int64_t cid, const char *event_id, const sq_state *st)
{
    sqlite3_stmt *q = s->q[Q_CLAIM_PUT];
    int rc = bind_key(q, cid, event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(q, 3, st->owner, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 4, st->expires);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 5, st->attempts);
    if (rc != SQLITE_OK) {
        sqlite3_reset(q);
        return rc;
    }
    return ib__sq_step_done(q);
}

int ib__sq_claim_del(sq_recorder *s, int64_t cid, const char *event_id)
{
    sqlite3_stmt *q = s->q[Q_CLAIM_DEL];
    int rc = bind_key(q, cid, event_id);
    if (rc != SQLITE_OK) {
        sqlite3_reset(q);
        return rc;
    }
    return ib__sq_step_done(q);
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

int ib__sq_mark(sq_recorder *s, int64_t cid, const ib_marker_key *key, const sq_state *st,
                int64_t ts, uint64_t fp)
{
    int rc = SQLITE_OK;
    if (cid == 0)
        rc = ib__sq_cid(s, &cid, key->consumer, true);
    if (rc == SQLITE_OK && st->claimed)
        rc = ib__sq_claim_del(s, cid, key->event_id);
    if (rc != SQLITE_OK || st->done)
        return rc;
    sqlite3_stmt *q = s->q[Q_MARKER_PUT];
    int64_t stored = ib__sq_fp_stored(fp);
    rc = bind_key(q, cid, key->event_id);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(q, 3, ts);
    if (rc == SQLITE_OK)
        rc = stored != 0 ? sqlite3_bind_int64(q, 4, stored) : sqlite3_bind_null(q, 4);
    if (rc != SQLITE_OK) {
        sqlite3_reset(q);
        return rc;
    }
    return ib__sq_step_done(q);
}
