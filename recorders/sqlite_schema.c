/* Schema of the sqlite: recorder, versioned with PRAGMA user_version.
 *
 * processed_log is the spec's table, readable by other tools. Since
 * version 4 it is a view: markers live in processed_markers (the B-tree)
 * and processed_journal (appended, merged into the B-tree in batches;
 * sqlite_journal.c says why). processed_markers is WITHOUT ROWID: with
 * random 32-character keys a rowid table plus its primary-key index would
 * write two b-trees per marker. There is no index on ts, for the same
 * reason: prune walks the primary key in bounded ranges instead
 * (sqlite.c).
 *
 * Claims in progress live apart in processed_claims, so processed_log only
 * ever holds done markers and its meaning stays the seed's. A claim row
 * stays after its release (owner '') so that it keeps counting handler
 * attempts for the poison rule; marking the id deletes it.
 *
 * processed_log.fp holds the payload fingerprint of the event a marker
 * stands for (ib_fingerprint, its 64 bits stored as a signed INTEGER);
 * NULL means none: markers written before version 3, or without one.
 *
 * processed_outbox holds messages that transactional work staged in the
 * same transaction as its marker, until the host has published them.
 * AUTOINCREMENT keeps a seq from being reused after the newest row is
 * deleted, so a seq names one message for good.
 *
 * Versions: 0 is an empty file or the seed's layout; 1 had claims without
 * attempts and with wall-clock expiries; 2 counts attempts and keeps lease
 * ends on the boot clock; 3 adds processed_log.fp and processed_outbox;
 * 4 renames the table processed_markers and adds the journal, the merge
 * state and the view; 5 counts markers (processed_counts, and each journal
 * row's marked and ts), registers the processes reading the journal
 * (processed_readers) and lets the seed's INSERT OR IGNORE into
 * processed_log write the journal (a trigger). Every older version is migrated in place, within the
 * opening transaction; version 2 gains its column without a rewrite of the table (ALTER TABLE ADD
 * COLUMN). */
#include "sqlite_internal.h"

#include <stdarg.h>
#include <stdio.h>

#define LOG_COLUMNS                                                                                \
    " (\n"                                                                                         \
    "    consumer TEXT NOT NULL,\n"                                                                \
    "    event_id TEXT NOT NULL,\n"                                                                \
    "    ts INTEGER NOT NULL, -- unix milliseconds when marked\n"                                  \
    "    fp INTEGER, -- payload fingerprint; NULL = none\n"                                        \
    "    PRIMARY KEY (consumer, event_id)\n"                                                       \
    ") WITHOUT ROWID"

#define CREATE_LOG "CREATE TABLE processed_log" LOG_COLUMNS

/* Version 4: every change to a key is appended here as its whole new
 * state; a transaction writes one row per consumer, its states a JSON
 * array of [event_id, done, ts, fp, owner, expires_ms, attempts]. A merge
 * moves the newest states into processed_markers and processed_claims
 * (sqlite_journal.c). */
#define CREATE_JOURNAL                                                                             \
    "CREATE TABLE processed_journal (\n"                                                           \
    "    seq INTEGER PRIMARY KEY, -- rising for good: set by the writer\n"                         \
    "    consumer TEXT NOT NULL,\n"                                                                \
    "    states TEXT NOT NULL -- JSON: [[event_id, done, ts, fp, owner, expires_ms, "              \
    "attempts], ...]\n"                                                                            \
    ")"

/* Version 5: markers per consumer in processed_markers, kept by every
 * merge and prune, so counting them never scans the B-tree. oldest_ms is a
 * lower bound once markers were deleted (prune raises it to its cutoff). */
#define CREATE_COUNTS                                                                              \
    "CREATE TABLE processed_counts (\n"                                                            \
    "    consumer TEXT PRIMARY KEY,\n"                                                             \
    "    markers INTEGER NOT NULL, -- rows of this consumer in processed_markers\n"                \
    "    oldest_ms INTEGER NOT NULL, -- no marker is older (a bound after deletes)\n"              \
    "    newest_ms INTEGER NOT NULL\n"                                                             \
    ") WITHOUT ROWID"

/* Version 5: the processes that read the journal, and how far. A merge
 * deletes only rows every live reader has read, so a process catches up
 * on what it missed instead of scanning the B-tree (sqlite_readers.c). */
