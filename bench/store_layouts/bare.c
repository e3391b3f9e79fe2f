/* SPDX-License-Identifier: Apache-2.0 */
/* Row "bare": the baseline, not a candidate. One INSERT OR IGNORE per id
 * into plain's processed_log, a transaction per batch, no claims and no
 * second transaction: what a hand-written loop that only records markers
 * costs on the same file, at the same synchronous setting. It runs on
 * plain's preloaded file (store_layouts.h). */
#include <stdlib.h>

#include "store_layouts.h"

typedef struct bare {
    sqlite3_stmt *put;
} bare;

static void bare_open(ib__sl_store *s)
{
    bare *b = calloc(1, sizeof(*b));
    if (b == NULL)
        ib__sl_die("out of memory");
    s->impl = b;
    b->put = ib__sl_prepare(s->db, "INSERT OR IGNORE INTO processed_log VALUES (?1, ?2, ?3, ?4)");
}

/* New ids insert a row; a duplicate changes nothing. */
static void bare_insert(ib__sl_store *s, void *batch)
{
    bare *p = s->impl;
    ib__sl_batch *b = batch;
    for (size_t i = 0; i < b->n; i++) {
        sqlite3_bind_text(p->put, 1, IB__SL_CONSUMER, -1, SQLITE_STATIC);
        sqlite3_bind_text(p->put, 2, b->ids[i].hex, 32, SQLITE_STATIC);
        sqlite3_bind_int64(p->put, 3, b->now_ms);
        sqlite3_bind_int64(p->put, 4, (int64_t)b->fps[i]);
        ib__sl_done(p->put);
        b->verdict[i] = sqlite3_changes(s->db) > 0 ? IB__SL_NEW : IB__SL_MARKED;
    }
}

static uint64_t bare_count(ib__sl_store *s)
{
    return (uint64_t)ib__sl_int(s->db, "SELECT count(*) FROM processed_log");
}

static void bare_close(ib__sl_store *s)
{
    bare *b = s->impl;
    sqlite3_finalize(b->put);
    free(b);
    s->impl = NULL;
}

const ib__sl_layout ib__sl_bare = {
    .name = "bare",
    .preload_as = "plain",
    .open = bare_open,
    .acquire = bare_insert,
    .count = bare_count,
    .close = bare_close,
};
