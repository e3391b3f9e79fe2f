/* SPDX-License-Identifier: Apache-2.0 */
/* The outside tool's question, "SELECT 1 FROM processed_log WHERE
 * consumer = ? AND event_id = ?", asked on a connection of its own, as
 * the seed's SQL or an sqlite3 shell would (store_layouts.h). The plan is
 * read with EXPLAIN QUERY PLAN: it searches when every marker table it
 * touches is searched by the whole key (consumer or cid, and event_id). */
#include <stdio.h>
#include <string.h>

#include "store_layouts.h"

#define LOOKUP_SQL "SELECT 1 FROM processed_log WHERE consumer = ?1 AND event_id = ?2"

/* A plan line that reads more than one key's rows of a marker table. */
static bool line_scans(const char *detail)
{
    if (strncmp(detail, "SCAN ", 5) == 0)
        return true;
    if (strncmp(detail, "SEARCH ", 7) != 0)
        return false;
    return strstr(detail, "processed_consumers") == NULL && strstr(detail, "event_id=?") == NULL;
}

/* 1 when the plan searches, 2 when it scans; the plan goes into `text`. */
static int read_plan(sqlite3 *db, char *text, size_t cap)
{
    sqlite3_stmt *st = ib__sl_prepare(db, "EXPLAIN QUERY PLAN " LOOKUP_SQL);
    size_t len = 0;
    int plan = 1;
    text[0] = '\0';
    while (ib__sl_row(st)) {
        const char *detail = (const char *)sqlite3_column_text(st, 3);
        if (detail == NULL)
            continue;
        if (line_scans(detail))
            plan = 2;
        if (len < cap)
            len += (size_t)snprintf(text + len, cap - len, "    %s\n", detail);
    }
    sqlite3_finalize(st);
    return plan;
}

static bool lookup_one(sqlite3_stmt *st, const char *hex)
{
    sqlite3_bind_text(st, 1, IB__SL_CONSUMER, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, hex, 32, SQLITE_STATIC);
    bool found = ib__sl_row(st);
    sqlite3_reset(st);
    return found;
}

/* Half hits (ids the run marked, spread over it), half misses. */
static void time_lookups(ib__sl_result *r, sqlite3 *db, const ib__sl_stream *st, size_t n)
{
    sqlite3_stmt *q = ib__sl_prepare(db, LOOKUP_SQL);
    uint64_t rng = 0x5eed;
    ib__sl_id miss;
    double t0 = ib__sl_now_ms();
    for (size_t i = 0; i < n; i++) {
        bool hit = i % 2 == 0;
        const char *hex = st->ids[(ib__sl_rand(&rng) % st->n)].hex;
        if (!hit) {
            ib__sl_id_random(&miss, &rng);
            hex = miss.hex;
        }
        if (lookup_one(q, hex) != hit)
            ib__sl_die("processed_log answered %s for %s", hit ? "no row" : "a row", hex);
    }
    r->lookup_us = (ib__sl_now_ms() - t0) * 1e3 / (double)(n > 0 ? n : 1);
    r->lookups = n;
    sqlite3_finalize(q);
}

void ib__sl_lookup(ib__sl_result *r, const char *path, const ib__sl_layout *layout,
                   const ib__sl_stream *st, const ib__sl_opts *o)
{
    char plan[2048], sql[64];
    sqlite3 *db = NULL;
    r->lookup_plan = layout->view != 0 ? 1 : 0;
    if (layout->view == 0)
        return;
    ib__sl_check(db, sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), path);
    snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%d", IB__SL_CACHE_KIB);
    ib__sl_exec(db, sql);
    r->lookup_plan = read_plan(db, plan, sizeof(plan));
    if (r->lookup_plan == 2 && layout->view == 1)
        ib__sl_die("%s: the outside SELECT through processed_log does not search by the "
                   "primary key; its plan:\n%s",
                   layout->name, plan);
    time_lookups(r, db, st, r->lookup_plan == 2 ? o->scan_lookups : o->lookups);
    ib__sl_check(db, sqlite3_close(db), "close");
}