#define CREATE_READERS                                                                             \
    "CREATE TABLE processed_readers (\n"                                                           \
    "    reader TEXT PRIMARY KEY, -- random token of one open recorder\n"                          \
    "    seen_row INTEGER NOT NULL, -- it has read the journal up to this seq\n"                   \
    "    beat_ms INTEGER NOT NULL, -- lease clock (ms since boot) when it said so\n"               \
    "    schema INTEGER NOT NULL, -- the schema version it speaks\n"                               \
    "    pid INTEGER NOT NULL, -- for people: pids repeat across containers\n"                     \
    "    slot INTEGER NOT NULL -- byte of <file>-lock it holds a lock on while open\n"             \
    ") WITHOUT ROWID"

/* Version 5: the seed's INSERT OR IGNORE INTO processed_log (consumer,
 * event_id, ts) appends a journal row, as a mark of ours would, so every
 * running process sees it at its next transaction. The id is normalised
 * the way the host does it; ts in seconds (the seed's time.time()) becomes
 * ms; an id that is no uuid, or a consumer the recorder would refuse, is
 * an error rather than a marker nobody can match. */
#define CREATE_LOG_TRIGGER                                                                         \
    "CREATE TRIGGER processed_log_insert INSTEAD OF INSERT ON processed_log\n"                     \
    "BEGIN\n"                                                                                      \
    "  SELECT RAISE(ABORT, 'processed_log: consumer must be 1 to 255 bytes of text and "           \
    "event_id a uuid (32 hex digits, dashes allowed)')\n"                                          \
    "   WHERE typeof(NEW.consumer) <> 'text' OR length(CAST(NEW.consumer AS BLOB)) NOT BETWEEN 1 " \
    "AND 255\n"                                                                                    \
    "      OR typeof(NEW.event_id) <> 'text'\n"                                                    \
    "      OR length(replace(NEW.event_id, '-', '')) <> 32\n"                                      \
    "      OR lower(replace(NEW.event_id, '-', '')) GLOB '*[^0-9a-f]*';\n"                         \
    "  INSERT INTO processed_journal (seq, consumer, states, marked, ts)\n"                        \
    "  SELECT max(coalesce((SELECT max(seq) FROM processed_journal), 0),\n"                        \
    "             (SELECT merged_seq FROM processed_merge)) + 1,\n"                                \
    "         NEW.consumer, json_array(json_array(k.id, 1, k.ts, 0, '', 0, 0)), 1, k.ts\n"         \
    "  FROM (SELECT lower(replace(NEW.event_id, '-', '')) AS id,\n"                                \
    "         CASE WHEN typeof(NEW.ts) IN ('integer', 'real') AND abs(NEW.ts) < 1e11\n"            \
    "              THEN CAST(round(NEW.ts * 1000) AS INTEGER)\n"                                   \
    "              WHEN typeof(NEW.ts) IN ('integer', 'real') THEN CAST(NEW.ts AS INTEGER)\n"      \
    "              ELSE CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) END AS ts) k\n" \
    "  WHERE NOT EXISTS (SELECT 1 FROM processed_log l\n"                                          \
    "                    WHERE l.consumer = NEW.consumer AND l.event_id = k.id);\n"                \
    "END"

/* Journal rows at or below merged_seq are in the B-trees; those at or
 * below trimmed_seq (the merge before) are deleted. */
#define CREATE_MERGE                                                                               \
    "CREATE TABLE processed_merge (merged_seq INTEGER NOT NULL, trimmed_seq INTEGER NOT NULL)"

/* The journal's unmerged states one per row, pos ordering them (row seq,
 * index). */
#define CREATE_STATES_VIEW                                                                         \
    "CREATE VIEW processed_states (consumer, event_id, done, ts, fp, owner, expires_ms, "          \
    "attempts, pos) AS\n"                                                                          \
    "SELECT j.consumer, json_extract(e.value, '$[0]'), json_extract(e.value, '$[1]'),\n"           \
    "       json_extract(e.value, '$[2]'), json_extract(e.value, '$[3]'),\n"                       \
    "       json_extract(e.value, '$[4]'), json_extract(e.value, '$[5]'),\n"                       \
    "       json_extract(e.value, '$[6]'), j.seq * 65536 + e.key\n"                                \
    "FROM processed_journal j, json_each(j.states) e\n"                                            \
    "WHERE j.seq > (SELECT merged_seq FROM processed_merge)"

/* The markers as the seed's table showed them: the B-tree's, unless the
 * journal holds a newer state of the key, and the journal's newest states
 * that are marked (SQLite takes the bare columns of a max() aggregate from
 * the row holding the max). */
