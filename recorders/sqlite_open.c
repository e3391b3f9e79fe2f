/* SPDX-License-Identifier: Apache-2.0 */
/* sqlite: opening and closing a marker file (the file and its invariants:
 * the top of sqlite.c). Opening checks the file (sqlite_file.c), creates it
 * with the configured mode, sets the connection up, brings the schema up to
 * date (sqlite_schema.c) and prepares the statements, in that order. */
#include "sqlite_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"

#define DEFAULT_PRUNE_ROWS 2000
/* Pages of a new file. Every new marker dirties one leaf wherever its
 * random id falls, so a commit writes about a page per marker: 2 KiB pages
 * write half the bytes of 4 KiB ones. 1 KiB pages make the tree deeper:
 * through ibus run on a file of 2 million markers they measured 27 400
 * msg/s against 32 300 for 2 KiB (bench/README.md, "Issue 30"). */
#define NEW_FILE_PAGE_SIZE 2048
/* The WAL file is cut back to this when it starts over. */
#define WAL_KEEP_BYTES (16 * 1024 * 1024)
/* Page cache per connection: the upper levels of the marker tree at ten
 * million markers, with room for the claims. */
#define CACHE_KIB 16384

static const char *const query_sql[Q_COUNT] = {
    [Q_BEGIN_READ] = "BEGIN",
    [Q_BEGIN_WRITE] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    /* data_version moves when another connection committed; only then is
     * user_version read again (sqlite_run.c). */
    [Q_DATA_VERSION] = "PRAGMA data_version",
    [Q_USER_VERSION] = "PRAGMA user_version",
    [Q_CID_GET] = "SELECT cid FROM processed_consumers WHERE name = ?1",
    [Q_CID_PUT] = "INSERT INTO processed_consumers (name) VALUES (?1) RETURNING cid",
    /* One row always: the key's marker and claim, each NULL when absent. */
    [Q_STATE_GET] = "SELECT m.cid IS NOT NULL, m.ts, coalesce(m.fp, 0), c.cid IS NOT NULL, "
                    "c.owner, c.expires_ms, c.attempts FROM (SELECT 1) "
                    "LEFT JOIN processed_markers m ON m.cid = ?1 AND m.event_id = ?2 "
                    "LEFT JOIN processed_claims c ON c.cid = ?1 AND c.event_id = ?2",
    [Q_MARKER_PUT] = "INSERT OR IGNORE INTO processed_markers (cid, event_id, ts, fp) "
                     "VALUES (?1, ?2, ?3, ?4)",
    [Q_MARKER_DEL] = "DELETE FROM processed_markers WHERE cid = ?1 AND event_id = ?2",
    [Q_CLAIM_PUT] = "INSERT OR REPLACE INTO processed_claims (cid, event_id, owner, expires_ms, "
                    "attempts) VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_CLAIM_DEL] = "DELETE FROM processed_claims WHERE cid = ?1 AND event_id = ?2",
    /* the fence of a mark (ib__sq_mark): ?3 the marking owner, NULL = any */
    [Q_CLAIM_END] = "DELETE FROM processed_claims WHERE cid = ?1 AND event_id = ?2 AND (?3 IS NULL "
                    "OR owner = '' OR owner = ?3 OR expires_ms <= ?4)",
    [Q_CLAIM_HELD] = "SELECT 1 FROM processed_claims WHERE cid = ?1 AND event_id = ?2",
    /* a new key's claim, when it is neither marked nor claimed (body_acquire) */
    [Q_CLAIM_NEW] = "INSERT INTO processed_claims (cid, event_id, owner, expires_ms, attempts) "
                    "SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT EXISTS (SELECT 1 FROM processed_markers "
                    "WHERE cid = ?1 AND event_id = ?2) ON CONFLICT DO NOTHING",
    /* the tally of a transaction (invariant 7); ?3/?4 NULL: nothing added */
    [Q_COUNT_ADD] = "UPDATE processed_consumers SET markers = max(markers + ?2, 0), oldest_ms = "
                    "coalesce(min(coalesce(oldest_ms, ?3), ?3), oldest_ms), newest_ms = "
                    "coalesce(max(coalesce(newest_ms, ?4), ?4), newest_ms) WHERE cid = ?1",
    [Q_SAVEPOINT] = "SAVEPOINT " IB__SQ_SAVEPOINT,
    [Q_SAVEPOINT_RELEASE] = "RELEASE " IB__SQ_SAVEPOINT,
    [Q_SAVEPOINT_UNDO] = "ROLLBACK TO " IB__SQ_SAVEPOINT,
    [Q_OUTBOX_PUT] = "INSERT INTO processed_outbox (subject, msg_id, data, staged_ms) "
                     "VALUES (?1, ?2, ?3, ?4)",
    [Q_OUTBOX_PEEK] = "SELECT seq, subject, msg_id, data, staged_ms FROM processed_outbox "
                      "ORDER BY seq LIMIT ?1",
    [Q_OUTBOX_DEL] = "DELETE FROM processed_outbox WHERE seq = ?1",
    /* The outbox is drained as it fills, so counting its rows stays cheap. */
    [Q_OUTBOX_COUNT] = "SELECT count(*) FROM processed_outbox",
};

