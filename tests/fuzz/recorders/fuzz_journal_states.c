/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the JSON text of a journal row's states
 * (recorders/sqlite_states.c).
 *
 * Any bytes go through ib__sq_states_parse. It must never read outside
 * them, and what it accepts must be JSON that SQLite's json_valid accepts
 * too (the views read the same text with SQLite's functions). Every state
 * it accepts is encoded again; the encoding must parse back to the same
 * state, and encoding that once more must give the same bytes. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_states.h"
#include "uuid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_state(void *ctx, size_t index, const sq_state *st)
{
    const sq_state *want = ctx;
    if (index != 0 || memcmp(st->id, want->id, 16) != 0 || st->done != want->done ||
        strcmp(st->owner, want->owner) != 0 || st->expires != want->expires ||
        st->attempts != want->attempts)
        abort();
    if (st->done && (st->ts != want->ts || st->fp != want->fp))
        abort();
    return 0;
}

static int round_trip(void *ctx, size_t index, const sq_state *st)
{
    char id[IB_ID_BUF_SIZE], text[IB__SQ_STATE_TEXT_MAX + 2], again[IB__SQ_STATE_TEXT_MAX + 2];
    (void)ctx;
    (void)index;
    ib_id_unpack(id, st->id);
    text[0] = '[';
    size_t len = 1 + ib__sq_state_encode(text + 1, id, st);
    text[len++] = ']';
    if (ib__sq_states_parse(text, len, same_state, (void *)st) != 0)
        abort();
    again[0] = '[';
    size_t len2 = 1 + ib__sq_state_encode(again + 1, id, st);
    again[len2++] = ']';
    if (len2 != len || memcmp(text, again, len) != 0)
        abort();
    return 0;
}

static int json_valid(const uint8_t *data, size_t size)
{
    static sqlite3 *db;
    static sqlite3_stmt *st;
    if (db == NULL && (sqlite3_open(":memory:", &db) != SQLITE_OK ||
                       sqlite3_prepare_v2(db, "SELECT json_valid(?1)", -1, &st, NULL) != SQLITE_OK))
        abort();
    sqlite3_bind_text(st, 1, (const char *)data, (int)size, SQLITE_STATIC);
    int valid = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_reset(st);
    return valid;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    /* a copy of exactly `size` bytes, so reading past it is caught */
    char *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    int rc = ib__sq_states_parse(copy, size, round_trip, NULL);
    if (rc != 0 && rc != -1)
        abort();
    /* SQLite reads text up to a NUL; ours takes the length */
    if (rc == 0 && memchr(copy, '\0', size) == NULL && json_valid(data, size) != 1)
        abort();
    free(copy);
    return 0;
}