#define CREATE_LOG_VIEW                                                                            \
    "CREATE VIEW processed_log (consumer, event_id, ts, fp) AS\n"                                  \
    "SELECT consumer, event_id, ts, fp FROM processed_markers\n"                                   \
    " WHERE (consumer, event_id) NOT IN (SELECT consumer, event_id FROM processed_states)\n"       \
    "UNION ALL\n"                                                                                  \
    "SELECT consumer, event_id, ts, nullif(fp, 0) FROM\n"                                          \
    " (SELECT consumer, event_id, done, ts, fp, max(pos) FROM processed_states\n"                  \
    "  GROUP BY consumer, event_id)\n"                                                             \
    " WHERE done = 1"

#define CREATE_CLAIMS                                                                              \
    "CREATE TABLE processed_claims (\n"                                                            \
    "    consumer TEXT NOT NULL,\n"                                                                \
    "    event_id TEXT NOT NULL,\n"                                                                \
    "    owner TEXT NOT NULL,\n"                                                                   \
    "    expires_ms INTEGER NOT NULL, -- lease clock (ms since boot) when the lease ends\n"        \
    "    attempts INTEGER NOT NULL DEFAULT 0, -- handler attempts, kept across releases\n"         \
    "    PRIMARY KEY (consumer, event_id)\n"                                                       \
    ") WITHOUT ROWID"

#define CREATE_OUTBOX                                                                              \
    "CREATE TABLE processed_outbox (\n"                                                            \
    "    seq INTEGER PRIMARY KEY AUTOINCREMENT,\n"                                                 \
    "    subject TEXT NOT NULL,\n"                                                                 \
    "    msg_id TEXT NOT NULL, -- sent as Nats-Msg-Id\n"                                           \
    "    data BLOB NOT NULL,\n"                                                                    \
    "    staged_ms INTEGER NOT NULL -- unix milliseconds when staged\n"                            \
    ")"

/* The seed's markers, rewritten to the current layout:
 *  - ids are normalised the way the host normalises them (lower case, no
 *    dashes), so a marker written in another form still matches;
 *  - ts becomes unix ms: numbers below 1e11 are seconds (the seed stored
 *    time.time(), a REAL), larger ones already ms; ISO dates are read as
 *    UTC; anything else gets the migration time, so an unknown marker is
 *    kept for a full retention window rather than pruned first;
 *  - rows with a NULL key (a rowid table allows them) or an empty consumer
 *    cannot match any event and are dropped. */
#define COPY_SEED                                                                                  \
    "INSERT OR IGNORE INTO processed_log_v1 (consumer, event_id, ts)\n"                            \
    "SELECT consumer, event_id,\n"                                                                 \
    "       CASE WHEN n IS NULL THEN %lld\n"                                                       \
    "            WHEN abs(n) < 1e11 THEN CAST(round(n * 1000) AS INTEGER)\n"                       \
    "            ELSE CAST(n AS INTEGER) END\n"                                                    \
    "FROM (SELECT CAST(consumer AS TEXT) AS consumer,\n"                                           \
    "             lower(replace(CAST(event_id AS TEXT), '-', '')) AS event_id,\n"                  \
    "             CASE WHEN typeof(ts) IN ('integer', 'real') THEN ts\n"                           \
    "                  WHEN typeof(ts) = 'text'\n"                                                 \
    "                       AND ts GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'\n"           \
    "                  THEN (julianday(ts) - 2440587.5) * 86400.0\n"                               \
    "                  WHEN typeof(ts) = 'text' AND trim(ts) GLOB '[0-9]*'\n"                      \
    "                  THEN CAST(trim(ts) AS REAL)\n"                                              \
    "                  ELSE NULL END AS n\n"                                                       \
    "      FROM processed_log\n"                                                                   \
    "      WHERE consumer IS NOT NULL AND event_id IS NOT NULL\n"                                  \
    "        AND CAST(consumer AS TEXT) <> '')"

static int refuse(ib_error *err, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills `err` with IB_ERR_SCHEMA, "recorder <name>: <reason>". */
static int refuse(ib_error *err, const char *name, const char *fmt, ...)
{
    char reason[IB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    ib_error_set(err, IB_ERR_SCHEMA, "recorder %s: %s", name, reason);
    return IB__SQLITE_REFUSED;
}

int ib__sqlite_read_value(sqlite3 *db, const char *sql, long long *num, char *text,
                          size_t text_size)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (num != NULL)
            *num = sqlite3_column_int64(st, 0);
        if (text != NULL) {
            const unsigned char *t = sqlite3_column_text(st, 0);
            snprintf(text, text_size, "%s", t != NULL ? (const char *)t : "");
        }
        rc = SQLITE_OK;
    }
    int frc = sqlite3_finalize(st);
    return rc != SQLITE_OK ? rc : frc;
}