static ib_status fail(sq_recorder *s, ib_error *err)
{
    return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name, sqlite3_errmsg(s->db));
}

/* Prepares statements [range[0], range[1]) not prepared yet. A body:
 * preparing reads the schema, which another process may have locked. */
static int body_prepare(sq_recorder *s, void *vctx, ib_error *local)
{
    const int *range = vctx;
    (void)local;
    for (int i = range[0]; i < range[1]; i++) {
        if (s->q[i] != NULL)
            continue;
        int rc =
            sqlite3_prepare_v3(s->db, query_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->q[i], NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

static ib_status create_file(const sq_recorder *s, bool *created, unsigned mode, ib_error *err)
{
    *created = false;
    int fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, (mode_t)mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return IB_OK; /* an existing file keeps its mode */
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot create the file: %s", s->name,
                            strerror(errno));
    }
    /* The umask may have taken bits away; the configured mode is what we
     * promised. The descriptor is never one SQLite uses: O_EXCL proves no
     * connection of this process had the file open, so no lock is lost. */
    if (fchmod(fd, (mode_t)mode) != 0) {
        int e = errno;
        close(fd);
        return ib_error_set(err, IB_ERR_IO, "recorder %s: cannot set mode %04o: %s", s->name, mode,
                            strerror(e));
    }
    close(fd);
    *created = true;
    return IB_OK;
}

/* Checks and creates the file, then opens the connection. `*fresh`: the
 * file is new (or in memory), so its page size may still be chosen. */
static ib_status open_connection(sq_recorder *s, bool *fresh, const ib__recorder_config *cfg,
                                 ib_error *err)
{
    *fresh = s->in_memory;
    if (!s->in_memory) {
        ib_status st = ib__sqlite_check_file(s->path, s->name, cfg->file_mode, cfg->allow_insecure,
                                             geteuid(), err);
        if (st == IB_OK)
            st = create_file(s, fresh, cfg->file_mode, err);
        if (st != IB_OK)
            return st;
    }
    /* No SQLITE_OPEN_CREATE for a file: it exists now, and if it vanished
     * in between, SQLite must not recreate it with default permissions.
     * NOFOLLOW: a link put in place since the check is refused. */
    int flags =
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOFOLLOW;
    if (s->in_memory)
        flags |= SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK)
        return ib_error_set(err, IB_ERR_RECORDER, "recorder %s: %s", s->name,
                            s->db != NULL ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    sqlite3_extended_result_codes(s->db, 1);
    if (sqlite3_busy_handler(s->db, ib__sq_busy_wait, s) != SQLITE_OK)
        return fail(s, err);
    return IB_OK;
}

/* Connection settings: page size (only a new file takes it), cache, WAL,
 * synchronous, and the checkpoints this recorder makes itself. */
static int body_settings(sq_recorder *s, void *vctx, ib_error *local)
{
    const int *sync_fresh = vctx;
    char mode[16] = "";
    int rc = sync_fresh[1]
                 ? ib__sqlite_exec_fmt(s->db, "PRAGMA page_size = %lld", NEW_FILE_PAGE_SIZE)
                 : SQLITE_OK;
    if (rc == SQLITE_OK)
        rc = ib__sqlite_exec_fmt(s->db, "PRAGMA cache_size = -%lld", CACHE_KIB);
    if (rc == SQLITE_OK)
        rc = ib__sqlite_read_value(s->db, "PRAGMA journal_mode = WAL", NULL, mode, sizeof(mode));
    if (rc != SQLITE_OK)
        return rc;
    /* An in-memory database has no WAL; it reports "memory". */
    if (strcmp(mode, s->in_memory ? "memory" : "wal") != 0) {
        ib_error_set(local, IB_ERR_RECORDER, "recorder %s: cannot use WAL (journal_mode is '%s')",
                     s->name, mode);
        return IB__SQLITE_REFUSED;
    }
    rc = ib__sqlite_exec_fmt(s->db, "PRAGMA synchronous = %lld", sync_fresh[0]);
    if (rc == SQLITE_OK)
        rc = ib__sqlite_exec_fmt(s->db, "PRAGMA journal_size_limit = %lld", WAL_KEEP_BYTES);
    if (rc == SQLITE_OK)
        rc = sqlite3_wal_autocheckpoint(s->db, 0);
    if (rc == SQLITE_OK)
        sqlite3_wal_hook(s->db, ib__sq_on_wal, s);
    return rc;
}

static int body_schema(sq_recorder *s, void *vctx, ib_error *local)
{
    long long page = 0;
    (void)vctx;
    int rc = ib__sqlite_schema_ensure(s->db, s->name, s->base.now_ms(), local);
    if (rc == SQLITE_OK)
        rc = ib__sqlite_read_value(s->db, "PRAGMA page_size", &page, NULL, 0);
    s->wal.page_size = page > 0 ? (int)page : 4096;
    return rc;
}

/* Settings, schema and statements, each step needing the ones before. */
static ib_status configure(sq_recorder *s, bool fresh, const ib__recorder_config *cfg,
                           ib_error *err)
{
    int sync_fresh[2] = {(int)cfg->synchronous, fresh};
    int first[2] = {0, Q_FIRST_SCHEMA};
    int rest[2] = {Q_FIRST_SCHEMA, Q_COUNT};
    s->claims_unsynced = cfg->synchronous >= IB__SQLITE_SYNC_FULL && !s->in_memory;
    s->sync_configured = s->sync_now = (int)cfg->synchronous; /* body_settings sets it */
    ib__sq_call_begin(s);
    ib_status st = ib__sq_run(s, TX_NONE, body_prepare, first, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_NONE, body_settings, sync_fresh, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_MARK, body_schema, NULL, err);
    if (st == IB_OK)
        st = ib__sq_run(s, TX_NONE, body_prepare, rest, err);
    s->check_schema = true;
    return st;
}

/* Allocates the recorder and its mutex; nothing is opened yet. */
static ib_status sq_new(sq_recorder **out, const ib_recorder_ops *ops,
                        const ib__recorder_config *cfg, ib_error *err)
{
    sq_recorder *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return ib_error_set(err, IB_ERR_NOMEM, "recorder sqlite:%.*s: out of memory",
                            IB__SQ_NAME_SHOWN, cfg->path);
    s->base.ops = ops;
    s->base.now_ms = cfg->now_ms;
    s->base.lease_now_ms = cfg->lease_now_ms;
    snprintf(s->name, sizeof(s->name), "sqlite:%.*s%s", IB__SQ_NAME_SHOWN, cfg->path,
             strlen(cfg->path) > IB__SQ_NAME_SHOWN ? "..." : "");
    memcpy(s->path, cfg->path, sizeof(s->path));
    s->in_memory = strcmp(cfg->path, ":memory:") == 0;
    s->prune_rows = DEFAULT_PRUNE_ROWS;
    s->busy_timeout_ms = cfg->busy_timeout_ms;
    s->jitter =
        ((uint64_t)getpid() << 32) ^ (uint64_t)ib_clock_monotonic_ns() ^ (uint64_t)(uintptr_t)s;
    s->jitter |= 1;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return ib_error_set(err, IB_ERR_NOMEM, "recorder sqlite:%.*s: cannot create a mutex",
                            IB__SQ_NAME_SHOWN, cfg->path);
    }
    *out = s;
    return IB_OK;
}

/* The one teardown: what was opened is closed, in reverse order. */
void ib__sq_free(sq_recorder *s)
{
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(s->q[i]);
    sqlite3_close_v2(s->db); /* a no-op while no connection was opened */
    ib__sq_turn_close(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

ib_status ib__sq_open(sq_recorder **out, const ib_recorder_ops *ops, const ib__recorder_config *cfg,
                      ib_error *err)
{
    sq_recorder *s = NULL;
    bool fresh = false;
    ib_status st = sq_new(&s, ops, cfg, err);
    if (st != IB_OK)
        return st;
    st = open_connection(s, &fresh, cfg, err);
    if (st == IB_OK)
        ib__sq_turn_open(s, cfg->file_mode);
    if (st == IB_OK)
        st = configure(s, fresh, cfg, err);
    if (st != IB_OK) {
        ib__sq_free(s);
        return st;
    }
    *out = s;
    return IB_OK;
}
