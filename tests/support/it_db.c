/* SPDX-License-Identifier: Apache-2.0 */
/* See it_db.h. */
#include "it_db.h"

#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

#include "it_proc.h"

/* Long enough to outlast any write transaction of a host under test. */
#define IT_DB_BUSY_MS 30000

/* Reads open read-write too: after a kill -9 the first connection must
 * rebuild the WAL index, which a read-only one cannot do. Nothing is
 * written unless the statement writes. */
static sqlite3 *db_open(const char *path, int flags)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        fprintf(stderr, "it_db: cannot open %s: %s\n", path,
                db != NULL ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, IT_DB_BUSY_MS);
    return db;
}

long it_db_rows(const char *path, const char *sql, it_db_row_fn row, void *ctx)
{
    sqlite3 *db = db_open(path, SQLITE_OPEN_READWRITE);
    sqlite3_stmt *st = NULL;
    long rows = 0;
    int rc = db != NULL ? sqlite3_prepare_v2(db, sql, -1, &st, NULL) : SQLITE_CANTOPEN;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *cols[16];
        int n = sqlite3_column_count(st);
        n = n < 16 ? n : 16;
        for (int i = 0; i < n; i++)
            cols[i] = (const char *)sqlite3_column_text(st, i);
        if (row != NULL)
            row(ctx, n, cols);
        rows++;
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_DONE && db != NULL)
        fprintf(stderr, "it_db: %s: %s\n", sql, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc == SQLITE_DONE ? rows : -1;
}

static void first_int(void *ctx, int ncol, const char *const *cols)
{
    int64_t *out = ctx;
    if (ncol > 0 && cols[0] != NULL && out[1] == 0) {
        out[0] = strtoll(cols[0], NULL, 10);
        out[1] = 1;
    }
}

bool it_db_int(int64_t *out, const char *path, const char *sql)
{
    int64_t got[2] = {0, 0}; /* value, seen */
    if (it_db_rows(path, sql, first_int, got) < 0 || got[1] == 0)
        return false;
    *out = got[0];
    return true;
}

int64_t it_db_wait_int(const char *path, const char *sql, int64_t want, int64_t timeout_ms)
{
    int64_t deadline = it_now_ms() + timeout_ms, v = -1;
    for (;;) {
        int64_t got;
        v = it_db_int(&got, path, sql) ? got : -1;
        if (v == want || it_now_ms() >= deadline)
            return v;
        it_sleep_ms(50);
    }
}

bool it_db_exec(const char *path, const char *sql)
{
    sqlite3 *db = db_open(path, SQLITE_OPEN_READWRITE);
    char *msg = NULL;
    int rc = db != NULL ? sqlite3_exec(db, sql, NULL, NULL, &msg) : SQLITE_CANTOPEN;
    if (rc != SQLITE_OK && db != NULL)
        fprintf(stderr, "it_db: %s: %s\n", sql, msg != NULL ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    sqlite3_close(db);
    return rc == SQLITE_OK;
}

char *it_db_blob_literal(const void *data, size_t len)
{
    const unsigned char *b = data;
    char *out = malloc(2 * len + 4);
    if (out == NULL)
        return NULL;
    size_t used = (size_t)sprintf(out, "X'");
    for (size_t i = 0; i < len; i++)
        used += (size_t)sprintf(out + used, "%02x", b[i]);
    sprintf(out + used, "'");
    return out;
}
