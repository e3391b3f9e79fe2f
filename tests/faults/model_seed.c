/* SPDX-License-Identifier: Apache-2.0 */
/* The seed's own SQL (model_seed.h). */
#include "model_seed.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#define SEED_CREATE                                                                                \
    "CREATE TABLE IF NOT EXISTS processed_log (consumer TEXT NOT NULL, event_id TEXT NOT NULL, "   \
    "ts REAL NOT NULL, PRIMARY KEY (consumer, event_id))"
#define SEED_SELECT "SELECT 1 FROM processed_log WHERE consumer = ? AND event_id = ?"
#define SEED_INSERT "INSERT OR IGNORE INTO processed_log (consumer, event_id, ts) VALUES (?, ?, ?)"

struct seed_db {
    sqlite3 *db;
};

int seed_open(seed_db **out, const char *path, int busy_timeout_ms, char *why, size_t why_len)
{
    *out = NULL;
    /* the recorder refuses a file others may write: make it 0600 first */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    seed_db *s = calloc(1, sizeof(*s));
    if (s == NULL || fd < 0) {
        free(s);
        snprintf(why, why_len, "seed: cannot create %s", path);
        return -1;
    }
    int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(s->db, busy_timeout_ms);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, SEED_CREATE, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        snprintf(why, why_len, "seed: %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "no memory");
        seed_close(s);
        return -1;
    }
    sqlite3_extended_result_codes(s->db, 1);
    *out = s;
    return 0;
}

void seed_close(seed_db *s)
{
    if (s != NULL)
        sqlite3_close(s->db);
    free(s);
}

const char *seed_errmsg(seed_db *s)
{
    return sqlite3_errmsg(s->db);
}

static int run_insert(seed_db *s, const char *consumer, const char *id, size_t id_len, double ts)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, SEED_INSERT, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, id, (int)id_len, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_double(st, 3, ts);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(s->db);
    sqlite3_finalize(st);
    return rc;
}

int seed_insert(seed_db *s, const char *consumer, const char *id, size_t id_len, double ts)
{
    int rc = sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = run_insert(s, consumer, id, id_len, ts);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        rc = sqlite3_extended_errcode(s->db) != SQLITE_OK ? sqlite3_extended_errcode(s->db) : rc;
    return rc;
}

bool seed_end_transaction(seed_db *s)
{
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return sqlite3_get_autocommit(s->db) != 0;
}

int seed_select(seed_db *s, bool *found, const char *consumer, const char *id)
{
    sqlite3_stmt *st = NULL;
    *found = false;
    int rc = sqlite3_prepare_v2(s->db, SEED_SELECT, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, consumer, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) {
        int step = sqlite3_step(st);
        *found = step == SQLITE_ROW;
        rc =
            step == SQLITE_ROW || step == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(s->db);
    }
    /* finalized at once: an open statement would hold a read snapshot */
    sqlite3_finalize(st);
    return rc;
}

int seed_integrity(seed_db *s, char *out, size_t len)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &st, NULL);
    int step = rc == SQLITE_OK ? sqlite3_step(st) : rc;
    const unsigned char *text = step == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    snprintf(out, len, "%s", text != NULL ? (const char *)text : sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return text != NULL && strcmp((const char *)text, "ok") == 0 ? 0 : -1;
}