static int read_int(sqlite3 *db, const char *sql, long long *out)
{
    return ib__sqlite_read_value(db, sql, out, NULL, 0);
}

static int exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int migrate_seed(sqlite3 *db, const char *name, int64_t now_ms, ib_error *err)
{
    /* Only a table with the seed's three columns can be carried over. */
    sqlite3_stmt *probe = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT consumer, event_id, ts FROM processed_log LIMIT 0", -1,
                                &probe, NULL);
    sqlite3_finalize(probe);
    if (rc == SQLITE_ERROR)
        return refuse(err, name,
                      "processed_log lacks a consumer, event_id or ts column: "
                      "not a layout this build can migrate");
    if (rc != SQLITE_OK)
        return rc;

    rc = exec(db, "DROP TABLE IF EXISTS processed_log_v1");
    if (rc == SQLITE_OK)
        rc = exec(db, "CREATE TABLE processed_log_v1" LOG_COLUMNS);
    if (rc != SQLITE_OK)
        return rc;
    char *copy = sqlite3_mprintf(COPY_SEED, (long long)now_ms);
    if (copy == NULL)
        return SQLITE_NOMEM;
    rc = exec(db, copy);
    sqlite3_free(copy);
    if (rc == SQLITE_OK)
        rc = exec(db, "DROP TABLE processed_log");
    if (rc == SQLITE_OK)
        rc = exec(db, "ALTER TABLE processed_log_v1 RENAME TO processed_log");
    return rc;
}

/* Version 1 to 2: expiries of version 1 are wall-clock times, far in the
 * future on the boot clock, so they are ended rather than honoured. */
static int from_v1(sqlite3 *db)
{
    int rc = exec(db, "ALTER TABLE processed_claims ADD COLUMN attempts INTEGER NOT NULL "
                      "DEFAULT 0");
    if (rc == SQLITE_OK)
        rc = exec(db, "UPDATE processed_claims SET expires_ms = 0");
    return rc;
}

/* Version 2 to 3. ADD COLUMN only edits the table's definition: old rows
 * read the new column as NULL, which means "no fingerprint". */
static int from_v2(sqlite3 *db)
{
    int rc = exec(db, "ALTER TABLE processed_log ADD COLUMN fp INTEGER");
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_OUTBOX);
    return rc;
}

/* Version 3 to 4. RENAME only edits the schema: the markers stay where
 * they are, and no journal row exists yet. */
static int from_v3(sqlite3 *db)
{
    int rc = exec(db, "ALTER TABLE processed_log RENAME TO processed_markers");
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_JOURNAL);
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_MERGE);
    if (rc == SQLITE_OK)
        rc = exec(db, "INSERT INTO processed_merge VALUES (0, 0)");
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_STATES_VIEW);
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_LOG_VIEW);
    return rc;
}

/* Version 4 to 5. The counts start from the B-tree, the one scan of the
 * file a migration makes; the journal rows written before have no counts
 * of their own, so the recorder merges them right after the migration
 * (ib__sqlite_schema_ensure's `*migrated`). */
static int from_v4(sqlite3 *db)
{
    int rc = exec(db, "ALTER TABLE processed_journal ADD COLUMN marked INTEGER NOT NULL DEFAULT 0");
    if (rc == SQLITE_OK)
        rc = exec(db, "ALTER TABLE processed_journal ADD COLUMN ts INTEGER NOT NULL DEFAULT 0");
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_COUNTS);
    if (rc == SQLITE_OK)
        rc = exec(db, "INSERT INTO processed_counts (consumer, markers, oldest_ms, newest_ms) "
                      "SELECT consumer, count(*), min(ts), max(ts) FROM processed_markers "
                      "GROUP BY consumer");
    if (rc == SQLITE_OK)
        rc = exec(db, "ALTER TABLE processed_merge ADD COLUMN counted_seq INTEGER NOT NULL "
                      "DEFAULT 0");
    if (rc == SQLITE_OK)
        rc = exec(db, "UPDATE processed_merge SET counted_seq = merged_seq");
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_READERS);
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_LOG_TRIGGER);
    return rc;
}

