/* SPDX-License-Identifier: Apache-2.0 */
/* Preloaded files: made once per layout and size in one transaction,
 * with no journal and no syncs (a file that is not finished is made again,
 * never used), then switched to WAL; the runs copy them. A table
 * bench_preload records what the file holds, so that --keep can reuse it
 * in a later run with the same options (store_layouts.h). */
#include <stdio.h>
#include <string.h>

#include "store_layouts.h"

#define FORMAT 1 /* raise when a layout's tables change */

/* Whether `path` is a finished preload of these options; fills seconds
 * and base_ms from it. */
static bool reusable(ib__sl_preloaded *out, const char *name, size_t n, const ib__sl_opts *o)
{
    sqlite3 *db = NULL;
    bool ok = false;
    if (ib__sl_file_bytes(out->path) == 0 ||
        sqlite3_open_v2(out->path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return false;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT seconds, base_ms FROM bench_preload WHERE layout = ?1 AND "
                           "markers = ?2 AND seed = ?3 AND random_order = ?4 AND format = ?5",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (int64_t)n);
        sqlite3_bind_int64(st, 3, (int64_t)o->seed);
        sqlite3_bind_int(st, 4, o->random_order);
        sqlite3_bind_int(st, 5, FORMAT);
        ok = sqlite3_step(st) == SQLITE_ROW;
        if (ok) {
            out->seconds = sqlite3_column_double(st, 0);
            out->base_ms = sqlite3_column_int64(st, 1);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ok;
}

static void build(const char *path, const ib__sl_layout *L, const ib__sl_preload *p,
                  const ib__sl_opts *o)
{
    ib__sl_store s;
    char sql[96];
    memset(&s, 0, sizeof(s));
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    ib__sl_check(s.db, sqlite3_open_v2(path, &s.db, flags, NULL), path);
    snprintf(sql, sizeof(sql), "PRAGMA page_size = %d", IB__SL_PAGE_SIZE);
    ib__sl_exec(s.db, sql);
    ib__sl_exec(s.db, "PRAGMA journal_mode = OFF");
    ib__sl_exec(s.db, "PRAGMA synchronous = OFF");
    /* Random order touches the whole tree: let it stay in memory. */
    ib__sl_exec(s.db,
                o->random_order ? "PRAGMA cache_size = -2097152" : "PRAGMA cache_size = -65536");
    ib__sl_exec(s.db, "BEGIN");
    L->create(&s);
    L->preload(&s, p);
    ib__sl_exec(s.db, "CREATE TABLE bench_preload (layout TEXT, markers INTEGER, seed INTEGER, "
                      "random_order INTEGER, format INTEGER, base_ms INTEGER, seconds REAL)");
    ib__sl_exec(s.db, "COMMIT");
    ib__sl_exec(s.db, "PRAGMA journal_mode = WAL");
    ib__sl_check(s.db, sqlite3_close(s.db), "close");
}

/* Notes what the file holds, once it is whole. */
static void note(const ib__sl_preloaded *out, const char *name, size_t n, const ib__sl_opts *o)
{
    sqlite3 *db = NULL;
    ib__sl_check(db, sqlite3_open_v2(out->path, &db, SQLITE_OPEN_READWRITE, NULL), out->path);
    sqlite3_stmt *st = ib__sl_prepare(db, "INSERT INTO bench_preload "
                                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)n);
    sqlite3_bind_int64(st, 3, (int64_t)o->seed);
    sqlite3_bind_int(st, 4, o->random_order);
    sqlite3_bind_int(st, 5, FORMAT);
    sqlite3_bind_int64(st, 6, out->base_ms);
    sqlite3_bind_double(st, 7, out->seconds);
    ib__sl_done(st);
    sqlite3_finalize(st);
    ib__sl_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    ib__sl_check(db, sqlite3_close(db), "close");
}

void ib__sl_preload_ensure(ib__sl_preloaded *out, const char *dir, const ib__sl_layout *L, size_t n,
                           const ib__sl_opts *o, ib__sl_preload *set)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->path, sizeof(out->path), "%s/%s-%zu.db", dir, L->name, n);
    /* Without --keep the driver removed every file of an earlier run, so
     * a file found here was made by this one (bare uses plain's). */
    if (reusable(out, L->name, n, o)) {
        out->reused = true;
        return;
    }
    if (set->raw == NULL)
        ib__sl_preload_make(set, n, o->seed, o->random_order);
    ib__sl_remove_db(out->path);
    double t0 = ib__sl_now_ms();
    build(out->path, L, set, o);
    out->seconds = (ib__sl_now_ms() - t0) / 1e3;
    out->base_ms = set->base_ms;
    note(out, L->name, n, o);
}
