/* sqlite: marker counts without scans (schema version 5).
 *
 * processed_counts holds, per consumer, how many rows processed_markers
 * has, kept by every merge (the keys it inserts and deletes) and every
 * prune (the rows it deletes). The journal rows not merged yet carry their
 * own count (`marked`, what each adds) and time (`ts`). So the number of
 * markers is the counts plus the unmerged journal rows, a read of a few
 * rows whatever the file holds: ibus markers stats and the keeper's gauge
 * used to count a view over the whole file, under the recorder's lock. */
#include "sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

bool ib__sq_tally_add(sq_tally *t, const char *consumer, int64_t delta, int64_t ts)
{
    sq_tally_entry *e = NULL;
    for (size_t i = 0; i < t->n && e == NULL; i++)
        if (strcmp(t->v[i].consumer, consumer) == 0)
            e = &t->v[i];
    if (e == NULL) {
        if (t->n == t->cap) {
            size_t cap = t->cap == 0 ? 4 : 2 * t->cap;
            sq_tally_entry *grown = realloc(t->v, cap * sizeof(*grown));
            if (grown == NULL)
                return false;
            t->v = grown;
            t->cap = cap;
        }
        char *name = strdup(consumer);
        if (name == NULL)
            return false;
        e = &t->v[t->n++];
        *e = (sq_tally_entry){.consumer = name, .oldest = INT64_MAX, .newest = INT64_MIN};
    }
    e->delta += delta;
    if (delta > 0 && ts < e->oldest)
        e->oldest = ts;
    if (delta > 0 && ts > e->newest)
        e->newest = ts;
    return true;
}

void ib__sq_tally_free(sq_tally *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].consumer);
    free(t->v);
    memset(t, 0, sizeof(*t));
}

int ib__sq_tally_write(sq_recorder *s, const sq_tally *t, int64_t floor_ms)
{
    sqlite3_stmt *add = s->q[Q_COUNTS_ADD];
    int rc = SQLITE_OK;
    for (size_t i = 0; i < t->n && rc == SQLITE_OK; i++) {
        const sq_tally_entry *e = &t->v[i];
        rc = sqlite3_bind_text(add, 1, e->consumer, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(add, 2, e->delta);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(add, 3, e->oldest);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(add, 4, e->newest);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(add, 5, floor_ms);
        rc = rc == SQLITE_OK ? ib__sq_step_done(add) : (sqlite3_reset(add), rc);
    }
    return rc;
}

int ib__sq_body_stats(sq_recorder *s, void *vctx, ib_error *local)
{
    ib_recorder_stats *out = vctx;
    sqlite3_stmt *st = s->q[Q_STATS];
    (void)local;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        int64_t markers = sqlite3_column_int64(st, 0);
        out->markers = markers > 0 ? (uint64_t)markers : 0;
        out->consumers = (uint64_t)sqlite3_column_int64(st, 1);
        out->oldest_ts_ms = sqlite3_column_int64(st, 2);
        out->newest_ts_ms = sqlite3_column_int64(st, 3);
        rc = SQLITE_DONE;
    }
    int rrc = sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    if (rrc != SQLITE_OK)
        return rrc;
    rc = ib__sq_read_count(&out->claims, s->q[Q_STATS_CLAIMS]);
    if (rc != SQLITE_OK || !s->in_memory)
        return rc;
    /* A file's size is read from the file system instead (WAL included). */
    return ib__sq_read_count(&out->storage_bytes, s->q[Q_STATS_PAGES]);
}