static int set_version(sqlite3 *db)
{
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", IB__SQLITE_SCHEMA_VERSION);
    return exec(db, sql);
}

/* Counts how many of the tables in `names` (an SQL list) exist. */
static int count_tables(sqlite3 *db, const char *names, long long *n)
{
    char sql[400];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (%s)", names);
    return read_int(db, sql, n);
}

/* Version 0: an empty file, or the seed's layout. */
static int from_v0(sqlite3 *db, const char *name, long long version, long long tables,
                   int64_t now_ms, ib_error *err)
{
    int rc;
    if (tables > 0) {
        long long ours = 0;
        rc = count_tables(db,
                          "'processed_claims', 'processed_outbox', 'processed_markers', "
                          "'processed_journal', 'processed_merge'",
                          &ours);
        if (rc != SQLITE_OK)
            return rc;
        if (ours)
            return refuse(err, name,
                          "schema version %lld with a table of a later version "
                          "(processed_claims, ...) this build did not create",
                          version);
        rc = migrate_seed(db, name, now_ms, err);
    } else {
        rc = exec(db, CREATE_LOG);
    }
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_CLAIMS);
    if (rc == SQLITE_OK)
        rc = exec(db, CREATE_OUTBOX);
    return rc;
}

/* A file at the current version must have all of its tables and the view. */
static int check_current(sqlite3 *db, const char *name, long long version, ib_error *err)
{
    long long tables = 0, views = 0;
    long long triggers = 0;
    int rc = count_tables(db,
                          "'processed_markers', 'processed_claims', 'processed_outbox', "
                          "'processed_journal', 'processed_merge', 'processed_counts', "
                          "'processed_readers'",
                          &tables);
    if (rc == SQLITE_OK)
        rc = read_int(db,
                      "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND "
                      "name IN ('processed_log', 'processed_states')",
                      &views);
    if (rc == SQLITE_OK)
        rc = read_int(db,
                      "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND "
                      "name = 'processed_log_insert'",
                      &triggers);
    if (rc != SQLITE_OK)
        return rc;
    if (tables != 7 || views != 2 || triggers != 1)
        return refuse(err, name,
                      "schema version %lld but %lld of its 7 tables, %lld of its 2 views and "
                      "%lld of its 1 trigger exist",
                      version, tables, views, triggers);
    return SQLITE_OK;
}

int ib__sqlite_schema_ensure(sqlite3 *db, const char *name, int64_t now_ms, bool *migrated,
                             ib_error *err)
{
    long long version = 0, tables = 0, outbox = 0;
    *migrated = false;
    int rc = read_int(db, "PRAGMA user_version", &version);
    if (rc != SQLITE_OK)
        return rc;
    if (version > IB__SQLITE_SCHEMA_VERSION || version < 0)
        return refuse(err, name,
                      "schema version %lld is newer than this build understands (%lld); "
                      "upgrade infinity-bus or use another file",
                      version, (long long)IB__SQLITE_SCHEMA_VERSION);
    rc = count_tables(db, "'processed_log', 'processed_claims'", &tables);
    if (rc == SQLITE_OK)
        rc = count_tables(db, "'processed_outbox'", &outbox);
    if (rc != SQLITE_OK)
        return rc;
    if (version == IB__SQLITE_SCHEMA_VERSION)
        return check_current(db, name, version, err);
    *migrated = true;
    if (version == 4) {
        rc = from_v4(db);
        return rc == SQLITE_OK ? set_version(db) : rc;
    }
    if (version == 3) {
        if (tables != 2 || outbox != 1)
            return refuse(err, name,
                          "schema version %lld but %lld of the tables processed_log, "
                          "processed_claims and processed_outbox exist",
                          version, tables + outbox);
        rc = SQLITE_OK;
    } else if (version == 2 || (version == 1 && tables == 2)) {
        if (tables != 2 || outbox != 0)
            return refuse(err, name,
                          "schema version %lld but %lld of the tables processed_log and "
                          "processed_claims exist%s",
                          version, tables, outbox != 0 ? ", and a processed_outbox" : "");
        rc = version == 1 ? from_v1(db) : SQLITE_OK;
        if (rc == SQLITE_OK)
            rc = from_v2(db);
    } else {
        rc = from_v0(db, name, version, tables, now_ms, err);
    }
    if (rc == SQLITE_OK)
        rc = from_v3(db);
    if (rc == SQLITE_OK)
        rc = from_v4(db);
    if (rc == SQLITE_OK)
        rc = set_version(db);
    return rc;
}
